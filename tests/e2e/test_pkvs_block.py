"""pkvs's blocked clients (services/cmd_block.c): BLPOP, BRPOP, BLMOVE,
BRPOPLPUSH, BLMPOP.

- Clients blocked on a key are served in the order they blocked, by the
  push that lands (one command of several elements serving several), by
  an LMOVE, RENAME, COPY or EXEC that fills the key; the blocked client's
  reply, in RESP2 and RESP3, is the same bytes as Redis's.
- A blocked connection runs none of its pipelined commands until it is
  served; then they run in order.
- Timeouts fire within 50 ms of their deadline on an idle server (the
  poll waits for the next deadline, not for the half-second sweep), and
  answer a null array as Redis does; 0 waits forever.
- A blocked client that closes is dropped: the push stays in the list.
- BLMOVE moves on arrival, and a chain (BLMOVE into a key another client
  waits on) serves both; a destination of the wrong type answers
  WRONGTYPE.
- CLIENT UNBLOCK (TIMEOUT, ERROR), CLIENT LIST flags=b, INFO
  blocked_clients.
- 100 blocked clients, each served exactly once.
- kill -9 right after a blocked client got its element: the pop was
  durable (the element is not back after the restart).
"""
import socket
import threading
import time

import pytest

from conftest import PkvsFactory, RespConn, RespError, resp_command, wait_until
from redis_peer import RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)


@pytest.fixture(scope="module")
def server():
    factory = PkvsFactory()
    yield factory.start()
    factory.cleanup()


def blocked(c):
    for line in c.command("INFO", "clients").decode().split("\r\n"):
        if line.startswith("blocked_clients:"):
            return int(line.split(":")[1])
    raise AssertionError("INFO has no blocked_clients")


def wait_blocked(c, n, timeout=5.0):
    assert wait_until(lambda: blocked(c) == n, timeout), f"{blocked(c)} blocked, want {n}"


def no_reply(conn, wait=0.2):
    """Nothing arrives on conn within wait seconds."""
    conn.sock.settimeout(wait)
    try:
        data = conn.sock.recv(1 << 16)
    except socket.timeout:
        return True
    finally:
        conn.sock.settimeout(10)
    conn.buf += data
    return False


def test_served_in_order(server):
    with RespConn(server.resp_port) as c:
        c.command("FLUSHALL")
        waiters = []
        for i in range(5):
            w = RespConn(server.resp_port)
            w.send(resp_command("BLPOP", "nokey", "q", "0"))
            waiters.append(w)
            wait_blocked(c, i + 1)
        assert c.command("RPUSH", "q", "a", "b", "c") == 3    # the length before serving
        for w, want in zip(waiters, [b"a", b"b", b"c"]):
            assert w.read_reply() == [b"q", want]
        assert c.command("EXISTS", "q") == 0
        assert all(no_reply(w, 0.05) for w in waiters[3:])
        assert blocked(c) == 2
        # BRPOP takes from the tail, LPUSH of several serves in order
        assert c.command("LPUSH", "q", "x", "y") == 2
        assert waiters[3].read_reply() == [b"q", b"y"]
        assert waiters[4].read_reply() == [b"q", b"x"]
        for w in waiters:
            w.close()
        wait_blocked(c, 0)


def test_pipeline_waits_behind(server):
    """Commands sent after a blocking one wait for it, then run in order
    (LLEN sees the list after the pop)."""
    with RespConn(server.resp_port) as c, RespConn(server.resp_port) as w:
        c.command("FLUSHALL")
        w.send(resp_command("BLPOP", "k", "0") + resp_command("PING") +
               resp_command("LLEN", "k") + resp_command("RPUSH", "k", "own") +
               resp_command("BLPOP", "k", "0") + resp_command("BLPOP", "k", "0") +
               resp_command("BLPOP", "k", "0") + resp_command("ECHO", "last"))
        wait_blocked(c, 1)
        assert no_reply(w)
        assert c.command("RPUSH", "k", "a", "b") == 2
        assert w.read_reply() == [b"k", b"a"]
        assert w.read_reply() == "PONG"
        assert w.read_reply() == 1
        assert w.read_reply() == 2
        assert w.read_reply() == [b"k", b"b"]
        assert w.read_reply() == [b"k", b"own"]
        wait_blocked(c, 1)                     # blocked again, ECHO waiting
        assert no_reply(w)
        c.command("LPUSH", "k", "z")
        assert w.read_reply() == [b"k", b"z"]
        assert w.read_reply() == b"last"


@pytest.mark.parametrize("proto", [2, 3])
def test_replies_like_redis(server, redis_peer, proto):
    """What a blocked client reads (served, timed out, unblocked) is the
    same bytes as Redis sends."""
    def run(port):
        out = []
        ctl = RespConn(port)
        ctl.command("FLUSHALL")
        cases = [
            (("BLPOP", "a", "b", "0"), ("RPUSH", "b", "x", "y")),
            (("BRPOP", "a", "0"), ("RPUSH", "a", "1", "2")),
            (("BLMPOP", "0", "2", "a", "b", "LEFT", "COUNT", "5"), ("RPUSH", "b", "p", "q")),
            (("BLMPOP", "0", "1", "a", "RIGHT"), ("LPUSH", "a", "r")),
            (("BLMOVE", "s", "d", "RIGHT", "LEFT", "0"), ("RPUSH", "s", "m")),
            (("BRPOPLPUSH", "s", "d", "0"), ("RPUSH", "s", "n")),
            (("BLPOP", "t", "0.05"), None),
            (("BLMOVE", "t", "d", "LEFT", "LEFT", "0.05"), None),
            (("BLMPOP", "0.05", "1", "t", "LEFT"), None),
            (("BLPOP", "u", "0"), ("CLIENT", "UNBLOCK", "ID", "TIMEOUT")),
            (("BLPOP", "u", "0"), ("CLIENT", "UNBLOCK", "ID", "ERROR")),
        ]
        for cmd, wake in cases:
            ctl.command("DEL", "a", "b", "s", "t", "u")
            w = RawConn(port, proto)
            cid = w.call("CLIENT", "ID")
            w.send(resp_command(*cmd))
            if wake:
                wait_blocked(ctl, 1)
                if wake[0] == "CLIENT":
                    wake = ("CLIENT", "UNBLOCK", cid[1:-2].decode(), wake[3])
                out.append(ctl.command(*wake))
            out.append(w.read_raw())
            out.append(w.call("LRANGE", "d", "0", "-1"))
            w.close()
            wait_blocked(ctl, 0)
        ctl.close()
        return out
    got, want = run(server.resp_port), run(redis_peer.resp_port)
    assert got == want


def test_timeouts_on_time(server):
    """An idle server answers each timeout within 50 ms of its deadline,
    never before it."""
    with RespConn(server.resp_port) as c:
        c.command("FLUSHALL")
        timeouts = [0.05, 0.13, 0.3, 0.75, 1.2]
        conns = [RespConn(server.resp_port) for _ in timeouts]
        took = [None] * len(timeouts)

        def wait(i):
            t0 = time.monotonic()
            assert conns[i].command("BLPOP", f"k{i}", str(timeouts[i])) is None
            took[i] = time.monotonic() - t0
        threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(timeouts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
        for t, want in zip(took, timeouts):
            assert t is not None and want - 0.002 <= t <= want + 0.05, (want, t)
        # BLMOVE and BLMPOP time out alike; 0 waits for good
        for cmd in (("BLMOVE", "k", "d", "LEFT", "LEFT", "0.1"), ("BLMPOP", "0.1", "1", "k", "LEFT")):
            t0 = time.monotonic()
            assert conns[0].command(*cmd) is None
            assert 0.098 <= time.monotonic() - t0 <= 0.15
        conns[1].send(resp_command("BLPOP", "forever", "0"))
        assert no_reply(conns[1], 1.0)
        assert c.command("RPUSH", "forever", "at last") == 1
        assert conns[1].read_reply() == [b"forever", b"at last"]
        for x in conns:
            x.close()


def test_closed_client_dropped(server):
    with RespConn(server.resp_port) as c:
        c.command("FLUSHALL")
        gone = RespConn(server.resp_port)
        gone.send(resp_command("BLPOP", "k", "0"))
        stays = RespConn(server.resp_port)
        stays.send(resp_command("BLPOP", "k2", "0"))
        wait_blocked(c, 2)
        gone.close()
        wait_blocked(c, 1)
        assert c.command("RPUSH", "k", "kept") == 1
        assert c.command("LRANGE", "k", "0", "-1") == [b"kept"]
        # killed between a push and its serve: CLIENT KILL closes it
        killed = RespConn(server.resp_port)
        kid = killed.command("CLIENT", "ID")
        killed.send(resp_command("BLPOP", "k3", "0"))
        wait_blocked(c, 2)
        assert c.command("CLIENT", "KILL", "ID", str(kid)) == 1
        wait_blocked(c, 1)
        assert c.command("RPUSH", "k3", "also kept") == 1
        assert c.command("LLEN", "k3") == 1
        assert c.command("RPUSH", "k2", "v") == 1
        assert stays.read_reply() == [b"k2", b"v"]
        stays.close()
        killed.close()


def test_blmove(server):
    with RespConn(server.resp_port) as c:
        c.command("FLUSHALL")
        a = RespConn(server.resp_port)
        a.send(resp_command("BLMOVE", "src", "mid", "LEFT", "RIGHT", "0"))
        wait_blocked(c, 1)
        b = RespConn(server.resp_port)
        b.send(resp_command("BLPOP", "mid", "0"))     # fed by a's move
        wait_blocked(c, 2)
        assert c.command("RPUSH", "src", "e1", "e2") == 2
        assert a.read_reply() == b"e1"
        assert b.read_reply() == [b"mid", b"e1"]
        assert c.command("LRANGE", "src", "0", "-1") == [b"e2"]
        assert c.command("EXISTS", "mid") == 0
        # onto itself: a rotation
        assert a.command("BLMOVE", "src", "src", "LEFT", "RIGHT", "0") == b"e2"
        # a destination of the wrong type: WRONGTYPE when served, the
        # element stays
        c.command("SET", "str", "v")
        a.send(resp_command("BRPOPLPUSH", "empty", "str", "0"))
        wait_blocked(c, 1)
        assert c.command("RPUSH", "empty", "x") == 1
        r = a.read_reply()
        assert isinstance(r, RespError) and str(r).startswith("WRONGTYPE"), r
        assert c.command("LRANGE", "empty", "0", "-1") == [b"x"]
        a.close()
        b.close()


def test_filled_by_other_commands(server):
    """RENAME, COPY, LMOVE, MULTI/EXEC fill a key: its clients are served
    after the command (EXEC: after all of it)."""
    with RespConn(server.resp_port) as c:
        c.command("FLUSHALL")
        w = RespConn(server.resp_port)
        for fill, want in [
            ([("RPUSH", "tmp", "a", "b"), ("RENAME", "tmp", "k")], [b"k", b"a"]),
            ([("RPUSH", "src", "c"), ("COPY", "src", "k")], [b"k", b"c"]),
            ([("RPUSH", "src2", "d"), ("LMOVE", "src2", "k", "LEFT", "LEFT")], [b"k", b"d"]),
            ([("MULTI",), ("RPUSH", "k", "e"), ("RPUSH", "k", "f"), ("DEL", "k"), ("RPUSH", "k", "g"),
              ("EXEC",)], [b"k", b"g"]),
        ]:
            c.command("DEL", "k")
            w.send(resp_command("BLPOP", "k", "0"))
            wait_blocked(c, 1)
            for cmd in fill:
                c.command(*cmd)
            assert w.read_reply() == want, fill
        # a push then a delete in one transaction wakes nobody
        w.send(resp_command("BLPOP", "k2", "0"))
        wait_blocked(c, 1)
        c.command("MULTI")
        c.command("RPUSH", "k2", "x")
        c.command("DEL", "k2")
        assert c.command("EXEC") == [1, 1]
        assert no_reply(w)
        assert blocked(c) == 1
        c.command("RPUSH", "k2", "y")
        assert w.read_reply() == [b"k2", b"y"]
        # inside MULTI a blocking command does not block
        c.command("MULTI")
        c.command("BLPOP", "none", "0")
        c.command("BLMOVE", "none", "x", "LEFT", "LEFT", "0")
        assert c.command("EXEC") == [None, None]
        w.close()


def test_client_unblock_and_list(server):
    with RespConn(server.resp_port) as c:
        c.command("FLUSHALL")
        w = RespConn(server.resp_port)
        wid = w.command("CLIENT", "ID")
        assert c.command("CLIENT", "UNBLOCK", str(wid)) == 0       # not blocked
        w.send(resp_command("BLPOP", "k", "0"))
        wait_blocked(c, 1)
        line = c.command("CLIENT", "LIST", "ID", str(wid)).decode()
        assert " flags=b " in line and "cmd=blpop" in line, line
        assert c.command("CLIENT", "UNBLOCK", str(wid)) == 1
        assert w.read_reply() is None
        assert " flags=N " in c.command("CLIENT", "LIST", "ID", str(wid)).decode()
        w.send(resp_command("BRPOP", "k", "0"))
        wait_blocked(c, 1)
        assert c.command("CLIENT", "UNBLOCK", str(wid), "ERROR") == 1
        r = w.read_reply()
        assert isinstance(r, RespError) and str(r) == "UNBLOCKED client unblocked via CLIENT UNBLOCK"
        assert c.command("CLIENT", "UNBLOCK", str(wid)) == 0
        assert w.command("PING") == "PONG"
        w.close()


def test_hundred_blocked(server):
    with RespConn(server.resp_port) as c:
        c.command("FLUSHALL")
        conns = []
        for i in range(100):
            w = RespConn(server.resp_port)
            keys = ["shared"] + ([f"own{i}"] if i % 2 else [])
            w.send(resp_command("BRPOP", *keys, "0" if i % 3 else "30"))
            conns.append(w)
        wait_blocked(c, 100)
        for i in range(1, 100, 2)[:10]:
            c.command("RPUSH", f"own{i}", f"for{i}")
        for i in range(1, 100, 2)[:10]:
            assert conns[i].read_reply() == [f"own{i}".encode(), f"for{i}".encode()]
        wait_blocked(c, 90)
        vals = [f"v{j}".encode() for j in range(90)]
        for j in range(0, 90, 30):
            c.command("LPUSH", "shared", *vals[j:j + 30])
        got = []
        for i, w in enumerate(conns):
            if i % 2 and i < 20:
                continue
            key, v = w.read_reply()
            assert key == b"shared"
            got.append(v)
        assert sorted(got) == sorted(vals)
        wait_blocked(c, 0)
        assert c.command("EXISTS", "shared") == 0
        for w in conns:
            w.close()


@pytest.mark.crash
def test_served_pop_is_durable(pkvs):
    """A blocked client that read its element: kill -9 right after, the
    element is gone for good (the pop's reply left behind its barrier)."""
    store = pkvs.new_store()
    for i in range(5):
        srv = pkvs.start(store=store)
        with RespConn(srv.resp_port) as c, RespConn(srv.resp_port) as w:
            assert c.command("LLEN", "q") == 0
            w.send(resp_command("BLMOVE", "q", "done", "LEFT", "RIGHT", "0"))
            wait_blocked(c, 1)
            c.send(resp_command("RPUSH", "q", f"job{i}", "next"))
            assert w.read_reply() == f"job{i}".encode()
            srv.kill9()
        srv = pkvs.start(store=store)
        with RespConn(srv.resp_port) as c:
            assert c.command("LRANGE", "q", "0", "-1") == [b"next"], i
            assert c.command("LRANGE", "done", "0", "-1")[-1] == f"job{i}".encode()
            c.command("DEL", "q")
        srv.stop(keep_store=True)
