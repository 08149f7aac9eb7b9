"""CLIENT PAUSE and CLIENT UNPAUSE, as Redis 7.0's.

Under PAUSE WRITE a client's write (and PUBLISH, PFCOUNT, a script that
may write, an EXEC that queued one) waits unanswered, and so does
everything it sent after it, until UNPAUSE or the timeout; reads run.
Under PAUSE ALL every command waits. Waiting clients count in INFO's
blocked_clients; they run in the order they came, their pipelined
commands in order, a value large enough to stream arrives whole, CLIENT
REPLY SKIP still drops the held command's reply. Nothing expires during
a pause: a key past its deadline reads as gone and is removed after.
The errors are Redis's, byte for byte (tests/e2e/redis_peer.py).
"""
import socket
import time

import pytest
import redis

from conftest import wait_until
from redis_peer import peers, redis_peer, run_script  # noqa: F401 (fixtures)

PROTOS = [2, 3]

ERRORS = [
    ("CLIENT", "PAUSE"), ("CLIENT", "PAUSE", "x"), ("CLIENT", "PAUSE", "-1"),
    ("CLIENT", "PAUSE", "10", "FOO"), ("CLIENT", "PAUSE", "10", "WRITE", "x"),
    ("CLIENT", "PAUSE", "1.5"), ("CLIENT", "UNPAUSE", "x"), ("CLIENT", "UNPAUSE"),
    ("CLIENT", "PAUSE", "0", "write"), ("CLIENT", "UNPAUSE"),
]


@pytest.mark.parametrize("proto", PROTOS)
def test_errors_match_redis(peers, proto):
    run, _ = peers
    run_script(run(proto), ERRORS)


def client(srv):
    return redis.Redis(port=srv.resp_port, socket_timeout=20)


def blocked(r):
    return r.info("clients")["blocked_clients"]


def raw(srv):
    s = socket.create_connection(("127.0.0.1", srv.resp_port))
    s.settimeout(0.3)
    return s


def read_some(s, want, timeout=10):
    got, end = b"", time.monotonic() + timeout
    while len(got) < len(want) and time.monotonic() < end:
        try:
            got += s.recv(65536)
        except socket.timeout:
            pass
    return got


def quiet(s):
    """Nothing arrives on s for a while."""
    try:
        return s.recv(100) == b"never"
    except socket.timeout:
        return True


def test_write_pause_holds_writes_in_order(pkvs):
    srv = pkvs.start()
    r = client(srv)
    r.set("k", "old")
    r.pfadd("h", "a")
    assert r.client_pause(60_000, all=False)
    s = raw(srv)
    s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nnew\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
              b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n")
    assert wait_until(lambda: blocked(r) == 1, 5)
    assert quiet(s)                                # the GET behind the SET waits too
    assert r.get("k") == b"old" and r.get("n") is None     # reads run
    s2 = raw(srv)
    s2.sendall(b"*2\r\n$7\r\nPFCOUNT\r\n$1\r\nh\r\n*3\r\n$7\r\nPUBLISH\r\n$1\r\nc\r\n$1\r\nm\r\n")
    assert wait_until(lambda: blocked(r) == 2, 5)
    assert r.client_unpause()
    assert read_some(s, b"+OK\r\n$3\r\nnew\r\n:1\r\n") == b"+OK\r\n$3\r\nnew\r\n:1\r\n"
    assert read_some(s2, b":1\r\n:0\r\n") == b":1\r\n:0\r\n"
    assert blocked(r) == 0 and r.get("k") == b"new"


def test_all_pause_ends_by_its_timeout(pkvs):
    srv = pkvs.start()
    r = client(srv)
    r.set("k", "v")
    t0 = time.monotonic()
    assert r.client_pause(400)
    other = client(srv)
    assert other.get("k") == b"v"                  # waited for the pause's end
    assert time.monotonic() - t0 >= 0.35
    assert r.ping()


def test_big_value_and_reply_skip_under_pause(pkvs):
    srv = pkvs.start()
    r = client(srv)
    value = bytes(range(256)) * 400                # streams when not paused
    assert r.client_pause(60_000, all=False)
    s = raw(srv)
    s.sendall(b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$4\r\nSKIP\r\n")
    wire = b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n%s\r\n" % (len(value), value)
    s.sendall(wire[:5000])
    time.sleep(0.05)
    s.sendall(wire[5000:] + b"*1\r\n$4\r\nPING\r\n")
    assert wait_until(lambda: blocked(r) == 1, 5)
    assert r.exists("big") == 0
    assert r.client_unpause()
    assert read_some(s, b"+PONG\r\n") == b"+PONG\r\n"        # SET's reply skipped
    assert r.get("big") == value


def test_scripts_and_transactions_under_write_pause(pkvs):
    srv = pkvs.start()
    r = client(srv)
    ro = r.register_script("#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])")
    r.script_load(ro.script)       # an EVALSHA of a script not loaded may write: it would wait
    r.set("k", "v")
    assert r.client_pause(60_000, all=False)
    other = client(srv)
    assert ro(keys=["k"], client=other) == b"v"    # declared read-only: runs
    p = other.pipeline(transaction=True)
    p.get("k")
    p.ping()
    assert p.execute() == [b"v", True]             # a read-only EXEC runs
    s = raw(srv)
    s.sendall(b"*3\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n0\r\n")   # no flags: may write
    assert wait_until(lambda: blocked(r) == 1, 5)
    assert r.client_unpause()
    assert read_some(s, b":1\r\n") == b":1\r\n"


def test_nothing_expires_during_a_pause(pkvs):
    srv = pkvs.start()
    r = client(srv)
    before = r.info("stats")["expired_keys"]
    r.set("e", "v", px=50)
    assert r.client_pause(60_000, all=False)
    time.sleep(0.3)
    assert r.get("e") is None                      # reads as gone
    assert r.dbsize() == 1 and r.info("stats")["expired_keys"] == before
    assert r.client_unpause()
    assert r.get("e") is None
    assert wait_until(lambda: r.info("stats")["expired_keys"] == before + 1 and r.dbsize() == 0, 5)


def test_many_held_clients_some_gone(pkvs):
    """200 clients each pipeline five INCRs of one counter under a write
    pause; 50 close while held. After UNPAUSE the 150 others get their
    five replies in order and the counter counts exactly their INCRs."""
    srv = pkvs.start()
    r = client(srv)
    assert r.client_pause(60_000, all=False)
    socks = []
    incr = b"*2\r\n$4\r\nINCR\r\n$1\r\nc\r\n" * 5
    for _ in range(200):
        s = raw(srv)
        s.sendall(incr)
        socks.append(s)
    assert wait_until(lambda: blocked(r) == 200, 10)
    for s in socks[:50]:
        s.close()
    assert wait_until(lambda: blocked(r) == 150, 10)
    assert r.client_unpause()
    for s in socks[50:]:
        got, end = b"", time.monotonic() + 10
        while got.count(b"\r\n") < 5 and time.monotonic() < end:
            got += read_some(s, b"\r\n", 1)
        values = [int(v[1:]) for v in got.split(b"\r\n")[:-1]]
        assert len(values) == 5 and values == sorted(values), got
        s.close()
    assert r.get("c") == b"750"
    assert blocked(r) == 0
