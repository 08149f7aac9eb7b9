"""pkvs's string commands against Redis 7's own replies.

Every command runs on pkvs and on a Debian redis-server started by the
test (tests/e2e/redis_peer.py), in RESP2 and RESP3, and the replies are
compared byte for byte: SET with every option and its error rules, SETNX,
SETEX, PSETEX, GETSET, GETDEL, GETEX, MGET, MSET, MSETNX, APPEND,
SETRANGE, GETRANGE, SUBSTR, STRLEN, INCR/DECR[BY], INCRBYFLOAT, SETBIT,
GETBIT and LCS; arity errors and WRONGTYPE against a hash. Seeded random
sequences (numbers for INCRBYFLOAT, strings for LCS, bits and ranges) go
to both servers the same way. Then what only pkvs shows: values of tens
of KiB built by APPEND and SETRANGE and read back across a restart, the
old value of SET ... GET after its buffers were released, and MSET's
pairs all there or none after kill -9.
"""
import random

import pytest
import redis

from conftest import generations_acked_under_kill9
from redis_peer import peers, redis_peer  # noqa: F401 (fixtures)

PROTOS = [2, 3]




def same_all(p, cmds):
    for c in cmds:
        p.same(*c)


# Deterministic sequences: every reply the same bytes on both servers
# (deadlines are far enough that TTL's rounded seconds agree).
SET_CMDS = [
    ("SET", "a", "1"), ("GET", "a"), ("SET", "a", "2", "NX"), ("SET", "a", "2", "XX"),
    ("SET", "a", "3", "XX", "GET"), ("SET", "b", "3", "NX", "GET"), ("GET", "b"),
    ("SET", "b", "4", "NX", "GET"), ("SET", "nob", "4", "XX", "GET"), ("EXISTS", "nob"),
    ("SET", "a", "4", "NX", "XX"), ("SET", "a", "4", "XX", "NX"), ("SET", "a", "4", "EX"),
    ("SET", "a", "4", "EX", "0"), ("SET", "a", "4", "EX", "-1"), ("SET", "a", "4", "PX", "0"),
    ("SET", "a", "4", "EX", "10000000000000000"), ("SET", "a", "4", "EX", "-9999999999999999"),
    ("SET", "a", "4", "PX", "9223372036854775807"), ("SET", "a", "4", "EX", "abc"),
    ("SET", "a", "4", "EX", ""), ("SET", "a", "4", "PX", "100", "EX", "100"),
    ("SET", "a", "4", "EX", "100", "EXAT", "100"), ("SET", "a", "4", "EX", "100", "KEEPTTL"),
    ("SET", "a", "4", "KEEPTTL", "PXAT", "100"), ("SET", "a", "4", "FOO"),
    ("SET", "a", "4", "EX", "100", "EX", "200"), ("TTL", "a"), ("SET", "a", "5", "KEEPTTL"),
    ("TTL", "a"), ("GET", "a"), ("SET", "a", "6"), ("TTL", "a"),
    ("SET", "a", "7", "PX", "200000", "GET"), ("TTL", "a"), ("SET", "a", "8", "EXAT", "4102444800"),
    ("EXPIRETIME", "a"), ("SET", "a", "9", "PXAT", "4102444800123"), ("PEXPIRETIME", "a"),
    ("SET", "a", "10", "PXAT", "1"), ("GET", "a"), ("EXISTS", "a"), ("SET", "a", "11", "EXAT", "1", "GET"),
    ("GET", "a"), ("SET", "", "empty key"), ("GET", ""), ("SET", "ev", ""), ("GET", "ev"),
    ("STRLEN", "ev"), ("SET", "nx", "1", "nx", "get"), ("set", "nx", "2", "xx", "px", "99000"),
    ("pttl", "nope"),
]

KIN_CMDS = [
    ("SETNX", "n", "1"), ("SETNX", "n", "2"), ("GET", "n"), ("SETEX", "e", "100", "v"), ("TTL", "e"),
    ("SETEX", "e", "-1", "v"), ("SETEX", "e", "0", "v"), ("SETEX", "e", "x", "v"),
    ("SETEX", "e", "9223372036854776", "v"), ("PSETEX", "e", "0", "v"), ("PSETEX", "e", "1000000", "w"),
    ("GET", "e"), ("TTL", "e"), ("GETSET", "e", "g"), ("TTL", "e"), ("GETSET", "new", "g"),
    ("GETDEL", "n"), ("GETDEL", "n"), ("EXISTS", "n"), ("GETEX", "new"), ("GETEX", "new", "PERSIST"),
    ("GETEX", "new", "EX", "100"), ("TTL", "new"), ("GETEX", "new", "PX", "200000"), ("TTL", "new"),
    ("GETEX", "new", "EXAT", "4102444800"), ("EXPIRETIME", "new"),
    ("GETEX", "new", "PXAT", "4102444800999"), ("PEXPIRETIME", "new"), ("GETEX", "new", "PERSIST"),
    ("TTL", "new"), ("GETEX", "new", "EXAT", "1"), ("GETEX", "new"), ("EXISTS", "new"),
    ("GETEX", "missing", "EX", "-5"), ("SET", "g", "v"), ("GETEX", "g", "EX", "-5"),
    ("GETEX", "g", "EX", "10000000000000000"), ("GETEX", "g", "KEEPTTL"), ("GETEX", "g", "EX", "5", "PX", "5"),
    ("GETEX", "g", "PERSIST", "EX", "5"), ("GETEX", "g", "NX"), ("GETEX", "g", "GET"),
    ("GETEX", "g", "EX"), ("MSET", "x", "1", "y", "2"), ("MSET", "x", "1", "y"),
    ("MSET", "x", "1", "x", "3"), ("GET", "x"), ("MSETNX", "x", "1", "z", "2"), ("EXISTS", "z"),
    ("MSETNX", "z", "1", "w", "2"), ("MSETNX", "q", "1", "q", "2"), ("GET", "q"),
    ("MSETNX", "a", "1", "b"), ("MGET", "x", "y", "z", "w", "nope"), ("MGET", "nope"),
]

RANGE_CMDS = [
    ("APPEND", "x", "abc"), ("APPEND", "new", "hello"), ("GET", "x"), ("STRLEN", "x"),
    ("SETEX", "t", "100", "v"), ("APPEND", "t", "w"), ("TTL", "t"), ("GET", "t"),
    ("SETRANGE", "x", "1", "ZZ"), ("GET", "x"), ("SETRANGE", "x", "10", "Q"), ("GET", "x"),
    ("SETRANGE", "x", "-1", "Q"), ("SETRANGE", "x", "536870908", "world"),
    ("SETRANGE", "x", "9223372036854775807", "A"), ("SETRANGE", "x", "a", "A"),
    ("SETRANGE", "empty", "5", ""), ("EXISTS", "empty"), ("SETRANGE", "x", "2", ""),
    ("SETRANGE", "new2", "3", "abc"), ("GET", "new2"), ("SETRANGE", "t", "0", "X"), ("TTL", "t"),
    ("GETRANGE", "x", "0", "-1"), ("GETRANGE", "x", "-3", "-1"), ("GETRANGE", "x", "5", "2"),
    ("GETRANGE", "x", "-100", "100"), ("GETRANGE", "x", "-1", "-5"), ("GETRANGE", "x", "0", "0"),
    ("GETRANGE", "nope", "0", "-1"), ("GETRANGE", "x", "a", "2"), ("GETRANGE", "x", "0", "b"),
    ("SUBSTR", "x", "0", "2"), ("GETRANGE", "ev2", "0", "-1"), ("SET", "ev2", ""), ("GETRANGE", "ev2", "0", "-1"),
    ("STRLEN", "nope"),
]

NUM_CMDS = [
    ("INCR", "i"), ("INCRBY", "i", "10"), ("DECRBY", "i", "3"), ("DECR", "i"),
    ("DECRBY", "i", "-9223372036854775808"), ("INCRBY", "i", "9223372036854775807"),
    ("INCRBY", "i", "x"), ("INCRBY", "i", "1.5"), ("INCRBY", "i", " 1"), ("INCRBY", "i", "01"),
    ("SET", "big", "9223372036854775807"), ("INCR", "big"), ("DECRBY", "big", "-1"),
    ("SET", "small", "-9223372036854775808"), ("DECR", "small"), ("INCRBY", "small", "-1"),
    ("SET", "sp", " 11"), ("INCR", "sp"), ("SET", "sp", "11 "), ("INCR", "sp"), ("SET", "sp", "-0"),
    ("INCR", "sp"), ("SET", "sp", "+1"), ("INCR", "sp"), ("SET", "sp", "123456789012345678901"),
    ("INCR", "sp"), ("SETEX", "t", "100", "5"), ("INCR", "t"), ("TTL", "t"),
    ("INCRBYFLOAT", "f", "1.5"), ("INCRBYFLOAT", "f", "0.1"), ("INCRBYFLOAT", "f", "-1.6"),
    ("INCRBYFLOAT", "f", "1e300"), ("INCRBYFLOAT", "f", "abc"), ("INCRBYFLOAT", "f", "+inf"),
    ("INCRBYFLOAT", "f", "nan"), ("INCRBYFLOAT", "f", "3.0e3"), ("INCRBYFLOAT", "f", " 1"),
    ("INCRBYFLOAT", "f", "1 "), ("INCRBYFLOAT", "f", ""), ("INCRBYFLOAT", "i", "1.1"),
    ("INCRBYFLOAT", "i", "0x10"), ("INCRBYFLOAT", "g", "0.024390243902439025"),
    ("INCRBYFLOAT", "g", "-0.024390243902439025"), ("INCRBYFLOAT", "h", "5.0e3"),
    ("INCRBYFLOAT", "h", "1e-20"), ("INCRBYFLOAT", "t", "0.5"), ("TTL", "t"), ("GET", "t"),
    ("SET", "nul", "1\x002"), ("INCRBYFLOAT", "nul", "1"), ("INCR", "nul"),
]

BIT_LCS_CMDS = [
    ("SETBIT", "bm", "7", "1"), ("SETBIT", "bm", "7", "1"), ("SETBIT", "bm", "100", "1"), ("GET", "bm"),
    ("GETBIT", "bm", "100"), ("GETBIT", "bm", "101"), ("GETBIT", "bm", "100000"), ("GETBIT", "nope", "1"),
    ("SETBIT", "bm", "-1", "1"), ("SETBIT", "bm", "4294967296", "1"), ("SETBIT", "bm", "1", "2"),
    ("SETBIT", "bm", "1", "-1"), ("SETBIT", "bm", "x", "1"), ("SETBIT", "bm", "4294967295", "x"),
    ("GETBIT", "bm", "-1"), ("SETBIT", "bm", "7", "0"), ("GET", "bm"), ("SET", "n", "5"),
    ("SETBIT", "n", "6", "1"), ("GET", "n"),
    ("SET", "v1", "OHMYTEXTISSOLONGANDBORING"), ("SET", "v2", "TEXTOMGISSOLONGANDBORINGITIS"),
    ("LCS", "v1", "v2"), ("LCS", "v1", "v2", "LEN"), ("LCS", "v1", "v2", "IDX"),
    ("LCS", "v1", "v2", "IDX", "WITHMATCHLEN"), ("LCS", "v1", "v2", "IDX", "WITHMATCHLEN", "MINMATCHLEN", "5"),
    ("LCS", "v1", "v2", "IDX", "MINMATCHLEN", "-3"), ("LCS", "v1", "v2", "IDX", "LEN"),
    ("LCS", "v1", "nope"), ("LCS", "nope", "nope2", "IDX"), ("LCS", "v1", "v2", "FOO"),
    ("LCS", "v1", "v2", "MINMATCHLEN"), ("LCS", "v1", "v2", "MINMATCHLEN", "x"), ("LCS", "v1", "v2", "len"),
]


@pytest.mark.parametrize("proto", PROTOS)
@pytest.mark.parametrize("cmds", [SET_CMDS, KIN_CMDS, RANGE_CMDS, NUM_CMDS, BIT_LCS_CMDS],
                         ids=["set", "kin", "range", "numbers", "bits-lcs"])
def test_replies_match_redis(peers, proto, cmds):
    run, _ = peers
    same_all(run(proto), cmds)


STRING_COMMANDS = {
    # name: (too few arguments, one valid call on a hash key)
    "GET": (("GET",), ("GET", "h")), "SET": (("SET", "h"), ("SET", "h", "v", "GET")),
    "SETNX": (("SETNX", "h"), None), "SETEX": (("SETEX", "h", "1"), None),
    "PSETEX": (("PSETEX", "h", "1"), None), "GETSET": (("GETSET", "h"), ("GETSET", "h", "v")),
    "GETDEL": (("GETDEL",), ("GETDEL", "h")), "GETEX": (("GETEX",), ("GETEX", "h", "EX", "5")),
    "MGET": (("MGET",), ("MGET", "h", "nope")), "MSET": (("MSET", "a"), None),
    "MSETNX": (("MSETNX", "a"), ("MSETNX", "h", "v")), "APPEND": (("APPEND", "h"), ("APPEND", "h", "v")),
    "SETRANGE": (("SETRANGE", "h", "0"), ("SETRANGE", "h", "0", "v")),
    "GETRANGE": (("GETRANGE", "h", "0"), ("GETRANGE", "h", "0", "1")),
    "SUBSTR": (("SUBSTR", "h", "0"), ("SUBSTR", "h", "0", "1")), "STRLEN": (("STRLEN",), ("STRLEN", "h")),
    "INCR": (("INCR",), ("INCR", "h")), "DECR": (("DECR",), ("DECR", "h")),
    "INCRBY": (("INCRBY", "h"), ("INCRBY", "h", "2")), "DECRBY": (("DECRBY", "h"), ("DECRBY", "h", "2")),
    "INCRBYFLOAT": (("INCRBYFLOAT", "h"), ("INCRBYFLOAT", "h", "1.5")),
    "SETBIT": (("SETBIT", "h", "1"), ("SETBIT", "h", "1", "1")), "GETBIT": (("GETBIT", "h"), ("GETBIT", "h", "1")),
    "LCS": (("LCS", "h"), ("LCS", "h", "nope")),
}


@pytest.mark.parametrize("proto", PROTOS)
def test_arity_and_wrongtype_match_redis(peers, proto):
    run, _ = peers
    p = run(proto)
    p.same("HSET", "h", "f", "v")
    for name, (few, on_hash) in STRING_COMMANDS.items():
        got = p.same(*few)
        assert got.startswith(b"-ERR wrong number of arguments for '" + name.lower().encode()), got
        many = {"GET": ("GET", "a", "b"), "STRLEN": ("STRLEN", "a", "b"), "SETNX": ("SETNX", "a", "b", "c"),
                "GETSET": ("GETSET", "a", "b", "c"), "INCR": ("INCR", "a", "b")}.get(name)
        if many:
            p.same(*many)
        if on_hash:
            got = p.same(*on_hash)
            if name not in ("MGET", "MSETNX"):
                assert got.startswith((b"-WRONGTYPE", b"-ERR The specified keys")), (name, got)
    # Nothing above wrote over the hash.
    p.same("HGETALL", "h")
    p.same("TYPE", "h")


def test_random_numbers_ranges_bits_match_redis(peers):
    """Seeded random INCRBYFLOAT increments (Redis's long double formatting),
    APPEND/SETRANGE/GETRANGE/SETBIT/GETBIT at random offsets, and LCS of
    random strings, each reply compared."""
    run, _ = peers
    rnd = random.Random(26)
    for proto in PROTOS:
        p = run(proto)
        for i in range(300):
            kind = rnd.choice(["int", "dec", "exp", "small", "neg"])
            if kind == "int":
                v = str(rnd.randint(-10**12, 10**12))
            elif kind == "dec":
                v = f"{rnd.uniform(-1000, 1000):.{rnd.randint(0, 17)}f}"
            elif kind == "exp":
                v = f"{rnd.uniform(1, 10):.6f}e{rnd.randint(-30, 30)}"
            elif kind == "small":
                v = repr(1 / rnd.randint(1, 97))
            else:
                v = "-" + repr(rnd.random())
            p.same("INCRBYFLOAT", f"f{i % 7}", v)
        for i in range(400):
            op = rnd.choice(["append", "setrange", "getrange", "setbit", "getbit", "strlen"])
            k = f"s{rnd.randint(0, 3)}"
            data = "".join(rnd.choice("ab\x00\xffz") for _ in range(rnd.randint(0, 9)))
            if op == "append":
                p.same("APPEND", k, data)
            elif op == "setrange":
                p.same("SETRANGE", k, rnd.randint(0, 60), data)
            elif op == "getrange":
                p.same("GETRANGE", k, rnd.randint(-70, 70), rnd.randint(-70, 70))
            elif op == "setbit":
                p.same("SETBIT", k, rnd.randint(0, 600), rnd.randint(0, 1))
            elif op == "getbit":
                p.same("GETBIT", k, rnd.randint(0, 700))
            else:
                p.same("STRLEN", k)
        for k in ("s0", "s1", "s2", "s3"):
            p.same("GET", k)
        for i in range(40):
            a = "".join(rnd.choice("ACGT") for _ in range(rnd.randint(0, 40)))
            b = "".join(rnd.choice("ACGT") for _ in range(rnd.randint(0, 40)))
            p.same("MSET", "la", a, "lb", b)
            p.same("LCS", "la", "lb")
            p.same("LCS", "la", "lb", "IDX", "MINMATCHLEN", rnd.randint(0, 4), "WITHMATCHLEN")


def client(srv, protocol=3):
    return redis.Redis(host="127.0.0.1", port=srv.resp_port, protocol=protocol, socket_timeout=20)


def test_large_values_append_setrange_and_restart(pkvs):
    """Values grown by APPEND (long arguments join the value's extents
    where they landed; one past what an entry holds goes to chunks),
    patched by SETRANGE and SETBIT, read whole and in ranges, and the same
    after a restart."""
    srv = pkvs.start()
    r = client(srv)
    rnd = random.Random(7)
    want = {}
    for k in ("big0", "big1"):
        value = b""
        for i in range(30):
            chunk = rnd.randbytes(rnd.choice([40, 700, 3000, 20000 if k == "big0" else 40]))
            value += chunk
            assert r.append(k, chunk) == len(value)
        want[k] = value
    off = len(want["big0"]) // 2
    patch = b"P" * 1500
    assert r.setrange("big0", off, patch) == len(want["big0"])
    want["big0"] = want["big0"][:off] + patch + want["big0"][off + len(patch):]
    old = r.setbit("big1", 8 * 5000 + 3, 1)
    b = bytearray(want["big1"])
    assert old == (b[5000] >> 4) & 1
    b[5000] |= 0x10
    want["big1"] = bytes(b)
    r.set("big2", want["big0"][:50000])
    want["big2"] = want["big0"][:50000]
    assert r.set("big2", "short", get=True) == want["big2"]
    want["big2"] = b"short"
    for attempt in ("before", "after"):
        if attempt == "after":
            srv.restart()
            r = client(srv)
        for k, v in want.items():
            assert r.get(k) == v, (attempt, k)
            assert r.strlen(k) == len(v)
            assert r.getrange(k, 1000, 1999) == v[1000:2000]
    # Past pkvs's largest value: Redis's words for its own limit first.
    with pytest.raises(redis.ResponseError, match="maximum allowed size"):
        r.setrange("big0", 536870911, "xx")
    assert r.strlen("big0") == len(want["big0"])


def test_old_value_of_set_get_and_getdel_survive_their_release(pkvs):
    """SET ... GET, GETSET and GETDEL send the old value after the write that
    releases its buffers; pipelined with writes that reuse the space, every
    old value arrives whole."""
    srv = pkvs.start(store_size="32M")
    r = client(srv, 2)
    rnd = random.Random(3)
    cur = {}
    for rounds in range(20):
        pipe = r.pipeline(transaction=False)
        expect = []
        for i in range(40):
            k = f"k{rnd.randint(0, 9)}"
            v = bytes([rnd.randint(65, 90)]) * rnd.choice([10, 600, 5000])
            op = rnd.choice(["setget", "getset", "getdel"])
            if op == "setget":
                pipe.set(k, v, get=True)
                expect.append(cur.get(k))
                cur[k] = v
            elif op == "getset":
                pipe.getset(k, v)
                expect.append(cur.get(k))
                cur[k] = v
            else:
                pipe.getdel(k)
                expect.append(cur.pop(k, None))
        assert pipe.execute() == expect, rounds


def test_mset_msetnx_all_or_nothing(pkvs):
    srv = pkvs.start()
    r = client(srv)
    assert r.msetnx({"a": 1, "b": 2}) is True
    assert r.msetnx({"c": 3, "a": 9}) is False
    assert r.mget("a", "b", "c") == [b"1", b"2", None]
    r.set("t", "x", ex=100)
    assert r.mset({"t": "y", "u": "z"}) is True
    assert r.ttl("t") == -1          # MSET, as SET, drops the deadline


@pytest.mark.crash
@pytest.mark.slow
def test_mset_pairs_after_kill9(pkvs):
    """MSETs of 16 keys, each with one generation number, from 4 clients;
    kill -9 under that load: after the restart every client's 16 keys hold
    one generation, at least its last acknowledged one."""
    srv = pkvs.start(["--checkpoint-records", "300"])

    def mset(c, g):
        args = ["MSET"]
        for i in range(16):
            args += [f"c{c}:k{i}", f"{g}:" + "v" * (700 if i % 3 == 0 else 20)]
        return args
    acked = generations_acked_under_kill9(srv, 4, mset, lambda reply: reply == "OK")
    assert all(acked.get(c, 0) > 10 for c in range(4)), acked
    srv.start()
    r = client(srv)
    for c in range(4):
        vals = r.mget([f"c{c}:k{i}" for i in range(16)])
        gens = {v.split(b":")[0] for v in vals}
        assert len(gens) == 1, (c, gens)
        assert int(gens.pop()) >= acked[c], (c, acked[c])
