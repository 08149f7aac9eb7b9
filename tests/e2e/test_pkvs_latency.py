"""LATENCY and INFO latencystats (services/cmd_latency.c) against Debian's
redis-server 7.0.15: the same commands on both, and what does not depend
on timing compared: which commands LATENCY HISTOGRAM and INFO
latencystats list (subcommands, names asked for, unknown names skipped,
CONFIG RESETSTAT and latency-tracking), their calls, the percentiles
configured, the histogram's points rising to the calls; the monitor's
events for a command over latency-monitor-threshold (LATEST, HISTORY,
RESET, GRAPH, DOCTOR) and the errors byte for byte.
"""
import re

import pytest

from pkvs_module import pkvs_srv  # noqa: F401 (pkvs_srv: a fixture)
from redis_peer import Peers, redis_peer  # noqa: F401 (redis_peer: a fixture)
from test_pkvs_slowlog import parse

SLOW_SCRIPT = "local i = 0 while i < 4000000 do i = i + 1 end return i"


@pytest.fixture
def both(pkvs_srv, redis_peer):  # noqa: F811
    p = Peers(pkvs_srv.resp_port, redis_peer.resp_port)
    p.same("FLUSHALL")
    p.same("CONFIG", "SET", "latency-tracking", "yes")
    p.same("CONFIG", "SET", "latency-tracking-info-percentiles", "50 99 99.9")
    p.same("CONFIG", "SET", "latency-monitor-threshold", "0")
    p.same("LATENCY", "RESET")
    yield p
    p.close()


def histograms(conn, *names):
    """LATENCY HISTOGRAM as {command: (calls, [(usec, cumulative), ...])},
    after checking each histogram's points rise to its calls."""
    flat, _ = parse(conn.call("LATENCY", "HISTOGRAM", *names))
    out = {}
    for name, h in zip(flat[::2], flat[1::2]):
        assert h[0] == b"calls" and h[2] == b"histogram_usec", h
        points = list(zip(h[3][::2], h[3][1::2]))
        assert points and points[-1][1] == h[1], (name, h)
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(points, points[1:])), points
        out[name] = (h[1], points)
    return out


def calls(conn, *names):
    return {k: v[0] for k, v in histograms(conn, *names).items()}


def test_histograms_as_redis(both):
    p = both
    for conn in (p.pkvs, p.redis):
        conn.call("CONFIG", "RESETSTAT")
    assert calls(p.pkvs) == calls(p.redis) == {b"config|resetstat": 1}
    for cmd in (("SET", "a", "b"), ("SET", "c", "d"), ("GET", "a"), ("HSET", "f", "k", "v"),
                ("HGETALL", "f"), ("CLIENT", "ID"), ("CLIENT", "LIST")):
        p.both(*cmd)
    for names in ((), ("set", "hset"), ("hgetall", "get", "zadd"), ("client",), ("client|id",),
                  ("blabla",), ("blabla", "blabla2", "set", "get"), ("SET",)):
        mine, want = calls(p.pkvs, *names), calls(p.redis, *names)
        assert mine == want, (names, mine, want)
    assert calls(p.pkvs, "set")[b"set"] == 2
    # Fast commands: their points start at a microsecond or a few.
    pts = histograms(p.pkvs, "get")[b"get"][1]
    assert pts[0][0] in (1, 2, 4, 8, 16, 32, 65, 131, 262, 524), pts


def latencystats(conn):
    info = conn.call("INFO", "latencystats").decode()
    assert "# Latencystats\r\n" in info, info
    return dict(re.findall(r"latency_percentiles_usec_([^:]+):(\S+)\r\n", info))


def test_latencystats_as_redis(both):
    p = both
    for conn in (p.pkvs, p.redis):
        conn.call("CONFIG", "RESETSTAT")
    for cmd in (("SET", "a", "b"), ("GET", "a"), ("GET", "a"), ("CONFIG", "GET", "maxmemory")):
        p.both(*cmd)
    mine, want = latencystats(p.pkvs), latencystats(p.redis)
    assert set(mine) == set(want) == {"config|resetstat", "set", "get", "config|get"}, (mine, want)
    for line in mine.values():
        assert re.fullmatch(r"p50=\d+\.\d{3},p99=\d+\.\d{3},p99\.9=\d+\.\d{3}", line), line
        p50, p99, p999 = (float(v.split("=")[1]) for v in line.split(","))
        assert 0 < p50 <= p99 <= p999 < 1e6, line
    p.same("CONFIG", "SET", "latency-tracking-info-percentiles", "50 90")
    assert all(re.fullmatch(r"p50=[\d.]+,p90=[\d.]+", v) for v in latencystats(p.pkvs).values())
    assert "latencystats" not in p.pkvs.call("INFO").decode().lower()       # not a default section
    assert "# Latencystats" in p.pkvs.call("INFO", "all").decode()
    # Off: the section is empty, the histograms kept no new calls.
    p.same("CONFIG", "SET", "latency-tracking", "no")
    p.both("SET", "new", "1")
    assert latencystats(p.pkvs) == latencystats(p.redis) == {}
    p.same("CONFIG", "SET", "latency-tracking", "yes")
    assert b"incr" not in calls(p.pkvs)


def test_monitor_events_as_redis(both):
    p = both
    p.same("LATENCY", "LATEST")
    p.same("LATENCY", "HISTORY", "command")
    p.same("LATENCY", "GRAPH", "command")            # no samples: Redis's error
    p.same("CONFIG", "SET", "latency-monitor-threshold", "1")
    for conn in (p.pkvs, p.redis):
        assert conn.call("EVAL", SLOW_SCRIPT, "0") == b":4000000\r\n"
    for conn in (p.pkvs, p.redis):
        latest, _ = parse(conn.call("LATENCY", "LATEST"))
        assert [e[0] for e in latest] == [b"command"], latest
        name, when, last, top = latest[0]
        assert last >= 1 and top >= last and when > 1_700_000_000, latest
        history, _ = parse(conn.call("LATENCY", "HISTORY", "command"))
        assert history == [[when, last]], history
        graph = conn.call("LATENCY", "GRAPH", "command")
        assert graph.startswith(b"$") and b"command - high " in graph, graph
        assert len(conn.call("LATENCY", "DOCTOR")) > 20
    p.same("LATENCY", "HISTORY", "blabla")
    p.same("LATENCY", "RESET", "blabla")
    p.same("LATENCY", "RESET", "command", "command")
    p.same("LATENCY", "LATEST")
    p.same("LATENCY", "GRAPH", "command")
    for conn in (p.pkvs, p.redis):
        assert conn.call("EVAL", SLOW_SCRIPT, "0") == b":4000000\r\n"
    p.same("LATENCY", "RESET")                       # :1, the one event
    p.same("CONFIG", "SET", "latency-monitor-threshold", "0")
    for conn in (p.pkvs, p.redis):
        conn.call("EVAL", SLOW_SCRIPT, "0")
    p.same("LATENCY", "LATEST")                      # off: nothing kept


def test_errors_as_redis(both):
    p = both
    for cmd in (("LATENCY",), ("LATENCY", "FOO"), ("LATENCY", "HELP", "x"), ("LATENCY", "LATEST", "x"),
                ("LATENCY", "HISTORY"), ("LATENCY", "GRAPH"), ("LATENCY", "DOCTOR", "x"),
                ("CONFIG", "SET", "latency-monitor-threshold", "x"),
                ("CONFIG", "GET", "latency-tracking-info-percentiles")):
        p.same(*cmd)
    assert p.pkvs.call("LATENCY", "HELP").startswith(b"*")
