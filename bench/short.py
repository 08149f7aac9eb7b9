#!/usr/bin/env python3
"""Short connections: phttpd uring vs epoll vs nginx, one request per TCP connection.

mTCP's headline workload: every request on a new connection (the client
connects, sends a GET with Connection: close, reads the 64-byte reply, the
server closes). Connection set-up and teardown dominate: accept, the
socket's creation and destruction, the first receive and the close.
Client: bench/pload --reconnect (or wrk -H "Connection: close"), at 50 and
400 concurrent connections. nginx runs with one worker, no master, no
access log, `return 200` with the same 64-byte body, from a configuration
written into a temporary directory.

Systems: phttpd's two engines with --defer-accept 1 (TCP_DEFER_ACCEPT: a
connection is accepted with its request; worth ~2.5 us of server CPU per
connection to every server), nginx as configured by default, and nginx with
`listen ... deferred` (the same socket option), so that both servers are
also compared like for like. `--systems` adds uring-nodefer and
epoll-nodefer (phttpd without the option). Prints a markdown table (columns
as in bench/README.md, per connection instead of per request) and writes it
to bench/results/short-<time>.md.
"""

import os
import shutil
import signal
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import paste_proc  # noqa: E402  (harness put python/ on sys.path)

BODY_LEN = 64
# pload --reconnect would add the Connection header itself; spelled out so
# the bytes on the wire are the same for wrk -H and pload.
SHORT_REQUEST = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
# The target for paste against nginx, per point.
GOAL_CPU = 0.8
GOAL_RATE = 1.0

NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{
    worker_connections {worker_connections};
}}
http {{
    access_log off;
    # rpc.py's keep-alive load: never close a connection after its
    # 1000th request (nginx's default), as phttpd never does.
    keepalive_requests 100000000;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    default_type text/plain;
    server {{
        listen 127.0.0.1:{port} backlog=4096{listen_opts};
        location / {{
            return 200 "{body}";
        }}
    }}
}}
"""


class NginxServer(harness.Measured, paste_proc.Server):
    """nginx as a harness server: one process (master_process off), pinned
    like phttpd, its configuration, pid and error log in a temporary
    directory removed on stop(). No /stats: stats() is empty."""

    LISTEN_OPTS = ""      # appended to the listen directive

    def __init__(self, name, args, cpu, store_dir=None):
        self.exe = shutil.which("nginx") or "/usr/sbin/nginx"
        self.args = list(args)
        self.cpu = cpu
        self.dir = None
        kw = harness.measured(name, cpu, start_timeout=10)
        self.prefix = kw.pop("prefix")      # argv is made at start(), with the directory
        super().__init__([self.exe], listen_re=None, port=paste_proc.free_port(), **kw)

    def start(self, timeout=None):
        if not os.access(self.exe, os.X_OK):
            raise harness.BenchError("nginx is not installed: run `make deps`")
        self.dir = tempfile.mkdtemp(prefix="paste-bench-nginx-")
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(dir=self.dir, port=self.fixed_port, body="x" * BODY_LEN,
                                      worker_connections=8192, listen_opts=self.LISTEN_OPTS))
        self.argv = self.prefix + [self.exe, "-e", os.path.join(self.dir, "error.log"),
                                   "-p", self.dir, "-c", conf] + self.args
        return super().start(timeout)

    def tail(self):
        lines = list(self.stderr_tail)
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                lines += f.read().splitlines()[-20:]
        except (OSError, TypeError):
            pass
        return "\n".join("    " + l for l in lines) or "    (nothing)"

    def stats(self):
        return {}

    def checkpoint(self):
        pass

    def stop(self, timeout=None, keep_store=False):
        try:
            return super().stop(signal.SIGQUIT, timeout)   # SIGQUIT: graceful, exit 0
        finally:
            if self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None


class NginxDeferredServer(NginxServer):
    """nginx with `listen ... deferred`: TCP_DEFER_ACCEPT, as phttpd's
    --defer-accept."""

    LISTEN_OPTS = " deferred"


PHTTPD = ["--body-len", str(BODY_LEN)]
DEFER = ["--defer-accept", "1"]
SYSTEMS = [harness.System("uring", ["--engine", "uring"] + PHTTPD + DEFER),
           harness.System("epoll", ["--engine", "epoll"] + PHTTPD + DEFER),
           harness.System("nginx", [], server=NginxServer, label="nginx 1 worker"),
           harness.System("nginx-deferred", [], server=NginxDeferredServer,
                          label="nginx 1 worker, listen deferred"),
           harness.System("uring-nodefer", ["--engine", "uring"] + PHTTPD),
           harness.System("epoll-nodefer", ["--engine", "epoll"] + PHTTPD)]
DEFAULT_SYSTEMS = "uring,epoll,nginx,nginx-deferred"
PAIRS = [("uring", "nginx"), ("uring", "nginx-deferred"), ("epoll", "nginx"),
         ("uring", "epoll"), ("uring", "uring-nodefer"), ("uring-nodefer", "nginx"),
         ("epoll", "epoll-nodefer")]


def parse_args(argv=None):
    p = harness.common_args(__doc__.splitlines()[0], client="pload")
    p.add_argument("--conns", type=harness.conn_list, default="50,400",
                   help="comma-separated connection counts (default %(default)s)")
    p.add_argument("--systems", default=DEFAULT_SYSTEMS,
                   help="comma-separated subset of " + ",".join(s.name for s in SYSTEMS)
                   + " (default %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="50 connections, 1 repetition, 3 s")
    args = p.parse_args(argv)
    if args.quick:
        args.conns, args.reps, args.duration = [50], 1, 3
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    known = {s.name for s in SYSTEMS}
    if not names or set(names) - known:
        p.error(f"--systems: want a subset of {','.join(sorted(known))}, got {args.systems!r}")
    args.systems = [s for s in SYSTEMS if s.name in names]
    return args


def goal_lines(points, results, systems):
    """The target, per point: paste (uring) at most 0.8x the CPU per
    connection of nginx as configured by default, and at least its
    connections/s; the same ratios against nginx deferred for reference."""
    names = {s.name for s in systems}
    out = []
    for ref, what in (("nginx", "the goal"), ("nginx-deferred", "for reference")):
        if {"uring", ref} <= names:
            out.append(goal_vs(points, results, ref, what))
    return "\n\n".join(out)


def goal_vs(points, results, ref, what):
    lines = [f"paste uring vs {ref} ({what}): CPU per connection <= {GOAL_CPU}x and "
             f"connections/s >= {GOAL_RATE}x:"]
    for i, pt in enumerate(points):
        ru = [r for r in results[(i, "uring")] if r]
        rn = [r for r in results[(i, ref)] if r]
        cu, cn = harness.median_of(ru, "cpu_us_per_req"), harness.median_of(rn, "cpu_us_per_req")
        tu, tn = harness.median_of(ru, "rps"), harness.median_of(rn, "rps")
        if not (cu and cn and tu and tn):
            lines.append(f"- c={pt.conns}: n/a (a system has no successful run)")
            continue
        cpu_ok, rate_ok = cu / cn <= GOAL_CPU, tu / tn >= GOAL_RATE
        lines.append(f"- c={pt.conns}: CPU {cu / cn:.2f}x ({'met' if cpu_ok else 'NOT met'}), "
                     f"connections/s {tu / tn:.2f}x ({'met' if rate_ok else 'NOT met'})")
    return "\n".join(lines)


def run(argv=None):
    args = parse_args(argv)
    cpus, perf = harness.setup(args)
    pts = [harness.Point("short", c, None, request=SHORT_REQUEST,
                         wrk_args=["-H", "Connection: close"], pload_args=["--reconnect"])
           for c in args.conns]
    results, failures = harness.run_interleaved(
        "short connections", args.systems, pts, args.reps, args.duration, cpus, perf,
        client=args.client, unit="conn")
    pairs = [(a, b) for a, b in PAIRS if {a, b} <= {s.name for s in args.systems}]
    return harness.report(
        "short", f"Short connections: one {len(SHORT_REQUEST)} B GET per connection, "
        f"{BODY_LEN} B body; phttpd uring vs epoll vs nginx (default and deferred)",
        args.systems, pts, results, failures, pairs, args, cpus, perf,
        extra=goal_lines(pts, results, args.systems), unit="conn")


if __name__ == "__main__":
    harness.main_guard(run)
