"""Shared fixtures and helpers for the phttpd end-to-end tests.

Every test starts its own server on 127.0.0.1 with --port 0, learns the real
port from the "phttpd: listening on HOST:PORT" line on stderr, uses a store
file of its own under /dev/shm (or /var/tmp for fsync) and stops it with
SIGTERM, asserting a clean exit. The build directory is $PASTE_BUILD, or
../../build relative to this file.

Helpers are plain functions and classes so test files import them with
`from conftest import ...` (pytest puts this directory on sys.path).
"""
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BUILD = Path(os.environ.get("PASTE_BUILD", HERE / ".." / ".." / "build")).resolve()
LISTEN_RE = re.compile(r"phttpd: listening on (\S+):(\d+)\s*$")
START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
# Small stores start fast (MAP_POPULATE touches every page) and keep the
# suite's memory low; tests that need more pass --store-size themselves.
DEFAULT_STORE_SIZE = "64M"
ENGINES = ["uring", "epoll"]


def binary(name):
    path = BUILD / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: build first (`make`), or set PASTE_BUILD")
    return str(path)


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


def wait_until(pred, timeout, interval=0.05):
    """Poll pred() until it returns a true value or timeout passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------
# Server processes
# --------------------------------------------------------------------------

class ServerFailed(Exception):
    """phttpd exited (or hung) before it printed its listening line."""

    def __init__(self, returncode, stderr):
        super().__init__(f"phttpd exited with {returncode} before listening; stderr:\n{stderr}")
        self.returncode = returncode
        self.stderr = stderr


class Server:
    """One phttpd process; restart() runs the same command line on the same store."""

    def __init__(self, argv, store, env, host):
        self.argv = argv
        self.store = store
        self.env = env
        self.host = host
        self.proc = None
        self.port = None
        self.lines = []
        self.killed = False

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stderr(self):
        return "".join(self.lines)

    def _drain(self, listening):
        # Keeps reading after the listening line so a chatty server never
        # blocks on a full pipe.
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            m = LISTEN_RE.search(line)
            if m and not listening.is_set():
                self.port = int(m.group(2))
                listening.set()

    def start(self):
        assert not self.running(), "server already running"
        self.killed = False
        self.lines = []
        self.port = None
        listening = threading.Event()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=self.env)
        self.reader = threading.Thread(target=self._drain, args=(listening,), daemon=True)
        self.reader.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not listening.wait(0.02):
            if self.proc.poll() is not None:
                self.reader.join(2)
                if listening.is_set():
                    break
                raise ServerFailed(self.proc.returncode, self.stderr())
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                self.reader.join(2)
                raise ServerFailed(f"no listening line within {START_TIMEOUT}s", self.stderr())
        if self.proc.poll() is not None:
            raise ServerFailed(self.proc.returncode, self.stderr())
        return self

    def stop(self, sig=signal.SIGTERM):
        """Signal the server and assert it exits 0 within STOP_TIMEOUT."""
        if self.proc is None or self.killed:
            return None
        if not self.running():
            raise AssertionError(f"phttpd had already exited with {self.proc.returncode} "
                                 f"(crashed or stopped by itself); stderr:\n{self.stderr()}")
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.reader.join(2)
            raise AssertionError(f"phttpd did not exit within {STOP_TIMEOUT}s of "
                                 f"{signal.Signals(sig).name}; stderr:\n{self.stderr()}")
        self.reader.join(2)
        assert rc == 0, (f"phttpd exited with {rc} after {signal.Signals(sig).name}; "
                         f"stderr:\n{self.stderr()}")
        return rc

    def kill9(self):
        self.killed = True
        if self.running():
            self.proc.kill()
            self.proc.wait()
            self.reader.join(2)

    def restart(self):
        if self.running():
            self.stop()
        return self.start()


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

    def argv(self, engine="uring", mode="rpc", extra_args=(), store=None,
             binary_name="phttpd", host="127.0.0.1", port=0):
        args = list(extra_args)
        # Only when creating: reopening must work without repeating the size.
        if "--store-size" not in args and not os.path.exists(store):
            args += ["--store-size", DEFAULT_STORE_SIZE]
        return [binary(binary_name), "--host", host, "--port", str(port),
                "--engine", engine, "--mode", mode, "--store", store] + args

    def start(self, engine="uring", mode="rpc", extra_args=(), store=None,
              binary_name="phttpd", env=None, host="127.0.0.1"):
        store = store or self.new_store()
        argv = self.argv(engine, mode, extra_args, store, binary_name, host)
        full_env = dict(os.environ)
        full_env.update(env or {})
        srv = Server(argv, store, full_env, host)
        self.servers.append(srv)
        return srv.start()

    def start_failing(self, engine="uring", mode="rpc", extra_args=(), store=None,
                      timeout=START_TIMEOUT):
        """Run phttpd where it must refuse to start; returns (exit code, stderr)."""
        argv = self.argv(engine, mode, extra_args, store or self.new_store())
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=STOP_TIMEOUT)
            pytest.fail(f"phttpd kept running ({' '.join(argv)}); stderr:\n{err.decode()}")
        return proc.returncode, err.decode("utf-8", "replace")

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
    factory = getattr(item, "funcargs", {}).get("phttpd")
    if rep.failed and isinstance(factory, ServerFactory) and factory.servers:
        rep.sections.append(("phttpd stderr", factory.stderr_report()))


@pytest.fixture
def phttpd():
    factory = ServerFactory()
    yield factory
    factory.cleanup()


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
# HTTP over raw sockets
# --------------------------------------------------------------------------

class ConnectionClosed(Exception):
    pass


class Response:
    def __init__(self, version, status, reason, headers, body):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers      # list of (name, value) as sent
        self.body = body

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def __repr__(self):
        return f"<Response {self.status} {self.reason!r} {self.headers} body={self.body[:80]!r}>"


def build_request(method, path, body=None, headers=(), version="HTTP/1.1", host=True):
    lines = [f"{method} {path} {version}"]
    if host:
        lines.append("Host: 127.0.0.1")
    lines += [f"{k}: {v}" for k, v in headers]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


class HttpConn:
    """A client connection that reads HTTP responses by Content-Length."""

    def __init__(self, port, host="127.0.0.1", timeout=5.0, nodelay=True):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        if nodelay:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.connect((host, port))
        self.buf = bytearray()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionClosed(f"server closed the connection; unparsed bytes: {bytes(self.buf[:200])!r}")
        self.buf += chunk

    def read_response(self, method="GET"):
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self.buf) > 65536:
                raise AssertionError(f"response head over 64 KiB: {bytes(self.buf[:200])!r}")
            self._fill()
        head = bytes(self.buf[:end]).decode("latin-1")
        del self.buf[:end + 4]
        lines = head.split("\r\n")
        m = re.fullmatch(r"(HTTP/1\.[01]) (\d{3}) ?(.*)", lines[0])
        assert m, f"bad status line {lines[0]!r}"
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            assert sep and name and name == name.strip(), f"bad response header line {line!r}"
            headers.append((name, value.strip()))
        resp = Response(m.group(1), int(m.group(2)), m.group(3), headers, b"")
        cl = resp.header("Content-Length")
        assert cl is not None and cl.isdigit(), f"response without a valid Content-Length: {resp!r}"
        if method != "HEAD":
            n = int(cl)
            while len(self.buf) < n:
                self._fill()
            resp.body = bytes(self.buf[:n])
            del self.buf[:n]
        return resp

    def read_responses(self, methods):
        """One response per entry of methods (a request method each, or a count of GETs)."""
        if isinstance(methods, int):
            methods = ["GET"] * methods
        return [self.read_response(m) for m in methods]

    def request(self, method, path, body=None, headers=(), version="HTTP/1.1"):
        self.send(build_request(method, path, body, headers, version))
        return self.read_response(method)

    def is_closed(self, timeout=3.0):
        """True when the server closes (EOF or reset) within timeout and sent nothing more."""
        if self.buf:
            return False
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096)
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True
        if data:
            self.buf += data
            return False
        return True


def http_once(port, method, path, body=None, headers=(), host="127.0.0.1", timeout=5.0):
    """One request on a fresh connection."""
    with HttpConn(port, host, timeout) as c:
        return c.request(method, path, body, headers)


def get_stats(port, host="127.0.0.1"):
    r = http_once(port, "GET", "/stats", host=host)
    assert r.status == 200, r
    assert "application/json" in (r.header("Content-Type") or ""), r
    return json.loads(r.body)


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
