"""DUMP and RESTORE (services/cmd_dump.c, kv_rdb.c) against Debian's
redis-server 7.0.15:

- a payload moves both ways: what pkvs dumps Redis restores and what
  Redis dumps (its compact encodings: integer and LZF strings, intsets,
  listpacks, quicklists) pkvs restores, for every type, the values read
  back equal;
- pkvs restores its own payloads (every type, large values, long keys);
- REPLACE, ABSTTL, a TTL, a TTL in the past, IDLETIME and FREQ, and every
  error (BUSYKEY, a bad TTL, a wrong checksum or version, bad data, a
  syntax error, the arity) byte for byte in RESP2 and RESP3.
"""
import time

import pytest
import redis

from pkvs_module import pkvs_srv  # noqa: F401 (pkvs_srv: a fixture)
from redis_peer import Peers, redis_peer  # noqa: F401 (redis_peer: a fixture)


def client(port):
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


def fill(c):
    c.set("s", "hello")
    c.set("i", 12345)
    c.set("neg", -7)
    c.set("lzf", "abc" * 100)
    c.set("big", bytes(range(256)) * 1000)
    c.rpush("l", "a", "bb", 7, -129, "x" * 100)
    c.rpush("lbig", *[f"e{i}" for i in range(1000)])
    c.sadd("is", 1, 2, 3, -70000, 1 << 40)
    c.sadd("st", "x", "y", "zz")
    c.sadd("sbig", *[f"m{i}" for i in range(600)])
    c.hset("h", mapping={"f1": "v1", "f2": 222, "f3": "w" * 80})
    c.hset("hbig", mapping={f"f{i}": f"v{i}" for i in range(600)})
    c.zadd("z", {"x": 1.5, "y": 2, "w": -3, "big": 1e300, "inf": float("inf")})
    c.zadd("zbig", {f"m{i}": i / 7 for i in range(300)})


def read(c, k):
    t = c.type(k).decode()
    if t == "string":
        return t, c.get(k)
    if t == "list":
        return t, c.lrange(k, 0, -1)
    if t == "set":
        return t, sorted(c.smembers(k))
    if t == "zset":
        return t, c.zrange(k, 0, -1, withscores=True)
    if t == "hash":
        return t, sorted(c.hgetall(k).items())
    return t, None


KEYS = ["s", "i", "neg", "lzf", "big", "l", "lbig", "is", "st", "sbig", "h", "hbig", "z", "zbig"]


@pytest.mark.parametrize("direction", ["pkvs->redis", "redis->pkvs"])
def test_payloads_cross(pkvs_srv, redis_peer, direction):  # noqa: F811
    p, r = client(pkvs_srv.resp_port), client(redis_peer.resp_port)
    p.flushall()
    r.flushall()
    src, dst = (p, r) if direction == "pkvs->redis" else (r, p)
    fill(src)
    for k in KEYS:
        payload = src.dump(k)
        assert payload is not None
        assert dst.restore(k + ":copy", 0, payload) == b"OK"
        assert read(dst, k + ":copy") == read(src, k), k
    # Restored again in the source: the same value.
    for k in KEYS:
        assert src.restore(k + ":again", 0, src.dump(k)) == b"OK"
        assert read(src, k + ":again") == read(src, k)


def test_own_payloads(pkvs_srv):  # noqa: F811
    p = client(pkvs_srv.resp_port)
    p.flushall()
    fill(p)
    for k in KEYS:
        d = p.dump(k)
        p.restore(k, 0, d, replace=True)
        assert p.dump(k) == d
    long = b"k" * 5000
    p.set(long, "v")
    assert p.restore(long + b"2", 0, p.dump(long)) == b"OK"
    assert p.get(long + b"2") == b"v"
    # A TTL, absolute or not, and one in the past.
    p.restore("t1", 100000, p.dump("s"))
    assert 99000 < p.pttl("t1") <= 100000
    at = int(time.time() * 1000) + 200000
    p.restore("t2", at, p.dump("s"), absttl=True)
    assert 199000 < p.pttl("t2") <= 200000
    p.restore("t3", 1, p.dump("s"), absttl=True)
    assert p.exists("t3") == 0
    p.restore("s", 1, p.dump("s"), absttl=True, replace=True)
    assert p.exists("s") == 0
    # A value that changes type under REPLACE.
    p.restore("h", 0, p.dump("l"), replace=True)
    assert p.type("h") == b"list"


@pytest.mark.parametrize("proto", [2, 3])
def test_errors_against_redis(pkvs_srv, redis_peer, proto):  # noqa: F811
    c = Peers(pkvs_srv.resp_port, redis_peer.resp_port, proto)
    c.both("FLUSHALL")
    c.same("SET", "s", "hello")
    c.same("DUMP", "nosuch")
    payload = client(redis_peer.resp_port).dump("s")
    c.same("RESTORE", "s", "0", payload)                        # BUSYKEY
    c.same("RESTORE", "n", "-1", payload)                       # bad TTL
    c.same("RESTORE", "n", "x", payload)
    c.same("RESTORE", "n", "0", payload[:-1] + b"\x00")         # checksum
    c.same("RESTORE", "n", "0", b"short")
    bad_ver = payload[:-10] + b"\x0b\x00" + payload[-8:]
    c.same("RESTORE", "n", "0", bad_ver)
    c.same("RESTORE", "n", "0", payload, "BOGUS")
    c.same("RESTORE", "n", "0", payload, "IDLETIME", "-1")
    c.same("RESTORE", "n", "0", payload, "FREQ", "256")
    c.same("RESTORE", "n", "0", payload, "IDLETIME", "10", "FREQ", "5")
    c.same("RESTORE", "n", "0", payload, "IDLETIME", "10")
    c.same("RESTORE", "f", "0", payload, "FREQ", "5")
    c.same("RESTORE", "s", "0", payload, "REPLACE", "ABSTTL")
    c.same("GET", "n")
    c.same("RESTORE", "n")
    c.same("DUMP")
    c.same("TTL", "n")
    c.close()


def test_bad_data(pkvs_srv):  # noqa: F811
    """A value whose checksum is right but whose data is not: refused."""
    p = client(pkvs_srv.resp_port)
    p.flushall()
    p.rpush("l", "a", "b")
    d = p.dump("l")
    body = d[:-10][:-1]                      # the value cut short
    fixed = body + d[-10:-8]
    fixed += crc64(fixed).to_bytes(8, "little")
    with pytest.raises(redis.ResponseError, match="Bad data format"):
        p.restore("x", 0, fixed)
    assert p.exists("x") == 0


def crc64(data):
    """Redis's CRC-64 (Jones, reflected), bit by bit: the test's own."""
    poly = 0x95AC9329AC4BC9B5
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return crc


def test_crc64_check_value():
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA


def test_migrate_to_redis(pkvs_srv, redis_peer):  # noqa: F811
    p, r = client(pkvs_srv.resp_port), client(redis_peer.resp_port)
    p.flushall()
    r.flushall()
    fill(p)
    want = {k: read(p, k) for k in KEYS}
    p.expire("s", 100)
    host, port = "127.0.0.1", redis_peer.resp_port
    assert p.execute_command("MIGRATE", host, port, "s", 0, 5000) == b"OK"
    assert p.exists("s") == 0 and r.get("s") == b"hello" and 95 <= r.ttl("s") <= 100
    assert p.execute_command("MIGRATE", host, port, "", 0, 5000, "KEYS", *KEYS[1:]) == b"OK"
    assert p.dbsize() == 0
    for k in KEYS:
        assert read(r, k) == want[k], k
    assert p.execute_command("MIGRATE", host, port, "s", 0, 5000) == b"NOKEY"
    # COPY keeps the key here; the target's BUSYKEY comes back as an error.
    p.set("c", "1")
    assert p.execute_command("MIGRATE", host, port, "c", 3, 5000, "COPY") == b"OK"
    assert p.get("c") == b"1"
    with pytest.raises(redis.ResponseError,
                       match="^Target instance replied with error: BUSYKEY Target key name already exists."):
        p.execute_command("MIGRATE", host, port, "c", 3, 5000)
    assert p.get("c") == b"1"
    p.set("c", "2")
    assert p.execute_command("MIGRATE", host, port, "c", 3, 5000, "REPLACE") == b"OK"
    assert p.exists("c") == 0
    r3 = redis.Redis(host=host, port=port, db=3)
    assert r3.get("c") == b"2"
    with pytest.raises(redis.ResponseError, match="must be set to the empty string"):
        p.execute_command("MIGRATE", host, port, "x", 0, 5000, "KEYS", "a")
    with pytest.raises(redis.ResponseError, match="^syntax error"):
        p.execute_command("MIGRATE", host, port, "x", 0, 5000, "BOGUS")
    # Nobody listening: IOERR.
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    p.set("d", "1")
    with pytest.raises(redis.ResponseError, match="^IOERR error or timeout connecting to the client"):
        p.execute_command("MIGRATE", host, dead, "d", 0, 500)
    assert p.get("d") == b"1"
    # With AUTH against a server that has no password: Redis's own error.
    with pytest.raises(redis.ResponseError, match="^Target instance replied with error: "):
        p.execute_command("MIGRATE", host, port, "d", 0, 5000, "AUTH", "nopass")


def test_trailing_bytes_leave_key(pkvs_srv, redis_peer):  # noqa: F811
    """A payload found bad once its value is decoded is refused and REPLACE
    leaves the key's old value in place: a value cut short (as redis-server
    does), and, in pkvs, bytes after the value (redis-server 7.0.15 ignores
    them)."""
    for port in (pkvs_srv.resp_port, redis_peer.resp_port):
        c = client(port)
        c.flushall()
        c.rpush("l", *[f"e{i}" for i in range(200)])
        c.set("k", "old")
        d = c.dump("l")
        cases = [d[:-10][:-3]]
        if port == pkvs_srv.resp_port:
            cases.append(d[:-10] + b"\x00junk")
        for body in cases:
            fixed = body + d[-10:-8]
            fixed += crc64(fixed).to_bytes(8, "little")
            with pytest.raises(redis.ResponseError, match="^Bad data format$"):
                c.restore("k", 0, fixed, replace=True)
            assert c.type("k") == b"string" and c.get("k") == b"old"
            with pytest.raises(redis.ResponseError, match="^Bad data format$"):
                c.restore("n", 0, fixed)
            assert c.exists("n") == 0


def test_restore_idletime_freq(pkvs_srv, redis_peer):  # noqa: F811
    """IDLETIME sets what OBJECT IDLETIME reads (an lru or no policy),
    FREQ what OBJECT FREQ reads (an lfu policy), as in redis-server."""
    for port in (pkvs_srv.resp_port, redis_peer.resp_port):
        c = client(port)
        c.flushall()
        c.config_set("maxmemory-policy", "allkeys-lru")
        c.set("s", "v")
        d = c.dump("s")
        c.restore("i", 0, d, idletime=1000)
        assert 1000 <= c.object("idletime", "i") <= 1002, port
        c.restore("i", 0, d, replace=True, frequency=100)   # not lfu: ignored
        assert c.object("idletime", "i") <= 2, port
        c.config_set("maxmemory-policy", "allkeys-lfu")
        c.restore("f", 0, d, frequency=100)
        assert c.object("freq", "f") == 100, port
        c.restore("f2", 0, d, idletime=1000)                 # lfu: ignored
        assert c.object("freq", "f2") == 5, port
        c.config_set("maxmemory-policy", "noeviction")
