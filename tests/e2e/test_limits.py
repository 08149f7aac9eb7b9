"""What one client may cost pkvs and phttpd, end to end.

Over --max-conns: a client the server has no slot for reads Redis's
"-ERR max number of clients reached" (RESP) or a 503 (HTTP) and then the
end of the connection, in every engine; none hangs, and the refusals are
counted (INFO rejected_connections, /stats refused, /metrics).

--max-output: a client that pipelines GETs and never reads is no longer
read once its unsent replies pass the limit, so the server's resident
memory (VmRSS) grows by about the limit, not by the replies it was sent
the requests for; the memory comes back when the client goes, and the
client is served in full once it reads.

client-output-buffer-limit's normal class (off by default, as Redis's),
against redis-server: a client whose unsent replies pass the hard limit
is closed before any of them is written (one big reply, a pipeline, a
transaction that still runs whole); one over the soft limit for its
seconds is closed though it sends nothing more; CLIENT LIST's omem shows
what waits.

--max-request and --max-request-total: an unfinished command over the
first is refused with the protocol error and a close; the unfinished
commands of all clients together are bounded by the second (the command
that would pass it is refused), and so is the memory they hold.
"""
import re
import select
import socket
import threading
import time

import pytest
import redis

from conftest import (HttpConn, ProtocolError, RespConn, RespError, connect, get_stats,
                      http_once, resp_command, sanitized, wait_until)
from redis_peer import redis_peer  # noqa: F401 (redis_peer: a fixture)

REFUSAL = b"-ERR max number of clients reached\r\n"
MIB = 1 << 20



def check_rss(ok, msg):
    """An RSS bound, asserted unless the build is sanitized."""
    if not sanitized():
        assert ok, msg

def read_to_eof(sock, timeout=5.0):
    """Everything the server sends until it closes; fails on a hang or a reset."""
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            pytest.fail(f"no end of connection within {timeout}s; got {data[:200]!r}")
        except ConnectionResetError:
            pytest.fail(f"reset instead of a clean close; got {data[:200]!r}")
        if not chunk:
            return data
        data += chunk


def vm_rss(pid):
    """Resident memory of pid, bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def info(port):
    """INFO as a dict of its fields (a connection of its own)."""
    with RespConn(port) as c:
        text = c.command("INFO", "everything").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def metric(port, name):
    r = http_once(port, "GET", "/metrics")
    m = re.search(rf"^{name} (\d+)$", r.body.decode(), re.M)
    assert m, f"no {name} in /metrics"
    return int(m.group(1))


def stats_once_served(port, refused):
    """GET /stats, or None while the server refuses it (every slot in use:
    counted in refused[0])."""
    try:
        return get_stats(port)
    except ProtocolError:
        refused[0] += 1
        return None


def ping_once(port):
    """True if a new connection is served (PONG), False if it is refused."""
    s = connect(port)
    try:
        s.sendall(resp_command("PING"))
        reply = s.recv(100)
    finally:
        s.close()
    assert reply in (b"+PONG\r\n", REFUSAL), reply
    return reply == b"+PONG\r\n"


def send_until_stalled(sock, data, stall=1.0, limit=30.0):
    """Send data without reading; stop when the server has not taken a byte
    for `stall` seconds (it stopped reading) or everything left. Returns
    the bytes sent."""
    sock.setblocking(False)
    sent, last = 0, time.monotonic()
    t0 = last
    while sent < len(data) and time.monotonic() - t0 < limit:
        try:
            n = sock.send(data[sent:sent + MIB])
            sent += n
            last = time.monotonic()
        except BlockingIOError:
            if time.monotonic() - last > stall:
                break
            select.select([], [sock], [], 0.05)
    return sent


# ---------------------------------------------------------------------------
# Over the connection limit
# ---------------------------------------------------------------------------

@pytest.mark.basic
def test_pkvs_refuses_over_max_conns(pkvs, engine):
    srv = pkvs.start(["--engine", engine, "--max-conns", "4"])
    # Four clients hold every slot (redis-py and raw sockets alike).
    held = [redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=5)
            for _ in range(2)]
    for r in held:
        assert r.ping()
    raw = [RespConn(srv.resp_port) for _ in range(2)]
    for c in raw:
        assert c.command("PING") == "PONG"
    # Beyond them: the refusal, then a clean end of the connection.
    for _ in range(3):
        s = connect(srv.resp_port)
        s.sendall(resp_command("PING"))
        assert read_to_eof(s) == REFUSAL
        s.close()
    r = redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=5)
    with pytest.raises(redis.exceptions.ConnectionError, match="max number of clients"):
        r.ping()
    # The HTTP front end shares the slots: a whole 503.
    s = connect(srv.port)
    s.sendall(b"GET /kv/x HTTP/1.1\r\nHost: x\r\n\r\n")
    reply = read_to_eof(s)
    s.close()
    assert reply.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), reply
    head, body = reply.split(b"\r\n\r\n", 1)
    assert b"Connection: close" in head and body == b"max number of clients reached\n"
    assert int(re.search(rb"Content-Length: (\d+)", head).group(1)) == len(body)
    # The held clients were served all along; one goes, a newcomer is served.
    assert held[0].set("k", "v") and held[1].get("k") == b"v"
    raw[0].close()
    assert wait_until(lambda: ping_once(srv.resp_port), 3)
    raw[1].close()
    time.sleep(0.2)
    fields = info(srv.resp_port)
    assert fields["maxclients"] == "4"
    assert int(fields["rejected_connections"]) >= 5
    st = get_stats(srv.port)
    assert st["refused"] == int(fields["rejected_connections"]), (st, fields)
    assert metric(srv.port, "paste_refused_connections_total") == st["refused"]


def test_many_clients_over_the_limit_none_hangs(pkvs):
    """200 clients at once against 50 slots: each is served or refused."""
    srv = pkvs.start(["--max-conns", "50"])
    socks = []
    for _ in range(200):
        s = connect(srv.resp_port)
        s.sendall(resp_command("PING"))
        socks.append(s)
    served = refused = 0
    deadline = time.monotonic() + 10
    pending = {s: b"" for s in socks}
    while pending and time.monotonic() < deadline:
        ready, _, _ = select.select(list(pending), [], [], 0.5)
        for s in ready:
            try:
                chunk = s.recv(4096)
            except ConnectionResetError:
                chunk = b"<reset>"
            pending[s] += chunk
            data = pending[s]
            if data == b"+PONG\r\n":
                served += 1
                del pending[s]
            elif not chunk:
                assert data == REFUSAL, data
                refused += 1
                del pending[s]
            elif data not in (REFUSAL[:len(data)], b"+PONG\r\n"[:len(data)]):
                pytest.fail(f"unexpected reply {data!r}")
    assert not pending, f"{len(pending)} clients had no answer"
    assert served == 50 and refused == 150, (served, refused)
    for s in socks:
        s.close()


def test_phttpd_503_over_max_conns(phttpd, engine):
    srv = phttpd.start(engine, extra_args=["--max-conns", "2"])
    with HttpConn(srv.port) as a, HttpConn(srv.port) as b:
        assert a.request("GET", "/").status == 200
        assert b.request("GET", "/").status == 200
        s = connect(srv.port)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = read_to_eof(s)
        s.close()
        assert reply.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), reply
        assert reply.endswith(b"\r\n\r\nmax number of clients reached\n")
        assert a.request("GET", "/").status == 200
    mine = [0]
    st = wait_until(lambda: stats_once_served(srv.port, mine), 3)
    assert st and st["refused"] == 1 + mine[0], (st, mine)


# ---------------------------------------------------------------------------
# Unread replies
# ---------------------------------------------------------------------------

GETS = 1_000_000        # ~107 MB of replies to 100-byte values


def unread_gets(srv, frame):
    """Pipeline GETs (frame each) from a client that never reads; returns
    (RSS growth while it is stalled, RSS growth after it went, requests
    the server handled, connections paused while it was stalled). The
    client's small receive buffer keeps the kernel from holding much of
    the replies (autotuned, it takes up to tcp_rmem's maximum)."""
    with RespConn(srv.resp_port) as c:
        assert c.command("SET", "k", b"v" * 100) == "OK"
    time.sleep(0.2)
    rss0 = vm_rss(srv.pid)
    handled0 = get_stats(srv.port)["requests"]
    s = connect(srv.port if frame.startswith(b"GET") else srv.resp_port, rcvbuf=1 << 16)
    send_until_stalled(s, frame * GETS)
    time.sleep(0.5)                 # what the server read before pausing is handled
    grown = vm_rss(srv.pid) - rss0
    st = get_stats(srv.port)
    handled = st["requests"] - handled0 - 1     # (the /stats request before)
    s.close()
    assert wait_until(lambda: get_stats(srv.port)["conns"] == 1, 5)   # /stats' own
    time.sleep(0.3)
    after = vm_rss(srv.pid) - rss0
    return grown, after, handled, st["paused"]


@pytest.mark.parametrize("front", ["resp", "http"])
def test_unread_replies_bounded(pkvs, front):
    limit = 4 * MIB
    srv = pkvs.start(["--max-output", "4M"])
    frame = resp_command("GET", "k") if front == "resp" else b"GET /kv/k HTTP/1.1\r\nHost: x\r\n\r\n"
    grown, after, handled, paused = unread_gets(srv, frame)
    assert handled < GETS // 2, f"{handled} of {GETS} requests handled: no backpressure"
    # The limit, one pass's replies past it, and the allocator's rounding.
    check_rss(grown < limit + 12 * MIB, f"RSS grew {grown / MIB:.1f} MiB for a 4 MiB limit")
    assert paused == 1
    check_rss(after < 2 * MIB, f"RSS {after / MIB:.1f} MiB above the start after the client went")
    fields = info(srv.resp_port)
    assert int(fields["pkvs_output_pauses"]) >= 1 and fields["pkvs_max_output"] == str(limit)
    assert fields["pkvs_paused_clients"] == "0"
    assert metric(srv.port, "paste_pauses_total") >= 1


def test_paused_client_served_in_full(pkvs, engine):
    """A pipelining client that reads late gets every reply, in order."""
    srv = pkvs.start(["--engine", engine, "--max-output", "256K"])
    with RespConn(srv.resp_port, rcvbuf=1 << 16) as c:
        assert c.command("SET", "k", b"x" * 1000) == "OK"
        n = 20000                      # ~10 MB of replies
        frames = b"".join(resp_command("GET", "k") if i % 2 else resp_command("INCR", "n")
                          for i in range(n))
        sent = send_until_stalled(c.sock, frames, stall=0.5)
        assert wait_until(lambda: get_stats(srv.port)["paused"] == 1, 3)
        c.sock.setblocking(True)
        c.sock.settimeout(10)
        # Read while sending the rest, as a client with a reader thread would.
        t = threading.Thread(target=c.sock.sendall, args=(frames[sent:],))
        t.start()
        for i in range(n):
            want = b"x" * 1000 if i % 2 else i // 2 + 1
            assert c.read_reply() == want, i
        t.join()
    assert get_stats(srv.port)["paused"] == 0


# ---------------------------------------------------------------------------
# The normal class of client-output-buffer-limit
# ---------------------------------------------------------------------------

NORMAL_OFF = "normal 0 0 0"


@pytest.fixture(params=["pkvs", "redis"])
def normal_port(request, pkvs, redis_peer):  # noqa: F811
    """A server's RESP port, pkvs's own or the shared redis-server's (its
    keys flushed and the normal class off again afterwards)."""
    port = pkvs.start(http=False).resp_port if request.param == "pkvs" else redis_peer.resp_port
    yield port
    with RespConn(port) as c:
        c.command("CONFIG", "SET", "client-output-buffer-limit", NORMAL_OFF)
        c.command("FLUSHALL")


def named_client(port, name, rcvbuf=None):
    s = connect(port, rcvbuf=rcvbuf)
    s.sendall(resp_command("CLIENT", "SETNAME", name))
    assert s.recv(100) == b"+OK\r\n"
    return s


def listed(c, name):
    return f"name={name} " in c.command("CLIENT", "LIST").decode()


def unanswered(sock):
    """What the server sent before closing: nothing, as Redis (a reset
    counts as a close)."""
    sock.settimeout(5)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_normal_limit_one_big_reply(normal_port):
    with RespConn(normal_port) as c:
        c.command("RPUSH", "big", *[b"x" * 1000] * 150)
        assert c.command("CONFIG", "SET", "client-output-buffer-limit", "normal 100000 0 0") == "OK"
        s = named_client(normal_port, "bigreply")
        s.sendall(resp_command("LRANGE", "big", "0", "-1"))
        assert wait_until(lambda: not listed(c, "bigreply"), 5)
        assert unanswered(s) == b""
        s.close()
        assert c.command("LLEN", "big") == 150


def test_normal_limit_pipeline_unanswered(normal_port):
    with RespConn(normal_port) as c:
        c.command("SET", "bigkey", b"v" * 10000)
        assert c.command("CONFIG", "SET", "client-output-buffer-limit", "normal 100000 0 0") == "OK"
        s = named_client(normal_port, "pipeline")
        s.sendall(b"".join(resp_command("SET", f"k{i}", "1") + resp_command("GET", "bigkey")
                           for i in range(15)))
        assert wait_until(lambda: not listed(c, "pipeline"), 5)
        assert unanswered(s) == b""
        s.close()
        # Redis ran the commands before the replies passed the limit.
        assert c.command("EXISTS", *[f"k{i}" for i in range(15)]) >= 10


def test_normal_limit_transaction_runs_whole(normal_port):
    with RespConn(normal_port) as c:
        c.command("RPUSH", "big", *[b"x" * 1000] * 150)
        c.command("SET", "k1", "v1")
        assert c.command("CONFIG", "SET", "client-output-buffer-limit", "normal 100000 0 0") == "OK"
        s = named_client(normal_port, "transaction")
        s.sendall(b"".join(resp_command(*a) for a in (
            ("MULTI",), ("SET", "k2", "v2"), ("GET", "k2"), ("LRANGE", "big", "0", "-1"),
            ("SET", "k3", "v3"), ("DEL", "k1"), ("EXEC",))))
        assert wait_until(lambda: not listed(c, "transaction"), 5)
        got = unanswered(s)
        s.close()
        assert b"*5" not in got          # never EXEC's reply
        assert c.command("GET", "k1") is None
        assert c.command("GET", "k2") == b"v2" and c.command("GET", "k3") == b"v3"


def test_normal_soft_limit_without_traffic(normal_port):
    """Over the soft limit for its 2 seconds, a client that sends nothing
    more is closed; before then it is listed with its unsent bytes."""
    with RespConn(normal_port) as c:
        for _ in range(12):
            c.command("RPUSH", "big", *[b"x" * 1000] * 1000)
        assert c.command("CONFIG", "SET", "client-output-buffer-limit", "normal 0 1mb 2") == "OK"
        s = named_client(normal_port, "soft", rcvbuf=4096)
        s.sendall(resp_command("LRANGE", "big", "0", "-1"))
        t0 = time.monotonic()
        time.sleep(0.5)
        line = [x for x in c.command("CLIENT", "LIST").decode().splitlines() if "name=soft " in x]
        assert line, "dropped before its seconds ran out"
        assert int(re.search(r"omem=(\d+)", line[0]).group(1)) > 1 << 20, line[0]
        assert wait_until(lambda: not listed(c, "soft"), 6)
        assert time.monotonic() - t0 > 1.5
        s.close()


def test_normal_limit_monitor(normal_port):
    """A monitor is a normal client: one that stops reading is closed once
    its unsent lines pass the hard limit."""
    with RespConn(normal_port) as c:
        assert c.command("CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 0 0") == "OK"
        m = named_client(normal_port, "mon", rcvbuf=4096)
        m.sendall(resp_command("MONITOR"))
        assert m.recv(100) == b"+OK\r\n"
        value = b"v" * 10000
        for i in range(200):          # up to 40 MB of lines, ~10 KB each
            c.sock.sendall(b"".join(resp_command("SET", f"m{i % 7}", value) for _ in range(20)))
            for _ in range(20):
                assert c.read_reply() == "OK"
            if i % 20 == 19 and not listed(c, "mon"):
                break
        assert wait_until(lambda: not listed(c, "mon"), 5)
        m.close()


def test_normal_limit_off_by_default(normal_port):
    """The same big reply with the class at its default: all of it."""
    with RespConn(normal_port) as c:
        c.command("RPUSH", "big", *[b"x" * 1000] * 150)
        assert c.command("CONFIG", "GET", "client-output-buffer-limit")[1].startswith(b"normal 0 0 0")
        assert c.command("LRANGE", "big", "0", "-1") == [b"x" * 1000] * 150


# ---------------------------------------------------------------------------
# Unfinished requests
# ---------------------------------------------------------------------------

def unfinished_mset(value_len, sent_len):
    """An MSET whose first value (not the last argument: it does not
    stream) is value_len bytes, of which sent_len are sent."""
    head = b"*5\r\n$4\r\nMSET\r\n$1\r\na\r\n$%d\r\n" % value_len
    return head + b"v" * sent_len


def test_request_over_max_request(pkvs):
    srv = pkvs.start(["--max-request", "64K"])
    with RespConn(srv.resp_port) as c:
        c.send(unfinished_mset(100_000, 100_000))
        reply = c.read_reply()
        assert isinstance(reply, RespError) and "too big" in str(reply), reply
        assert c.is_closed()
    with RespConn(srv.resp_port) as c:   # a command under it is fine
        c.send(resp_command("MSET", "a", b"v" * 60_000, "b", "2"))
        assert c.read_reply() == "OK"
    fields = info(srv.resp_port)
    assert fields["pkvs_max_request"] == str(64 << 10)
    assert fields["pkvs_requests_too_big"] == "1"


def test_commands_of_many_arguments(pkvs):
    """Bulk loads of more arguments than the front end's array holds
    (65,536) and of many megabytes, with the default limits, as Redis
    takes them; past 1,048,576 arguments Redis's protocol error and a
    close; then the server serves on, its memory given back."""
    srv = pkvs.start(http=False, store_size="512M")
    r = redis.Redis(port=srv.resp_port, socket_timeout=60)
    r.ping()
    rss0 = vm_rss(srv.pid)
    assert r.rpush("list", *[b"x" * 100 + str(i).encode() for i in range(200_000)]) == 200_000
    assert r.lindex("list", 0) == b"x" * 100 + b"0" and r.lindex("list", -1).endswith(b"199999")
    assert r.sadd("set", *range(150_000)) == 150_000
    assert r.hset("hash", mapping={f"f{i}": "v" * 50 for i in range(100_000)}) == 100_000
    assert r.mset({f"k{i}": i for i in range(100_000)}) is True
    assert r.get("k99999") == b"99999"
    assert r.delete(*[f"k{i}" for i in range(100_000)], "nope") == 100_000
    assert (r.llen("list"), r.scard("set"), r.hlen("hash")) == (200_000, 150_000, 100_000)
    with RespConn(srv.resp_port) as c:
        c.send(b"*1048577\r\n" + resp_command("DEL")[4:] + b"$1\r\nk\r\n")   # refused at its count
        reply = c.read_reply()
        assert isinstance(reply, RespError) and "too many arguments" in str(reply), reply
        assert c.is_closed()
    assert r.ping() is True and r.dbsize() == 3
    r.close()
    time.sleep(0.3)
    check_rss(vm_rss(srv.pid) - rss0 < 256 * MIB, "RSS kept after the bulk commands")


def test_unfinished_requests_bounded_together(pkvs):
    """200 clients each sending most of an MSET of a 120 KB value and
    stopping (24 MB in all): together they may hold --max-request-total; a
    command whose growth would pass it is refused (its client closed), the
    others finish."""
    total = 2 * MIB
    srv = pkvs.start(["--max-request-total", "2M"])
    rss0 = vm_rss(srv.pid)
    conns = [RespConn(srv.resp_port) for _ in range(200)]
    value = 120_000
    for c in conns:
        try:
            c.send(unfinished_mset(value, value - 10))
        except OSError:                  # refused and closed while sending
            pass
    time.sleep(0.5)
    fields = info(srv.resp_port)
    held, too_big = int(fields["pkvs_request_bytes"]), int(fields["pkvs_requests_too_big"])
    assert 0 < held <= total and too_big > 0, fields
    grown = vm_rss(srv.pid) - rss0
    check_rss(grown < total + 8 * MIB, f"RSS grew {grown / MIB:.1f} MiB for an 8 MiB bound")
    done = told = 0
    for c in conns:                      # the rest of the command
        c.sock.settimeout(5)
        try:
            c.send(b"v" * 10 + b"\r\n$1\r\nb\r\n$1\r\n2\r\n")
        except OSError:
            pass
        try:
            reply = c.read_reply()
        except OSError:
            reply = None                 # refused, and the reply lost to the reset
        except Exception as e:           # ConnectionClosed
            reply = e
        if reply == "OK":
            done += 1
        elif isinstance(reply, RespError):
            assert "unfinished commands of all clients hold over" in str(reply), reply
            told += 1
        c.close()
    assert done > 0 and told > 0, (done, told)
    assert done + too_big == 200, (done, too_big)
    assert wait_until(lambda: int(info(srv.resp_port)["pkvs_request_bytes"]) == 0, 3)
