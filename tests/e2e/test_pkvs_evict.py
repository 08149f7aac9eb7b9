"""pkvs's maxmemory (services/kv_evict.c): the bound on the dataset INFO
used_memory reports, Redis's eviction policies and OBJECT IDLETIME / FREQ.

- CONFIG SET/GET of maxmemory (Redis's units), maxmemory-policy,
  maxmemory-samples, lfu-log-factor, lfu-decay-time and their errors, byte
  for byte against Debian's redis-server; the same settings as flags.
- noeviction: over the bound, commands that add data get Redis's OOM words
  (a streamed SET too); reads and deletes go on.
- Each policy evicts the right kind of key: LRU the idle ones, LFU the
  rarely read ones, volatile-* only keys with a deadline (the others stay,
  and writes are refused once none is left), volatile-ttl the soonest
  deadlines; random ones any key of their kind.
- An eviction is a DEL: "evicted" keyspace events (class e), WATCH
  touched, INFO evicted_keys, and after kill -9 no evicted key is back.
- OBJECT IDLETIME and FREQ: TTL, TYPE, EXISTS and OBJECT leave the access
  time alone, TOUCH and GET renew it; FREQ only under an lfu policy and
  IDLETIME not under one, in Redis's words.
"""
import http.client
import socket
import time

import pytest
import redis

from conftest import resp_command, wait_until
from redis_peer import flushed_peers, RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)

OOM = "OOM command not allowed when used memory > 'maxmemory'."
VAL = b"v" * 1000


def client(srv, **kw):
    return redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=30, **kw)


def policy_client(pkvs, policy):
    """A client of a fresh pkvs whose maxmemory-policy is policy."""
    r = client(pkvs.start())
    r.config_set("maxmemory-policy", policy)
    return r


def used(r):
    return int(r.info("memory")["used_memory"])


def fill(r, prefix, n, ttl=None, db=None):
    p = r.pipeline(transaction=False)
    for i in range(n):
        if ttl is None:
            p.set(f"{prefix}{i}", VAL)
        else:
            p.set(f"{prefix}{i}", VAL, ex=ttl + i)
    p.execute()


def alive(r, prefix, n):
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.exists(f"{prefix}{i}")
    return sum(p.execute())


def streamed_set(srv, key, value):
    """SET key value sent in pieces, so that pkvs streams the value into
    held buffers; the reply's bytes."""
    s = socket.create_connection(("127.0.0.1", srv.resp_port))
    s.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n" % (len(key), key, len(value)))
    for at in range(0, len(value), 16384):
        s.sendall(value[at:at + 16384])
        time.sleep(0.001)
    s.sendall(b"\r\n")
    got = b""
    while not got.endswith(b"\r\n"):
        got += s.recv(4096)
    s.close()
    return got


def lower_by(r, keys):
    """Set maxmemory so that about `keys` keys of VAL must go, and wait
    until they went: CONFIG SET evicts for at most its time limit (500 us
    at the default tenacity, less than 120 keys in a slow build), each
    later pass the rest."""
    bound = used(r) - keys * (len(VAL) + 48)
    r.config_set("maxmemory", str(bound))
    assert wait_until(lambda: used(r) <= bound, timeout=10)


# ------------------------------------------------------------- settings

def test_config_against_redis(pkvs, redis_peer):  # noqa: F811
    srv = pkvs.start()
    p = flushed_peers(srv.resp_port, redis_peer.resp_port)
    try:
        for v in ("100mb", "1gb", "10k", "10kb", "12345", "1G", "0"):
            p.same("CONFIG", "SET", "maxmemory", v)
            p.same("CONFIG", "GET", "maxmemory")
        for pol in ("volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
                    "allkeys-lru", "allkeys-lfu", "ALLKEYS-RANDOM", "noeviction"):
            p.same("CONFIG", "SET", "maxmemory-policy", pol)
            p.same("CONFIG", "GET", "maxmemory-policy")
        for name, v in (("maxmemory-samples", "10"), ("lfu-log-factor", "0"),
                        ("lfu-decay-time", "7"), ("maxmemory-eviction-tenacity", "20")):
            p.same("CONFIG", "SET", name, v)
            p.same("CONFIG", "GET", name)
        for name, v in (("maxmemory", "-1"), ("maxmemory", "ten"), ("maxmemory-policy", "lru"),
                        ("maxmemory-samples", "0"), ("maxmemory-samples", "x"),
                        ("lfu-log-factor", "-1"), ("lfu-decay-time", "-5"),
                        ("maxmemory-eviction-tenacity", "101")):
            got = p.same("CONFIG", "SET", name, v)
            assert got.startswith(b"-ERR CONFIG SET failed"), got
        p.same("CONFIG", "SET", "maxmemory-samples", "3", "lfu-log-factor", "-1")
        p.same("CONFIG", "GET", "maxmemory-samples")      # all or nothing
        p.same("CONFIG", "SET", "maxmemory-samples", "5", "lfu-log-factor", "10",
               "lfu-decay-time", "1", "maxmemory-eviction-tenacity", "10")
    finally:
        for c in (p.pkvs, p.redis):
            c.call("CONFIG", "SET", "maxmemory", "0", "maxmemory-policy", "noeviction")
        p.close()


def test_flags_at_start(pkvs, tmp_path):
    conf = tmp_path / "pkvs.conf"
    conf.write_text("maxmemory-samples = 7\nlfu-decay-time = 3\nmaxmemory-clients = 25%\n")
    srv = pkvs.start(["--config", str(conf), "--maxmemory", "32mb", "--maxmemory-policy",
                      "allkeys-lfu", "--lfu-log-factor", "4"])
    r = client(srv, decode_responses=True)
    assert r.config_get("maxmemory") == {"maxmemory": str(32 << 20)}
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "allkeys-lfu"}
    assert r.config_get("maxmemory-samples") == {"maxmemory-samples": "7"}
    assert r.config_get("lfu-log-factor") == {"lfu-log-factor": "4"}
    assert r.config_get("lfu-decay-time") == {"lfu-decay-time": "3"}
    assert r.config_get("maxmemory-clients") == {"maxmemory-clients": "25%"}
    m = r.info("memory")
    assert m["maxmemory_policy"] == "allkeys-lfu" and m["maxmemory"] == 32 << 20
    for args in (["--maxmemory", "lots"], ["--maxmemory-policy", "lru"],
                 ["--maxmemory-samples", "0"], ["--maxmemory-clients", "101%"]):
        code, err = pkvs.start_failing(args)
        assert code == 2 and args[0] in err, (args, code, err)


# ----------------------------------------------------------- noeviction

def test_noeviction_refuses_writes_in_redis_words(pkvs):
    srv = pkvs.start()
    r = client(srv, decode_responses=True)
    fill(r, "k", 50)
    r.config_set("maxmemory", str(used(r) - 100))
    try:
        for proto in (2, 3):
            c = RawConn(srv.resp_port, proto)
            for cmd in (("SET", "k0", "x"), ("SET", "new", "x"), ("INCR", "n"),
                        ("LPUSH", "l", "a"), ("APPEND", "k1", "y"), ("HSET", "h", "f", "v")):
                assert c.call(*cmd) == b"-" + OOM.encode() + b"\r\n", cmd
            c.close()
        # A value streamed into held buffers is refused the same way.
        assert streamed_set(srv, b"big", b"b" * (256 << 10)) == b"-" + OOM.encode() + b"\r\n"
        # The HTTP front end's PUT: 507, as for a full store.
        h = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        h.request("PUT", "/kv/viahttp", body=b"x" * 100)
        assert h.getresponse().status == 507
        h.close()
        # Reads, deletes and writes that add nothing go on.
        assert r.get("k0") == VAL.decode()
        assert r.expire("k2", 100) is True
        assert r.delete("k3") == 1
        assert r.info("stats")["evicted_keys"] == 0 and r.dbsize() == 49
    finally:
        r.config_set("maxmemory", "0")
    assert r.set("new", "x") is True


# --------------------------------------------------------- the policies

def test_allkeys_lru_evicts_the_idle_keys(pkvs):
    srv = pkvs.start()
    r = client(srv)
    r.config_set("maxmemory-samples", "10")
    fill(r, "cold", 200)
    fill(r, "hot", 100)
    time.sleep(2.2)                      # idle times are in seconds
    for _ in range(2):
        p = r.pipeline(transaction=False)
        for i in range(100):
            p.get(f"hot{i}")
        p.execute()
    r.config_set("maxmemory-policy", "allkeys-lru")
    lower_by(r, 100)
    assert r.info("stats")["evicted_keys"] >= 90
    assert alive(r, "hot", 100) >= 97
    assert alive(r, "cold", 200) <= 110
    assert used(r) <= int(r.config_get("maxmemory")["maxmemory"])
    r.config_set("maxmemory", "0")


def test_allkeys_lfu_evicts_the_rarely_read_keys(pkvs):
    r = policy_client(pkvs, "allkeys-lfu")
    fill(r, "rare", 200)
    fill(r, "often", 100)
    for _ in range(30):
        p = r.pipeline(transaction=False)
        for i in range(100):
            p.get(f"often{i}")
        p.execute()
    assert r.object("freq", "often7") > r.object("freq", "rare7")
    lower_by(r, 100)
    assert alive(r, "often", 100) >= 97
    assert alive(r, "rare", 200) <= 110
    r.config_set("maxmemory", "0")


@pytest.mark.parametrize("policy", ["volatile-lru", "volatile-lfu", "volatile-random"])
def test_volatile_policies_never_touch_keys_without_ttl(pkvs, policy):
    r = policy_client(pkvs, policy)
    fill(r, "keep", 100)
    fill(r, "vol", 100, ttl=1000)
    lower_by(r, 50)
    assert r.info("stats")["evicted_keys"] >= 45
    assert alive(r, "keep", 100) == 100
    assert 40 <= alive(r, "vol", 100) <= 55
    # More volatile keys push the older ones out, never a persistent one.
    fill(r, "more", 100, ttl=5000)
    assert alive(r, "keep", 100) == 100
    # Once no key has a deadline left, writes are refused.
    r.config_set("maxmemory", str(100 * (len(VAL) + 48)))
    with pytest.raises(redis.ResponseError, match="^command not allowed when used memory"):
        r.set("one-more", VAL)
    assert alive(r, "keep", 100) == 100
    assert alive(r, "vol", 100) == alive(r, "more", 100) == 0
    r.config_set("maxmemory", "0")


def test_volatile_ttl_evicts_the_soonest_deadlines(pkvs):
    r = policy_client(pkvs, "volatile-ttl")
    fill(r, "keep", 50)
    fill(r, "t", 100, ttl=1000)          # t0 expires first, t99 last
    lower_by(r, 30)
    n = r.info("stats")["evicted_keys"]
    assert 25 <= n <= 35
    assert alive(r, "keep", 50) == 50
    gone = [i for i in range(100) if not r.exists(f"t{i}")]
    assert gone == list(range(n))
    r.config_set("maxmemory", "0")


@pytest.mark.parametrize("policy", ["allkeys-random", "allkeys-lru"])
def test_allkeys_policies_evict_keys_without_ttl(pkvs, policy):
    srv = pkvs.start()
    r = client(srv)
    r.config_set("maxmemory-policy", policy)
    fill(r, "a", 100)
    r.select(2)
    fill(r, "b", 100)                    # every database is a candidate
    lower_by(r, 120)
    left = alive(r, "b", 100)
    r.select(0)
    left += alive(r, "a", 100)
    assert 70 <= left <= 85
    # Writes go on under the bound: old keys make room (HTTP PUTs too).
    fill(r, "c", 100)
    h = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    h.request("PUT", "/kv/viahttp", body=VAL)
    assert h.getresponse().status in (200, 201, 204)
    h.close()
    assert used(r) <= int(r.config_get("maxmemory")["maxmemory"]) + len(VAL) + 200
    r.config_set("maxmemory", "0")


# --------------------------------------------- an eviction is a delete

def test_evicted_events_watch_and_stats(pkvs):
    srv = pkvs.start()
    r = client(srv)
    r.config_set("notify-keyspace-events", "Ee")
    sub = RawConn(srv.resp_port)
    sub.call("PSUBSCRIBE", "*")
    r.select(3)
    r.set("foo", "bar")
    w = client(srv, db=3)
    pipe = w.pipeline(transaction=True)
    pipe.watch("foo")
    r.config_set("maxmemory-policy", "allkeys-lru")
    r.config_set("maxmemory", "1")
    msg = sub.read_raw()
    assert msg == (b"*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$22\r\n__keyevent@3__:evicted\r\n"
                   b"$3\r\nfoo\r\n"), msg
    assert r.exists("foo") == 0
    assert r.info("stats")["evicted_keys"] == 1
    r.config_set("maxmemory", "0")
    pipe.multi()
    pipe.set("x", "1")
    with pytest.raises(redis.WatchError):
        pipe.execute()
    r.config_resetstat()
    assert r.info("stats")["evicted_keys"] == 0
    sub.close()


def test_a_read_evicts_first(pkvs):
    """Over the bound after a write that fitted before it, the next
    command evicts first even if it only reads, as Redis's: a tracking
    client hears of the evicted key before the read's reply."""
    srv = pkvs.start()
    r = client(srv)
    t = RawConn(srv.resp_port, proto=3)
    assert t.call("CLIENT", "TRACKING", "on") == b"+OK\r\n"
    r.config_set("maxmemory", str(used(r) + 100 * 1024))
    r.config_set("maxmemory-policy", "volatile-random")
    assert t.call("SETEX", "volatile-key", "10000", "x") == b"+OK\r\n"
    assert t.call("GET", "volatile-key") == b"$1\r\nx\r\n"
    assert t.call("SETBIT", "big-key", "1600000", "0") == b":0\r\n"   # 200 KB, past the bound
    t.send(resp_command("GETBIT", "big-key", "0"))
    assert t.read_raw() == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$12\r\nvolatile-key\r\n"
    assert t.read_raw() == b":0\r\n"
    assert r.info("stats")["evicted_keys"] == 1 and r.exists("volatile-key") == 0
    t.close()


@pytest.mark.crash
def test_evicted_keys_stay_gone_after_kill9(pkvs):
    srv = pkvs.start()
    r = client(srv)
    fill(r, "k", 300)
    r.config_set("maxmemory-policy", "allkeys-random")
    lower_by(r, 150)
    r.set("last", "acked")               # a reply after the evictions
    gone = {i for i in range(300) if not r.exists(f"k{i}")}
    assert len(gone) >= 140
    srv.kill9()
    srv.start()
    r = client(srv)
    assert r.get("last") == b"acked"
    back = {i for i in range(300) if r.exists(f"k{i}")}
    assert not back & gone
    assert len(back) == 300 - len(gone)


# --------------------------------------------- OBJECT IDLETIME and FREQ

def test_idletime_not_touched_by_ttl_type_exists_object(pkvs):
    srv = pkvs.start()
    r = client(srv)
    r.set("foo", "bar")
    r.set("other", "x")
    time.sleep(2.2)
    r.ttl("foo"), r.pttl("foo"), r.type("foo"), r.exists("foo")
    r.object("encoding", "foo"), r.memory_usage("foo")
    assert r.object("idletime", "foo") >= 2
    assert r.object("idletime", "nope") is None
    r.touch("foo")
    assert r.object("idletime", "foo") <= 1
    r.get("other")
    assert r.object("idletime", "other") <= 1
    # FREQ: Redis's error without an lfu policy; under one, the counter.
    with pytest.raises(redis.ResponseError, match="An LFU maxmemory policy is not selected"):
        r.object("freq", "foo")
    r.config_set("maxmemory-policy", "volatile-lfu")
    with pytest.raises(redis.ResponseError, match="An LFU maxmemory policy is selected"):
        r.object("idletime", "foo")
    r.set("f", "1")
    f0 = r.object("freq", "f")
    assert 5 <= f0 <= 6
    for _ in range(50):
        r.get("f")
    r.ttl("f"), r.type("f"), r.exists("f")
    f1 = r.object("freq", "f")
    assert f1 > f0
    assert r.object("freq", "f") == f1   # OBJECT does not count


def test_streamed_set_first_is_stamped(pkvs):
    """A SET whose value streams into held buffers, before any other
    command of a fresh server, stamps its key as any SET does."""
    srv = pkvs.start()
    big = b"s" * (300 << 10)
    assert streamed_set(srv, b"big", big) == b"+OK\r\n"
    r = client(srv)
    assert r.object("idletime", "big") <= 1
    assert r.strlen("big") == len(big)


def test_object_replies_against_redis(pkvs, redis_peer):  # noqa: F811
    srv = pkvs.start()
    p = flushed_peers(srv.resp_port, redis_peer.resp_port)
    try:
        p.same("SET", "k", "v")
        p.same("OBJECT", "IDLETIME", "k")
        p.same("OBJECT", "FREQ", "k")
        p.same("OBJECT", "FREQ", "missing")
        p.same("OBJECT", "IDLETIME", "missing")
        p.same("OBJECT", "IDLETIME")
        p.same("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
        p.same("OBJECT", "IDLETIME", "k")
        p.same("SET", "n", "v")
        p.same("OBJECT", "FREQ", "n")
        p.same("CONFIG", "SET", "maxmemory-policy", "noeviction")
    finally:
        p.close()


def test_info_reports_the_bound(pkvs):
    srv = pkvs.start()
    r = client(srv)
    m = r.info("memory")
    assert m["maxmemory_policy"] == "noeviction"
    u0 = m["used_memory"]
    fill(r, "k", 100)
    u1 = used(r)
    assert u1 - u0 >= 100 * len(VAL)
    assert r.delete(*[f"k{i}" for i in range(100)]) == 100
    assert used(r) <= u0 + 64          # a delete counts at once
    assert wait_until(lambda: r.info("memory")["pkvs_held_bytes"] > 0, 5)


def fill_50_keys(r, client_eviction):
    """Redis's own maxmemory test's setup: an 11 MB bound, allkeys-lru, 5 MB
    of data in 50 keys; with client eviction a 3 MB bound on clients
    (maxmemory-clients) and this client exempt (CLIENT NO-EVICT)."""
    r.config_set("maxmemory", "11mb")
    r.config_set("maxmemory-policy", "allkeys-lru")
    r.config_set("maxmemory-clients", "3mb" if client_eviction else "0")
    if client_eviction:
        r.client_no_evict("on")
    r.config_resetstat()
    for j in range(50):
        r.setrange(str(j), 100_000, "x")


def stats(r):
    s = r.info("stats")
    return s["evicted_keys"], s["evicted_clients"], r.dbsize()


@pytest.mark.parametrize("client_eviction", [False, True])
def test_clients_buffers_count_in_maxmemory(pkvs, client_eviction):
    """Clients that ask for replies and never read them hold memory that
    maxmemory counts, as Redis's used_memory does: without client eviction
    keys are evicted for it; with maxmemory-clients the clients holding the
    most are closed instead, no key goes, and INFO counts them."""
    srv = pkvs.start(store_size="256M")
    r = client(srv)
    fill_50_keys(r, client_eviction)
    socks = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", srv.resp_port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        socks.append(s)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for s in socks:
            try:
                s.sendall(resp_command("MGET", "1") * 4)
            except OSError:
                pass
        keys, clients, n = stats(r)
        if (clients > 0) if client_eviction else (keys > 0):
            break
    keys, clients, n = stats(r)
    assert r.info("memory")["mem_clients_normal"] > 0 or client_eviction
    if client_eviction:
        assert clients > 0 and keys == 0 and n == 50, (keys, clients, n)
        # The evicted clients' connections are gone (their sockets see the end).
        assert wait_until(lambda: r.info("clients")["connected_clients"] == 21 - clients, 10)
    else:
        assert clients == 0 and keys > 0 and n < 50, (keys, clients, n)
    for s in socks:
        s.close()
    assert r.ping()


def test_unfinished_requests_evict_their_clients(pkvs):
    """30 clients each leave a 250 KB request unfinished: over
    maxmemory-clients (here 10 % of a 30 MB maxmemory) those clients are
    closed at the next command and their memory is free at once; the
    exempt client and the data stay."""
    srv = pkvs.start(store_size="256M")
    r = client(srv)
    r.config_set("maxmemory", "30mb")
    r.config_set("maxmemory-clients", "10%")
    r.client_no_evict("on")
    r.set("k", "v")
    socks = []
    for _ in range(30):
        s = socket.create_connection(("127.0.0.1", srv.resp_port))
        s.sendall(b"*250\r\n" + (b"$1000\r\n" + b"x" * 1000 + b"\r\n") * 249)
        socks.append(s)
    assert wait_until(lambda: r.info("stats")["evicted_clients"] > 0, 10)
    assert r.info("memory")["mem_clients_normal"] < 3 * 1024 * 1024
    assert r.get("k") == b"v" and r.info("stats")["evicted_keys"] == 0
    assert r.config_get("maxmemory-clients") == {"maxmemory-clients": "10%"}
    for s in socks:
        s.close()
