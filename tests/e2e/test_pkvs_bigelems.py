"""pkvs's hash field values and list elements larger than one tree entry
(63 buffers, 129,024 bytes with 2 KiB buffers), kept in chunks under an id
of their own (services/kv_big.c, kv_obj.c, kv_sweep.c), through redis-py,
redis-cli and curl, and against Debian's redis-server.

- Hashes: every read and write command on field values of one entry
  exactly, one byte more, 200 KB and 1 MiB (HSET, HMSET, HGET, HMGET,
  HGETALL, HVALS, HKEYS, HSTRLEN, HEXISTS, HSETNX, HRANDFIELD, HSCAN,
  HINCRBY's and HINCRBYFLOAT's errors, overwrites, HDEL), byte-exact in
  RESP2 and RESP3 and after a restart.
- Lists: pushes mixing big and small elements, LRANGE, LINDEX, LPOS, LREM,
  LINSERT (a big pivot, a big new element), LSET both ways, LTRIM, LMOVE,
  RPOPLPUSH, pops with a count, a BLPOP served by a big push, LMPOP.
- MULTI/EXEC and EVAL; COPY, RENAME, DUMP and RESTORE (and payloads that
  cross to redis-server and back); a command script answered byte for
  byte as redis-server answers it.
- HTTP: a hash's big fields in its JSON; a Redis replica (full sync and
  the command stream) gets them byte-exact.

Their space, a full store and kill -9: test_pkvs_bigelems_space.py.
"""
import base64
import json
import random
import subprocess
import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from conftest import run_tool, settled, tool, wait_until
from paste_proc import MissingBinary, RedisServer
from redis_peer import UNORDERED, parse, peers, redis_peer, run_script  # noqa: F401,F811 (fixtures)

MiB = 1 << 20
BUF = 2048
ENTRY = 63 * BUF            # the most one tree entry holds: 129,024 bytes
# Held bytes allowed over the baseline once everything is gone: less than
# one element in chunks, so a single one left behind is seen.
SLACK = 64 * 1024
BIG_STORE = ["--ring-bufs", "1024"]


def val(n, seed):
    """n reproducible random bytes for seed (any hashable)."""
    return random.Random(repr(seed)).randbytes(n)


def restarted(srv, r, proto=3):
    """The server stopped and started on its store: a new client."""
    r.close()
    srv.restart()
    return client(srv, proto)


def usage_counts_bytes(r, key, total):
    """MEMORY USAGE counts the values' bytes, not their records'."""
    assert total <= r.memory_usage(key, samples=0) <= total + 64 * 1024


def client(srv, protocol=3, db=0, retries=True):
    kw = {} if retries else {"retry": Retry(NoBackoff(), 0)}
    return redis.Redis(host="127.0.0.1", port=srv.resp_port, protocol=protocol, db=db,
                       socket_timeout=120, **kw)


def held(r):
    return r.info("memory")["pkvs_held_bytes"]


def settled_base(r):
    """pkvs_held_bytes once it stops moving (a fresh store's first
    checkpoint, a restart's sweep)."""
    return settled(lambda: held(r), tries=20)


def space_back(r, base, timeout=30):
    """Wait until held bytes are within SLACK of base; the last reading."""
    wait_until(lambda: held(r) <= base + SLACK, timeout, interval=0.1)
    return held(r)


def check_store(srv):
    """Stop srv keeping its store; paste-store check must find it clean."""
    srv.stop(keep_store=True)
    cp = run_tool("--store", srv.store, "check", timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def pairs(reply):
    """HRANDFIELD ... WITHVALUES: RESP2 a flat list, RESP3 a list of pairs."""
    if reply and isinstance(reply[0], (list, tuple)):
        return [tuple(p) for p in reply]
    return list(zip(reply[::2], reply[1::2]))


def hash_is(r, key, model):
    """Every read of a hash agrees with model (a dict of bytes)."""
    assert r.hlen(key) == len(model)
    assert r.hgetall(key) == model
    assert sorted(r.hkeys(key)) == sorted(model)
    assert sorted(r.hvals(key)) == sorted(model.values())
    for f, v in model.items():
        assert r.hget(key, f) == v, (key, f, len(v))
        assert r.hstrlen(key, f) == len(v), f


# ---------------------------------------------------------------------------
# Hashes
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("proto", [2, 3])
def test_hash_field_values_in_chunks(pkvs, proto):
    srv = pkvs.start(BIG_STORE, store_size="256M")
    r = client(srv, proto)
    model = {b"fits": val(ENTRY, "fits"), b"edge": val(ENTRY + 1, "edge"),
             b"k200": val(200_000, "k200")}
    assert r.hset("h", mapping=model) == 3
    more = {b"mib": val(MiB, "mib"), b"small": b"tiny", b"empty": b""}
    assert r.execute_command("HMSET", "h", *[x for kv in more.items() for x in kv]) in (True, b"OK")
    model.update(more)
    hash_is(r, "h", model)
    names = sorted(model)
    assert r.hmget("h", names + [b"nope"]) == [model[n] for n in names] + [None]
    for f in model:
        assert r.hexists("h", f) is True
    assert r.hexists("h", "nope") is False
    # HSETNX: no overwrite of a big value; a new big one is set.
    assert r.hsetnx("h", "edge", b"other") == 0
    assert r.hsetnx("h", "mib", val(ENTRY + 1, "nx")) == 0
    assert r.hget("h", "edge") == model[b"edge"] and r.hget("h", "mib") == model[b"mib"]
    model[b"nx"] = val(300_000, "nx2")
    assert r.hsetnx("h", "nx", model[b"nx"]) == 1
    hash_is(r, "h", model)
    # HRANDFIELD WITHVALUES: distinct fields for a positive count, repeats
    # allowed for a negative one, every value whole.
    got = pairs(r.execute_command("HRANDFIELD", "h", "3", "WITHVALUES"))
    assert len(got) == 3 and len({f for f, _ in got}) == 3
    assert all(model[f] == v for f, v in got)
    got = pairs(r.execute_command("HRANDFIELD", "h", "-12", "WITHVALUES"))
    assert len(got) == 12 and all(model[f] == v for f, v in got)
    got = pairs(r.execute_command("HRANDFIELD", "h", "100", "WITHVALUES"))
    assert dict(got) == model and len(got) == len(model)
    assert r.execute_command("HRANDFIELD", "h") in model
    # HSCAN: each field once, with its whole value.
    seen = list(r.hscan_iter("h", count=2))
    assert len(seen) == len(model) and dict(seen) == model
    # HINCRBY / HINCRBYFLOAT on a big value: Redis's errors, the value kept.
    for f in (b"edge", b"mib"):
        with pytest.raises(redis.ResponseError, match="hash value is not an integer"):
            r.hincrby("h", f, 1)
        with pytest.raises(redis.ResponseError, match="hash value is not a float"):
            r.hincrbyfloat("h", f, 1.5)
    # Overwrites: big -> small -> big, big -> big, small -> big.
    assert r.hset("h", "mib", b"now small") == 0
    assert r.hget("h", "mib") == b"now small" and r.hstrlen("h", "mib") == 9
    model[b"mib"] = val(MiB, "mib2")
    assert r.hset("h", "mib", model[b"mib"]) == 0
    model[b"edge"] = val(ENTRY + 1, "edge2")
    assert r.hset("h", "edge", model[b"edge"]) == 0
    model[b"small"] = val(ENTRY + 1, "small2")
    assert r.hset("h", "small", model[b"small"]) == 0
    model[b"fits"] = val(ENTRY + 5000, "fits2")              # one entry -> chunks
    assert r.hset("h", "fits", model[b"fits"]) == 0
    hash_is(r, "h", model)
    # HDEL of a big one (and of one that is gone).
    assert r.hdel("h", "k200") == 1
    del model[b"k200"]
    assert r.hget("h", "k200") is None and r.hexists("h", "k200") is False
    assert r.hdel("h", "k200", "nope") == 0
    hash_is(r, "h", model)
    # Several big values in one HSET, beside a small one (and, once, 20 MiB).
    other = {b"a": val(ENTRY + 1, "oa"), b"b": b"x", b"c": val(MiB, "oc")}
    if proto == 3:
        other[b"huge"] = val(20 * MiB, "huge")
    assert r.hset("h2", mapping=other) == len(other)
    hash_is(r, "h2", other)
    usage_counts_bytes(r, "h2", sum(len(f) + len(v) for f, v in other.items()))
    # A restart: every byte as it was.
    r = restarted(srv, r, proto)
    hash_is(r, "h", model)
    hash_is(r, "h2", other)
    assert r.hmget("h", [b"edge", b"nope", b"mib"]) == [model[b"edge"], None, model[b"mib"]]
    r.close()
    check_store(srv)


# ---------------------------------------------------------------------------
# Lists
# ---------------------------------------------------------------------------

def near(v):
    """v with its last byte changed: the same length, not equal."""
    return v[:-1] + bytes([v[-1] ^ 1])


def list_is(r, key, model):
    assert r.llen(key) == len(model)
    assert r.lrange(key, 0, -1) == model
    for i, v in enumerate(model):
        assert r.lindex(key, i) == v, (key, i)
    if model:
        assert r.lindex(key, -1) == model[-1]
        assert r.lrange(key, 1, -2) == model[1:-1]


@pytest.mark.parametrize("proto", [2, 3])
def test_list_elements_in_chunks(pkvs, proto):
    srv = pkvs.start(BIG_STORE, store_size="256M")
    r = client(srv, proto)
    E = {n: val(s, (n, "e")) for n, s in [(1, ENTRY + 1), (2, 200_000), (3, MiB), (4, ENTRY),
                                          (5, 300_000), (6, ENTRY + 2), (7, 150_000),
                                          (8, 400_000), (9, 250_000)]}
    assert r.rpush("l", b"s0", E[1], b"s1", E[2]) == 4
    assert r.lpush("l", E[3], b"s2") == 6
    m = [b"s2", E[3], b"s0", E[1], b"s1", E[2]]
    list_is(r, "l", m)
    assert r.lrange("l", 1, 3) == m[1:4]
    assert r.lrange("l", -2, -1) == m[-2:]
    # LPOS finds a big element by its bytes (and not one a byte away).
    assert r.lpos("l", E[1]) == 3
    assert r.lpos("l", E[2], rank=-1) == 5
    assert r.rpush("l", E[1]) == 7
    m.append(E[1])
    assert r.lpos("l", E[1], count=0) == [3, 6]
    assert r.lpos("l", E[1], rank=-1) == 6
    assert r.lpos("l", near(E[1])) is None
    assert r.lpos("l", E[1][:-1]) is None
    # LREM: the first big one equal, none for a near miss.
    assert r.lrem("l", 1, E[1]) == 1
    m.remove(E[1])
    assert r.lrem("l", 0, near(E[2])) == 0
    list_is(r, "l", m)
    # LINSERT around a big pivot, a big new element.
    assert r.linsert("l", "BEFORE", E[2], E[5]) == len(m) + 1
    m.insert(m.index(E[2]), E[5])
    assert r.linsert("l", "AFTER", E[3], b"after3") == len(m) + 1
    m.insert(m.index(E[3]) + 1, b"after3")
    assert r.linsert("l", "AFTER", b"s0", E[6]) == len(m) + 1
    m.insert(m.index(b"s0") + 1, E[6])
    assert r.linsert("l", "BEFORE", near(E[5]), b"x") == -1
    list_is(r, "l", m)
    # LSET: big over small, small over big, big over big.
    assert r.lset("l", 0, E[7]) is True
    m[0] = E[7]
    i3 = m.index(E[3])
    assert r.lset("l", i3, b"small over big") is True
    m[i3] = b"small over big"
    assert r.lset("l", -1, E[8]) is True
    m[-1] = E[8]
    list_is(r, "l", m)
    # LTRIM.
    assert r.ltrim("l", 1, -2) is True
    m = m[1:-1]
    list_is(r, "l", m)
    # LMOVE / RPOPLPUSH of big elements: source and destination.
    assert r.lset("l", 0, E[9]) is True
    m[0] = E[9]
    assert m[-1] == E[2]
    d = []
    assert r.lmove("l", "dst", "LEFT", "RIGHT") == E[9]
    d.append(m.pop(0))
    assert r.rpoplpush("l", "dst") == E[2]
    d.insert(0, m.pop())
    assert r.lmove("dst", "dst", "LEFT", "RIGHT") == E[2]       # a rotation
    d.append(d.pop(0))
    list_is(r, "l", m)
    list_is(r, "dst", d)
    # Pops with a count.
    assert r.rpush("p", E[4], b"a", E[5], b"b", E[6], E[7]) == 6
    assert r.lpop("p", 2) == [E[4], b"a"]
    assert r.rpop("p", 3) == [E[7], E[6], b"b"]
    assert r.rpop("p") == E[5]
    assert r.exists("p") == 0
    # BLPOP: a client blocked before the big element is pushed.
    got = {}

    def blocked():
        b = client(srv, proto)
        got["reply"] = b.blpop(["bq"], timeout=20)
        b.close()
    t = threading.Thread(target=blocked)
    t.start()
    assert wait_until(lambda: r.info("clients")["blocked_clients"] == 1, 10)
    assert r.rpush("bq", E[3]) == 1
    t.join(30)
    assert tuple(got["reply"]) == (b"bq", E[3])
    assert r.exists("bq") == 0
    # LMPOP.
    assert r.rpush("mp", E[1], b"x", E[8]) == 3
    assert r.lmpop(2, "nokey", "mp", direction="LEFT", count=2) == [b"mp", [E[1], b"x"]]
    assert r.lmpop(1, "mp", direction="RIGHT") == [b"mp", [E[8]]]
    assert r.exists("mp") == 0
    usage_counts_bytes(r, "l", sum(map(len, m)))
    # A restart: what is left, byte-exact.
    r = restarted(srv, r, proto)
    list_is(r, "l", m)
    list_is(r, "dst", d)
    r.close()
    check_store(srv)


# ---------------------------------------------------------------------------
# MULTI/EXEC, EVAL
# ---------------------------------------------------------------------------

def test_multi_exec_and_eval(pkvs):
    srv = pkvs.start(BIG_STORE, store_size="256M")
    r = client(srv, 3)
    B = [val(s, ("m", i)) for i, s in enumerate([ENTRY + 1, 200_000, MiB, 300_000, ENTRY + 7])]
    pipe = r.pipeline(transaction=True)
    pipe.hset("h", "f", B[0])
    pipe.hget("h", "f")
    pipe.rpush("l", B[1], b"s", B[2])
    pipe.lindex("l", 0)
    pipe.lrange("l", 0, -1)
    pipe.lpop("l")
    pipe.hstrlen("h", "f")
    pipe.hgetall("h")
    assert pipe.execute() == [1, B[0], 3, B[1], [B[1], b"s", B[2]], B[1], len(B[0]),
                              {b"f": B[0]}]
    assert r.lrange("l", 0, -1) == [b"s", B[2]]
    # Lua gets the whole element and gives it back.
    assert r.eval("return redis.call('LINDEX', KEYS[1], ARGV[1])", 1, "l", 1) == B[2]
    script = ("local v = redis.call('LINDEX', KEYS[1], -1) "
              "return {string.len(v), v == ARGV[1] and 1 or 0}")
    assert r.eval(script, 1, "l", B[2]) == [len(B[2]), 1]
    assert r.eval(script, 1, "l", near(B[2])) == [len(B[2]), 0]
    assert r.eval("return redis.call('HSET', KEYS[1], 'g', ARGV[1])", 1, "h", B[3]) == 1
    assert r.hget("h", "g") == B[3]
    assert r.eval("return redis.call('HGET', KEYS[1], 'g')", 1, "h") == B[3]
    push_range = ("redis.call('RPUSH', KEYS[1], ARGV[1], ARGV[2]) "
                  "return redis.call('LRANGE', KEYS[1], 0, -1)")
    assert r.eval(push_range, 1, "l2", B[4], B[0]) == [B[4], B[0]]
    assert r.eval("return redis.call('RPOP', KEYS[1])", 1, "l2") == B[0]
    # A transaction that moves, overwrites and pops.
    pipe = r.pipeline(transaction=True)
    pipe.lmove("l", "l2", "RIGHT", "LEFT")
    pipe.hset("h", "f", b"small")
    pipe.hset("h", "g", B[2])
    pipe.lrange("l2", 0, -1)
    pipe.rpop("l2")
    pipe.hmget("h", ["f", "g"])
    assert pipe.execute() == [B[2], 0, 0, [B[2], B[4]], B[4], [b"small", B[2]]]
    assert r.lrange("l2", 0, -1) == [B[2]]
    assert r.lrange("l", 0, -1) == [b"s"]
    r.close()


# ---------------------------------------------------------------------------
# COPY, RENAME, DUMP/RESTORE
# ---------------------------------------------------------------------------

def test_copy_rename_dump_restore(pkvs):
    srv = pkvs.start(BIG_STORE + ["--checkpoint-ms", "200"], store_size="256M")
    r = client(srv, 3)
    base = settled_base(r)
    H = {b"a": val(ENTRY + 1, "ca"), b"b": b"small", b"c": val(MiB, "cc"),
         b"d": val(200_000, "cd")}
    L = [val(MiB, "l0"), b"small", val(ENTRY + 1, "l2"), val(200_000, "l3")]
    assert r.hset("h", mapping=H) == 4
    assert r.rpush("l", *L) == 4
    assert r.copy("h", "hc") is True and r.copy("l", "lc") is True
    assert r.copy("l", "lc1", destination_db=1) is True
    assert r.rename("h", "hr") is True and r.rename("l", "lr") is True
    assert r.exists("h", "l") == 0
    hash_is(r, "hr", H)
    hash_is(r, "hc", H)
    list_is(r, "lr", L)
    list_is(r, "lc", L)
    hd, ld = r.dump("hr"), r.dump("lr")
    assert r.restore("hd", 0, hd) in (b"OK", "OK")
    assert r.restore("ld", 0, ld) in (b"OK", "OK")
    hash_is(r, "hd", H)
    list_is(r, "ld", L)
    # RESTORE REPLACE over a key holding big elements.
    assert r.rpush("over", val(ENTRY + 1, "ov"), val(MiB, "ov2")) == 2
    assert r.restore("over", 0, ld, replace=True) in (b"OK", "OK")
    list_is(r, "over", L)
    # The sources go: every copy stays whole once the sweeper has run.
    assert r.delete("hr", "lr") == 2
    time.sleep(0.5)
    for _ in range(3):
        r.ping()
    hash_is(r, "hc", H)
    hash_is(r, "hd", H)
    list_is(r, "lc", L)
    list_is(r, "ld", L)
    list_is(client(srv, 3, db=1), "lc1", L)
    # Changing one copy leaves the others.
    assert r.hset("hc", "a", b"changed") == 0
    assert r.lpop("lc") == L[0]
    assert r.delete("hc", "lc") == 2
    time.sleep(0.5)
    r.ping()
    hash_is(r, "hd", H)
    list_is(r, "ld", L)
    list_is(r, "over", L)
    # Everything gone: the deep copies' chunks with it.
    assert r.delete("hd", "ld", "over") == 3
    assert client(srv, 3, db=1).delete("lc1") == 1
    got = space_back(r, base)
    assert got <= base + SLACK, f"pkvs_held_bytes {got}, {base} before anything was written"
    r.close()
    check_store(srv)


# ---------------------------------------------------------------------------
# Against redis-server
# ---------------------------------------------------------------------------

def script_with_big_values():
    V = [val(200_000 + 17 * i, ("peer", i)) for i in range(7)]
    lua_lindex = "return redis.call('LINDEX', KEYS[1], ARGV[1])"
    lua_hset = "return redis.call('HSET', KEYS[1], 'g', ARGV[1])"
    return [
        ("HSET", "h", "a", V[0], "b", "small", "c", V[1]),
        ("HGET", "h", "a"), ("HGET", "h", "c"), ("HGET", "h", "nope"),
        ("HMGET", "h", "a", "nope", "b", "c"),
        ("HSTRLEN", "h", "a"), ("HEXISTS", "h", "c"), ("HLEN", "h"),
        ("HSETNX", "h", "a", V[2]), ("HSETNX", "h", "d", V[2]), ("HGET", "h", "a"),
        (UNORDERED, "HGETALL", "h"), (UNORDERED, "HVALS", "h"), (UNORDERED, "HKEYS", "h"),
        (UNORDERED, "HRANDFIELD", "h", "100", "WITHVALUES"),
        ("HINCRBY", "h", "a", "1"), ("HINCRBYFLOAT", "h", "a", "1.5"),
        ("HSET", "h", "a", "5"), ("HINCRBY", "h", "a", "2"), ("HGET", "h", "a"),
        ("HSET", "h", "a", V[3]), ("HGET", "h", "a"),
        ("HDEL", "h", "a", "c", "nope"), ("HGET", "h", "a"), ("HLEN", "h"),
        (UNORDERED, "HGETALL", "h"),
        ("RPUSH", "l", V[0], "s1", V[1]), ("LPUSH", "l", V[2]),
        ("LRANGE", "l", "0", "-1"), ("LINDEX", "l", "1"), ("LINDEX", "l", "-1"),
        ("LLEN", "l"),
        ("LPOS", "l", V[1]), ("LPOS", "l", V[0], "RANK", "-1"), ("LPOS", "l", V[6]),
        ("LINSERT", "l", "BEFORE", V[1], V[3]), ("LINSERT", "l", "AFTER", "s1", V[4]),
        ("LINSERT", "l", "BEFORE", V[5], "x"),
        ("RPUSH", "l", V[0]), ("LPOS", "l", V[0], "COUNT", "0"),
        ("LREM", "l", "1", V[0]), ("LREM", "l", "0", V[6]), ("LRANGE", "l", "0", "-1"),
        ("LSET", "l", "0", "small"), ("LSET", "l", "1", V[5]), ("LRANGE", "l", "0", "-1"),
        ("LTRIM", "l", "0", "4"), ("LRANGE", "l", "0", "-1"),
        ("LMOVE", "l", "d", "RIGHT", "LEFT"), ("RPOPLPUSH", "l", "d"),
        ("LRANGE", "d", "0", "-1"), ("LRANGE", "l", "0", "-1"),
        ("LPOP", "l", "2"), ("RPOP", "d"),
        ("LMPOP", "2", "l", "d", "LEFT", "COUNT", "5"), ("LMPOP", "2", "l", "d", "LEFT"),
        ("RPUSH", "q", V[6], "t"), ("BLPOP", "q", "0"), ("BRPOP", "q", "0"),
        ("BLMOVE", "nokey", "q", "LEFT", "LEFT", "0.01"),
        ("MULTI",), ("RPUSH", "m", V[1], V[2]), ("LINDEX", "m", "0"),
        ("HSET", "hm", "f", V[3]), ("HGET", "hm", "f"), ("LPOP", "m"), ("EXEC",),
        ("EVAL", lua_lindex, "1", "m", "0"), ("EVAL", lua_hset, "1", "hm", V[4]),
        ("HGET", "hm", "g"), ("HMGET", "hm", "f", "g"),
        ("RPUSH", "sb", V[5], "m", V[1], V[5]), ("SORT", "sb", "ALPHA"),
        ("SORT", "sb", "ALPHA", "DESC", "LIMIT", "1", "2"),
        ("SORT", "sb", "ALPHA", "STORE", "sorted"), ("LRANGE", "sorted", "0", "-1"),
        ("RPUSH", "sl", "b", "a"), ("HSET", "w_a", "f", V[6]), ("HSET", "w_b", "f", "small"),
        ("SORT", "sl", "ALPHA", "GET", "#", "GET", "w_*->f"),
        ("SORT", "sl", "BY", "w_*->f", "ALPHA", "GET", "w_*->f"),
        ("EXISTS", "h", "l", "d", "m", "hm", "q"), ("TYPE", "hm"), ("TYPE", "m"),
        ("DEL", "h", "m", "hm", "l", "d"), ("EXISTS", "h", "m", "hm"),
    ]


@pytest.mark.parametrize("proto", [2, 3])
def test_like_redis(peers, proto):
    run, _ = peers
    p = run(proto)
    try:
        run_script(p, script_with_big_values())
    finally:
        p.close()


def bulk(raw):
    v, end = parse(raw)
    assert end == len(raw) and isinstance(v, bytes), raw[:100]
    return v


def test_dump_payloads_cross_redis(peers):
    """What pkvs dumps of big elements redis-server restores, and the other
    way round: the same fields and elements on both."""
    run, _ = peers
    p = run(2)
    try:
        H = {b"f%d" % i: val(ENTRY + 1 + 70_000 * i, ("dh", i)) for i in range(3)}
        H[b"s"] = b"v"
        L = [val(ENTRY + 1 + 90_000 * i, ("dl", i)) for i in range(3)] + [b"small"]
        for conn in (p.pkvs, p.redis):
            assert conn.call("HSET", "h", *[x for kv in H.items() for x in kv]) == b":4\r\n"
            assert conn.call("RPUSH", "l", *L) == b":4\r\n"
        for key in ("h", "l"):
            from_pkvs, from_redis = bulk(p.pkvs.call("DUMP", key)), bulk(p.redis.call("DUMP", key))
            assert p.redis.call("RESTORE", key + "p", "0", from_pkvs) == b"+OK\r\n"
            assert p.pkvs.call("RESTORE", key + "r", "0", from_redis) == b"+OK\r\n"
        for conn, restored in ((p.pkvs, "r"), (p.redis, "p")):
            for key in ("h", "h" + restored):
                v, _ = parse(conn.call("HGETALL", key))
                assert dict(zip(v[1][::2], v[1][1::2])) == H, key
            for key in ("l", "l" + restored):
                v, _ = parse(conn.call("LRANGE", key, "0", "-1"))
                assert v[1] == L, key
    finally:
        p.close()


# ---------------------------------------------------------------------------
# HTTP and redis-cli
# ---------------------------------------------------------------------------

def test_http_json_and_redis_cli(pkvs, tmp_path):
    srv = pkvs.start(BIG_STORE + ["--checkpoint-ms", "200"], store_size="256M")
    r = client(srv, 2)
    base = settled_base(r)
    fields = {b"bin": val(MiB, "hb"), b"edge": val(ENTRY + 1, "he"),
              b"text": "é€ab".encode() * 40_000,            # UTF-8 across chunk boundaries
              b"small": b"s"}
    assert r.hset("web", mapping=fields) == len(fields)
    # redis-cli: -x takes the value from stdin; raw output when not a tty.
    cli = [tool("redis-cli"), "-p", str(srv.resp_port)]
    cv = val(300_000, "cli")
    src = tmp_path / "v.bin"
    src.write_bytes(cv)
    with open(src, "rb") as f:
        cp = subprocess.run(cli + ["-x", "HSET", "web", "cli"], stdin=f, capture_output=True,
                            timeout=60)
    assert cp.returncode == 0 and cp.stdout == b"1\n", cp
    fields[b"cli"] = cv
    with open(src, "rb") as f:
        cp = subprocess.run(cli + ["-x", "RPUSH", "cl", "first"], stdin=f, capture_output=True,
                            timeout=60)
    assert cp.returncode == 0 and cp.stdout == b"2\n", cp
    for args, want in [(["HGET", "web", "bin"], fields[b"bin"]), (["HGET", "web", "cli"], cv),
                       (["LINDEX", "cl", "1"], cv),
                       (["HSTRLEN", "web", "edge"], b"%d" % (ENTRY + 1))]:
        cp = subprocess.run(cli + args, capture_output=True, timeout=60)
        assert cp.returncode == 0 and cp.stdout == want + b"\n", (args, cp.stdout[:100])
    assert r.rpop("cl") == cv
    # curl: the hash as JSON, binary values as {"base64": ...}.
    out = tmp_path / "h.json"
    cp = subprocess.run([tool("curl"), "-sS", "-o", str(out), "-w", "%{http_code}",
                         f"http://127.0.0.1:{srv.port}/kv/web"], capture_output=True, text=True,
                        timeout=60)
    assert cp.stdout == "200", cp
    obj = json.loads(out.read_bytes())
    got = {k.encode(): base64.b64decode(v["base64"]) if isinstance(v, dict) else v.encode()
           for k, v in obj.items()}
    assert got == fields
    assert isinstance(obj["text"], str) and isinstance(obj["bin"], dict)
    # DELETE over HTTP: gone for RESP, its chunks given back.
    cp = subprocess.run([tool("curl"), "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X",
                         "DELETE", f"http://127.0.0.1:{srv.port}/kv/web"],
                        capture_output=True, text=True, timeout=60)
    assert cp.stdout == "204", cp
    assert r.exists("web") == 0 and r.delete("cl") == 1
    got = space_back(r, base)
    assert got <= base + SLACK, f"pkvs_held_bytes {got}, {base} before anything was written"
    r.close()


# ---------------------------------------------------------------------------
# A Redis replica
# ---------------------------------------------------------------------------

def test_redis_replica_gets_big_elements(pkvs):
    srv = pkvs.start(BIG_STORE, store_size="256M", http=False)
    p = client(srv, 2)
    H = {b"big": val(MiB, "rh"), b"edge": val(ENTRY + 1, "re"), b"s": b"small"}
    L = [val(300_000, "rl0"), b"x", val(ENTRY + 1, "rl2")]
    assert p.hset("h", mapping=H) == 3
    assert p.rpush("l", *L) == 3
    try:
        rs = RedisServer(["--replicaof", "127.0.0.1", str(srv.resp_port)], dir_base="/dev/shm",
                         tag="replica")
    except MissingBinary:
        pytest.skip("redis-server is not installed")
    rs.start()
    try:
        rr = redis.Redis(host="127.0.0.1", port=rs.resp_port, socket_timeout=60)
        assert wait_until(lambda: rr.info("replication").get("master_link_status") == "up", 30)
        # The full sync.
        assert rr.hgetall("h") == H
        assert rr.lrange("l", 0, -1) == L
        # The stream: new big elements, overwrites, moves, pops.
        H[b"new"] = val(200_000, "rn")
        H[b"s"] = val(ENTRY + 3, "rs")
        del H[b"edge"]
        assert p.hset("h", mapping={b"new": H[b"new"], b"s": H[b"s"]}) == 1
        assert p.hdel("h", "edge") == 1
        n1, n2 = val(MiB, "rl3"), val(ENTRY + 1, "rl4")
        assert p.rpush("l", n1) == 4 and p.lpush("l", n2) == 5
        L = [n2] + L + [n1]
        assert p.lset("l", 2, val(150_000, "rl5")) is True
        L[2] = val(150_000, "rl5")
        assert p.linsert("l", "AFTER", n1, b"tail") == 6
        L.append(b"tail")
        assert p.lpop("l") == L.pop(0)
        assert p.lmove("l", "l2", "LEFT", "RIGHT") == L[0]
        L2 = [L.pop(0)]
        assert p.copy("h", "hc") is True
        assert p.set("marker", "done") is True
        assert wait_until(lambda: rr.get("marker") == b"done", 30)
        assert rr.hgetall("h") == H
        assert rr.hgetall("hc") == H
        assert rr.lrange("l", 0, -1) == L
        assert rr.lrange("l2", 0, -1) == L2
        assert p.lrange("l", 0, -1) == L and p.hgetall("h") == H
    finally:
        rs.stop()
    p.close()
