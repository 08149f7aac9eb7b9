"""`meson install` into a temporary DESTDIR, then use what it installed as a
user would: the layout (libpaste.so with its soname and version, libpaste.a,
paste.h and no internal header, paste.pc, the tools, man pages 1, 3 and 7
with a link per function and every function of paste.h named in a page's
NAME section, sample configs, the examples' sources, systemd
units), paste(7)'s complete program and the examples compiled with
`pkg-config --cflags --libs paste` only and run against the installed
shared library, a static link, the installed tools, and the units: their
syntax and keys, `systemd-analyze verify` where it exists, and their
command line run as systemd would run it (config file and environment).

The build is $PASTE_BUILD (see conftest). A sanitized build's library needs
the sanitizer runtime, so there programs built against it also get the
build's -fsanitize flags (and the static link is skipped).
"""
import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import BUILD, HttpConn, RespConn, connect, post_log
from paste_proc import LISTEN_RE, Server

# Every test here uses the install made into a DESTDIR.
pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parent.parent.parent


def meson_json(*what):
    cp = subprocess.run(["meson", "introspect", str(BUILD), *what],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


class Install:
    """One `meson install --destdir` of BUILD, and where things landed."""

    def __init__(self, dest):
        self.dest = Path(dest)
        opts = {o["name"]: o["value"] for o in meson_json("--buildoptions")}
        self.version = meson_json("--projectinfo")["version"]
        self.sanitize = opts.get("b_sanitize", "none")
        # the build's C compiler (a sanitized library wants its runtime)
        self.compiler = next(src["compiler"] for t in meson_json("--targets")
                             for src in t["target_sources"] if src.get("language") == "c")
        prefix = Path(opts["prefix"])
        self.prefix = prefix
        self.bindir = self.staged(prefix / opts["bindir"])
        self.libdir = self.staged(prefix / opts["libdir"])
        self.includedir = self.staged(prefix / opts["includedir"])
        self.mandir = self.staged(prefix / opts["mandir"])
        self.sysconfdir = self.staged(prefix / opts["sysconfdir"])
        self.docdir = self.staged(prefix / opts["datadir"] / "doc" / "paste")
        # source or build file -> installed path (symlinks by their name)
        self.installed = meson_json("--installed")
        cp = subprocess.run(["meson", "install", "-C", str(BUILD), "--no-rebuild", "--quiet",
                             "--destdir", str(self.dest)],
                            capture_output=True, text=True, timeout=300)
        assert cp.returncode == 0, f"meson install failed:\n{cp.stdout}\n{cp.stderr}"

    def staged(self, path):
        """An installed absolute path, inside DESTDIR."""
        return self.dest / Path(path).relative_to("/")

    def where(self, source_suffix):
        """The staged path of the installed file built from or copied from *source_suffix."""
        hits = [dst for src, dst in self.installed.items() if src.endswith(source_suffix)]
        assert len(hits) == 1, f"{source_suffix}: installed as {hits}"
        return self.staged(hits[0])

    def pkg_env(self):
        env = dict(os.environ)
        env["PKG_CONFIG_PATH"] = str(self.libdir / "pkgconfig")
        env["PKG_CONFIG_SYSROOT_DIR"] = str(self.dest)
        env["LD_LIBRARY_PATH"] = str(self.libdir)
        return env

    def pkg_config(self, *args):
        cp = subprocess.run(["pkg-config", *args, "paste"], capture_output=True, text=True,
                            env=self.pkg_env(), timeout=30)
        assert cp.returncode == 0, f"pkg-config {' '.join(args)} paste: {cp.stderr}"
        return cp.stdout.strip()

    def sanitize_flags(self):
        return [] if self.sanitize in ("", "none") else [f"-fsanitize={self.sanitize}"]

    def cc(self, source, out, static=False):
        """Compile source against the install: pkg-config's flags only
        (plus a sanitized build's -fsanitize)."""
        cflags = shlex.split(self.pkg_config("--cflags"))
        if static:   # libpaste.a and its private requirements (liburing, -pthread)
            libs = shlex.split(self.pkg_config("--static", "--libs"))
            libs = [a for x in libs for a in (["-Wl,-Bstatic", "-lpaste", "-Wl,-Bdynamic"]
                                              if x == "-lpaste" else [x])]
        else:
            libs = shlex.split(self.pkg_config("--libs"))
        argv = ([*self.compiler, "-std=c11", "-Wall", "-Wextra", "-Werror", *self.sanitize_flags(),
                 *cflags, str(source), "-o", str(out), *libs])
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert cp.returncode == 0, f"{' '.join(argv)}\n{cp.stderr}"
        return out


@pytest.fixture(scope="module")
def inst():
    dest = tempfile.mkdtemp(prefix="paste-destdir-", dir="/tmp")
    try:
        yield Install(dest)
    finally:
        shutil.rmtree(dest, ignore_errors=True)


@pytest.fixture
def work(tmp_path):
    """A directory for programs and a private /dev/shm directory for stores."""
    shm = Path(tempfile.mkdtemp(prefix="paste-inst-", dir="/dev/shm"))
    yield tmp_path, shm
    shutil.rmtree(shm, ignore_errors=True)


def readelf_dynamic(path):
    cp = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


# --------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------

def test_library(inst):
    so = inst.libdir / f"libpaste.so.{inst.version}"
    assert so.is_file() and not so.is_symlink(), so
    assert os.readlink(inst.libdir / "libpaste.so.0") == so.name
    assert os.readlink(inst.libdir / "libpaste.so") == "libpaste.so.0"
    dyn = readelf_dynamic(so)
    assert "Library soname: [libpaste.so.0]" in dyn, dyn
    assert "liburing.so" in dyn, dyn
    assert (inst.libdir / "libpaste.a").is_file()
    # Exported: paste.h's functions, and nothing outside the paste_ prefix.
    cp = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True,
                        timeout=30)
    assert cp.returncode == 0, cp.stderr
    exported = {line.split()[-1] for line in cp.stdout.splitlines() if line.strip()}
    stray = sorted(s for s in exported if not s.startswith("paste_"))
    assert not stray, f"libpaste.so exports internal symbols: {stray[:20]}"
    header = (ROOT / "include" / "paste.h").read_text()
    declared = set(re.findall(r"\b(paste_[a-z0-9_]+)\s*\(", header))
    assert declared - exported == set(), f"declared in paste.h, not exported: {declared - exported}"


def test_headers(inst):
    assert (inst.includedir / "paste.h").read_bytes() == (ROOT / "include" / "paste.h").read_bytes()
    internal = [str(p) for p in inst.dest.rglob("*.h") if p.name != "paste.h"]
    assert internal == [], f"headers other than paste.h installed: {internal}"


def test_pkg_config(inst):
    assert inst.pkg_config("--modversion") == inst.version
    assert re.search(r"^liburing\b", inst.pkg_config("--print-requires-private"), re.M)
    assert inst.pkg_config("--print-requires") == ""
    cflags = shlex.split(inst.pkg_config("--cflags"))
    assert f"-I{inst.includedir}" in cflags, cflags
    libs = shlex.split(inst.pkg_config("--libs"))
    assert f"-L{inst.libdir}" in libs and "-lpaste" in libs and "-luring" not in libs, libs
    static = shlex.split(inst.pkg_config("--static", "--libs"))
    assert "-luring" in static, static


def test_tools(inst):
    for tool in ("phttpd", "pkvs", "paste-store"):
        exe = inst.bindir / tool
        assert exe.is_file() and os.access(exe, os.X_OK), exe
        cp = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=30)
        assert cp.returncode == 0, cp
        assert cp.stdout.strip() == f"{tool} (paste) {inst.version}", cp.stdout


def test_man_pages(inst):
    man = inst.mandir
    for section, pages in (("1", ["phttpd", "pkvs", "paste-store"]), ("7", ["paste"]),
                           ("3", ["paste_store", "paste_persist", "paste_wal", "paste_port",
                                  "paste_body", "paste_http", "paste_resp", "paste_btree",
                                  "paste_util"])):
        for page in pages:
            path = man / f"man{section}" / f"{page}.{section}"
            assert path.is_file() and not path.is_symlink(), path
            assert path.read_bytes() == (ROOT / "man" / path.name).read_bytes(), path
    # A link per function named in a page's NAME section, to that page.
    for func, page in (("paste_port_poll", "paste_port"), ("paste_wal_append", "paste_wal"),
                       ("paste_store_open", "paste_store"), ("paste_body_feed", "paste_body"),
                       ("paste_persist_fence", "paste_persist"), ("paste_crc32c", "paste_store"),
                       ("paste_clock_ns", "paste_util")):
        link = man / "man3" / f"{func}.3"
        assert link.is_symlink() and os.readlink(link) == f"{page}.3", link
    for link in (man / "man3").iterdir():
        assert link.exists(), f"dangling man link {link}"
    if shutil.which("man"):
        cp = subprocess.run(["man", "-l", str(man / "man7" / "paste.7")], capture_output=True,
                            text=True, timeout=60, env=dict(os.environ, MANWIDTH="100"))
        assert cp.returncode == 0 and "paste_port_poll" in cp.stdout, cp.stderr


def header_functions(tmp_path):
    """The functions include/paste.h declares, as gcc parses them: -aux-info
    writes one prototype a line, each tagged with the file declaring it."""
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("gcc is not installed: its -aux-info lists paste.h's functions")
    header = ROOT / "include" / "paste.h"
    src, aux = tmp_path / "api.c", tmp_path / "aux.txt"
    src.write_text('#include "paste.h"\n')
    cp = subprocess.run([gcc, "-std=c11", f"-I{header.parent}", "-aux-info", str(aux),
                         "-fsyntax-only", str(src)], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    funcs = set()
    for line in aux.read_text().splitlines():
        m = re.match(r"/\* (.+?):\d+:\w+ \*/ (.*)", line)
        if m and Path(m.group(1)).resolve() == header.resolve():
            name = re.search(r"\b(paste_[a-z0-9_]+) \(", m.group(2))
            assert name, f"no function name in {line!r}"
            funcs.add(name.group(1))
    assert len(funcs) > 100, f"too few functions found in {header}: {sorted(funcs)}"
    return funcs


def man_names(page):
    """The names in a page's NAME section (before \\-), read as meson.build
    reads them to make one link per name."""
    text = page.read_text()
    if ".SH NAME\n" not in text:
        return set()
    names = text.split(".SH NAME\n", 1)[1].split(" \\- ", 1)[0].replace("\n", " ")
    return {n.strip() for n in names.split(",") if n.strip()}


def test_every_call_has_a_man_page(tmp_path):
    """Every function paste.h declares is named in the NAME section of a
    section-3 page that meson installs, so `man FUNCTION` finds it."""
    man3 = re.search(r"^man3 = \[(.*?)\]", (ROOT / "meson.build").read_text(), re.M | re.S)
    assert man3, "meson.build has no man3 list"
    installed = set(re.findall(r"'([^']+)'", man3.group(1)))
    named, problems = set(), []
    for page in sorted((ROOT / "man").glob("*.3")):
        if page.stem not in installed:
            problems.append(f"{page.name} is not in meson.build's man3 list")
        for name in sorted(man_names(page)):
            if re.fullmatch(r"[A-Za-z0-9_]+", name):
                named.add(name)
            else:
                problems.append(f"{page.name}: {name!r} in NAME is no function name (no link)")
    missing = sorted(header_functions(tmp_path) - named)
    if missing:
        problems.append(f"declared in paste.h, named in no man page's NAME: {' '.join(missing)}")
    assert problems == [], "\n".join(problems)


def test_data_files(inst):
    for name in ("durable_log.c", "echo_rpc.c"):
        path = inst.docdir / "examples" / name
        assert path.read_bytes() == (ROOT / "examples" / name).read_bytes(), path
    for name in ("phttpd.conf", "pkvs.conf"):
        path = inst.sysconfdir / "paste" / name
        assert path.read_bytes() == (ROOT / "contrib" / name).read_bytes(), path


# --------------------------------------------------------------------------
# paste(7)'s program, the examples, a static link
# --------------------------------------------------------------------------

ROFF = [("\\e", "\\"), ("\\-", "-"), ("\\&", ""), ("\\(aq", "'"), ("\\(dq", '"')]


def man_program(page):
    """The C program in the page's EXAMPLES section (its first .EX block)."""
    text = page.read_text()
    examples = text.split("\n.SH EXAMPLES\n", 1)[1]
    block = examples.split("\n.EX\n", 1)[1].split("\n.EE\n", 1)[0]
    for a, b in ROFF:
        block = block.replace(a, b)
    assert "int main(" in block and "#include <paste.h>" in block, block
    return block + "\n"


def test_man_program_as_rendered(inst):
    """What man shows is the program (no typographic hyphens or quotes)."""
    if not shutil.which("man"):
        pytest.skip("man is not installed: the roff source is checked by test_man_program")
    page = inst.mandir / "man7" / "paste.7"
    cp = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, MANWIDTH="120", LC_ALL="C.UTF-8"))
    assert cp.returncode == 0, cp.stderr
    shown = {line.strip() for line in cp.stdout.splitlines()}
    missing = [line for line in man_program(page).splitlines()
               if line.strip() and line.strip() not in shown]
    assert missing == [], f"program lines man renders differently: {missing}"


def start(argv, env=None):
    srv = Server([str(a) for a in argv], env=env, listen_re=LISTEN_RE)
    return srv.start()


def test_man_program(inst, work):
    """paste(7)'s program, built with pkg-config against the install and
    run on the installed libpaste.so: each chunk logged, its LSN sent back
    once durable; after kill -9 the installed paste-store reads it back
    (store given as a plain argument)."""
    tmp, shm = work
    src = tmp / "plog.c"
    src.write_text(man_program(inst.mandir / "man7" / "paste.7"))
    exe = inst.cc(src, tmp / "plog")
    store = shm / "plog.store"
    srv = start([exe, store, 0], env=inst.pkg_env())
    try:
        maps = Path(f"/proc/{srv.pid}/maps").read_text()
        assert str(inst.libdir / f"libpaste.so.{inst.version}") in maps, \
            "plog does not run on the installed libpaste.so"
        acks = []
        for chunk in (b"hello", b"world"):
            with connect(srv.port, timeout=10) as s:
                s.sendall(chunk)
                acks.append(s.makefile("rb").readline())
        assert acks == [b"1\n", b"2\n"], acks
    finally:
        srv.kill9()
    cp = subprocess.run([str(inst.bindir / "paste-store"), str(store), "dump", "--data"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    recs = [json.loads(line) for line in cp.stdout.splitlines()]
    assert [(r["lsn"], r["data_b64"]) for r in recs] == [(1, "aGVsbG8="), (2, "d29ybGQ=")], recs
    cp = subprocess.run([str(inst.bindir / "paste-store"), "--store", str(store), "check"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp


def test_examples_build(inst, work):
    """The installed examples' sources build against the install, and the
    echo server runs on the installed shared library."""
    tmp, shm = work
    exes = {name: inst.cc(inst.docdir / "examples" / f"{name}.c", tmp / name)
            for name in ("durable_log", "echo_rpc")}
    for exe in exes.values():
        assert "libpaste.so.0" in readelf_dynamic(exe)
    srv = start([exes["echo_rpc"], shm / "echo.store", 0], env=inst.pkg_env())
    with connect(srv.port, timeout=10) as s:
        s.sendall(b"ping")
        assert s.recv(16) == b"ping"
    srv.stop()


def test_static_link(inst, work):
    if inst.sanitize_flags():
        pytest.skip(f"b_sanitize={inst.sanitize}: a static link needs the sanitizer runtime")
    tmp, _ = work
    src = tmp / "plog.c"
    src.write_text(man_program(inst.mandir / "man7" / "paste.7"))
    exe = inst.cc(src, tmp / "plog-static", static=True)
    dyn = readelf_dynamic(exe)
    assert "libpaste" not in dyn and "liburing.so" in dyn, dyn


# --------------------------------------------------------------------------
# systemd units
# --------------------------------------------------------------------------

UNITS = {"phttpd": ("PASTE_STORE", "/var/lib/phttpd/"), "pkvs": ("PKVS_STORE", "/var/lib/pkvs/")}


def unit_file(inst, name):
    """The installed unit, or (no systemd here: not installed) the one the
    build generated."""
    hits = [dst for src, dst in inst.installed.items() if src.endswith(f"contrib/{name}.service")]
    if hits:
        return inst.staged(hits[0])
    return BUILD / "contrib" / f"{name}.service"


def parse_unit(path):
    cp = configparser.ConfigParser(interpolation=None, strict=True, delimiters=("=",),
                                   comment_prefixes=("#", ";"), empty_lines_in_values=False)
    cp.optionxform = str   # systemd keys are case-sensitive
    cp.read_string(path.read_text(), source=str(path))
    return cp


@pytest.mark.parametrize("name", sorted(UNITS))
def test_unit_keys(inst, name):
    path = unit_file(inst, name)
    assert path.is_file(), path
    u = parse_unit(path)
    assert set(u.sections()) == {"Unit", "Service", "Install"}, u.sections()
    assert u["Unit"]["Description"] and f"man:{name}(1)" in u["Unit"]["Documentation"]
    svc = u["Service"]
    argv = shlex.split(svc["ExecStart"])
    assert inst.staged(argv[0]) == inst.where(f"/{name}"), f"{argv[0]}: not the installed {name}"
    assert argv[1] == "--config" and inst.staged(argv[2]).is_file(), argv
    var, state = UNITS[name]
    env = dict(e.split("=", 1) for e in shlex.split(svc["Environment"]))
    assert env[var].startswith(state), env
    assert svc["StateDirectory"] == name
    assert int(svc["LimitNOFILE"]) >= 16384
    assert re.fullmatch(r"\d+[KMG]?|infinity", svc["LimitMEMLOCK"]), svc["LimitMEMLOCK"]
    # no restart on bad usage (2) or a damaged store (3): neither passes
    assert svc["Restart"] == "on-failure" and svc["RestartPreventExitStatus"].split() == ["2", "3"]
    assert u["Install"]["WantedBy"] == "multi-user.target"


@pytest.mark.parametrize("name", sorted(UNITS))
def test_unit_systemd_analyze(inst, name, tmp_path):
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (no systemd here); "
                    "test_unit_keys checked the unit's syntax and keys")
    # verify checks that ExecStart's program exists: point it into DESTDIR.
    text = unit_file(inst, name).read_text()
    exe = shlex.split(parse_unit(unit_file(inst, name))["Service"]["ExecStart"])[0]
    copy = tmp_path / f"{name}.service"
    copy.write_text(text.replace(f"ExecStart={exe}", f"ExecStart={inst.staged(exe)}"))
    cp = subprocess.run([tool, "verify", "--man=no", str(copy)], capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0 and not cp.stderr.strip(), cp


@pytest.mark.parametrize("name", sorted(UNITS))
def test_unit_command(inst, name, work):
    """ExecStart as systemd runs it, with the installed program and config
    file, the unit's store variable pointing into a temporary directory
    and the ports made free ones on the command line (which wins over the
    config file): the store lands where the variable says, and the config
    file's settings hold (phttpd: --mode wal)."""
    _, shm = work
    u = parse_unit(unit_file(inst, name))
    argv = [str(inst.staged(a)) if a.startswith("/") else a
            for a in shlex.split(u["Service"]["ExecStart"])]
    var, _ = UNITS[name]
    store = shm / f"{name}.store"
    env = dict(os.environ, **{var: str(store)})
    if name == "phttpd":
        argv += ["--port", "0", "--store-size", "32M"]
    else:
        argv += ["--http-port", "off", "--resp-port", "0", "--store-size", "32M"]
    srv = start(argv, env=env)
    try:
        assert store.exists(), f"{var} was not used: {srv.stderr()}"
        if name == "phttpd":
            with HttpConn(srv.port) as c:
                assert post_log(c, b"from the unit") == 1   # mode = wal, from the config file
        else:
            with RespConn(srv.port) as c:
                assert c.command("SET", "k", "v") == "OK"
                assert c.command("GET", "k") == b"v"
    finally:
        srv.stop()


# --------------------------------------------------------------------------
# Command lines: paste-store [--store] PATH, --config FILE, the environment
# --------------------------------------------------------------------------

def tool(inst, name, *args, env=None):
    return subprocess.run([str(inst.bindir / name), *[str(a) for a in args]],
                          capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture
def log_store(inst, work):
    """A store holding one record, written by the installed phttpd, whose
    store came from $PASTE_STORE."""
    _, shm = work
    store = shm / "env.store"
    srv = start([inst.bindir / "phttpd", "--mode", "wal", "--port", "0", "--store-size", "16M"],
                env=dict(os.environ, PASTE_STORE=str(store)))
    try:
        with HttpConn(srv.port) as c:
            assert post_log(c, b"one record") == 1
    finally:
        srv.stop()
    assert store.exists(), "phttpd did not use $PASTE_STORE"
    return store


def test_store_argument(inst, log_store):
    by_opt = tool(inst, "paste-store", "--store", log_store, "info")
    by_arg = tool(inst, "paste-store", log_store, "info")
    assert by_opt.returncode == 0 and by_arg.returncode == 0, (by_opt, by_arg)
    assert by_arg.stdout == by_opt.stdout and "records:     1," in by_arg.stdout, by_arg.stdout
    assert tool(inst, "paste-store", log_store, "check").returncode == 0
    env = dict(os.environ, PASTE_STORE=str(log_store))
    assert tool(inst, "paste-store", "check", env=env).returncode == 0
    for args in ([log_store], ["--store", log_store, log_store, "info"],
                 [log_store, "info", "extra"]):
        cp = tool(inst, "paste-store", *args)
        assert cp.returncode == 2 and cp.stderr.strip(), (args, cp)
    assert "--store] PATH" in tool(inst, "paste-store", "--help").stdout


def test_config_file(inst, work):
    """Defaults < $PASTE_STORE < --config FILE < the command line."""
    tmp, shm = work
    conf = tmp / "phttpd.conf"
    conf.write_text(f"# comment\n\n  mode = wal\nbody-len=5\nstore {shm / 'conf.store'}\n"
                    "store-size = 16M\n--port = 1\nbusy-poll = no\n")
    env = dict(os.environ, PASTE_STORE=str(shm / "env.store"))
    srv = start([inst.bindir / "phttpd", "--config", conf, "--mode", "rpc", "--port", "0"],
                env=env)
    try:
        with HttpConn(srv.port) as c:
            r = c.request("GET", "/")
            assert r.status == 200 and len(r.body) == 5, r   # the file's body-len
            assert c.request("POST", "/log", b"x").status != 201   # the command line's rpc mode
    finally:
        srv.stop()
    assert (shm / "conf.store").exists() and not (shm / "env.store").exists()


@pytest.mark.parametrize("text,message", [
    ("host = 127.0.0.1\nbogus = 1\n", ":2: unknown option 'bogus'"),
    ("idle-timeout = eighty\n", "line 1"),
    ("host\n", ":1: host needs a value"),
    ("busy-poll = maybe\n", "not yes or no"),
    ("config = other.conf\n", "unknown option 'config'"),
])
def test_config_errors(inst, tmp_path, text, message):
    conf = tmp_path / "bad.conf"
    conf.write_text(text)
    for name in ("phttpd", "pkvs"):
        cp = tool(inst, name, "--config", conf)
        assert cp.returncode == 2, cp
        assert str(conf) in cp.stderr and message in cp.stderr, cp.stderr
    cp = tool(inst, "phttpd", "--config", tmp_path / "missing.conf")
    assert cp.returncode == 2 and "missing.conf" in cp.stderr, cp
