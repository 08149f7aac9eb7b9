"""bench/pload, the benchmarks' io_uring load generator: its counts agree
with what phttpd stored, and it reports (not hides) error statuses, broken
responses and closed connections, against scripted servers. --reconnect
(one request per connection) the same way, plus what it puts on the wire."""
import json
import socket
import subprocess
import threading

import pytest

from conftest import HttpConn, binary, get_stats

WAL_BODY = b"w" * 1024


def wal_request():
    head = b"POST /log HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1024\r\n\r\n"
    return head + WAL_BODY


GET = b"GET /rpc HTTP/1.1\r\nHost: localhost\r\n\r\n"


def pload(port, request, tmp_path, conns=4, seconds=1, expect_code=0, flags=()):
    req = tmp_path / "request"
    req.write_bytes(request)
    cp = subprocess.run([binary("bench/pload")] + list(flags) +
                        ["-c", str(conns), "-d", str(seconds),
                         "-f", str(req), "127.0.0.1", str(port)],
                        capture_output=True, text=True, timeout=seconds + 30)
    assert cp.returncode == expect_code, cp.stdout + cp.stderr
    return json.loads(cp.stdout) if cp.stdout.strip() else None


class ScriptedServer:
    """A thread-per-connection server on 127.0.0.1 that answers each
    request (a GET head) with whatever respond(conn) sends. It counts the
    connections it accepted and keeps, per connection, the heads it got."""

    def __init__(self, respond):
        self.respond = respond
        self.lsock = socket.create_server(("127.0.0.1", 0), backlog=512)
        self.port = self.lsock.getsockname()[1]
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.heads = []              # one list of request heads per connection
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        buf = b""
        heads = []
        with self.lock:
            self.heads.append(heads)
        with conn:
            while not self.stop.is_set():
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\r\n\r\n" in buf:
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    heads.append(head + b"\r\n\r\n")
                    if self.respond(self, conn) is False:
                        return

    def close(self):
        self.stop.set()
        self.lsock.close()


@pytest.fixture
def scripted():
    servers = []

    def start(respond):
        srv = ScriptedServer(respond)
        servers.append(srv)
        return srv
    yield start
    for srv in servers:
        srv.close()


def test_pload_wal_counts_match_the_log(phttpd, tmp_path):
    # Every acknowledged POST holds a 2 KiB buffer: at 140 K req/s (seen
    # here) 0.5 s of load needs ~140 MiB; a full store would answer 507.
    srv = phttpd.start("uring", "wal", ["--store-size", "512M"])
    r = pload(srv.port, wal_request(), tmp_path, conns=8, seconds=0.5)
    assert r["requests"] > 100, r
    assert r["non2xx"] == 0 and r["socket_errors"] == 0, r
    assert r["conns_alive"] == 8
    assert 0 < r["lat_p50_us"] <= r["lat_p99_us"] <= r["lat_max_us"], r
    last = get_stats(srv.port)["log_last_lsn"]
    # Every counted response is a record; at most one request per connection
    # was still in flight (or answered after the deadline) when pload stopped.
    assert r["requests"] <= last <= r["requests"] + 8, (r, last)
    with HttpConn(srv.port) as c:
        got = c.request("GET", f"/log/{last}")
    assert got.status == 200 and got.body == WAL_BODY


def test_pload_rpc_both_engines(phttpd, engine, tmp_path):
    srv = phttpd.start(engine, "rpc", ["--body-len", "3000"])
    r = pload(srv.port, GET, tmp_path, conns=16)
    assert r["requests"] > 100 and r["non2xx"] == 0 and r["socket_errors"] == 0, r
    served = get_stats(srv.port)["requests"]
    assert r["requests"] <= served <= r["requests"] + 16 + 1, (r, served)


def test_pload_counts_error_statuses(scripted, tmp_path):
    srv = scripted(lambda s, c: c.sendall(b"HTTP/1.1 404 Not Found\r\n"
                                          b"Content-Length: 9\r\n\r\nnot found"))
    r = pload(srv.port, GET, tmp_path, conns=2)
    assert r["requests"] > 10 and r["non2xx"] == r["requests"], r
    assert r["socket_errors"] == 0, r


def test_pload_split_head_and_large_body(scripted, tmp_path):
    body = b"b" * 100000

    def respond(s, c):
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"
        for piece in (head[:7], head[7:30], head[30:] + body[:10], body[10:]):
            c.sendall(piece)
    r = pload(scripted(respond).port, GET, tmp_path, conns=2)
    assert r["requests"] > 10 and r["socket_errors"] == 0 and r["non2xx"] == 0, r


@pytest.mark.parametrize("reply, kind", [
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", "parse"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok-and-more", "parse"),
    (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "parse"),
])
def test_pload_refuses_responses_it_cannot_measure(scripted, tmp_path, reply, kind):
    r = pload(scripted(lambda s, c: c.sendall(reply)).port, GET, tmp_path, conns=2)
    assert r["requests"] == 0 and r["errors"][kind] > 0, r
    assert r["conns_alive"] == 2, r     # replaced, as wrk does


def test_pload_reconnects_when_the_server_closes(scripted, tmp_path):
    def respond(s, c):
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        return False                   # close after every response
    r = pload(scripted(respond).port, GET, tmp_path, conns=2)
    assert r["requests"] > 10 and r["errors"]["read"] > 0, r


def test_pload_exits_2_when_no_connection_is_left(scripted, tmp_path):
    def respond(s, c):
        s.close()                      # no listener left: reconnecting fails
        return False
    r = pload(scripted(respond).port, GET, tmp_path, conns=1, expect_code=2)
    assert r["conns_alive"] == 0 and r["errors"]["connect"] == 1, r


def test_pload_usage_errors(tmp_path):
    exe = binary("bench/pload")
    req = tmp_path / "request"
    req.write_bytes(GET)
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    cases = [
        ([], "usage"),
        (["-c", "0", "-d", "1", "-f", str(req), "127.0.0.1", "80"], "usage"),
        (["-c", "1", "-d", "x", "-f", str(req), "127.0.0.1", "80"], "usage"),
        (["-c", "1", "-d", "1", "-f", str(tmp_path / "nope"), "127.0.0.1", "80"],
         "No such file"),
        (["-c", "1", "-d", "1", "-f", str(req), "127.0.0.1", str(port)], "Connection refused"),
        (["-c", "1", "-d", "1", "-f", str(req), "no.such.host.invalid", "80"], "no.such.host"),
    ]
    for args, message in cases:
        cp = subprocess.run([exe] + args, capture_output=True, text=True, timeout=30)
        assert cp.returncode == 1, (args, cp.stdout, cp.stderr)
        assert message in cp.stderr, (args, cp.stderr)
        assert cp.stdout == "", (args, cp.stdout)


# ------------------------------------------------------------------ --reconnect

OK_CLOSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
GET_CLOSE = b"GET /rpc HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"


def close_after(reply):
    def respond(s, c):
        c.sendall(reply)
        return False                   # the server closes, as HTTP/1.0 or close wants
    return respond


def test_pload_reconnect_one_request_per_connection(scripted, tmp_path):
    """Each connection carries exactly one request, with Connection: close
    added before the blank line; every response and EOF is one connection."""
    srv = scripted(close_after(OK_CLOSE))
    r = pload(srv.port, GET, tmp_path, conns=3, flags=["--reconnect"])
    assert r["reconnect"] is True and r["socket_errors"] == 0 and r["non2xx"] == 0, r
    assert r["connections"] > 20 and r["conns_alive"] == 3, r
    # A response may be counted whose EOF came after the deadline, one per slot.
    assert r["connections"] <= r["requests"] <= r["connections"] + 3, r
    with srv.lock:
        heads = [list(h) for h in srv.heads]
    # Connections the server saw: the completed ones, plus at most one per
    # slot still open at the deadline (possibly without a request yet).
    assert r["connections"] <= len(heads) <= r["connections"] + 3, (r, len(heads))
    want = GET[:-2] + b"Connection: close\r\n\r\n"
    assert all(h == [want] for h in heads if h), [h for h in heads if h != [want]][:3]
    assert sum(1 for h in heads if not h) <= 3


def test_pload_reconnect_keeps_a_close_header(scripted, tmp_path):
    srv = scripted(close_after(OK_CLOSE))
    r = pload(srv.port, GET_CLOSE, tmp_path, conns=2, flags=["-r"])
    assert r["connections"] > 10 and r["socket_errors"] == 0, r
    with srv.lock:
        assert all(h == [GET_CLOSE] for h in srv.heads if h)


def test_pload_reconnect_counts_errors_and_goes_on(scripted, tmp_path):
    """A reply cut short by the close, extra bytes after a reply: errors by
    kind, and the slot goes on with a new connection."""
    cut = scripted(close_after(OK_CLOSE[:-1]))
    r = pload(cut.port, GET, tmp_path, conns=2, flags=["--reconnect"])
    assert r["requests"] == 0 and r["errors"]["read"] > 10 and r["conns_alive"] == 2, r
    extra = scripted(close_after(OK_CLOSE + b"junk"))
    r = pload(extra.port, GET, tmp_path, conns=2, flags=["--reconnect"])
    assert r["errors"]["parse"] > 10 and r["connections"] == 0 and r["conns_alive"] == 2, r
    status = scripted(close_after(b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n"))
    r = pload(status.port, GET, tmp_path, conns=2, flags=["--reconnect"])
    assert r["connections"] > 10 and r["non2xx"] == r["requests"], r


def test_pload_reconnect_exits_2_when_the_server_is_gone(scripted, tmp_path):
    def respond(s, c):
        s.close()                      # no listener left: every next connect fails
        c.sendall(OK_CLOSE)
        return False
    r = pload(scripted(respond).port, GET, tmp_path, conns=2, flags=["--reconnect"],
              expect_code=2)
    assert r["conns_alive"] == 0 and r["errors"]["connect"] == 2, r


def test_pload_reconnect_refuses_keep_alive_requests(tmp_path):
    for request, message in [
        (b"GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", "Connection: close"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n", "complete head"),
    ]:
        req = tmp_path / "request"
        req.write_bytes(request)
        cp = subprocess.run([binary("bench/pload"), "--reconnect", "-c", "1", "-d", "1",
                             "-f", str(req), "127.0.0.1", "9"],
                            capture_output=True, text=True, timeout=30)
        assert cp.returncode == 1 and message in cp.stderr, (request, cp.stderr)
        assert cp.stdout == ""


def test_pload_reconnect_against_phttpd(phttpd, engine, tmp_path):
    """The server's counts agree: one accept and one request per connection
    pload completed, plus at most one per slot in flight at the deadline,
    plus the /stats request that reads them."""
    srv = phttpd.start(engine)
    before = get_stats(srv.port)
    r = pload(srv.port, GET, tmp_path, conns=8, flags=["--reconnect"])
    assert r["connections"] > 100 and r["socket_errors"] == 0 and r["non2xx"] == 0, r
    after = get_stats(srv.port)
    accepts = after["accepts"] - before["accepts"] - 1
    requests = after["requests"] - before["requests"] - 1
    assert r["connections"] <= accepts <= r["connections"] + 8, (r, accepts)
    assert r["requests"] <= requests <= r["connections"] + 8, (r, requests)
