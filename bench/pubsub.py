#!/usr/bin/env python3
"""PUBLISH fan-out over RESP: pkvs vs Redis 7 and Valkey 8.1, persistence off.

Systems (bench/kvs.py's servers, started side by side by this script,
pinned to the server CPU): pkvs (emulated PM on /dev/shm; PUBLISH touches
no store), redis-off, valkey-off (skipped with a note where its wheel is
missing) and, when --systems names it, redis-always.

Each run connects --subscribers connections that SUBSCRIBE to one channel,
checks that one PUBLISH reaches every one of them, then runs
`redis-benchmark -c CONNS -n N -P P PUBLISH ch <payload>` on the client CPU.
Meanwhile one thread of this script, on the client CPU too, drains every
subscriber socket (selectors, recv of up to 1 MiB) and counts delivered
messages by their bytes: in RESP2 each is exactly
`*3\\r\\n$7\\r\\nmessage\\r\\n$2\\r\\nch\\r\\n$LEN\\r\\nPAYLOAD\\r\\n`. A run
fails unless every subscriber received exactly N such messages and its
bytes end with one: a subscriber the server dropped fails it. Every
system runs with `client-output-buffer-limit pubsub 0 0 0` (no limit), so
a subscriber that lags behind a pipelined publisher is not dropped.

Reported per system and point (payload --sizes x --pipeline), medians
[min-max] over --reps repetitions with the systems interleaved:
- K pub/s: redis-benchmark's PUBLISH rate;
- K msg/s: delivered messages / the time from the publisher's start to
  the last delivered byte;
- server CPU us/msg: server utime+stime (/proc/PID/stat) from before the
  publisher starts to after the last delivery, / delivered messages;
- syscalls/msg: perf raw_syscalls:sys_enter over the run / delivered
  messages (n/a where perf is missing or refused);
- publisher CPU us/pub, subscriber CPU us/msg: the client side (both on
  the client CPU: where their sum nears the run's wall time, the client
  set the pace, not the server).
A run of N/10 publishes per point and system first warms the server up
and sizes perf's window.

    python3 bench/pubsub.py --quick         # 1 KiB, -P 1, one repetition (~10 s)
    python3 bench/pubsub.py                 # 3 B and 1 KiB, -P 1 and 16, 3 reps (~4 min)
    python3 bench/pubsub.py --systems pkvs,redis-off,redis-always --subscribers 50

Writes bench/results/pubsub-<time>.md and .json (no figure).
"""

import argparse
import os
import selectors
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import kvs  # noqa: E402
import paste_proc  # noqa: E402  (harness put python/ on sys.path)

CHANNEL = "ch"
DRAIN_TIMEOUT = 30.0   # after the publisher exits: a lagging subscriber's backlog
RUN_ERRORS = (harness.BenchError, OSError, paste_proc.ProtocolError, paste_proc.ConnectionClosed,
              subprocess.TimeoutExpired)


def message(size):
    """One delivered message's bytes in RESP2."""
    ch = CHANNEL.encode()
    return b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(ch), ch, size, b"x" * size)


class Point:
    """PUBLISH of a size-byte payload by conns clients at pipeline depth;
    what kvs.redis_benchmark() runs as its own command."""

    def __init__(self, size, conns, pipeline, n):
        self.size, self.conns, self.pipeline = size, conns, pipeline
        self.test = kvs.Test("publish", ["PUBLISH", CHANNEL, "x" * size], int, own_command=True)
        # redis-benchmark sends whole pipelines: exactly n when the depth divides n.
        self.n = -(-n // pipeline) * pipeline
        self.workload = f"PUBLISH {size} B" + (f" -P {pipeline}" if pipeline > 1 else "")
        self.wall = {}    # system -> seconds per publish, from the warm-up

    def value(self):
        return None       # the payload is in the command already


class Subscribers:
    """count connections subscribed to CHANNEL; drain(n) reads every one
    in a thread until each holds n messages of msg's bytes (or it closed)."""

    def __init__(self, port, count, msg):
        self.msg, self.conns = msg, []
        try:
            for _ in range(count):
                c = paste_proc.RespConn(port, timeout=10)
                self.conns.append(c)
                reply = c.command("SUBSCRIBE", CHANNEL)
                if reply != [b"subscribe", CHANNEL.encode(), 1] or c.buf:
                    raise harness.BenchError(f"SUBSCRIBE {CHANNEL} replied {reply!r}")
        except BaseException:
            self.close()
            raise

    def close(self):
        if getattr(self, "thread", None):
            self.end()
        for c in self.conns:
            c.close()

    def drain(self, n):
        self.want = n * len(self.msg)
        self.got = [0] * len(self.conns)
        self.tails = [b""] * len(self.conns)
        self.closed, self.halt, self.last, self.cpu_s = [], False, None, 0.0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        t0, size = time.thread_time(), len(self.msg)
        sel = selectors.DefaultSelector()
        for i, c in enumerate(self.conns):
            c.sock.setblocking(False)
            sel.register(c.sock, selectors.EVENT_READ, i)
        left = set(range(len(self.conns)))
        while left and not self.halt:
            for key, _ in sel.select(0.1):
                i = key.data
                try:
                    data = key.fileobj.recv(1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(key.fileobj)
                    self.closed.append(i)
                    left.discard(i)
                    continue
                self.last = time.monotonic()
                self.got[i] += len(data)
                self.tails[i] = data[-size:] if len(data) >= size else (self.tails[i] + data)[-size:]
                if self.got[i] >= self.want:
                    left.discard(i)
        sel.close()
        for c in self.conns:
            c.sock.setblocking(True)
        self.cpu_s = time.thread_time() - t0

    def end(self):
        self.halt = True
        self.thread.join()

    def wait(self, timeout):
        """Wait for the drain; None if every subscriber got its messages, else why not."""
        self.thread.join(timeout)
        self.end()
        size = len(self.msg)
        bad = [f"subscriber {i}: {got / size:.1f} messages of {self.want // size}"
               + (" (closed by the server)" if i in self.closed else "")
               for i, got in enumerate(self.got)
               if got != self.want or (got and self.tails[i] != self.msg)]
        return "; ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "") \
            if bad else None


def measure(server, point, subs, cpus, perf, n=None):
    """One run of n (default point.n) publishes with subs subscribers; perf
    None: no syscall count (the warm-up)."""
    n = n or point.n
    msg = message(point.size)
    sub = Subscribers(server.resp_port, subs, msg)
    try:
        # One PUBLISH first: it must reach every subscriber (outside the window).
        sub.drain(1)
        with paste_proc.RespConn(server.resp_port, timeout=10) as c:
            reply = c.command("PUBLISH", CHANNEL, "x" * point.size)
        why = sub.wait(10) or (None if reply == subs else f"PUBLISH replied {reply!r}, want {subs}")
        if why:
            raise harness.BenchError(f"first PUBLISH: {why}")
        window = 1.25 * n * point.wall[server.name] + 1.0 if server.name in point.wall else None
        ticks0 = server.cpu_ticks()
        counter = perf.start(server.pid, window) if perf and window else None
        if counter:
            time.sleep(0.25)
        try:
            sub.drain(n)
            t0 = time.monotonic()
            r = kvs.redis_benchmark(server.resp_port, point, n, cpus[1])
            why = sub.wait(DRAIN_TIMEOUT)
        finally:
            sub.end()
            syscalls = harness.SyscallCounter.finish(counter)
        ticks1 = server.cpu_ticks()
    finally:
        sub.close()
    if why:
        raise harness.BenchError(f"{n} publishes, {subs} subscribers: {why}")
    delivered, elapsed = n * subs, sub.last - t0
    r.update(publishes=n, delivered=delivered, elapsed_s=elapsed,
             msgs_per_s=delivered / elapsed,
             cpu_us_per_msg=(ticks1 - ticks0) * 1e6 / harness.CLK_TCK / delivered,
             syscalls_per_msg=syscalls / delivered if syscalls is not None else None,
             sub_cpu_us_per_msg=sub.cpu_s * 1e6 / delivered)
    return r


# ---------------------------------------------------------------- report

COLUMNS = ["workload", "system", "K pub/s median [min-max]", "K msg/s median [min-max]",
           "server CPU us/msg median [min-max]", "syscalls/msg", "publisher CPU us/pub",
           "subscriber CPU us/msg"]


def row(point, name, runs):
    ok, med = [r for r in runs if r], harness.median_of
    cells = ([harness.spread([r["rps"] for r in ok], 1, 1e-3),
              harness.spread([r["msgs_per_s"] for r in ok], 1, 1e-3),
              harness.spread([r["cpu_us_per_msg"] for r in ok], 3),
              harness.fmt(med(ok, "syscalls_per_msg"), 4),
              harness.fmt(med(ok, "client_cpu_us_per_req"), 2),
              harness.fmt(med(ok, "sub_cpu_us_per_msg"), 3)] if ok else ["failed"] + ["-"] * 5)
    return "| " + " | ".join([point.workload, name] + cells) + " |"


def ratio_lines(points, names, results):
    """pkvs against each peer: CPU per delivered message and messages/s."""
    lines = []
    for i, pt in enumerate(points):
        for peer in (n for n in names if n != "pkvs" and "pkvs" in names):
            med = [harness.median_of([r for r in results[(i, s)] if r], k)
                   for s in ("pkvs", peer) for k in ("cpu_us_per_msg", "msgs_per_s")]
            ca, ta, cb, tb = med
            if all(med):
                lines.append(f"- {pt.workload}: pkvs/{peer} CPU per msg {ca / cb:.2f}x, "
                             f"msg/s {ta / tb:.2f}x")
    return lines


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--systems", default="pkvs,redis-off,valkey-off",
                   help="a subset of pkvs,redis-off,valkey-off,redis-always (default %(default)s)")
    p.add_argument("--subscribers", type=int, default=10,
                   help="connections subscribed to the channel (default %(default)s)")
    p.add_argument("--conns", type=int, default=50,
                   help="publisher connections, redis-benchmark -c (default %(default)s)")
    p.add_argument("--sizes", type=harness.conn_list, default="3,1024",
                   help="payload sizes in bytes (default %(default)s)")
    p.add_argument("--pipeline", type=harness.conn_list, default="1,16")
    p.add_argument("--n", type=int, default=200000,
                   help="publishes per run at -P 1 (default %(default)s); pipelined "
                   "runs send 4x as many")
    p.add_argument("--reps", type=int, default=3, help="repetitions (default %(default)s)")
    p.add_argument("--out", help="also write the markdown report here")
    p.add_argument("--server-cpu", type=int, help="CPU for the servers (default 1)")
    p.add_argument("--client-cpu", type=int, help="CPU for the clients (default 0)")
    p.add_argument("--no-perf", action="store_true", help="skip the syscall count")
    p.add_argument("--quick", action="store_true",
                   help="1 KiB, no pipeline, one repetition of 50000 publishes")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.pipeline, args.reps, args.n = [1024], [1], 1, 50000
    if min(args.subscribers, args.conns, args.n) < 1:
        p.error("--subscribers, --conns and --n must be at least 1")
    args.systems = [s for s in args.systems.split(",") if s]
    args.client = "redis-benchmark"      # the report's meta names the client
    return args


def run(argv=None):
    args = parse_args(argv)
    # setup() checks a timed run's --duration; these runs go by count.
    cpus, perf = harness.setup(argparse.Namespace(**vars(args), duration=1))
    medium = "/dev/shm"
    makers = {
        "pkvs": lambda: kvs.PkvsServer("pkvs", ["--durability", "emulated"], cpus[0], medium),
        "redis-off": lambda: kvs.RedisServer("redis-off", "off", cpus[0], medium),
        "valkey-off": lambda: kvs.RedisServer("valkey-off", "off", cpus[0], medium,
                                              exe=kvs.valkey_server()),
        "redis-always": lambda: kvs.RedisServer("redis-always", "always", cpus[0], medium),
    }
    if not args.systems or set(args.systems) - set(makers):
        raise harness.BenchError(f"--systems: want a subset of {','.join(makers)}")
    # Pipelined publishers go several times faster: more publishes keep the runs comparable.
    points = [Point(size, args.conns, pl, args.n * (4 if pl > 1 else 1))
              for size in args.sizes for pl in args.pipeline]
    log = harness.progress
    servers, notes, failures, cold = {}, [], [], set()
    for n in args.systems:
        try:
            servers[n] = makers[n]()
        except paste_proc.MissingBinary as e:
            if n == "pkvs":
                raise
            notes.append(f"{n}: skipped: {e}")
            log(f"  {n}: skipped: {e}")
    names = list(servers)
    peers = list(dict.fromkeys((n.split("-")[0], servers[n].exe) for n in names if n != "pkvs"))
    results = {(i, n): [] for i in range(len(points)) for n in names}
    log(f"pubsub: {len(points)} point(s) x {len(names)} systems x {args.reps} rep(s), "
        f"{args.subscribers} subscribers, {args.conns} publishers")
    try:
        for n in names:
            log(f"  starting {n}")
            servers[n].start()
            # No pubsub output limit anywhere: the runs measure delivery, not
            # which server drops a subscriber that lags first.
            with paste_proc.RespConn(servers[n].resp_port, timeout=10) as c:
                r = c.command("CONFIG", "SET", "client-output-buffer-limit", "pubsub 0 0 0")
                if r != "OK":
                    raise harness.BenchError(f"{n}: CONFIG SET client-output-buffer-limit: {r!r}")
        for pt in points:
            for n in names:
                warm = max(pt.n // 10 // pt.pipeline, 2 * pt.conns) * pt.pipeline
                try:
                    r = measure(servers[n], pt, args.subscribers, cpus, None, warm)
                    pt.wall[n] = r["elapsed_s"] / warm
                except RUN_ERRORS as e:
                    log(f"  {n}, {pt.workload}: warm-up failed: {e}")
                    failures.append(f"{n}, {pt.workload}, warm-up: {str(e).strip()}")
                    cold.add((pt, n))     # its runs would fail alike: none
        for rep in range(args.reps):
            for i, pt in enumerate(points):
                k = rep % len(names)
                for n in [n for n in names[k:] + names[:k] if (pt, n) not in cold]:
                    log(f"  rep {rep + 1}/{args.reps} {pt.workload} {n} ...", end="", flush=True)
                    try:
                        r = measure(servers[n], pt, args.subscribers, cpus, perf)
                        log(" %.0f pub/s, %.0f msg/s, %s us/msg" % (
                            r["rps"], r["msgs_per_s"], harness.fmt(r["cpu_us_per_msg"], 3)))
                    except RUN_ERRORS as e:
                        r = None
                        log(" failed")
                        failures.append(f"{n}, {pt.workload}, rep {rep + 1}: {str(e).strip()}")
                    results[(i, n)].append(r)
    finally:
        harness.stop_servers(servers, failures)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += [row(pt, n, results[(i, n)]) for i, pt in enumerate(points) for n in names]
    head = [f"# PUBLISH fan-out over RESP: {args.subscribers} subscribers, "
            f"{args.conns} publisher connections; {', '.join(names)}", "",
            f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; command: {harness.run_command()}",
            f"- {args.reps} repetition(s) per point of {args.n} publishes ({4 * args.n} "
            "pipelined), systems interleaved; medians with [min-max]",
            f"- servers pinned to CPU {cpus[0]}; redis-benchmark and the subscribers' drain "
            f"thread to CPU {cpus[1]}",
            "- msg = one delivered message (publishes x subscribers); server CPU us/msg = "
            "utime+stime (/proc/PID/stat) / delivered; syscalls/msg = perf "
            "raw_syscalls:sys_enter / delivered"]
    head += kvs.header_lines(peers, None)
    if cpus[0] == cpus[1]:
        head.append("- WARNING: one CPU only: servers and clients share it")
    if not perf.enabled:
        head.append(f"- syscalls/msg n/a: {perf.why_not}")
    ratios = ratio_lines(points, names, results)
    text = "\n\n".join(filter(None, [
        "\n".join(head), "\n".join(lines),
        ("Ratios of medians (CPU per msg below 1 = pkvs is cheaper; msg/s above 1 = pkvs "
         "is faster):\n" + "\n".join(ratios)) if ratios else "",
        ("Notes:\n" + "\n".join("- " + f for f in failures + notes))
        if failures or notes else ""]))
    # "point", not "workload": bench/plot.py's figures count requests, not messages.
    raw = [{"point": pt.workload, "payload": pt.size, "pipeline": pt.pipeline,
            "clients": pt.conns, "subscribers": args.subscribers, "system": n,
            "runs": results[(i, n)]} for i, pt in enumerate(points) for n in names]
    harness.save("pubsub", text, raw, args.out, args, cpus)
    return 1 if failures else 0


if __name__ == "__main__":
    harness.main_guard(run)
