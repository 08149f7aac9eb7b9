#!/usr/bin/env python3
"""The seed's RPC workload: phttpd --engine uring vs --engine epoll vs nginx.

44-byte keep-alive GET, ~151-byte response (--body-len 64), wrk -t1 at
1, 50, 100 and 400 connections, plus 16-deep pipelining at 100 connections.
nginx (one worker, `return 200` with the same 64-byte body, keep-alive;
bench/short.py's configuration) is the reference the seed's figure also
shows; --systems uring,epoll leaves it out. Prints a markdown table (see
bench/README.md for the columns), writes it to bench/results/rpc-<time>.md
and draws bench/results/rpc-<time>.png/.svg (bench/plot.py).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from short import NginxServer  # noqa: E402

SYSTEMS = [harness.System("uring", ["--engine", "uring", "--body-len", "64"]),
           harness.System("epoll", ["--engine", "epoll", "--body-len", "64"]),
           harness.System("nginx", [], server=NginxServer, label="nginx 1 worker")]
PAIRS = [("uring", "epoll"), ("uring", "nginx"), ("epoll", "nginx")]
# The bytes rpc.lua makes wrk send, for --client pload.
RPC_REQUEST = b"GET /rpc HTTP/1.1\r\nHost: localhost:60000\r\n\r\n"
assert len(RPC_REQUEST) == 44
PIPELINE_DEPTH = 16
PIPELINE_CONNS = 100


def parse_args(argv=None):
    p = harness.common_args(__doc__.splitlines()[0])
    p.add_argument("--conns", type=harness.conn_list, default="1,50,100,400",
                   help="comma-separated connection counts (default %(default)s)")
    p.add_argument("--no-pipeline", action="store_true",
                   help="skip the pipelined point (always skipped with --client pload)")
    p.add_argument("--quick", action="store_true",
                   help="demo size: 100 connections, 1 repetition, 3 s, no pipeline")
    p.add_argument("--systems", default="uring,epoll,nginx",
                   help="comma-separated subset of uring,epoll,nginx (default %(default)s)")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    if not names or set(names) - {s.name for s in SYSTEMS}:
        p.error(f"--systems: want a subset of uring,epoll,nginx, got {args.systems!r}")
    args.systems = [s for s in SYSTEMS if s.name in names]
    if args.quick:
        args.conns, args.reps, args.duration, args.no_pipeline = [100], 1, 3, True
    return args


def points(args):
    pts = [harness.Point("rpc", c, "rpc.lua", request=RPC_REQUEST) for c in args.conns]
    if not args.no_pipeline and args.client == "wrk":
        pts.append(harness.Point(f"rpc pipelined x{PIPELINE_DEPTH}", PIPELINE_CONNS,
                                 "pipeline.lua", [PIPELINE_DEPTH]))
    return pts


def run(argv=None, kind="rpc"):
    args = parse_args(argv)
    cpus, perf = harness.setup(args)
    pts = points(args)
    results, failures = harness.run_interleaved(
        "RPC", args.systems, pts, args.reps, args.duration, cpus, perf,
        client=args.client)
    names = {s.name for s in args.systems}
    return harness.report(
        kind, "RPC: phttpd uring vs epoll vs nginx (44 B request, ~151 B response)",
        args.systems, pts, results, failures, [p for p in PAIRS if set(p) <= names],
        args, cpus, perf)


if __name__ == "__main__":
    harness.main_guard(run)
