"""pkvs's sets (services/cmd_set.c, kv_set.c).

- Every set command, its arity and WRONGTYPE errors and its edge cases,
  byte for byte against Debian's redis-server 7.0.15 in RESP2 and RESP3.
  Sets of integers (Redis keeps them as intsets, in ascending order, and
  so does pkvs's reply) compare as they are; other sets, whose order in
  Redis is its hash table's, compare element for element once sorted.
- The key commands on a set (TYPE, OBJECT ENCODING, SCAN TYPE, EXPIRE,
  RENAME, COPY, DEL) and sets in MULTI/EXEC.
- Members of every size through every command (a member over 400 bytes
  is named by a digest, one over 512 that landed in a packet buffer is
  held there), and after a restart.
- A set of 100,000 members: SCARD, SSCAN (each member once), SMEMBERS,
  SRANDMEMBER and SPOP over it, SREM of half, DEL and the sweep.
- SRANDMEMBER's and SPOP's distributions (chi-square, as Redis's suite).
- kill -9 under SADD/SREM/SMOVE load: every acknowledged change is there,
  a multi-member change in flight is all or nothing, SCARD equals the
  members present (KeyLoad, kill9_rounds: test_pkvs_zset.py's too).
"""
import random
import threading
import time

import pytest

from conftest import ConnectionClosed, PkvsFactory, RespConn, RespError, resp_command, run_tool
from redis_peer import redis_peer  # noqa: F401 (a fixture)
from redis_peer import SLEEP, UNORDERED, flushed_peers as peers, run_script, script_like_redis, unordered


U = UNORDERED
SCRIPTS = {
    "basics": [
        ("SADD", "s", "a", "b", "c"), ("SADD", "s", "a", "d", "d"), ("SCARD", "s"),
        ("SISMEMBER", "s", "a"), ("SISMEMBER", "s", "z"), ("SISMEMBER", "nokey", "a"),
        ("SMISMEMBER", "s", "a", "z", "b"), ("SMISMEMBER", "nokey", "a", "b"),
        (U, "SMEMBERS", "s"), ("SMEMBERS", "nokey"), ("SCARD", "nokey"),
        ("SREM", "s", "a", "z", "a"), (U, "SMEMBERS", "s"), ("SREM", "nokey", "a"),
        ("SREM", "s", "b", "c", "d", "e"), ("EXISTS", "s"), ("SCARD", "s"),
        ("SADD", "i", "10", "2", "-5", "300", "7", "0"), ("SMEMBERS", "i"),
        ("SADD", "i", "9223372036854775807", "-9223372036854775808"), ("SMEMBERS", "i"),
        ("SADD", "bin", b"\x00\xff", b"", b"a\r\nb"), ("SISMEMBER", "bin", b""),
        (U, "SMEMBERS", "bin"), ("SREM", "bin", b""), (U, "SMEMBERS", "bin"),
        ("TYPE", "i"), ("OBJECT", "ENCODING", "i"), ("OBJECT", "ENCODING", "bin"),
    ],
    "random": [
        ("SRANDMEMBER", "nokey"), ("SRANDMEMBER", "nokey", "5"), ("SRANDMEMBER", "nokey", "-5"),
        ("SPOP", "nokey"), ("SPOP", "nokey", "3"), ("SPOP", "nokey", "0"),
        ("SADD", "s", "1", "2", "3"),
        ("SRANDMEMBER", "s", "0"), ("SRANDMEMBER", "s", "3"), ("SRANDMEMBER", "s", "10"),
        ("SRANDMEMBER", "s", "x"), ("SRANDMEMBER", "s", "1", "2"),
        ("SRANDMEMBER", "s", "-9223372036854775808"), ("SRANDMEMBER", "s", "9223372036854775808"),
        ("SPOP", "s", "0"), ("SPOP", "s", "x"), ("SPOP", "s", "-1"), ("SPOP", "s", "1", "2"),
        ("SPOP", "s", "3"), ("EXISTS", "s"),
        ("SADD", "one", "only"), ("SRANDMEMBER", "one"), ("SRANDMEMBER", "one", "1"),
        ("SRANDMEMBER", "one", "-3"), ("SPOP", "one"), ("EXISTS", "one"),
        ("SADD", "one", "only"), ("SPOP", "one", "1"), ("EXISTS", "one"),
        ("SADD", "one", "x", "y"), (U, "SPOP", "one", "9"), ("EXISTS", "one"),
    ],
    "algebra": [
        ("SADD", "a", "1", "2", "3", "4"), ("SADD", "b", "3", "4", "5"), ("SADD", "c", "x", "4"),
        ("SINTER", "a", "b"), ("SINTER", "a", "b", "c"), ("SINTER", "a", "nokey"),
        ("SINTER", "nokey", "a"), ("SINTER", "a", "a"), ("SUNION", "a", "b"),
        (U, "SUNION", "a", "b", "c"), ("SUNION", "nokey"), ("SUNION", "a", "nokey", "a"),
        ("SDIFF", "a", "b"), ("SDIFF", "a", "b", "c"), ("SDIFF", "a", "a"), ("SDIFF", "nokey", "a"),
        ("SDIFF", "a", "nokey"),
        ("SINTERSTORE", "d", "a", "b"), ("SMEMBERS", "d"), ("SINTERSTORE", "d", "a", "nokey"),
        ("EXISTS", "d"), ("SUNIONSTORE", "d", "a", "b", "c"), (U, "SMEMBERS", "d"), ("SCARD", "d"),
        ("SDIFFSTORE", "d", "a", "b"), ("SMEMBERS", "d"), ("SDIFFSTORE", "d", "a", "a"),
        ("EXISTS", "d"), ("SET", "d", "string"), ("SUNIONSTORE", "d", "a"), ("TYPE", "d"),
        ("SUNIONSTORE", "a", "a", "b"), ("SMEMBERS", "a"), ("SINTERSTORE", "b", "b", "a"),
        ("SMEMBERS", "b"), ("EXPIRE", "d", "100"), ("SUNIONSTORE", "d", "a"), ("TTL", "d"),
        ("SINTERCARD", "2", "a", "b"), ("SINTERCARD", "2", "a", "b", "LIMIT", "1"),
        ("SINTERCARD", "2", "a", "b", "limit", "0"), ("SINTERCARD", "1", "nokey"),
        ("SINTERCARD", "2", "a", "nokey"), ("SINTERCARD", "0", "a"), ("SINTERCARD", "a", "a"),
        ("SINTERCARD", "3", "a", "b"), ("SINTERCARD", "1", "a", "b"),
        ("SINTERCARD", "1", "a", "LIMIT"), ("SINTERCARD", "1", "a", "LIMIT", "-1"),
        ("SINTERCARD", "1", "a", "LIMIT", "x"), ("SINTERCARD", "-1", "a"),
    ],
    "smove": [
        ("SADD", "a", "1", "x", "y"), ("SADD", "b", "2", "3"),
        ("SMOVE", "a", "b", "x"), (U, "SMEMBERS", "a"), (U, "SMEMBERS", "b"),
        ("SMOVE", "a", "b", "nope"), ("SMOVE", "nokey", "b", "x"), ("SMOVE", "a", "a", "1"),
        ("SMOVE", "a", "a", "nope"), ("SMOVE", "a", "new", "1"), ("SMEMBERS", "new"),
        ("SMOVE", "a", "b", "y"), ("EXISTS", "a"), ("SMOVE", "b", "a", "2"),
        ("SET", "str", "v"), ("SMOVE", "str", "b", "x"), ("SMOVE", "b", "str", "3"),
        ("SMOVE", "nokey", "str", "x"), (U, "SMEMBERS", "b"), ("SMOVE", "b", "a", "2"),
        ("SMOVE", "b", "a", "3"),
    ],
    "scan": [
        ("SSCAN", "nokey", "0"), ("SSCAN", "nokey", "x"), ("SSCAN", "nokey", "0", "COUNT", "0"),
        ("SADD", "s", "1", "20", "3", "40", "5"),
        ("SSCAN", "s", "0"), ("SSCAN", "s", "0", "MATCH", "*0"), ("SSCAN", "s", "0", "MATCH", "*"),
        ("SSCAN", "s", "0", "COUNT", "1"), ("SSCAN", "s", "0", "COUNT", "0"),
        ("SSCAN", "s", "0", "COUNT", "-1"), ("SSCAN", "s", "0", "COUNT", "x"),
        ("SSCAN", "s", "0", "COUNT"), ("SSCAN", "s", "0", "TYPE", "set"), ("SSCAN", "s", "x"),
        ("SSCAN", "s", "-1"), ("SSCAN", "s", " 1"), ("SSCAN", "s", "18446744073709551616"),
        ("SADD", "h", "a1", "a2", "b1"), (U, "SSCAN", "h", "0", "COUNT", "100"),
        (U, "SSCAN", "h", "0", "MATCH", "a*", "COUNT", "100"),
    ],
    "wrongtype": [
        ("SET", "s", "v"),
        ("SADD", "s", "a"), ("SREM", "s", "a"), ("SMEMBERS", "s"), ("SISMEMBER", "s", "a"),
        ("SMISMEMBER", "s", "a"), ("SCARD", "s"), ("SPOP", "s"), ("SPOP", "s", "1"),
        ("SRANDMEMBER", "s"), ("SRANDMEMBER", "s", "2"), ("SSCAN", "s", "0"),
        ("SINTER", "s"), ("SINTER", "nokey", "s"), ("SUNION", "s", "nokey"),
        ("SDIFF", "nokey", "s"), ("SINTERSTORE", "d", "s"), ("SUNIONSTORE", "d", "nokey", "s"),
        ("SDIFFSTORE", "d", "s"), ("SINTERCARD", "1", "s"), ("SINTERCARD", "2", "nokey", "s"),
        ("EXISTS", "d"), ("SADD", "set", "a"), ("SDIFFSTORE", "set", "s"), ("SMEMBERS", "set"),
        ("SPOP", "s", "x"), ("SRANDMEMBER", "s", "x"), ("SSCAN", "s", "x"),
        ("GET", "set"), ("INCR", "set"), ("HGET", "set", "a"), ("ZADD", "set", "1", "a"),
        ("LPUSH", "set", "a"),
    ],
    "keyspace": [
        ("SADD", "s", "a", "b"), ("TYPE", "s"), ("EXISTS", "s"), ("SCAN", "0", "TYPE", "set"),
        ("SET", "str", "v"), ("SCAN", "0", "TYPE", "string"), ("EXPIRE", "s", "100"),
        ("TTL", "s"), ("SADD", "s", "c"), ("SREM", "s", "a"), ("TTL", "s"),
        ("RENAME", "s", "s2"), ("EXISTS", "s"), (U, "SMEMBERS", "s2"), ("TTL", "s2"),
        ("PERSIST", "s2"), ("COPY", "s2", "s3"), (U, "SMEMBERS", "s3"), ("SADD", "s3", "z"),
        ("SCARD", "s2"), ("SCARD", "s3"), ("RENAMENX", "s3", "s2"), ("RENAME", "s3", "str"),
        ("TYPE", "str"), (U, "SMEMBERS", "str"), ("DEL", "s2", "str"), ("EXISTS", "s2", "str"),
        ("SCARD", "s2"), ("SADD", "big", *[str(i) for i in range(513)]),
        ("OBJECT", "ENCODING", "big"),
        ("PEXPIRE", "big", "1"), (SLEEP, 0.01), ("EXISTS", "big"), ("SCARD", "big"),
        ("SADD", "big", "x"), ("SCARD", "big"),
    ],
    "arity": [
        ("SADD", "s"), ("SADD",), ("SREM", "s"), ("SMEMBERS",), ("SMEMBERS", "s", "x"),
        ("SISMEMBER", "s"), ("SISMEMBER", "s", "a", "b"), ("SMISMEMBER", "s"), ("SCARD",),
        ("SPOP",), ("SRANDMEMBER",), ("SMOVE", "a", "b"), ("SMOVE", "a", "b", "c", "d"),
        ("SINTER",), ("SINTERSTORE", "d"), ("SINTERCARD", "1"), ("SUNION",),
        ("SUNIONSTORE", "d"), ("SDIFF",), ("SDIFFSTORE", "d"), ("SSCAN", "s"),
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
    script_like_redis(server, redis_peer, SCRIPTS[script], proto)


def test_multi_like_redis(server, redis_peer):
    """Set commands queued in MULTI run as one unit and answer as Redis's."""
    p = peers(server.resp_port, redis_peer.resp_port, 2)
    run_script(p, [
        ("SADD", "a", "1", "2"), ("MULTI",), ("SADD", "a", "3"), ("SREM", "a", "1"),
        ("SMOVE", "a", "b", "2"), ("SUNIONSTORE", "c", "a", "b"), ("SCARD", "c"),
        ("SPOP", "nokey"), ("SMEMBERS", "a"), ("EXEC",), ("SMEMBERS", "c"),
        ("MULTI",), ("SADD", "a", "x"), ("SADD",), ("EXEC",), ("SCARD", "a"),
        ("MULTI",), ("SADD", "a", "y"), ("INCR", "a"), ("SADD", "a", "z"), ("EXEC",),
        (U, "SMEMBERS", "a"),
    ])
    p.close()


def test_watch_smove(server):
    """SMOVE touches the destination only when the member is added there:
    a WATCH on it survives a move of a member it already has."""
    with RespConn(server.resp_port) as c, RespConn(server.resp_port) as d:
        c.command("FLUSHALL")
        c.command("SADD", "src", "a", "b")
        c.command("SADD", "dst", "a")
        assert c.command("WATCH", "dst") == "OK"
        assert c.command("MULTI") == "OK"
        c.command("SADD", "dst", "c")
        assert d.command("SMOVE", "src", "dst", "a") == 1
        assert c.command("EXEC") == [1]
        assert c.command("WATCH", "dst") == "OK"
        assert c.command("MULTI") == "OK"
        c.command("SADD", "dst", "d")
        assert d.command("SMOVE", "src", "dst", "b") == 1
        assert c.command("EXEC") is None


# ---------------------------------------------------------------------------
# Sizes
# ---------------------------------------------------------------------------

MEMBER_LENS = [0, 1, 32, 392, 400, 401, 512, 513, 1500, 2047, 5000, 60000]


def blob(n, seed):
    return random.Random(seed).randbytes(n)


def test_big_members(server, redis_peer):
    """Members of every size through every set command, the same elements
    as Redis's (a member of 513 to ~2,000 bytes in one packet is held where
    it landed; a longer one is gathered and copied)."""
    p = peers(server.resp_port, redis_peer.resp_port, 2)
    members = [blob(n, i) + bytes([i]) for i, n in enumerate(MEMBER_LENS)]
    for m in members:
        p.same("SADD", "a", m)
    p.same("SADD", "b", *members[::2])
    p.same("SCARD", "a")
    for m in members:
        p.same("SISMEMBER", "a", m)
        p.same("SISMEMBER", "b", m)
    p.same("SMISMEMBER", "b", *members)
    for cmd in (("SMEMBERS", "a"), ("SINTER", "a", "b"), ("SUNION", "a", "b"), ("SDIFF", "a", "b"),
                ("SSCAN", "a", "0", "COUNT", "100")):
        got, want = p.both(*cmd)
        assert unordered(got) == unordered(want), cmd
    p.same("SINTERSTORE", "c", "a", "b")
    got, want = p.both("SMEMBERS", "c")
    assert unordered(got) == unordered(want)
    for m in members[1::3]:
        p.same("SMOVE", "a", "d", m)
        p.same("SREM", "b", m)
    for cmd in (("SMEMBERS", "a"), ("SMEMBERS", "b"), ("SMEMBERS", "d")):
        got, want = p.both(*cmd)
        assert unordered(got) == unordered(want), cmd
    p.close()


def test_union_of_distinct_long_members(server, redis_peer):
    """SUNION and SUNIONSTORE of sets whose long members differ: each walk
    of the merge reads its long names into a buffer of its own, so the
    member taken is the one its walk stands at."""
    p = peers(server.resp_port, redis_peer.resp_port, 2)
    for i, c in enumerate(b"abcdef"):
        p.same("SADD", f"u{i % 3}", bytes([c]) * (450 + 50 * i))
    got, want = p.both("SUNION", "u0", "u1", "u2")
    assert unordered(got) == unordered(want)
    p.same("SUNIONSTORE", "u", "u0", "u1", "u2")
    got, want = p.both("SMEMBERS", "u")
    assert unordered(got) == unordered(want)
    p.close()


def test_spop_of_a_large_set(server):
    """SPOP of one member from a set past the sampling size (a random
    descent of the tree, not an index walk): every member comes out
    exactly once, the set empties, and the first half of the pops spread
    over the member order about evenly (each sixth within 30 % of its
    share)."""
    n = 6000
    with RespConn(server.resp_port, timeout=30) as c:
        c.command("DEL", "big")
        for i in range(0, n, 500):
            c.command("SADD", "big", *[f"m{j:05d}" for j in range(i, i + 500)])
        c.send(b"".join(resp_command("SPOP", "big") for _ in range(n)))
        popped = [c.read_reply() for _ in range(n)]
        assert c.command("SCARD", "big") == 0 and c.command("EXISTS", "big") == 0
    assert sorted(popped) == [f"m{j:05d}".encode() for j in range(n)]
    parts = [0] * 6
    for m in popped[:n // 2]:
        parts[int(m[1:]) * 6 // n] += 1
    share = n // 2 / 6
    assert all(0.7 * share < p < 1.3 * share for p in parts), parts


def test_members_survive_restart(pkvs):
    srv = pkvs.start()
    members = {blob(n, n) + b"x" for n in MEMBER_LENS}
    with RespConn(srv.resp_port, timeout=20) as c:
        for m in members:
            assert c.command("SADD", "one", m) == 1
        assert c.command("SADD", "many", *members) == len(members)
        assert c.command("SUNIONSTORE", "u", "one", "many") == len(members)
    store = srv.store
    srv.stop(keep_store=True)
    srv = pkvs.start(store=store)
    with RespConn(srv.resp_port, timeout=20) as c:
        for key in ("one", "many", "u"):
            assert c.command("SCARD", key) == len(members)
            assert set(c.command("SMEMBERS", key)) == members
            for m in members:
                assert c.command("SISMEMBER", key, m) == 1


def test_limits(server):
    """A member longer than pkvs takes is refused with an error, and the
    command changes nothing."""
    with RespConn(server.resp_port, timeout=20) as c:
        c.command("FLUSHALL")
        r = c.command("SADD", "s", "a", b"m" * 200000)
        assert isinstance(r, RespError) and "member length" in str(r), r
        assert c.command("EXISTS", "s") == 0


# ---------------------------------------------------------------------------
# Many members
# ---------------------------------------------------------------------------

def info_field(c, name):
    for line in c.command("INFO", "memory").decode().split("\r\n"):
        if line.startswith(name + ":"):
            return int(line.split(":")[1])
    raise AssertionError(f"INFO has no {name}")


def test_large_set(pkvs):
    srv = pkvs.start(["--checkpoint-ms", "200"], store_size="256M")
    n = 100000
    names = [f"member:{i:06d}".encode() for i in range(n)]
    with RespConn(srv.resp_port, timeout=60) as c:
        time.sleep(0.5)
        live = info_field(c, "pkvs_live_bytes")
        for i in range(0, n, 5000):
            assert c.command("SADD", "big", *names[i:i + 5000]) == 5000
        assert c.command("SADD", "big", *names[:10]) == 0
        assert c.command("SCARD", "big") == n
        got = c.command("SMEMBERS", "big")
        assert len(got) == n and set(got) == set(names)
        # SSCAN: every member once, while others come and go
        cursor, seen, calls = b"0", [], 0
        while True:
            cursor, items = c.command("SSCAN", "big", cursor, "COUNT", "1000")
            seen += items
            calls += 1
            c.command("SADD", "big", f"new{calls}")
            c.command("SREM", "big", f"new{calls - 1}")
            if cursor == b"0":
                break
        stable = [x for x in seen if x.startswith(b"member:")]
        assert len(stable) == len(set(stable)) == n
        assert all(c.command("SISMEMBER", "big", names[i]) == 1 for i in range(0, n, 997))
        # random members over the whole set
        draws = c.command("SRANDMEMBER", "big", "-20000")
        assert len(draws) == 20000 and set(draws) <= set(names) | {f"new{calls}".encode()}
        halves = sum(1 for d in draws if d < b"member:050000")
        assert 9000 < halves < 11000, halves
        distinct = c.command("SRANDMEMBER", "big", "30000")
        assert len(distinct) == len(set(distinct)) == 30000
        popped = c.command("SPOP", "big", "1000")
        assert len(set(popped)) == 1000
        assert c.command("SCARD", "big") == n + 1 - 1000
        assert c.command("SMISMEMBER", "big", *popped[:50]) == [0] * 50
        assert c.command("SREM", "big", *names[::2]) == len([x for x in names[::2] if x not in set(popped)])
        left = c.command("SCARD", "big")
        assert len(c.command("SMEMBERS", "big")) == left
        t = time.monotonic()
        assert c.command("DEL", "big") == 1
        assert time.monotonic() - t < 0.05
        assert c.command("SCARD", "big") == 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and info_field(c, "pkvs_live_bytes") != live:
            time.sleep(0.2)
        assert info_field(c, "pkvs_live_bytes") == live


def chi_square(samples):
    counts = {}
    for s in samples:
        counts[s] = counts.get(s, 0) + 1
    p = len(samples) / len(counts)
    return sum((v - p) ** 2 / p for v in counts.values())


@pytest.mark.parametrize("members", [[str(i) for i in range(10)],
                                     ["1", "5", "10", "50", "125", "MARY", "PATRICIA", "LINDA",
                                      "BARBARA", "ELIZABETH"]])
def test_random_distribution(server, members):
    """SRANDMEMBER (negative count, positive counts) and SPOP pick every
    member as often as another (df = 9: 40 is p ~ 1e-5)."""
    with RespConn(server.resp_port, timeout=20) as c:
        c.command("FLUSHALL")
        c.command("SADD", "s", *members)
        assert chi_square(c.command("SRANDMEMBER", "s", "-1000")) < 40
        for size in (8, 2):
            got = []
            for _ in range(1000 // size):
                res = c.command("SRANDMEMBER", "s", size)
                assert len(res) == len(set(res)) == size
                got += res
            assert chi_square(got) < 40
        single = [c.command("SRANDMEMBER", "s") for _ in range(1000)]
        assert chi_square(single) < 40
        popped = []
        for _ in range(500):
            m = c.command("SPOP", "s")
            popped.append(m)
            c.command("SADD", "s", m)
        assert chi_square(popped) < 40
        assert c.command("SCARD", "s") == 10


# ---------------------------------------------------------------------------
# kill -9 under load
# ---------------------------------------------------------------------------

class KeyLoad:
    """Threads changing keys of their own, one command at a time, until
    the server is killed. A subclass gives each thread's keys and state
    (keys, state), an op ((command, {item: state after}, reply wanted))
    and how an acknowledged op changes the state (applied). history[item]
    lists [state after the op, ack time or None] in issue order; ops keeps
    every op's entries, for the all-or-nothing checks. absent: the state of
    an item never written."""

    absent = None

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

    def _run(self, tid, rng):
        keys, state = self.keys(tid)
        try:
            conn = RespConn(self.port, timeout=10)
        except OSError as e:
            self.problems.append(repr(e))
            return
        seq = 0
        try:
            while time.monotonic() < self.deadline:
                seq += 1
                cmd, states, want = self.op(tid, seq, rng, keys, state)
                entries = {item: [s, None] for item, s in states.items()}
                with self.lock:
                    for item, e in entries.items():
                        self.history.setdefault(item, []).append(e)
                    self.ops.append((cmd[0], entries))
                reply = conn.command(*cmd)
                if reply != want:
                    self.problems.append((cmd[:3], reply, want))
                    return
                self.applied(state, states)
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

    def allowed(self, item):
        """The states the last acknowledged op or any later one leaves."""
        hist = self.history.get(item, [])
        last = max((i for i, (_, acked) in enumerate(hist) if acked is not None), default=-1)
        states = [self.absent] if last < 0 else [hist[last][0]]
        return states + [s for s, _ in hist[last + 1:]]

    def unacked_whole(self, present):
        """Problems with ops of several items in flight at the kill (no
        later op on any of their items): all of the op's changes or none."""
        bad = []
        for kind, entries in self.ops:
            if len(entries) < 2 or any(e[1] for e in entries.values()):
                continue
            if any(self.history[item][-1] is not e for item, e in entries.items()):
                continue
            changed = [(item, e) for item, e in entries.items() if self.allowed(item)[0] != e[0]]
            there = sum(present.get(item, self.absent) == e[0] for item, e in changed)
            if there not in (0, len(changed)):
                bad.append((kind, there, len(changed)))
        return bad


def kill9_rounds(pkvs, load_class, check, rounds=2):
    """Rounds of load killed at a random moment, the store checked, and
    check(conn, load) after a restart on it."""
    store = pkvs.new_store()
    args = ["--checkpoint-records", "500"]
    for round_ in range(rounds):
        srv = pkvs.start(args, store=store, store_size="256M")
        load = load_class(srv.resp_port, threads=4, duration=30, seed=random.getrandbits(32))
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
            check(c, load, round_)
            assert c.command("FLUSHALL") == "OK"
        srv.stop(keep_store=True)


class SetLoad(KeyLoad):
    """SADD of 1-4 new members (each op's names unique, some long), SREM
    of 1-3 it knows, SMOVE between its keys; an item is (key, member), its
    state whether it is there."""

    absent = False

    def keys(self, tid):
        keys = [f"t{tid}:s{j}".encode() for j in range(3)]
        return keys, {k: set() for k in keys}

    def op(self, tid, seq, rng, keys, have):
        kind = rng.random()
        key = rng.choice(keys)
        if kind < 0.5 or not have[key]:
            ms = [f"t{tid}:{seq}:{j}:".encode() + (b"L" * 600 if rng.random() < 0.1 else b"")
                  for j in range(rng.choice([1, 1, 2, 4]))]
            return ("SADD", key) + tuple(ms), {(key, m): True for m in ms}, len(ms)
        if kind < 0.85:
            ms = rng.sample(sorted(have[key]), min(len(have[key]), rng.choice([1, 1, 3])))
            return ("SREM", key) + tuple(ms), {(key, m): False for m in ms}, len(ms)
        dst = rng.choice([k for k in keys if k != key])
        m = rng.choice(sorted(have[key]))
        return ("SMOVE", key, dst, m), {(key, m): False, (dst, m): True}, 1

    def applied(self, have, states):
        for (k, m), s in states.items():
            (have[k].add if s else have[k].discard)(m)


def check_sets(c, load, round_):
    present = {}
    for key in {k for k, _ in load.history}:
        members = c.command("SMEMBERS", key)
        assert c.command("SCARD", key) == len(members), key
        assert c.command("EXISTS", key) == (1 if members else 0)
        for m in members:
            assert (key, m) in load.history, (key, m[:40])
            present[(key, m)] = True
    bad = [km for km in load.history if present.get(km, False) not in load.allowed(km)]
    assert not bad, f"round {round_}: {len(bad)} members no history allows: {bad[:10]}"
    assert not load.unacked_whole(present), load.unacked_whole(present)[:5]


@pytest.mark.crash
@pytest.mark.slow
def test_kill9_under_set_load(pkvs):
    kill9_rounds(pkvs, SetLoad, check_sets)


@pytest.mark.crash
def test_kill9_after_big_sadd(pkvs):
    """An acknowledged SADD of 3,000 members and SREM of 1,000 of them
    are whole after kill -9; so is an SUNIONSTORE of the rest."""
    store = pkvs.new_store()
    srv = pkvs.start(["--checkpoint-records", "100000", "--checkpoint-ms", "100000"], store=store)
    members = [f"m{i:05d}".encode() + (b"x" * 600 if i % 5 == 0 else b"") for i in range(3000)]
    with RespConn(srv.resp_port, timeout=30) as c:
        assert c.command("SADD", "s", *members) == len(members)
        gone = members[::3]
        assert c.command("SREM", "s", *gone) == len(gone)
        assert c.command("SUNIONSTORE", "u", "s") == len(members) - len(gone)
    srv.kill9()
    want = set(members) - set(gone)
    srv = pkvs.start(store=store)
    with RespConn(srv.resp_port, timeout=30) as c:
        for key in ("s", "u"):
            assert c.command("SCARD", key) == len(want)
            assert set(c.command("SMEMBERS", key)) == want
