"""Shared fixtures and helpers for the phttpd end-to-end tests.

Every test starts its own server on 127.0.0.1 with --port 0, learns the real
port from the "phttpd: listening on HOST:PORT" line on stderr, uses a store
file of its own under /dev/shm (or /var/tmp for fsync) and stops it with
SIGTERM, asserting a clean exit. The build directory is $PASTE_BUILD, or
../../build relative to this file.

Starting and stopping servers and the HTTP client live in
python/paste_proc.py (shared with bench/harness.py); this file keeps the
pytest side: the `phttpd` and `engine` fixtures, the failure report, and
test helpers. Helpers are plain functions and classes so test files import
them with `from conftest import ...` (pytest puts this directory on
sys.path); the names from paste_proc are re-exported here.
"""
import fcntl
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "python"))

import paste_proc  # noqa: E402
from paste_proc import (BUILD, PHTTPD_LISTEN_RE, START_TIMEOUT, STOP_TIMEOUT,  # noqa: E402,F401
                        ConnectionClosed, HttpConn, MissingBinary, Phttpd, Pkvs,
                        ProtocolError, RedisServer, RespConn, RespError, Response,
                        ServerError, ServerFailed, binary, build_request, connect, free_port,
                        get_stats, http_once, reset, resp_command, run_threads,
                        take_response)

# Small stores start fast (MAP_POPULATE touches every page) and keep the
# suite's memory low; tests that need more pass --store-size themselves.
DEFAULT_STORE_SIZE = "64M"
ENGINES = ["uring", "epoll", "epoll-batch"]
LISTEN_RE = PHTTPD_LISTEN_RE
Server = Phttpd


def raise_nofile_limit():
    """Soft RLIMIT_NOFILE up to the hard limit; servers started afterwards inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def uring_unavailable_reason():
    try:
        disabled = int(Path("/proc/sys/kernel/io_uring_disabled").read_text())
    except (OSError, ValueError):
        return None
    if disabled == 2:
        return "io_uring is disabled (kernel.io_uring_disabled=2)"
    return None


def sanitized():
    """Is $PASTE_BUILD built with a sanitizer? Its allocator keeps freed
    memory in quarantine and pads every block: RSS is not the server's."""
    import json
    try:
        with open(os.path.join(BUILD, "meson-info", "intro-buildoptions.json")) as f:
            opts = {o["name"]: o["value"] for o in json.load(f)}
    except OSError:
        return False
    return opts.get("b_sanitize", "none") not in ("", "none")


def wait_until(pred, timeout, interval=0.05):
    """Poll pred() until it returns a true value or timeout passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def settled(read, tries=30, interval=0.1):
    """read() once two readings interval apart agree (at most tries more):
    a figure that moves for a while, such as pkvs_held_bytes after a fresh
    store's first checkpoint or a restart's sweep."""
    last = read()
    for _ in range(tries):
        time.sleep(interval)
        now = read()
        if now == last:
            return now
        last = now
    return last


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------
# The phttpd fixture (Phttpd, run_to_exit: paste_proc)
# --------------------------------------------------------------------------

class ServerFactory:
    """The `phttpd` fixture: starts servers, owns their store directories."""

    def __init__(self):
        self.servers = []
        self.dirs = []

    def tmpdir(self, base="/dev/shm"):
        d = tempfile.mkdtemp(prefix="paste-e2e-", dir=base)
        self.dirs.append(d)
        return d

    def new_store(self, base="/dev/shm"):
        """A fresh path (not created: phttpd creates the store) in a private directory."""
        return os.path.join(self.tmpdir(base), "test.store")

    def args(self, engine="uring", mode="rpc", extra_args=(), store=None):
        """phttpd's flags after --host/--port/--store."""
        args = ["--engine", engine, "--mode", mode] + list(extra_args)
        # Only when creating: reopening must work without repeating the size.
        if "--store-size" not in args and not os.path.exists(store):
            args += ["--store-size", DEFAULT_STORE_SIZE]
        return args

    def argv(self, engine="uring", mode="rpc", extra_args=(), store=None,
             binary_name="phttpd", host="127.0.0.1", port=0):
        return paste_proc.phttpd_argv(binary(binary_name), store,
                                      self.args(engine, mode, extra_args, store), host, port)

    def start(self, engine="uring", mode="rpc", extra_args=(), store=None,
              binary_name="phttpd", env=None, host="127.0.0.1"):
        store = store or self.new_store()
        full_env = dict(os.environ)
        full_env.update(env or {})
        srv = Phttpd(self.args(engine, mode, extra_args, store), store=store,
                     exe=binary(binary_name), host=host, env=full_env)
        self.servers.append(srv)
        return srv.start()

    def start_failing(self, engine="uring", mode="rpc", extra_args=(), store=None,
                      timeout=START_TIMEOUT):
        """Run phttpd where it must refuse to start; returns (exit code, stderr)."""
        return paste_proc.run_to_exit(self.argv(engine, mode, extra_args,
                                                store or self.new_store()), timeout)

    def stderr_report(self):
        return "\n".join(f"--- {' '.join(srv.argv)}\n{srv.stderr()}" for srv in self.servers)

    def cleanup(self):
        errors = []
        for srv in self.servers:
            try:
                if srv.proc is not None and (srv.running() or srv.proc.returncode != 0):
                    srv.stop()
            except AssertionError as e:
                errors.append(str(e))
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)
        if errors:
            pytest.fail("server shutdown at teardown failed:\n" + "\n".join(errors))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failed test, show what every server it started printed."""
    outcome = yield
    rep = outcome.get_result()
    funcargs = getattr(item, "funcargs", {})
    factory = funcargs.get("phttpd") or funcargs.get("pkvs")
    if rep.failed and isinstance(factory, ServerFactory) and factory.servers:
        rep.sections.append(("server stderr", factory.stderr_report()))


@pytest.fixture
def phttpd():
    factory = ServerFactory()
    yield factory
    factory.cleanup()


class PkvsFactory(ServerFactory):
    """The `pkvs` fixture: pkvs servers (HTTP and RESP on ports 0), each
    with a store of its own in a private directory unless given one."""

    def start(self, extra_args=(), store=None, binary_name="pkvs", env=None,
              http=True, resp=True, store_size=DEFAULT_STORE_SIZE):
        store = store or self.new_store()
        args = list(extra_args)
        if "--store-size" not in args and not os.path.exists(store):
            args += ["--store-size", store_size]
        full_env = dict(os.environ)
        full_env.update(env or {})
        srv = Pkvs(args, store=store, exe=binary(binary_name), env=full_env,
                   http=http, resp=resp)
        self.servers.append(srv)
        return srv.start()

    def start_failing(self, extra_args=(), store=None, timeout=START_TIMEOUT):
        """Run pkvs where it must refuse to start; returns (exit code, stderr)."""
        argv = paste_proc.pkvs_argv(binary("pkvs"), store or self.new_store(),
                                    list(extra_args) + ["--store-size", DEFAULT_STORE_SIZE])
        return paste_proc.run_to_exit(argv, timeout)


@pytest.fixture
def pkvs():
    factory = PkvsFactory()
    yield factory
    factory.cleanup()


def tool(name):
    """A program from PATH (redis-cli, nutcracker, curl): fails the test,
    naming `make deps`, when it is missing."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run `make deps`")
    return path


def pytest_collection_modifyitems(items):
    """The engine matrix: a test with an `engine` parameter runs on every
    engine; its runs on engines other than uring (the default) are marked
    engine_matrix, which `make check` leaves out, unless the test is
    marked basic (pytest.ini)."""
    for item in items:
        spec = getattr(item, "callspec", None)
        if (spec is not None and spec.params.get("engine", "uring") != "uring"
                and item.get_closest_marker("basic") is None):
            item.add_marker(pytest.mark.engine_matrix)


@pytest.fixture(params=ENGINES)
def engine(request):
    if request.param == "uring":
        reason = uring_unavailable_reason()
        if reason:
            pytest.skip(reason)
    return request.param


def run_tool(*args, timeout=60):
    """Run build/paste-store with args; returns the CompletedProcess (text)."""
    return subprocess.run([binary("paste-store")] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout)


# --------------------------------------------------------------------------
# WAL helpers (HttpConn, http_once, get_stats: paste_proc)
# --------------------------------------------------------------------------

def post_log(conn, body):
    """POST /log on conn; asserts the spec's 201 reply and returns the LSN."""
    r = conn.request("POST", "/log", body)
    assert r.status == 201, r
    lsn_text = r.header("X-Paste-LSN")
    assert lsn_text is not None and lsn_text.isdigit(), r
    lsn = int(lsn_text)
    assert r.header("Location") == f"/log/{lsn}", r
    assert r.body == f"{lsn}\n".encode(), r
    return lsn


def post_all(port, bodies, host="127.0.0.1"):
    """POST every body on one connection; returns {lsn: body} and asserts LSNs increase."""
    records, last = {}, 0
    with HttpConn(port, host, timeout=10) as c:
        for body in bodies:
            lsn = post_log(c, body)
            assert lsn > last, f"LSN {lsn} after {last}"
            records[lsn] = body
            last = lsn
    return records


def check_records(port, expected, host="127.0.0.1"):
    """GET /log/<lsn> for every lsn -> sha256 (or bytes) in expected; returns the mismatches."""
    bad = []
    with HttpConn(port, host, timeout=10) as c:
        for lsn, want in sorted(expected.items()):
            r = c.request("GET", f"/log/{lsn}")
            got = r.body if isinstance(want, bytes) else sha256(r.body)
            if r.status != 200 or got != want:
                bad.append((lsn, r.status, len(r.body)))
    return bad


def copy_image(image, dest, whole_fences=True):
    """Copy the persistence shim's crash image (phttpd-shim, pkvs-shim).
    With whole_fences, hold flock(LOCK_SH): the shim applies a fence under
    LOCK_EX, so the copy is the image at one instant between two fences;
    without, the copy may catch fences midway."""
    with open(image, "rb") as f:
        if whole_fences:
            fcntl.flock(f, fcntl.LOCK_SH)
        shutil.copyfile(image, dest)


def copy_image_at(image, workdir, times, snapshot, whole_fences):
    """Copies of the shim's crash image taken while a load runs: one at
    each of `times` (seconds from now, ascending), copy i under the lock
    when whole_fences(i). snapshot() is called just before each copy
    starts (what was acknowledged by then must be in it). Returns
    [(path, whole_fences, snapshot)]."""
    copies = []
    t0 = time.monotonic()
    for i, at in enumerate(times):
        time.sleep(max(0.0, at - (time.monotonic() - t0)))
        before = snapshot()
        copy = Path(workdir) / f"copy{i}"
        copy_image(image, copy, whole_fences=whole_fences(i))
        copies.append((copy, whole_fences(i), before))
    return copies


def check_image_copy(copy, whole_fences):
    """paste-store check on a crash-image copy: clean when it holds whole
    fences; else clean or exit 3 with a finding (a fence half applied is
    a legitimate crash)."""
    cp = run_tool("--store", copy, "check")
    out = cp.stdout + cp.stderr
    if whole_fences:
        assert cp.returncode == 0, f"check {copy.name} (whole fences): exit {cp.returncode}\n{out}"
    else:
        assert cp.returncode == 0 or (cp.returncode == 3 and out.strip()), \
            f"check {copy.name} (fence maybe half applied): exit {cp.returncode}\n{out}"


# --------------------------------------------------------------------------
# Load threads (run_threads, ClientThreads: paste_proc)
# --------------------------------------------------------------------------

def generations_acked_under_kill9(srv, clients, command, ok, seconds=1.5):
    """`clients` threads, thread c sending command(c, g) (a tuple of RESP
    arguments) for generations g = 1, 2, ... until srv is killed with
    SIGKILL after `seconds`; a reply that ok(reply) refuses, or a closed
    connection, ends a thread. Returns {c: its last acknowledged g}."""
    acked = {}
    stop = threading.Event()

    def load(c):
        with RespConn(srv.resp_port, timeout=10) as conn:
            g = 0
            while not stop.is_set():
                g += 1
                try:
                    if not ok(conn.command(*command(c, g))):
                        return
                except Exception:
                    return
                acked[c] = g
    threads = [threading.Thread(target=load, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    srv.kill9()
    stop.set()
    for t in threads:
        t.join()
    return acked


class RefusedLoad(paste_proc.ClientThreads):
    """Writers in `conns` threads that write one thing at a time until
    stop(), reconnecting after a close, and record what the server
    acknowledged and what it refused once its store failed: the base of
    the injected-fault loads (test_faults.py over HTTP, test_pkvs_churn.py
    over RESP). A subclass gives _connect() -> conn, _write(conn, tid, n,
    rng) -> (reply, what) (may raise ConnectionClosed or OSError) and
    _record(reply, what, sent) -> True when the reply was a refusal (the
    server closes after it). acks: (time sent, id) per acknowledgement;
    refused: (time received, message) per store-failed error; closes:
    connections the server ended; problems: anything else. together: every
    thread connects, then all begin writing at once (a fault counted in
    barriers then falls on all of them, not on the first few started)."""

    def __init__(self, port, conns, seed, together=False):
        super().__init__(conns, seed)
        self.port = port
        self.ready = threading.Barrier(conns) if together else None
        self.acks = []
        self.refused = []
        self.problems = []
        self.closes = 0

    def _run(self, tid, rng):
        conn, n = None, 0
        while not self.done.is_set():
            try:
                if conn is None:
                    conn = self._connect()
                if n == 0 and self.ready:
                    try:
                        self.ready.wait(timeout=10)
                    except threading.BrokenBarrierError:
                        pass                 # a thread could not connect: go on
                sent = time.monotonic()
                n += 1                       # a write is never retried under its number
                reply, what = self._write(conn, tid, n - 1, rng)
            except ConnectionRefusedError:
                break                        # the server has exited
            except (ConnectionClosed, OSError):
                with self.lock:
                    self.closes += 1
                if conn:
                    conn.close()
                conn = None
                continue
            except AssertionError as e:      # a malformed reply
                with self.lock:
                    self.problems.append(repr(e))
                break
            with self.lock:
                refused = self._record(reply, what, sent)
            if refused:                      # closed by the server; go easy on a shared machine
                conn.close()
                conn = None
                time.sleep(0.005)
        if conn:
            conn.close()

    def first_refusal(self):
        with self.lock:
            return min((t for t, _ in self.refused), default=None)
