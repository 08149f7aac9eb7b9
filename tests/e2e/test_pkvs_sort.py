"""pkvs's SORT and SORT_RO (services/cmd_sort.c).

- SORT over lists, sets and sorted sets, numeric and ALPHA, ASC and DESC,
  LIMIT, BY patterns (a string key, a hash's field, a constant: the
  container's order), GET patterns (#, keys, fields, missing ones), STORE
  (a new list, an empty result deleting the destination, the deadline
  dropped), option errors in Redis's order, WRONGTYPE, SORT_RO, inside
  MULTI and a script: byte for byte against Debian's redis-server 7.0.15
  in RESP2 and RESP3.
- Keyspace events of STORE (sortstore, del), a BLPOP served by the list
  STORE creates, a WATCH broken by STORE, large elements and values (sent
  from and stored by reference to their buffers), and STORE's result after
  a restart.
"""
import time

import pytest

from conftest import PkvsFactory, RespConn, resp_command, run_tool
from redis_peer import flushed_peers as peers, redis_peer  # noqa: F401 (redis_peer: a fixture)


SETUP = [
    ("RPUSH", "l", "3", "1", "2", "10", "-5", "1.5", "1"),
    ("MSET", "w_3", "30", "w_1", "10", "w_2", "20", "w_10", "5", "w_-5", "x", "w_1.5", "7"),
    ("HSET", "h_1", "f", "one", "n", "4"), ("HSET", "h_2", "f", "two", "n", "3"),
    ("HSET", "h_3", "f", "three"), ("HSET", "h_10", "n", "1"),
    ("SADD", "si", "5", "3", "10", "-1", "7"),
    ("SADD", "ss", "pear", "apple", "fig", "kiwi"),
    ("ZADD", "z", "3", "a", "1", "b", "2", "c", "-inf", "lo", "inf", "hi"),
    ("ZADD", "zn", "1", "30", "2", "20", "3", "10"),
    ("MSET", "wz_a", "2", "wz_b", "2", "wz_c", "1", "wz_lo", "9", "wz_hi", "0"),
    ("SET", "str", "v"),
]

SCRIPTS = {
    "lists": [
        ("SORT", "l"), ("SORT", "l", "DESC"), ("SORT", "l", "ASC"), ("SORT", "l", "ALPHA"),
        ("SORT", "l", "ALPHA", "DESC"), ("SORT", "l", "LIMIT", "1", "3"),
        ("SORT", "l", "LIMIT", "-2", "3"), ("SORT", "l", "LIMIT", "5", "100"),
        ("SORT", "l", "LIMIT", "7", "1"), ("SORT", "l", "LIMIT", "100", "1"),
        ("SORT", "l", "LIMIT", "0", "0"), ("SORT", "l", "LIMIT", "2", "-1"),
        ("SORT", "l", "LIMIT", "2", "-7"), ("SORT", "l", "DESC", "LIMIT", "1", "2"),
        ("SORT", "l", "BY", "nosort"), ("SORT", "l", "BY", "nosort", "DESC"),
        ("SORT", "l", "BY", "nosort", "LIMIT", "2", "3"),
        ("SORT", "l", "BY", "nosort", "DESC", "LIMIT", "2", "3"),
        ("SORT", "l", "BY", "nosort", "LIMIT", "9", "3"),
        ("SORT", "l", "BY", "const", "ALPHA"), ("SORT", "nokey"), ("SORT", "nokey", "BY", "x"),
        ("RPUSH", "ints", "20", "3", "-1", "3"), ("SORT", "ints"), ("SORT", "ints", "ALPHA"),
        ("RPUSH", "odd", "", " 5", "0x10", "1e2", "-0"), ("SORT", "odd"), ("SORT", "odd", "DESC"),
    ],
    "by_get": [
        ("SORT", "l", "BY", "w_*", "LIMIT", "0", "6"), ("SORT", "l", "BY", "h_*->n"),
        ("SORT", "l", "BY", "h_*->n", "DESC"), ("SORT", "l", "BY", "h_*->f", "ALPHA"),
        ("SORT", "l", "BY", "h_*->f", "ALPHA", "DESC"), ("SORT", "l", "BY", "w_*", "ALPHA"),
        ("SORT", "l", "BY", "nokey_*"), ("SORT", "l", "BY", "w_*"),
        ("SORT", "l", "GET", "#"), ("SORT", "l", "GET", "w_*"), ("SORT", "l", "GET", "foo"),
        ("SORT", "l", "GET", "#", "GET", "w_*", "GET", "h_*->f", "GET", "h_*->nofield"),
        ("SORT", "l", "GET", "h_*->"), ("SORT", "l", "GET", "h_*-"), ("SORT", "l", "GET", "str"),
        ("SORT", "l", "GET", "*"), ("SORT", "l", "GET", "w_*", "LIMIT", "2", "2", "DESC"),
        ("SORT", "l", "BY", "nosort", "GET", "#", "GET", "h_*->n"),
        ("SORT", "l", "BY", "h_*->n", "GET", "h_*->f", "LIMIT", "1", "2"),
        ("SORT", "si", "GET", "#"), ("SORT", "si", "BY", "w_*", "GET", "#", "GET", "w_*"),
        ("SET", "k_3", "x"), ("HSET", "k_1", "f", "v"), ("SORT", "l", "GET", "k_*", "GET", "k_*->f"),
        ("SORT", "l", "GET", "#", "BY", "w_*", "GET", "#"),
        ("SORT", "l", "BY", "w_*", "BY", "nosort"), ("SORT", "l", "BY", "nosort", "BY", "w_*"),
    ],
    "sets_zsets": [
        ("SORT", "si"), ("SORT", "si", "DESC"), ("SORT", "si", "ALPHA"),
        ("SORT", "si", "LIMIT", "1", "2"), ("SORT", "si", "BY", "nosort"),
        ("SORT", "si", "BY", "nosort", "LIMIT", "1", "3"), ("SORT", "ss", "ALPHA"),
        ("SORT", "ss", "ALPHA", "DESC", "LIMIT", "0", "2"), ("SORT", "ss"),
        ("SORT", "z"), ("SORT", "z", "ALPHA"), ("SORT", "z", "ALPHA", "DESC"),
        ("SORT", "z", "BY", "nosort"), ("SORT", "z", "BY", "nosort", "DESC"),
        ("SORT", "z", "BY", "nosort", "LIMIT", "1", "2"),
        ("SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "2"),
        ("SORT", "z", "BY", "nosort", "LIMIT", "5", "2"), ("SORT", "z", "BY", "wz_*"),
        ("SORT", "z", "BY", "wz_*", "DESC", "GET", "#", "GET", "wz_*"),
        ("SORT", "zn"), ("SORT", "zn", "DESC", "LIMIT", "0", "2"), ("SORT", "zn", "BY", "nosort"),
        ("SORT_RO", "z", "BY", "nosort", "GET", "#", "GET", "wz_*"),
        ("SORT_RO", "si", "DESC", "LIMIT", "0", "3"),
    ],
    "store": [
        ("SORT", "l", "STORE", "d"), ("LRANGE", "d", "0", "-1"), ("TYPE", "d"),
        ("SORT", "l", "BY", "w_*", "GET", "#", "GET", "w_*", "GET", "h_*->f", "STORE", "d"),
        ("LRANGE", "d", "0", "-1"), ("LLEN", "d"),
        ("SORT", "ss", "BY", "nosort", "STORE", "d"), ("LRANGE", "d", "0", "-1"),
        ("SORT", "ss", "BY", "nosort", "DESC", "STORE", "d"), ("LRANGE", "d", "0", "-1"),
        ("SORT", "si", "BY", "const", "GET", "#", "GET", "w_*", "STORE", "d"), ("LRANGE", "d", "0", "-1"),
        ("SORT", "z", "BY", "nosort", "DESC", "STORE", "d"), ("LRANGE", "d", "0", "-1"),
        ("EXPIRE", "d", "100"), ("SORT", "l", "LIMIT", "0", "2", "STORE", "d"), ("TTL", "d"),
        ("SORT", "l", "LIMIT", "0", "0", "STORE", "d"), ("EXISTS", "d"),
        ("SORT", "nokey", "STORE", "d"), ("EXISTS", "d"),
        ("SORT", "l", "STORE", "str2"), ("SET", "str2", "x"), ("SORT", "l", "STORE", "str2"),
        ("TYPE", "str2"), ("SORT", "l", "STORE", "l"), ("LRANGE", "l", "0", "-1"),
        ("SORT", "l", "STORE", "x", "STORE", "y"), ("EXISTS", "x", "y"),
        ("SORT", "si", "STORE", "si"), ("TYPE", "si"), ("LRANGE", "si", "0", "-1"),
        ("SORT", "ss", "STORE", "d"), ("EXISTS", "d"),
    ],
    "errors": [
        ("SORT",), ("SORT_RO",), ("SORT", "str"), ("SORT", "h_1"), ("SORT_RO", "str"),
        ("SORT", "str", "FOO"), ("SORT", "l", "FOO"), ("SORT", "l", "LIMIT"),
        ("SORT", "l", "LIMIT", "1"), ("SORT", "l", "LIMIT", "x", "1"),
        ("SORT", "l", "LIMIT", "1", "x"), ("SORT", "l", "LIMIT", "1", "99999999999999999999"),
        ("SORT", "l", "BY"), ("SORT", "l", "GET"), ("SORT", "l", "STORE"),
        ("SORT_RO", "l", "STORE", "d"), ("SORT", "str", "LIMIT", "x", "1"),
        ("SORT", "ss"), ("SORT", "ss", "STORE", "d"), ("EXISTS", "d"),
        ("SORT", "l", "BY", "w_*"), ("SORT", "l", "BY", "w_*", "STORE", "d"), ("EXISTS", "d"),
        ("SET", "big", "1e400"), ("SADD", "one", "big"), ("SORT", "one", "BY", "*"),
        ("SET", "nan", "nan"), ("SADD", "two", "nan"), ("SORT", "two", "BY", "*"),
        ("SORT", "one", "BY", "*", "ALPHA"), ("SORT", "str", "BY", "nosort"),
    ],
    "multi_script": [
        ("MULTI",), ("SORT", "l"), ("SORT", "l", "STORE", "d"), ("SORT", "str"),
        ("SORT", "z", "BY", "nosort", "GET", "wz_*"), ("LRANGE", "d", "0", "-1"), ("EXEC",),
        ("EVAL", "return redis.call('sort', KEYS[1], 'by', 'nosort')", "1", "ss"),
        ("EVAL", "return redis.call('sort', KEYS[1], 'by', '_', 'get', '#', 'get', 'w_*')", "1", "si"),
        ("EVAL", "return redis.call('sort', KEYS[1], 'desc')", "1", "si"),
        ("EVAL", "return redis.call('sort', KEYS[1], 'by', 'nosort', 'desc')", "1", "z"),
        ("EVAL", "return redis.call('sort', KEYS[1], 'by', 'nosort')", "1", "l"),
        ("EVAL", "return redis.call('sort_ro', KEYS[1], 'alpha', 'limit', 0, 2)", "1", "ss"),
        ("EVAL", "return redis.call('sort', KEYS[1], 'store', KEYS[2])", "2", "l", "d"),
        ("LRANGE", "d", "0", "-1"),
        ("EVAL_RO", "return redis.call('sort', KEYS[1])", "1", "l"),
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
    p = peers(server.resp_port, redis_peer.resp_port, proto)
    try:
        for cmd in SETUP + SCRIPTS[script]:
            p.same(*cmd)
    finally:
        p.close()


def test_command_info_and_getkeys_like_redis(server, redis_peer):
    """COMMAND GETKEYS finds STORE's key as Redis's sortGetKeys does (the
    last STORE, LIMIT's and GET's arguments skipped)."""
    p = peers(server.resp_port, redis_peer.resp_port, 2)
    try:
        for args in [("sort", "abc"), ("sort", "abc", "store", "def"),
                     ("sort", "abc", "store", "invalid", "store", "stillbad", "store", "def"),
                     ("sort", "abc", "get", "store", "x"), ("sort", "abc", "limit", "store", "1", "2"),
                     ("sort", "abc", "store"), ("sort_ro", "abc"), ("sort_ro", "abc", "store", "d")]:
            p.same("COMMAND", "GETKEYS", *args)
            p.same("COMMAND", "GETKEYSANDFLAGS", *args)
        p.same("COMMAND", "GETKEYS", "sort")
    finally:
        p.close()


def test_large_values_like_redis(server, redis_peer):
    """Elements and GET values over 512 bytes: replied from their buffers,
    stored by reference, the same bytes as Redis's."""
    p = peers(server.resp_port, redis_peer.resp_port, 2)
    try:
        vals = [(b"%05d" % i) * n for i, n in enumerate([1, 200, 3000, 8000, 5, 700])]
        p.same("RPUSH", "l", *vals)
        for i, v in enumerate(vals):
            p.same("SET", b"v_" + v, v[::-1] * 2)
            p.same("HSET", b"h_" + v, "f", v * 3)
        p.same("SORT", "l", "ALPHA")
        p.same("SORT", "l", "ALPHA", "GET", "#", "GET", "v_*", "GET", "h_*->f")
        p.same("SORT", "l", "BY", "v_*", "ALPHA", "DESC", "GET", "v_*")
        p.same("SORT", "l", "ALPHA", "GET", "v_*", "GET", "h_*->f", "GET", "#", "STORE", "d")
        p.same("LRANGE", "d", "0", "-1")
        p.same("LPOP", "d", "4")
        p.same("LRANGE", "d", "0", "-1")
        p.same("SORT", "l", "BY", "nosort", "LIMIT", "2", "3", "DESC")
    finally:
        p.close()


def test_store_events_watch_and_blpop(server):
    """STORE's keyspace events (sortstore; del for an empty result over a
    key, nothing over no key), a WATCH it breaks even with an empty
    result, and a BLPOP served by the list it creates."""
    with RespConn(server.resp_port) as c, RespConn(server.resp_port) as sub, \
            RespConn(server.resp_port) as w:
        c.command("FLUSHALL")
        c.command("CONFIG", "SET", "notify-keyspace-events", "KEA")
        try:
            sub.command("PSUBSCRIBE", "__keyevent@0__:*")
            c.command("RPUSH", "src", "b", "a")
            assert c.command("SORT", "src", "ALPHA", "STORE", "dst") == 2
            assert c.command("SORT", "nokey", "STORE", "dst") == 0
            assert c.command("SORT", "nokey", "STORE", "dst") == 0
            c.command("SET", "marker", "1")
            got = []
            while len(got) < 4:
                m = sub.read_reply()
                got.append((m[2].decode(), m[3].decode()))
            assert got == [("__keyevent@0__:rpush", "src"), ("__keyevent@0__:sortstore", "dst"),
                           ("__keyevent@0__:del", "dst"), ("__keyevent@0__:set", "marker")]
        finally:
            c.command("CONFIG", "SET", "notify-keyspace-events", "")
        # WATCH: an empty result deletes the key it is stored over
        c.command("RPUSH", "foo", "bar")
        assert w.command("WATCH", "foo") == "OK"
        assert c.command("SORT", "nokey", "STORE", "foo") == 0
        assert w.command("MULTI") == "OK"
        w.command("PING")
        assert w.command("EXEC") is None
        # a BLPOP waiting on the destination is served by the STORE
        w.send(resp_command("BLPOP", "served", "5"))
        time.sleep(0.2)
        c.command("RPUSH", "notfoo", "b", "a", "c")
        assert c.command("SORT", "notfoo", "ALPHA", "STORE", "served") == 3
        assert w.read_reply() == [b"served", b"a"]
        assert c.command("LRANGE", "served", "0", "-1") == [b"b", b"c"]


def test_store_survives_restart(pkvs):
    """A stored result is durable: after a restart it is the list STORE
    answered, and the store checks clean."""
    srv = pkvs.start()
    with RespConn(srv.resp_port, timeout=20) as c:
        c.command("RPUSH", "src", *[str(i) for i in range(2000, 0, -1)])
        for i in range(1, 2001, 7):
            c.command("SET", f"w_{i}", b"x" * (i % 900))
        assert c.command("SORT", "src", "STORE", "sorted") == 2000
        assert c.command("SORT", "src", "GET", "w_*", "LIMIT", "0", "700", "STORE", "got") == 700
        c.command("SET", "over", "old")
        assert c.command("SORT", "src", "LIMIT", "0", "3", "STORE", "over") == 3
        want = (c.command("LRANGE", "sorted", "0", "-1"), c.command("LRANGE", "got", "0", "-1"))
        assert want[0] == [str(i).encode() for i in range(1, 2001)]
    srv.stop(keep_store=True)
    srv = pkvs.start(store=srv.store)
    with RespConn(srv.resp_port, timeout=20) as c:
        assert (c.command("LRANGE", "sorted", "0", "-1"), c.command("LRANGE", "got", "0", "-1")) == want
        assert c.command("LRANGE", "over", "0", "-1") == [b"1", b"2", b"3"]
        assert c.command("TYPE", "over") == "list"
    srv.stop(keep_store=True)
    cp = run_tool("--store", srv.store, "check")
    assert cp.returncode == 0, cp.stdout + cp.stderr
