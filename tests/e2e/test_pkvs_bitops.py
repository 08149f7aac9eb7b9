"""pkvs's bitmap commands against Redis 7's own replies.

BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO (with SETBIT, GETBIT,
SETRANGE and APPEND building the strings) run on pkvs and on a Debian
redis-server started by the test (tests/e2e/redis_peer.py), in RESP2 and
RESP3, and the replies are compared byte for byte: every option, the
errors and the order Redis checks them in (a missing key answers before
its arguments are read; an empty negative range before the unit), arity
and WRONGTYPE; then seeded random sequences over short strings. What
only pkvs shows: strings of megabytes in chunks counted, searched and
combined across the chunks' edges and across a restart, against Python's
own arithmetic; and a BITFIELD of many writes all there or none after
kill -9.
"""
import random

import pytest
import redis

from conftest import generations_acked_under_kill9
from redis_peer import peers, redis_peer, run_script  # noqa: F401 (fixtures)

PROTOS = [2, 3]

COUNT_POS = [
    ("SET", "s", "foobar"), ("BITCOUNT", "s"), ("BITCOUNT", "s", "0", "0"), ("BITCOUNT", "s", "1", "1"),
    ("BITCOUNT", "s", "1", "1", "BYTE"), ("BITCOUNT", "s", "5", "30", "BIT"), ("BITCOUNT", "s", "-3", "-1", "bit"),
    ("BITCOUNT", "s", "0", "-1"), ("BITCOUNT", "s", "-100", "100"), ("BITCOUNT", "s", "4", "10"),
    ("BITCOUNT", "s", "-6", "-7"), ("BITCOUNT", "s", "-6", "-7", "NOPE"), ("BITCOUNT", "s", "0"),
    ("BITCOUNT", "s", "0", "1", "BIT", "x"), ("BITCOUNT", "s", "0", "1", "WORD"), ("BITCOUNT", "s", "a", "1"),
    ("BITCOUNT", "s", "0", "b"), ("BITCOUNT", "s", "0", "4294967296"), ("BITCOUNT", "s", "1", "0"),
    ("BITCOUNT", "nokey"), ("BITCOUNT", "nokey", "0"), ("BITCOUNT", "nokey", "x", "y", "z"),
    ("SET", "e", ""), ("BITCOUNT", "e"), ("BITCOUNT", "e", "0", "-1", "BIT"),
    ("SET", "z", "\x00\x00\x00"), ("SET", "o", "\xff\xff\xff"), ("SET", "m", "\x00\xff\xf0"),
    ("BITPOS", "z", "1"), ("BITPOS", "z", "0"), ("BITPOS", "o", "0"), ("BITPOS", "o", "1"),
    ("BITPOS", "o", "0", "0"), ("BITPOS", "o", "0", "0", "-1"), ("BITPOS", "o", "0", "1", "1", "BYTE"),
    ("BITPOS", "m", "1"), ("BITPOS", "m", "0"), ("BITPOS", "m", "1", "2"), ("BITPOS", "m", "0", "1"),
    ("BITPOS", "m", "0", "1", "-1"), ("BITPOS", "m", "1", "7", "15", "BIT"), ("BITPOS", "m", "0", "8", "19", "BIT"),
    ("BITPOS", "m", "0", "8", "23", "BIT"), ("BITPOS", "m", "0", "8", "-1", "BIT"), ("BITPOS", "m", "1", "-5", "-1", "BIT"),
    ("BITPOS", "m", "1", "3", "2"), ("BITPOS", "m", "0", "-1", "-2"), ("BITPOS", "m", "1", "9", "BIT"),
    ("BITPOS", "m", "0", "9"), ("BITPOS", "m", "0", "9", "BIT"), ("BITPOS", "m", "0", "16", "BIT"),
    ("BITPOS", "m", "2"), ("BITPOS", "m", "-1"), ("BITPOS", "m", "x"), ("BITPOS", "m", "1", "x"),
    ("BITPOS", "m", "1", "0", "y"), ("BITPOS", "m", "1", "0", "1", "WORD"), ("BITPOS", "m", "1", "0", "1", "BIT", "x"),
    ("BITPOS", "m", "1", "x", "1", "WORD"), ("BITPOS", "m", "1", "0", "y", "WORD"),
    ("BITPOS", "nokey", "1"), ("BITPOS", "nokey", "0"), ("BITPOS", "nokey", "0", "x", "y", "z", "w"),
    ("BITPOS", "nokey", "2"), ("BITPOS", "e", "0"), ("BITPOS", "e", "1"), ("BITPOS", "e", "0", "0", "-1", "BIT"),
]

BITOP = [
    ("SET", "a", "\x0f\xf0abc"), ("SET", "b", "\xaa"), ("SET", "c", "hello world"),
    ("BITOP", "AND", "d", "a", "b"), ("GET", "d"), ("BITOP", "or", "d", "a", "b", "c"), ("GET", "d"),
    ("BITOP", "XOR", "d", "a", "b", "c", "a"), ("GET", "d"), ("BITOP", "NOT", "d", "a"), ("GET", "d"),
    ("BITOP", "NOT", "a", "a"), ("GET", "a"), ("BITOP", "NOT", "d", "a", "b"), ("BITOP", "NAND", "d", "a"),
    ("BITOP", "AND", "d", "nope", "a"), ("GET", "d"), ("BITOP", "AND", "d", "nope1", "nope2"), ("EXISTS", "d"),
    ("BITOP", "OR", "d", "nope1"), ("SET", "d", "x", "EX", "100"), ("BITOP", "OR", "d", "b"), ("TTL", "d"),
    ("SET", "e", ""), ("BITOP", "OR", "d", "e", "b"), ("GET", "d"), ("BITOP", "OR", "d", "e"), ("EXISTS", "d"),
    ("HSET", "h", "f", "v"), ("BITOP", "OR", "d", "a", "h"), ("BITOP", "OR", "h", "a"), ("TYPE", "h"), ("GET", "h"),
    ("SET", "n", "123"), ("BITOP", "XOR", "d", "n", "n", "a"), ("GET", "d"),
]

BITFIELD = [
    ("BITFIELD", "bf"), ("EXISTS", "bf"), ("BITFIELD", "bf", "GET", "u8", "0"), ("EXISTS", "bf"),
    ("BITFIELD", "bf", "SET", "i8", "0", "-100", "GET", "i8", "0", "GET", "u8", "0"), ("GET", "bf"),
    ("BITFIELD", "bf", "SET", "u8", "0", "255", "GET", "u8", "0", "SET", "i8", "0", "255", "GET", "i8", "0"),
    ("BITFIELD", "bf", "SET", "u8", "#1", "65", "GET", "u8", "#1", "get", "U8", "8"),
    ("BITFIELD", "bf", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2", "102", "1"),
    ("BITFIELD", "bf", "OVERFLOW", "WRAP", "INCRBY", "u8", "#0", "200", "INCRBY", "u8", "#0", "200"),
    ("BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "u8", "#0", "200", "INCRBY", "i8", "#0", "-300"),
    ("BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u8", "#0", "300", "INCRBY", "i8", "8", "-1", "SET", "i4", "0", "8"),
    ("BITFIELD", "bf", "OVERFLOW", "sat", "SET", "u8", "0", "-5", "GET", "u8", "0", "SET", "i8", "0", "-200", "GET", "i8", "0"),
    ("BITFIELD", "bf", "OVERFLOW", "wrap", "SET", "u8", "0", "-5", "GET", "u8", "0", "SET", "i8", "0", "-200", "GET", "i8", "0"),
    ("BITFIELD", "bf", "SET", "i64", "0", "-9223372036854775808", "INCRBY", "i64", "0", "-1", "GET", "i64", "0"),
    ("BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i64", "0", "-9", "INCRBY", "i64", "0", "9223372036854775807"),
    ("BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "i64", "0", "1", "INCRBY", "i64", "0", "-2"),
    ("BITFIELD", "bf", "SET", "u63", "3", "9223372036854775807", "INCRBY", "u63", "3", "1", "GET", "u63", "3"),
    ("BITFIELD", "bf", "SET", "i1", "5", "-1", "GET", "i1", "5", "GET", "u1", "5", "INCRBY", "i1", "5", "1"),
    ("BITFIELD", "bf", "GET", "u8", "1000"), ("STRLEN", "bf"), ("GET", "bf"),
    ("BITFIELD", "grow", "OVERFLOW", "FAIL", "INCRBY", "u8", "40", "300"), ("GET", "grow"),
    ("BITFIELD", "bf", "GET", "u64", "0"), ("BITFIELD", "bf", "GET", "i65", "0"), ("BITFIELD", "bf", "GET", "i0", "0"),
    ("BITFIELD", "bf", "GET", "x8", "0"), ("BITFIELD", "bf", "GET", "", "0"), ("BITFIELD", "bf", "GET", "u08", "0"),
    ("BITFIELD", "bf", "GET", "u8", "-1"), ("BITFIELD", "bf", "GET", "u8", "#-1"), ("BITFIELD", "bf", "GET", "u8", "#"),
    ("BITFIELD", "bf", "GET", "u8", "4294967296"), ("BITFIELD", "bf", "GET", "u8", "x"),
    ("BITFIELD", "bf", "GET", "u8", "#536870912"), ("BITFIELD", "bf", "GET", "u8", "#1152921504606846976"),
    ("BITFIELD", "bf", "SET", "u8", "0"), ("BITFIELD", "bf", "SET", "u8", "0", "x"), ("BITFIELD", "bf", "GET", "u8"),
    ("BITFIELD", "bf", "FOO", "u8", "0"), ("BITFIELD", "bf", "OVERFLOW", "MAYBE", "GET", "u8", "0"),
    ("BITFIELD", "bf", "OVERFLOW"), ("BITFIELD", "bf", "GET", "u8", "0", "OVERFLOW", "SAT"),
    ("BITFIELD", "bf", "INCRBY", "u8", "0", "1", "FOO"), ("GET", "bf"),
    ("BITFIELD_RO", "bf", "GET", "u8", "0", "GET", "i4", "#3"), ("BITFIELD_RO", "bf", "SET", "u8", "0", "1"),
    ("BITFIELD_RO", "bf", "INCRBY", "u8", "0", "1"), ("BITFIELD_RO", "bf", "OVERFLOW", "SAT", "GET", "u8", "0"),
    ("BITFIELD_RO", "nokey", "GET", "u8", "0"), ("BITFIELD_RO", "bf"),
    ("HSET", "h", "f", "v"), ("BITFIELD", "h", "GET", "u8", "0"), ("BITFIELD", "h", "SET", "u8", "0", "1"),
    ("BITFIELD_RO", "h", "GET", "u8", "0"), ("BITFIELD", "h", "SET", "u99", "0", "1"),
    ("BITCOUNT", "h"), ("BITPOS", "h", "1"), ("BITPOS", "h", "3"),
    ("BITCOUNT",), ("BITPOS", "h"), ("BITOP", "AND", "d"), ("BITFIELD",), ("BITFIELD_RO",),
]


@pytest.mark.parametrize("proto", PROTOS)
@pytest.mark.parametrize("cmds", [COUNT_POS, BITOP, BITFIELD], ids=["count-pos", "bitop", "bitfield"])
def test_replies_match_redis(peers, proto, cmds):
    run, _ = peers
    run_script(run(proto), cmds)


def test_random_bit_commands_match_redis(peers):
    """Seeded random SETBIT/SETRANGE/APPEND building short strings, and
    BITCOUNT, BITPOS, BITOP (a destination that is a source too, missing
    sources) and BITFIELD (every width, offsets near the ends, the three
    overflow policies) on them: every reply the same bytes."""
    run, _ = peers
    rnd = random.Random(1234)
    keys = [f"k{i}" for i in range(5)]

    def rng():
        return str(rnd.randint(-40, 40))

    for proto in PROTOS:
        p = run(proto)
        for _ in range(1500):
            op = rnd.choice(["setbit", "setrange", "append", "count", "pos", "bitop", "field", "field", "ro"])
            k = rnd.choice(keys)
            if op == "setbit":
                p.same("SETBIT", k, rnd.randint(0, 300), rnd.randint(0, 1))
            elif op == "setrange":
                data = bytes(rnd.choice([0, 255, rnd.randrange(256)]) for _ in range(rnd.randint(0, 12)))
                p.same("SETRANGE", k, rnd.randint(0, 30), data)
            elif op == "append":
                p.same("APPEND", k, bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 5))))
            elif op == "count":
                args = rnd.choice([[], [rng(), rng()], [rng(), rng(), rnd.choice(["BIT", "BYTE"])]])
                p.same("BITCOUNT", k, *args)
            elif op == "pos":
                args = rnd.choice([[], [rng()], [rng(), rng()], [rng(), rng(), rnd.choice(["BIT", "BYTE"])]])
                p.same("BITPOS", k, rnd.randint(0, 1), *args)
            elif op == "bitop":
                name = rnd.choice(["AND", "OR", "XOR", "NOT"])
                n = 1 if name == "NOT" else rnd.randint(1, 4)
                src = [rnd.choice(keys + ["missing"]) for _ in range(n)]
                p.same("BITOP", name, rnd.choice(keys), *src)
            else:
                args = []
                for _ in range(rnd.randint(1, 4)):
                    if rnd.random() < 0.3:
                        args += ["OVERFLOW", rnd.choice(["WRAP", "SAT", "FAIL"])]
                    sign = rnd.choice("iu")
                    width = rnd.randint(1, 64 if sign == "i" else 63)
                    off = rnd.choice([str(rnd.randint(0, 200)), f"#{rnd.randint(0, 6)}"])
                    sub = "GET" if op == "ro" else rnd.choice(["GET", "SET", "INCRBY"])
                    args += [sub, f"{sign}{width}", off]
                    if sub != "GET":
                        lim = 1 << (width - 1 if sign == "i" else width)
                        args.append(str(rnd.choice([rnd.randint(-lim, lim), rnd.randint(-2**63, 2**63 - 1), 0, 1, -1])))
                p.same("BITFIELD_RO" if op == "ro" else "BITFIELD", k, *args)
        for k in keys:
            p.same("GET", k)


def popcount(b):
    return sum(bin(x).count("1") for x in b)


def count_bits(buf, s, e):
    """The set bits s..e (inclusive, from the first byte's top bit)."""
    chunk = int.from_bytes(buf[s // 8:e // 8 + 1], "big")
    width = (e // 8 + 1 - s // 8) * 8
    return bin((chunk >> (width - 1 - (e - s // 8 * 8))) & ((1 << (e - s + 1)) - 1)).count("1")


def first_bit(buf, bit, start=0):
    for i in range(start, len(buf)):
        v = buf[i] if bit else buf[i] ^ 0xff
        if v:
            return i * 8 + 8 - v.bit_length()
    return -1


def client(srv):
    return redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=60)


def test_big_strings_in_chunks_and_restart(pkvs):
    """Strings of 3 MiB (kept in chunks, read in 64 KiB pieces) with bits
    set near the pieces' and chunks' edges: BITCOUNT over byte and bit
    ranges, BITPOS from offsets, BITOP into a third key and into one of
    its sources, BITFIELD writes far in, each against Python's arithmetic,
    before and after a restart."""
    srv = pkvs.start(["--store-size", "256M"])
    r = client(srv)
    size = 3 << 20
    rnd = random.Random(7)
    a = bytearray(size)
    b = bytearray(b"\xff" * (size - 1000))
    for pos in [0, 65535, 65536, 131071, 1 << 20, (1 << 20) + 1, size - 1] + [rnd.randrange(size) for _ in range(300)]:
        a[pos] = rnd.randrange(1, 256)
    for pos in [70000, 2 << 20, len(b) - 1] + [rnd.randrange(len(b)) for _ in range(300)]:
        b[pos] = 0xfe
    r.set("a", bytes(a))
    r.set("b", bytes(b))
    r.set("o", b"\xff" * len(b))
    assert r.bitop("XOR", "x", "a", "b") == size
    x = bytearray(u ^ v for u, v in zip(a, b + bytes(size - len(b))))
    old16 = int.from_bytes(x[2000000:2000002], "big")
    old8 = int.from_bytes(x[3000000:3000001], "big", signed=True)
    assert r.bitfield("x").set("u16", 8 * 2000000, 4242).incrby("i8", "#3000000", -5).execute() == [
        old16, (old8 - 5 + 128) % 256 - 128]
    x[2000000:2000002] = (4242).to_bytes(2, "big")
    x[3000000] = (old8 - 5) % 256

    for rnd_ in range(2):
        assert r.get("x") == bytes(x)
        assert r.bitcount("a") == popcount(a)
        assert r.bitcount("b") == popcount(b)
        for s, e in [(0, -1), (65530, 65540), (100000, 2000000), (-70000, -1)]:
            assert r.bitcount("a", s, e) == popcount(a[s:] if e == -1 else a[s:e + 1]), (s, e)
        for s, e in [(65536 * 8 - 3, 65536 * 8 + 5), (8 * (1 << 20) + 1, 8 * (1 << 20) + 30), (5, 8 * 200000 + 3)]:
            assert r.bitcount("a", s, e, "BIT") == count_bits(a, s, e), (s, e)
        assert r.bitpos("a", 1) == first_bit(a, 1)
        assert r.bitpos("a", 1, 200000) == first_bit(a, 1, 200000)
        assert r.bitpos("a", 0, 65535) == first_bit(a, 0, 65535)
        assert r.bitpos("b", 0) == first_bit(b, 0)
        assert r.bitpos("b", 0, 80000) == first_bit(b, 0, 80000)
        assert r.bitpos("o", 0) == len(b) * 8
        assert r.bitpos("o", 0, 0, -1) == -1
        assert r.bitpos("o", 1, -1) == (len(b) - 1) * 8
        if rnd_ == 0:
            assert r.bitop("AND", "y", "a", "b") == size
            assert r.get("y") == bytes(u & v for u, v in zip(a, b + bytes(size - len(b))))
            assert r.bitop("NOT", "a", "a") == size          # the destination is its source
            a = bytearray(u ^ 0xff for u in a)
            srv.restart()
            r = client(srv)


@pytest.mark.parametrize("spacing", [27000, 800000], ids=["one-piece", "spread"])
def test_bitfield_writes_all_or_none_after_kill9(pkvs, spacing):
    """BITFIELDs that set 12 integers to one generation number, from 3
    clients, the integers spread over 40 KiB (one piece: written back as
    one change) or 1.2 MiB (a string in chunks: one change per integer,
    in one group); kill -9 under that load: after the restart each
    client's 12 integers hold one generation, at least its last
    acknowledged one."""
    srv = pkvs.start(["--checkpoint-records", "300"])

    def bitfield(c, g):
        args = ["BITFIELD", f"c{c}"]
        for i in range(12):
            args += ["SET", "u32", str(i * spacing + 5), str(g)]
        return args
    acked = generations_acked_under_kill9(srv, 3, bitfield, lambda reply: isinstance(reply, list))
    assert all(acked.get(c, 0) > 10 for c in range(3)), acked
    srv.start()
    r = client(srv)
    for c in range(3):
        bf = r.bitfield(f"c{c}")
        for i in range(12):
            bf.get("u32", i * spacing + 5)
        gens = set(bf.execute())
        assert len(gens) == 1, (c, gens)
        assert gens.pop() >= acked[c], (c, acked[c])
