"""pkvs's hashes (services/cmd_hash.c, kv_hash.c, pkvs_http_hash.c).

- Every hash command, its arity and WRONGTYPE errors and its edge cases,
  byte for byte against Debian's redis-server 7.0.15 started on a free
  loopback port, in RESP2 and in RESP3. Fields go in in byte order, so
  Redis's small hashes (kept in insertion order) list them in pkvs's
  order, the tree's.
- Large and long field names and values, through every reply path (small
  values copied into the reply, large ones sent from their buffers), and
  after a restart.
- HSCAN over a large hash, HRANDFIELD's distributions.
- A hash of 10,000 fields deleted at once: DEL answers at once, the
  sweeper frees the space (INFO pkvs_held_bytes back down).
- kill -9 under HSET/HDEL/HINCRBY load: every acknowledged change is
  there, a multi-field HSET in flight is all or nothing, and HLEN equals
  the fields present.
- The HTTP front end: a hash as JSON, the listing's types.
"""
import base64
import json
import random
import socket
import threading
import time

import pytest

from conftest import ConnectionClosed, PkvsFactory, RespConn, RespError, resp_command, run_tool
from redis_peer import flushed_peers as peers, RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)


# ---------------------------------------------------------------------------
# Against Redis
# ---------------------------------------------------------------------------

SLEEP = object()     # (SLEEP, seconds) in a script: wait, send nothing

# Each script runs on a flushed pkvs and a flushed Redis, in RESP2 and in
# RESP3, every reply compared byte for byte.
SCRIPTS = {
    "set_get": [
        ("HSET", "h", "a", "1", "b", "2", "c", "3"),
        ("HSET", "h", "a", "10"),
        ("HSET", "h", "b", "20", "d", "4"),
        ("HSET", "h", "e", ""),
        ("HMSET", "h", "f", "6", "g", "7"),
        ("HSETNX", "h", "a", "x"),
        ("HSETNX", "h", "h", "8"),
        ("HSETNX", "n1", "a", "1"),
        ("HGET", "h", "a"), ("HGET", "h", "e"), ("HGET", "h", "nope"), ("HGET", "nokey", "a"),
        ("HMGET", "h", "a", "nope", "c"), ("HMGET", "nokey", "a", "b"), ("HMGET", "h", "e"),
        ("HLEN", "h"), ("HLEN", "nokey"),
        ("HEXISTS", "h", "a"), ("HEXISTS", "h", "nope"), ("HEXISTS", "nokey", "a"),
        ("HSTRLEN", "h", "a"), ("HSTRLEN", "h", "e"), ("HSTRLEN", "h", "nope"),
        ("HSTRLEN", "nokey", "a"),
        ("HGETALL", "h"), ("HKEYS", "h"), ("HVALS", "h"),
        ("HGETALL", "nokey"), ("HKEYS", "nokey"), ("HVALS", "nokey"),
        ("HSET", "bin", b"\x00\xff", b"v\x00\r\n"), ("HGET", "bin", b"\x00\xff"), ("HGETALL", "bin"),
        ("HSET", "e", "", "empty name", "x", ""), ("HGET", "e", ""), ("HGETALL", "e"),
        ("TYPE", "h"), ("EXISTS", "h", "nokey"),
    ],
    "del": [
        ("HSET", "h", "a", "1", "b", "2", "c", "3"),
        ("HDEL", "h", "nope"), ("HDEL", "nokey", "a"),
        ("HDEL", "h", "a", "a", "nope"), ("HGETALL", "h"), ("HLEN", "h"),
        ("HDEL", "h", "b", "c", "d", "e"), ("EXISTS", "h"), ("HLEN", "h"), ("TYPE", "h"),
        ("HSET", "h", "x", "1"), ("HDEL", "h", "x"), ("EXISTS", "h"),
        ("HSET", "h", "x", "1", "y", "2"), ("HDEL", "h", "x"), ("HDEL", "h", "y"), ("EXISTS", "h"),
        ("HGET", "h", "x"), ("HGETALL", "h"),
    ],
    "incr": [
        ("HINCRBY", "h", "n", "5"), ("HINCRBY", "h", "n", "-7"), ("HGET", "h", "n"),
        ("HINCRBY", "h", "n", "x"), ("HINCRBY", "h", "n", "1.5"), ("HINCRBY", "h", "n", ""),
        ("HINCRBY", "h", "n", "9223372036854775808"),
        ("HSET", "h", "s", "abc", "sp", " 11", "sp2", "11 ", "z", "007", "neg0", "-0",
         "big", "9223372036854775807", "small", "-9223372036854775808"),
        ("HINCRBY", "h", "s", "1"), ("HINCRBY", "h", "sp", "1"), ("HINCRBY", "h", "sp2", "1"),
        ("HINCRBY", "h", "z", "1"), ("HINCRBY", "h", "neg0", "1"),
        ("HINCRBY", "h", "big", "1"), ("HINCRBY", "h", "big", "0"), ("HINCRBY", "h", "big", "-1"),
        ("HINCRBY", "h", "small", "-1"), ("HINCRBY", "h", "small", "1"),
        ("HINCRBY", "new", "f", "-9223372036854775808"), ("HGETALL", "new"),
        ("HINCRBYFLOAT", "f", "x", "1.23"), ("HINCRBYFLOAT", "f", "x", "0.77"),
        ("HINCRBYFLOAT", "f", "x", "-0.1"), ("HINCRBYFLOAT", "f", "x", "-1.9"),
        ("HINCRBYFLOAT", "f", "x", "1e30"), ("HINCRBYFLOAT", "f", "x", "1.5e-5"),
        ("HINCRBYFLOAT", "f", "y", "17179869184"), ("HINCRBYFLOAT", "f", "y", "0x10"),
        ("HINCRBYFLOAT", "f", "x", "abc"), ("HINCRBYFLOAT", "f", "x", " 1"),
        ("HINCRBYFLOAT", "f", "x", "1 "), ("HINCRBYFLOAT", "f", "x", ""),
        ("HINCRBYFLOAT", "f", "x", "inf"), ("HINCRBYFLOAT", "f", "x", "-inf"),
        ("HINCRBYFLOAT", "f", "x", "nan"), ("HINCRBYFLOAT", "f", "x", "1e5000"),
        ("HSET", "f", "s", "1\x002", "sp", " 11", "e", ""),
        ("HINCRBYFLOAT", "f", "s", "1"), ("HINCRBYFLOAT", "f", "sp", "1"),
        ("HINCRBYFLOAT", "f", "e", "1"), ("HINCRBY", "f", "e", "1"),
        ("HSET", "f", "m", "1.7976931348623157e308"), ("HINCRBYFLOAT", "f", "m", "1e308"),
        ("HMGET", "f", "x", "y", "s", "sp", "e", "m"), ("HLEN", "f"), ("EXISTS", "nokey2"), ("HINCRBYFLOAT", "nokey2", "f", "inf"),
        ("EXISTS", "nokey2"),
    ],
    "scan": [
        ("HSCAN", "nokey", "0"), ("HSCAN", "nokey", "0", "COUNT", "0"),
        ("HSET", "h", "a1", "1", "a2", "2", "b1", "3", "b2", "4"),
        ("HSCAN", "h", "0"), ("HSCAN", "h", "0", "MATCH", "a*"), ("HSCAN", "h", "0", "MATCH", "*"),
        ("HSCAN", "h", "0", "MATCH", "zz*"), ("HSCAN", "h", "0", "COUNT", "1"),
        ("HSCAN", "h", "0", "count", "2", "match", "?2"),
        ("HSCAN", "h", "0", "COUNT", "0"), ("HSCAN", "h", "0", "COUNT", "-1"),
        ("HSCAN", "h", "0", "COUNT", "x"), ("HSCAN", "h", "0", "COUNT"),
        ("HSCAN", "h", "0", "MATCH"), ("HSCAN", "h", "0", "TYPE", "string"),
        ("HSCAN", "h", "0", "NOVALUES"), ("HSCAN", "h", "x"), ("HSCAN", "h", "-"),
        ("HSCAN", "h", " 1"), ("HSCAN", "h", "99999999999999999999999"),
    ],
    "randfield": [
        ("HRANDFIELD", "nokey"), ("HRANDFIELD", "nokey", "5"), ("HRANDFIELD", "nokey", "-5"),
        ("HRANDFIELD", "nokey", "5", "WITHVALUES"),
        ("HSET", "h", "a", "1", "b", "2", "c", "3"),
        ("HRANDFIELD", "h", "0"), ("HRANDFIELD", "h", "0", "WITHVALUES"),
        ("HRANDFIELD", "h", "3"), ("HRANDFIELD", "h", "10"), ("HRANDFIELD", "h", "3", "WITHVALUES"),
        ("HRANDFIELD", "h", "10", "withvalues"),
        ("HRANDFIELD", "h", "x"), ("HRANDFIELD", "h", "1", "VALUES"),
        ("HRANDFIELD", "h", "1", "WITHVALUES", "x"),
        ("HRANDFIELD", "h", "-9223372036854775808"),
        ("HRANDFIELD", "h", "-9223372036854775808", "WITHVALUES"),
        ("HRANDFIELD", "h", "-9223372036854770000", "WITHVALUES"),
        ("HRANDFIELD", "h", "9223372036854775807", "WITHVALUES"),
        ("HRANDFIELD", "h", "9223372036854775808"),
        ("HSET", "one", "only", "v"),
        ("HRANDFIELD", "one"), ("HRANDFIELD", "one", "1"), ("HRANDFIELD", "one", "-3"),
        ("HRANDFIELD", "one", "-2", "WITHVALUES"), ("HRANDFIELD", "one", "1", "WITHVALUES"),
        ("HRANDFIELD", "nokey", "x"), ("HRANDFIELD", "nokey", "1", "x"),
    ],
    "wrongtype": [
        ("SET", "s", "v"),
        ("HSET", "s", "a", "1"), ("HSETNX", "s", "a", "1"), ("HMSET", "s", "a", "1"),
        ("HGET", "s", "a"), ("HMGET", "s", "a"), ("HDEL", "s", "a"), ("HLEN", "s"),
        ("HEXISTS", "s", "a"), ("HSTRLEN", "s", "a"), ("HGETALL", "s"), ("HKEYS", "s"),
        ("HVALS", "s"), ("HINCRBY", "s", "a", "1"), ("HINCRBYFLOAT", "s", "a", "1"),
        ("HSCAN", "s", "0"), ("HRANDFIELD", "s"), ("HRANDFIELD", "s", "2"),
        ("HRANDFIELD", "s", "2", "WITHVALUES"),
        # what is checked before the key: the argument errors come first
        ("HINCRBY", "s", "a", "x"), ("HINCRBYFLOAT", "s", "a", "x"),
        ("HINCRBYFLOAT", "s", "a", "inf"), ("HRANDFIELD", "s", "x"), ("HSCAN", "s", "x"),
        ("HSCAN", "s", "0", "COUNT", "0"), ("HSET", "s", "a", "1", "b"),
        ("GET", "s"),
        ("HSET", "h", "a", "1"), ("GET", "h"), ("INCR", "h"), ("STRLEN", "h"),
    ],
    # the key commands on a hash (cmd_keyspace.c, cmd_expire.c)
    "keyspace": [
        ("HSET", "h", "a", "1", "b", "2"), ("TYPE", "h"), ("EXISTS", "h"),
        ("OBJECT", "ENCODING", "h"), ("SCAN", "0", "TYPE", "hash"), ("SET", "s", "v"),
        ("SCAN", "0", "TYPE", "string"), ("EXPIRE", "h", "100"), ("TTL", "h"),
        ("HSET", "h", "c", "3"), ("HDEL", "h", "a"), ("HINCRBY", "h", "n", "1"), ("TTL", "h"),
        ("RENAME", "h", "h2"), ("EXISTS", "h"), ("HGETALL", "h2"), ("TTL", "h2"),
        ("PERSIST", "h2"), ("TTL", "h2"), ("COPY", "h2", "h3"), ("HGETALL", "h3"),
        ("HSET", "h3", "z", "26"), ("HLEN", "h2"), ("HLEN", "h3"), ("RENAMENX", "h3", "h2"),
        ("RENAME", "h3", "s"), ("TYPE", "s"), ("HGETALL", "s"), ("SET", "s", "x"), ("TYPE", "s"),
        ("HGET", "s", "b"), ("DEL", "h2", "s"), ("EXISTS", "h2"), ("HLEN", "h2"),
        ("HSET", "big", *[x for i in range(513) for x in (f"f{i:03d}", "v")]),
        ("OBJECT", "ENCODING", "big"), ("PEXPIRE", "big", "1"), (SLEEP, 0.01),
        ("EXISTS", "big"), ("HLEN", "big"), ("HSET", "big", "f", "v"), ("HLEN", "big"),
    ],
    "arity": [
        ("HSET", "h"), ("HSET", "h", "a"), ("HSET", "h", "a", "1", "b"), ("HSETNX", "h", "a"),
        ("HSETNX", "h", "a", "1", "2"), ("HMSET", "h", "a"), ("HMSET", "h", "a", "1", "b"),
        ("HGET", "h"), ("HGET", "h", "a", "b"), ("HMGET", "h"), ("HDEL", "h"), ("HLEN",),
        ("HLEN", "h", "a"), ("HEXISTS", "h"), ("HSTRLEN", "h"), ("HGETALL",),
        ("HGETALL", "h", "a"), ("HKEYS",), ("HVALS", "h", "x"), ("HINCRBY", "h", "a"),
        ("HINCRBYFLOAT", "h", "a"), ("HINCRBYFLOAT", "h", "a", "1", "2"), ("HSCAN", "h"),
        ("HRANDFIELD",), ("EXISTS", "h"),
    ],
}


@pytest.fixture(scope="module")
def server():
    """One pkvs for the tests that flush and share it."""
    factory = PkvsFactory()
    yield factory.start()
    factory.cleanup()


@pytest.mark.parametrize("proto", [2, 3])
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_like_redis(server, redis_peer, script, proto):
    p = peers(server.resp_port, redis_peer.resp_port, proto)
    try:
        for cmd in SCRIPTS[script]:
            if cmd[0] is SLEEP:
                time.sleep(cmd[1])
            else:
                p.same(*cmd)
    finally:
        p.close()


@pytest.mark.parametrize("proto", [2, 3])
def test_pipelined_like_redis(server, redis_peer, proto):
    """The same commands pipelined in one write: the same bytes back."""
    p = peers(server.resp_port, redis_peer.resp_port, proto)
    cmds = SCRIPTS["set_get"] + SCRIPTS["del"]
    data = b"".join(resp_command(*c) for c in cmds)
    p.pkvs.send(data)
    p.redis.send(data)
    for cmd in cmds:
        got, want = p.pkvs.read_raw(), p.redis.read_raw()
        assert got == want, f"{cmd!r}: pkvs {got!r} != redis {want!r}"
    p.close()


# ---------------------------------------------------------------------------
# Sizes: long names, large values
# ---------------------------------------------------------------------------

NAME_LENS = [0, 1, 32, 390, 400, 401, 1000, 5000, 60000]
VALUE_LENS = [0, 1, 100, 512, 513, 2047, 2048, 3000, 20000, 100000]


def blob(n, seed):
    return random.Random(seed).randbytes(n)


def test_large_and_long(server, redis_peer):
    """Every size of name and value through HSET, HGET, HMGET, HGETALL,
    HSCAN, HSTRLEN, HDEL, the same bytes as Redis's."""
    p = peers(server.resp_port, redis_peer.resp_port, 2)
    fields = {}
    for i, nl in enumerate(NAME_LENS):
        for j, vl in enumerate(VALUE_LENS[i % 3::3]):
            name = blob(nl, i) + bytes([j]) if nl else bytes([j])
            fields[name] = blob(vl, 1000 + 10 * i + j)
    names = sorted(fields)
    # byte order in, so that Redis's insertion order is pkvs's order
    for n in names:
        p.same("HSET", "big", n, fields[n])
    p.same("HLEN", "big")
    for n in names:
        assert p.same("HGET", "big", n).endswith(fields[n] + b"\r\n")
        p.same("HSTRLEN", "big", n)
        p.same("HEXISTS", "big", n)
    p.same("HMGET", "big", *names[:20], "nope")
    # Redis keeps this hash as a hash table (values over 64 bytes): its
    # order is its own, so HGETALL is compared as a mapping
    with RespConn(server.resp_port, timeout=20) as c:
        got = c.command("HGETALL", "big")
        assert dict(zip(got[::2], got[1::2])) == fields
        cursor, seen = b"0", {}
        while True:
            cursor, items = c.command("HSCAN", "big", cursor, "COUNT", "7")
            for k, v in zip(items[::2], items[1::2]):
                assert k not in seen
                seen[k] = v
            if cursor == b"0":
                break
        assert seen == fields
        assert sorted(c.command("HKEYS", "big")) == names
        assert sorted(c.command("HVALS", "big")) == sorted(fields.values())
    for n in names[::2]:
        p.same("HDEL", "big", n)
    p.same("HLEN", "big")
    p.close()


def test_long_values_inside_exec_and_reply_off(server, redis_peer):
    """A field value long enough to be sent from its own buffers, read
    inside EXEC and under CLIENT REPLY OFF: inside EXEC it is part of
    EXEC's reply, in order, and with replies off nothing is sent. (HGETALL
    is left out of the byte comparison: Redis's hash table has its own
    order.)"""
    p = peers(server.resp_port, redis_peer.resp_port, 2)
    big = blob(5000, 7)
    p.same("HSET", "hx", "f", big)
    for cmd in (("MULTI",), ("HSET", "hx", "g", "1"), ("HGET", "hx", "f"),
                ("HMGET", "hx", "f", "g"), ("HSTRLEN", "hx", "f"), ("EXEC",)):
        p.same(*cmd)
    p.close()
    with RespConn(server.resp_port) as c:
        assert c.command("MULTI") == "OK" and c.command("HGETALL", "hx") == "QUEUED"
        got = c.command("EXEC")[0]
        assert dict(zip(got[::2], got[1::2])) == {b"f": big, b"g": b"1"}
    # replies off: the bytes up to PONG are exactly +OK (REPLY ON) and PONG
    for port in (server.resp_port, redis_peer.resp_port):
        c = RawConn(port)
        c.send(b"".join(resp_command(*cmd) for cmd in (
            ("CLIENT", "REPLY", "OFF"), ("HGET", "hx", "f"), ("HGETALL", "hx"),
            ("CLIENT", "REPLY", "ON"), ("PING",))))
        assert c.read_raw() == b"+OK\r\n" and c.read_raw() == b"+PONG\r\n", port
        c.close()


def test_sizes_survive_restart(pkvs):
    srv = pkvs.start()
    fields = {blob(nl, nl) + b"x": blob(vl, vl) for nl, vl in zip(NAME_LENS, VALUE_LENS)}
    with RespConn(srv.resp_port, timeout=20) as c:
        for k, v in fields.items():
            assert c.command("HSET", "h", k, v) == 1
        assert c.command("HSET", "h2", *[x for kv in fields.items() for x in kv]) == len(fields)
    store = srv.store
    srv.stop(keep_store=True)
    srv = pkvs.start(store=store)
    with RespConn(srv.resp_port, timeout=20) as c:
        for key in ("h", "h2"):
            assert c.command("HLEN", key) == len(fields)
            got = c.command("HGETALL", key)
            assert dict(zip(got[::2], got[1::2])) == fields
            for k, v in fields.items():
                assert c.command("HGET", key, k) == v


def test_limits(pkvs):
    """A field value past one entry is kept (in chunks); one over
    --max-value and a name over pkvs's longest are refused with an error,
    and change nothing."""
    srv = pkvs.start(["--max-value", "300000"])
    with RespConn(srv.resp_port, timeout=20) as c:
        one = 63 * 2048            # one entry of 2 KiB buffers (docs/design.md)
        for f, n in (("f", one), ("g", one + 1), ("h", 300000)):
            assert c.command("HSET", "h", f, b"v" * n) == 1
            assert c.command("HSTRLEN", "h", f) == n
            assert c.command("HGET", "h", f) == b"v" * n
        r = c.command("HSET", "h", "x", b"v" * 300001)
        assert isinstance(r, RespError) and "too large" in str(r), r
        r = c.command("HSET", "h", b"n" * 200000, "v")
        assert isinstance(r, RespError) and "field" in str(r), r
        assert c.command("HLEN", "h") == 3
        # a multi-field HSET with one bad value sets none of them
        r = c.command("HSET", "h", "a", "1", "b", b"v" * 300001)
        assert isinstance(r, RespError), r
        assert c.command("HEXISTS", "h", "a") == 0
        assert c.command("HLEN", "h") == 3


# ---------------------------------------------------------------------------
# HSCAN and HRANDFIELD over many fields
# ---------------------------------------------------------------------------

def test_hscan_large(server):
    with RespConn(server.resp_port, timeout=20) as c:
        c.command("FLUSHALL")
        n = 1000
        assert c.command("HSET", "h", *[x for i in range(n) for x in (f"f{i:04d}", str(i))]) == n
        # fields there throughout are returned exactly once, while others
        # come and go between the calls
        cursor, seen, calls = b"0", [], 0
        while True:
            cursor, items = c.command("HSCAN", "h", cursor, "COUNT", "37")
            assert len(items) <= 2 * 37
            seen += items[::2]
            calls += 1
            c.command("HSET", "h", f"new{calls}", "x")
            c.command("HDEL", "h", f"new{calls - 1}")
            if cursor == b"0":
                break
        stable = [x for x in seen if x.startswith(b"f")]
        assert len(stable) == len(set(stable)) == n
        assert calls == -(-n // 37) or calls == -(-n // 37) + 1
        # MATCH filters what COUNT visits
        cursor, got = b"0", []
        while True:
            cursor, items = c.command("HSCAN", "h", cursor, "MATCH", "f00*", "COUNT", "100")
            got += items[::2]
            if cursor == b"0":
                break
        assert sorted(got) == [f"f{i:04d}".encode() for i in range(100)]
        r = c.command("HSCAN", "h", "123456789")
        assert isinstance(r, RespError) and "invalid cursor" in str(r)
        # a cursor of one hash is not one of another
        cursor, _ = c.command("HSCAN", "h", "0", "COUNT", "10")
        c.command("HSET", "other", *[x for i in range(600) for x in (f"o{i}", "v")])
        r = c.command("HSCAN", "other", cursor)
        assert isinstance(r, RespError) and "invalid cursor" in str(r)
        # as Redis: a hash it keeps as a listpack (512 fields, names and
        # values of 64 bytes at most) comes whole, whatever COUNT says;
        # one past either bound by COUNT
        c.command("HSET", "small", *[x for i in range(512) for x in (f"s{i}", "v" * 64)])
        cursor, items = c.command("HSCAN", "small", "0", "COUNT", "1")
        assert cursor == b"0" and len(items) == 1024
        c.command("HSET", "small", "s512", "v")
        cursor, items = c.command("HSCAN", "small", "0", "COUNT", "1")
        assert cursor != b"0" and len(items) == 2
        for extra in (("c", "v" * 65), ("c" * 65, "v")):
            c.command("DEL", "small2")
            c.command("HSET", "small2", "a", "1", "b", "2", *extra)
            cursor, items = c.command("HSCAN", "small2", "0", "COUNT", "1")
            assert cursor != b"0" and len(items) == 2, extra


def test_hrandfield_empty_values(server):
    """Drawn with repetition, fields whose values are empty (no extents)
    come back as empty bulks (the first one drawn once read a null array
    under ASan/UBSan)."""
    with RespConn(server.resp_port, timeout=20) as c:
        c.command("FLUSHALL")
        c.command("HSET", "h", "e", "")
        assert c.command("HRANDFIELD", "h", "-3", "WITHVALUES") == [b"e", b""] * 3
        c.command("HSET", "h", "f", "x")
        res = c.command("HRANDFIELD", "h", "-50", "WITHVALUES")
        assert len(res) == 100
        assert all({b"e": b"", b"f": b"x"}[k] == v for k, v in zip(res[::2], res[1::2]))


def chi_square(samples):
    counts = {}
    for s in samples:
        counts[s] = counts.get(s, 0) + 1
    p = len(samples) / len(counts)
    return sum((v - p) ** 2 / p for v in counts.values())


@pytest.mark.parametrize("size", [10, 300])
def test_hrandfield(server, size):
    with RespConn(server.resp_port, timeout=20) as c:
        c.command("FLUSHALL")
        want = {f"k{i}".encode(): f"v{i}".encode() for i in range(size)}
        c.command("HSET", "h", *[x for kv in want.items() for x in kv])
        assert c.command("HRANDFIELD", "h") in want
        # negative: repetition, the given count, uniform
        res = c.command("HRANDFIELD", "h", -20 * size)
        assert len(res) == 20 * size and set(res) <= set(want)
        assert len(set(res)) == size
        if size == 10:
            assert chi_square(c.command("HRANDFIELD", "h", "-1000")) < 40
        res = c.command("HRANDFIELD", "h", "-1001", "WITHVALUES")
        assert len(res) == 2002
        assert all(want[k] == v for k, v in zip(res[::2], res[1::2]))
        # positive: distinct; all of them at or past the size
        for count in (size, size + 5):
            res = c.command("HRANDFIELD", "h", count)
            assert sorted(res) == sorted(want)
        for count in (size - 2, size // 3, 2, 1):
            seen = set()
            for _ in range(200):
                res = c.command("HRANDFIELD", "h", count, "WITHVALUES")
                keys = res[::2]
                assert len(keys) == len(set(keys)) == count
                assert all(want[k] == v for k, v in zip(keys, res[1::2]))
                seen.update(keys)
            # every field comes up (200 draws: certain but for ~1e-9)
            if count * 200 >= 20 * size:
                assert seen == set(want)
    # RESP3: pairs
    r = RawConn(server.resp_port, 3)
    out = r.call("HRANDFIELD", "h", "3", "WITHVALUES")
    assert out.startswith(b"*3\r\n*2\r\n$")
    out = r.call("HRANDFIELD", "h", "-3", "WITHVALUES")
    assert out.startswith(b"*3\r\n*2\r\n$")
    assert r.call("HRANDFIELD", "h", "-3").startswith(b"*3\r\n$")
    r.close()


# ---------------------------------------------------------------------------
# A big hash deleted at once
# ---------------------------------------------------------------------------

def info_field(c, name):
    for line in c.command("INFO", "memory").decode().split("\r\n"):
        if line.startswith(name + ":"):
            return int(line.split(":")[1])
    raise AssertionError(f"INFO has no {name}")


def test_del_big_hash_sweeps(pkvs):
    srv = pkvs.start(["--checkpoint-ms", "200"])
    with RespConn(srv.resp_port, timeout=30) as c:
        time.sleep(0.5)
        base = info_field(c, "pkvs_held_bytes")
        live = info_field(c, "pkvs_live_bytes")
        n = 10000
        args = [x for i in range(n) for x in (f"field:{i:06d}", "v" * 40)]
        assert c.command("HSET", "big", *args) == n
        assert c.command("HLEN", "big") == n
        full = info_field(c, "pkvs_held_bytes")
        assert full > base + n * 40, (base, full)
        t = time.monotonic()
        assert c.command("DEL", "big") == 1
        took = time.monotonic() - t
        assert took < 0.05, f"DEL of {n} fields took {took * 1e3:.1f} ms"
        assert c.command("EXISTS", "big") == 0
        assert c.command("HLEN", "big") == 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if info_field(c, "pkvs_held_bytes") <= base + 64 * 1024 and \
               info_field(c, "pkvs_live_bytes") == live:
                break
            time.sleep(0.2)
        assert info_field(c, "pkvs_live_bytes") == live
        used = info_field(c, "pkvs_held_bytes")
        assert used <= base + 64 * 1024, f"pkvs_held_bytes {used} after the sweep, {base} before"
        # a new hash under the same key starts empty
        assert c.command("HSET", "big", "x", "1") == 1
        assert c.command("HLEN", "big") == 1


# ---------------------------------------------------------------------------
# kill -9 under load
# ---------------------------------------------------------------------------

class HashLoad:
    """Threads changing hashes of their own: HSET of one or several fields,
    HDEL of one or several, HINCRBY of a counter field. history[(key,
    field)] lists [state after the op, ack time or None] in issue order;
    ops lists each HSET's fields and states (for all or nothing)."""

    FIELDS = [f"f{i}".encode() for i in range(12)]
    COUNTER = b"c"

    def __init__(self, port, threads, duration, seed):
        self.port = port
        self.lock = threading.Lock()
        self.history = {}
        self.ops = []
        self.problems = []
        self.acked = 0
        self.killed_at = None
        self.deadline = time.monotonic() + duration
        self.threads = [threading.Thread(target=self._run, args=(i, random.Random(seed + i)))
                        for i in range(threads)]

    def _op(self, tid, seq, rng, keys, counters):
        key = rng.choice(keys)
        kind = rng.random()
        if kind < 0.15:
            key = keys[0]
            want = counters.get(key, 0) + 1
            return key, ("HINCRBY", key, self.COUNTER, "1"), {self.COUNTER: str(want).encode()}, want
        fields = rng.sample(self.FIELDS, rng.choice([1, 1, 2, 5]))
        if kind < 0.6:
            states = {f: f"{tid}:{seq}:".encode() + f + rng.randbytes(rng.choice([3, 600]))
                      for f in fields}
            return key, ("HSET", key) + tuple(x for kv in states.items() for x in kv), states, None
        return key, ("HDEL", key) + tuple(fields), {f: None for f in fields}, None

    def _run(self, tid, rng):
        keys = [f"t{tid}:h{j}".encode() for j in range(4)]
        counters = {}
        try:
            conn = RespConn(self.port, timeout=10)
        except OSError as e:
            self.problems.append(repr(e))
            return
        seq = 0
        try:
            while time.monotonic() < self.deadline:
                seq += 1
                key, cmd, states, want = self._op(tid, seq, rng, keys, counters)
                entries = {f: [s, None] for f, s in states.items()}
                with self.lock:
                    for f, e in entries.items():
                        self.history.setdefault((key, f), []).append(e)
                    self.ops.append((key, cmd[0], states, entries))
                reply = conn.command(*cmd)
                if isinstance(reply, RespError) or (want is not None and reply != want):
                    self.problems.append((cmd[:3], reply))
                    return
                if want is not None:
                    counters[key] = want
                now = time.monotonic()
                with self.lock:
                    for e in entries.values():
                        e[1] = now
                    self.acked += 1
        except (OSError, ConnectionClosed) as e:
            # the op in flight at the kill stays unacknowledged
            if self.killed_at is None or time.monotonic() < self.killed_at:
                self.problems.append(repr(e))
        finally:
            conn.close()

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        for t in self.threads:
            t.join(20)

    def allowed(self, kf):
        """The states the last acknowledged op or any later one leaves."""
        hist = self.history.get(kf, [])
        last = max((i for i, (_, acked) in enumerate(hist) if acked is not None), default=-1)
        states = [None] if last < 0 else [hist[last][0]]
        return states + [s for s, _ in hist[last + 1:]]


@pytest.mark.crash
@pytest.mark.slow
def test_kill9_under_hash_load(pkvs):
    store = pkvs.new_store()
    args = ["--checkpoint-records", "500"]
    for round_ in range(2):
        srv = pkvs.start(args, store=store, store_size="256M")
        load = HashLoad(srv.resp_port, threads=4, duration=30, seed=random.getrandbits(32))
        load.start()
        time.sleep(random.uniform(1.0, 2.5))
        load.killed_at = time.monotonic()
        srv.kill9()
        load.join()
        assert not load.problems, load.problems[:5]
        assert load.acked > 100, f"only {load.acked} operations acknowledged"
        cp = run_tool("--store", store, "check")
        assert cp.returncode == 0, cp.stdout + cp.stderr
        srv = pkvs.start(args, store=store)
        with RespConn(srv.resp_port, timeout=20) as c:
            got = {}
            for key in {k for k, _ in load.history}:
                flat = c.command("HGETALL", key)
                fields = dict(zip(flat[::2], flat[1::2]))
                assert c.command("HLEN", key) == len(fields), key
                assert c.command("EXISTS", key) == (1 if fields else 0)
                assert set(fields) <= set(HashLoad.FIELDS + [HashLoad.COUNTER]), key
                for f in HashLoad.FIELDS + [HashLoad.COUNTER]:
                    got[(key, f)] = fields.get(f)
            bad = [(kf, got[kf] and got[kf][:20]) for kf in load.history
                   if got[kf] not in load.allowed(kf)]
            assert not bad, f"round {round_}: {len(bad)} fields no history allows: {bad[:10]}"
            # an unacknowledged HSET of several fields: all of it or none
            for key, kind, states, entries in load.ops:
                if kind != "HSET" or len(states) < 2 or any(e[1] for e in entries.values()):
                    continue
                there = sum(got[(key, f)] == s for f, s in states.items())
                assert there in (0, len(states)), (key, there, len(states))
            assert c.command("FLUSHALL") == "OK"
        srv.stop(keep_store=True)


@pytest.mark.crash
def test_kill9_after_big_hset(pkvs):
    """An acknowledged HSET of 2,000 fields (one group of 2,001 records,
    large values held where they landed) is whole after kill -9, and so
    is an HDEL of 1,000 of them."""
    store = pkvs.new_store()
    srv = pkvs.start(["--checkpoint-records", "100000", "--checkpoint-ms", "100000"], store=store)
    fields = {f"f{i:05d}".encode(): blob(600 if i % 2 else 20, i) for i in range(2000)}
    with RespConn(srv.resp_port, timeout=30) as c:
        assert c.command("HSET", "h", *[x for kv in fields.items() for x in kv]) == len(fields)
        gone = sorted(fields)[::2]
        assert c.command("HDEL", "h", *gone) == len(gone)
    srv.kill9()
    for f in gone:
        del fields[f]
    srv = pkvs.start(store=store)
    with RespConn(srv.resp_port, timeout=30) as c:
        assert c.command("HLEN", "h") == len(fields)
        flat = c.command("HGETALL", "h")
        assert dict(zip(flat[::2], flat[1::2])) == fields


# ---------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------

def http_get(port, path, method="GET"):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def decode_name(n):
    return base64.b64decode(n[7:]) if n.startswith("base64:") else n.encode()


def decode_value(v):
    return base64.b64decode(v["base64"]) if isinstance(v, dict) else v.encode()


def test_http_hash_json(server):
    fields = {
        b"name": "Zoë ☃ 𝄞".encode(),
        b"bin": b"a\xffb\x00",
        b"base64:trap": b"x",
        b"\xfe\xfd": b"v",
        b"q\"t\\": b"line\n2\ttab\x01\x7f",
        b"": b"",
        b"overlong": b"\xc0\xaf",
        b"surrogate": b"\xed\xa0\x80",
        b"big": "é".encode() * 40000,          # over several buffers, UTF-8 split across them
        b"bigbin": bytes(range(256)) * 300,
    }
    with RespConn(server.resp_port, timeout=20) as c:
        c.command("FLUSHALL")
        c.command("HSET", "web", *[x for kv in fields.items() for x in kv])
        c.command("SET", "str", "abc")
    status, headers, body = http_get(server.port, "/kv/web")
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(body)
    obj = json.loads(body)
    assert {decode_name(k): decode_value(v) for k, v in obj.items()} == fields
    assert obj["name"] == "Zoë ☃ 𝄞" and obj["bin"] == {"base64": "Yf9iAA=="}
    assert "base64:" + base64.b64encode(b"base64:trap").decode() in obj
    assert isinstance(obj["big"], str) and isinstance(obj["bigbin"], dict)
    assert isinstance(obj["overlong"], dict) and isinstance(obj["surrogate"], dict)
    length = len(body)
    status, headers, body = http_get(server.port, "/kv/web", "HEAD")
    assert status == 200 and body == b"" and int(headers["content-length"]) == length
    status, _, body = http_get(server.port, "/kv?limit=10")
    assert status == 200
    listed = {k["key"]: k for k in json.loads(body)["keys"]}
    assert listed["web"] == {"key": "web", "type": "hash", "fields": len(fields)}
    assert listed["str"] == {"key": "str", "type": "string", "len": 3}
    status, _, body = http_get(server.port, "/kv/str")
    assert status == 200 and body == b"abc"
    # a hash deleted over HTTP is gone for RESP
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.sendall(b"DELETE /kv/web HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert s.recv(100).startswith(b"HTTP/1.1 204")
    s.close()
    with RespConn(server.resp_port, timeout=20) as c:
        assert c.command("EXISTS", "web") == 0
