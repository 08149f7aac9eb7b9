"""bench/pload, the benchmarks' io_uring load generator: its counts agree
with what phttpd stored, and it reports (not hides) error statuses, broken
responses and closed connections, against scripted servers. --reconnect
(one request per connection) the same way, plus what it puts on the wire.
--resp (the Redis protocol): counts against pkvs's and Redis's INFO stats,
error and null replies, pipelining, --keyspace and malformed replies
against scripted servers."""
import json
import re
import socket
import subprocess
import threading

import pytest

from conftest import (HttpConn, MissingBinary, RedisServer, RespConn, binary, free_port,
                      get_stats, resp_command)

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
    port = free_port()
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


# ------------------------------------------------------------------ --resp

SET = resp_command("SET", "key:__rand_int__", "v" * 100)
GET_KEY = resp_command("GET", "key:__rand_int__")


def info_stats(port):
    with RespConn(port) as c:
        text = c.command("INFO", "stats").decode()
        dbsize = c.command("DBSIZE")
    stats = dict(l.split(":", 1) for l in text.splitlines() if ":" in l)
    return {k: int(v) for k, v in stats.items() if v.isdigit()}, dbsize


def check_against_info(port, tmp_path, keyspace=1000, conns=4):
    """SET then GET (the GETs pipelined 4 deep) over a keyspace: every
    counted reply is a command the server processed, at most one batch per
    connection more was in flight at the deadline, and every GET of a key
    that exists is a hit."""
    s0, db0 = info_stats(port)
    r = pload(port, SET, tmp_path, conns=conns, flags=["--resp", "-k", str(keyspace)])
    assert r["resp"] is True and r["requests"] > 1000, r
    assert r["socket_errors"] == 0 and r["error_replies"] == r["non2xx"] == 0, r
    assert r["null_replies"] == 0 and r["conns_alive"] == conns, r
    assert 0 < r["lat_p50_us"] <= r["lat_p99_us"] <= r["lat_max_us"], r
    s1, db1 = info_stats(port)
    # the INFO and DBSIZE of info_stats count too (before or after the snapshot)
    done = s1["total_commands_processed"] - s0["total_commands_processed"] - 2
    assert r["requests"] <= done <= r["requests"] + conns + 1, (r, done)
    assert db0 < db1 <= db0 + keyspace, (db0, db1)
    if r["requests"] >= 20 * keyspace:     # missing a key: p ~ 1000 e^-20
        assert db1 == db0 + keyspace, (r, db1)

    g = pload(port, GET_KEY, tmp_path, conns=conns,
              flags=["--resp", "-P", "4", "--keyspace", str(keyspace)])
    assert g["requests"] > 1000 and g["pipeline"] == 4 and g["commands_per_send"] == 4, g
    assert g["socket_errors"] == 0 and g["error_replies"] == 0, g
    s2, _ = info_stats(port)
    done = s2["total_commands_processed"] - s1["total_commands_processed"] - 2
    assert g["requests"] <= done <= g["requests"] + 4 * conns + 1, (g, done)
    hits = s2["keyspace_hits"] - s1["keyspace_hits"]
    found = g["requests"] - g["null_replies"]
    assert found <= hits <= found + 4 * conns, (g, hits)
    if db1 == db0 + keyspace:
        assert g["null_replies"] == 0, g


def test_pload_resp_counts_match_pkvs_info(pkvs, tmp_path):
    srv = pkvs.start()
    check_against_info(srv.resp_port, tmp_path)


def test_pload_resp_counts_match_redis_info(tmp_path):
    try:
        redis = RedisServer(["--appendonly", "no"], stop_timeout=15)
    except MissingBinary as e:
        pytest.skip(str(e))
    redis.start()
    try:
        check_against_info(redis.resp_port, tmp_path)
    finally:
        redis.stop()


def split_command(buf):
    """(args, rest) for the first complete multibulk command in buf, or None."""
    end = buf.find(b"\r\n")
    if end < 0:
        return None
    assert buf[:1] == b"*", buf[:40]
    pos, args = end + 2, []
    for _ in range(int(buf[1:end])):
        end = buf.find(b"\r\n", pos)
        if end < 0:
            return None
        assert buf[pos:pos + 1] == b"$", buf[pos:pos + 40]
        start = end + 2
        stop = start + int(buf[pos + 1:end])
        if len(buf) < stop + 2:
            return None
        args.append(bytes(buf[start:stop]))
        pos = stop + 2
    return args, buf[pos:]


class RespScripted(ScriptedServer):
    """ScriptedServer for RESP: respond(server, conn, args) per command;
    self.commands keeps, per connection, every command's arguments."""

    def _serve(self, conn):
        buf = b""
        cmds = []
        with self.lock:
            self.heads.append(cmds)
        with conn:
            while not self.stop.is_set():
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while True:
                    got = split_command(buf)
                    if got is None:
                        break
                    args, buf = got
                    cmds.append(args)
                    if self.respond(self, conn, args) is False:
                        return


def test_pload_resp_error_and_null_replies(tmp_path):
    """Error replies are counted apart (and as non2xx), nulls too; every
    reply type, sent a few bytes at a time, is framed."""
    err = RespScripted(lambda s, c, a: c.sendall(b"-ERR no such key\r\n"))
    nul = RespScripted(lambda s, c, a: c.sendall(b"$-1\r\n"))
    reply = (b"*4\r\n$3\r\nabc\r\n*2\r\n:1\r\n*-1\r\n+OK\r\n-inner\r\n")

    def dribble(s, c, a):
        for i in range(0, len(reply), 5):
            c.sendall(reply[i:i + 5])
    split = RespScripted(dribble)
    try:
        r = pload(err.port, GET_KEY, tmp_path, conns=2, flags=["--resp"])
        assert r["requests"] > 10 and r["error_replies"] == r["non2xx"] == r["requests"], r
        assert r["socket_errors"] == 0, r
        r = pload(nul.port, GET_KEY, tmp_path, conns=2, flags=["--resp", "-P", "3"])
        assert r["requests"] > 10 and r["null_replies"] == r["requests"], r
        assert r["non2xx"] == 0 and r["socket_errors"] == 0, r
        r = pload(split.port, GET_KEY, tmp_path, conns=2, flags=["--resp", "-P", "2"])
        assert r["requests"] > 10 and r["socket_errors"] == 0, r
        assert r["non2xx"] == 0 and r["null_replies"] == 0, r     # an inner error is not one
    finally:
        for srv in (err, nul, split):
            srv.close()


@pytest.mark.parametrize("reply", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",   # not RESP
    b"+OK\r\n+OK\r\n",                                  # a reply nobody asked for
    b"$3\r\nabcd\r\n",                                  # bulk longer than announced
    b"_\r\n",                                            # RESP3 null
    b":12x\r\n",
])
def test_pload_resp_malformed_replies_are_parse_errors(tmp_path, reply):
    srv = RespScripted(lambda s, c, a: c.sendall(reply))
    try:
        r = pload(srv.port, resp_command("PING"), tmp_path, conns=2, flags=["--resp"])
    finally:
        srv.close()
    assert r["errors"]["parse"] > 0 and r["conns_alive"] == 2, r
    assert r["requests"] <= r["errors"]["parse"], r     # "+OK+OK": the first one counts


def test_pload_resp_keyspace_and_pipeline_on_the_wire(tmp_path):
    """-P 3 of a two-command file: six commands per batch, sent after all
    six replies; every __rand_int__ is its own 12-digit number below -k."""
    def respond(s, c, a):
        c.sendall(b"+OK\r\n" if a[0] == b"SET" else b"$1\r\nv\r\n")
    srv = RespScripted(respond)
    two = (resp_command("SET", "k:__rand_int__:__rand_int__", "v") +
           resp_command("GET", "k:__rand_int__"))
    try:
        r = pload(srv.port, two, tmp_path, conns=2, flags=["--resp", "-P", "3", "-k", "50"])
        with srv.lock:
            cmds = [list(c) for c in srv.heads]
    finally:
        srv.close()
    assert r["requests"] > 60 and r["socket_errors"] == 0 and r["commands_per_send"] == 6, r
    assert len(cmds) == 2, len(cmds)
    sent = sum(len(c) for c in cmds)
    # every reply counted had its command; at most a batch per connection was cut off
    assert r["requests"] <= sent <= r["requests"] + 2 * 6, (r, sent)
    numbers = set()
    for per_conn in cmds:
        for i, args in enumerate(per_conn):
            if i % 2 == 0:
                assert args[0] == b"SET" and args[2] == b"v", args
                m = re.fullmatch(rb"k:(\d{12}):(\d{12})", args[1])
            else:
                assert args[0] == b"GET", args
                m = re.fullmatch(rb"k:(\d{12})", args[1])
            assert m, args
            numbers.update(int(g) for g in m.groups())
    assert max(numbers) < 50 and len(numbers) > 40, sorted(numbers)


def test_pload_resp_usage_errors(tmp_path):
    exe = binary("bench/pload")
    files = {"http": GET, "inline": b"PING\r\n", "cut": resp_command("PING")[:-1],
             "get": GET_KEY, "ping": resp_command("PING")}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    cases = [
        (["--resp", "-f", "http"], "complete RESP commands"),
        (["--resp", "-f", "inline"], "complete RESP commands"),
        (["--resp", "-f", "cut"], "complete RESP commands"),
        (["-P", "2", "-f", "get"], "--pipeline needs --resp"),
        (["--resp", "--reconnect", "-f", "get"], "HTTP only"),
        (["--resp", "-k", "10", "-f", "ping"], "__rand_int__"),
        (["--resp", "-P", "0", "-f", "get"], "usage"),
        (["--resp", "-k", "0", "-f", "get"], "usage"),
        (["--resp", "-k", "1000000000001", "-f", "get"], "usage"),
    ]
    for args, message in cases:
        args = [a if a not in files else str(tmp_path / a) for a in args]
        cp = subprocess.run([exe] + args + ["-c", "1", "-d", "1", "127.0.0.1", "9"],
                            capture_output=True, text=True, timeout=30)
        assert cp.returncode == 1 and message in cp.stderr, (args, cp.stderr)
        assert cp.stdout == "", (args, cp.stdout)
