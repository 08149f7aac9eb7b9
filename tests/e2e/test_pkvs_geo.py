"""pkvs's GEO commands (services/cmd_geo.c, kv_geohash.c) over its sorted
sets.

- Every GEO command, its options, arity, WRONGTYPE and argument errors,
  byte for byte against Debian's redis-server 7.0.15 in RESP2 and RESP3:
  scores (ZRANGE/ZSCORE of a geo key), positions, geohash strings,
  distances with their four decimals, coordinates with Redis's digits.
- Searches on the same random positions in both: GEORADIUS, GEOSEARCH
  (BYRADIUS, BYBOX, FROMMEMBER, FROMLONLAT), with and without sorting,
  COUNT, ANY, WITHDIST/WITHHASH/WITHCOORD, every unit: the same members
  in the same order (the walk of the same nine geohash boxes), and the
  stored sets of STORE, STOREDIST and GEOSEARCHSTORE the same; members
  at one distance in Redis's order too, sorted whole or cut by COUNT.
- Keyspace events (GEOADD's are ZADD's), COMMAND INFO and GETKEYS.
- A stored result and GEOADD's members after a restart.
- Through redis-py (RESP2 and RESP3) and redis-cli, as an application
  uses them.
"""
import random
import subprocess

import pytest
import redis

from conftest import PkvsFactory, RespConn, tool
from redis_peer import redis_peer  # noqa: F401 (a fixture)
from redis_peer import UNORDERED as U, flushed_peers as peers, script_like_redis
from test_pkvs_notify import both as watch_both
from test_pkvs_set import server  # noqa: F401 (server: a fixture)

SICILY = [("GEOADD", "Sicily", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania")]

SCRIPTS = {
    "geoadd": [
        ("GEOADD", "g", "13.361389", "38.115556", "Palermo"),
        ("GEOADD", "g", "13.361389", "38.115556", "Palermo"),
        ("GEOADD", "g", "CH", "13.361390", "38.115556", "Palermo"),
        ("GEOADD", "g", "NX", "1", "1", "Palermo", "2", "2", "new"),
        ("GEOADD", "g", "XX", "1", "1", "Palermo", "3", "3", "other"),
        ("GEOADD", "g", "XX", "CH", "4", "4", "Palermo"), ("GEOADD", "g", "CH", "NX", "5", "5", "x5"),
        ("GEOADD", "g", "ch", "xx", "ch", "6", "6", "x5"),
        ("GEOADD", "g", "NX", "XX", "1", "1", "a"), ("GEOADD", "g", "GT", "1", "1", "a"),
        ("GEOADD", "g", "1", "1"), ("GEOADD", "g", "1", "1", "a", "2"), ("GEOADD", "g", "1"),
        ("GEOADD", "g", "ch", "ch", "ch"), ("GEOADD", "g", "nx", "xx", "ch"),
        ("GEOADD", "g", "200", "100", "bad"), ("GEOADD", "g", "-180.1", "0", "bad"),
        ("GEOADD", "g", "0", "85.06", "bad"), ("GEOADD", "g", "x", "1", "bad"),
        ("GEOADD", "g", "1", "y", "bad"), ("GEOADD", "g", "inf", "0", "bad"),
        ("GEOADD", "g", "nan", "0", "bad"), ("GEOADD", "g", " 1", "0", "bad"),
        ("GEOADD", "g", "1", "1", "ok", "1000", "1", "bad"), ("EXISTS", "ok"),
        ("GEOADD", "g", "180", "85.05112878", "ne", "-180", "-85.05112878", "sw", "0", "0", "zero"),
        ("GEOADD", "g", "1e-300", "-1e-300", "tiny", "179.99999999", "-0", "edge"),
        ("ZRANGE", "g", "0", "-1", "WITHSCORES"), ("ZCARD", "g"), ("TYPE", "g"),
        ("GEOADD", "nokey", "XX", "1", "1", "a"), ("EXISTS", "nokey"),
        ("SET", "str", "v"), ("GEOADD", "str", "0", "0", "a"), ("GEOADD", "str", "999", "0", "a"),
        ("GEOADD", "g", "0", "0", b"\x00\xff bin"), ("GEOPOS", "g", b"\x00\xff bin"),
    ],
    "pos-hash-dist": SICILY + [
        ("GEOADD", "Sicily", "-73.9454966", "40.747533", "lic", "0", "0", "zero",
         "180", "85.05112878", "ne", "-180", "-85.05112878", "sw"),
        ("GEOPOS", "Sicily", "Palermo", "Catania", "nope", "lic", "zero", "ne", "sw"),
        ("GEOPOS", "Sicily"), ("GEOPOS", "nokey", "a", "b"), ("GEOPOS", "nokey"),
        ("GEOHASH", "Sicily", "Palermo", "Catania", "nope", "lic", "zero", "ne", "sw"),
        ("GEOHASH", "Sicily"), ("GEOHASH", "nokey", "a"),
        ("GEODIST", "Sicily", "Palermo", "Catania"), ("GEODIST", "Sicily", "Palermo", "Catania", "km"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "KM"), ("GEODIST", "Sicily", "Palermo", "Catania", "mi"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "ft"), ("GEODIST", "Sicily", "Palermo", "Catania", "M"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "yd"), ("GEODIST", "Sicily", "Palermo", "Catania", "m", "x"),
        ("GEODIST", "Sicily", "Palermo", "Palermo"), ("GEODIST", "Sicily", "Palermo", "nope"),
        ("GEODIST", "Sicily", "nope", "Palermo"), ("GEODIST", "nokey", "a", "b"),
        ("GEODIST", "nokey", "a", "b", "yd"), ("GEODIST", "Sicily", "ne", "sw"),
        ("GEODIST", "Sicily", "zero", "lic", "km"), ("GEODIST", "Sicily", "Palermo"),
        ("ZADD", "Sicily", "-1", "neg", "1.5", "frac", "1e20", "huge", "4503599627370496", "big"),
        ("GEOPOS", "Sicily", "neg", "frac", "huge", "big"), ("GEOHASH", "Sicily", "frac", "big"),
        ("SET", "str", "v"), ("GEOPOS", "str", "a"), ("GEOHASH", "str", "a"),
        ("GEODIST", "str", "a", "b"), ("GEODIST", "str", "a", "b", "yd"),
        ("GEOPOS",), ("GEOHASH",), ("GEODIST", "Sicily", "a"),
    ],
    "radius": SICILY + [
        ("GEOADD", "Sicily", "12.758489", "38.788135", "edge1", "17.241510", "38.788135", "edge2"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "ASC"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "DESC"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST", "WITHCOORD", "WITHHASH"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "withhash", "withcoord", "withdist", "asc"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHCOORD"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1", "DESC"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1", "ANY"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "2", "ANY", "ASC"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "ANY"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "0"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "-1"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "x"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "100"),
        ("GEORADIUS", "Sicily", "15", "37", "200000", "m"), ("GEORADIUS", "Sicily", "15", "37", "124.27", "mi"),
        ("GEORADIUS", "Sicily", "15", "37", "656168", "ft", "WITHDIST"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "yd"), ("GEORADIUS", "Sicily", "15", "37", "-1", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "x", "km"), ("GEORADIUS", "Sicily", "200", "37", "1", "km"),
        ("GEORADIUS", "Sicily", "x", "37", "1", "km"), ("GEORADIUS", "Sicily", "15", "37", "0", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "BOGUS"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE"),
        ("GEORADIUS", "Sicily", "15", "37", "1", "km"), ("GEORADIUS", "nokey", "15", "37", "1", "km"),
        ("GEORADIUS", "nokey", "15", "37", "1", "yd"),
        ("GEORADIUS", "Sicily", "15", "37", "20000", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "inf", "km"),
        ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "WITHDIST", "ASC"),
        ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "STORE", "x"),
        ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "STOREDIST", "x"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "WITHDIST", "WITHCOORD"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "90", "mi", "DESC", "WITHHASH"),
        ("GEORADIUSBYMEMBER", "Sicily", "nope", "200", "km"),
        ("GEORADIUSBYMEMBER", "Sicily", "nope", "x", "km"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "x", "km"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "1", "yd"),
        ("GEORADIUSBYMEMBER", "nokey", "Palermo", "x", "yd", "BOGUS"),
        ("GEORADIUSBYMEMBER", "nokey", "Palermo", "x", "yd", "STORE", "dst"),
        ("GEORADIUSBYMEMBER_RO", "Sicily", "Catania", "100", "km", "COUNT", "1", "WITHDIST"),
        ("GEORADIUSBYMEMBER_RO", "Sicily", "Catania", "100", "km", "STORE", "d"),
        ("SET", "str", "v"), ("GEORADIUS", "str", "x", "y", "z", "w"),
        ("GEORADIUSBYMEMBER", "str", "a", "1", "km"), ("GEORADIUS", "Sicily", "15", "37", "200"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200"),
    ],
    "search": SICILY + [
        ("GEOADD", "Sicily", "12.758489", "38.788135", "edge1", "17.241510", "38.788135", "edge2"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km", "ASC",
         "WITHCOORD", "WITHDIST", "WITHHASH"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYBOX", "400", "400", "km", "DESC", "WITHDIST"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "100", "mi", "COUNT", "1"),
        ("GEOSEARCH", "Sicily", "frommember", "Palermo", "byradius", "100", "mi", "count", "2", "any"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "nope", "BYRADIUS", "100", "mi"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "FROMLONLAT", "15", "38", "BYRADIUS", "300", "km"),
        ("GEOSEARCH", "Sicily", "BYRADIUS", "1", "km", "ASC"),
        ("GeoSearch", "Sicily", "ASC", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "ASC", "DESC"),
        ("geosearch", "Sicily", "FROMLONLAT", "15", "37", "ASC"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "BYBOX", "1", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "1", "km", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "x", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "y", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "-1", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "1", "yd"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "1"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "500", "37", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "-1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STORE", "d"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STOREDIST"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ANY"),
        ("GEOSEARCH", "nokey", "FROMMEMBER", "x", "BYRADIUS", "200", "km"),
        ("GEOSEARCH", "nokey", "FROMMEMBER", "x", "BYBOX", "1", "1", "km"),
        ("GEOSEARCH", "nokey", "FROMMEMBER", "x", "BYRADIUS", "x", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "0", "0", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "179", "0", "BYBOX", "40000", "40000", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "20000", "2000", "km", "WITHDIST"),
        ("SET", "str", "v"), ("GEOSEARCH", "str", "FROMMEMBER", "x", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "str", "BOGUS"), ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37"),
    ],
    "store": SICILY + [
        ("GEOADD", "Sicily", "12.758489", "38.788135", "edge1", "17.241510", "38.788135", "edge2"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "d1"), ("ZRANGE", "d1", "0", "-1", "WITHSCORES"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STOREDIST", "d2"),
        ("ZRANGE", "d2", "0", "-1", "WITHSCORES"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STOREDIST", "d2", "COUNT", "2", "DESC"),
        ("ZRANGE", "d2", "0", "-1", "WITHSCORES"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "d3", "STOREDIST", "d4"),
        ("EXISTS", "d3"), ("ZRANGE", "d4", "0", "-1", "WITHSCORES"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "d1", "WITHDIST"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHHASH", "STORE", "d1"),
        ("GEORADIUS", "Sicily", "15", "37", "1", "km", "STORE", "d1"), ("EXISTS", "d1"),
        ("SET", "s", "v"), ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "s"), ("TYPE", "s"),
        ("GEORADIUS", "nokey", "15", "37", "200", "km", "STORE", "s"), ("EXISTS", "s"),
        ("GEORADIUS", "nokey", "15", "37", "200", "km", "STORE", "s"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "STOREDIST", "m1", "ASC"),
        ("ZRANGE", "m1", "0", "-1", "WITHSCORES"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "STORE", "m2", "COUNT", "1", "ANY"),
        ("ZRANGE", "m2", "0", "-1", "WITHSCORES"),
        ("GEORADIUSBYMEMBER", "nokey", "x", "1", "km", "STORE", "m2"), ("EXISTS", "m2"),
        ("GEOSEARCHSTORE", "s1", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km"),
        ("ZRANGE", "s1", "0", "-1", "WITHSCORES"),
        ("GEOSEARCHSTORE", "s2", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "300", "km", "STOREDIST",
         "COUNT", "2"),
        ("ZRANGE", "s2", "0", "-1", "WITHSCORES"),
        ("GEOSEARCHSTORE", "s2", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "storedist",
         "desc", "count", "1"),
        ("ZRANGE", "s2", "0", "-1", "WITHSCORES"),
        ("GEOSEARCHSTORE", "s2", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "m"), ("EXISTS", "s2"),
        ("GEOSEARCHSTORE", "s3", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "WITHDIST"),
        ("GEOSEARCHSTORE", "s3", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "STORE", "x"),
        ("GEOSEARCHSTORE", "s1", "nokey", "FROMMEMBER", "x", "BYRADIUS", "200", "km"), ("EXISTS", "s1"),
        ("GEOSEARCHSTORE", "s3", "Sicily", "FROMLONLAT", "15", "37"),
        ("GEOSEARCHSTORE", "s3", "Sicily", "BYRADIUS", "1", "km", "FROMMEMBER"),
        ("GEOSEARCHSTORE", "s3", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS"),
        ("SET", "str", "v"), ("GEOSEARCHSTORE", "s3", "str", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km"),
        ("GEORADIUS", "str", "15", "37", "200", "km", "STORE", "s3"), ("EXISTS", "s3"),
    ],
    "meta": [
        ("COMMAND", "INFO", "geoadd", "geodist", "geohash", "geopos", "georadius", "georadius_ro",
         "georadiusbymember", "georadiusbymember_ro", "geosearch", "geosearchstore"),
        ("COMMAND", "GETKEYS", "GEORADIUS", "k", "0", "0", "1", "km", "STORE", "d1", "STOREDIST", "d2"),
        ("COMMAND", "GETKEYS", "GEOSEARCHSTORE", "d", "s", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"),
        ("COMMAND", "GETKEYSANDFLAGS", "GEORADIUSBYMEMBER", "k", "m", "1", "km", "STORE", "d"),
        ("COMMAND", "GETKEYS", "GEOADD", "k", "0", "0", "m"),
        (U, "COMMAND", "LIST", "FILTERBY", "ACLCAT", "geo"),
    ],
    "transaction": [
        ("MULTI",), ("GEOADD", "t", "1", "2", "a", "3", "4", "b"), ("GEODIST", "t", "a", "b", "km"),
        ("GEOADD", "t", "999", "0", "c"), ("GEOPOS", "t", "a"), ("EXEC",),
        ("EVAL", "return redis.call('geoadd', KEYS[1], 0, 0, 'bar')", "1", "t"),
        ("EVAL", "return redis.call('geopos', KEYS[1], 'bar')", "1", "t"),
        ("EVAL", "return redis.call('geodist', KEYS[1], 'a', 'bar')", "1", "t"),
        ("EVAL_RO", "return redis.call('georadius', KEYS[1], 0, 0, 1, 'km', 'STORE', 'x')", "1", "t"),
    ],
}


@pytest.mark.parametrize("proto", [2, 3])
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_like_redis(server, redis_peer, script, proto):
    script_like_redis(server, redis_peer, SCRIPTS[script], proto)


def random_points(rnd, n, lon=(-180, 180), lat=(-85, 85)):
    out = []
    for i in range(n):
        out.append((repr(rnd.uniform(*lon)), repr(rnd.uniform(*lat)), f"m{i}"))
    return out


def search_cmds(rnd, n, members):
    """Random searches: every shape, centre, unit and option."""
    cmds = []
    units = ["m", "km", "mi", "ft"]
    for _ in range(n):
        lon, lat = rnd.uniform(-180, 180), rnd.uniform(-85, 85)
        unit = rnd.choice(units)
        scale = {"m": 1000.0, "km": 1.0, "mi": 0.621371, "ft": 3280.84}[unit]
        r = rnd.choice([1, 50, 300, 1000, 3000, 8000, 20000]) * rnd.random() * scale
        opts = []
        for o in ("WITHDIST", "WITHHASH", "WITHCOORD"):
            if rnd.random() < 0.5:
                opts.append(o)
        sort = rnd.choice([None, "ASC", "DESC"])
        if sort:
            opts.append(sort)
        if rnd.random() < 0.4:
            opts += ["COUNT", str(rnd.randint(1, 40))]
            if rnd.random() < 0.3:
                opts.append("ANY")
        rs = f"{r:.6f}"
        kind = rnd.randrange(5)
        if kind == 0:
            cmds.append(("GEORADIUS", "pts", repr(lon), repr(lat), rs, unit, *opts))
        elif kind == 1:
            cmds.append(("GEORADIUSBYMEMBER_RO", "pts", rnd.choice(members), rs, unit, *opts))
        elif kind == 2:
            cmds.append(("GEOSEARCH", "pts", "FROMLONLAT", repr(lon), repr(lat), "BYRADIUS", rs, unit, *opts))
        else:
            w = f"{r * rnd.uniform(0.2, 2.5):.6f}"
            h = f"{r * rnd.uniform(0.2, 2.5):.6f}"
            frm = ("FROMMEMBER", rnd.choice(members)) if kind == 3 else ("FROMLONLAT", repr(lon), repr(lat))
            cmds.append(("GEOSEARCH", "pts", *frm, "BYBOX", w, h, unit, *opts))
    return cmds


@pytest.mark.parametrize("proto", [2, 3])
def test_random_searches_like_redis(server, redis_peer, proto):
    """The same random positions in both; random searches answer the same
    members in the same order with the same distances, hashes and
    coordinates; the stored results are the same sorted sets."""
    rnd = random.Random(1000 + proto)
    p = peers(server.resp_port, redis_peer.resp_port, proto)
    try:
        pts = random_points(rnd, 3000)
        for i in range(0, len(pts), 500):
            p.same("GEOADD", "pts", *[x for t in pts[i:i + 500] for x in t])
        # a cluster: many members close together, some at one position
        near = random_points(rnd, 400, lon=(2.2, 2.5), lat=(48.7, 49.0))
        near = [(lo, la, "c" + m) for lo, la, m in near] + [("2.35", "48.85", f"same{i}") for i in range(5)]
        p.same("GEOADD", "pts", *[x for t in near for x in t])
        p.same("ZCARD", "pts")
        p.same("ZRANGE", "pts", "0", "99", "WITHSCORES")
        members = [m for _, _, m in pts + near]
        p.same("GEOPOS", "pts", *members[:200])
        p.same("GEOHASH", "pts", *members[:200])
        for _ in range(100):
            a, b = rnd.choice(members), rnd.choice(members)
            p.same("GEODIST", "pts", a, b, rnd.choice(["m", "km", "mi", "ft"]))
        found = 0
        for cmd in search_cmds(rnd, 400, members):
            found += p.same(*cmd) != b"*0\r\n"
        assert found > 150, found                   # searches that find members
        for lon, lat, r in ((2.35, 48.85, 5), (2.35, 48.85, 30), (2.4, 48.9, 0.5)):
            p.same("GEOSEARCH", "pts", "FROMLONLAT", str(lon), str(lat), "BYRADIUS", str(r), "km",
                   "ASC", "WITHDIST", "WITHCOORD")
            p.same("GEOSEARCH", "pts", "FROMLONLAT", str(lon), str(lat), "BYBOX", str(r), str(r), "km",
                   "WITHDIST")
        stored = 0
        for i, cmd in enumerate(search_cmds(rnd, 60, members)):
            cmd = tuple(c for c in cmd if c not in ("WITHDIST", "WITHHASH", "WITHCOORD"))
            if cmd[0] == "GEOSEARCH":
                store = ("GEOSEARCHSTORE", f"dst{i}", "pts", *cmd[2:]) + (("STOREDIST",) if i % 2 else ())
            else:
                base = 6 if cmd[0] == "GEORADIUS" else 5
                store = ("GEORADIUS" if base == 6 else "GEORADIUSBYMEMBER",) + cmd[1:] + \
                    (("STOREDIST" if i % 2 else "STORE"), f"dst{i}")
                assert base
            stored += p.same(*store) != b":0\r\n"
            p.same("ZRANGE", f"dst{i}", "0", "-1", "WITHSCORES")
        assert stored > 20, stored
    finally:
        p.close()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ties_like_redis(server, redis_peer, seed):
    """Many members at a few positions (equal distances): sorted whole
    (stable) and cut by COUNT (the nearest COUNT as Redis's partial
    quicksort picks and orders them), the same members in the same order."""
    rnd = random.Random(seed)
    p = peers(server.resp_port, redis_peer.resp_port, 2)
    try:
        spots = [(repr(rnd.uniform(2.3, 2.4)), repr(rnd.uniform(48.8, 48.9))) for _ in range(8)]
        n = (50, 200, 900)[seed]
        args = []
        for i in range(n):
            lon, lat = rnd.choice(spots) if rnd.random() < 0.7 else \
                (repr(rnd.uniform(2.3, 2.4)), repr(rnd.uniform(48.8, 48.9)))
            args += [lon, lat, f"m{i}"]
        p.same("GEOADD", "t", *args)
        for count in [None] + list(range(1, 30)) + [50, 100, 300, n - 1]:
            for sort in ("ASC", "DESC"):
                lon, lat = rnd.choice(spots)
                for frm in (("FROMLONLAT", lon, lat), ("FROMLONLAT", "2.36", "48.86"), ("FROMMEMBER", "m3")):
                    cut = ("COUNT", str(count)) if count else ()
                    p.same("GEOSEARCH", "t", *frm, "BYRADIUS", "20", "km", sort, *cut, "WITHDIST")
    finally:
        p.close()


def test_like_redis_near_the_edges(server, redis_peer):
    """Positions at the poles' limits and the antimeridian, and searches
    that span them (the neighbours wrap)."""
    rnd = random.Random(7)
    p = peers(server.resp_port, redis_peer.resp_port, 2)
    try:
        pts = []
        for i in range(600):
            lon = rnd.choice([rnd.uniform(-180, -175), rnd.uniform(175, 180), rnd.uniform(-180, 180)])
            lat = rnd.choice([rnd.uniform(80, 85.05112878), rnd.uniform(-85.05112878, -80), rnd.uniform(-5, 5)])
            pts += [repr(lon), repr(lat), f"e{i}"]
        p.same("GEOADD", "edge", *pts)
        for lon in ("-180", "180", "179.9", "-179.9", "0"):
            for lat in ("85.05112878", "-85.05112878", "84", "-84", "0"):
                for r in ("10", "500", "3000"):
                    p.same("GEORADIUS", "edge", lon, lat, r, "km", "WITHDIST", "WITHHASH")
                    p.same("GEOSEARCH", "edge", "FROMLONLAT", lon, lat, "BYBOX", r, r, "km", "ASC")
    finally:
        p.close()


def test_keyspace_events_like_redis(server, redis_peer):
    pw, rw = watch_both(server.resp_port, redis_peer.resp_port)
    try:
        for cmd in [
            ("GEOADD", "g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"),
            ("GEOADD", "g", "13.361389", "38.115556", "Palermo"),
            ("GEOADD", "g", "XX", "CH", "13.3", "38.1", "Palermo"),
            ("GEOADD", "g", "NX", "1", "1", "Palermo"),
            ("GEOADD", "g", "999", "1", "bad"),
            ("GEORADIUS", "g", "15", "37", "200", "km", "STORE", "d"),
            ("GEORADIUS", "g", "15", "37", "200", "km", "STOREDIST", "d"),
            ("GEORADIUS", "g", "15", "37", "1", "km", "STORE", "d"),
            ("GEORADIUS", "g", "15", "37", "1", "km", "STORE", "d"),
            ("GEOSEARCHSTORE", "d", "g", "FROMMEMBER", "Palermo", "BYRADIUS", "300", "km"),
            ("GEOSEARCHSTORE", "d", "nokey", "FROMMEMBER", "Palermo", "BYRADIUS", "300", "km"),
            ("GEOSEARCH", "g", "FROMMEMBER", "Palermo", "BYRADIUS", "300", "km"),
            ("GEORADIUSBYMEMBER", "g", "Palermo", "300", "km", "STORE", "e"),
            ("GEORADIUSBYMEMBER", "nokey", "Palermo", "300", "km", "STORE", "e"),
        ]:
            got, want = pw.run(*cmd), rw.run(*cmd)
            assert got == want, f"{cmd!r}:\n pkvs  {got!r}\n redis {want!r}"
    finally:
        pw.close()
        rw.close()


def test_stored_results_survive_restart():
    factory = PkvsFactory()
    try:
        srv = factory.start()
        rnd = random.Random(3)
        pts = random_points(rnd, 2000, lon=(-10, 10), lat=(40, 50))
        with RespConn(srv.resp_port, timeout=20) as c:
            assert c.command("GEOADD", "pts", *[x for t in pts for x in t]) == len(pts)
            n1 = c.command("GEORADIUS", "pts", "0", "45", "300", "km", "STORE", "near")
            n2 = c.command("GEOSEARCHSTORE", "box", "pts", "FROMLONLAT", "0", "45", "BYBOX", "500", "300", "km",
                           "STOREDIST")
            assert n1 > 10 and n2 > 10
            want = {k: c.command("ZRANGE", k, "0", "-1", "WITHSCORES") for k in ("pts", "near", "box")}
            pos = c.command("GEOPOS", "pts", "m0", "m1999")
        store = srv.store
        srv.stop(keep_store=True)
        srv = factory.start(store=store)
        with RespConn(srv.resp_port, timeout=20) as c:
            for k, v in want.items():
                assert c.command("ZRANGE", k, "0", "-1", "WITHSCORES") == v
            assert c.command("ZCARD", "near") == n1 and c.command("ZCARD", "box") == n2
            assert c.command("GEOPOS", "pts", "m0", "m1999") == pos
    finally:
        factory.cleanup()


def test_search_walks_boxes_not_the_set(server):
    """A small search in a large set answers from a few score ranges: a
    search of 1 km in 100,000 members answers as fast as in 100."""
    import time
    rnd = random.Random(5)
    with RespConn(server.resp_port, timeout=60) as c:
        c.command("DEL", "big", "small")
        for key, n in (("small", 100), ("big", 100000)):
            pts = random_points(rnd, n, lon=(-100, 100), lat=(-60, 60))
            for i in range(0, n, 5000):
                c.command("GEOADD", key, *[x for t in pts[i:i + 5000] for x in t])
        times = {}
        for key in ("small", "big"):
            t0 = time.perf_counter()
            for _ in range(200):
                c.command("GEOSEARCH", key, "FROMLONLAT", "10", "10", "BYRADIUS", "1", "km")
            times[key] = time.perf_counter() - t0
        # a walk of the whole set would be ~1000x slower; allow noise
        assert times["big"] < times["small"] * 5 + 0.2, times


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py(server, protocol):
    r = redis.Redis(host="127.0.0.1", port=server.resp_port, protocol=protocol, socket_timeout=20)
    r.delete("Sicily", "dst")
    assert r.geoadd("Sicily", [13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania"]) == 2
    assert r.geoadd("Sicily", [13.361389, 38.115556, "Palermo"], xx=True, ch=True) == 0
    assert r.geodist("Sicily", "Palermo", "Catania") == 166274.1516
    assert r.geodist("Sicily", "Palermo", "Catania", "km") == 166.2742
    assert r.geodist("Sicily", "Palermo", "nope") is None
    hashes = [h.decode() if isinstance(h, bytes) else h for h in r.geohash("Sicily", "Palermo", "Catania", "nope")]
    assert hashes == ["sqc8b49rny0", "sqdtr74hyu0", None]
    pos = r.geopos("Sicily", "Palermo", "nope")
    assert pos[0] == pytest.approx((13.36138933897018433, 38.11555639549629859), abs=1e-12)
    assert pos[1] is None
    got = r.geosearch("Sicily", longitude=15, latitude=37, radius=200, unit="km", sort="ASC",
                      withdist=True, withcoord=True, withhash=True)
    assert [g[0] for g in got] == [b"Catania", b"Palermo"]
    assert [g[1] for g in got] == [56.4413, 190.4424]
    assert [g[2] for g in got] == [3479447370796909, 3479099956230698]
    assert r.georadiusbymember("Sicily", "Palermo", 200, unit="km", sort="DESC") == [b"Catania", b"Palermo"]
    assert r.geosearchstore("dst", "Sicily", member="Palermo", width=400, height=400, unit="km",
                            storedist=True) == 2
    stored = [tuple(m) for m in r.zrange("dst", 0, -1, withscores=True)]
    assert stored == [(b"Palermo", 0.0), (b"Catania", 166.27415156960033)]
    assert r.zscore("Sicily", "Palermo") == 3479099956230698.0
    with pytest.raises(redis.ResponseError, match="invalid longitude,latitude pair 200.000000,100.000000"):
        r.geoadd("Sicily", [200, 100, "x"])
    r.close()


def test_redis_cli(server):
    cli = tool("redis-cli")

    def run(*args):
        out = subprocess.run([cli, "-p", str(server.resp_port), *args], capture_output=True, text=True,
                             timeout=20)
        return out.stdout

    run("DEL", "cli")
    assert run("GEOADD", "cli", "2.3522", "48.8566", "Paris", "-0.1276", "51.5072", "London") == "2\n"
    assert run("GEODIST", "cli", "Paris", "London", "km") == "343.6268\n"
    assert run("GEOSEARCH", "cli", "FROMMEMBER", "Paris", "BYRADIUS", "400", "km", "ASC", "WITHDIST") == \
        "Paris\n0.0000\nLondon\n343.6268\n"
    assert run("GEOPOS", "cli", "London") == "-0.12760072946548462\n51.50720053692975853\n"
