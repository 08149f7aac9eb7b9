#!/usr/bin/env python3
"""The seed's WAL workload: phttpd --mode wal, uring vs uring --copy vs epoll.

POST /log with a 1024-byte body (1156-byte request), one client thread at
50 and 100 connections, in three durability configurations: emulated PM
with no extra latency, emulated PM with a 10 us busy wait per fence (the
seed's setting), and fdatasync on a disk file; `--configs emul0-8k` adds
an 8 KiB-body point where the zero-copy saving is large enough to measure. The client is
bench/pload by default: one wrk thread saturates its own CPU near 70 K of
these requests/s, before the server does (--client wrk runs wrk with
wal.lua, the same bytes). The harness truncates the log before every run,
so the store never fills. Prints a markdown table (see bench/README.md) and
writes it to bench/results/wal-<time>.md.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SYSTEMS = [("uring", ["--engine", "uring"]),
           ("uring --copy", ["--engine", "uring", "--copy"]),
           ("epoll", ["--engine", "epoll"])]


HEAD_LEN = 132    # the seed's request: 132-byte head + 1024-byte body


def wal_request(body_len=1024):
    """The bytes wal.lua makes wrk send (an X-Pad header fills the head)."""
    def fmt(pad):
        return (b"POST /log HTTP/1.1\r\nHost: localhost:60000\r\nX-Pad: " + pad +
                b"\r\nContent-Length: %d\r\n\r\n" % body_len + b"w" * body_len)
    req = fmt(b"p" * (HEAD_LEN + body_len - len(fmt(b""))))
    assert len(req) == HEAD_LEN + body_len
    return req


class Config:
    def __init__(self, key, label, args, store_dir, body_len=1024, conns=None):
        self.key, self.label, self.args, self.store_dir = key, label, args, store_dir
        self.body_len = body_len
        self.conns = conns      # None: --conns


# The stores on /dev/shm get --store-size (default 2G): ~950 K buffers, so a
# 5 s run at up to ~150 K req/s cannot fill one (the harness truncates the
# log before every run); creating (prefaulting) a bigger store costs
# seconds per server.
CONFIGS = [
    Config("emul0", "wal emulated pm 0us",
           ["--durability", "emulated", "--pm-latency", "0"], "/dev/shm"),
    Config("emul10", "wal emulated pm 10us",
           ["--durability", "emulated", "--pm-latency", "10000"], "/dev/shm"),
    # A disk file: fdatasync per batch (uring) or per request (epoll).
    Config("fsync", "wal fsync (disk)",
           ["--durability", "fsync", "--store-size", "1G"], "/var/tmp"),
    # Zero copy vs --copy where the copy is big enough to see: with the
    # default 1 KiB body the saved memcpy is ~1 % of a request's CPU, under
    # the run-to-run noise of a shared 2-CPU virtual machine. 50 connections only; an 8 KiB body spans
    # five 2 KiB buffers, so a 5 s run needs a 4G store per server.
    Config("emul0-8k", "wal emulated pm 0us, 8 KiB body",
           ["--durability", "emulated", "--pm-latency", "0", "--store-size", "4G"],
           "/dev/shm", body_len=8192, conns=[50]),
]


def parse_args(argv=None):
    p = harness.common_args(__doc__.splitlines()[0], client="pload")
    p.add_argument("--conns", type=harness.conn_list, default="50,100",
                   help="comma-separated connection counts (default %(default)s)")
    p.add_argument("--configs", default="emul0,emul10,fsync",
                   help="comma-separated subset of " + ",".join(c.key for c in CONFIGS) +
                   " (default %(default)s; emul0-8k needs 3 x 4 GiB of /dev/shm)")
    p.add_argument("--store-size", default="2G",
                   help="store size on /dev/shm (default %(default)s; fsync uses 1G on disk)")
    p.add_argument("--quick", action="store_true",
                   help="demo size: emul10 only, 100 connections, 1 repetition, "
                   "3 s, 3G store")
    args = p.parse_args(argv)
    if args.quick:
        # 3 s at up to ~300 K req/s (pload, no fence latency on a quiet
        # machine) is ~900 K records of one 2 KiB buffer each: they would
        # fill a 1G store, and the rest would be 507s, counted as non-2xx.
        args.conns, args.configs, args.reps, args.duration = [100], "emul10", 1, 3
        args.store_size = "3G"
    known = {c.key: c for c in CONFIGS}
    keys = [k.strip() for k in args.configs.split(",") if k.strip()]
    bad = [k for k in keys if k not in known]
    if bad or not keys:
        p.error(f"--configs: unknown {', '.join(bad) or '(empty)'}; "
                f"choose from {', '.join(known)}")
    args.configs = [known[k] for k in keys]
    return args


def run(argv=None, kind="wal"):
    args = parse_args(argv)
    cpus, perf = harness.setup(args)
    names = [name for name, _ in SYSTEMS]
    points, results, failures = [], {}, []
    for cfg in args.configs:
        if "--store-size" not in cfg.args:
            cfg.args = cfg.args + ["--store-size", args.store_size]
        systems = [harness.System(name, ["--mode", "wal"] + flags + cfg.args)
                   for name, flags in SYSTEMS]
        script_args = [cfg.body_len] if cfg.body_len != 1024 else []
        pts = [harness.Point(cfg.label, c, "wal.lua", script_args,
                             request=wal_request(cfg.body_len))
               for c in (cfg.conns or args.conns)]
        res, fail = harness.run_interleaved(cfg.label, systems, pts, args.reps,
                                            args.duration, cpus, perf,
                                            store_dir=cfg.store_dir,
                                            client=args.client)
        for (i, name), runs in res.items():
            results[(len(points) + i, name)] = runs
        points += pts
        failures += fail
    systems = [harness.System(name, []) for name in names]
    flags = "; ".join(f"{c.key}: {' '.join(c.args)} (store in {c.store_dir})"
                      for c in args.configs)
    return harness.report(
        kind, "WAL: phttpd --mode wal, POST /log 1156 B request (1024 B body; "
        "emul0-8k: 8324 B request, 8 KiB body)",
        systems, points, results, failures,
        [("uring", "epoll"), ("uring", "uring --copy")], args, cpus, perf,
        extra=f"Configurations (systems run side by side within each): {flags}. "
              "Every system gets the same request (132-byte head + body); the "
              "harness truncates the log before every run.")


if __name__ == "__main__":
    harness.main_guard(run)
