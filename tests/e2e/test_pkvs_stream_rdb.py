"""Streams in Redis's RDB format (services/kv_rdb.c, kv_rdb_load.c,
kv_rdb_stream.c) against Debian's redis-server 7.0.15:

- DUMP from redis-server RESTOREd into pkvs and DUMP from pkvs RESTOREd
  into redis-server (which checks it deeply: sanitize-dump-payload yes),
  for streams of many shapes: several nodes (Redis's of 7 entries, with
  deleted entries inside), shared and differing fields, integers, binary
  and long values, trimmed, emptied, made empty by XGROUP MKSTREAM, with
  XSETID's counters, groups with pending entries claimed and acknowledged,
  consumers with and without pending entries, names of 400 bytes. Each
  reads the same on both: XRANGE, XINFO STREAM FULL, XINFO GROUPS,
  XPENDING (summary, and each entry but its idle time); and XADD,
  XREADGROUP and XTRIM after the restore answer the same. A payload
  taken through both servers and back restores the same.
- Payloads of Redis 6's type (15, made from 7.0's by leaving out what it
  added) read the same by both.
- Damaged payloads: refused with Redis's own error, the key unchanged;
  and what pkvs cannot hold (a group's or consumer's name over 400
  bytes, its commands' limit) refused the same way.
- A full synchronization from a pkvs primary holding such streams: a
  redis-server replica and a pkvs replica read the same as the primary.
"""
import pytest
import redis

from conftest import PkvsFactory, wait_until
from paste_proc import MissingBinary, RedisServer
from pkvs_module import pkvs_srv  # noqa: F401 (pkvs_srv: a fixture)
from redis_peer import RawConn, parse, redis_peer  # noqa: F401 (redis_peer: a fixture)

KEYS = ["many", "trimmed", "emptied", "made", "setid", "long", "auto"]
# How the servers lay out their nodes: not part of a stream's value. A
# Redis that loads pkvs's stream has the nodes pkvs counts (100 entries
# each): radix-tree-keys the same; the radix tree's inner nodes are
# Redis's own.
LAYOUT = {b"radix-tree-keys", b"radix-tree-nodes"}
INNER = {b"radix-tree-nodes"}
LONG_GROUP = "G" * 400          # pkvs's limit, as its commands'
LONG_CONSUMER = "c" * 400


def client(port):
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


def fill(c):
    """The streams of KEYS, made by commands (each server its own way)."""
    for i in range(1, 251):
        fields = {"f": i, "g": "v"} if i % 40 else {"other": i}
        if i == 77:
            fields = {"f": "x" * 5000, "g": b"\x00\xff\r\n"}
        if i == 90:
            fields = {"f": -9223372036854775808, "g": "007", "h": "3.14"}
        c.xadd("many", fields, id=f"{1000 + i // 3}-{i % 3}")
    c.xdel("many", "1000-2", "1007-0", "1007-1", "1020-0", "1083-1")
    c.xgroup_create("many", "g1", "0")
    c.xreadgroup("g1", "c1", {"many": ">"}, count=10)
    c.xreadgroup("g1", "c2", {"many": ">"}, count=5)
    c.xack("many", "g1", "1001-0", "1003-0")
    c.xclaim("many", "g1", "c3", 0, ["1004-0", "1005-1"])
    c.xgroup_create("many", "g2", "$")
    c.xgroup_createconsumer("many", "g2", "idle")
    c.xgroup_create("many", "777", "1050-0")
    c.xreadgroup("777", "n", {"many": ">"}, count=2, noack=True)
    c.xtrim("many", maxlen=240, approximate=True)       # Redis's nodes of 7: some go

    for i in range(1, 51):
        c.xadd("trimmed", {"n": i}, id=f"5-{i}")
    c.xtrim("trimmed", maxlen=10, approximate=False)
    c.xgroup_create("trimmed", "g", "5-20")
    c.xreadgroup("g", "a", {"trimmed": ">"}, count=3)
    c.xdel("trimmed", "5-42")

    c.xadd("emptied", {"a": 1}, id="7-1")
    c.xadd("emptied", {"a": 2}, id="7-2")
    c.xgroup_create("emptied", "g", "0")
    c.xreadgroup("g", "a", {"emptied": ">"})
    c.xdel("emptied", "7-1", "7-2")

    c.xgroup_create("made", "g", "$", mkstream=True)

    c.xadd("setid", {"a": 1}, id="3-3")
    c.execute_command("XSETID", "setid", "9-9", "ENTRIESADDED", "40", "MAXDELETEDID", "8-0")
    c.xgroup_create("setid", "g", "3-3", entries_read=1)

    c.xadd("long", {"f": "v"}, id="1-1")
    c.xadd("long", {"f": "w"}, id="1-2")
    c.xgroup_create("long", LONG_GROUP, "0")
    c.xreadgroup(LONG_GROUP, LONG_CONSUMER, {"long": ">"}, count=1)

    for i in range(5):
        c.xadd("auto", {"i": i})
    c.xgroup_create("auto", "g", "0")
    c.xreadgroup("g", "a", {"auto": ">"}, count=2)


def masked(v, names):
    """A parsed reply with the value after each of names replaced by None."""
    if not isinstance(v, tuple):
        return v
    items = list(v[1])
    for i in range(1, len(items)):
        if isinstance(items[i - 1], bytes) and items[i - 1] in names:
            items[i] = None
    return (v[0], [masked(x, names) for x in items])


def call(port, *cmd):
    c = RawConn(port)
    try:
        return c.call(*cmd)
    finally:
        c.close()


def view(port, key, times=True, layout=LAYOUT):
    """key as the commands read it; what depends on the time of reading
    (XPENDING's idle times) left out, and without times, XINFO STREAM FULL
    (seen and delivery times); layout: what of XINFO STREAM's is not
    compared."""
    c = RawConn(port)
    try:
        out = [parse(c.call("XRANGE", key, "-", "+"))[0], parse(c.call("XINFO", "GROUPS", key))[0]]
        if times:
            out.append(masked(parse(c.call("XINFO", "STREAM", key, "FULL"))[0], layout))
        for g in client(port).xinfo_groups(key):
            name = g["name"]
            out.append(parse(c.call("XPENDING", key, name))[0])
            kind, rows = parse(c.call("XPENDING", key, name, "-", "+", 1000))[0]
            out.append([(row[1][0], row[1][1], row[1][3]) for row in rows])
        return out
    finally:
        c.close()


@pytest.fixture
def pair(pkvs_srv, redis_peer):  # noqa: F811
    p, r = client(pkvs_srv.resp_port), client(redis_peer.resp_port)
    p.flushall()
    r.flushall()
    # Redis checks every payload whole, as pkvs does (and small nodes:
    # several per stream, deleted entries inside them).
    r.config_set("sanitize-dump-payload", "yes")
    r.config_set("stream-node-max-entries", 7)
    yield p, r, pkvs_srv.resp_port, redis_peer.resp_port
    r.config_set("stream-node-max-entries", 100)


@pytest.mark.parametrize("direction", ["redis->pkvs", "pkvs->redis"])
def test_payloads_cross(pair, direction):
    p, r, pport, rport = pair
    src, dst, sport, dport = (r, p, rport, pport) if direction == "redis->pkvs" else \
        (p, r, pport, rport)
    fill(src)
    layout = INNER if direction == "pkvs->redis" else LAYOUT
    for k in KEYS:
        payload = src.dump(k)
        assert payload[0] == 19, k                   # RDB_TYPE_STREAM_LISTPACKS_2
        assert dst.restore(k, 0, payload) == b"OK", k
        assert view(dport, k, layout=layout) == view(sport, k, layout=layout), k
    # The restored streams go on as the originals (the times of the
    # deliveries below differ: compared without them).
    for cmd in (("XADD", "many", "2000-1", "f", "new"), ("XADD", "made", "1-1", "f", "first"),
                ("XADD", "emptied", "7-3", "a", "3"),
                ("XREADGROUP", "GROUP", "g1", "c9", "COUNT", "4", "STREAMS", "many", ">"),
                ("XREADGROUP", "GROUP", "g2", "idle", "STREAMS", "many", ">"),
                ("XREADGROUP", "GROUP", "g", "b", "STREAMS", "emptied", "trimmed", ">", ">"),
                ("XREADGROUP", "GROUP", "g", "z", "STREAMS", "setid", "0"),
                ("XAUTOCLAIM", "many", "g1", "c4", "0", "0", "COUNT", "3", "JUSTID"),
                ("XTRIM", "many", "MAXLEN", "=", "200"), ("XLEN", "many"),
                ("XINFO", "GROUPS", "setid"), ("XINFO", "GROUPS", "trimmed")):
        got, want = call(dport, *cmd), call(sport, *cmd)
        assert got == want, (cmd, got[:300], want[:300])
    for k in KEYS:
        assert view(dport, k, times=False) == view(sport, k, times=False), k


def test_payload_round_trip(pair):
    """pkvs -> redis-server -> pkvs: the stream it started from; and pkvs's
    own payload of what it restored is the one it restored from."""
    p, r, pport, rport = pair
    fill(p)
    for k in KEYS:
        payload = p.dump(k)
        assert r.restore(k, 0, payload) == b"OK"
        assert p.restore(k + ":back", 0, r.dump(k)) == b"OK"
        assert view(pport, k + ":back") == view(pport, k), k
        assert p.restore(k + ":again", 0, payload) == b"OK"
        assert p.dump(k + ":again") == payload, k


def crc64(data):
    poly, crc = 0x95ac9329ac4bc9b5, 0
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    for b in data:
        crc = table[(crc ^ b) & 0xff] ^ (crc >> 8)
    return crc


def sealed(value):
    """A payload of value (type byte and value) with version and CRC."""
    body = value + b"\x0a\x00"
    return body + crc64(body).to_bytes(8, "little")


def test_damaged_payloads_refused(pair):
    p, r, pport, rport = pair
    fill(r)
    value = r.dump("many")[:-10]
    assert sealed(value) == r.dump("many")
    damaged = [value[:n] for n in (1, 2, 17, 40, len(value) // 2, len(value) - 1)]
    at = value.rindex(b"\x02c1")                          # a consumer's name's length
    damaged.append(value[:at] + b"\x03" + value[at + 1:])
    p.restore("many", 0, r.dump("many"))
    before = view(pport, "many")
    for v in damaged:
        payload = sealed(v)
        got = call(pport, "RESTORE", "many", "0", payload, "REPLACE")
        want = call(rport, "RESTORE", "x", "0", payload)
        assert got == want == b"-ERR Bad data format\r\n", (v[:40], got, want)
        assert view(pport, "many") == before
    r.xgroup_create("big", "G" * 401, "$", mkstream=True)
    r.xgroup_create("bigc", "g", "$", mkstream=True)
    r.xgroup_createconsumer("bigc", "g", "c" * 401)
    for k in ("big", "bigc"):
        assert call(pport, "RESTORE", k, "0", r.dump(k)) == b"-ERR Bad data format\r\n"
        assert p.exists(k) == 0


class Reader:
    """An RDB value's parts, kept as raw bytes."""

    def __init__(self, b):
        self.b, self.i = b, 0

    def take(self, n):
        self.i += n
        return self.b[self.i - n:self.i]

    def length(self):
        """RDB's length; its raw bytes and its value (an encoded string's
        marker: None)."""
        start, c = self.i, self.b[self.i]
        if c >> 6 == 0:
            n, self.i = c & 63, self.i + 1
        elif c >> 6 == 1:
            n, self.i = (c & 63) << 8 | self.b[self.i + 1], self.i + 2
        elif c in (0x80, 0x81):
            k = 4 if c == 0x80 else 8
            n, self.i = int.from_bytes(self.b[self.i + 1:self.i + 1 + k], "big"), self.i + 1 + k
        else:
            n, self.i = None, self.i + 1
        return self.b[start:self.i], n

    def string(self):
        start = self.i
        c = self.b[self.i]
        raw, n = self.length()
        if n is None:
            if c & 63 == 3:                         # LZF: compressed and plain lengths
                n = self.length()[1]
                self.length()
            else:
                n = 1 << (c & 63)                   # an integer of 1, 2 or 4 bytes
        self.i += n
        return self.b[start:self.i]


def as_type15(payload):
    """A stream's DUMP (type 19) as Redis 6 wrote it (type 15): without
    the first and largest deleted IDs, entries added and groups' entries
    read."""
    r = Reader(payload[:-10])
    assert r.take(1) == b"\x13"
    out = [b"\x0f"]
    raw, nodes = r.length()
    out.append(raw)
    for _ in range(2 * nodes):
        out.append(r.string())
    out += [r.length()[0] for _ in range(3)]        # length, last ID
    for _ in range(5):
        r.length()
    raw, groups = r.length()
    out.append(raw)
    for _ in range(groups):
        out += [r.string(), r.length()[0], r.length()[0]]
        r.length()                                  # entries read
        raw, pel = r.length()
        out.append(raw)
        for _ in range(pel):
            out += [r.take(24), r.length()[0]]
        raw, consumers = r.length()
        out.append(raw)
        for _ in range(consumers):
            out += [r.string(), r.take(8)]
            raw, n = r.length()
            out += [raw, r.take(16 * n)]
    assert r.i == len(r.b)
    return sealed(b"".join(out))


def test_redis6_payloads(pair):
    """Type 15 read as Redis 7.0 reads it: entries added taken as the
    length, no deleted ID, each group's entries read estimated."""
    p, r, pport, rport = pair
    fill(r)
    for k in KEYS:
        payload = as_type15(r.dump(k))
        assert r.restore(k + ":6", 0, payload) == b"OK"
        assert p.restore(k + ":6", 0, payload) == b"OK"
        got, want = view(pport, k + ":6"), view(rport, k + ":6")
        if r.xlen(k) == 0:
            # Redis records an empty one's first ID as all ones (its
            # search for the first entry found none); pkvs says 0-0, as
            # of any empty stream.
            got, want = ([masked(x, {b"recorded-first-entry-id"}) for x in v] for v in (got, want))
        assert got == want, k


def started_redis(args):
    try:
        rs = RedisServer(list(args), dir_base="/dev/shm", tag="replica")
    except MissingBinary:
        pytest.skip("redis-server is not installed")
    rs.start()
    return rs


def link_up(c):
    return c.info("replication").get("master_link_status") == "up"


def test_full_sync_to_replicas():
    factory = PkvsFactory()
    rs = None
    try:
        primary = factory.start(http=False)
        p = client(primary.resp_port)
        fill(p)
        p.config_set("stream-node-max-entries", 7)
        for i in range(30):
            p.xadd("late", {"i": i}, maxlen=12, approximate=True)
        p.config_set("stream-node-max-entries", 100)
        replica = factory.start(http=False)
        rs = started_redis(["--replicaof", "127.0.0.1", str(primary.resp_port)])
        rp, rr = client(replica.resp_port), client(rs.resp_port)
        assert rp.replicaof("127.0.0.1", primary.resp_port) == b"OK"
        assert wait_until(lambda: link_up(rp) and link_up(rr), 20)
        for k in KEYS + ["late"]:
            want = view(primary.resp_port, k, layout=INNER)
            assert view(rs.resp_port, k, layout=INNER) == want, k
            assert view(replica.resp_port, k, layout=INNER) == want, k
    finally:
        if rs:
            rs.stop()
        factory.cleanup()
