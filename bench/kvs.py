#!/usr/bin/env python3
"""Key-value stores over the Redis protocol: pkvs vs Redis 7, redis-benchmark or pload.

Systems, all started and stopped by this script, side by side in one run:
- pkvs: the persistent B+tree, durable acks (emulated PM on /dev/shm, or
  --medium disk: fsync group commit in a disk directory);
- redis-always: Redis 7 from Debian with `appendonly yes`, `appendfsync
  always` (one write + fdatasync per event-loop pass, replies held until it
  completes: Redis's group commit), its directory on the same medium;
- redis-off: Redis with persistence off, the in-memory reference;
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
With --pm-latency NS pkvs also pays NS per fence (the paper's 10 us PM).

Points: redis-benchmark -t set and -t get, values of --sizes bytes (1024
and 64), --conns clients (50 and 100), pipeline depths --pipeline (1 and
16), keyspace -r 10000 (filled before the first GET). redis-benchmark runs
by count, not time: each point's count is its warm-up rate times
--duration. Servers on CPU 1, redis-benchmark on CPU 0; repetitions
interleave the systems; medians with [min-max]. Reported: K ops/s, p50/p99
latency (redis-benchmark's), server CPU us/op (/proc/PID/stat), syscalls/op
(perf raw_syscalls:sys_enter), client CPU us/op (redis-benchmark's rusage:
where it approaches the server's, the client is the bottleneck).
Writes bench/results/kvs-<time>.md and .json.

--client pload runs the same points with bench/pload --resp (about half
redis-benchmark's CPU per op): the same commands and keys (SET
key:__rand_int__ with --sizes bytes of 'x', GET key:__rand_int__, -k 10000,
-P depth), for --duration seconds per run instead of a count (a 1 s run
first warms each point up); the keyspace is filled by a SET of every key
before each GET point instead of by redis-benchmark. Error replies, null
replies (GET misses) and pload's socket or protocol errors are listed under
Notes.
"""

import csv
import io
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import paste_proc  # noqa: E402  (harness put python/ on sys.path)

KEYSPACE = 10000
FILL_OPS = 50000           # ~99% of a 10 000-key space: GETs find values
CALIBRATE_OPS = 20000
MAX_OPS = 3_000_000        # a bound for each run, whatever the rate
STORE_SIZE = "1G"


class RedisServer(harness.Measured, paste_proc.RedisServer):
    """redis-server 7 pinned to cpu, its directory on the medium;
    persistence: "always" (appendonly, appendfsync always) or "off"."""

    def __init__(self, name, persistence, cpu, medium_dir):
        args = (["--appendonly", "yes", "--appendfsync", "always"] if persistence == "always"
                else ["--appendonly", "no"])
        super().__init__(args, dir_base=medium_dir, tag="bench-" + name,
                         **harness.measured(name, cpu, 15, 15))


class FloorServer(harness.Measured, paste_proc.RespFloor):
    """bench/resp-floor: a RESP server on a paste port that stores nothing
    (SET: +OK; GET: a value as long as the last SET's). Its cost per op is
    the kernel's and the port's, the floor under pkvs and any server here."""

    def __init__(self, name, cpu, medium_dir, durability="none", pm_latency=0):
        super().__init__(None, [durability, pm_latency], store_dir=medium_dir,
                         tag="bench-" + name, **harness.measured(name, cpu, 15, 15))


class PkvsServer(harness.Measured, paste_proc.Pkvs):
    """pkvs pinned to cpu with a fresh store on the medium (deleted at stop);
    RESP on a free port, HTTP on another (for /stats)."""

    def __init__(self, name, args, cpu, medium_dir, env=None):
        super().__init__(list(args) + ["--store-size", STORE_SIZE], store_dir=medium_dir,
                         env=env, tag="bench-" + name, **harness.measured(name, cpu))
        self.cpu = cpu


class Point:
    def __init__(self, test, size, conns, pipeline):
        self.test, self.size, self.conns, self.pipeline = test, size, conns, pipeline
        self.workload = f"{test.upper()} {size} B" + (f" -P {pipeline}" if pipeline > 1 else "")
        self.ops = {}       # system name -> request count for the duration asked
        self._request_file = None

    def command(self):
        """The point's command as redis-benchmark -t sends it, for pload --resp."""
        key = "key:__rand_int__"
        if self.test == "set":
            return paste_proc.resp_command("SET", key, "x" * self.size)
        if self.test == "get":
            return paste_proc.resp_command("GET", key)
        raise harness.BenchError(f"--client pload runs --tests set,get only, not {self.test}")

    def request_file(self):
        if self._request_file is None:
            fd, self._request_file = tempfile.mkstemp(prefix="paste-bench-", suffix=".resp")
            with os.fdopen(fd, "wb") as f:
                f.write(self.command())
        return self._request_file

    def cleanup(self):
        if self._request_file:
            os.unlink(self._request_file)
            self._request_file = None


def redis_benchmark(port, point, n, cpu):
    """One redis-benchmark run; returns rps, latencies, client CPU per op."""
    cmd = ["taskset", "-c", str(cpu), "redis-benchmark", "-p", str(port), "-t", point.test,
           "-n", str(n), "-c", str(point.conns), "-d", str(point.size), "-P", str(point.pipeline),
           "-r", str(KEYSPACE), "--csv"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=max(60, n / 5000))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise harness.BenchError(f"redis-benchmark exit {p.returncode}: {p.stderr.strip()[:300]}")
    rows = [r for r in csv.reader(io.StringIO(p.stdout)) if r and r[0] != "test"]
    if not rows:
        raise harness.BenchError(f"redis-benchmark printed no result: {p.stdout[:300]} {p.stderr[:300]}")
    row = rows[0]
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"rps": float(row[1]), "lat_mean_us": float(row[2]) * 1e3,
            "lat_p50_us": float(row[4]) * 1e3, "lat_p99_us": float(row[6]) * 1e3,
            "requests": n, "client_cpu_us_per_req": cpu_s * 1e6 / n}


def pload(port, point, seconds, cpu):
    """One bench/pload --resp run of seconds: the same keys redis_benchmark
    returns, plus pload's counts (error and null replies, socket errors)."""
    extra = ["--resp", "-P", str(point.pipeline), "-k", str(KEYSPACE)]
    r = harness.run_pload(harness.pload_cmd(port, point.conns, seconds, point.request_file(),
                                            cpu, extra), seconds)
    if not r.get("requests"):
        raise harness.BenchError(f"pload completed no command: {r}")
    return r


def measure(server, point, duration, cpus, perf, client="redis-benchmark"):
    if client == "pload":
        window = duration + 1.0
    else:
        n = point.ops[server.name]
        window = n / point.rate[server.name] + 1.0
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
    return r


def calibrate(server, point, duration, cpus, client="redis-benchmark"):
    """redis-benchmark: the count for --duration; pload (timed): a 1 s warm-up."""
    if client == "pload":
        r = pload(server.resp_port, point, 1, cpus[1])
    else:
        r = redis_benchmark(server.resp_port, point, CALIBRATE_OPS, cpus[1])
    point.rate = getattr(point, "rate", {})
    point.rate[server.name] = r["rps"]
    point.ops[server.name] = int(min(MAX_OPS, max(CALIBRATE_OPS, r["rps"] * duration)))


def fill(server, size, cpus, client="redis-benchmark"):
    if client != "pload":
        redis_benchmark(server.resp_port, Point("set", size, 50, 16), FILL_OPS, cpus[1])
        return
    # Every key of the keyspace once (pload runs by time, not count): the
    # keys pload's -k KEYSPACE draws, so every GET finds a value.
    value = b"x" * size
    with paste_proc.RespConn(server.resp_port, timeout=60) as c:
        for start in range(0, KEYSPACE, 500):
            keys = range(start, min(KEYSPACE, start + 500))
            c.send(b"".join(paste_proc.resp_command("SET", b"key:%012d" % k, value)
                            for k in keys))
            for _ in keys:
                reply = c.read_reply()
                if reply != "OK":
                    raise harness.BenchError(f"fill of {server.name}: SET replied {reply!r}")


def client_notes(points, names, results):
    """pload's counts worth a line: error replies, GET misses, socket errors."""
    notes = []
    for i, pt in enumerate(points):
        for n in names:
            for rep, r in enumerate(results[(i, n)]):
                if not r or "error_replies" not in r:
                    continue
                bad = [f"{r[k]} {what}" for k, what in (("error_replies", "error replies"),
                                                       ("null_replies", "null replies (misses)"),
                                                       ("socket_errors", "socket errors"))
                       if r.get(k)]
                if bad:
                    notes.append(f"{n}, {pt.workload}, c={pt.conns}, rep {rep + 1}: "
                                 f"{', '.join(bad)} of {r['requests']} commands")
    return notes


def row(point, name, runs):
    ok = [r for r in runs if r]
    med = harness.median_of
    return ("| " + " | ".join([
        point.workload, str(point.conns), name,
        harness.spread([r["rps"] for r in ok], 1, 1e-3),
        harness.fmt(med(ok, "lat_p50_us"), 0), harness.fmt(med(ok, "lat_p99_us"), 0),
        harness.spread([r["cpu_us_per_req"] for r in ok], 2),
        harness.fmt(med(ok, "syscalls_per_req"), 3),
        harness.fmt(med(ok, "client_cpu_us_per_req"), 2)]) + " |")


def parse_args(argv=None):
    p = harness.common_args(__doc__.splitlines()[0], client="redis-benchmark",
                            clients=("redis-benchmark", "pload"))
    p.add_argument("--conns", type=harness.conn_list, default="50,100")
    p.add_argument("--sizes", type=harness.conn_list, default="1024,64",
                   help="value sizes in bytes (default %(default)s)")
    p.add_argument("--pipeline", type=harness.conn_list, default="1,16")
    p.add_argument("--tests", default="set,get",
                   help="redis-benchmark tests (default %(default)s; pload: set and get only)")
    p.add_argument("--medium", choices=("shm", "disk"), default="shm",
                   help="shm: /dev/shm, pkvs emulated PM; disk: --disk-dir, pkvs fsync")
    p.add_argument("--disk-dir", default="/var/tmp")
    p.add_argument("--pm-latency", type=int, default=0,
                   help="pkvs emulated PM: ns per fence (the paper: 10000)")
    p.add_argument("--systems", default="pkvs,redis-always,redis-off",
                   help="a subset of pkvs,redis-always,redis-off,floor,floor-durable,pkvs-pagecache,"
                   "pkvs-epoll-batch "
                   "(default %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="1 KiB, 50 clients, no pipeline, 1 repetition of 3 s")
    args = p.parse_args(argv)
    if args.quick:
        args.conns, args.sizes, args.pipeline, args.reps, args.duration = [50], [1024], [1], 1, 3
    return args


def run(argv=None):
    args = parse_args(argv)
    cpus, perf = harness.setup(args)
    medium = "/dev/shm" if args.medium == "shm" else args.disk_dir
    durability = "emulated" if args.medium == "shm" else "fsync"
    pkvs_args = ["--durability", durability, "--pm-latency", str(args.pm_latency)]
    makers = {
        "pkvs": lambda: PkvsServer("pkvs", pkvs_args, cpus[0], medium),
        "redis-always": lambda: RedisServer("redis-always", "always", cpus[0], medium),
        "redis-off": lambda: RedisServer("redis-off", "off", cpus[0], medium),
        "floor": lambda: FloorServer("floor", cpus[0], medium),
        "floor-durable": lambda: FloorServer("floor-durable", cpus[0], medium, durability,
                                             args.pm_latency),
        "pkvs-pagecache": lambda: PkvsServer("pkvs-pagecache", pkvs_args, cpus[0], medium,
                                             env=dict(os.environ, PASTE_FSYNC_IO="mapped")),
        "pkvs-epoll-batch": lambda: PkvsServer("pkvs-epoll-batch",
                                               pkvs_args + ["--engine", "epoll-batch"], cpus[0],
                                               medium),
    }
    names = [n for n in args.systems.split(",") if n]
    if set(names) - set(makers):
        raise harness.BenchError(f"--systems: want a subset of {','.join(makers)}")
    if "pkvs-pagecache" in names and args.medium != "disk":
        raise harness.BenchError("--systems pkvs-pagecache compares fsync mode's ways: --medium disk")
    points = [Point(t, size, c, pl) for size in args.sizes for t in args.tests.split(",")
              for c in args.conns for pl in args.pipeline]
    client = args.client
    if client == "pload":
        for pt in points:
            pt.command()            # only SET and GET: refuse others before any server starts
    results = {(i, n): [] for i in range(len(points)) for n in names}
    failures, servers = [], {}
    log = harness.progress
    log(f"kvs: {len(points)} point(s) x {len(names)} systems x {args.reps} rep(s) x "
        f"{args.duration} s, medium {medium}")
    try:
        for n in names:
            log(f"  starting {n}")
            servers[n] = makers[n]().start()
            for size in args.sizes:
                fill(servers[n], size, cpus, client)
        for i, pt in enumerate(points):
            for n in names:
                calibrate(servers[n], pt, args.duration, cpus, client)
        for rep in range(args.reps):
            for i, pt in enumerate(points):
                if pt.test == "get":     # the values GET reads have pt.size bytes
                    for n in names:
                        fill(servers[n], pt.size, cpus, client)
                k = rep % len(names)
                for n in names[k:] + names[:k]:
                    srv = servers[n]
                    log(f"  rep {rep + 1}/{args.reps} {pt.workload} c={pt.conns} {n} ...",
                        end="", flush=True)
                    try:
                        r = measure(srv, pt, args.duration, cpus, perf, client)
                        log(" %.0f ops/s, %s us/op" % (r["rps"], harness.fmt(r["cpu_us_per_req"], 2)))
                    except (harness.BenchError, OSError, subprocess.TimeoutExpired) as e:
                        r = None
                        log(" failed")
                        failures.append(f"{n}, {pt.workload}, c={pt.conns}, rep {rep + 1}: {e}")
                    results[(i, n)].append(r)
    finally:
        for pt in points:
            pt.cleanup()
        for n, srv in servers.items():
            code = srv.stop()
            if code not in (0, None):
                failures.append(f"{n}: exit code {code} after SIGTERM")
    cols = ["workload", "clients", "system", "K ops/s median [min-max]", "p50 us", "p99 us",
            "server CPU us/op median [min-max]", "syscalls/op", "client CPU us/op"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for i, pt in enumerate(points):
        for n in names:
            lines.append(row(pt, n, results[(i, n)]))
    # floor/redis-*: the least any server answering over kernel TCP here
    # could reach; pkvs-floor: pkvs's own work per op.
    pairs = [(a, b) for a, b in (("pkvs", "redis-always"), ("pkvs", "redis-off"),
                                 ("pkvs-pagecache", "redis-always"), ("pkvs", "pkvs-pagecache"),
                                 ("pkvs-epoll-batch", "redis-always"), ("pkvs", "pkvs-epoll-batch"),
                                 ("floor", "redis-always"), ("floor", "redis-off"),
                                 ("floor-durable", "redis-always"))
             if a in names and b in names]
    def median(i, name, key):
        return harness.median_of([r for r in results[(i, name)] if r], key)

    ratio_lines = []
    for i, pt in enumerate(points):
        for a, b in pairs:
            ca, cb = median(i, a, "cpu_us_per_req"), median(i, b, "cpu_us_per_req")
            ta, tb = median(i, a, "rps"), median(i, b, "rps")
            if ca and cb and ta and tb:
                ratio_lines.append(f"- {pt.workload}, c={pt.conns}: {a}/{b} ops/s {ta / tb:.2f}x, "
                                   f"CPU per op {ca / cb:.2f}x")
        for fl in ("floor", "floor-durable"):
            if "pkvs" in names and fl in names:
                cp, cf = median(i, "pkvs", "cpu_us_per_req"), median(i, fl, "cpu_us_per_req")
                if cp and cf:
                    ratio_lines.append(f"- {pt.workload}, c={pt.conns}: pkvs "
                                       f"{cp - cf:+.2f} us/op over {fl}'s {cf:.2f}")
    notes = failures + client_notes(points, names, results)
    text = "\n\n".join(filter(None, [
        harness.header(f"Key-value stores over RESP: pkvs ({durability}"
                       f"{', %d ns per fence' % args.pm_latency if args.pm_latency else ''}) "
                       f"vs Redis 7 (appendfsync always; persistence off), medium {medium}",
                       args, cpus, perf, unit="op"),
        "\n".join(lines),
        "Ratios of medians:\n" + "\n".join(ratio_lines) if ratio_lines else "",
        ("Notes:\n" + "\n".join("- " + f for f in notes)) if notes else ""]))
    medium_label = ("disk, pkvs fsync" if args.medium == "disk" else "/dev/shm, pkvs emulated PM"
                    + (f" {args.pm_latency} ns" if args.pm_latency else ""))
    raw = [{"workload": pt.workload, "clients": pt.conns, "system": n, "runs": results[(i, n)],
            "medium": medium_label}
           for i, pt in enumerate(points) for n in names]
    harness.save("kvs", text, raw, args.out, args, cpus)
    return 1 if failures else 0


if __name__ == "__main__":
    harness.main_guard(run)
