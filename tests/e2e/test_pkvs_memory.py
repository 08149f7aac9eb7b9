"""MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP.

STATS answers Redis 7's fields in Redis's order and types (a map of
integers and doubles, one nested map per database with keys), in RESP2
and RESP3, compared with a Debian redis-server's reply (tests/e2e/
redis_peer.py), then pkvs's store figures; its numbers follow what the
server holds: keys and their bytes, a client's unsent replies, cached
scripts. DOCTOR names a nearly full store and a full script cache, and
says when it finds nothing; MALLOC-STATS is glibc's report; PURGE
answers OK; the errors and arities are Redis's, byte for byte.
"""
import socket

import pytest
import redis

from conftest import wait_until
from redis_peer import RawConn, parse, peers, redis_peer, run_script  # noqa: F401 (fixtures)

PROTOS = [2, 3]

ERRORS = [
    ("MEMORY",), ("MEMORY", "FOO"), ("MEMORY", "STATS", "x"), ("MEMORY", "DOCTOR", "x"),
    ("MEMORY", "PURGE", "x"), ("MEMORY", "MALLOC-STATS", "x"), ("MEMORY", "HELP", "x"),
    ("MEMORY", "USAGE"), ("MEMORY", "USAGE", "a", "SAMPLES"), ("MEMORY", "USAGE", "a", "FOO", "1"),
    ("MEMORY", "USAGE", "no"), ("MEMORY", "USAGE", "no", "SAMPLES", "x"),
]


def client(srv, protocol=3):
    return redis.Redis(host="127.0.0.1", port=srv.resp_port, protocol=protocol, socket_timeout=20)


@pytest.mark.parametrize("proto", PROTOS)
def test_errors_match_redis(peers, proto):
    run, _ = peers
    run_script(run(proto), ERRORS)


def shape(raw):
    """MEMORY STATS's raw reply as [(name, type or nested shape)]."""
    (t, items), end = parse(raw)
    assert end == len(raw) and t == (b"%" if raw[:1] == b"%" else b"*"), raw[:80]
    out = []
    for name, v in zip(items[::2], items[1::2]):
        out.append((name, shape_of(v)))
    return out


def shape_of(v):
    if isinstance(v, tuple):
        return [(n, shape_of(x)) for n, x in zip(v[1][::2], v[1][1::2])]
    if isinstance(v, bytes) and v[:1] in (b":", b","):
        return v[:1]
    return b"$"                       # RESP2's doubles are bulk strings


@pytest.mark.parametrize("proto", PROTOS)
def test_stats_fields_as_redis(peers, proto):
    """The same names in the same order with the same reply types as
    redis-server's, databases with keys included; pkvs.store.* after."""
    run, _ = peers
    p = run(proto)
    for db in ("0", "5"):
        p.same("SELECT", db)
        p.same("SET", "k", "v")
        p.same("SET", "t", "v", "EX", "100")
    got, want = (shape(r) for r in p.both("MEMORY", "STATS"))
    extra = got[len(want):]
    assert got[:len(want)] == want
    assert [n for n, _ in extra] == [b"pkvs.store.bytes", b"pkvs.store.held", b"pkvs.store.live",
                                     b"pkvs.store.utilization"]
    assert dict(got)[b"db.5"] == dict(want)[b"db.5"]


def test_stats_follow_what_the_server_holds(pkvs):
    srv = pkvs.start()
    r = client(srv)
    empty = r.memory_stats()
    assert empty["keys.count"] == 0 and "db.0" not in empty
    for i in range(2000):
        r.set(f"k{i}", b"v" * 1024)
    r.expire("k1", 100)
    s = r.memory_stats()
    assert s["keys.count"] == 2000
    assert s["db.0"]["overhead.hashtable.main"] > 0 and s["db.0"]["overhead.hashtable.expires"] > 0
    assert s["total.allocated"] >= 2000 * 1024 and s["pkvs.store.live"] >= 2000 * 1024
    assert s["pkvs.store.held"] >= s["pkvs.store.live"]
    assert s["dataset.bytes"] + s["overhead.total"] == s["total.allocated"]
    assert 0 < s["dataset.percentage"] <= 100 and 0 < s["pkvs.store.utilization"] < 100
    assert s["keys.bytes-per-key"] >= 1024
    # A client that asks for replies and never reads them: its unsent
    # bytes count under clients.normal.
    r.set("big", b"x" * 1_000_000)
    sock = socket.create_connection(("127.0.0.1", srv.resp_port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 16)
    assert wait_until(lambda: r.memory_stats()["clients.normal"] > 4_000_000, 10)
    sock.close()
    assert wait_until(lambda: r.memory_stats()["clients.normal"] < 100_000, 10)
    before = r.memory_stats()["lua.caches"]
    for i in range(50):
        r.eval(f"return {i}", 0)
    assert r.memory_stats()["lua.caches"] > before
    # The peak stays when the dataset shrinks, until CONFIG RESETSTAT.
    top = r.memory_stats()["total.allocated"]
    r.delete(*[f"k{i}" for i in range(1000)], "big")
    s = r.memory_stats()
    assert s["peak.allocated"] >= top > s["total.allocated"] and s["peak.percentage"] < 70
    assert r.info("memory")["used_memory_peak"] == s["peak.allocated"]
    r.config_resetstat()
    s = r.memory_stats()
    assert s["peak.allocated"] == s["total.allocated"] and s["peak.percentage"] == 100


def doctor(r):
    return r.execute_command("MEMORY", "DOCTOR")


def test_doctor(pkvs):
    srv = pkvs.start(store_size="32M")
    r = client(srv, protocol=2)
    assert b"nothing for the memory doctor" in doctor(r)
    r.set("k", "v")
    healthy = doctor(r)
    assert healthy.startswith(b"No memory problem found"), healthy
    for i in range(1001):
        r.eval(f"return {i}", 0)
    report = doctor(r)
    assert b"1001 scripts" in report and b"SCRIPT FLUSH" in report and b"The store has" not in report
    r.script_flush()
    with pytest.raises(redis.ResponseError, match="maxmemory"):
        for i in range(100_000):
            r.set(f"fill{i}", b"f" * 1024)
    report = doctor(r)
    assert b"The store has" in report and b"--store-size" in report, report
    r.flushall()
    r.config_set("maxmemory", "1mb")
    with pytest.raises(redis.ResponseError, match="maxmemory"):
        for i in range(2000):
            r.set(f"m{i}", b"m" * 1000)
    report = doctor(r)
    assert b"of maxmemory" in report and b"evict keys" not in report and b"refused" in report, report
    # RESP3: a verbatim string, as Redis's doctor answers.
    raw = RawConn(srv.resp_port, 3)
    got = raw.call("MEMORY", "DOCTOR")
    assert got.startswith(b"=") and b"txt:" in got[:16]
    raw.close()


def test_malloc_stats_and_purge(pkvs):
    srv = pkvs.start()
    r = client(srv, protocol=2)
    assert r.execute_command("MEMORY", "MALLOC-STATS").startswith(b"<malloc version=")
    assert r.execute_command("MEMORY", "PURGE") in (b"OK", "OK", True)
    assert r.ping()
    helptext = r.execute_command("MEMORY", "HELP")
    assert [h for h in helptext if h.split() and h.split()[0] in
            (b"DOCTOR", b"MALLOC-STATS", b"PURGE", b"STATS", b"USAGE", b"HELP")]
    # used_memory_rss is the process's current resident memory, as
    # /proc/PID/statm counts it.
    rss = int(r.info("memory")["used_memory_rss"])
    with open(f"/proc/{srv.pid}/statm") as f:
        now = int(f.read().split()[1]) * 4096
    assert abs(rss - now) < max(now // 10, 8 << 20), (rss, now)


def test_memory_usage(pkvs):
    """MEMORY USAGE grows with what a key holds: a string by its bytes, a
    collection by its members (sampled, or all with SAMPLES 0); nil for
    no key, as Redis answers."""
    srv = pkvs.start()
    r = client(srv)
    assert r.memory_usage("none") is None
    r.set("small", "x")
    r.set("big", "x" * 100_000)
    small, big = r.memory_usage("small"), r.memory_usage("big")
    assert 0 < small < 200 and 100_000 <= big < 101_000, (small, big)
    for i in range(1000):
        r.hset("h", f"field{i:04d}", "v" * 100)
        r.rpush("l", "e" * 50)
        r.sadd("s", f"member{i:04d}")
        r.zadd("z", {f"member{i:04d}": i})
    for key, lo in (("h", 100_000), ("l", 50_000), ("s", 15_000), ("z", 40_000)):
        sampled, whole = r.memory_usage(key), r.memory_usage(key, samples=0)
        assert lo < whole < 3 * lo and lo < sampled < 3 * lo, (key, sampled, whole)
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("MEMORY", "USAGE", "h", "SAMPLES", "-1")
