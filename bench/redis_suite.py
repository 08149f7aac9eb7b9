#!/usr/bin/env python3
"""Redis 7.0.15's own test suite against pkvs and against redis-server, per file.

The suite (tests/ and runtest of the redis/redis repository at tag 7.0.15)
lives outside this tree, in --suite (default /work/redis-suite); see
bench/README.md for how to get it and the one-line edit it needs. For each
file (--files, default the 35 of DEFAULT_FILES below) the script starts a fresh redis-server
(Debian's, persistence off, a port and directory of its own), runs

    ./runtest --host 127.0.0.1 --port P --singledb --ignore-encoding
              --ignore-digest --durable --tags "-slow -needs:debug"
              --timeout 300 --clients 1 --single FILE

in the suite directory against it, stops it, and does the same against a
fresh pkvs ($PASTE_BUILD's, its own store on /dev/shm, RESP on a free port,
HTTP off, --pkvs-args added). Files run one after the other; each runtest is
bounded by --file-timeout (its process group is killed when it expires).

From runtest's [ok], [err], [exception], [skip] and [ignore] lines it
reports per file: the tests Redis passes (the baseline: some tests need a
server of the suite's own, DEBUG or jemalloc, so the file's total is not
it), how many of those pkvs passes, the percentage, and each test Redis
passes and pkvs does not with the first line of pkvs's error (or why it
did not run), then the most common first failure causes over all files.

External-server mode has one server per file: a start_server block tagged
external:skip is skipped, a nested block runs against the same server, and
a block's overrides are applied with CONFIG SET (and set back after); its
config, args and omit options are ignored. The report lists, from a static
reading of each file, the blocks external mode skips or changes.

Writes bench/results/redis-suite-<time>.md and .json. Python 3 standard
library plus python/paste_proc.py.
"""

import argparse
import collections
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import paste_proc  # noqa: E402  (harness put python/ on sys.path)

DEFAULT_FILES = ("unit/type/string unit/bitops unit/bitfield unit/hyperloglog unit/type/incr unit/type/hash unit/type/list "
                 "unit/type/list-2 unit/type/list-3 unit/type/set unit/type/zset unit/type/stream unit/type/stream-cgroups unit/geo "
                 "unit/keyspace unit/dump unit/expire unit/multi unit/scan unit/sort unit/pubsub "
                 "unit/pubsubshard unit/tracking unit/scripting unit/functions unit/protocol "
                 "unit/quit unit/info-command unit/introspection unit/introspection-2 unit/other "
                 "unit/auth unit/slowlog unit/latency-monitor unit/pause").split()
DENIED_TAGS = ("slow", "needs:debug")
RUNTEST_FLAGS = ["--singledb", "--ignore-encoding", "--ignore-digest", "--durable",
                 "--tags", " ".join("-" + t for t in DENIED_TAGS), "--timeout", "300",
                 "--clients", "1"]
# The harness's FUNCTION FLUSH before every file, as the suite ships it.
BARE_FLUSH_RE = re.compile(r"^\s*r function flush\s*$", re.M)
CATCH_EDIT = "sed -i 's/^    r function flush$/    catch {r function flush}/' tests/support/server.tcl"


# ---------------------------------------------------------------- servers

class RedisServer(harness.Measured, paste_proc.RedisServer):
    """Debian's redis-server, persistence off, a fresh directory on /dev/shm."""

    def __init__(self):
        super().__init__(["--appendonly", "no"], dir_base="/dev/shm", tag="suite-redis",
                         **harness.measured("redis-server", None, 15, 10))


class PkvsServer(harness.Measured, paste_proc.Pkvs):
    """pkvs with a fresh store on /dev/shm (deleted at stop), HTTP off."""

    def __init__(self, args):
        super().__init__(args, store_dir="/dev/shm", http=False, tag="suite",
                         **harness.measured("pkvs", None, 60, 10))


SYSTEMS = (("redis", lambda args: RedisServer()), ("pkvs", lambda args: PkvsServer(args)))


# ---------------------------------------------------------------- runtest

def _exited(pid):
    """Whether the child pid has exited, leaving it unreaped (its pid, and
    so its process group's id, cannot be taken by another process yet)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _wait_exited(pid, seconds):
    deadline = time.monotonic() + seconds
    while not _exited(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _killpg(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def run_runtest(suite, port, test_file, timeout, log_path):
    """runtest against 127.0.0.1:port for one file, its output in log_path.
    runtest and the test client it starts run in a process group of their
    own, killed when timeout expires (or this script is interrupted) and
    swept when runtest ends. Returns (exit code or None, seconds, timed out)."""
    # A base port of its own: runtest's test client listens just below it,
    # and two suite runs at once would otherwise race for the same ports.
    base = random.randrange(22000, 32600, 200)   # below the ephemeral ports
    cmd = ["./runtest", "--host", "127.0.0.1", "--port", str(port)] + RUNTEST_FLAGS + [
        "--baseport", str(base), "--portcount", "150", "--single", test_file]
    start = time.monotonic()
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=suite, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    timed_out = False
    try:
        if not _wait_exited(proc.pid, timeout):
            timed_out = True
            _killpg(proc.pid, signal.SIGTERM)
            _wait_exited(proc.pid, 5)
    finally:
        # The leader is a zombie or still running: the group id is ours.
        _killpg(proc.pid, signal.SIGKILL)
        rc = proc.wait()
    return (None if timed_out else rc), time.monotonic() - start, timed_out


# ---------------------------------------------------------------- runtest's output

ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
RECORD_RE = re.compile(r"^\[(ok|err|exception|skip|ignore|TIMEOUT)\]: ?(.*)$")
END_RE = re.compile(r"^(\[\d+/\d+ done\]|\s+The End\s*$|\*\*\* |Testing |Execution time|!!! )")
TEST_ERR_RE = re.compile(r"^(.*) in tests/\S+\.tcl$")
IGNORE_RE = re.compile(r"^(?:(.*): )?(Tag: .*|Not supported .*|large memory flag not provided)$")


def first_error(lines):
    """The first line of an error as runtest shows it: with --durable an
    error that is not an assertion comes as its message cut by 10
    characters (the length of "assertion:"), then Tcl's errorInfo, whose
    first line is the whole message."""
    lines = [l for l in lines if l is not None]
    if not lines:
        return ""
    if len(lines) > 1 and (not lines[0].strip() or lines[1].endswith(lines[0])):
        return lines[1].strip()
    return lines[0].strip()


def parse_output(text):
    """runtest's records: test names passed (ok), failed (err, with the
    first line of their error), skipped, ignored (with the reason); errors
    outside any test (a start_server block stopped), the exception that
    ended runtest, and whether its own timeout fired (and in which test)."""
    out = {"ok": [], "err": [], "block_errors": [], "skip": [], "ignore": [],
           "exception": None, "timeout": False, "timeout_in": None}
    current = None          # the record whose detail lines follow
    for line in ANSI_RE.sub("", text).splitlines():
        m = RECORD_RE.match(line)
        if m:
            kind, data = m.groups()
            current = None
            if kind == "ok":
                out["ok"].append(re.sub(r" \(\d+ ms\)$", "", data))
            elif kind == "err":
                t = TEST_ERR_RE.match(data)
                current = {"name": t.group(1) if t else None, "lines": [] if t else [data]}
                out["err" if t else "block_errors"].append(current)
            elif kind == "exception":
                current = {"name": None, "lines": [data]}
                out["exception"] = current
            elif kind == "skip":
                out["skip"].append(data)
            elif kind == "ignore":
                i = IGNORE_RE.match(data)
                out["ignore"].append((i.group(1), i.group(2)) if i else (data, "ignored"))
            else:
                out["timeout"] = True
                current = "timeout"
            continue
        if END_RE.match(line):
            current = None
        elif current == "timeout":
            m = re.search(r"\(IN PROGRESS\) (.*)$", line)
            if m:
                out["timeout_in"] = m.group(1)
        elif current is not None:
            current["lines"].append(line)
    for rec in out["err"] + out["block_errors"] + ([out["exception"]] if out["exception"] else []):
        rec["error"] = first_error(rec.pop("lines"))
    return out


# ---------------------------------------------------------------- the file's start_server blocks

def _match_close(text, i):
    """The index just past the brace or bracket that closes text[i] ('{' or '[')."""
    opening = text[i]
    closing = "}" if opening == "{" else "]"
    depth = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def tcl_words(text):
    """Tcl words of text: {braced} and "quoted" words as written, [list
    ...] as a list of its words, anything else ($var, other commands) as
    written with unknown set. Returns (words, unknown)."""
    words, unknown, i = [], False, 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif c == "{":
            j = _match_close(text, i)
            words.append(text[i + 1:j - 1])
            i = j
        elif c == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            words.append(text[i + 1:j])
            i = j + 1
        elif c == "[":
            j = _match_close(text, i)
            inner, unk = tcl_words(text[i + 1:j - 1])
            if inner[:1] == ["list"]:
                words.append(inner[1:])
                unknown |= unk
            else:
                words.append(text[i:j])
                unknown = True
            i = j
        else:
            j = i
            while j < len(text) and not text[j].isspace():
                j += 1
            words.append(text[i:j])
            unknown |= text[i] == "$"
            i = j
    return words, unknown


def _flat(word, tags=False):
    """A word's items: a [list] as is, a braced or quoted word split as a
    Tcl list; for tags without the quotes inside, as start_server reads them."""
    if isinstance(word, list):
        return [w if isinstance(w, str) else " ".join(_flat(w)) for w in word]
    return tcl_words(word.replace('"', "") if tags else word)[0]


def _tcl_item(item):
    return item if item and not any(c.isspace() for c in item) else "{" + item + "}"


BLOCK_RE = re.compile(r"^[ \t]*(start_server|tags)[ \t]+(?=[{\[])", re.M)
TEST_RE = re.compile(r"^[ \t]*test[ \t]+[{\"]", re.M)


def read_blocks(path):
    """The start_server (and tags) blocks of a test file, statically: line,
    nesting, own and inherited tags, overrides, other options, the test
    calls written in its own body, and what external-server mode does with
    it. A reading of the text, not of what runs: a block made inside a
    loop counts once, options built at run time are reported as unknown."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    blocks = []
    for m in BLOCK_RE.finditer(text):
        i = m.end()
        j = _match_close(text, i)
        opts_text = text[i:j]
        body = re.compile(r"\s*\{").match(text, j)
        end = _match_close(text, body.end() - 1) if body else j
        b = {"kind": m.group(1), "line": text.count("\n", 0, m.start()) + 1,
             "start": m.start(), "end": end, "tags": [], "overrides": [], "other": [],
             "unknown": False}
        if m.group(1) == "tags":
            b["tags"] = _flat(tcl_words(opts_text)[0][0], tags=True) if opts_text else []
        else:
            words, b["unknown"] = tcl_words(opts_text)
            opts = words[0] if words else ""
            if isinstance(opts, str):
                opts, unk = tcl_words(opts)
                b["unknown"] |= unk
            for k in range(0, len(opts) - 1, 2):
                name, value = opts[k], opts[k + 1]
                if name == "tags":
                    b["tags"] = _flat(value, tags=True)
                elif name == "overrides":
                    b["overrides"] = _flat(value)
                else:
                    b["other"].append(name)
        blocks.append(b)
    for b in blocks:
        parents = [p for p in blocks if p["start"] < b["start"] < p["end"]]
        b["depth"] = sum(p["kind"] == "start_server" for p in parents)
        b["all_tags"] = [t for p in parents for t in p["tags"]] + b["tags"]
        inner = [(c["start"], c["end"]) for c in blocks if b["start"] < c["start"] < b["end"]]
        b["tests"] = sum(1 for t in TEST_RE.finditer(text, b["start"], b["end"])
                         if not any(s < t.start() < e for s, e in inner))
        skipped = [p for p in parents if p.get("skip")]
        b["skip"] = (f"not reached: the block at line {skipped[-1]['line']} is skipped"
                     if skipped else external_skip(b["all_tags"]))
        b["verdict"] = b["skip"] or external_change(b)
    for b in blocks:
        del b["start"], b["end"]
    return blocks


def external_skip(tags):
    """Why runtest with our flags skips a block with these tags, or None."""
    for t in DENIED_TAGS:
        if t in tags:
            return f"skipped: tag {t} denied by --tags"
    if "external:skip" in tags:
        return "skipped: external:skip (not supported on an external server)"
    if "singledb:skip" in tags:
        return "skipped: singledb:skip"
    return None


def external_change(b):
    """What external mode does to a block that runs, or None if nothing."""
    notes = []
    if b["unknown"]:
        notes.append("options built at run time (not judged here)")
    if b["overrides"]:
        notes.append("overrides applied to the running server with CONFIG SET "
                     f"({' '.join(map(_tcl_item, b['overrides']))}) and set back after")
    if b["other"]:
        notes.append(f"option(s) {', '.join(b['other'])} ignored (no server of its own)")
    if b["kind"] == "start_server" and b["depth"] > 0:
        notes.append("nested: the same server as the enclosing block (one server per file)")
    return "runs; " + "; ".join(notes) if notes else None


# ---------------------------------------------------------------- comparison

def cause_of(error):
    """A failure's first error line, grouped: an unknown command (or
    subcommand) by name wherever the line names it, an error reply by its
    words up to the first colon, semicolon or full stop, any other wrong
    reply as one cause."""
    m = re.search(r"unknown command [`']([^`']*)[`']", error)
    if m:
        return f"unknown command {m.group(1).upper()}"
    m = re.search(r"unknown subcommand [`']([^`']*)[`']", error)
    if m:
        cmd = re.search(r"Try (\S+) HELP", error)
        return f"unknown subcommand {(cmd.group(1) + ' ') if cmd else ''}{m.group(1).upper()}"
    m = re.match(r"not run \((a start_server block stopped|runtest stopped): (.*)\)$", error)
    if m:           # the rest of a block, or of the file, after an error
        return f"not run: {m.group(1)} on {cause_of(m.group(2))}"
    if error.startswith("not run"):
        return error
    if re.match(r"[A-Z]+ ", error):
        return re.split(r"[:;.]", error)[0][:80]
    if error.startswith("Expected "):
        return "wrong reply or value (an assertion)"
    if re.search(r"I/O error|connection (reset|refused)|broken pipe|eof", error, re.I):
        return "connection closed or reset"
    return " ".join(error.split()[:6])[:80] or "(no message)"


def not_run_reason(run, name):
    """Why a test Redis passed has no record in pkvs's run."""
    for test, why in run["ignore"]:
        if test == name:
            return f"not run ({why})"
    if name in run["skip"]:
        return "not run (skipped)"
    if run.get("timed_out"):
        return "not run (the file timed out)"
    if run["timeout"]:
        return f"not run (runtest's own timeout fired in: {run['timeout_in'] or '?'})"
    if run["exception"]:
        return f"not run (runtest stopped: {run['exception']['error'][:120]})"
    if run["block_errors"]:
        return f"not run (a start_server block stopped: {run['block_errors'][0]['error'][:120]})"
    return "not run (no record of it: the file's own code left it out, e.g. on an INFO field)"


def compare(redis, pkvs):
    """pkvs against Redis's passes on one file. Names may repeat within a
    file (tests in loops): each occurrence counts once."""
    r_ok, p_ok = collections.Counter(redis["ok"]), collections.Counter(pkvs["ok"])
    p_err = collections.defaultdict(list)
    for e in pkvs["err"]:
        p_err[e["name"]].append(e["error"])
    missing = []
    for name in dict.fromkeys(redis["ok"]):
        errs = p_err.get(name, [])
        for j in range(r_ok[name] - p_ok[name]):
            missing.append({"name": name,
                            "error": errs[j] if j < len(errs) else not_run_reason(pkvs, name)})
    passed = sum(min(n, p_ok[name]) for name, n in r_ok.items())
    extra = sum(max(0, n - r_ok[name]) for name, n in p_ok.items())
    return passed, missing, extra


# ---------------------------------------------------------------- one file

def run_file(test_file, args, log_dir):
    """Both servers on one file; the file's entry of the results."""
    entry = {"file": test_file}
    for system, make in SYSTEMS:
        log_path = os.path.join(log_dir, test_file.replace("/", "_") + f".{system}.log")
        srv = make(args.pkvs_args)
        try:
            srv.start()
            harness.progress(f"  {test_file} on {system} (port {srv.resp_port}) ...", end="",
                             flush=True)
            rc, seconds, timed_out = run_runtest(args.suite, srv.resp_port, test_file,
                                                 args.file_timeout, log_path)
        finally:
            died = srv.proc is not None and not srv.running()
            code = srv.stop()
        with open(log_path, "rb") as f:
            run = parse_output(f.read().decode("utf-8", "replace"))
        run.update(rc=rc, seconds=round(seconds, 1), timed_out=timed_out,
                   server_exit=code, server_died=died,
                   server_tail=list(srv.stderr_tail) if died or code not in (0, None) else [])
        entry[system] = run
        harness.progress(f" {len(run['ok'])} ok, {len(run['err'])} err in {seconds:.0f} s"
                         + (" (timed out)" if timed_out else ""))
    passed, missing, extra = compare(entry["redis"], entry["pkvs"])
    entry.update(pkvs_passes_of_redis=passed, missing=missing, pkvs_extra_passes=extra,
                 blocks=read_blocks(os.path.join(args.suite, "tests", test_file + ".tcl")))
    return entry


# ---------------------------------------------------------------- report

def secs(run):
    """A run's seconds; a killed or timed-out run is marked: its counts are partial."""
    return f"{run['seconds']:.0f}" + (" (killed)" if run["timed_out"] else
                                       " (timeout)" if run["timeout"] else "")


def pct(a, b):
    return f"{100.0 * a / b:.1f} %" if b else "n/a"


def run_notes(system, run):
    notes = []
    if run["timed_out"]:
        notes.append(f"{system}: killed after --file-timeout")
    if run["timeout"]:
        notes.append(f"{system}: runtest's own timeout (300 s without progress) in "
                     f"{run['timeout_in'] or '?'}")
    if run["exception"]:
        notes.append(f"{system}: runtest stopped by an exception: {run['exception']['error']}")
    for b in run["block_errors"]:
        notes.append(f"{system}: a start_server block stopped outside any test: {b['error']}")
    if run["server_died"]:
        notes.append(f"{system}: the server died during the file (exit {run['server_exit']})")
    elif run["server_exit"] not in (0, None):
        notes.append(f"{system}: exit code {run['server_exit']} after SIGTERM")
    if run["server_tail"]:
        notes.append(f"{system}'s last output: " + " | ".join(run["server_tail"][-5:]))
    return notes


def ignored_summary(run):
    """runtest's [ignore] reasons with their counts (a block counts once)."""
    counts = collections.Counter(why for _, why in run["ignore"])
    return ", ".join(f"{why}: {n}" for why, n in counts.most_common())


def report(entries, args, versions):
    rows = ["| file | Redis passes | pkvs passes (of Redis's) | share | pkvs failures "
            "| Redis fails | ignored (Redis's run) | seconds Redis / pkvs |",
            "|---|---:|---:|---:|---:|---:|---|---|"]
    tot_r = tot_p = 0
    for e in entries:
        r, p = e["redis"], e["pkvs"]
        n_r, n_p = len(r["ok"]), e["pkvs_passes_of_redis"]
        tot_r, tot_p = tot_r + n_r, tot_p + n_p
        rows.append(f"| {e['file']} | {n_r} | {n_p} | {pct(n_p, n_r)} | {len(e['missing'])} "
                    f"| {len(r['err'])} | {ignored_summary(r) or '-'} "
                    f"| {secs(r)} / {secs(p)} |")
    rows.append(f"| all | {tot_r} | {tot_p} | {pct(tot_p, tot_r)} | {tot_r - tot_p} | "
                f"{sum(len(e['redis']['err']) for e in entries)} | | |")

    causes = collections.Counter(cause_of(m["error"]) for e in entries for m in e["missing"])
    cause_lines = ["| first failure cause | tests |", "|---|---:|"] + [
        f"| {c} | {n} |" for c, n in causes.most_common(30)]

    detail = []
    for e in entries:
        lines = [f"### {e['file']}: {e['pkvs_passes_of_redis']} of {len(e['redis']['ok'])}"]
        notes = run_notes("redis", e["redis"]) + run_notes("pkvs", e["pkvs"])
        if e["redis"]["err"]:
            notes.append("Redis fails too (not counted): " + "; ".join(
                f"{x['name']} ({x['error'][:100]})" for x in e["redis"]["err"]))
        if e["pkvs_extra_passes"]:
            notes.append(f"pkvs passes {e['pkvs_extra_passes']} test(s) Redis does not")
        blocks = [b for b in e["blocks"] if b["verdict"] and
                  (b["kind"] == "start_server" or not b["skip"] or
                   not b["verdict"].startswith("not reached"))]
        for b in blocks:
            what = ("start_server" if b["kind"] == "start_server" else "") + (
                f" tags {{{' '.join(b['tags'])}}}" if b["tags"] else "") + (
                f" overrides {{{' '.join(map(_tcl_item, b['overrides']))}}}" if b["overrides"] else "")
            notes.append(f"line {b['line']}: {what.strip()}, {b['tests']} test call(s) in its "
                         f"text: {b['verdict']}")
        lines += ["- " + n for n in notes]
        if e["missing"]:
            lines += ["", "| test Redis passes, pkvs does not | pkvs's first error line |",
                      "|---|---|"]
            lines += [f"| {md(m['name'])} | {md(m['error'][:200])} |" for m in e["missing"]]
        detail.append("\n".join(lines))

    flags = " ".join(shlex.quote(a) for a in RUNTEST_FLAGS)
    head = [f"# Redis 7.0.15's test suite: pkvs against redis-server",
            "",
            f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, commit {versions['commit']}",
            f"- suite: {args.suite} (FUNCTION FLUSH before every file wrapped in catch: "
            f"{'yes' if versions['catch_edit'] else 'no'})",
            f"- runtest per file and server: ./runtest --host 127.0.0.1 --port P {flags} "
            f"--single FILE (bounded by {args.file_timeout} s)",
            f"- redis-server: {versions['redis']}, persistence off, fresh per file",
            f"- pkvs: {versions['pkvs']} ({paste_proc.BUILD}), a fresh store on /dev/shm per file, "
            f"HTTP off{', args ' + ' '.join(args.pkvs_args) if args.pkvs_args else ''}",
            "- Redis passes: the tests redis-server passes with these flags, the baseline "
            "(not the file's total: some tests need DEBUG, a server of the suite's own "
            "or a local build). pkvs passes: those of them pkvs passes too.",
            "- external-server mode runs each file against one server: blocks tagged "
            "external:skip are skipped, nested blocks share the server, overrides are "
            "applied with CONFIG SET (per file below)."]
    return "\n\n".join(["\n".join(head), "\n".join(rows),
                        "## Most common first failure causes (pkvs, over all files)",
                        "\n".join(cause_lines), "## Per file"] + detail)


def md(text):
    return text.replace("|", "\\|").replace("\n", " ")


# ---------------------------------------------------------------- main

def check_suite(suite):
    """The suite directory's runtest and the FUNCTION FLUSH edit; returns
    whether the edit is there (a clear error if the suite is missing)."""
    if not os.path.isfile(os.path.join(suite, "runtest")):
        raise harness.BenchError(
            f"no runtest in {suite}: extract the suite first (bench/README.md, "
            "\"Redis's own test suite\")")
    if not any(shutil.which(t) for t in ("tclsh", "tclsh8.6", "tclsh8.7", "tclsh8.5")):
        raise harness.BenchError("tclsh is not installed: apt-get install tcl")
    with open(os.path.join(suite, "tests", "support", "server.tcl")) as f:
        server_tcl = f.read()
    if BARE_FLUSH_RE.search(server_tcl):
        raise harness.BenchError(
            "the suite sends FUNCTION FLUSH before every file and pkvs has no FUNCTION: "
            f"in {suite} (a scratch copy) run\n  {CATCH_EDIT}")
    return "catch {r function flush}" in server_tcl


def versions_of():
    def out(cmd):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            return (p.stdout or p.stderr).strip().splitlines()[0] if (p.stdout or p.stderr) \
                else "n/a"
        except (OSError, subprocess.TimeoutExpired):
            return "n/a"
    redis = shutil.which("redis-server")
    if redis is None:
        raise paste_proc.MissingBinary("redis-server is not installed: run `make deps`")
    return {"redis": out([redis, "--version"]),
            "pkvs": out([paste_proc.binary("pkvs"), "--version"]),
            "commit": out(["git", "-C", harness.ROOT, "rev-parse", "--short", "HEAD"])}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", default="/work/redis-suite",
                   help="the suite's directory: tests/ and runtest of redis 7.0.15 "
                   "(default %(default)s)")
    p.add_argument("--files", default=",".join(DEFAULT_FILES),
                   help="comma-separated test files as runtest --single names them "
                   "(default: %(default)s)")
    p.add_argument("--pkvs-args", default="", type=shlex.split,
                   help="more pkvs flags, one string (e.g. \"--store-size 1G\")")
    p.add_argument("--file-timeout", type=int, default=600,
                   help="seconds one runtest may take before it is killed (default %(default)s)")
    p.add_argument("--logs", help="keep runtest's output here (FILE.SYSTEM.log)")
    p.add_argument("--out", help="also write the markdown report here")
    args = p.parse_args(argv)
    args.suite = os.path.abspath(args.suite)
    args.files = [f.strip().removesuffix(".tcl").removeprefix("tests/")
                  for f in args.files.split(",") if f.strip()]
    if not args.files:
        raise harness.BenchError("--files: name at least one test file")
    if args.file_timeout <= 0:
        raise harness.BenchError("--file-timeout must be positive")
    for f in args.files:
        if not os.path.isfile(os.path.join(args.suite, "tests", f + ".tcl")):
            raise harness.BenchError(f"--files: no tests/{f}.tcl in {args.suite}")
    return args


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def run(argv=None):
    # Every server and runtest runs in a session of its own, away from a
    # terminal's Ctrl-C: this script stops them (finally blocks), on
    # Ctrl-C and on SIGTERM alike.
    signal.signal(signal.SIGTERM, _interrupt)
    args = parse_args(argv)
    catch_edit = check_suite(args.suite)
    versions = dict(versions_of(), catch_edit=catch_edit)
    log_dir = args.logs or tempfile.mkdtemp(prefix="paste-redis-suite-")
    os.makedirs(log_dir, exist_ok=True)
    entries = []
    try:
        harness.progress(f"redis-suite: {len(args.files)} file(s), each on redis-server "
                         f"then pkvs, suite {args.suite}")
        for f in args.files:
            entries.append(run_file(f, args, log_dir))
    finally:
        if not args.logs:
            shutil.rmtree(log_dir, ignore_errors=True)
    text = report(entries, args, versions)
    harness.save("redis-suite", text, entries, args.out)
    return 0


if __name__ == "__main__":
    harness.main_guard(run)
