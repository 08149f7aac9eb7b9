"""pkvs as a replication primary (services/kv_repl.c, kv_rdb.c), with
Debian's redis-server 7.0.15 as its replica (--replicaof):

- the full synchronization: keys of every type, in several databases,
  with deadlines, arrive in the RDB snapshot Redis loads;
- the command stream keeps the replica equal through mixed writes,
  relative deadlines, INCRBYFLOAT, SPOP, GETDEL, MULTI/EXEC, EVAL, SELECT,
  large values that arrive in pieces, FLUSHDB, RESTORE, expiry;
- the stream's shape, read raw after SYNC as Redis's own tests read it:
  SELECT first, a transaction of one write unwrapped, of several wrapped
  in MULTI/EXEC, of none absent; relative deadlines absolute (SET PXAT,
  PEXPIREAT); INCRBYFLOAT as SET KEEPTTL; an expired key as DEL; PUBLISH
  propagated, SCRIPT LOAD not;
- INFO replication, ROLE, WAIT counting acknowledgements, REPLCONF;
- a replica that stops reading dropped past client-output-buffer-limit's
  replica class (hard, or soft for its seconds), its snapshot not counted;
  a SET whose value arrives in pieces propagated once;
- the replica role's rules (REPLICAOF, READONLY, MASTERDOWN, EXECABORT),
  byte for byte against redis-server.
"""
import socket
import threading
import time

import pytest
import redis

from conftest import PkvsFactory, wait_until
from redis_peer import RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)
from paste_proc import MissingBinary, RedisServer


@pytest.fixture
def primary():
    factory = PkvsFactory()
    srv = factory.start(http=False)
    yield srv
    factory.cleanup()


def started_redis(args=(), tag="redis"):
    """A redis-server of the test's own, running (skipped without one)."""
    try:
        rs = RedisServer(list(args), dir_base="/dev/shm", tag=tag)
    except MissingBinary:
        pytest.skip("redis-server is not installed")
    rs.start()
    return rs


def start_replica(port):
    return started_redis(["--replicaof", "127.0.0.1", str(port)], "replica")


def client(port, db=0):
    return redis.Redis(host="127.0.0.1", port=port, db=db, socket_timeout=10)


def link_up(rc):
    info = rc.info("replication")
    return info.get("master_link_status") == "up"


def dataset(rc, dbs):
    """Every key of dbs, read with plain commands: {db: {key: (type, value, ttl?)}}."""
    out = {}
    for db in dbs:
        c = client(rc.connection_pool.connection_kwargs["port"], db)
        keys = {}
        for k in c.keys("*"):
            t = c.type(k).decode()
            if t == "string":
                v = c.get(k)
            elif t == "list":
                v = c.lrange(k, 0, -1)
            elif t == "set":
                v = sorted(c.smembers(k))
            elif t == "zset":
                v = c.zrange(k, 0, -1, withscores=True)
            elif t == "hash":
                v = sorted(c.hgetall(k).items())
            else:
                v = None
            pttl = c.pttl(k)
            keys[k] = (t, v, pttl > 0)
        out[db] = keys
    return out


def same_data(p, r, dbs=(0, 1, 3)):
    a, b = dataset(p, dbs), dataset(r, dbs)
    return a == b, a, b


def fill(c, c3):
    c.set("s", "hello")
    c.set("n", 41)
    c.set("big", "x" * 100000)
    c.set("ttl", "v", px=600000)
    c.rpush("l", "a", "b", "c", "1", "-2")
    c.sadd("st", "x", "y", "z", "1", "2")
    c.zadd("z", {"a": 1, "b": 2.5, "c": -3, "d": float("inf")})
    c.hset("h", mapping={"f": "v", "g": "w", "n": "12"})
    c.expire("h", 700)
    c3.set("three", "3")
    c3.lpush("l3", *[f"e{i}" for i in range(300)])


def test_full_sync_every_type(primary):
    p = client(primary.resp_port)
    p.flushall()
    fill(p, client(primary.resp_port, 3))
    rep = start_replica(primary.resp_port)
    try:
        r = client(rep.resp_port)
        assert wait_until(lambda: link_up(r), 20)
        ok, a, b = same_data(p, r)
        assert ok, (a, b)
        assert b[0][b"ttl"][2] and b[0][b"h"][2] and not b[0][b"s"][2]
        assert 590000 < r.pttl("ttl") <= 600000
        assert len(b[3][b"l3"][1]) == 300
    finally:
        rep.stop()


def test_stream_keeps_replica_equal(primary):
    p = client(primary.resp_port)
    p.flushall()
    p3 = client(primary.resp_port, 3)
    fill(p, p3)
    rep = start_replica(primary.resp_port)
    try:
        r = client(rep.resp_port)
        assert wait_until(lambda: link_up(r), 20)
        p.set("k1", "v1", ex=100)
        p.execute_command("SETEX", "k2", 50, "v2")
        p.incrbyfloat("f", 1.25)
        p.incrbyfloat("f", 0.1)
        p.spop("st")
        p.spop("st", 2)
        p.expire("s", 500)
        p.getdel("n")
        p.getex("ttl", persist=True)
        p.hincrbyfloat("h", "fl", 2.5)
        p.lpush("l", "new")
        p.rpop("l")
        p.linsert("l", "BEFORE", "b", "ins")
        p.zincrby("z", 5, "a")
        p.zpopmin("z")
        p.srem("st", "nope")
        p.delete("nothing")
        with p.pipeline(transaction=True) as t:
            t.set("m1", 1).incr("m1").hset("mh", "a", "b").execute()
        p.eval("redis.call('set', KEYS[1], ARGV[1]); redis.call('rpush', KEYS[2], 'x', 'y')", 2,
               "ev", "evl", "val")
        p.eval("return redis.call('get', KEYS[1])", 1, "ev")
        p3.set("three", "33")
        p3.flushdb()
        p3.set("again", "1")
        p1 = client(primary.resp_port, 1)
        p1.set("one", "1")
        p.set("short", "v", px=150)
        dumped = p.dump("l")
        p.restore("lcopy", 0, dumped)
        p.restore("hcopy", 900000, p.dump("h"))
        # A value that arrives in pieces (streamed into held buffers).
        raw = socket.create_connection(("127.0.0.1", primary.resp_port))
        val = b"y" * 300000
        raw.sendall(b"*3\r\n$3\r\nSET\r\n$6\r\nstream\r\n$%d\r\n" % len(val))
        for i in range(0, len(val), 7000):
            raw.sendall(val[i:i + 7000])
            time.sleep(0.001)
        raw.sendall(b"\r\n")
        assert raw.recv(10) == b"+OK\r\n"
        raw.close()
        # A blocked pop served by a later push: its key's value follows.
        res = []
        blocked = client(primary.resp_port)
        th = threading.Thread(target=lambda: res.append(blocked.blpop("bl", 5)))
        th.start()
        time.sleep(0.2)
        p.rpush("bl", "a", "b", "c")
        th.join()
        assert res == [(b"bl", b"a")]
        time.sleep(0.3)                     # "short" expires; active expiry sends DEL
        assert p.exists("short") == 0
        assert p.wait(1, 5000) == 1
        assert wait_until(lambda: same_data(p, r)[0], 10), same_data(p, r)[1:]
        assert r.get("stream") == val
        assert r.get("f") == b"1.35"
        assert r.pttl("hcopy") > 800000
        assert r.exists("short") == 0
        assert r.lrange("bl", 0, -1) == [b"b", b"c"]
    finally:
        rep.stop()


class Stream:
    """The raw replication stream after SYNC, as Redis's tests read it."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.s.sendall(b"SYNC\r\n")
        self.buf = b""
        # Before the snapshot a primary may send newlines to keep the link
        # alive (Redis does while its BGSAVE runs): bare LFs, or empty lines.
        line = self.line().lstrip(b"\n")
        while not line:
            line = self.line().lstrip(b"\n")
        assert line.startswith(b"$"), line
        n = int(line[1:])
        self.rdb = self.read(n)
        assert self.rdb.startswith(b"REDIS0010")

    def fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        i = self.buf.index(b"\r\n")
        out, self.buf = self.buf[:i], self.buf[i + 2:]
        return out

    def read(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def cmd(self):
        head = self.line()
        assert head.startswith(b"*"), head
        out = []
        for _ in range(int(head[1:])):
            n = int(self.line()[1:])
            out.append(self.read(n + 2)[:-2].decode("latin-1"))
        out[0] = out[0].lower()
        return out

    def close(self):
        self.s.close()


def test_stream_shape(primary):
    p = client(primary.resp_port)
    p.flushall()
    p.set("foo", "value1")
    st = Stream(primary.resp_port)
    try:
        # A transaction of one write: not wrapped.
        with p.pipeline(transaction=True) as t:
            t.set("foo", "bar").get("foo").execute()
        assert st.cmd() == ["select", "0"]
        assert st.cmd() == ["set", "foo", "bar"]
        # Several: wrapped, with SELECT inside where the database changes.
        with p.pipeline(transaction=True) as t:
            t.set("a", "1").execute_command("SELECT", "1")
            t.set("b", "2").execute_command("SELECT", "0")
            t.execute()
        assert st.cmd() == ["multi"]
        assert st.cmd() == ["set", "a", "1"]
        assert st.cmd() == ["select", "1"]
        assert st.cmd() == ["set", "b", "2"]
        assert st.cmd() == ["exec"]
        # None (reads, a DEL of nothing, an empty one): nothing.
        with p.pipeline(transaction=True) as t:
            t.get("foo").delete("absent").execute()
        p.delete("absent")
        p.execute_command("SCRIPT", "LOAD", "return 1")
        p.publish("chan", "msg")
        assert st.cmd() == ["select", "0"]
        assert st.cmd() == ["publish", "chan", "msg"]
        now = int(time.time() * 1000)
        p.set("e", "v", ex=100)
        c = st.cmd()
        assert c[:4] == ["set", "e", "v", "PXAT"] and abs(int(c[4]) - (now + 100000)) < 2000
        p.expire("e", 200)
        c = st.cmd()
        assert c[:2] == ["pexpireat", "e"] and abs(int(c[2]) - (now + 200000)) < 2000
        p.incrbyfloat("fl", 1.5)
        assert st.cmd() == ["set", "fl", "1.5", "KEEPTTL"]
        p.sadd("s", "only")
        assert st.cmd() == ["sadd", "s", "only"]
        p.spop("s")
        assert st.cmd() == ["srem", "s", "only"]
        p.getdel("fl")
        assert st.cmd() == ["del", "fl"]
        p.eval("redis.call('set', 'x', '1'); redis.call('set', 'y', '2')", 0)
        assert [st.cmd() for _ in range(4)] == [["multi"], ["set", "x", "1"], ["set", "y", "2"],
                                                 ["exec"]]
        p.eval("redis.call('set', 'x', '3')", 0)
        assert st.cmd() == ["set", "x", "3"]
        p.set("gone", "v", px=50)
        st.cmd()
        time.sleep(0.2)
        assert p.get("gone") is None
        assert st.cmd() == ["del", "gone"]
        p.flushdb()
        assert st.cmd() == ["flushdb"]
    finally:
        st.close()


def test_info_role_wait(primary):
    p = client(primary.resp_port)
    p.flushall()
    info = p.info("replication")
    assert info["role"] == "master" and info["connected_slaves"] == 0
    assert p.execute_command("ROLE")[0] == b"master"
    assert p.wait(0, 0) == 0
    t0 = time.monotonic()
    assert p.wait(1, 200) == 0                  # nobody to acknowledge: the timeout
    assert time.monotonic() - t0 >= 0.19
    rep = start_replica(primary.resp_port)
    try:
        r = client(rep.resp_port)
        assert wait_until(lambda: link_up(r), 20)
        p.set("k", "v")
        assert p.wait(1, 5000) == 1
        info = p.info("replication")
        assert info["connected_slaves"] == 1
        assert info["slave0"]["port"] == rep.resp_port
        assert info["slave0"]["state"] == "online"
        assert info["master_repl_offset"] > 0
        assert len(info["master_replid"]) == 40
        role = p.execute_command("ROLE")
        assert role[0] == b"master" and role[1] == info["master_repl_offset"]
        assert role[2][0][1] == str(rep.resp_port).encode()
        t0 = time.monotonic()
        assert p.wait(2, 300) == 1
        assert time.monotonic() - t0 >= 0.29
        # min-replicas-to-write counts replicas that acknowledged lately.
        p.config_set("min-replicas-to-write", 1)
        assert p.set("k2", "v") is True
        p.config_set("min-replicas-to-write", 2)
        with pytest.raises(redis.ResponseError, match="^NOREPLICAS"):
            p.set("k3", "v")
        p.config_set("min-replicas-to-write", 1)
    finally:
        rep.stop()
    assert wait_until(lambda: p.info("replication")["connected_slaves"] == 0, 10)
    with pytest.raises(redis.ResponseError, match="^NOREPLICAS"):
        p.set("k3", "v")
    p.config_set("min-replicas-to-write", 0)
    assert p.set("k3", "v") is True


def test_large_set_propagated_once(primary):
    """A SET whose value arrives in pieces (written as it lands, outside
    the command) reaches the stream once, as SET: not also as a RESTORE
    of the key it wrote."""
    c = client(primary.resp_port)
    st = Stream(primary.resp_port)
    v = b"v" * 300_000
    c.set("big", v)
    c.set("small", "1")
    seen = []
    cmd = st.cmd()
    while cmd[:2] != ["set", "small"]:
        seen.append(cmd)
        cmd = st.cmd()
    assert [x for x in seen if len(x) > 1 and x[1] == "big"] == [["set", "big", v.decode()]]
    st.close()


def connected(rc):
    return rc.info("replication")["connected_slaves"]


def until_key(stream, key):
    """The stream's commands up to the first that writes key (a large
    value may come as RESTORE)."""
    cmd = stream.cmd()
    while len(cmd) < 2 or cmd[1] != key:
        cmd = stream.cmd()
    return cmd


def test_stalled_replica_dropped(primary):
    """A replica that stops reading would hold the whole stream in the
    primary's DRAM: past the replica class's limit it is dropped, as Redis
    drops it, while one that reads stays, though its snapshot alone is
    over the limit (only the stream since the snapshot counts)."""
    c = client(primary.resp_port)
    v = b"x" * 100_000
    for i in range(160):                                   # a 16 MB snapshot: more than
        c.set(f"big:{i}", v)                               # the sockets' buffers take
    assert c.config_set("client-output-buffer-limit", "replica 2mb 1mb 1")
    good = Stream(primary.resp_port)                       # reads its snapshot
    stalled = socket.create_connection(("127.0.0.1", primary.resp_port))
    stalled.sendall(b"SYNC\r\n")                           # and never reads
    assert wait_until(lambda: connected(c) == 2, timeout=10)
    for i in range(15):                                    # 1.5 MB: under the hard limit
        c.set(f"s:{i}", v)
        until_key(good, f"s:{i}")
    assert connected(c) == 2
    for i in range(15, 40):                                # 4 MB in all: past it
        c.set(f"s:{i}", v)
        until_key(good, f"s:{i}")
    assert wait_until(lambda: connected(c) == 1, timeout=10)
    assert "replica" in primary.stderr() and "client-output-buffer-limit" in primary.stderr()
    stalled.settimeout(10)                                 # what reached its socket, then the end
    while stalled.recv(1 << 20):
        pass
    stalled.close()
    c.set("after", "1")                                    # the reading one still gets the stream
    assert until_key(good, "after") == ["set", "after", "1"]
    # The soft limit: over 1 MB for longer than its second.
    assert c.config_set("client-output-buffer-limit", "slave 0 1mb 1")
    stalled = socket.create_connection(("127.0.0.1", primary.resp_port))
    stalled.sendall(b"SYNC\r\n")
    assert wait_until(lambda: connected(c) == 2, timeout=10)
    for i in range(40):                                    # 4 MB now, under no hard limit
        c.set(f"t:{i}", v)
        until_key(good, f"t:{i}")
    assert connected(c) == 2
    time.sleep(1.5)
    for i in range(3):                                     # still over it, a second later
        c.set(f"u:{i}", "1")
        until_key(good, f"u:{i}")
    assert wait_until(lambda: connected(c) == 1, timeout=10)
    stalled.close()
    c.set("after2", "1")
    assert until_key(good, "after2") == ["set", "after2", "1"]
    good.close()


def test_replconf(primary):
    c = RawConn(primary.resp_port)
    assert c.call("REPLCONF", "listening-port", "1234") == b"+OK\r\n"
    assert c.call("REPLCONF", "capa", "eof", "capa", "psync2") == b"+OK\r\n"
    assert c.call("REPLCONF", "listening-port") == b"-ERR syntax error\r\n"
    assert c.call("REPLCONF", "bogus", "1").startswith(b"-ERR Unrecognized REPLCONF option: bogus")
    c.close()


def replica_role_script(c, port):
    """The replica role's refusals, the same on pkvs and redis-server."""
    c.same("SET", "xx", "1")
    c.same("REPLICAOF", "127.0.0.1", str(port))
    c.same("REPLICAOF", "127.0.0.1", str(port))      # already: "+OK Already connected..."
    c.same("SET", "yy", "2")                          # READONLY
    c.same("GET", "xx")
    c.same("MULTI")
    c.same("INCR", "xx")                              # READONLY: the transaction fails
    c.same("EXEC")
    c.same("CONFIG", "SET", "replica-serve-stale-data", "no")
    c.same("GET", "xx")                               # MASTERDOWN
    c.same("PING")
    c.same("WAIT", "0", "0")                          # not on a replica
    c.same("REPLICAOF", "no", "one")
    c.same("MULTI")
    c.same("GET", "xx")
    c.same("REPLICAOF", "127.0.0.1", str(port))
    c.same("EXEC")                                    # EXECABORT ... MASTERDOWN
    c.same("REPLICAOF", "NO", "ONE")
    c.same("CONFIG", "SET", "replica-serve-stale-data", "yes")
    c.same("SET", "yy", "2")
    c.same("REPLICAOF", "127.0.0.1", "notaport")
    c.same("WAIT", "0", "0")


class Pair:
    def __init__(self, a, b):
        self.conns = (RawConn(a), RawConn(b))

    def same(self, *cmd):
        x, y = (c.call(*cmd) for c in self.conns)
        assert x == y, (cmd, x, y)
        return x


def test_replica_role_against_redis(primary, redis_peer):  # noqa: F811
    # A port nothing listens on: the link stays down on both.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    c = Pair(primary.resp_port, redis_peer.resp_port)
    c.same("FLUSHALL")
    try:
        replica_role_script(c, dead)
    finally:
        for conn in c.conns:
            conn.call("REPLICAOF", "NO", "ONE")
            conn.call("CONFIG", "SET", "replica-serve-stale-data", "yes")
    assert client(primary.resp_port).info("replication")["role"] == "master"


def test_pkvs_replica_of_redis(primary):
    """pkvs as the replica: REPLICAOF a redis-server, its data set loaded in
    place of pkvs's (compact encodings and all), its stream applied, writes
    refused READONLY, the acknowledgements counted by the primary's WAIT;
    REPLICAOF NO ONE keeps the data and takes writes again."""
    m = started_redis(tag="primary")
    try:
        mc = client(m.resp_port)
        fill(mc, client(m.resp_port, 3))
        mc.zadd("zs", {f"m{i}": i for i in range(200)})
        mc.hset("hl", mapping={f"f{i}": "v" * 100 for i in range(20)})
        p = client(primary.resp_port)
        p.flushall()
        p.set("local", "gone after the sync")
        assert p.execute_command("REPLICAOF", "127.0.0.1", str(m.resp_port)) == b"OK"
        assert wait_until(lambda: link_up(p), 20)
        ok, a, b = same_data(mc, p)
        assert ok, (a, b)
        assert p.exists("local") == 0
        mc.set("k1", "v1", ex=100)
        mc.incrbyfloat("f", 1.5)
        mc.lpush("l", "new")
        mc.spop("st")
        mc.expire("s", 300)
        with mc.pipeline(transaction=True) as t:
            t.set("m1", 1).incr("m1").hset("mh", "a", "b").execute()
        mc.eval("redis.call('set', KEYS[1], '1'); redis.call('del', KEYS[2])", 2, "ev", "n")
        client(m.resp_port, 3).set("three", "33")
        assert mc.wait(1, 5000) == 1
        assert wait_until(lambda: same_data(mc, p)[0], 10), same_data(mc, p)[1:]
        with pytest.raises(redis.ResponseError, match="^You can't write against a read only replica"):
            p.set("x", "1")
        info = p.info("replication")
        assert info["role"] == "slave" and info["master_port"] == m.resp_port
        assert info["slave_repl_offset"] == mc.info("replication")["master_repl_offset"]
        role = p.execute_command("ROLE")
        assert role[0] == b"slave" and role[3] == b"connected"
        assert mc.info("replication")["connected_slaves"] == 1
        assert p.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        assert p.set("x", "1") is True
        assert p.get("m1") == b"2"
    finally:
        m.stop()


def test_pkvs_replica_of_pkvs(primary, pkvs):
    """Two pkvs: the replica loads the primary's own RDB and stream."""
    rep = pkvs.start(http=False)
    p, r = client(primary.resp_port), client(rep.resp_port)
    p.flushall()
    fill(p, client(primary.resp_port, 3))
    assert r.execute_command("REPLICAOF", "127.0.0.1", str(primary.resp_port)) == b"OK"
    assert wait_until(lambda: link_up(r), 20)
    assert same_data(p, r)[0]
    p.set("k", "v", ex=100)
    p.incrbyfloat("f", 2)
    p.spop("st")
    p.eval("redis.call('set', 'e', '1'); redis.call('lpush', 'l', 'z')", 0)
    with p.pipeline(transaction=True) as t:
        t.set("m", 1).incr("m").execute()
    assert p.wait(1, 5000) == 1
    assert wait_until(lambda: same_data(p, r)[0], 10), same_data(p, r)[1:]
    assert r.execute_command("ROLE")[3] == b"connected"
    assert p.info("replication")["slave0"]["offset"] == p.info("replication")["master_repl_offset"]
    with pytest.raises(redis.ResponseError, match="^You can't write"):
        r.set("x", "1")
    # The primary goes: the link is down, reads go on (replica-serve-stale-data yes).
    primary.stop()
    assert wait_until(lambda: not link_up(r), 10)
    assert r.get("m") == b"2"
    r.config_set("replica-serve-stale-data", "no")
    with pytest.raises(redis.ResponseError, match="^Link with MASTER is down"):
        r.get("m")
    assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert r.get("m") == b"2"


def test_replica_of_a_primary_with_a_password(primary, pkvs):
    """masterauth (and masteruser) let a pkvs replica in to a primary that
    asks for a password, pkvs or redis-server: without them the handshake
    is refused (the link stays down and says why), with them the data
    arrives and the stream follows; a wrong password is refused too."""
    rs = started_redis(tag="authprimary")
    try:
        client(rs.resp_port).config_set("requirepass", "rpw")   # (once it is up: its probe has none)
        p = client(primary.resp_port)
        p.set("k", "from pkvs")
        p.config_set("requirepass", "ppw")
        pa = redis.Redis(host="127.0.0.1", port=primary.resp_port, password="ppw", socket_timeout=10)
        ra = redis.Redis(host="127.0.0.1", port=rs.resp_port, password="rpw", socket_timeout=10)
        ra.set("k", "from redis")
        ra.execute_command("ACL", "SETUSER", "repl", "on", ">upw", "+@all", "~*")
        rep = pkvs.start(http=False)
        r = client(rep.resp_port)
        assert r.execute_command("REPLICAOF", "127.0.0.1", str(primary.resp_port)) == b"OK"
        time.sleep(1.5)
        assert not link_up(r) and r.get("k") is None
        r.config_set("masterauth", "wrong")
        time.sleep(1.5)
        assert not link_up(r)
        r.config_set("masterauth", "ppw")
        assert r.config_get("masterauth") == {"masterauth": "ppw"}
        assert wait_until(lambda: link_up(r) and r.get("k") == b"from pkvs", 20)
        pa.set("after", "1")
        assert wait_until(lambda: r.get("after") == b"1", 10)
        # Redis with a user of its own: masteruser names it.
        r.config_set("masteruser", "repl")
        r.config_set("masterauth", "upw")
        assert r.execute_command("REPLICAOF", "127.0.0.1", str(rs.resp_port)) == b"OK"
        assert wait_until(lambda: link_up(r) and r.get("k") == b"from redis", 20)
        assert r.get("after") is None
        ra.set("after", "2")
        assert wait_until(lambda: r.get("after") == b"2", 10)
        assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        rep.stop()
        assert "the primary refused the handshake: -" in rep.stderr(), rep.stderr()[-500:]
    finally:
        rs.stop()


def stream_of(port, cmds):
    """What a server's replication stream carries for cmds (sent one by one
    on a connection of their own), up to the SET of a sentinel; deadlines
    in ms masked."""
    st = Stream(port)
    c = RawConn(port)
    try:
        for cmd in cmds:
            c.call(*cmd)
        c.call("SET", "__end__", "1")
        out = []
        while True:
            cmd = st.cmd()
            if cmd == ["set", "__end__", "1"]:
                break
            out.append(["<ms>" if a.isdigit() and len(a) == 13 else a for a in cmd])
        return out
    finally:
        c.close()
        st.close()


def test_stream_same_as_redis(primary, redis_peer):  # noqa: F811
    """The stream pkvs sends for a mix of commands, command for command
    what Redis 7.0.15 sends for them."""
    now = int(time.time())
    cmds = [
        ("SET", "a", "1"), ("SET", "a", "2", "EX", "100"), ("SET", "a", "3", "PX", "100000"),
        ("SET", "a", "4", "EXAT", str(now + 100)), ("SET", "a", "5", "PXAT", str(now * 1000 + 100000)),
        ("SET", "a", "6", "KEEPTTL", "GET"), ("SET", "a", "7", "NX"), ("SET", "a", "8", "XX", "GET"),
        ("SETEX", "b", "100", "x"), ("PSETEX", "b", "100000", "x"), ("GETEX", "b", "PERSIST"),
        ("GETEX", "b", "EX", "100"), ("GETEX", "b"), ("GETEX", "nokey", "EX", "100"),
        ("GETDEL", "b"), ("GETDEL", "b"),
        ("EXPIRE", "a", "100"), ("PEXPIRE", "a", "100000"), ("EXPIRE", "a", "50", "GT"),
        ("PERSIST", "a"), ("EXPIREAT", "a", str(now - 100)),
        ("INCRBYFLOAT", "f", "1.5"), ("HSET", "h", "f", "1"), ("HINCRBYFLOAT", "h", "f", "2.5"),
        ("RPUSH", "l", "a", "b", "c"), ("LMPOP", "1", "l", "LEFT", "COUNT", "5"),
        ("RPUSH", "l", "x", "y"), ("BLMPOP", "0.1", "2", "nol", "l", "RIGHT"),
        ("BLPOP", "nol", "l", "0.1"), ("BLPOP", "l", "0.05"),
        ("RPUSH", "m", "1", "2"), ("BRPOPLPUSH", "m", "m2", "0.1"), ("BLMOVE", "m", "m2", "LEFT", "RIGHT", "0.1"),
        ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZMPOP", "1", "z", "MIN", "COUNT", "2"),
        ("BZPOPMAX", "z", "0.1"), ("BZMPOP", "0.05", "1", "z", "MAX"),
        ("SADD", "s", "a"), ("SPOP", "s"), ("SADD", "s", "a", "b"), ("SPOP", "s", "5"),
        ("SPOP", "s"), ("SREM", "s", "x"), ("DEL", "nokey"), ("DEL", "f"),
        ("MULTI",), ("SET", "x", "1"), ("SET", "y", "2"), ("EXEC",),
        ("MULTI",), ("EXEC",), ("MULTI",), ("GET", "x"), ("EXEC",),
        ("MULTI",), ("INCR", "x"), ("GET", "x"), ("EXEC",),
        ("EVAL", "redis.call('set', 'e', '1')", "0"),
        ("EVAL", "redis.call('set', 'e', '2'); redis.call('incr', 'n')", "0"),
        ("EVAL", "return redis.call('get', 'e')", "0"),
        ("SCRIPT", "LOAD", "return 1"), ("PUBLISH", "c", "m"),
        ("SELECT", "1"), ("SET", "one", "1"), ("SELECT", "0"), ("MOVE", "x", "1"),
        ("COPY", "y", "y2"), ("RENAME", "y2", "y3"), ("APPEND", "y3", "z"),
        ("FLUSHDB",), ("FLUSHALL",),
    ]
    for srv in (primary.resp_port, redis_peer.resp_port):
        RawConn(srv).call("FLUSHALL")
    ours = stream_of(primary.resp_port, cmds)
    theirs = stream_of(redis_peer.resp_port, cmds)
    assert ours == theirs


def test_http_writes_reach_the_stream(pkvs):
    """A write of the HTTP front end (no Redis command) reaches replicas as
    the key's whole value (RESTORE ... REPLACE ABSTTL), a delete as DEL."""
    import urllib.request
    srv = pkvs.start()
    st = Stream(srv.resp_port)
    try:
        req = urllib.request.Request(f"http://127.0.0.1:{srv.port}/kv/hk", data=b"from http",
                                     method="PUT")
        assert urllib.request.urlopen(req, timeout=10).status in (200, 201, 204)
        client(srv.resp_port).set("after", "1")
        c = st.cmd()
        assert c[:2] == ["select", "0"]
        c = st.cmd()
        assert c[0] == "restore" and c[1] == "hk" and c[2] == "0" and c[4:] == ["REPLACE", "ABSTTL"]
        assert st.cmd() == ["set", "after", "1"]
        req = urllib.request.Request(f"http://127.0.0.1:{srv.port}/kv/hk", method="DELETE")
        urllib.request.urlopen(req, timeout=10)
        client(srv.resp_port).set("after", "2")
        assert st.cmd() == ["del", "hk"]
        assert st.cmd() == ["set", "after", "2"]
        # The payload is one Redis restores.
        p = client(srv.resp_port)
        p.set("v", "x")
        assert p.restore("v2", 0, p.dump("v")) == b"OK"
    finally:
        st.close()


def test_http_front_end_keeps_the_replica_rules(primary, pkvs):
    """The HTTP front end of a pkvs replica refuses writes with Redis's
    READONLY line (403) and keeps reads; once its primary is gone and
    replica-serve-stale-data is no, reads are MASTERDOWN (503). A
    primary short of min-replicas-to-write refuses an HTTP write as SET
    (503, NOREPLICAS). The connection stays for the next request."""
    from conftest import http_once
    rep = pkvs.start()
    p, r = client(primary.resp_port), client(rep.resp_port)
    p.set("k", "v")
    assert r.execute_command("REPLICAOF", "127.0.0.1", str(primary.resp_port)) == b"OK"
    assert wait_until(lambda: link_up(r) and r.get("k") == b"v", 20)
    from paste_proc import HttpConn
    with HttpConn(rep.port) as hc:
        put = hc.request("PUT", "/kv/x", b"1")
        assert (put.status, put.body) == (403, b"READONLY You can't write against a read only replica.\n")
        assert hc.request("GET", "/kv/k", None).body == b"v"      # the same connection
    assert http_once(rep.port, "DELETE", "/kv/k").status == 403
    assert http_once(rep.port, "GET", "/kv/k").body == b"v"
    assert r.get("x") is None and r.get("k") == b"v"
    p.config_set("min-replicas-to-write", "2")
    with pytest.raises(redis.ResponseError, match="Not enough good replicas"):
        p.set("y", "1")
    prim_http = PkvsFactory()
    try:
        # (the primary fixture has no HTTP port: a second primary with one)
        hp = prim_http.start()
        client(hp.resp_port).config_set("min-replicas-to-write", "1")
        got = http_once(hp.port, "PUT", "/kv/y", body=b"1")
        assert (got.status, got.body) == (503, b"NOREPLICAS Not enough good replicas to write.\n")
        assert http_once(hp.port, "GET", "/kv/y").status == 404
    finally:
        prim_http.cleanup()
    primary.stop()
    assert wait_until(lambda: not link_up(r), 10)
    assert http_once(rep.port, "GET", "/kv/k").status == 200     # stale data served
    r.config_set("replica-serve-stale-data", "no")
    for path in ("/kv/k", "/kv"):
        got = http_once(rep.port, "GET", path)
        assert got.status == 503 and got.body.startswith(b"MASTERDOWN Link with MASTER is down"), got
    assert http_once(rep.port, "PUT", "/kv/k", body=b"1").status == 403   # READONLY first, as Redis
    assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    assert http_once(rep.port, "PUT", "/kv/x", body=b"1").status == 201


def served_stream(port):
    """The stream for pops of blocked clients served by a later push."""
    st = Stream(port)
    c = client(port)
    c.flushall()
    st.cmd(), st.cmd()                      # SELECT, FLUSHALL
    cases = [
        (("BLPOP", "l1", "0"), ("RPUSH", "l1", "a", "b")),
        (("BRPOP", "l2", "0"), ("RPUSH", "l2", "a")),
        (("BLMPOP", "0", "1", "l3", "RIGHT", "COUNT", "5"), ("RPUSH", "l3", "a", "b")),
        (("BLMPOP", "0", "1", "l4", "LEFT"), ("RPUSH", "l4", "a", "b")),
        (("BZPOPMIN", "z1", "0"), ("ZADD", "z1", "1", "a", "2", "b")),
        (("BZMPOP", "0", "1", "z2", "MAX", "COUNT", "3"), ("ZADD", "z2", "1", "a")),
        (("BLMOVE", "m1", "d1", "LEFT", "RIGHT", "0"), ("RPUSH", "m1", "a", "b")),
        (("BRPOPLPUSH", "m2", "d2", "0"), ("RPUSH", "m2", "a")),
    ]
    try:
        for blocking, push in cases:
            b = client(port)
            th = threading.Thread(target=lambda: b.execute_command(*blocking))
            th.start()
            assert wait_until(lambda: client(port).info("clients")["blocked_clients"] == 1, 10)
            c.execute_command(*push)
            th.join()
            b.close()
        c.set("__end__", "1")
        out = []
        while (cmd := st.cmd()) != ["set", "__end__", "1"]:
            out.append(cmd)
        return out
    finally:
        st.close()


def test_served_pops_same_as_redis(primary, redis_peer):  # noqa: F811
    ours = served_stream(primary.resp_port)
    assert ["lpop", "l1"] in ours and ["rpoplpush", "m2", "d2"] in ours
    assert ours == served_stream(redis_peer.resp_port)


def commands(buf):
    """The complete RESP commands at the start of buf, and what is left."""
    out = []
    while buf.startswith(b"*") and b"\r\n" in buf:
        line, rest = buf.split(b"\r\n", 1)
        args = []
        for _ in range(int(line[1:])):
            if b"\r\n" not in rest:
                return out, buf
            hdr, rest = rest.split(b"\r\n", 1)
            n = int(hdr[1:])
            if len(rest) < n + 2:
                return out, buf
            args.append(rest[:n])
            rest = rest[n + 2:]
        out.append(args)
        buf = rest
    return out, buf


def serve_rdb(sock, rdb, done):
    """A primary that answers the handshake and sends rdb to PSYNC."""
    sock.settimeout(0.2)
    while not done.is_set():
        try:
            conn, _ = sock.accept()
        except socket.timeout:
            continue
        except OSError:
            return
        buf = b""
        with conn:
            conn.settimeout(0.2)
            try:
                while not done.is_set():
                    try:
                        data = conn.recv(4096)
                    except socket.timeout:
                        continue
                    if not data:
                        break
                    cmds, buf = commands(buf + data)
                    for c in cmds:
                        name = c[0].upper()
                        if name == b"PING":
                            conn.sendall(b"+PONG\r\n")
                        elif name == b"PSYNC":
                            conn.sendall(b"+FULLRESYNC " + b"a" * 40 + b" 0\r\n"
                                         + b"$%d\r\n" % len(rdb) + rdb)
                        else:
                            conn.sendall(b"+OK\r\n")
            except OSError:
                pass


def test_damaged_rdb_leaves_data(primary):
    """A primary's RDB found damaged part way (a good key, then a value of
    an unknown type) is refused whole: the replica's data set stays as it
    was, nothing of the file is loaded, and the refusal is logged."""
    rdb = (b"REDIS0009" + b"\xfe\x00" + b"\x00\x01a\x011"
           + b"\x63\x01b\x011" + b"\xff" + b"\x00" * 8)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    done = threading.Event()
    t = threading.Thread(target=serve_rdb, args=(sock, rdb, done), daemon=True)
    t.start()
    p = client(primary.resp_port)
    try:
        p.flushall()
        p.set("keep", "here")
        p.execute_command("REPLICAOF", "127.0.0.1", str(sock.getsockname()[1]))
        assert wait_until(lambda: "RDB is damaged" in primary.stderr(), 10), primary.stderr()
        assert p.get("keep") == b"here"
        assert p.exists("a") == 0
        assert not link_up(p)
    finally:
        p.execute_command("REPLICAOF", "NO", "ONE")
        done.set()
        t.join(10)
        sock.close()


def test_config_get_replicaof(primary, redis_peer):  # noqa: F811
    """CONFIG GET replicaof / slaveof / *of as redis-server answers them:
    "" as a primary, "host port" as a replica; CONFIG SET refuses them."""
    p, r = client(primary.resp_port), client(redis_peer.resp_port)
    for pat in ("replicaof", "slaveof", "*of", "SLAVEOF"):
        assert p.config_get(pat) == r.config_get(pat), pat
    assert p.config_get("*of") == {"replicaof": "", "slaveof": ""}
    for c in (p, r):
        with pytest.raises(redis.ResponseError) as e:
            c.config_set("replicaof", "127.0.0.1 1")
        if c is p:
            pe = str(e.value)
        else:
            assert pe == str(e.value)
    port = str(redis_peer.resp_port)
    assert p.execute_command("REPLICAOF", "127.0.0.1", port) == b"OK"
    assert r.execute_command("REPLICAOF", "127.0.0.1", port) == b"OK"
    try:
        want = {"replicaof": f"127.0.0.1 {port}", "slaveof": f"127.0.0.1 {port}"}
        assert p.config_get("*of") == want == r.config_get("*of")
    finally:
        p.execute_command("REPLICAOF", "NO", "ONE")
        r.execute_command("REPLICAOF", "NO", "ONE")


def test_evictions_reach_replica(primary):
    """Keys evicted while CONFIG SET runs (maxmemory lowered, the policy
    changed) reach a redis-server replica as DEL, as do evictions a write
    causes: the replica ends with exactly the primary's keys."""
    p = client(primary.resp_port)
    p.flushall()
    p.config_set("maxmemory", "0")
    p.config_set("maxmemory-policy", "noeviction")
    val = "v" * 1000
    for i in range(300):
        p.set(f"k{i}", val)
    rep = start_replica(primary.resp_port)
    try:
        rc = client(rep.resp_port)
        assert wait_until(lambda: link_up(rc), 20)
        assert wait_until(lambda: rc.dbsize() == 300, 10)
        used = int(p.info("memory")["used_memory"])
        # noeviction: the bound set, nothing goes; the policy changed: keys go.
        p.config_set("maxmemory", str(used - 100 * 1048))
        assert p.dbsize() == 300
        p.config_set("maxmemory-policy", "allkeys-random")
        n1 = p.dbsize()
        assert 0 < n1 < 300
        # The bound lowered under an evicting policy: more go at once.
        used = int(p.info("memory")["used_memory"])
        p.config_set("maxmemory", str(used - 50 * 1048))
        n2 = p.dbsize()
        assert 0 < n2 < n1
        # A write over the bound evicts before it runs.
        p.set("new", val)
        assert p.wait(1, 5000) == 1
        want = sorted(p.keys("*"))
        assert wait_until(lambda: sorted(rc.keys("*")) == want, 10), (len(want), rc.dbsize())
    finally:
        p.config_set("maxmemory", "0")
        p.config_set("maxmemory-policy", "noeviction")
        rep.stop()


def test_script_set_repl(primary):
    """redis.set_repl: a script's writes after REPL_NONE or REPL_AOF do not
    reach the replica, those after REPL_REPLICA or REPL_ALL do."""
    p = client(primary.resp_port)
    p.flushall()
    rep = start_replica(primary.resp_port)
    try:
        rc = client(rep.resp_port)
        assert wait_until(lambda: link_up(rc), 20)
        p.eval("redis.call('set', 'a', '1'); redis.set_repl(redis.REPL_NONE);"
               "redis.call('set', 'b', '2'); redis.set_repl(redis.REPL_AOF);"
               "redis.call('set', 'c', '3'); redis.set_repl(redis.REPL_REPLICA);"
               "redis.call('set', 'd', '4'); redis.set_repl(redis.REPL_NONE);"
               "redis.call('set', 'e', '5'); redis.set_repl(redis.REPL_ALL);"
               "redis.call('set', 'f', '6')", 0)
        p.set("last", "x")
        assert p.wait(1, 5000) == 1
        assert wait_until(lambda: rc.get("last") == b"x", 10)
        assert sorted(rc.keys("*")) == [b"a", b"d", b"f", b"last"]
        assert p.dbsize() == 7
    finally:
        rep.stop()
