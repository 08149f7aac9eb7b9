"""pkvs's commands on keys of any type against Redis 7's own replies.

DEL, UNLINK, EXISTS, TYPE, TOUCH, RENAME, RENAMENX, COPY (DB, REPLACE),
RANDOMKEY, OBJECT, KEYS, SCAN (MATCH, COUNT, TYPE), DBSIZE, FLUSHDB and
FLUSHALL run on pkvs and on a Debian redis-server (tests/e2e/redis_peer.py)
in RESP2 and RESP3, replies compared byte for byte, arity errors included.
Then what the tree's layout makes of them: RENAME of a hash moves its
record and not its fields (the fields are keyed by the hash's id), with
its deadline, across a restart; COPY of a hash is a deep copy that
outlives its source's deletion and sweep; COPY of a long string shares
its buffers and stays intact when the source changes; RANDOMKEY picks
uniformly in small and large databases; SCAN and KEYS never return an
expired key.
"""
import time

import pytest
import redis

from redis_peer import peers, redis_peer  # noqa: F401 (fixtures)

PROTOS = [2, 3]




def client(srv, protocol=3):
    return redis.Redis(host="127.0.0.1", port=srv.resp_port, protocol=protocol, socket_timeout=20)


KEYSPACE_CMDS = [
    ("SET", "a", "1"), ("SET", "b", "2"), ("HSET", "h", "f", "v", "g", "w"), ("EXISTS", "a", "b", "h", "no", "a"),
    ("TYPE", "a"), ("TYPE", "h"), ("TYPE", "no"), ("TOUCH", "a", "h", "no"), ("DBSIZE",),
    ("DEL", "a", "no", "a"), ("UNLINK", "b", "no"), ("EXISTS", "a", "b"), ("DBSIZE",),
    ("SET", "k", "v"), ("RENAME", "k", "k2"), ("GET", "k2"), ("EXISTS", "k"), ("RENAME", "k", "k3"),
    ("RENAMENX", "k", "k3"), ("RENAME", "k2", "k2"), ("RENAMENX", "k2", "k2"), ("RENAME", "no", "no"),
    ("SET", "k3", "x"), ("RENAMENX", "k2", "k3"), ("RENAME", "k2", "k3"), ("GET", "k3"),
    ("EXPIRE", "k3", "100"), ("RENAME", "k3", "k4"), ("TTL", "k4"), ("TTL", "k3"),
    ("SET", "k5", "x"), ("EXPIRE", "k5", "1000"), ("RENAME", "k4", "k5"), ("TTL", "k5"),
    ("RENAME", "h", "h2"), ("HGETALL", "h2"), ("TYPE", "h"), ("RENAME", "k5", "h2"), ("TYPE", "h2"),
    ("HSET", "h", "x", "1"), ("RENAMENX", "h", "h2"), ("RENAME", "h", "h2"), ("HGETALL", "h2"),
    ("SET", "s", "str"), ("EXPIRE", "s", "500"), ("COPY", "s", "s2"), ("TTL", "s2"), ("GET", "s2"),
    ("COPY", "s", "s2"), ("SET", "s", "changed"), ("COPY", "s", "s2", "REPLACE"), ("GET", "s2"), ("TTL", "s2"),
    ("COPY", "s", "s"), ("COPY", "s", "s", "DB", "0"), ("COPY", "s", "s3", "DB", "notanint"),
    ("COPY", "s", "s3", "DB", "99"), ("COPY", "s", "s3", "DB", "-1"), ("COPY", "s", "s3", "DB", "99999999999"),
    ("COPY", "s", "s3", "FOO"), ("COPY", "s", "s3", "DB"), ("COPY", "s", "s3", "REPLACE", "REPLACE"),
    ("COPY", "no", "s4"), ("EXISTS", "s4"), ("HSET", "hh", "a", "1"), ("COPY", "hh", "hc"), ("HGETALL", "hc"),
    ("HSET", "hc", "b", "2"), ("HGETALL", "hh"), ("COPY", "hc", "s", "REPLACE"), ("TYPE", "s"),
    ("HGETALL", "s"), ("COPY", "s3", "hh", "REPLACE"), ("TYPE", "hh"),
    ("OBJECT", "ENCODING", "s3"), ("OBJECT", "ENCODING", "no"), ("OBJECT", "REFCOUNT", "no"),
    ("OBJECT", "IDLETIME", "no"), ("OBJECT", "FREQ", "s3"), ("OBJECT", "FOO", "s3"), ("OBJECT",),
    ("OBJECT", "ENCODING"), ("OBJECT", "HELP", "x"), ("OBJECT", "ENCODING", "a", "b"),
    ("FLUSHDB", "FOO"), ("FLUSHDB", "ASYNC", "SYNC"), ("FLUSHALL", "SYNC", "x"), ("FLUSHDB", "SYNC"),
    ("DBSIZE",), ("RANDOMKEY",), ("SET", "only", "1"), ("RANDOMKEY",), ("DEL", "only"), ("RANDOMKEY",),
    ("SET", "x1", "1"), ("SET", "x2", "1"), ("SET", "y1", "1"), ("KEYS", "x1*"), ("KEYS", "nomatch*"),
    ("SCAN", "0", "COUNT", "0"), ("SCAN", "0", "COUNT", "-1"), ("SCAN", "0", "COUNT", "abc"),
    ("SCAN", "0", "MATCH"), ("SCAN", "abc"), ("SCAN", "0", "FOO", "1"), ("SCAN", "0", "TYPE", "nosuchtype"),
    ("SCAN", "0", "MATCH", "y*", "COUNT", "100"), ("SCAN", "0", "TYPE", "string", "MATCH", "y*"),
    ("SCAN", "0", "TYPE", "HASH"), ("FLUSHALL", "ASYNC"), ("DBSIZE",), ("KEYS", "*"), ("SCAN", "0"),
    ("SET", "a", "1"), ("FLUSHALL",), ("EXISTS", "a"),
]

ARITY = [
    ("DEL",), ("UNLINK",), ("EXISTS",), ("TYPE",), ("TYPE", "a", "b"), ("TOUCH",), ("RENAME", "a"),
    ("RENAMENX", "a"), ("RENAME", "a", "b", "c"), ("COPY", "a"), ("RANDOMKEY", "x"), ("KEYS",),
    ("KEYS", "a", "b"), ("SCAN",), ("DBSIZE", "x"), ("OBJECT", "REFCOUNT"),
]


@pytest.mark.parametrize("proto", PROTOS)
def test_replies_match_redis(peers, proto):
    run, _ = peers
    p = run(proto)
    for c in KEYSPACE_CMDS + ARITY:
        p.same(*c)


def test_scan_walks_every_key_once_and_filters(peers):
    """SCAN's cursors (pkvs: tickets over key order) reach every key once,
    with MATCH and TYPE as Redis filters; the union equals Redis's."""
    run, _ = peers
    p = run(2)
    for i in range(300):
        p.same("SET", f"key:{i}", i)
    for i in range(40):
        p.same("HSET", f"hash:{i}", "f", i)
    r = redis.Redis(host="127.0.0.1", port=p.pkvs.sock.getpeername()[1], protocol=2)
    ref = redis.Redis(host="127.0.0.1", port=p.redis.sock.getpeername()[1], protocol=2)
    for kw in ({}, {"match": "key:1*"}, {"_type": "hash"}, {"_type": "string", "match": "*9"}, {"count": 7}):
        seen = []
        cur = 0
        while True:
            cur, keys = r.scan(cur, **kw)
            seen += keys
            if cur == 0:
                break
        assert len(seen) == len(set(seen)), kw
        assert sorted(seen) == sorted(ref.scan_iter(**kw)), kw
    assert sorted(r.keys("hash:*")) == sorted(ref.keys("hash:*"))


def test_rename_hash_moves_record_with_deadline(pkvs):
    """RENAME of a hash of 3000 fields: the new name answers every field, the
    old one nothing, the deadline moved with it; the same after a restart.
    A hash renamed over another hash drops the one it replaced."""
    srv = pkvs.start()
    r = client(srv)
    fields = {f"f{i}": f"v{i}" for i in range(3000)}
    r.hset("src", mapping=fields)
    r.expire("src", 1000)
    r.hset("dst", mapping={"old": "x"})
    t0 = time.monotonic()
    assert r.rename("src", "dst") is True
    took = time.monotonic() - t0
    for attempt in ("before", "after"):
        if attempt == "after":
            srv.restart()
            r = client(srv)
        assert r.exists("src") == 0
        assert r.hlen("dst") == 3000
        assert r.hgetall("dst") == {k.encode(): v.encode() for k, v in fields.items()}
        assert 990 < r.ttl("dst") <= 1000
        assert r.hget("dst", "old") is None
    assert took < 1.0, took
    assert r.renamenx("dst", "dst2") is True
    assert r.hlen("dst2") == 3000


def test_copy_hash_is_deep(pkvs):
    """COPY of a hash copies every field under a new hash: the copy changes
    alone, outlives its source's DEL (and the sweep of its fields), and
    survives a restart; COPY ... DB puts it in another database."""
    srv = pkvs.start()
    r = client(srv)
    fields = {f"f{i}": "v" * (i % 700) for i in range(1200)}
    r.hset("h", mapping=fields)
    r.pexpire("h", 10_000_000)
    assert r.copy("h", "c") is True
    assert r.copy("h", "c") is False
    assert r.copy("h", "c", destination_db=3) is True
    assert 9_000_000 < r.pttl("c") <= 10_000_000
    r.hset("c", "new", "1")
    assert r.hget("h", "new") is None
    r.delete("h")
    time.sleep(1.2)                    # the sweeper deletes h's fields
    want = {k.encode(): v.encode() for k, v in fields.items()}
    got = r.hgetall("c")
    assert got.pop(b"new") == b"1"
    assert got == want
    srv.restart()
    r = client(srv)
    assert r.hlen("c") == 1201
    r3 = redis.Redis(host="127.0.0.1", port=srv.resp_port, protocol=3, db=3)
    assert r3.hgetall("c") == want


@pytest.mark.parametrize("size", [51200, 700_000], ids=["entry", "chunks"])
def test_copy_long_string_shares_then_diverges(pkvs, size):
    """COPY of a long string (in one entry, or in chunks) shares its
    buffers; source and copy then change apart, the copy outlives the
    source's DEL and its sweep, and a restart."""
    srv = pkvs.start()
    r = client(srv)
    v = bytes(range(256)) * (size // 256)
    for at in range(0, size, 100_000):      # APPENDs: a string in chunks past an entry
        r.append("s", v[at:at + 100_000])
    r.expire("s", 5000)
    assert r.copy("s", "c") is True
    assert 4990 < r.ttl("c") <= 5000
    r.setrange("s", 100, b"X" * 100)
    r.append("c", b"tail")
    assert r.get("c") == v + b"tail"
    assert r.get("s") == v[:100] + b"X" * 100 + v[200:]
    r.delete("s")
    time.sleep(1.2)
    assert r.get("c") == v + b"tail"
    assert r.type("c") == b"string" and list(r.scan_iter(_type="string")) == [b"c"]
    assert r.object("encoding", "c") == b"raw"
    srv.restart()
    assert client(srv).get("c") == v + b"tail"


def test_randomkey(pkvs):
    srv = pkvs.start()
    r = client(srv)
    assert r.randomkey() is None
    r.mset({"foo": "x", "bar": "y"})
    assert {r.randomkey() for _ in range(100)} == {b"foo", b"bar"}
    # Large: uniform over the keys (600 picks of 6002 keys: ~570
    # distinct; foo and bar, alone in their part of the key space, rare).
    pipe = r.pipeline(transaction=False)
    for i in range(6000):
        pipe.set(f"user:{i:06d}", i)
    pipe.execute()
    pipe = r.pipeline(transaction=False)
    for _ in range(600):
        pipe.randomkey()
    got = pipe.execute()
    assert all(k.startswith(b"user:") or k in (b"foo", b"bar") for k in got)
    assert len(set(got)) > 520, len(set(got))
    assert got.count(b"foo") + got.count(b"bar") < 6, got.count(b"foo") + got.count(b"bar")
    # Keys whose deadline passed are never the answer.
    r.flushall()
    r.set("live", 1)
    for i in range(20):
        r.set(f"dead{i}", 1, px=30)
    time.sleep(0.1)
    assert {r.randomkey() for _ in range(30)} == {b"live"}


def test_expired_keys_not_listed(pkvs):
    srv = pkvs.start()
    r = client(srv)
    r.set("stay", 1)
    for i in range(50):
        r.set(f"tmp{i}", 1, px=40)
    time.sleep(0.08)
    assert r.keys("*") == [b"stay"]
    assert list(r.scan_iter()) == [b"stay"]
    assert r.exists(*[f"tmp{i}" for i in range(50)]) == 0
