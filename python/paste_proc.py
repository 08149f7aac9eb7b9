"""Starting paste servers (and the foreign ones compared with them) from
Python, and talking HTTP and the Redis protocol to them.

The one place that starts servers and opens client connections for the
end-to-end tests (tests/e2e/conftest.py) and the benchmarks (bench/harness.py,
bench/walclient.py, bench/kvs.py, bench/short.py); they put this directory on
sys.path, nothing is installed. Python 3 standard library only.

- binary(name): a program in the build directory ($PASTE_BUILD, else
  build/ at the top of the tree); unique_store(): a fresh store path.
- Server(argv): any program that prints "listening on HOST:PORT" on stderr
  once it accepts connections (run it with --port 0): start() waits for that
  line and learns the port, a thread keeps reading stderr (so a chatty
  server never blocks on the pipe), stop() signals it and waits a bounded
  time, kill9() is the crash test's kill -9, restart() runs the same command
  line again. A program that prints no such line (nginx, redis-server,
  nutcracker) gets listen_re=None and a port chosen here (free_port()):
  start() waits until ready() (a connection is accepted) is true.
- Phttpd(args, store=None), Pkvs(...): phttpd and pkvs (or their -shim
  builds) on 127.0.0.1 port 0 with a store of their own: a fresh path in
  store_dir unless store is given; an own store is deleted by stop(),
  restart() keeps it. RedisServer(...): redis-server with a directory of
  its own, ready when it answers PING.
- connect(port), reset(sock), free_port(): raw sockets.
- run_threads(n, target), ClientThreads: client threads (the loads that
  record what a server acknowledged build on ClientThreads).
- HttpConn(port): a keep-alive HTTP/1.1 client over a raw socket that reads
  responses by Content-Length; http_once() and get_stats() on top of it.
  RespConn(port): a Redis-protocol client; both are a Conn (a socket and
  the bytes received but not parsed yet).

A server that misbehaves (exits before listening, is found dead, exits
non-zero or hangs on stop) raises ServerError, and a reply that is not
well-formed HTTP raises ProtocolError: both are AssertionErrors, so pytest
reports them as failed checks; the benchmark harness turns them into its
own one-line errors.
"""

import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("PASTE_BUILD", ROOT / "build")).resolve()
START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
# The host may be an IPv6 address (::1): the port is what follows the last ':'.
LISTEN_RE = re.compile(r"listening on (\S+):(\d+)\s*$")
PHTTPD_LISTEN_RE = re.compile(r"phttpd: listening on (\S+):(\d+)\s*$")


class MissingBinary(AssertionError):
    """A program is not in the build directory (or not installed): a test
    that needs it fails with this message, the benchmarks print it."""


class ServerError(AssertionError):
    """A server did not behave: exited before listening, was found dead,
    exited non-zero or did not exit in time when stopped."""


class ServerFailed(ServerError):
    """The server exited (returncode set) or hung (returncode None, then
    killed) before it printed its listening line (or, without one, before
    it was ready); stderr is what it said."""

    def __init__(self, argv, returncode, stderr, timeout=None, unready=False):
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        self.timeout = timeout
        name = os.path.basename(self.argv[0]) if self.argv else "server"
        why = (f"exited with {returncode} before listening" if returncode is not None
               else f"was not ready within {timeout}s (killed)" if unready
               else f"printed no listening line within {timeout}s (killed)")
        super().__init__(f"{name} {why} ({' '.join(self.argv)}); stderr:\n{stderr}")


class ProtocolError(AssertionError):
    """The server's reply is not well-formed HTTP, or not what the API promises."""


class ConnectionClosed(Exception):
    """The server closed the connection before a whole response arrived."""


def binary(name, build=None):
    """The path of program `name` (may contain a subdirectory: bench/pload)."""
    path = Path(build or BUILD) / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise MissingBinary(f"{path} is missing: build first (`make`), or set PASTE_BUILD")
    return str(path)


def unique_store(directory="/dev/shm", tag="store"):
    """A store path nobody uses, not created (the server creates the file)."""
    fd, path = tempfile.mkstemp(prefix=f"paste-{tag}-", suffix=".store", dir=directory)
    os.close(fd)
    os.unlink(path)
    return path


def free_port(host="127.0.0.1"):
    """A TCP port nothing listens on now, for a program that cannot be
    given port 0 (another process may take it before that program does)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def parse_listening(line, pattern=LISTEN_RE):
    """(host, port) from a listening line, or None."""
    m = pattern.search(line)
    return (m.group(1), int(m.group(2))) if m else None


# --------------------------------------------------------------------------
# Server processes
# --------------------------------------------------------------------------

class Server:
    """One server process; restart() runs the same argv again.

    check_exit (default True, the tests' choice): stop() raises ServerError
    unless the server exits 0 within the timeout; False (the benchmarks'):
    stop() returns the exit code, whatever it is. max_lines keeps only the
    last lines of stderr (None: all). new_session keeps a terminal's Ctrl-C
    away from the server, so its owner always gets to stop it. stdout: read
    stdout too, in the same pipe as stderr (resp-floor, redis-server print
    there). listen_re None: the program prints no listening line; port
    (kept as fixed_port, .port at every start) is then the port it was
    told to use, and start() waits for ready()."""

    # Class-level defaults: running(), stop() and kill9() answer before the
    # first start().
    proc = None
    reader = None
    port = None
    host = "127.0.0.1"
    killed = False
    check_exit = True
    lines = ()

    def __init__(self, argv, env=None, host="127.0.0.1", name=None, listen_re=LISTEN_RE,
                 start_timeout=START_TIMEOUT, stop_timeout=STOP_TIMEOUT,
                 check_exit=True, max_lines=None, new_session=False, stdout=False, port=None):
        if listen_re is None and port is None:
            raise ValueError("a server without a listening line needs its port")
        self.argv = list(argv)
        self.fixed_port = port
        self.stdout = stdout
        self.env = env
        self.host = host
        self.name = name or os.path.basename(self.argv[0])
        self.listen_re = listen_re
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.check_exit = check_exit
        self.max_lines = max_lines
        self.new_session = new_session
        self.lines = []

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stderr(self):
        """Everything the current (or last) run printed on stderr so far."""
        return "".join(line + "\n" for line in list(self.lines))

    def url(self, path="/"):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    def stats(self, timeout=5.0):
        return get_stats(self.port, self.host, timeout)

    def ready(self):
        """Whether a server without a listening line accepts connections yet."""
        try:
            connect(self.port, self.host, timeout=1).close()
            return True
        except OSError:
            return False

    def _drain(self, proc, lines, listening):
        # Keeps reading after the listening line so a chatty server never
        # blocks on a full pipe.
        for raw in proc.stdout if self.stdout else proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            lines.append(line)
            if not listening.is_set() and self.listen_re is not None:
                found = parse_listening(line, self.listen_re)
                if found:
                    self.port = found[1]
                    listening.set()

    def _join_reader(self):
        if self.reader is not None:
            self.reader.join(2)

    def start(self, timeout=None):
        """Run argv and wait for the listening line; raises ServerFailed
        (with the server's stderr) if it exits first or takes longer than
        timeout (default start_timeout; then it is killed)."""
        assert not self.running(), "server already running"
        timeout = self.start_timeout if timeout is None else timeout
        self.killed = False
        self.port = self.fixed_port
        self.lines = [] if self.max_lines is None else deque(maxlen=self.max_lines)
        listening = threading.Event()
        out = (subprocess.PIPE, subprocess.STDOUT) if self.stdout else (subprocess.DEVNULL,
                                                                        subprocess.PIPE)
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=out[0], stderr=out[1],
                                     env=self.env, start_new_session=self.new_session)
        self.reader = threading.Thread(target=self._drain,
                                       args=(self.proc, self.lines, listening), daemon=True)
        self.reader.start()
        deadline = time.monotonic() + timeout
        while not self._up(listening):
            if self.proc.poll() is not None:
                break
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                self._join_reader()
                raise ServerFailed(self.argv, None, self.stderr(), timeout,
                                   self.listen_re is None)
        if self.proc.poll() is not None:
            self._join_reader()
            raise ServerFailed(self.argv, self.proc.returncode, self.stderr())
        return self

    def _up(self, listening):
        if self.listen_re is not None:
            return listening.wait(0.02)
        if self.proc.poll() is None and self.ready():
            return True
        time.sleep(0.05)
        return False

    def stop(self, sig=signal.SIGTERM, timeout=None, check=None):
        """Send sig (SIGTERM) and wait up to timeout (stop_timeout) for the
        exit; SIGKILL after that. Returns the exit code (None: never started,
        or ended by kill9() when checking). With check (default check_exit),
        raises ServerError if the server had already died, did not exit in
        time or exited non-zero."""
        check = self.check_exit if check is None else check
        if self.proc is None or (self.killed and check):
            return None
        if self.proc.poll() is not None:
            self._join_reader()
            if check:
                raise ServerError(f"{self.name} had already exited with {self.proc.returncode} "
                                  f"(crashed or stopped by itself); stderr:\n{self.stderr()}")
            return self.proc.returncode
        timeout = self.stop_timeout if timeout is None else timeout
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            self._join_reader()
            if check:
                raise ServerError(f"{self.name} did not exit within {timeout}s of "
                                  f"{signal.Signals(sig).name}; stderr:\n{self.stderr()}")
            return rc
        self._join_reader()
        if check and rc != 0:
            raise ServerError(f"{self.name} exited with {rc} after {signal.Signals(sig).name}; "
                              f"stderr:\n{self.stderr()}")
        return rc

    def kill9(self):
        """kill -9 (a crash); a later stop() with checking returns None."""
        self.killed = True
        if self.running():
            self.proc.kill()
            self.proc.wait()
            self._join_reader()

    def wait_exit(self, timeout):
        """Wait for a server that must stop by itself; returns its exit code
        (None if it is still running after timeout)."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._join_reader()
        return rc

    def restart(self):
        if self.running():
            self.stop()
        return self.start()


def phttpd_argv(exe, store, args=(), host="127.0.0.1", port=0):
    """The command line of phttpd (or phttpd-shim) on host:port with store."""
    return [exe, "--host", host, "--port", str(port), "--store", str(store)] + list(args)


class StoreServer(Server):
    """A server with a store file: `store`, or a fresh path in store_dir
    that this object owns and stop() deletes (not restart(), not
    stop(keep_store=True)). exe: a name in the build directory or a path;
    prefix: a command to run it under (taskset ...), before what
    argv_after() gives. Other keywords go to Server."""

    def __init__(self, exe, store=None, store_dir="/dev/shm", host="127.0.0.1", prefix=(),
                 tag=None, **kw):
        self.exe = binary(exe)
        self.own_store = store is None
        self.store = store or unique_store(store_dir, tag or os.path.basename(exe))
        kw.setdefault("name", os.path.basename(exe))
        super().__init__(list(prefix) + self.argv_after(self.exe, host), host=host, **kw)

    def argv_after(self, exe, host):
        """The program's command line (exe first), listening on host."""
        raise NotImplementedError

    def stop(self, sig=signal.SIGTERM, timeout=None, check=None, keep_store=False):
        try:
            return super().stop(sig, timeout, check)
        finally:
            if not keep_store:
                self.remove_store()

    def remove_store(self):
        """Delete the store if this object made up its path."""
        if self.own_store:
            try:
                os.unlink(self.store)
            except FileNotFoundError:
                pass

    def restart(self):
        if self.running():
            self.stop(keep_store=True)
        return self.start()


class Phttpd(StoreServer):
    """phttpd (or phttpd-shim) on host (127.0.0.1) port 0 with its store
    (StoreServer)."""

    def __init__(self, args=(), store=None, store_dir="/dev/shm", exe="phttpd", **kw):
        self.args = list(args)
        kw.setdefault("listen_re", PHTTPD_LISTEN_RE)
        super().__init__(exe, store, store_dir, **kw)

    def argv_after(self, exe, host):
        return phttpd_argv(exe, self.store, self.args, host)


PKVS_LISTEN_RE = re.compile(r"pkvs: (http|resp) listening on (\S+):(\d+)\s*$")
PKVS_READY_RE = re.compile(r"pkvs: ready\s*$")


def pkvs_argv(exe, store, args=(), host="127.0.0.1", http_port=0, resp_port=0):
    """The command line of pkvs (or pkvs-shim); a port of None leaves that
    front end off (--http-port off / --resp-port off)."""
    def port(p):
        return "off" if p is None else str(p)
    return [exe, "--host", host, "--http-port", port(http_port),
            "--resp-port", port(resp_port), "--store", str(store)] + list(args)


def _port_arg(p):
    """True: port 0 (any free one); False: off; a number: that port."""
    return 0 if p is True else None if p is False else int(p)


class Pkvs(StoreServer):
    """pkvs on host (127.0.0.1), HTTP and RESP on ports 0 (http / resp:
    False turns that front end off, a number asks for that port), with its
    store (StoreServer). pkvs prints "pkvs: http listening on HOST:PORT"
    and "pkvs: resp listening on HOST:PORT", then "pkvs: ready"; start()
    waits for ready and sets .port (HTTP, so stats() and url() work) and
    .resp_port."""

    resp_port = None

    def __init__(self, args=(), store=None, store_dir="/dev/shm", exe="pkvs",
                 http=True, resp=True, **kw):
        self.args = list(args)
        self.ports = (_port_arg(http), _port_arg(resp))
        kw.setdefault("listen_re", PKVS_READY_RE)
        super().__init__(exe, store, store_dir, **kw)

    def argv_after(self, exe, host):
        return pkvs_argv(exe, self.store, self.args, host, *self.ports)

    def _drain(self, proc, lines, listening):
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            lines.append(line)
            if listening.is_set():
                continue
            m = PKVS_LISTEN_RE.search(line)
            if m:
                if m.group(1) == "http":
                    self.port = int(m.group(3))
                else:
                    self.resp_port = int(m.group(3))
            elif PKVS_READY_RE.search(line):
                listening.set()

    def start(self, timeout=None):
        self.resp_port = None
        return super().start(timeout)


class RedisServer(Server):
    """redis-server (7, from PATH) on a free port of host, persistence off
    unless args say otherwise (--appendonly yes ...), with a directory of
    its own under dir_base that stop() removes; its log (loglevel warning)
    is read from stdout. Ready when it answers PING. exe: another server
    that takes redis-server's flags (valkey-server). Raises MissingBinary
    when redis-server is not installed. Other keywords go to Server."""

    def __init__(self, args=(), dir_base=None, host="127.0.0.1", prefix=(), tag="redis",
                 exe=None, **kw):
        exe = exe or shutil.which("redis-server")
        if exe is None:
            raise MissingBinary("redis-server is not installed: run `make deps`")
        self.dir_base = dir_base
        self.tag = tag
        self.dir = None
        self.resp_port = free_port(host)
        self.base_argv = list(prefix) + [
            exe, "--port", str(self.resp_port), "--bind", host, "--save", "",
            "--daemonize", "no", "--protected-mode", "no", "--logfile", "",
            "--loglevel", "warning"] + list(args)
        kw.setdefault("name", "redis-server")
        kw.setdefault("start_timeout", 15.0)
        super().__init__(self.base_argv, host=host, listen_re=None, port=self.resp_port,
                         stdout=True, **kw)

    def ready(self):
        try:
            with RespConn(self.port, self.host, timeout=1) as c:
                return c.command("PING") == "PONG"
        except (OSError, ConnectionClosed, ProtocolError):
            return False

    def start(self, timeout=None):
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix=f"paste-{self.tag}-", dir=self.dir_base)
        self.argv = self.base_argv + ["--dir", self.dir]
        try:
            return super().start(timeout)
        except BaseException:
            self.remove_dir()
            raise

    def stop(self, sig=signal.SIGTERM, timeout=None, check=None):
        try:
            return super().stop(sig, timeout, check)
        finally:
            self.remove_dir()

    def remove_dir(self):
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


FLOOR_READY_RE = re.compile(r"resp-floor: ready on (\S+):(\d+) \(durability ([^)]*)\)\s*$")
FLOOR_COUNTS_RE = re.compile(r"resp-floor: (\d+) fences, (\d+) commits")


class RespFloor(StoreServer):
    """bench/resp-floor (the least a RESP server on a paste port costs) on
    127.0.0.1 port 0. It creates its store at `store` (a fresh path in
    store_dir unless given) and removes it when stopped, not when killed;
    stop() then removes an own store that is left. mode: its durability
    words (["emulated", "10000"]: the mode and PM_NS), none by default. It
    prints on stdout: start() reads .port and .durability ("MODE[, WAY]")
    from its ready line, counts() the fences and commits it printed when
    stopped. Other keywords go to Server."""

    durability = None

    def __init__(self, store=None, mode=(), store_dir="/dev/shm", exe="bench/resp-floor", **kw):
        self.mode = [str(m) for m in mode]
        super().__init__(exe, store, store_dir, listen_re=FLOOR_READY_RE, stdout=True, **kw)

    def argv_after(self, exe, host):
        return [exe, str(self.store), "0"] + self.mode

    @property
    def resp_port(self):
        return self.port

    def start(self, timeout=None):
        super().start(timeout)
        for line in list(self.lines):
            m = FLOOR_READY_RE.search(line)
            if m:
                self.durability = m.group(3)
        return self

    def counts(self):
        """(fences, commits) from the line printed at a clean stop."""
        m = FLOOR_COUNTS_RE.search(self.stderr())
        if not m:
            raise ServerError(f"resp-floor printed no counts; output:\n{self.stderr()}")
        return int(m.group(1)), int(m.group(2))


def run_to_exit(argv, timeout=START_TIMEOUT, env=None):
    """Run a server that must refuse to start; returns (exit code, stderr).
    Raises ServerError (after SIGTERM) if it is still running after timeout."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        raise ServerError(f"{os.path.basename(argv[0])} kept running ({' '.join(argv)}); "
                          f"stderr:\n{err.decode('utf-8', 'replace')}")
    return proc.returncode, err.decode("utf-8", "replace")


# --------------------------------------------------------------------------
# Raw sockets
# --------------------------------------------------------------------------

def connect(port, host="127.0.0.1", timeout=5.0, nodelay=True, rcvbuf=None):
    """A TCP connection to host:port (IPv6 when host has a ':'). rcvbuf
    sets SO_RCVBUF before connecting: a small window keeps a server's
    large reply waiting on this client."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.connect((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def reset(sock):
    """Close with SO_LINGER 0: the server sees a RST, not a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


# --------------------------------------------------------------------------
# HTTP over raw sockets
# --------------------------------------------------------------------------

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


STATUS_RE = re.compile(r"(HTTP/1\.[01]) (\d{3}) ?(.*)")
MAX_HEAD = 65536


def parse_head(head):
    """A Response (empty body) from a response head without its blank line."""
    lines = head.split("\r\n")
    m = STATUS_RE.fullmatch(lines[0])
    if not m:
        raise ProtocolError(f"bad status line {lines[0]!r}")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not (sep and name and name == name.strip()):
            raise ProtocolError(f"bad response header line {line!r}")
        headers.append((name, value.strip()))
    return Response(m.group(1), int(m.group(2)), m.group(3), headers, b"")


def take_response(buf, method="GET"):
    """The whole response at the front of buf (a bytearray), removed from
    it; None while buf holds less than a whole response. ProtocolError if
    it is not well-formed or has no Content-Length."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise ProtocolError(f"response head over 64 KiB: {bytes(buf[:200])!r}")
        return None
    resp = parse_head(bytes(buf[:end]).decode("latin-1"))
    cl = resp.header("Content-Length")
    if cl is None or not cl.isdigit():
        raise ProtocolError(f"response without a valid Content-Length: {resp!r}")
    n = 0 if method == "HEAD" else int(cl)
    if len(buf) < end + 4 + n:
        return None
    resp.body = bytes(buf[end + 4:end + 4 + n])
    del buf[:end + 4 + n]
    return resp


class Conn:
    """A client connection: its socket (connect()) and buf, the bytes
    received and not parsed yet. over(sock) takes a socket already
    connected."""

    def __init__(self, port, host="127.0.0.1", timeout=5.0, nodelay=True, rcvbuf=None):
        self.sock = connect(port, host, timeout, nodelay, rcvbuf)
        self.buf = bytearray()

    @classmethod
    def over(cls, sock):
        conn = cls.__new__(cls)
        conn.sock = sock
        conn.buf = bytearray()
        return conn

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


class HttpConn(Conn):
    """A keep-alive client connection that reads HTTP responses by
    Content-Length."""

    def read_response(self, method="GET"):
        while True:
            resp = take_response(self.buf, method)
            if resp is not None:
                return resp
            self._fill()

    def read_responses(self, methods):
        """One response per entry of methods (a request method each, or a count of GETs)."""
        if isinstance(methods, int):
            methods = ["GET"] * methods
        return [self.read_response(m) for m in methods]

    def request(self, method, path, body=None, headers=(), version="HTTP/1.1"):
        self.send(build_request(method, path, body, headers, version))
        return self.read_response(method)


def http_once(port, method, path, body=None, headers=(), host="127.0.0.1", timeout=5.0):
    """One request on a fresh connection."""
    with HttpConn(port, host, timeout) as c:
        return c.request(method, path, body, headers)


def get_stats(port, host="127.0.0.1", timeout=5.0):
    """GET /stats as a dict; ProtocolError unless it is a 200 with JSON."""
    r = http_once(port, "GET", "/stats", host=host, timeout=timeout)
    if r.status != 200 or "application/json" not in (r.header("Content-Type") or ""):
        raise ProtocolError(f"GET /stats: {r!r}")
    try:
        return json.loads(r.body)
    except ValueError as e:
        raise ProtocolError(f"GET /stats: not JSON ({e}): {r!r}")


# --------------------------------------------------------------------------
# The Redis protocol over raw sockets (malformed frames, exact bytes)
# --------------------------------------------------------------------------

class RespError(Exception):
    """An error reply (-ERR ...): the reply, not a failure of the client."""


def resp_command(*args):
    """A RESP2 multibulk command from str/bytes/int arguments."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RespConn(Conn):
    """A Redis-protocol connection: send raw bytes or commands, read whole
    replies (RESP2 and RESP3 types; an error reply is returned as a
    RespError instance, not raised, so pipelines read on)."""

    def _line(self):
        buf = self.buf
        while True:
            end = buf.find(b"\r\n")
            if end >= 0:
                line = bytes(buf[:end])
                del buf[:end + 2]
                return line
            if len(buf) > MAX_HEAD:
                raise ProtocolError(f"RESP line over 64 KiB: {bytes(buf[:200])!r}")
            self._fill()

    def _exact(self, n):
        buf = self.buf
        while len(buf) < n + 2:
            self._fill()
        data = bytes(buf[:n])
        if buf[n:n + 2] != b"\r\n":
            raise ProtocolError(f"bulk of {n} bytes not followed by CRLF: {bytes(buf[:n + 8])!r}")
        del buf[:n + 2]
        return data

    def read_reply(self):
        line = self._line()
        if not line:
            raise ProtocolError("empty RESP line")
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind in (b"$", b"="):
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind in (b"*", b"~", b">"):
            n = int(rest)
            return None if n < 0 else [self.read_reply() for _ in range(n)]
        if kind == b"%":
            n = int(rest)
            return {self._key(self.read_reply()): self.read_reply() for _ in range(n)}
        if kind == b"_":
            return None
        if kind == b"#":
            return rest == b"t"
        if kind == b",":
            return float(rest)
        raise ProtocolError(f"unknown RESP type in {line[:80]!r}")

    @staticmethod
    def _key(k):
        return k.decode() if isinstance(k, bytes) else k

    def command(self, *args):
        self.send(resp_command(*args))
        return self.read_reply()


# --------------------------------------------------------------------------
# Client threads
# --------------------------------------------------------------------------

def run_threads(nthreads, target, timeout=None):
    """Run target(i) in nthreads threads; join them all within timeout
    (None: however long they take). Returns how many were still alive."""
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(nthreads)]
    for t in threads:
        t.start()
    end = None if timeout is None else time.monotonic() + timeout
    for t in threads:
        t.join(None if end is None else max(0.0, end - time.monotonic()))
    return sum(t.is_alive() for t in threads)


class ClientThreads:
    """n client threads, each running self._run(tid, rng) with a
    random.Random of its own drawn from seed, until they end or stop()
    sets done; lock guards what they record. The base of the loads that
    record what a server acknowledged (bench/walclient.py's Load, the
    tests' RefusedLoad)."""

    def __init__(self, n, seed=None, done=None):
        self.lock = threading.Lock()
        self.done = done or threading.Event()
        rng = random.Random(seed)
        self.threads = [threading.Thread(target=self._run, daemon=True,
                                         args=(i, random.Random(rng.getrandbits(64))))
                        for i in range(n)]

    def _run(self, tid, rng):
        raise NotImplementedError

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def join(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        for t in self.threads:
            t.join(None if end is None else max(0.0, end - time.monotonic()))
        return self

    def alive(self):
        """How many threads are still running."""
        return sum(t.is_alive() for t in self.threads)

    def stop(self, timeout=10.0):
        """Set done and join; AssertionError if a thread still runs after timeout."""
        self.done.set()
        self.join(timeout)
        assert not self.alive(), "load threads hung"
