"""Shared benchmark machinery for bench/rpc.py and bench/wal.py.

Method (see bench/README.md): every compared server runs side by side in one
run, pinned to the server CPU, and is driven by one client thread (wrk -t1,
or bench/pload, the io_uring load generator) pinned to the client CPU.
Repetitions interleave the systems so that slow drifts of a noisy machine
(a shared 2-CPU virtual one) hit all of them alike; we report medians
with the spread.
Throughput saturates in the single-threaded client near 150 K req/s, so the
client-independent figures are the server's CPU time per request (from
/proc/PID/stat) and its syscalls per request (perf tracepoint count; strace
would slow the server tenfold and change its batching).

Starting and stopping servers and the HTTP client are python/paste_proc.py
(shared with the end-to-end tests); this file adds pinning, CPU and syscall
accounting, the load generators and the reports. Python 3 standard library
only.
"""

import argparse
import json
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
if os.path.join(ROOT, "python") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "python"))
import paste_proc  # noqa: E402  (python/paste_proc.py: servers, HTTP client)

BUILD = str(paste_proc.BUILD)
RESULTS_DIR = os.path.join(BENCH_DIR, "results")
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A failure the user should see as one clear sentence."""


# Taken at import: setup() later pins this process to the client CPU.
ALLOWED_CPUS = sorted(os.sched_getaffinity(0))


def default_cpus():
    """(server_cpu, client_cpu): different CPUs when the machine has two."""
    cpus = ALLOWED_CPUS
    if len(cpus) >= 2:
        return cpus[1], cpus[0]
    return cpus[0], cpus[0]


# ---------------------------------------------------------------- servers

def measured(name, cpu, start_timeout=60.0, stop_timeout=10.0):
    """paste_proc.Server keywords for a server under measurement: pinned to
    cpu (None: not pinned), stop() never raises (it returns the exit code,
    SIGKILL after stop_timeout), the last 40 lines of its output kept, and
    a new session, which keeps a terminal's Ctrl-C away from it: the
    harness stops it itself, so its store or directory is always removed."""
    return dict(name=name, prefix=["taskset", "-c", str(cpu)] if cpu is not None else [],
                start_timeout=start_timeout, stop_timeout=stop_timeout, check_exit=False,
                max_lines=40, new_session=True)


class Measured:
    """What the harness asks of every server it measures (a mixin before a
    paste_proc.Server class built with measured()'s keywords): a start that
    fails as a BenchError, its CPU time, the tail of its output."""

    @property
    def stderr_tail(self):
        """The last 40 lines of output (bench/demo.py shows them)."""
        return self.lines

    def start(self, timeout=None):
        try:
            return super().start(timeout)
        except paste_proc.ServerFailed as e:
            self.stop()
            why = (f"exited with code {e.returncode}" if e.returncode is not None
                   else f"was not ready within {e.timeout}s")
            raise BenchError(f"server {self.name} ({' '.join(self.argv)}) {why}; "
                             f"output:\n{self.tail()}")

    def tail(self):
        return "\n".join("    " + l for l in list(self.stderr_tail)) or "    (nothing)"

    def alive(self):
        return self.running()

    def cpu_ticks(self):
        """utime+stime of every thread of the server, in clock ticks."""
        with open(f"/proc/{self.pid}/stat") as f:
            # comm (field 2) may contain spaces: count from the last ')'.
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # fields 14 and 15


class Server(Measured, paste_proc.Phttpd):
    """One phttpd process pinned to cpu (None: not pinned) with its own
    fresh store file, deleted on stop() (a given store is kept). stop()
    never raises: it returns the exit code (SIGKILL after timeout)."""

    def __init__(self, name, args, cpu, store_dir="/dev/shm", store=None,
                 exe="phttpd"):
        super().__init__(args, store=store, store_dir=store_dir, exe=exe,
                         tag="bench-" + name.replace(" ", ""), **measured(name, cpu))
        self.cpu = cpu

    def checkpoint(self):
        """WAL servers: truncate the whole log before a run (outside the
        measured window), as a checkpoint would, so no run fills the store."""
        last = self.stats().get("log_last_lsn", 0)
        if not last:
            return
        try:
            resp = paste_proc.http_once(self.port, "DELETE", f"/log?upto={last}",
                                        host=self.host, timeout=60)
        except (paste_proc.ProtocolError, paste_proc.ConnectionClosed) as e:
            raise BenchError(f"DELETE /log on {self.name}: {e}")
        if resp.status != 200:
            raise BenchError(f"DELETE /log on {self.name}: HTTP {resp.status}")

    def stats(self, timeout=5.0):
        try:
            return super().stats(timeout)
        except (paste_proc.ProtocolError, paste_proc.ConnectionClosed) as e:
            raise BenchError(f"GET /stats on {self.name}: {e}")

    def stop(self, timeout=None, keep_store=False):
        """SIGTERM, then SIGKILL after timeout (stop_timeout). Returns the exit code."""
        return super().stop(timeout=timeout, keep_store=keep_store)


# ---------------------------------------------------------------- wrk

TIME_UNITS_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def to_us(value, unit):
    return float(value) * TIME_UNITS_US[unit]


def parse_wrk(text):
    """The numbers we report from `wrk --latency` output."""
    out = {}
    m = re.search(r"^\s*Latency\s+([\d.]+)(us|ms|s|m|h)\b", text, re.M)
    if m:
        out["lat_mean_us"] = to_us(*m.groups())
    m = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s|m|h)\b", text, re.M)
    if m:
        out["lat_p99_us"] = to_us(*m.groups())
    m = re.search(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h)", text, re.M)
    if m:
        out["requests"] = int(m.group(1))
        out["elapsed_s"] = to_us(m.group(2), m.group(3)) / 1e6
    m = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
    if m:
        out["rps"] = float(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), "
                  r"timeout (\d+)", text)
    out["socket_errors"] = sum(map(int, m.groups())) if m else 0
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out["non2xx"] = int(m.group(1)) if m else 0
    # wrk prints 0.00us for a percentile it failed to compute (seen with
    # pipelining and few samples): that is "unknown", not "fast".
    if out.get("lat_p99_us") == 0 and out.get("lat_mean_us"):
        out["lat_p99_us"] = None
    if "rps" not in out or "requests" not in out:
        raise BenchError("could not parse wrk output:\n" + text)
    return out


def wrk_cmd(url, conns, duration, script, cpu, script_args=(), extra=()):
    """wrk -t1; script None runs wrk's own GET; extra: more wrk flags (-H ...)."""
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--latency"] + list(extra)
    if script:
        cmd += ["-s", os.path.join(BENCH_DIR, script)]
    cmd.append(url)
    if script_args:
        cmd += ["--"] + [str(a) for a in script_args]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    return cmd


def run_client(cmd, duration):
    """Run a load generator; (exit code, stdout, stderr, its CPU seconds).

    os.wait4 gives the CPU time of exactly this child (taskset execs the
    client in the same process), which subprocess.run cannot report."""
    name = os.path.basename(cmd[3] if cmd[0] == "taskset" else cmd[0])
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        timer = threading.Timer(duration + 30, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()           # Ctrl-C or SIGTERM: the client goes too
            proc.wait()
            raise
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    if proc.returncode == -signal.SIGKILL:
        raise BenchError(f"{name} did not finish within {duration + 30}s: {' '.join(cmd)}")
    if proc.returncode != 0:
        raise BenchError(f"{name} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                         f"{stdout}{stderr}")
    return stdout, usage.ru_utime + usage.ru_stime


def run_wrk(cmd, duration):
    stdout, cpu_s = run_client(cmd, duration)
    r = parse_wrk(stdout)
    r["client_cpu_us_per_req"] = cpu_s * 1e6 / r["requests"] if r["requests"] else None
    return r


# ---------------------------------------------------------------- pload

def pload_cmd(port, conns, duration, request_file, cpu, extra=()):
    cmd = [paste_proc.binary(os.path.join("bench", "pload"))] + list(extra) + [
        "-c", str(conns), "-d", str(duration), "-f", request_file, "127.0.0.1", str(port)]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    return cmd


def run_pload(cmd, duration):
    """pload prints one JSON object with the same keys parse_wrk returns."""
    stdout, _ = run_client(cmd, duration)
    try:
        r = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise BenchError("could not parse pload output:\n" + stdout)
    if not r.get("requests"):
        r["lat_p99_us"] = None
    return r


# ---------------------------------------------------------------- perf

class SyscallCounter:
    """Counts a process's syscalls with the raw_syscalls:sys_enter tracepoint.

    A tracepoint costs the traced process far less than strace's ptrace
    stops (which slow a server about tenfold and change its batching), but
    it is not free: --no-perf measures CPU per request without it."""

    EVENT = "raw_syscalls:sys_enter"

    def __init__(self, cpu, enabled=True):
        self.cpu = cpu
        self.why_not = None if enabled else "disabled by --no-perf"
        if enabled:
            self.why_not = self._probe()

    def _probe(self):
        try:
            with tempfile.NamedTemporaryFile("r", suffix=".perf") as out:
                p = subprocess.run(["perf", "stat", "-e", self.EVENT, "-x,",
                                    "-o", out.name, "--", "true"],
                                   capture_output=True, text=True, timeout=30)
                if p.returncode != 0:
                    first = next((l.strip() for l in p.stderr.splitlines() if l.strip()),
                                 "exit %d" % p.returncode)
                    return "perf stat failed: " + first
        except FileNotFoundError:
            return "perf is not installed (apt-get install linux-perf)"
        except subprocess.TimeoutExpired:
            return "perf stat hung"
        return None

    @property
    def enabled(self):
        return self.why_not is None

    def start(self, pid, seconds):
        if not self.enabled:
            return None
        fd, path = tempfile.mkstemp(suffix=".perf")
        os.close(fd)
        cmd = ["perf", "stat", "-e", self.EVENT, "-p", str(pid), "-x,",
               "-o", path, "--", "sleep", "%.2f" % seconds]
        if self.cpu is not None:
            cmd = ["taskset", "-c", str(self.cpu)] + cmd
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        return proc, path

    @staticmethod
    def finish(handle):
        """The count, or None (with the reason on stderr) if perf failed."""
        if handle is None:
            return None
        proc, path = handle
        try:
            _, err = proc.communicate(timeout=60)
            with open(path) as f:
                for line in f:
                    parts = line.strip().split(",")
                    if len(parts) >= 3 and parts[2] == SyscallCounter.EVENT:
                        return int(parts[0]) if parts[0].isdigit() else None
            print(f"perf: no count ({err.strip()})", file=sys.stderr)
            return None
        finally:
            os.unlink(path)


# ---------------------------------------------------------------- runs

class System:
    """A compared server configuration: a display name and phttpd flags, or
    another server: server(name, args, cpu, store_dir) returning an object
    with Server's interface (bench/short.py's nginx)."""

    def __init__(self, name, args, server=None, label="phttpd"):
        self.name = name
        self.args = list(args)
        self.server = server or Server
        self.label = label


class Point:
    """One load point at a connection count: a wrk script (None: wrk's own
    GET) and, for pload, the same request's bytes (None: pload cannot run
    it, e.g. pipelining); extra client flags in wrk_args and pload_args."""

    def __init__(self, workload, conns, script, script_args=(), request=None,
                 wrk_args=(), pload_args=()):
        self.workload = workload
        self.conns = conns
        self.script = script
        self.script_args = list(script_args)
        self.request = request
        self.wrk_args = list(wrk_args)
        self.pload_args = list(pload_args)
        self._request_file = None

    def request_file(self):
        if self.request is None:
            raise BenchError(f"pload cannot run '{self.workload}' (no fixed request); "
                             "use --client wrk")
        if self._request_file is None:
            fd, self._request_file = tempfile.mkstemp(prefix="paste-bench-", suffix=".req")
            with os.fdopen(fd, "wb") as f:
                f.write(self.request)
        return self._request_file

    def cleanup(self):
        if self._request_file:
            os.unlink(self._request_file)
            self._request_file = None


def load(server, point, seconds, cpus, client):
    """One run of the chosen client against server: parse_wrk's keys plus
    client_cpu_us_per_req."""
    if client == "pload":
        return run_pload(pload_cmd(server.port, point.conns, seconds,
                                   point.request_file(), cpus[1], point.pload_args),
                         seconds)
    return run_wrk(wrk_cmd(server.url(), point.conns, seconds, point.script,
                           cpus[1], point.script_args, point.wrk_args), seconds)


def measure(server, point, duration, cpus, perf, client="wrk"):
    """One client run against a warmed-up server: the reported numbers."""
    server.checkpoint()
    before = server.stats()
    ticks0 = server.cpu_ticks()
    # perf attaches first and stops after wrk: the server is idle outside
    # the wrk run, so the wider window only adds connection set-up/teardown.
    counter = perf.start(server.pid, duration + 1.0)
    if counter:
        time.sleep(0.25)
    try:
        w = load(server, point, duration, cpus, client)
    finally:
        syscalls = SyscallCounter.finish(counter)
    ticks1 = server.cpu_ticks()
    after = server.stats()
    n = w["requests"]
    r = dict(w)
    r["cpu_us_per_req"] = (ticks1 - ticks0) * 1e6 / CLK_TCK / n if n else None
    r["syscalls_per_req"] = syscalls / n if (syscalls is not None and n) else None
    r["mean_batch"] = run_mean_batch(before, after)
    r["server_syscalls_per_req"] = after.get("syscalls_per_request")
    return r


def run_mean_batch(before, after):
    """Events per event-loop pass (/stats mean_batch) over one run only.

    /stats reports mean_batch = events / batches since start; without an
    "events" counter the events are rebuilt from the rounded mean, which
    is off by at most 0.005 per batch."""
    def events(s):
        return s["events"] if "events" in s else s.get("mean_batch", 0) * s.get("batches", 0)
    d_batch = after.get("batches", 0) - before.get("batches", 0)
    if d_batch <= 0:
        return after.get("mean_batch")
    return (events(after) - events(before)) / d_batch


def warm_up(server, point, cpus, seconds=1, client="wrk"):
    try:
        load(server, point, seconds, cpus, client)
    except BenchError as e:
        state = ("has exited with code %d" % server.proc.returncode
                 if not server.alive() else "is still running")
        raise BenchError(f"warm-up of {server.name} failed: {e}\nthe server "
                         f"{state}; its stderr:\n{server.tail()}")


def progress(*args, **kw):
    print(*args, file=sys.stderr, **kw)


def run_interleaved(title, systems, points, reps, duration, cpus, perf,
                    store_dir="/dev/shm", log=progress, client="wrk", unit="req"):
    """Run every (point, system) reps times, systems interleaved.

    All servers live for the whole call (idle ones cost no CPU); the system
    order rotates each repetition so none always runs right after another.
    Returns ({(point index, system name): [result or None]}, failures)."""
    log(f"{title}: {len(points)} point(s) x {len(systems)} systems x "
        f"{reps} rep(s) x {duration} s")
    results = {(i, s.name): [] for i in range(len(points)) for s in systems}
    failures = []
    servers = {}
    try:
        for s in systems:
            log(f"  starting {s.name}: {s.label} {' '.join(s.args)}")
            # Kept before it starts: an interrupted start is stopped too.
            servers[s.name] = s.server(s.name, s.args, cpus[0], store_dir)
            servers[s.name].start()
            warm_up(servers[s.name], points[0], cpus, client=client)
        for rep in range(reps):
            for i, pt in enumerate(points):
                k = rep % len(systems)
                for s in systems[k:] + systems[:k]:
                    srv = servers[s.name]
                    if not srv.alive():
                        results[(i, s.name)].append(None)
                        continue
                    log(f"  rep {rep + 1}/{reps} {pt.workload} c={pt.conns} "
                        f"{s.name} ...", end="", flush=True)
                    try:
                        r = measure(srv, pt, duration, cpus, perf, client)
                        log(" %.0f %s/s, %s us/%s" % (r["rps"], unit, fmt(r["cpu_us_per_req"], 2),
                                                      unit))
                    except (BenchError, OSError) as e:
                        r = None
                        log(" failed")
                        why = str(e).strip()
                        if not srv.alive():
                            why = (f"server exited with code {srv.proc.returncode}; "
                                   f"stderr:\n{srv.tail()}")
                        failures.append(f"{s.name}, {pt.workload}, c={pt.conns}, "
                                        f"rep {rep + 1}: {why}")
                    results[(i, s.name)].append(r)
    finally:
        for pt in points:
            pt.cleanup()
        stop_servers(servers, failures)
    return results, failures


def stop_servers(servers, failures):
    """Stop every server of {name: server} (SIGTERM, SIGKILL after its
    stop timeout) and note each that did not exit 0 in failures. A second
    Ctrl-C or SIGTERM meanwhile is ignored, so none is left running."""
    main = threading.current_thread() is threading.main_thread()
    held = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)} \
        if main else {}
    try:
        for name, srv in servers.items():
            code = srv.stop()
            if code not in (0, None):
                failures.append(f"{name}: exit code {code} after SIGTERM "
                                f"(expected 0); stderr:\n{srv.tail()}")
    finally:
        for s, handler in held.items():
            signal.signal(s, handler)


# ---------------------------------------------------------------- report

def fmt(x, digits=1):
    return "n/a" if x is None else f"{x:.{digits}f}"


def spread(values, digits, scale=1.0):
    vals = [v * scale for v in values if v is not None]
    if not vals:
        return "n/a"
    med = statistics.median(vals)
    if len(vals) == 1:
        return fmt(med, digits)
    return f"{fmt(med, digits)} [{fmt(min(vals), digits)}-{fmt(max(vals), digits)}]"


def median_of(runs, key):
    vals = [r[key] for r in runs if r and r.get(key) is not None]
    return statistics.median(vals) if vals else None


COLUMNS = ["workload", "conns", "system", "K req/s median [min-max]",
           "mean lat us", "p99 us", "server CPU us/req median [min-max]",
           "syscalls/req", "mean batch", "client CPU us/req"]


def table(systems, points, results, unit="req"):
    """unit: what one client 'request' is (bench/short.py: "conn", a
    connection carrying one request)."""
    cols = [c.replace("req", unit) for c in COLUMNS]
    lines = ["| " + " | ".join(cols) + " |",
             "|" + "|".join("---" for _ in cols) + "|"]
    for i, pt in enumerate(points):
        for s in systems:
            runs = [r for r in results[(i, s.name)] if r]
            cells = [pt.workload, str(pt.conns), s.name,
                     spread([r["rps"] for r in runs], 1, 1e-3),
                     fmt(median_of(runs, "lat_mean_us"), 0),
                     fmt(median_of(runs, "lat_p99_us"), 0),
                     spread([r["cpu_us_per_req"] for r in runs], 2),
                     fmt(median_of(runs, "syscalls_per_req"), 3),
                     fmt(median_of(runs, "mean_batch"), 1),
                     fmt(median_of(runs, "client_cpu_us_per_req"), 2)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratios(points, results, pairs, unit="req"):
    """One line per point and pair: median CPU/req and req/s ratios."""
    lines = []
    for i, pt in enumerate(points):
        for a, b in pairs:
            ra = [r for r in results[(i, a)] if r]
            rb = [r for r in results[(i, b)] if r]
            ca, cb = median_of(ra, "cpu_us_per_req"), median_of(rb, "cpu_us_per_req")
            ta, tb = median_of(ra, "rps"), median_of(rb, "rps")
            cpu = f"{ca / cb:.2f}" if ca and cb else "n/a"
            rps = f"{ta / tb:.2f}" if ta and tb else "n/a"
            what = "request" if unit == "req" else "connection"
            lines.append(f"- {pt.workload}, c={pt.conns}: {a}/{b} CPU per "
                         f"{what} {cpu} ({unit}/s {rps})")
    return "\n".join(lines)


def error_notes(systems, points, results):
    """Non-2xx responses and socket errors are worth a line each."""
    notes = []
    for i, pt in enumerate(points):
        for s in systems:
            for rep, r in enumerate(results[(i, s.name)]):
                if r and (r["non2xx"] or r["socket_errors"]):
                    notes.append(f"{s.name}, {pt.workload}, c={pt.conns}, rep "
                                 f"{rep + 1}: {r['non2xx']} non-2xx responses, "
                                 f"{r['socket_errors']} socket errors")
    return notes


def header(title, args, cpus, perf, unit="req"):
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f
                          if l.startswith("model name")), "")
    except OSError:
        pass
    lines = [f"# {title}", "",
             f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, commit {commit or 'n/a'}",
             f"- machine: Linux {platform.release()}, {os.cpu_count()} CPUs, {model}",
             f"- command: {' '.join([os.path.basename(sys.argv[0])] + sys.argv[1:])}",
             f"- {args.reps} repetition(s) of {args.duration} s per point, systems "
             "interleaved; medians with [min-max]",
             f"- server pinned to CPU {cpus[0]}, client ({CLIENT_NAMES[args.client]}) "
             f"to CPU {cpus[1]}",
             f"- CPU us/{unit} = server utime+stime (/proc/PID/stat) / requests "
             f"completed; syscalls/{unit} = perf raw_syscalls:sys_enter / requests"
             + ("" if unit == "req" else
                f" (each {unit} carries one request)")]
    if cpus[0] == cpus[1]:
        lines.append("- WARNING: one CPU only: server and client share it")
    if not perf.enabled:
        lines.append(f"- syscalls/{unit} n/a: {perf.why_not}")
    return "\n".join(lines)


def store_medium(directory):
    """The file system under directory and the device it is on, from
    /proc/self/mounts (the longest mount point that holds it), e.g.
    {"dir": "/var/tmp", "fs": "ext4", "device": "/dev/vda", "driver": "virtio_blk",
    "rotational": True}."""
    path = os.path.realpath(directory)
    best = None
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) < 3:
                    continue
                # Mount points escape blanks as octal (\040).
                mnt = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
                inside = path == mnt or path.startswith(mnt.rstrip("/") + "/")
                if inside and (best is None or len(mnt) >= len(best[1])):
                    best = (fields[0], mnt, fields[2])
    except OSError:
        pass
    out = {"dir": directory, "fs": best[2] if best else None,
           "device": best[0] if best and best[0].startswith("/dev/") else None,
           "driver": None, "rotational": None}
    if out["device"]:
        name = os.path.basename(os.path.realpath(out["device"]))
        for disk in (f"/sys/class/block/{name}", f"/sys/class/block/{name}/.."):
            try:
                with open(disk + "/queue/rotational") as f:
                    out["rotational"] = f.read().strip() == "1"
            except OSError:
                continue      # a partition: its disk is one level up
            if os.path.exists(disk + "/device/driver"):
                out["driver"] = os.path.basename(os.path.realpath(disk + "/device/driver"))
            break
    return out


def machine(store_dirs=()):
    """What a run ran on: kernel, CPU model and count, memory, whether a
    hypervisor is present, and the medium under each store directory."""
    info = {"kernel": platform.release(), "cpu": None, "ncpu": os.cpu_count(),
            "memory_gib": None, "virtual": None,
            "stores": [store_medium(d) for d in store_dirs]}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and info["cpu"] is None:
                    info["cpu"] = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and info["virtual"] is None:
                    info["virtual"] = "hypervisor" in line.split()
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(l.split()[1]) for l in f if l.startswith("MemTotal:"))
        info["memory_gib"] = round(kib / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    return info


def run_store_dirs(args):
    """Where a run's stores lived: wal.py's configurations name theirs,
    kvs.py's --medium disk uses --disk-dir, everything else /dev/shm."""
    if args is None:
        return []
    if getattr(args, "configs", None):
        return sorted({c.store_dir for c in args.configs})
    if getattr(args, "medium", None) == "disk":
        return [args.disk_dir]
    return ["/dev/shm"]


def run_command():
    """The command line that made this run, as typed from the top of the
    tree (without --out, which only says where the copy went)."""
    argv, skip = [], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
        elif a == "--out":
            skip = True
        elif not a.startswith("--out="):
            argv.append(a)
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)
    return " ".join(["python3", script] + [shlex.quote(a) for a in argv])


def run_meta(kind, title, args=None, cpus=None):
    """The "meta" of a results JSON: what ran, how, when and where."""
    return {"kind": kind, "title": title, "command": run_command(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": machine(run_store_dirs(args)),
            "cpus": {"server": cpus[0], "client": cpus[1]} if cpus else None,
            "client": CLIENT_NAMES.get(args.client) if args is not None else None,
            "reps": getattr(args, "reps", None), "duration": getattr(args, "duration", None)}


def save(kind, text, raw, out=None, args=None, cpus=None):
    """Print the report and write bench/results/<kind>-<time>.md and .json.

    The JSON is {"meta": run_meta(...), "results": raw}, raw being
    raw_results()'s list (kvs.py builds its own); the title is the
    report's first line. bench/plot.py and bench/results_md.py read it."""
    print(text)
    os.makedirs(RESULTS_DIR, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = os.path.join(RESULTS_DIR, f"{kind}-{stamp}.md")
    for p in [path] + ([out] if out else []):
        with open(p, "w") as f:
            f.write(text + "\n")
    title = text.splitlines()[0].lstrip("# ").strip() if text else kind
    doc = {"meta": run_meta(kind, title, args, cpus), "results": raw}
    with open(path[:-3] + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    print(f"\n(written to {os.path.relpath(path)}"
          + (f" and {out}" if out else "") + ")")
    try:
        import plot   # bench/plot.py: PNG + SVG next to the report
        figs = plot.figure(kind, doc, path[:-3])
        print(f"(figures: {', '.join(os.path.relpath(f) for f in figs)}; redraw with "
              f"python3 bench/plot.py {os.path.relpath(path[:-3])}.json)")
    except ImportError:
        print("(no figures: matplotlib is not installed; run `make deps`)")
    return path


def report(kind, title, systems, points, results, failures, pairs, args, cpus,
           perf, extra="", unit="req"):
    """Print and save the whole report; returns the exit code (1 if any run failed)."""
    soft = error_notes(systems, points, results)
    notes = failures + soft
    what = "request" if unit == "req" else "connection"
    text = "\n\n".join(filter(None, [
        header(title, args, cpus, perf, unit),
        table(systems, points, results, unit),
        f"Ratios of medians (CPU per {what} below 1 = the first is cheaper; "
        f"{unit}/s above 1 = the first is faster):\n" + ratios(points, results, pairs, unit),
        extra,
        ("Notes:\n" + "\n".join("- " + n for n in notes)) if notes else ""]))
    save(kind, text, raw_results(systems, points, results), args.out, args, cpus)
    return 1 if failures else 0


def raw_results(systems, points, results):
    return [{"workload": pt.workload, "conns": pt.conns, "system": s.name,
             "args": s.args, "runs": results[(i, s.name)]}
            for i, pt in enumerate(points) for s in systems]


def conn_list(text):
    """argparse type for --conns: "1,50,100" -> [1, 50, 100]."""
    try:
        conns = [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        conns = []
    if not conns or min(conns) < 1:
        raise argparse.ArgumentTypeError(
            f"want a comma-separated list of connection counts >= 1, got {text!r}")
    return conns


CLIENT_NAMES = {"wrk": "wrk -t1", "pload": "bench/pload, one thread, io_uring",
                "redis-benchmark": "redis-benchmark 7, one thread"}


def common_args(description, duration=5, reps=3, client="wrk", clients=("pload", "wrk")):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--client", choices=sorted(clients), default=client,
                   help="load generator (default %(default)s; pload is cheaper per "
                   "request, see bench/README.md)")
    p.add_argument("--duration", type=int, default=duration,
                   help="whole seconds per client run (default %(default)s)")
    p.add_argument("--reps", type=int, default=reps,
                   help="repetitions (default %(default)s)")
    p.add_argument("--out", help="also write the markdown report here")
    p.add_argument("--server-cpu", type=int, help="CPU for the servers (default 1)")
    p.add_argument("--client-cpu", type=int, help="CPU for the client (default 0)")
    p.add_argument("--no-perf", action="store_true",
                   help="skip the syscall count (perf adds a little per-syscall cost)")
    return p


def setup(args):
    """(cpus, perf) from the common arguments; pins this script to the client CPU."""
    if args.duration <= 0 or args.reps <= 0:
        raise BenchError("--duration and --reps must be positive")
    server_cpu, client_cpu = default_cpus()
    cpus = (args.server_cpu if args.server_cpu is not None else server_cpu,
            args.client_cpu if args.client_cpu is not None else client_cpu)
    # The harness's own little work (parsing, /stats) stays off the server CPU.
    os.sched_setaffinity(0, {cpus[1]})
    if args.client == "pload":
        paste_proc.binary(os.path.join("bench", "pload"))
    for tool in ([args.client] if args.client != "pload" else []) + ["taskset"]:
        if not any(os.access(os.path.join(d, tool), os.X_OK)
                   for d in os.environ.get("PATH", "").split(os.pathsep)):
            raise BenchError(f"{tool} is not installed: run `make deps`")
    perf = SyscallCounter(cpus[1], enabled=not args.no_perf)
    if not perf.enabled:
        print(f"syscalls/req will be n/a: {perf.why_not}", file=sys.stderr)
    return cpus, perf


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def main_guard(fn):
    """Run fn(); turn BenchError (or a program missing from the build)
    into a message and exit code 1. SIGTERM interrupts it as Ctrl-C does:
    the servers run in sessions of their own, away from a terminal's
    signals, and the finally blocks that stop them run either way."""
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        sys.exit(fn())
    except (BenchError, paste_proc.MissingBinary) as e:
        print(f"{os.path.basename(sys.argv[0])}: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
