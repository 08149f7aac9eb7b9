"""pkvs's keyspace notifications (services/kv_notify.c, the commands'
kv_notify lines): notify-keyspace-events as Redis 7.0.15 reads, keeps and
applies it, and the events each command emits, byte for byte against
Debian's redis-server (tests/e2e/redis_peer.py).

- Per command (SCENARIOS): the same commands run on pkvs and on
  redis-server with every class on ("AKE" and "n", new keys) while a
  connection subscribes to the pattern "*"; after each command a marker
  is published, and the events that came before it (keyspace then
  keyevent, in Redis's order) must be the same bytes, as must the
  command's reply.
- "expired" from a lookup (GET, a write over the key) and from active
  expiry (nobody touches the key), "new" only for keys added.
- Classes masked (only K, only E, one class), CONFIG SET/GET of the
  setting in Redis's canonical form and its errors, --notify-keyspace-events
  at start, channels in other databases, RESP3 pushes, keyspace
  subscribers on plain channels (SUBSCRIBE __keyspace@0__:k), and no
  event at all while the setting is off.
"""
import os
import time

import pytest

from conftest import PkvsFactory, RespConn, http_once, resp_command, wait_until
from pkvs_module import pkvs_srv  # noqa: F401 (pkvs_srv: a fixture)
from redis_peer import RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)

MARK = "__notify_test_mark__"


class Watch:
    """A client, a subscriber to pattern pat and a connection that
    publishes the markers, on one server."""

    def __init__(self, port, classes="AKEn", pat="*", proto=2):
        self.c = RawConn(port)
        self.c.call("FLUSHALL")
        self.c.call("CONFIG", "SET", "notify-keyspace-events", classes)
        self.m = RawConn(port)
        self.s = RawConn(port, proto)
        self.s.call("PSUBSCRIBE", pat)
        if pat != "*":
            self.s.call("SUBSCRIBE", MARK)
        self.n = 0

    def events(self):
        """Everything the subscriber got before the next marker."""
        self.n += 1
        self.m.call("PUBLISH", MARK, str(self.n))
        out = []
        while True:
            m = self.s.read_raw()
            if MARK.encode() in m and m.endswith(b"\r\n$%d\r\n%d\r\n" % (len(str(self.n)), self.n)):
                return out
            out.append(m)

    def run(self, *cmd):
        """cmd's reply and the events it caused."""
        return self.c.call(*cmd), self.events()

    def close(self):
        if self.c is None:
            return
        self.c.call("CONFIG", "SET", "notify-keyspace-events", "")
        for c in (self.c, self.m, self.s):
            c.close()
        self.c = self.s = self.m = None


def both(pkvs_port, redis_port, **kw):
    return Watch(pkvs_port, **kw), Watch(redis_port, **kw)


def compare(pw, rw, cmds):
    for cmd in cmds:
        if cmd[0] == "SLEEP":
            time.sleep(float(cmd[1]))
            continue
        got, want = pw.run(*cmd), rw.run(*cmd)
        assert got == want, f"{cmd!r}:\n pkvs  {got!r}\n redis {want!r}"


# (family probe, commands): each command's reply and events compared.
SCENARIOS = {
    "set": [
        ("SET", "k", "v"), ("SET", "k", "w"), ("SET", "k", "v", "EX", "100"),
        ("SET", "k", "v", "KEEPTTL"), ("SET", "k", "v", "NX"), ("SET", "k", "v", "XX"),
        ("SET", "n", "v", "XX"), ("SET", "k", "x", "GET"), ("SET", "k", "y", "PX", "100000", "GET"),
        ("SET", "k", "v", "EXAT", "9999999999"), ("SET", "k", "v", "EX", "0"),
        ("SETNX", "k", "v"), ("SETNX", "k2", "v"), ("SETEX", "k3", "100", "v"),
        ("PSETEX", "k4", "100000", "v"), ("GETSET", "k", "z"), ("GETSET", "gs", "z"),
    ],
    "get-del-ex": [
        ("SET", "k", "v"), ("GET", "k"), ("GETDEL", "k"), ("GETDEL", "k"),
        ("SET", "k", "v"), ("GETEX", "k"), ("GETEX", "k", "EX", "100"), ("GETEX", "k", "PERSIST"),
        ("GETEX", "k", "PERSIST"), ("GETEX", "k", "PXAT", "1"), ("GETEX", "nope", "EX", "1"),
        ("SET", "k", "v"), ("GETEX", "k", "EXAT", "1"),
    ],
    "append-setrange": [
        ("APPEND", "a", "x"), ("APPEND", "a", "yz"), ("SETRANGE", "a", "1", "Q"),
        ("SETRANGE", "b", "2", "W"), ("SETRANGE", "a", "0", ""), ("SETRANGE", "c", "5", ""),
        ("SETBIT", "bits", "7", "1"), ("SETBIT", "bits", "7", "1"), ("GETBIT", "bits", "7"),
        ("STRLEN", "a"), ("GETRANGE", "a", "0", "-1"),
    ],
    "bitops": [
        ("SET", "a", "\x0f"), ("SET", "b", "\xf0"), ("BITOP", "OR", "d", "a", "b"),
        ("BITOP", "NOT", "d", "d"), ("BITOP", "AND", "d", "n1", "n2"), ("BITOP", "AND", "d", "n1"),
        ("BITFIELD", "f", "SET", "u8", "0", "5"), ("BITFIELD", "f", "SET", "u8", "0", "5"),
        ("BITFIELD", "f", "GET", "u8", "0"), ("BITFIELD", "f", "INCRBY", "u4", "0", "0"),
        ("BITFIELD", "g", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "9"),
        ("BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "100", "9"),
        ("BITFIELD_RO", "f", "GET", "i8", "0"), ("BITCOUNT", "a"), ("BITPOS", "a", "1"),
    ],
    "hll": [
        ("PFADD", "p", "a", "b"), ("PFADD", "p", "a"), ("PFADD", "q"), ("PFCOUNT", "p"),
        ("PFMERGE", "m", "p", "q"), ("PFMERGE", "m"), ("PFCOUNT", "p", "q"), ("PFDEBUG", "TODENSE", "p"),
    ],
    "counters": [
        ("INCR", "c"), ("INCR", "c"), ("DECR", "c"), ("INCRBY", "c", "10"), ("DECRBY", "c", "3"),
        ("INCRBYFLOAT", "f", "1.5"), ("INCRBYFLOAT", "f", "-0.5"), ("SET", "s", "abc"),
        ("INCR", "s"), ("INCRBYFLOAT", "s", "1"), ("INCRBY", "c", "x"),
    ],
    "mset": [
        ("MSET", "a", "1", "b", "2", "a", "3"), ("MSETNX", "a", "1", "z", "2"),
        ("MSETNX", "y", "1", "z", "2"), ("MGET", "a", "b", "nope"),
    ],
    "del": [
        ("MSET", "a", "1", "b", "2", "c", "3"), ("DEL", "a", "nope", "b"), ("UNLINK", "c", "c"),
        ("DEL", "nope"), ("EXISTS", "a"), ("TOUCH", "a"), ("TYPE", "a"),
    ],
    "rename": [
        ("SET", "a", "1"), ("SET", "b", "2"), ("RENAME", "a", "c"), ("RENAME", "c", "b"),
        ("RENAME", "b", "b"), ("RENAMENX", "b", "x"), ("SET", "y", "1"), ("RENAMENX", "x", "y"),
        ("RENAME", "nope", "z"), ("SET", "t", "v", "EX", "100"), ("RENAME", "t", "u"),
    ],
    "copy-move": [
        ("SET", "a", "1"), ("COPY", "a", "b"), ("COPY", "a", "b"), ("COPY", "a", "b", "REPLACE"),
        ("COPY", "a", "a2", "DB", "1"), ("MOVE", "a", "2"), ("SET", "a", "again"), ("MOVE", "a", "2"),
        ("SELECT", "2"), ("GET", "a"), ("SELECT", "0"),
    ],
    "expire": [
        ("SET", "k", "v"), ("EXPIRE", "k", "100"), ("PEXPIRE", "k", "100000"),
        ("EXPIREAT", "k", "9999999999"), ("PEXPIREAT", "k", "9999999999000"),
        ("EXPIRE", "k", "100", "NX"), ("EXPIRE", "k", "50", "GT"), ("EXPIRE", "k", "50", "LT"),
        ("PERSIST", "k"), ("PERSIST", "k"), ("EXPIRE", "nope", "10"), ("TTL", "k"),
        ("EXPIRE", "k", "-1"), ("SET", "k", "v"), ("PEXPIREAT", "k", "1"),
        ("SET", "k", "v"), ("EXPIREAT", "k", "0"),
    ],
    "hash": [
        ("HSET", "h", "a", "1", "b", "2"), ("HSET", "h", "a", "1"), ("HSETNX", "h", "a", "x"),
        ("HSETNX", "h", "c", "3"), ("HMSET", "h", "d", "4"), ("HINCRBY", "h", "n", "5"),
        ("HINCRBYFLOAT", "h", "f", "1.5"), ("HDEL", "h", "nope"), ("HDEL", "h", "a", "b", "x"),
        ("HGET", "h", "c"), ("HDEL", "h", "c", "d", "n", "f"), ("HSET", "s", "a", "1"),
        ("HINCRBY", "s", "a", "x"),
    ],
    "list": [
        ("LPUSH", "l", "a", "b"), ("RPUSH", "l", "c"), ("LPUSHX", "l", "d"), ("RPUSHX", "nope", "x"),
        ("LINSERT", "l", "BEFORE", "c", "x"), ("LINSERT", "l", "BEFORE", "zz", "x"),
        ("LSET", "l", "0", "y"), ("LREM", "l", "0", "x"), ("LREM", "l", "0", "nope"),
        ("LTRIM", "l", "0", "1"), ("LPOP", "l"), ("RPOP", "l", "5"), ("LPOP", "l"),
        ("RPUSH", "src", "1", "2"), ("LMOVE", "src", "dst", "LEFT", "RIGHT"),
        ("RPOPLPUSH", "src", "dst"), ("LMPOP", "2", "nope", "dst", "RIGHT", "COUNT", "5"),
        ("RPUSH", "t", "a"), ("LTRIM", "t", "1", "0"),
    ],
    "set-type": [
        ("SADD", "s", "a", "b", "c"), ("SADD", "s", "a"), ("SREM", "s", "x"), ("SREM", "s", "a"),
        ("SMOVE", "s", "d", "b"), ("SMOVE", "s", "d", "c"), ("SREM", "d", "b"), ("SPOP", "d"),
        ("SADD", "x", "1", "2"), ("SADD", "y", "2", "3"), ("SINTERSTORE", "o", "x", "y"),
        ("SUNIONSTORE", "o", "x", "y"), ("SDIFFSTORE", "o", "x", "x"), ("SDIFFSTORE", "o", "x", "x"),
    ],
    "zset": [
        ("ZADD", "z", "1", "a", "2", "b"), ("ZADD", "z", "1", "a"), ("ZADD", "z", "INCR", "5", "a"),
        ("ZINCRBY", "z", "1", "b"), ("ZREM", "z", "x"), ("ZREM", "z", "a"),
        ("ZADD", "z", "3", "c", "4", "d"), ("ZREMRANGEBYSCORE", "z", "3", "3"),
        ("ZREMRANGEBYRANK", "z", "0", "0"), ("ZPOPMIN", "z"), ("ZPOPMAX", "z"),
        ("ZADD", "p", "1", "a"), ("ZUNIONSTORE", "q", "1", "p"), ("ZINTERSTORE", "q", "2", "p", "nope"),
    ],
}


@pytest.fixture
def watches(pkvs_srv, redis_peer):
    made = []

    def make(**kw):
        pw, rw = both(pkvs_srv.resp_port, redis_peer.port, **kw)
        made.extend([pw, rw])
        return pw, rw
    yield make
    for w in made:
        w.close()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_events_per_command(pkvs_srv, watches, name):
    pw, rw = watches()
    compare(pw, rw, SCENARIOS[name])


def test_expired_by_lookup(watches):
    """Keys past their deadline met by a read, a write over them, a DEL
    and an EXPIRE: "expired" (then the write's own events). Either
    server's active expiry may take a key first, so the replies are
    compared per command and the events over the whole run."""
    pw, rw = watches()
    cmds = [("SET", k, "v", "PX", "40") for k in ("k1", "k2", "k3", "k4")]
    cmds += [("GET", "k1"), ("SET", "k2", "new"), ("DEL", "k3"), ("EXPIRE", "k4", "10")]
    seen = []
    for w in (pw, rw):
        replies, events = [], []
        for cmd in cmds:
            if cmd[0] == "GET":
                time.sleep(0.1)
            r, e = w.run(*cmd)
            replies.append(r)
            events += e
        seen.append((replies, sorted(events)))
    assert seen[0] == seen[1]
    assert any(b"__keyevent@0__:expired\r\n$2\r\nk2" in e for e in seen[0][1])


def test_expired_by_active_expiry(watches):
    """Nobody touches the key: the server's own expiry removes it and
    publishes "expired" (within a second or so on both)."""
    pw, rw = watches(classes="Ex")
    for w in (pw, rw):
        w.c.call("SET", "gone", "v", "PX", "50")
        w.c.call("SET", "stays", "v")
    for w in (pw, rw):
        got = []
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            got = w.events()
            time.sleep(0.05)
        assert got == [b"*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$22\r\n__keyevent@0__:expired\r\n$4\r\ngone\r\n"], got


def test_http_changes_notify_as_set_and_del(pkvs, redis_peer):
    """An HTTP PUT raises SET's events and an HTTP DELETE DEL's (none for
    an absent key): the same bytes as redis-server's for SET and DEL of
    the same keys."""
    srv = pkvs.start()
    pw, rw = both(srv.resp_port, redis_peer.port)
    try:
        got = [http_once(srv.port, "PUT", "/kv/k1", body=b"v1").status]
        got.append(pw.events())
        got.append(http_once(srv.port, "PUT", "/kv/k1", body=b"v2").status)
        got.append(pw.events())
        got.append(http_once(srv.port, "DELETE", "/kv/k1").status)
        got.append(pw.events())
        got.append(http_once(srv.port, "DELETE", "/kv/k1").status)
        got.append(pw.events())
        want = [201, rw.run("SET", "k1", "v1")[1], 204, rw.run("SET", "k1", "v2")[1],
                204, rw.run("DEL", "k1")[1], 404, rw.run("DEL", "k1")[1]]
        assert got == want, (got, want)
        assert want[1] and want[5] and not want[7]
    finally:
        pw.close()
        rw.close()


def test_masks(watches):
    for classes in ("K$", "E$", "Kg", "Eg", "KEx", "KEn", "Kh", "El", "KEA", "gE", "g$", "KE"):
        pw, rw = watches(classes=classes)
        compare(pw, rw, [("SET", "a", "1"), ("EXPIRE", "a", "100"), ("DEL", "a"),
                         ("SET", "b", "1", "PX", "100"), ("SLEEP", "0.2"), ("GET", "b")])
        pw.close()
        rw.close()


def test_channels_and_databases(pkvs_srv, redis_peer):
    """A plain subscription to one key's channel, and one event's, in
    database 5 (RESP3: pushes)."""
    outs = []
    for port in (pkvs_srv.resp_port, redis_peer.port):
        c = RawConn(port)
        c.call("CONFIG", "SET", "notify-keyspace-events", "KE$g")
        s = RawConn(port, 3)
        s.call("SUBSCRIBE", "__keyspace@5__:k", "__keyevent@5__:del")
        s.read_raw()
        c.call("SELECT", "5")
        c.call("SET", "k", "v")
        c.call("SET", "other", "v")
        c.call("DEL", "k", "other")
        c.call("SELECT", "0")
        c.call("SET", "k", "v")                           # database 0: not these channels
        c.call("PUBLISH", "__keyevent@5__:del", "end")
        got = [s.read_raw() for _ in range(5)]
        outs.append(got)
        c.call("CONFIG", "SET", "notify-keyspace-events", "")
        c.close()
        s.close()
    assert outs[0] == outs[1]
    assert outs[0][0].startswith(b">3\r\n$7\r\nmessage\r\n")


def test_config_set_get(pkvs_srv, redis_peer):
    cases = ["gKE", "$lshzxeKE", "KA", "EA", "AKE", "KEA", "Agn", "n", "m", "KEm", "", "A",
             "gggKKK", "AnKEm", "tdl", "x", "K", "E"]
    p, r = RawConn(pkvs_srv.resp_port), RawConn(redis_peer.port)
    try:
        for v in cases:
            for c in (p, r):
                c.call("CONFIG", "SET", "notify-keyspace-events", v)
            got = p.call("CONFIG", "GET", "notify-keyspace-events")
            assert got == r.call("CONFIG", "GET", "notify-keyspace-events"), v
        for bad in ("Q", "KEq", "a", " ", "K E"):
            got = p.call("CONFIG", "SET", "notify-keyspace-events", bad)
            assert got == r.call("CONFIG", "SET", "notify-keyspace-events", bad), bad
        for c in (p, r):
            c.call("CONFIG", "SET", "notify-keyspace-events", "")
    finally:
        p.close()
        r.close()


def test_off_means_nothing(pkvs_srv):
    port = pkvs_srv.resp_port
    c = RespConn(port)
    c.command("CONFIG", "SET", "notify-keyspace-events", "")
    s = RespConn(port)
    s.command("PSUBSCRIBE", "*")
    c.command("SET", "a", "1")
    c.command("DEL", "a")
    c.command("PUBLISH", "plain", "x")
    assert s.read_reply() == [b"pmessage", b"*", b"plain", b"x"]
    # K or E alone names no class: still nothing.
    c.command("CONFIG", "SET", "notify-keyspace-events", "KE")
    c.command("SET", "a", "1")
    c.command("PUBLISH", "plain", "y")
    assert s.read_reply() == [b"pmessage", b"*", b"plain", b"y"]
    c.close()
    s.close()


def test_setting_at_start():
    f = PkvsFactory()
    try:
        srv = f.start(extra_args=["--notify-keyspace-events", "KEA"], http=False)
        c = RespConn(srv.resp_port)
        assert c.command("CONFIG", "GET", "notify-keyspace-events") == [b"notify-keyspace-events", b"AKE"]
        s = RespConn(srv.resp_port)
        s.command("SUBSCRIBE", "__keyevent@0__:set")
        c.command("SET", "k", "v")
        assert s.read_reply() == [b"message", b"__keyevent@0__:set", b"k"]
        c.close()
        s.close()
        rc, err = f.start_failing(extra_args=["--notify-keyspace-events", "KQ"])
        assert rc == 2 and "notify-keyspace-events" in err, (rc, err)
        # The same from the configuration file.
        conf = os.path.join(f.tmpdir(), "pkvs.conf")
        with open(conf, "w") as out:
            out.write("notify-keyspace-events = Eg$\n")
        srv = f.start(extra_args=["--config", conf], http=False)
        c = RespConn(srv.resp_port)
        assert c.command("CONFIG", "GET", "notify-keyspace-events") == [b"notify-keyspace-events", b"g$E"]
        c.close()
    finally:
        f.cleanup()


def test_many_keys_in_a_transaction(watches):
    pw, rw = watches(classes="KEA")
    compare(pw, rw, [("MULTI",), ("SET", "a", "1"), ("INCR", "a"), ("DEL", "a", "b"),
                     ("EXEC",)])


def test_events_on_long_keys(watches):
    pw, rw = watches(classes="KEA")
    long = "k" * 1000
    compare(pw, rw, [("SET", long, "v"), ("APPEND", long, "w"), ("EXPIRE", long, "100"),
                     ("RENAME", long, long + "2"), ("DEL", long + "2")])
