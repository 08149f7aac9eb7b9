"""pkvs's sorted sets (services/cmd_zset.c, kv_zset.c).

- Every sorted-set command, its arity and WRONGTYPE errors and its edge
  cases (scores as Redis reads and writes them: inf, -inf, NaN refused,
  %.17g), byte for byte against Debian's redis-server 7.0.15 in RESP2 and
  RESP3: a sorted set's order is Redis's too (by score, then by member
  bytes), so every reply compares as it is but ZRANDMEMBER's picks.
- BZPOPMIN, BZPOPMAX and BZMPOP: served at once, served by a later ZADD
  (in the order clients blocked), timed out, inside MULTI.
- Members of every size, and after a restart.
- A sorted set of 100,000 members against a model: ZRANK/ZREVRANK,
  ranges by rank, score and member, ZCOUNT, ZLEXCOUNT, removals, pops.
- A leaderboard (ZADD, ZINCRBY, ZREVRANGE WITHSCORES, ZRANK, ZSCORE over
  thousands of players) whose replies are Redis's byte for byte.
- kill -9 under ZADD/ZINCRBY/ZREM load: every acknowledged change is
  there, ZCARD equals the members present, and the score index agrees with
  the members after the restart.
"""
import math
import random
import time

import pytest

from conftest import PkvsFactory, RespConn, RespError, resp_command
from redis_peer import redis_peer  # noqa: F401 (a fixture)
from redis_peer import SLEEP, UNORDERED, RawConn, script_like_redis
from test_pkvs_set import KeyLoad, kill9_rounds, peers

U = UNORDERED
SCRIPTS = {
    "zadd": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZADD", "z", "1.5", "a", "4", "d"),
        ("ZADD", "z", "NX", "10", "a", "5", "e"), ("ZADD", "z", "XX", "11", "a", "6", "f"),
        ("ZADD", "z", "XX", "CH", "12", "a", "6", "f"), ("ZADD", "z", "GT", "1", "a"),
        ("ZADD", "z", "LT", "1", "a"), ("ZADD", "z", "GT", "CH", "20", "a"),
        ("ZADD", "z", "LT", "CH", "2", "b"), ("ZADD", "z", "GT", "XX", "CH", "30", "a", "1", "new"),
        ("ZADD", "z", "ch", "nx", "1", "a", "2", "g"), ("ZADD", "z", "CH", "1", "g"),
        ("ZADD", "z", "NX", "XX", "1", "a"), ("ZADD", "z", "GT", "LT", "1", "a"),
        ("ZADD", "z", "NX", "GT", "1", "a"), ("ZADD", "z", "NX", "LT", "1", "a"),
        ("ZADD", "z", "INCR", "1", "a", "2", "b"), ("ZADD", "z", "INCR", "2.5", "a"),
        ("ZADD", "z", "INCR", "NX", "2.5", "a"), ("ZADD", "z", "INCR", "XX", "2.5", "zz"),
        ("ZADD", "z", "INCR", "GT", "-1", "a"), ("ZADD", "z", "INCR", "LT", "-1", "a"),
        ("ZADD", "z", "1"), ("ZADD", "z", "1", "a", "2"), ("ZADD", "z", "x", "a"),
        ("ZADD", "z", "nan", "a"), ("ZADD", "z", "1e400", "a"), ("ZADD", "z", " 1", "a"),
        ("ZADD", "z", "1 ", "a"), ("ZADD", "z", "", "a"), ("ZADD", "z", "1e-400", "a"),
        ("ZADD", "z", "1", "ok", "x", "bad"), ("ZSCORE", "z", "ok"),
        ("ZADD", "z", "inf", "pinf", "-inf", "ninf", "+inf", "p2", "-Infinity", "n2"),
        ("ZADD", "z", "0x10", "hex", "1e3", "exp", "-0", "negzero", ".5", "half", "5.", "five"),
        ("ZADD", "z", "4.9e-324", "denorm", "1.7976931348623157e308", "max"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZCARD", "z"),
        ("ZADD", "nokey", "XX", "1", "a"), ("EXISTS", "nokey"), ("ZADD", "nokey", "XX", "INCR", "1", "a"),
        ("ZADD", "z", "NX", "INCR", "1", "a"),
    ],
    "incr": [
        ("ZINCRBY", "z", "1", "a"), ("ZINCRBY", "z", "2.5", "a"), ("ZINCRBY", "z", "-10", "a"),
        ("ZINCRBY", "z", "inf", "a"), ("ZINCRBY", "z", "-inf", "a"), ("ZSCORE", "z", "a"),
        ("ZINCRBY", "z", "x", "a"), ("ZINCRBY", "z", "nan", "a"), ("ZINCRBY", "z", "nx", "a"),
        ("ZINCRBY", "z", "1.1", "b"), ("ZINCRBY", "z", "0.1", "b"), ("ZINCRBY", "z", "-0", "c"),
        ("ZINCRBY", "z", "1e308", "d"), ("ZINCRBY", "z", "1e308", "d"), ("ZINCRBY", "z", "1e308", "d"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
    ],
    "reads": [
        ("ZADD", "z", "1", "a", "2", "b", "2", "bb", "3", "c", "-1.5", "m"),
        ("ZSCORE", "z", "a"), ("ZSCORE", "z", "m"), ("ZSCORE", "z", "nope"), ("ZSCORE", "nokey", "a"),
        ("ZMSCORE", "z", "a", "nope", "m"), ("ZMSCORE", "nokey", "a", "b"), ("ZCARD", "z"),
        ("ZCARD", "nokey"), ("ZRANK", "z", "m"), ("ZRANK", "z", "bb"), ("ZRANK", "z", "nope"),
        ("ZRANK", "nokey", "a"), ("ZREVRANK", "z", "m"), ("ZREVRANK", "z", "c"),
        ("ZCOUNT", "z", "1", "2"), ("ZCOUNT", "z", "(1", "(3"), ("ZCOUNT", "z", "-inf", "+inf"),
        ("ZCOUNT", "z", "3", "1"), ("ZCOUNT", "z", "(2", "2"), ("ZCOUNT", "z", "x", "1"),
        ("ZCOUNT", "z", "1", "(x"), ("ZCOUNT", "z", "", "9"), ("ZCOUNT", "z", "(", "9"),
        ("ZCOUNT", "z", " 1", "9"), ("ZCOUNT", "z", "1e400", "9"), ("ZCOUNT", "z", "nan", "9"),
        ("ZCOUNT", "nokey", "1", "2"), ("ZREM", "z", "bb", "nope", "bb"), ("ZCARD", "z"),
        ("ZREM", "nokey", "a"), ("ZREM", "z", "a", "b", "c", "m", "x"), ("EXISTS", "z"),
    ],
    "ranges": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "5", "f", "6", "g"),
        ("ZRANGE", "z", "0", "-1"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZRANGE", "z", "2", "3", "withscores"), ("ZRANGE", "z", "-2", "-1"),
        ("ZRANGE", "z", "5", "2"), ("ZRANGE", "z", "-100", "100"), ("ZRANGE", "z", "10", "20"),
        ("ZRANGE", "z", "0", "-1", "REV", "WITHSCORES"), ("ZRANGE", "z", "1", "3", "REV"),
        ("ZREVRANGE", "z", "0", "2", "WITHSCORES"), ("ZREVRANGE", "z", "-3", "-1"),
        ("ZRANGE", "z", "x", "1"), ("ZRANGE", "z", "0", "1", "FOO"),
        ("ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"), ("ZRANGE", "z", "0", "-1", "LIMIT", "0", "-1"),
        ("ZRANGE", "z", "0", "-1", "LIMIT", "1"), ("ZREVRANGE", "z", "0", "1", "REV"),
        ("ZREVRANGE", "z", "0", "1", "BYSCORE"), ("ZREVRANGE", "z", "0", "1", "LIMIT", "0", "1"),
        ("ZRANGEBYSCORE", "z", "1", "5"), ("ZRANGEBYSCORE", "z", "(1", "5", "WITHSCORES"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf"), ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "2"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "-1"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "7", "2"),
        ("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "6", "2"),
        ("ZRANGEBYSCORE", "z", "5", "1"), ("ZRANGEBYSCORE", "z", "x", "1"),
        ("ZRANGEBYSCORE", "z", "1", "2", "REV"), ("ZRANGEBYSCORE", "z", "1", "2", "LIMIT", "x", "1"),
        ("ZREVRANGEBYSCORE", "z", "5", "1", "WITHSCORES"),
        ("ZREVRANGEBYSCORE", "z", "+inf", "-inf", "LIMIT", "2", "3"),
        ("ZREVRANGEBYSCORE", "z", "(5", "(1"), ("ZREVRANGEBYSCORE", "z", "1", "5"),
        ("ZRANGE", "z", "1", "5", "BYSCORE", "REV"), ("ZRANGE", "z", "5", "1", "BYSCORE", "REV"),
        ("ZRANGE", "z", "5", "1", "BYSCORE", "REV", "LIMIT", "1", "1", "WITHSCORES"),
        ("ZRANGE", "z", "(1", "5", "BYSCORE", "LIMIT", "2", "10"),
        ("ZRANGE", "z", "1", "5", "BYSCORE", "BYLEX"), ("ZRANGE", "z", "[a", "[c", "BYLEX", "WITHSCORES"),
        ("ZRANGE", "nokey", "0", "-1"), ("ZRANGEBYSCORE", "nokey", "0", "1"),
    ],
    "lex": [
        ("ZADD", "l", *[x for m in "abcdefg" for x in ("0", m)]), ("ZADD", "l", "0", "", "0", "aa"),
        ("ZRANGEBYLEX", "l", "-", "+"), ("ZRANGEBYLEX", "l", "[b", "(e"),
        ("ZRANGEBYLEX", "l", "(b", "[e", "LIMIT", "1", "2"), ("ZRANGEBYLEX", "l", "[a", "[a"),
        ("ZRANGEBYLEX", "l", "(a", "[a"), ("ZRANGEBYLEX", "l", "[", "[b"), ("ZRANGEBYLEX", "l", "+", "-"),
        ("ZRANGEBYLEX", "l", "-", "-"), ("ZRANGEBYLEX", "l", "+", "+"), ("ZRANGEBYLEX", "l", "[z", "+"),
        ("ZREVRANGEBYLEX", "l", "+", "-"), ("ZREVRANGEBYLEX", "l", "[e", "(b"),
        ("ZREVRANGEBYLEX", "l", "(e", "-", "LIMIT", "0", "2"), ("ZREVRANGEBYLEX", "l", "-", "+"),
        ("ZRANGEBYLEX", "l", "b", "e"), ("ZRANGEBYLEX", "l", "[b", "e"), ("ZRANGEBYLEX", "l", "-x", "+"),
        ("ZRANGEBYLEX", "l", "-", "+", "WITHSCORES"), ("ZRANGE", "l", "(b", "+", "BYLEX"),
        ("ZRANGE", "l", "+", "(b", "BYLEX", "REV", "LIMIT", "1", "3"),
        ("ZLEXCOUNT", "l", "-", "+"), ("ZLEXCOUNT", "l", "[b", "[d"), ("ZLEXCOUNT", "l", "(b", "(d"),
        ("ZLEXCOUNT", "l", "x", "y"), ("ZLEXCOUNT", "l", "[d", "[b"), ("ZLEXCOUNT", "nokey", "-", "+"),
        ("ZREMRANGEBYLEX", "l", "[b", "(d"), ("ZRANGE", "l", "0", "-1"),
        ("ZREMRANGEBYLEX", "l", "x", "y"), ("ZREMRANGEBYLEX", "l", "-", "+"), ("EXISTS", "l"),
        # mixed scores: as Redis's small sorted sets, in order from an end
        ("ZADD", "m", "1", "b", "2", "a", "3", "d", "4", "c"),
        ("ZRANGEBYLEX", "m", "[a", "[c"), ("ZRANGEBYLEX", "m", "-", "+"),
        ("ZREVRANGEBYLEX", "m", "[c", "[a"), ("ZLEXCOUNT", "m", "[a", "[c"),
    ],
    "store": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"),
        ("ZRANGESTORE", "dst", "z", "1", "2"), ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "dst", "z", "2", "3", "BYSCORE"), ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "dst", "z", "+", "[b", "BYLEX", "REV"), ("ZRANGE", "dst", "0", "-1"),
        ("ZRANGESTORE", "dst", "z", "(4", "+inf", "BYSCORE"), ("EXISTS", "dst"),
        ("ZRANGESTORE", "dst", "nokey", "0", "-1"), ("ZRANGESTORE", "dst", "z", "0", "-1", "WITHSCORES"),
        ("ZRANGESTORE", "dst", "z", "0", "-1", "LIMIT", "0", "1"),
        ("ZRANGESTORE", "dst", "z", "0", "-1", "BYSCORE", "LIMIT", "1", "2"),
        ("ZRANGE", "dst", "0", "-1"), ("SET", "str", "v"), ("ZRANGESTORE", "str", "z", "0", "0"),
        ("TYPE", "str"), ("ZRANGESTORE", "z", "z", "0", "1"), ("ZRANGE", "z", "0", "-1"),
        ("ZRANGESTORE", "d2", "str", "0", "1"),
    ],
    "pops": [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"),
        ("ZPOPMIN", "z"), ("ZPOPMAX", "z"), ("ZPOPMIN", "z", "2"), ("ZPOPMAX", "z", "0"),
        ("ZPOPMIN", "z", "1"), ("ZPOPMIN", "z", "-1"), ("ZPOPMIN", "z", "x"), ("ZPOPMIN", "z", "1", "2"),
        ("ZPOPMAX", "z", "10"), ("EXISTS", "z"), ("ZPOPMIN", "nokey"), ("ZPOPMIN", "nokey", "2"),
        ("ZADD", "y", "1", "a", "2", "b", "3", "c"), ("ZADD", "x", "7", "q"),
        ("ZMPOP", "1", "y", "MIN"), ("ZMPOP", "2", "nokey", "y", "MAX", "COUNT", "5"),
        ("ZMPOP", "1", "nokey", "MIN"), ("ZMPOP", "2", "nokey", "x", "min", "count", "1"),
        ("ZMPOP", "0", "y", "MIN"), ("ZMPOP", "1", "y", "FOO"), ("ZMPOP", "1", "y", "MIN", "COUNT", "0"),
        ("ZMPOP", "1", "y", "MIN", "COUNT", "x"), ("ZMPOP", "1", "y", "MIN", "COUNT", "1", "COUNT", "1"),
        ("ZMPOP", "2", "y"), ("ZMPOP", "x", "y", "MIN"), ("ZMPOP", "-1", "y", "MIN"),
        ("SET", "str", "v"), ("ZMPOP", "2", "str", "y", "MIN"), ("ZADD", "y", "1", "a"),
        ("ZMPOP", "2", "y", "str", "MIN"), ("ZPOPMIN", "str"),
        ("ZADD", "y", "1", "a"), ("BZPOPMIN", "y", "0"), ("ZADD", "y", "1", "a", "2", "b"),
        ("BZPOPMAX", "nokey", "y", "0"), ("BZMPOP", "0", "2", "nokey", "y", "MIN", "COUNT", "3"),
        ("BZPOPMIN", "y", "x"), ("BZPOPMIN", "y", "-1"), ("BZPOPMIN", "str", "1"),
        ("BZMPOP", "x", "1", "y", "MIN"), ("BZMPOP", "1", "0", "y", "MIN"),
        ("MULTI",), ("BZPOPMIN", "nokey", "0"), ("BZMPOP", "0", "1", "nokey", "MAX"), ("EXEC",),
    ],
    "remrange": [
        ("ZADD", "z", *[x for i in range(10) for x in (str(i), f"m{i}")]),
        ("ZREMRANGEBYRANK", "z", "0", "1"), ("ZRANGE", "z", "0", "-1"),
        ("ZREMRANGEBYRANK", "z", "-2", "-1"), ("ZREMRANGEBYRANK", "z", "5", "1"),
        ("ZREMRANGEBYRANK", "z", "x", "1"), ("ZREMRANGEBYSCORE", "z", "(3", "5"),
        ("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZREMRANGEBYSCORE", "z", "x", "5"),
        ("ZREMRANGEBYSCORE", "z", "9", "1"), ("ZREMRANGEBYSCORE", "nokey", "1", "2"),
        ("ZREMRANGEBYRANK", "z", "0", "-1"), ("EXISTS", "z"),
    ],
    "algebra": [
        ("ZADD", "a", "1", "x", "2", "y", "3", "z"), ("ZADD", "b", "10", "y", "20", "z", "30", "w"),
        ("SADD", "s", "z", "w", "v"),
        ("ZUNIONSTORE", "out", "2", "a", "b"), ("ZRANGE", "out", "0", "-1", "WITHSCORES"),
        ("ZINTERSTORE", "out", "2", "a", "b", "WEIGHTS", "2", "3", "AGGREGATE", "MAX"),
        ("ZRANGE", "out", "0", "-1", "WITHSCORES"),
        ("ZUNION", "3", "a", "b", "s", "WITHSCORES"), ("ZUNION", "3", "a", "b", "s"),
        ("ZINTER", "2", "a", "s", "WITHSCORES"), ("ZINTER", "3", "a", "b", "s", "AGGREGATE", "MIN", "WITHSCORES"),
        ("ZDIFF", "2", "a", "b", "WITHSCORES"), ("ZDIFF", "2", "b", "s"), ("ZDIFF", "1", "s", "WITHSCORES"),
        ("ZDIFFSTORE", "out", "2", "a", "a"), ("EXISTS", "out"), ("ZDIFFSTORE", "out", "2", "b", "a"),
        ("ZRANGE", "out", "0", "-1", "WITHSCORES"),
        ("ZUNION", "0", "a"), ("ZUNIONSTORE", "out", "0", "a"), ("ZINTERCARD", "0", "a"),
        ("ZUNION", "-1", "a"), ("ZUNION", "x", "a"), ("ZUNION", "3", "a", "b"),
        ("ZUNION", "2", "a", "b", "WEIGHTS", "1"), ("ZUNION", "2", "a", "b", "WEIGHTS", "1", "x"),
        ("ZUNION", "2", "a", "b", "AGGREGATE", "avg"), ("ZUNION", "2", "a", "b", "AGGREGATE"),
        ("ZUNIONSTORE", "out", "2", "a", "b", "WITHSCORES"), ("ZDIFF", "2", "a", "b", "WEIGHTS", "1", "1"),
        ("ZINTERCARD", "2", "a", "b"), ("ZINTERCARD", "2", "a", "b", "LIMIT", "1"),
        ("ZINTERCARD", "2", "a", "b", "LIMIT", "-1"), ("ZINTERCARD", "2", "a", "b", "WITHSCORES"),
        ("ZUNION", "2", "a", "b", "WEIGHTS", "inf", "-inf", "WITHSCORES"),
        ("ZUNION", "2", "a", "b", "WEIGHTS", "0", "inf", "WITHSCORES"),
        ("ZINTER", "2", "a", "b", "WEIGHTS", "inf", "-inf", "WITHSCORES"),
        ("ZUNION", "2", "a", "b", "WEIGHTS", "1.1", "0.3", "WITHSCORES"),
        ("ZUNION", "2", "a", "nokey", "WITHSCORES"), ("ZINTER", "2", "a", "nokey"),
        ("ZUNIONSTORE", "a", "2", "a", "b"), ("ZRANGE", "a", "0", "-1", "WITHSCORES"),
        ("ZUNIONSTORE", "out", "1", "nokey"), ("EXISTS", "out"),
        ("SET", "str", "v"), ("ZUNION", "2", "a", "str"), ("ZUNIONSTORE", "out", "1", "str"),
        ("ZINTERSTORE", "str", "1", "a"), ("TYPE", "str"),
    ],
    "scan": [
        ("ZSCAN", "nokey", "0"), ("ZSCAN", "nokey", "x"),
        ("ZADD", "z", "1.5", "a", "2", "b", "1e17", "c", "-inf", "d", "0.1", "e"),
        ("ZSCAN", "z", "0"), ("ZSCAN", "z", "0", "MATCH", "[ab]"), ("ZSCAN", "z", "0", "COUNT", "1"),
        ("ZSCAN", "z", "0", "COUNT", "0"), ("ZSCAN", "z", "x"), ("ZSCAN", "z", "0", "NOVALUES"),
    ],
    "random": [
        ("ZRANDMEMBER", "nokey"), ("ZRANDMEMBER", "nokey", "3"), ("ZRANDMEMBER", "nokey", "-3", "WITHSCORES"),
        ("ZADD", "z", "1", "a", "2", "b", "3", "c"),
        ("ZRANDMEMBER", "z", "0"), ("ZRANDMEMBER", "z", "0", "WITHSCORES"), ("ZRANDMEMBER", "z", "x"),
        ("ZRANDMEMBER", "z", "1", "FOO"), ("ZRANDMEMBER", "z", "1", "WITHSCORES", "x"),
        ("ZRANDMEMBER", "z", "-9223372036854775808"),
        ("ZRANDMEMBER", "z", "9223372036854775807", "WITHSCORES"),
        ("ZRANDMEMBER", "z", "-4611686018427387904", "WITHSCORES"),
        (U, "ZRANDMEMBER", "z", "3", "WITHSCORES"), (U, "ZRANDMEMBER", "z", "10"),
        ("ZADD", "one", "7", "only"), ("ZRANDMEMBER", "one"), ("ZRANDMEMBER", "one", "-2", "WITHSCORES"),
        ("ZRANDMEMBER", "one", "1", "WITHSCORES"),
    ],
    "wrongtype": [
        ("SET", "s", "v"),
        *[(c, "s", *rest) for c, *rest in [
            ("ZADD", "1", "a"), ("ZINCRBY", "1", "a"), ("ZREM", "a"), ("ZSCORE", "a"), ("ZMSCORE", "a"),
            ("ZCARD",), ("ZCOUNT", "0", "1"), ("ZLEXCOUNT", "-", "+"), ("ZRANGE", "0", "1"),
            ("ZRANGEBYSCORE", "0", "1"), ("ZREVRANGE", "0", "1"), ("ZREVRANGEBYSCORE", "1", "0"),
            ("ZRANGEBYLEX", "-", "+"), ("ZREVRANGEBYLEX", "+", "-"), ("ZRANK", "a"), ("ZREVRANK", "a"),
            ("ZPOPMIN",), ("ZPOPMAX", "2"), ("ZREMRANGEBYRANK", "0", "1"), ("ZREMRANGEBYSCORE", "0", "1"),
            ("ZREMRANGEBYLEX", "-", "+"), ("ZSCAN", "0"), ("ZRANDMEMBER",), ("ZRANDMEMBER", "2"),
            ("BZPOPMIN", "0"), ("BZPOPMAX", "0")]],
        ("ZADD", "s", "x", "a"), ("ZCOUNT", "s", "x", "1"), ("ZRANGEBYLEX", "s", "x", "+"),
        ("ZADD", "z", "1", "a"), ("GET", "z"), ("SADD", "z", "a"), ("HSET", "z", "a", "1"),
        ("SINTER", "z"),
    ],
    "keyspace": [
        ("ZADD", "z", "1", "a", "2", "b"), ("TYPE", "z"), ("OBJECT", "ENCODING", "z"),
        ("SCAN", "0", "TYPE", "zset"), ("EXPIRE", "z", "100"), ("ZADD", "z", "3", "c"),
        ("ZINCRBY", "z", "1", "a"), ("ZREM", "z", "b"), ("TTL", "z"), ("RENAME", "z", "z2"),
        ("ZRANGE", "z2", "0", "-1", "WITHSCORES"), ("TTL", "z2"), ("COPY", "z2", "z3"),
        ("ZADD", "z3", "9", "d"), ("ZCARD", "z2"), ("ZRANGE", "z3", "0", "-1", "WITHSCORES"),
        ("ZRANK", "z3", "d"), ("DEL", "z2", "z3"), ("EXISTS", "z2", "z3"),
        ("ZADD", "big", *[x for i in range(129) for x in (str(i), f"m{i}")]),
        ("OBJECT", "ENCODING", "big"), ("ZADD", "long", "1", "x" * 65), ("OBJECT", "ENCODING", "long"),
        ("PEXPIRE", "big", "1"), (SLEEP, 0.01), ("EXISTS", "big"), ("ZCARD", "big"),
    ],
    "arity": [
        ("ZADD", "z", "1"), ("ZADD", "z"), ("ZINCRBY", "z", "1"), ("ZINCRBY", "z", "1", "a", "b"),
        ("ZREM", "z"), ("ZSCORE", "z"), ("ZMSCORE", "z"), ("ZCARD",), ("ZCOUNT", "z", "1"),
        ("ZLEXCOUNT", "z", "-"), ("ZRANGE", "z", "0"), ("ZRANGESTORE", "d", "z", "0"),
        ("ZRANGEBYSCORE", "z", "0"), ("ZREVRANGE", "z", "0"), ("ZRANGEBYLEX", "z", "-"),
        ("ZRANK", "z"), ("ZREVRANK", "z", "a", "b"), ("ZPOPMIN",), ("ZMPOP", "1", "z"),
        ("BZPOPMIN", "z"), ("BZMPOP", "0", "1", "z"), ("ZREMRANGEBYRANK", "z", "0"),
        ("ZUNIONSTORE", "d", "1"), ("ZUNION", "1"), ("ZINTERCARD", "1"), ("ZSCAN", "z"),
        ("ZRANDMEMBER",),
    ],
}


@pytest.fixture(scope="module")
def server():
    factory = PkvsFactory()
    yield factory.start()
    factory.cleanup()


@pytest.mark.parametrize("proto", [2, 3])
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_like_redis(server, redis_peer, script, proto):
    script_like_redis(server, redis_peer, SCRIPTS[script], proto)


@pytest.mark.parametrize("proto", [2, 3])
def test_pipelined_like_redis(server, redis_peer, proto):
    p = peers(server.resp_port, redis_peer.resp_port, proto)
    cmds = [c for c in SCRIPTS["ranges"] + SCRIPTS["algebra"] if c[0] not in (U, SLEEP)]
    data = b"".join(resp_command(*c) for c in cmds)
    p.pkvs.send(data)
    p.redis.send(data)
    for cmd in cmds:
        got, want = p.pkvs.read_raw(), p.redis.read_raw()
        assert got == want, f"{cmd!r}: pkvs {got!r} != redis {want!r}"
    p.close()


# ---------------------------------------------------------------------------
# Blocking pops
# ---------------------------------------------------------------------------

def test_blocking_pops(server, redis_peer):
    """Clients blocked on empty keys are served by a later ZADD in the
    order they blocked, or time out: the same bytes as Redis's."""
    for proto in (2, 3):
        outs = []
        for port in (server.resp_port, redis_peer.resp_port):
            ctl = RawConn(port, proto)
            ctl.call("FLUSHALL")
            a, b, c = RawConn(port, proto), RawConn(port, proto), RawConn(port, proto)
            a.send(resp_command("BZPOPMIN", "k1", "k2", "0"))
            time.sleep(0.05)
            b.send(resp_command("BZMPOP", "0", "1", "k2", "MAX", "COUNT", "2"))
            time.sleep(0.05)
            c.send(resp_command("BZPOPMAX", "k3", "0.1"))
            time.sleep(0.05)
            got = [ctl.call("ZADD", "k2", "1", "x", "2", "y", "3", "z")]
            got.append(a.read_raw())
            got.append(b.read_raw())
            got.append(c.read_raw())             # timed out
            got.append(ctl.call("ZCARD", "k2"))
            got.append(ctl.call("EXISTS", "k2"))
            a.send(resp_command("BZPOPMAX", "k4", "0"))
            time.sleep(0.05)
            got.append(ctl.call("MULTI"))
            got.append(ctl.call("ZADD", "k4", "5", "m"))
            got.append(ctl.call("ZADD", "k4", "6", "n"))
            got.append(ctl.call("EXEC"))
            got.append(a.read_raw())
            got.append(ctl.call("ZRANGE", "k4", "0", "-1", "WITHSCORES"))
            outs.append(got)
            for conn in (ctl, a, b, c):
                conn.close()
        assert outs[0] == outs[1], (proto, outs)


# ---------------------------------------------------------------------------
# Sizes
# ---------------------------------------------------------------------------

MEMBER_LENS = [0, 1, 32, 392, 393, 400, 401, 512, 513, 1500, 2047, 5000, 60000]


def blob(n, seed):
    return random.Random(seed).randbytes(n)


def test_big_members(server, redis_peer):
    """Members of every size through the sorted-set commands, the same
    replies as Redis's (the members ordered by score first: distinct
    scores, then one score for the lex ranges)."""
    p = peers(server.resp_port, redis_peer.resp_port, 2)
    members = [blob(n, i) + bytes([i]) for i, n in enumerate(MEMBER_LENS)]
    for i, m in enumerate(members):
        p.same("ZADD", "z", str(i * 1.5), m)
        p.same("ZADD", "lex", "0", m)
    p.same("ZCARD", "z")
    for i, m in enumerate(members):
        p.same("ZSCORE", "z", m)
        p.same("ZRANK", "z", m)
        p.same("ZREVRANK", "lex", m)
        p.same("ZINCRBY", "z", "0.25", m)
    for cmd in (("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZREVRANGE", "z", "0", "-1"),
                ("ZRANGEBYSCORE", "z", "3", "+inf", "WITHSCORES", "LIMIT", "1", "5"),
                ("ZMSCORE", "z", *members), ("ZUNION", "2", "z", "lex", "WITHSCORES"),
                ("ZINTER", "2", "z", "lex"), ("ZRANGE", "lex", "0", "-1")):
        p.same(*cmd)
    p.same("ZRANGESTORE", "copy", "z", "0", "-1")
    p.same("ZRANGE", "copy", "0", "-1", "WITHSCORES")
    for m in members[::3]:
        p.same("ZREM", "z", m)
    p.same("ZPOPMIN", "z", "2")
    p.same("ZPOPMAX", "z")
    p.same("ZRANGE", "z", "0", "-1", "WITHSCORES")
    p.close()


def test_union_of_distinct_long_members(server, redis_peer):
    """ZUNION and ZUNIONSTORE of sorted sets whose long members differ:
    the merge's walks each keep their own long name."""
    p = peers(server.resp_port, redis_peer.resp_port, 2)
    for i, c in enumerate(b"abcdef"):
        p.same("ZADD", f"u{i % 3}", str(i), bytes([c]) * (450 + 50 * i))
    p.same("ZUNION", "3", "u0", "u1", "u2", "WITHSCORES")
    p.same("ZUNIONSTORE", "u", "3", "u0", "u1", "u2")
    p.same("ZRANGE", "u", "0", "-1", "WITHSCORES")
    p.close()


def test_members_survive_restart(pkvs):
    srv = pkvs.start()
    members = {blob(n, n) + b"x": float(i) for i, n in enumerate(MEMBER_LENS)}
    with RespConn(srv.resp_port, timeout=20) as c:
        for m, s in members.items():
            assert c.command("ZADD", "one", s, m) == 1
        assert c.command("ZADD", "many", *[x for m, s in members.items() for x in (s, m)]) == len(members)
        assert c.command("ZUNIONSTORE", "u", "2", "one", "many") == len(members)
    store = srv.store
    srv.stop(keep_store=True)
    srv = pkvs.start(store=store)
    want = sorted(members, key=lambda m: (members[m], m))
    with RespConn(srv.resp_port, timeout=20) as c:
        for key, k in (("one", 1), ("many", 1), ("u", 2)):
            assert c.command("ZCARD", key) == len(members)
            got = c.command("ZRANGE", key, "0", "-1", "WITHSCORES")
            assert got[::2] == want
            assert [float(s) for s in got[1::2]] == [members[m] * k for m in want]


def test_limits(server):
    with RespConn(server.resp_port, timeout=20) as c:
        c.command("FLUSHALL")
        r = c.command("ZADD", "z", "1", "a", "2", b"m" * 200000)
        assert isinstance(r, RespError) and "member length" in str(r), r
        assert c.command("EXISTS", "z") == 0


# ---------------------------------------------------------------------------
# Many members, against a model
# ---------------------------------------------------------------------------

def fmt(d):
    if math.isinf(d):
        return b"inf" if d > 0 else b"-inf"
    return (b"%.17g" % d)


def test_large_zset(pkvs):
    srv = pkvs.start(store_size="256M")
    n = 100000
    rng = random.Random(5)
    model = {f"p{i:06d}".encode(): float(rng.randrange(20000)) / 4 for i in range(n)}
    with RespConn(srv.resp_port, timeout=60) as c:
        items = list(model.items())
        for i in range(0, n, 5000):
            assert c.command("ZADD", "z", *[x for m, s in items[i:i + 5000] for x in (s, m)]) == 5000
        order = sorted(model, key=lambda m: (model[m], m))
        rank = {m: i for i, m in enumerate(order)}
        assert c.command("ZCARD", "z") == n
        for m in rng.sample(order, 200):
            assert c.command("ZRANK", "z", m) == rank[m]
            assert c.command("ZREVRANK", "z", m) == n - 1 - rank[m]
            assert c.command("ZSCORE", "z", m) == fmt(model[m])
        for start in (0, 1, 777, 49999, 99990):
            assert c.command("ZRANGE", "z", start, start + 9) == order[start:start + 10]
            assert c.command("ZREVRANGE", "z", start, start + 9) == order[::-1][start:start + 10]
        for lo, hi in ((0, 10), (100.25, 2000), (4999, 5000)):
            inside = [m for m in order if lo <= model[m] <= hi]
            assert c.command("ZCOUNT", "z", lo, hi) == len(inside)
            assert c.command("ZRANGEBYSCORE", "z", lo, hi, "LIMIT", 3, 20) == inside[3:23]
            assert c.command("ZREVRANGEBYSCORE", "z", hi, lo, "LIMIT", 3, 20) == inside[::-1][3:23]
        got = c.command("ZRANGE", "z", "0", "-1", "WITHSCORES")
        assert got[::2] == order and got[1::2] == [fmt(model[m]) for m in order]
        # ZINCRBY moves a member in the order
        m = order[10]
        assert c.command("ZINCRBY", "z", 10000, m) == fmt(model[m] + 10000)
        assert c.command("ZREVRANK", "z", m) == 0
        # removals and pops
        assert c.command("ZREMRANGEBYRANK", "z", 0, 999) == 1000
        assert c.command("ZCARD", "z") == n - 1000
        rest = [x for x in order if x != m]          # m is last now
        popped = c.command("ZPOPMIN", "z", 100)
        assert popped[::2] == rest[1000:1100]
        assert c.command("ZPOPMAX", "z") == [m, fmt(model[m] + 10000)]
        left = n - 1000 - 100 - 1
        assert c.command("ZCARD", "z") == left
        assert c.command("ZCOUNT", "z", "-inf", "+inf") == left
        assert c.command("ZREMRANGEBYSCORE", "z", "-inf", 2500) == len(
            [x for x in rest[1100:] if model[x] <= 2500])
        # one score, by member
        c.command("ZADD", "lex", *[x for i in range(20000) for x in (0, f"w{i:05d}")])
        assert c.command("ZLEXCOUNT", "lex", "[w01000", "(w03000") == 2000
        assert c.command("ZRANGEBYLEX", "lex", "(w10000", "+", "LIMIT", 0, 3) == [b"w10001", b"w10002", b"w10003"]
        assert c.command("ZREVRANGEBYLEX", "lex", "[w10000", "-", "LIMIT", 1, 2) == [b"w09999", b"w09998"]
        assert c.command("ZREMRANGEBYLEX", "lex", "-", "(w10000") == 10000
        assert c.command("ZCARD", "lex") == 10000
        assert c.command("ZRANK", "lex", "w10000") == 0


# ---------------------------------------------------------------------------
# A leaderboard, as an application runs it
# ---------------------------------------------------------------------------

def leaderboard_commands(seed, players=3000, rounds=6):
    rng = random.Random(seed)
    names = [f"player:{i:05d}" for i in range(players)]
    yield ("DEL", "board", "weekly", "top")
    for i in range(0, players, 500):
        yield ("ZADD", "board", *[x for n in names[i:i + 500] for x in (rng.randrange(1000), n)])
    for _ in range(rounds):
        for _ in range(2000):
            n = rng.choice(names)
            kind = rng.random()
            if kind < 0.6:
                yield ("ZINCRBY", "board", rng.choice([1, 5, 10, 25, 0.5, -3]), n)
            elif kind < 0.7:
                yield ("ZADD", "board", "GT", "CH", rng.randrange(1500), n)
            elif kind < 0.8:
                yield ("ZSCORE", "board", n)
            elif kind < 0.9:
                yield ("ZREVRANK", "board", n)
            else:
                yield ("ZRANK", "board", n)
        yield ("ZREVRANGE", "board", 0, 9, "WITHSCORES")
        yield ("ZRANGE", "board", "+inf", 1200, "BYSCORE", "REV", "LIMIT", 0, 20, "WITHSCORES")
        yield ("ZCOUNT", "board", 500, "+inf")
        page = rng.randrange(0, players - 50)
        yield ("ZREVRANGE", "board", page, page + 49, "WITHSCORES")
        yield ("ZUNIONSTORE", "weekly", 2, "board", "weekly", "WEIGHTS", 1, 0.5)
        yield ("ZREVRANGE", "weekly", 0, 4, "WITHSCORES")
        yield ("ZRANGESTORE", "top", "board", 0, 99, "REV")
        yield ("ZCARD", "top")
        yield ("ZMSCORE", "board", *rng.sample(names, 5))
    yield ("ZREVRANGE", "board", 0, -1, "WITHSCORES")


@pytest.mark.parametrize("proto", [2, 3])
def test_leaderboard_like_redis(server, redis_peer, proto):
    """ZADD, ZINCRBY (fractions and negatives: ties broken by name),
    ZREVRANGE WITHSCORES, ZRANK/ZREVRANK, ZSCORE, pages, ZUNIONSTORE of a
    weekly board, pipelined in batches: every reply Redis's, byte for byte."""
    p = peers(server.resp_port, redis_peer.resp_port, proto)
    cmds = list(leaderboard_commands(27))
    for i in range(0, len(cmds), 256):
        batch = cmds[i:i + 256]
        data = b"".join(resp_command(*c) for c in batch)
        p.pkvs.send(data)
        p.redis.send(data)
        for cmd in batch:
            got, want = p.pkvs.read_raw(), p.redis.read_raw()
            assert got == want, f"{cmd!r}: pkvs {got[:200]!r} != redis {want[:200]!r}"
    p.close()


# ---------------------------------------------------------------------------
# kill -9 under load
# ---------------------------------------------------------------------------

class ZsetLoad(KeyLoad):
    """ZADD of 1-4 members (some long), ZINCRBY of one, ZREM of 1-2; an
    item is (key, member), its state the score (None: absent)."""

    # (long members that differ early: ones that share their first 367
    # bytes and a score are in digest order, docs/compat.md)
    MEMBERS = [f"m{i}".encode() for i in range(20)] + [bytes([65 + i]) + b"long" * 150 for i in range(3)]

    def keys(self, tid):
        keys = [f"t{tid}:z{j}".encode() for j in range(3)]
        return keys, {k: {} for k in keys}

    def op(self, tid, seq, rng, keys, scores):
        key = rng.choice(keys)
        kind = rng.random()
        if kind < 0.45:
            ms = rng.sample(self.MEMBERS, rng.choice([1, 1, 2, 4]))
            new = {m: float(rng.randrange(-1000, 1000)) / 8 for m in ms}
            added = sum(1 for m in ms if m not in scores[key])
            return (("ZADD", key) + tuple(x for m, s in new.items() for x in (s, m)),
                    {(key, m): s for m, s in new.items()}, added)
        if kind < 0.8:
            m = rng.choice(self.MEMBERS)
            by = rng.choice([1, -2, 0.5, 100])
            s = scores[key].get(m, 0.0) + by
            return ("ZINCRBY", key, by, m), {(key, m): s}, fmt(s)
        ms = rng.sample(self.MEMBERS, rng.choice([1, 2]))
        return (("ZREM", key) + tuple(ms), {(key, m): None for m in ms},
                sum(1 for m in ms if m in scores[key]))

    def applied(self, scores, states):
        for (k, m), s in states.items():
            if s is None:
                scores[k].pop(m, None)
            else:
                scores[k][m] = s


def check_index(c, key):
    """The score index agrees with the members: ZRANGE's order is by
    (score, member), every score is ZSCORE's, ZCARD/ZCOUNT/ZSCAN agree."""
    flat = c.command("ZRANGE", key, "0", "-1", "WITHSCORES")
    got = {m: float(s) for m, s in zip(flat[::2], flat[1::2])}
    assert len(got) == len(flat) // 2
    assert flat[::2] == sorted(got, key=lambda m: (got[m], m))
    assert c.command("ZCARD", key) == len(got)
    assert c.command("ZCOUNT", key, "-inf", "+inf") == len(got)
    assert c.command("EXISTS", key) == (1 if got else 0)
    for m, s in got.items():
        assert float(c.command("ZSCORE", key, m)) == s
    cursor, scanned = b"0", {}
    while True:
        cursor, items = c.command("ZSCAN", key, cursor, "COUNT", "5")
        scanned.update({m: float(s) for m, s in zip(items[::2], items[1::2])})
        if cursor == b"0":
            break
    assert scanned == got
    return got


def check_zsets(c, load, round_):
    present = {}
    for key in {k for k, _ in load.history}:
        for m, s in check_index(c, key).items():
            present[(key, m)] = s
    bad = [(km[0], km[1][:10], present.get(km)) for km in load.history
           if present.get(km) not in load.allowed(km)]
    assert not bad, f"round {round_}: {len(bad)} members no history allows: {bad[:10]}"
    assert not load.unacked_whole(present), load.unacked_whole(present)[:5]


@pytest.mark.crash
@pytest.mark.slow
def test_kill9_under_zset_load(pkvs):
    kill9_rounds(pkvs, ZsetLoad, check_zsets)
