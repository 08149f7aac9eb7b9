#!/usr/bin/env python3
"""Write services/cmd_meta.c: the interface facts Redis 7.0.15's command
reference (src/commands/*.json of the redis/redis repository at that tag)
gives of each command in the groups pkvs answers for (GROUPS below), for
COMMAND INFO, DOCS, GETKEYS and LIST FILTERBY ACLCAT:

- ACL categories (the reference's and those its flags imply), tips, key
  specifications (begin_search and find_keys numbers, key flags);
- the COMMAND DOCS map but its summary: since (a version), group, doc
  flags, deprecated_since (a version), replaced_by (the replacing
  commands' names only) and the arguments (name, type, key_spec_index,
  token, since, deprecated_since, flags, nested arguments);
- arity and the noscript flag, for what a script calling a command pkvs
  lacks is told (services/cmd_script.c).

No prose is carried: summaries, complexity, history and key-spec notes
are left out. COMMAND DOCS takes each command's summary from its row
(struct kv_cmd.summary, in pkvs's words) and gives no complexity or
history. Dispatch (arity, flags, handlers) stays in the cmd_*.c rows.

    python3 scripts/gen_cmd_meta.py /path/to/redis-git-dir > services/cmd_meta.c

A family of commands is added by putting its group (the reference's
"group" name) in GROUPS and regenerating.
"""
import json
import re
import subprocess
import sys

TAG = "7.0.15"
GROUPS = {"string", "bitmap", "hyperloglog", "generic", "hash", "transactions", "connection", "server", "cluster",
          "list", "set", "sorted_set", "pubsub", "scripting", "geo", "stream"}
ACL = ["keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
       "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
       "dangerous", "connection", "transaction", "scripting"]
KEYFLAGS = ["RO", "RW", "OW", "RM", "ACCESS", "UPDATE", "INSERT", "DELETE", "NOT_KEY",
            "INCOMPLETE", "VARIABLE_FLAGS"]
ARGFLAGS = [("optional", "optional"), ("multiple", "multiple"), ("multiple_token", "multiple_token")]


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo] + list(args), check=True,
                          capture_output=True).stdout


def bulk(s):
    b = s.encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)


def resp_set(items):
    return b"~%d\r\n" % len(items) + b"".join(items)


def args_blob(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        pairs = [bulk("name") + bulk(a["name"].lower()), bulk("type") + bulk(a["type"])]
        if "key_spec_index" in a:
            pairs.append(bulk("key_spec_index") + b":%d\r\n" % a["key_spec_index"])
        if "token" in a:
            # MIGRATE's empty_string token is `""` in the reference, which
            # Redis's generated C reads as two empty literals: an empty token.
            tok = "" if a["token"] == '""' else a["token"].upper()
            pairs.append(bulk("token") + bulk(tok))
        if "since" in a:
            pairs.append(bulk("since") + bulk(a["since"]))
        if "deprecated_since" in a:
            pairs.append(bulk("deprecated_since") + bulk(a["deprecated_since"]))
        fl = [b"+%s\r\n" % w.encode() for k, w in ARGFLAGS if a.get(k)]
        if fl:
            pairs.append(bulk("flags") + resp_set(fl))
        if a["type"] in ("oneof", "block"):
            pairs.append(bulk("arguments") + args_blob(a.get("arguments", [])))
        out += b"%%%d\r\n" % len(pairs) + b"".join(pairs)
    return out


def replaced_by(text):
    """The names of the commands text names as replacements (in
    backquotes, before any " with ..." that names their arguments)."""
    names = re.findall(r"`([^`]+)`", text.split(" with ")[0])
    if not names:
        sys.exit("replaced_by names no command: %r" % text)
    return ", ".join("`%s`" % n for n in names)


def docs_blob(d):
    """The DOCS map's pairs but "summary" (the row's) and "subcommands"
    (both added at run time)."""
    pairs = []
    if "since" in d:
        pairs.append(bulk("since") + bulk(d["since"]))
    pairs.append(bulk("group") + bulk(d["group"].replace("_", "-")))
    docfl = [b"+%s\r\n" % w.encode() for w in ("deprecated", "syscmd")
             if w.upper() in d.get("doc_flags", [])]
    if docfl:
        pairs.append(bulk("doc_flags") + resp_set(docfl))
    if "deprecated_since" in d:
        pairs.append(bulk("deprecated_since") + bulk(d["deprecated_since"]))
    if "replaced_by" in d:
        pairs.append(bulk("replaced_by") + bulk(replaced_by(d["replaced_by"])))
    if d.get("arguments"):
        pairs.append(bulk("arguments") + args_blob(d["arguments"]))
    return len(pairs), b"".join(pairs)


def c_str(b):
    out = '"'
    for i, ch in enumerate(b):
        if ch == 0x22 or ch == 0x5c:
            out += "\\" + chr(ch)
        elif ch == 0x0d:
            out += "\\r"
        elif ch == 0x0a:
            out += "\\n\"\n\t\""
        elif 0x20 <= ch < 0x7f:
            out += chr(ch)
        else:
            out += "\\%03o" % ch
    return out + '"'


def acl_mask(d):
    cats = {c.lower() for c in d.get("acl_categories", [])}
    fl = set(d.get("command_flags", []))
    if "WRITE" in fl:
        cats.add("write")
    if "READONLY" in fl and "scripting" not in cats:
        cats.add("read")
    if "ADMIN" in fl:
        cats |= {"admin", "dangerous"}
    if "PUBSUB" in fl:
        cats.add("pubsub")
    if "FAST" in fl:
        cats.add("fast")
    if "BLOCKING" in fl:
        cats.add("blocking")
    if "fast" not in cats:
        cats.add("slow")
    return sum(1 << ACL.index(c) for c in cats)


def spec_code(s):
    fl = " | ".join("KV_KEY_" + f for f in s["flags"]) or "0"
    bs = s["begin_search"]
    if "index" in bs:
        b = "KV_BS_INDEX, %d, NULL" % bs["index"]["pos"]
    elif "keyword" in bs:
        b = 'KV_BS_KEYWORD, %d, "%s"' % (bs["keyword"]["startfrom"], bs["keyword"]["keyword"])
    else:
        b = "KV_BS_UNKNOWN, 0, NULL"
    fk = s["find_keys"]
    if "range" in fk:
        r = fk["range"]
        f = "KV_FK_RANGE, %d, %d, %d" % (r["lastkey"], r["step"], r["limit"])
    elif "keynum" in fk:
        r = fk["keynum"]
        f = "KV_FK_KEYNUM, %d, %d, %d" % (r["keynumidx"], r["firstkey"], r["step"])
    else:
        f = "KV_FK_UNKNOWN, 0, 0, 0"
    return "{ %s, %s, %s }" % (fl, b, f)


def movable(d):
    specs = d.get("key_specs", [])
    if not specs:
        return False
    if len(specs) == 1 and "index" in specs[0]["begin_search"] and "range" in specs[0]["find_keys"]:
        return "INCOMPLETE" in specs[0]["flags"]
    prev = 0
    found = False
    mov = False
    for s in specs:
        if "index" not in s["begin_search"] or "range" not in s["find_keys"]:
            mov = True
            continue
        pos = s["begin_search"]["index"]["pos"]
        if s["find_keys"]["range"]["step"] != 1 or (prev and prev != pos - 1):
            mov = True
            continue
        if "INCOMPLETE" in s["flags"]:
            mov = True
        found = True
        lk = s["find_keys"]["range"]["lastkey"]
        if lk >= 0:
            lk += pos
        prev = max(prev & 0xffffffff, lk & 0xffffffff)
        if prev >= 1 << 31:
            prev -= 1 << 32
    return mov or not found


def main():
    repo = sys.argv[1]
    names = git(repo, "ls-tree", "--name-only", TAG, "src/commands/").decode().split()
    cmds = {}
    for path in names:
        if not path.endswith(".json"):
            continue
        doc = json.loads(git(repo, "show", "%s:%s" % (TAG, path)))
        for name, d in doc.items():
            full = (d["container"] + "|" + name if "container" in d else name).lower()
            cmds[full] = d
    rows = []
    for full in sorted(cmds):
        d = cmds[full]
        top = full.split("|")[0]
        if cmds.get(top, d)["group"] not in GROUPS:
            continue
        rows.append((full, d))
    print("/*\n * cmd_meta.c - the interface facts Redis %s's command reference gives\n"
          " * of the commands pkvs may answer (COMMAND INFO, DOCS, GETKEYS, LIST\n"
          " * FILTERBY ACLCAT): ACL categories, key specifications, tips, the\n"
          " * DOCS map but its summary (since, group, doc flags, deprecation,\n"
          " * arguments), and arity and noscript (what a script that calls a\n"
          " * command pkvs lacks is told). No prose: summaries are the cmd_*.c\n"
          " * rows' own; complexity, history and key-spec notes are not kept.\n"
          " * Written by scripts/gen_cmd_meta.py; do not edit by hand.\n */\n"
          "#include \"pkvs_resp.h\"\n" % TAG)
    for full, d in rows:
        if d.get("key_specs"):
            print("static const struct kv_keyspec ks_%s[] = {" % full.replace("|", "_").replace("-", "_"))
            for s in d["key_specs"]:
                print("\t%s," % spec_code(s))
            print("};")
    print("\nconst struct kv_cmd_meta kv_cmd_metas[] = {")
    for full, d in rows:
        ident = full.replace("|", "_").replace("-", "_")
        n, blob = docs_blob(d)
        tips = "\\n".join(d.get("command_tips", []))
        nspecs = len(d.get("key_specs", []))
        print("\t{ \"%s\", 0x%x, %d, %s, %s, \"%s\", %d, %d,\n\t  %s,\n\t  %d, %s },"
              % (full, acl_mask(d), nspecs, "ks_" + ident if nspecs else "NULL",
                 "true" if movable(d) else "false", tips.lower(), n, len(blob), c_str(blob),
                 d["arity"], "true" if "NOSCRIPT" in d.get("command_flags", []) else "false"))
    print("};\nconst uint32_t kv_cmd_nmetas = %d;" % len(rows))


if __name__ == "__main__":
    main()
