"""Deadlines in pkvs: the expiry commands against Redis 7's own replies,
and what a durable server adds.

EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (NX, XX, GT, LT and their errors),
TTL, PTTL, EXPIRETIME, PEXPIRETIME and PERSIST run on pkvs and on a
Debian redis-server (tests/e2e/redis_peer.py) in RESP2 and RESP3, replies
compared byte for byte. Then: a deadline in the past deletes the key (a
delete in INFO, not an expiry); a key nobody reads is removed by the
active expiry at its deadline, idle or busy; deadlines are
absolute, so across a restart and across kill -9 a key whose deadline
passed while pkvs was down is gone and the others keep theirs to the
millisecond; a session store (many sessions with TTLs, touched and
rewritten, kill -9, restart) returns no expired session and loses no live
one; and Django's cache framework (django.core.cache.backends.redis.
RedisCache, Django from PyPI; skipped without it) with timeouts,
set_many/get_many, incr, touch and delete_many.
"""
import random
import threading
import time

import pytest
import redis

from conftest import RespConn, wait_until
from redis_peer import peers, redis_peer  # noqa: F401 (fixtures)

PROTOS = [2, 3]




def client(srv, protocol=3, **kw):
    return redis.Redis(host="127.0.0.1", port=srv.resp_port, protocol=protocol, socket_timeout=20, **kw)


EXPIRE_CMDS = [
    ("SET", "a", "1"), ("SET", "b", "2"), ("EXPIRE", "a", "100"), ("TTL", "a"), ("PTTL", "nope"),
    ("TTL", "nope"), ("EXPIRETIME", "b"), ("PEXPIRETIME", "nope"), ("PTTL", "b"),
    ("EXPIRE", "a", "100", "NX"), ("EXPIRE", "a", "200", "XX"), ("TTL", "a"), ("EXPIRE", "b", "200", "XX"),
    ("EXPIRE", "b", "200", "GT"), ("EXPIRE", "b", "200", "LT"), ("TTL", "b"), ("EXPIRE", "b", "100", "GT"),
    ("EXPIRE", "b", "300", "GT"), ("TTL", "b"), ("EXPIRE", "b", "100", "LT"), ("TTL", "b"),
    ("EXPIRE", "b", "100", "LT", "XX"), ("EXPIRE", "b", "100", "nx", "xx"), ("EXPIRE", "b", "100", "GT", "LT"),
    ("EXPIRE", "b", "100", "NX", "GT"), ("EXPIRE", "b", "100", "NX", "LT"), ("EXPIRE", "b", "100", "AB"),
    ("EXPIRE", "b", "100", "XX", "AB"), ("EXPIRE", "b", "abc", "AB"), ("EXPIRE", "b", "abc"),
    ("EXPIRE", "b", ""), ("EXPIRE", "b", "1.5"), ("EXPIRE", "b", "9223370399119966"),
    ("EXPIRE", "b", "9223372036854776"), ("EXPIRE", "b", "10000000000000000"),
    ("EXPIRE", "b", "18446744073709561"), ("EXPIRE", "b", "-9223372036854776"),
    ("EXPIRE", "b", "-9999999999999999"), ("PEXPIRE", "b", "9223372036854770000"),
    ("EXPIREAT", "b", "9223372036854776"), ("TTL", "b"), ("PEXPIREAT", "b", "9223372036854770000"),
    ("PEXPIRETIME", "b"), ("EXPIRETIME", "b"), ("PEXPIREAT", "b", "4102444800123"), ("PEXPIRETIME", "b"),
    ("EXPIRETIME", "b"), ("EXPIREAT", "b", "4102444800"), ("PEXPIRETIME", "b"), ("PERSIST", "b"),
    ("PERSIST", "b"), ("PERSIST", "nope"), ("TTL", "b"), ("EXPIRE", "b", "-10", "LT"), ("EXISTS", "b"),
    ("SET", "c", "1"), ("PEXPIREAT", "c", "-9223372036854770000"), ("TTL", "c"), ("SET", "d", "1"),
    ("EXPIREAT", "d", "1"), ("GET", "d"), ("SET", "d", "1"), ("PEXPIRE", "d", "0"), ("EXISTS", "d"),
    ("SET", "d", "1"), ("EXPIRE", "d", "-1", "NX"), ("EXISTS", "d"), ("SET", "d", "1"),
    ("EXPIRE", "d", "100"), ("EXPIRE", "d", "-1", "GT"), ("EXPIRE", "d", "-1", "XX"), ("EXISTS", "d"),
    ("EXPIRE", "nope", "10"), ("EXPIRE", "nope", "-10"), ("HSET", "h", "f", "v"), ("EXPIRE", "h", "100"),
    ("TTL", "h"), ("PERSIST", "h"), ("TTL", "h"), ("EXPIRE", "h", "0"), ("TYPE", "h"),
    ("SET", "e", "x", "EX", "100"), ("SET", "e", "y"), ("TTL", "e"), ("SET", "e", "x", "EX", "100"),
    ("SET", "e", "z", "KEEPTTL"), ("TTL", "e"), ("GETEX", "e", "PERSIST"), ("TTL", "e"),
    ("EXPIRE",), ("EXPIRE", "a"), ("PEXPIRE", "a"), ("EXPIREAT", "a"), ("PEXPIREAT", "a"), ("TTL",),
    ("TTL", "a", "b"), ("PTTL",), ("EXPIRETIME",), ("PEXPIRETIME", "a", "b"), ("PERSIST",),
    ("PERSIST", "a", "b"),
]


@pytest.mark.parametrize("proto", PROTOS)
def test_replies_match_redis(peers, proto):
    run, _ = peers
    p = run(proto)
    for c in EXPIRE_CMDS:
        p.same(*c)


def info(r):
    return r.info("stats")


def test_past_deadline_deletes_not_expires(pkvs):
    """EXPIRE/PEXPIREAT/GETEX with a deadline already past delete the key at
    once (INFO's expired_keys does not move, as in Redis); a deadline that
    passes later is an expiry, counted when the key is found gone."""
    srv = pkvs.start()
    r = client(srv)
    r.mset({"a": 1, "b": 2, "c": 3, "d": 4})
    base = info(r)["expired_keys"]
    assert r.expire("a", -1) is True
    assert r.pexpireat("b", 1) is True
    assert r.getex("c", exat=1) == b"3"
    assert r.exists("a", "b", "c") == 0
    assert r.dbsize() == 1
    assert info(r)["expired_keys"] == base
    r.set("e", 5, px=30)
    time.sleep(0.06)
    assert r.get("e") is None
    assert info(r)["expired_keys"] == base + 1


def test_active_expiry_of_unread_keys(pkvs):
    """Keys with a 100 ms TTL that nobody reads, in a server left idle:
    the event loop wakes at the first deadline and runs passes back to
    back while more are due (64 keys a pass), so 5,000 of them are gone
    within about half a second of their deadline, before any command
    arrives (at one pass per idle wait it would take ~40 s). Under traffic
    (DBSIZE polled, which counts a key until it is removed) 200 more go
    as fast, and a key without a deadline stays."""
    srv = pkvs.start()
    r = client(srv)
    pipe = r.pipeline(transaction=False)
    for i in range(5000):
        pipe.set(f"idle{i}", i, px=100)
    pipe.execute()
    time.sleep(0.7)
    assert info(r)["expired_keys"] == 5000
    for i in range(200):
        r.set(f"t{i}", i, px=100)
    r.set("stays", 1)
    assert r.dbsize() == 201
    t0 = time.monotonic()
    assert wait_until(lambda: r.dbsize() == 1, 3.0, 0.05), r.dbsize()
    took = time.monotonic() - t0
    assert took < 0.6, took
    assert info(r)["expired_keys"] == 5200
    assert r.get("stays") == b"1"


def test_idle_server_expires_at_the_deadline(pkvs):
    """One key with a 300 ms TTL in an idle server, a keyspace subscriber
    waiting for its "expired" event: it comes within ~100 ms of the
    deadline (the loop's wait ends at the deadline, not at its next
    half-second tick)."""
    srv = pkvs.start()
    r = client(srv)
    r.config_set("notify-keyspace-events", "Ex")
    ps = r.pubsub()
    ps.subscribe("__keyevent@0__:expired")
    assert ps.get_message(timeout=2)["type"] == "subscribe"
    late = []
    for i in range(3):
        r.set(f"k{i}", 1, px=300)
        t0 = time.monotonic()
        m = ps.get_message(timeout=3)
        while m is None or m["type"] != "message":
            m = ps.get_message(timeout=3)
        assert m["data"] == f"k{i}".encode()
        late.append(time.monotonic() - t0 - 0.3)
    ps.close()
    assert max(late) < 0.15, late


def pexpiretimes(r, keys):
    pipe = r.pipeline(transaction=False)
    for k in keys:
        pipe.pexpiretime(k)
    return pipe.execute()


@pytest.mark.parametrize("how", ["restart", pytest.param("kill9", marks=pytest.mark.crash)])
def test_deadlines_are_absolute_across_restarts(pkvs, how):
    """Keys with deadlines 1 s ahead and 1 hour ahead; stopped (SIGTERM or
    kill -9) for longer than the short ones live: after the restart the
    short ones are absent to every command and to SCAN/KEYS/DBSIZE after the
    active expiry, the long ones keep their exact PEXPIRETIME."""
    srv = pkvs.start()
    r = client(srv)
    short = [f"s{i}" for i in range(100)]
    long_ = [f"l{i}" for i in range(100)]
    for k in short:
        r.set(k, "v", px=800)
    for k in long_:
        r.set(k, "v" * 600, ex=3600)
    r.hset("hshort", "f", "v")
    r.pexpire("hshort", 800)
    r.set("forever", 1)
    deadlines = pexpiretimes(r, long_)
    if how == "kill9":
        srv.kill9()
    else:
        srv.stop(keep_store=True)
    time.sleep(1.2)
    srv.start()
    r = client(srv)
    assert r.mget(short) == [None] * len(short)
    assert r.exists("hshort") == 0
    assert r.hgetall("hshort") == {}
    assert pexpiretimes(r, long_) == deadlines
    assert r.mget(long_) == [b"v" * 600] * len(long_)
    assert wait_until(lambda: r.dbsize() == len(long_) + 1, 3.0), r.dbsize()
    assert sorted(r.keys("s*")) == []
    assert r.get("forever") == b"1"


@pytest.mark.crash
@pytest.mark.slow
def test_session_store_across_kill9(pkvs):
    """A session store: 4 clients, each with its own 300 sessions, create
    sessions (SETEX for 1 s or 1 h), touch the long ones (EXPIRE), rewrite
    live ones keeping their deadline (SET XX KEEPTTL), end some (DEL);
    kill -9 under that load; restart 1.5 s later. No session whose
    deadline passed is returned (every short one is gone), and every
    session is in a state its acknowledged writes allow: the last
    acknowledged one, or the one in flight at the kill."""
    srv = pkvs.start(["--checkpoint-records", "500"])
    port = srv.resp_port
    hist = {}                      # key -> [[value or None, acked]]: writes in order
    stop = threading.Event()

    def load(c, seed):
        rnd = random.Random(seed)
        mine = [f"sess:{c}:{i}" for i in range(300)]
        with RespConn(port, timeout=10) as conn:
            n = 0
            while not stop.is_set():
                n += 1
                k = rnd.choice(mine)
                writes = hist.setdefault(k, [])
                last = writes[-1][0] if writes else None
                kind = rnd.random()
                try:
                    if kind < 0.5 or last is None:
                        long_ = rnd.random() < 0.7
                        val = f"{c}:{n}:{'L' if long_ else 'S'}:" + "d" * rnd.choice([30, 300, 900])
                        writes.append([val, False])
                        conn.command("SETEX", k, 3600 if long_ else 1, val)
                    elif kind < 0.65:
                        if ":L:" in last:
                            conn.command("EXPIRE", k, 3600)
                        continue
                    elif kind < 0.9:
                        val = f"{c}:{n}:{last.split(':')[2]}:" + "r" * rnd.choice([30, 900])
                        writes.append([val, False])
                        if conn.command("SET", k, val, "XX", "KEEPTTL") is None:
                            writes.pop()               # it had expired: nothing written
                            continue
                    else:
                        writes.append([None, False])
                        conn.command("DEL", k)
                except Exception:
                    return
                writes[-1][1] = True
    threads = [threading.Thread(target=load, args=(c, c * 7919 + 1)) for c in range(4)]
    for t in threads:
        t.start()
    time.sleep(2.0)
    srv.kill9()
    stop.set()
    for t in threads:
        t.join()
    time.sleep(1.5)
    srv.start()
    r = client(srv, 2)
    live = 0
    for k, writes in hist.items():
        got = r.get(k)
        got = got.decode() if got is not None else None
        last = max((i for i, (_, acked) in enumerate(writes) if acked), default=-1)
        allowed = {w for w, _ in writes[max(last, 0):]} | ({None} if last < 0 else set())
        # A short session (1 s) has expired by now, whatever happened.
        allowed = {w if (w is None or ":L:" in w) else None for w in allowed}
        assert got in allowed, (k, got, writes[-3:])
        if got is not None:
            live += 1
            assert 3000 < r.ttl(k) <= 3600
    assert live > 50, live


@pytest.fixture
def django_cache(pkvs):
    """Django's cache framework on pkvs: RedisCache with a 300 s default
    (skipped when Django is not installed: scripts/install-deps.sh)."""
    django = pytest.importorskip("django", minversion="4.0",
                                 reason="Django 4 or later (PyPI) is not installed")
    from django.conf import settings
    if not settings.configured:
        settings.configure()
        django.setup()
    from django.core.cache.backends.redis import RedisCache
    srv = pkvs.start()
    cache = RedisCache(f"redis://127.0.0.1:{srv.resp_port}/0", {"TIMEOUT": 300})
    yield cache, srv
    cache.close()


def test_django_cache(django_cache):
    cache, srv = django_cache
    r = client(srv)
    cache.set("greeting", "hello")
    assert cache.get("greeting") == "hello"
    key = cache.make_key("greeting")
    assert 295 < r.ttl(key) <= 300
    cache.set("short", {"a": [1, 2]}, timeout=1)
    assert cache.get("short") == {"a": [1, 2]}
    cache.set("forever", 42, timeout=None)
    assert r.ttl(cache.make_key("forever")) == -1
    assert cache.add("greeting", "other") is False
    assert cache.add("new", "x", timeout=10) is True
    assert cache.get_or_set("lazy", lambda: "made", timeout=10) == "made"
    failed = cache.set_many({"m1": 1, "m2": "two", "m3": 3.5}, timeout=2)
    assert failed == []
    assert cache.get_many(["m1", "m2", "m3", "nope"]) == {"m1": 1, "m2": "two", "m3": 3.5}
    assert 0 < r.pttl(cache.make_key("m1")) <= 2000
    cache.set("n", 10)
    assert cache.incr("n") == 11
    assert cache.incr("n", 5) == 16
    assert cache.decr("n", 6) == 10
    with pytest.raises(ValueError):
        cache.incr("missing")
    assert cache.touch("greeting", 1000) is True
    assert 995 < r.ttl(key) <= 1000
    assert cache.touch("greeting", None) is True
    assert r.ttl(key) == -1
    assert cache.touch("missing", 10) is False
    assert cache.has_key("m2")
    cache.delete_many(["m1", "m2"])
    assert cache.get_many(["m1", "m2", "m3"]) == {"m3": 3.5}
    assert cache.delete("m3") is True
    assert cache.delete("m3") is False
    time.sleep(1.1)
    assert cache.get("short") is None
    assert cache.get("short", "default") == "default"
    time.sleep(1.0)
    assert cache.get("m3") is None
    cache.set("zero", "gone", timeout=0)          # Django: 0 expires at once
    assert cache.get("zero") is None
    cache.clear()
    assert cache.get("greeting") is None and r.dbsize() == 0
