"""pkvs's HyperLogLog commands against Redis 7's own replies.

PFADD, PFCOUNT (one key and the union of several), PFMERGE, PFDEBUG and
PFSELFTEST run on pkvs and on a Debian redis-server started by the test
(tests/e2e/redis_peer.py), in RESP2 and RESP3, and the replies are
compared byte for byte, the values themselves too (GET): Redis's sparse
and dense bytes, the cached count in the header, the deadline a PFADD
keeps, the errors (a string that is not an HLL, a damaged one, PFDEBUG's
words, arity); then seeded random PFADD / PFMERGE / PFCOUNT sequences
across the sparse-to-dense change at two hll-sparse-max-bytes settings.
What only pkvs shows: every element whose PFADD was acknowledged is
counted after kill -9 (adding it again changes no register); and a pkvs
primary's replicas (pkvs and redis-server) hold the same bytes, the
counts PFCOUNT stores included.
"""
import random

import pytest
import redis

from conftest import PkvsFactory, generations_acked_under_kill9, wait_until
from paste_proc import MissingBinary, RedisServer
from redis_peer import peers, redis_peer, run_script  # noqa: F401 (fixtures)

PROTOS = [2, 3]

BASICS = [
    ("PFADD", "hll"), ("EXISTS", "hll"), ("GET", "hll"), ("PFCOUNT", "hll"), ("GETRANGE", "hll", "15", "15"),
    ("PFADD", "hll", "a", "b", "c"), ("PFADD", "hll", "a", "b", "c"), ("PFADD", "hll", ""),
    ("GETRANGE", "hll", "15", "15"), ("PFCOUNT", "hll"), ("GETRANGE", "hll", "15", "15"), ("GET", "hll"),
    ("PFADD", "hll", "a"), ("GETRANGE", "hll", "15", "15"), ("PFADD", "hll", "d"), ("GETRANGE", "hll", "15", "15"),
    ("PFDEBUG", "ENCODING", "hll"), ("PFDEBUG", "DECODE", "hll"), ("PFDEBUG", "decode", "nokey"),
    ("PFCOUNT", "nokey"), ("PFCOUNT", "nokey", "hll"), ("PFCOUNT", "hll", "nokey", "hll"),
    ("PFADD", "h2", "c", "d", "e"), ("PFMERGE", "m", "hll", "h2"), ("GET", "m"), ("PFCOUNT", "m"),
    ("PFMERGE", "m"), ("PFMERGE", "new"), ("GET", "new"), ("PFMERGE", "h2", "hll"), ("GET", "h2"),
    ("PFDEBUG", "TODENSE", "h2"), ("PFDEBUG", "TODENSE", "h2"), ("PFDEBUG", "ENCODING", "h2"),
    ("PFDEBUG", "DECODE", "h2"), ("STRLEN", "h2"), ("PFCOUNT", "h2"), ("PFADD", "h2", "zz"), ("GET", "h2"),
    ("PFMERGE", "m", "h2"), ("PFDEBUG", "ENCODING", "m"), ("GET", "m"), ("PFCOUNT", "hll", "h2", "m"),
    ("PFDEBUG", "FOO", "hll"), ("PFDEBUG", "GETREG", "hll", "x"), ("PFDEBUG", "ENCODING", "hll", "x"),
    ("PFDEBUG", "FOO", "nokey"), ("PFDEBUG", "ENCODING"), ("PFADD",), ("PFCOUNT",), ("PFMERGE",),
    ("PFSELFTEST", "x"),
    # Deadlines: a PFADD or PFMERGE keeps one, as Redis changes the value in place.
    ("PFADD", "t", "x"), ("EXPIRE", "t", "1000"), ("PFADD", "t", "y"), ("TTL", "t"), ("PFMERGE", "t", "hll"),
    ("TTL", "t"), ("PFCOUNT", "t"), ("TTL", "t"),
]

ERRORS = [
    ("SET", "foo", "bar"), ("PFADD", "foo", "1"), ("PFCOUNT", "foo"), ("PFMERGE", "bar", "foo"),
    ("PFMERGE", "foo", "bar"), ("EXISTS", "bar"), ("PFCOUNT", "nokey", "foo"), ("PFDEBUG", "ENCODING", "foo"),
    ("HSET", "h", "f", "v"), ("PFADD", "h", "1"), ("PFCOUNT", "h"), ("PFCOUNT", "h", "foo"), ("PFMERGE", "h"),
    ("SET", "n", "123456789012345678"), ("PFCOUNT", "n"),
    # Damaged: a tail added, the magic broken, an unknown encoding, a dense length wrong.
    ("PFADD", "d1", "a", "b", "c"), ("APPEND", "d1", "hello"), ("PFCOUNT", "d1"), ("PFADD", "d1", "x"),
    ("PFCOUNT", "d1", "d1"), ("PFMERGE", "m", "d1"), ("EXISTS", "m"), ("PFDEBUG", "TODENSE", "d1"),
    ("PFDEBUG", "DECODE", "d1"),
    ("PFADD", "d2", "a", "b", "c"), ("SETRANGE", "d2", "0", "0123"), ("PFCOUNT", "d2"),
    ("PFADD", "d3", "a", "b", "c"), ("SETRANGE", "d3", "4", "x"), ("PFCOUNT", "d3"),
    ("PFADD", "d4", "a", "b", "c"), ("SETRANGE", "d4", "4", "\x00"), ("PFCOUNT", "d4"),
    ("PFADD", "d5", "a", "b", "c"), ("PFDEBUG", "TODENSE", "d5"), ("APPEND", "d5", "x"), ("PFCOUNT", "d5"),
    ("SET", "d6", "HYLL"), ("PFCOUNT", "d6"), ("SET", "d7", "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
    ("PFCOUNT", "d7"), ("PFADD", "d7", "a"), ("SET", "d8", "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f"),
    ("PFCOUNT", "d8"),
]


@pytest.mark.parametrize("proto", PROTOS)
@pytest.mark.parametrize("cmds", [BASICS, ERRORS], ids=["basics", "errors"])
def test_replies_match_redis(peers, proto, cmds):
    run, _ = peers
    run_script(run(proto), cmds)


SPARSE_HEAD = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80"


def test_damaged_values_refused(peers):
    """Sparse values whose runs pass the last register are refused by
    every command, as Redis refuses them. One whose last XZERO is cut in
    half Redis takes (it reads its string's terminating zero as the
    missing byte: it counts, merges, converts and adds to it): pkvs
    refuses it in every command and changes nothing."""
    run, _ = peers
    p = run(2)
    tail = SPARSE_HEAD + b"\x7f\xff\x80"                 # XZERO of all 16384, then a VAL
    p.same("SET", "tail", tail)
    for cmd in (("PFCOUNT", "tail"), ("PFCOUNT", "tail", "nokey"), ("PFMERGE", "m", "tail"),
                ("PFDEBUG", "TODENSE", "tail"), ("PFDEBUG", "GETREG", "tail"), ("GET", "tail")):
        p.same(*cmd)
    cut = SPARSE_HEAD + b"\xcf" * 63 + b"\xce\x7f"         # 255 registers, then half an XZERO
    for key, cmd in (("c1", ("PFCOUNT", "c1")), ("c2", ("PFCOUNT", "c2", "nokey")),
                     ("c3", ("PFMERGE", "m3", "c3")), ("c4", ("PFDEBUG", "TODENSE", "c4")),
                     ("c5", ("PFADD", "c5", "z"))):      # "z" falls past the first 255 registers
        p.same("SET", key, cut)
        pk, rd = p.both(*cmd)
        assert pk == b"-INVALIDOBJ Corrupted HLL object detected\r\n", (cmd, pk)
        assert rd.startswith((b":", b"+OK")), (cmd, rd)
        assert p.pkvs.call("GET", key) == b"$%d\r\n%s\r\n" % (len(cut), cut)


def test_getreg_and_selftest(peers):
    """PFDEBUG GETREG's 16384 registers (the value left dense, as Redis
    leaves it) and PFSELFTEST's OK."""
    run, _ = peers
    p = run(2)
    p.same("PFADD", "g", *[f"e{i}" for i in range(300)])
    p.same("PFDEBUG", "GETREG", "g")
    p.same("GET", "g")
    p.same("PFDEBUG", "ENCODING", "g")
    assert p.same("PFSELFTEST") == b"+OK\r\n"


@pytest.mark.parametrize("sparse_max", ["3000", "200"])
def test_random_sequences_match_redis(peers, sparse_max):
    """Seeded random PFADDs (0-40 elements, some repeated) to five keys,
    PFMERGEs of them, single and multi-key PFCOUNTs and the values' bytes,
    from empty through sparse to dense: every reply the same bytes."""
    run, _ = peers
    p = run(2)
    p.same("CONFIG", "SET", "hll-sparse-max-bytes", sparse_max)
    rnd = random.Random(int(sparse_max))
    keys = [f"h{i}" for i in range(5)]
    pool = [str(rnd.random()) for _ in range(300)]
    for step in range(1500):
        k = rnd.choice(keys)
        op = rnd.random()
        if op < 0.7:
            els = [rnd.choice(pool) if rnd.random() < 0.3 else str(rnd.random()) for _ in range(rnd.randint(0, 40))]
            p.same("PFADD", k, *els)
        elif op < 0.85:
            p.same("PFCOUNT", k)
        elif op < 0.95:
            p.same("PFCOUNT", *rnd.sample(keys + ["missing"], rnd.randint(2, 4)))
        else:
            p.same("PFMERGE", k, *rnd.sample(keys + ["missing"], rnd.randint(0, 3)))
        if step % 25 == 0:
            p.same("GET", k)
            p.same("PFDEBUG", "ENCODING", k)
    for k in keys:
        p.same("GET", k)
    p.same("CONFIG", "SET", "hll-sparse-max-bytes", "3000")


def test_acknowledged_elements_counted_after_kill9(pkvs):
    """Four clients PFADD batches of 20 new elements each to an HLL of
    their own; kill -9 under that load: after the restart, adding again
    every element of every acknowledged batch changes no register (PFADD
    answers 0), and each HLL counts about what it was given."""
    srv = pkvs.start(["--checkpoint-records", "300"])

    def batch(c, g):
        return ["PFADD", f"hll{c}"] + [f"{c}:{g}:{i}" for i in range(20)]
    acked = generations_acked_under_kill9(srv, 4, batch, lambda reply: reply in (0, 1))
    assert all(acked.get(c, 0) > 10 for c in range(4)), acked
    srv.start()
    r = redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=20)
    for c in range(4):
        n = acked[c]
        for g in range(1, n + 1):
            assert r.pfadd(f"hll{c}", *batch(c, g)[2:]) == 0, (c, g, n)
        assert abs(r.pfcount(f"hll{c}") - 20 * n) <= 0.05 * 20 * n + 5, (c, n)


def test_replicas_keep_the_same_bytes(pkvs):
    """A pkvs primary with a pkvs replica and a redis-server replica: after
    PFADDs, PFCOUNTs (which store the count in the value), PFMERGE and
    bit commands on the primary, each key's bytes are the same on all
    three (PFCOUNT is sent on as Redis sends it)."""
    primary = pkvs.start(http=False)
    factory = PkvsFactory()
    try:
        rep = factory.start(http=False)
        try:
            rs = RedisServer(["--replicaof", "127.0.0.1", str(primary.resp_port)], dir_base="/dev/shm", tag="replica")
        except MissingBinary:
            pytest.skip("redis-server is not installed")
        rs.start()
        try:
            p = redis.Redis(host="127.0.0.1", port=primary.resp_port, socket_timeout=10)
            r = redis.Redis(host="127.0.0.1", port=rep.resp_port, socket_timeout=10)
            assert r.execute_command("REPLICAOF", "127.0.0.1", str(primary.resp_port)) == b"OK"
            p.pfadd("before", "x", "y")
            p.pfcount("before")
            replicas = [r, redis.Redis(host="127.0.0.1", port=rs.port, socket_timeout=10)]
            assert wait_until(lambda: all(c.info("replication").get("master_link_status") == "up"
                                          for c in replicas), 20)
            p.pfadd("a", "a", "b", "c")
            assert p.pfcount("a") == 3
            p.pfadd("b", *[str(i) for i in range(2000)])
            p.pfcount("b")
            p.pfmerge("m", "a", "b")
            p.pfcount("m")
            p.pfadd("a", "d")
            p.bitop("OR", "o", "a", "b")
            p.bitfield("f").set("u8", 0, 200).incrby("i4", 3, 9).execute()
            assert p.wait(2, 5000) == 2
            keys = ["before", "a", "b", "m", "o", "f"]
            want = [p.get(k) for k in keys]
            assert want[0][15] == 0 and want[1][15] & 0x80 and want[2][15] == 0   # counts stored, a's stale
            for c in replicas:
                assert wait_until(lambda: [c.get(k) for k in keys] == want, 10), c
        finally:
            rs.stop()
    finally:
        factory.cleanup()
