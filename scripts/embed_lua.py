#!/usr/bin/env python3
"""Write a C header holding Lua sources as string constants, one per
NAME=PATH argument: `static const char NAME[]`, its length
sizeof(NAME) - 1. meson.build runs it at build time to compile
Debian's lua-messagepack and services/script_cmsgpack.lua into pkvs
(services/script_cmsgpack.c loads them into each Lua state).

    python3 scripts/embed_lua.py out.h NAME=PATH [NAME=PATH ...]
"""
import sys


def literal(data):
    lines = []
    for line in data.splitlines(keepends=True):
        out = []
        for ch in line:
            if ch in b'"\\?':       # '?': no trigraphs under -std=c11
                out.append("\\" + chr(ch))
            elif ch == 0x0a:
                out.append("\\n")
            elif ch == 0x09:
                out.append("\\t")
            elif 0x20 <= ch < 0x7f:
                out.append(chr(ch))
            else:
                out.append("\\%03o" % ch)
        lines.append('\t"' + "".join(out) + '"')
    return "\n".join(lines) if lines else '\t""'


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    parts = ["/* Written by scripts/embed_lua.py at build time: do not edit. */\n"]
    for arg in sys.argv[2:]:
        name, sep, path = arg.partition("=")
        if not sep or not name.isidentifier():
            sys.exit("embed_lua.py: want NAME=PATH, got %r" % arg)
        with open(path, "rb") as f:
            data = f.read()
        parts.append("/* %s */\nstatic const char %s[] =\n%s;\n" % (path, name, literal(data)))
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(parts))


if __name__ == "__main__":
    main()
