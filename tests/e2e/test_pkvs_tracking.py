"""pkvs's client-side caching (services/cmd_tracking.c) against Debian's
redis-server 7.0.15, byte for byte: every command goes to both servers
and every reply and invalidation message read from one must be the
same bytes as from the other.

- CLIENT TRACKING ON/OFF with REDIRECT, BCAST, PREFIX, OPTIN, OPTOUT,
  NOLOOP, and its errors; CLIENT CACHING, GETREDIR, TRACKINGINFO.
- Invalidations: RESP3 pushes after the reply of the command that caused
  them (the client's own write, a transaction), RESP2 redirection to a
  subscribed connection's __redis__:invalidate channel, BCAST per prefix
  (keys sorted, each once), a flush's null, the tracking-redir-broken
  push, keys changed by every kind of write (strings, hashes, lists,
  sets, expiry, DEL, RENAME), a script's reads tracking its declared
  keys.
- tracking-table-max-keys (CONFIG SET) drops keys and tells their
  clients; INFO's tracking fields; CLIENT LIST's t, B, R flags and redir.
- redis-py's client-side cache (RESP3, cache_config) sees a value change
  made by another client.
"""
import re
import time

import pytest
import redis

from conftest import resp_command
from pkvs_module import pkvs_srv  # noqa: F401 (pkvs_srv: a fixture)
from redis_peer import redis_peer  # noqa: F401 (redis_peer: a fixture)
from test_pkvs_pubsub import Twin


class Conn(Twin):
    """One connection to each server, replies compared (Twin), and
    commands whose arguments differ per server (a client id)."""

    def call_each(self, cmd_p, cmd_r):
        self.p.send(resp_command(*cmd_p))
        self.r.send(resp_command(*cmd_r))
        return self.read()

    def call_redir(self, target, *cmd):
        """A command whose reply names target's id (TRACKINGINFO): the
        same bytes but for the id."""
        got = self.p.call(*cmd).replace(b":%d\r\n" % target.id_pair[0], b":ID\r\n")
        want = self.r.call(*cmd).replace(b":%d\r\n" % target.id_pair[1], b":ID\r\n")
        assert got == want and b":ID\r\n" in got, (got, want)
        return got

    def ids(self):
        return int(self.p.call("CLIENT", "ID")[1:-2]), int(self.r.call("CLIENT", "ID")[1:-2])


@pytest.fixture
def conns(pkvs_srv, redis_peer):
    made = []

    def new(proto=2):
        c = Conn((pkvs_srv.resp_port, redis_peer.port), proto)
        c.id_pair = c.ids()
        made.append(c)
        return c
    w = new()
    w.call("FLUSHALL")
    w.call("CONFIG", "SET", "tracking-table-max-keys", "1000000")
    yield new
    for c in made:
        c.close()


def redirect(t, target, *opts):
    """CLIENT TRACKING ON REDIRECT <target's id on each server> opts..."""
    ip, ir = target.id_pair
    return t.call_each(("CLIENT", "TRACKING", "ON", "REDIRECT", ip) + opts,
                       ("CLIENT", "TRACKING", "ON", "REDIRECT", ir) + opts)


def test_resp3_basic_and_own_write(conns):
    t, w = conns(3), conns()
    t.call("CLIENT", "TRACKING", "ON")
    w.call("SET", "k", "1")
    t.call("GET", "k")
    w.call("SET", "k", "2")
    assert t.read() == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
    w.call("SET", "k", "3")                  # read no more since: nothing
    t.quiet()
    # Its own write: the reply first, then the push.
    t.call("HSET", "h", "f", "1")
    t.call("HGET", "h", "f")
    t.call("HDEL", "h", "f")
    t.read()
    t.call("MSET", "a", "1", "b", "2")
    t.call("GET", "a")
    t.call("MULTI")
    t.call("INCR", "a")
    t.call("GET", "b")
    t.call("EXEC")
    t.read()                                  # invalidate a, after EXEC's reply
    t.quiet()


def test_every_kind_of_change(conns):
    t, w = conns(3), conns()
    t.call("CLIENT", "TRACKING", "ON")
    w.call("RPUSH", "l", "a")
    w.call("SADD", "s", "a")
    w.call("ZADD", "z", "1", "a")
    w.call("HSET", "h", "f", "v")
    w.call("SET", "str", "v")
    w.call("SET", "r", "v")
    t.call("MGET", "str", "missing")
    t.call("LRANGE", "l", "0", "-1")
    t.call("SMEMBERS", "s")
    t.call("ZRANGE", "z", "0", "-1")
    t.call("HGETALL", "h")
    t.call("EXISTS", "r")
    for cmd in (("LPUSH", "l", "b"), ("SREM", "s", "a"), ("ZINCRBY", "z", "1", "a"),
                ("HSET", "h", "f", "w"), ("APPEND", "str", "x"), ("SET", "missing", "1"),
                ("RENAME", "r", "r2")):
        w.call(*cmd)
        t.read()
    t.call("SET", "e", "v", "PX", "50")
    t.call("GET", "e")
    time.sleep(0.3)
    t.read()                                  # expired
    t.quiet()


def test_redirect_resp2_and_flush(conns):
    t, sub, w = conns(), conns(), conns()
    sub.call("SUBSCRIBE", "__redis__:invalidate")
    redirect(t, sub)
    w.call("SET", "a", "1")
    w.call("SET", "b", "1")
    t.call("GET", "a")
    w.call("INCR", "b")                       # not read: no message
    w.call("INCR", "a")
    assert sub.read() == (b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"
                          b"*1\r\n$1\r\na\r\n")
    t.call("GET", "a")
    w.call("FLUSHDB")
    sub.read()                                # null: every key
    w.call("FLUSHALL")
    sub.read()
    sub.quiet()
    t.call("CLIENT", "TRACKING", "OFF")
    assert t.call("CLIENT", "GETREDIR") == b":-1\r\n"


def test_redir_broken(conns):
    t, target, w = conns(3), conns(3), conns()
    redirect(t, target)
    t.call("GET", "k")
    target.p.close()
    target.r.close()
    time.sleep(0.1)
    w.call("SET", "k", "1")
    for conn, tid in ((t.p, target.id_pair[0]), (t.r, target.id_pair[1])):
        assert conn.read_raw() == b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % tid
    info = t.call_redir(target, "CLIENT", "TRACKINGINFO")
    assert b"broken_redirect" in info
    assert b" flags=tR " in t.p.call("CLIENT", "INFO")
    t.call("CLIENT", "TRACKING", "OFF")


def test_bcast_prefixes_and_noloop(conns):
    t, sub, w = conns(), conns(), conns()
    sub.call("SUBSCRIBE", "__redis__:invalidate")
    redirect(t, sub, "BCAST", "PREFIX", "a:", "PREFIX", "b:")
    w.call("MULTI")
    for k in ("b:2", "a:2", "a:1", "b:1", "c:1", "a:1"):
        w.call("INCR", k)
    w.call("EXEC")
    sub.read()                                  # a:1 a:2 (sorted, once each)
    sub.read()                                  # b:1 b:2
    redirect(t, sub, "BCAST", "PREFIX", "c:")   # added
    w.call("INCR", "c:9")
    sub.read()
    t.call_redir(sub, "CLIENT", "TRACKINGINFO")
    t.call("CLIENT", "TRACKING", "OFF")
    redirect(t, sub, "BCAST", "NOLOOP")
    w.call("SET", "other1", "1")
    sub.read()
    t.call("SET", "loop", "1")                  # its own: not told
    w.call("SET", "other2", "1")
    sub.read()
    sub.quiet()


def test_noloop_optin_optout(conns):
    t, sub, w = conns(), conns(), conns()
    sub.call("SUBSCRIBE", "__redis__:invalidate")
    redirect(t, sub, "NOLOOP")
    t.call("MGET", "k1", "own", "k2")
    w.call("SET", "k1", "1")
    t.call("SET", "own", "1")
    w.call("SET", "k2", "1")
    sub.read()
    sub.read()
    sub.quiet()
    t.call("CLIENT", "TRACKING", "OFF")
    redirect(t, sub, "OPTIN")
    t.call("GET", "x")                          # not cached without CACHING YES
    w.call("SET", "x", "1")
    t.call("CLIENT", "CACHING", "YES")
    t.call_redir(sub, "CLIENT", "TRACKINGINFO")
    t.call("GET", "y")
    t.call("GET", "z")                          # CACHING YES was for one command
    w.call("SET", "z", "1")
    w.call("SET", "y", "1")
    sub.read()
    sub.quiet()
    t.call("CLIENT", "TRACKING", "OFF")
    redirect(t, sub, "OPTOUT")
    t.call("CLIENT", "CACHING", "NO")
    t.call_redir(sub, "CLIENT", "TRACKINGINFO")
    t.call("GET", "p")
    t.call("GET", "q")
    w.call("SET", "p", "1")
    w.call("SET", "q", "1")
    sub.read()
    sub.quiet()


def test_scripts_track_declared_keys(conns):
    t, w = conns(3), conns()
    t.call("CLIENT", "TRACKING", "ON")
    t.call("EVAL", "redis.call('set', 'k3', 'bar')", "2", "k1", "k2")
    w.call("MSET", "k2", "2", "k1", "2")
    t.quiet()
    t.call("EVAL", "redis.call('get', 'k3')", "2", "k1", "k2")
    w.call("MSET", "k2", "2", "k1", "2")
    t.read()
    t.read()
    t.call("EVAL_RO", "redis.call('ping')", "2", "k1", "k2")
    w.call("MSET", "k2", "3", "k1", "3")
    t.quiet()


def test_errors_and_info(conns):
    t = conns()
    for cmd in (("CLIENT", "TRACKING", "ON", "PREFIX", "a"),
                ("CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"),
                ("CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"),
                ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO"),
                ("CLIENT", "TRACKING", "ON", "REDIRECT", "999999"),
                ("CLIENT", "TRACKING", "ON", "REDIRECT", "x"),
                ("CLIENT", "TRACKING", "ON", "NOPE"),
                ("CLIENT", "TRACKING", "MAYBE"),
                ("CLIENT", "TRACKING"),
                ("CLIENT", "CACHING", "YES"),
                ("CLIENT", "TRACKINGINFO"), ("CLIENT", "GETREDIR"),
                ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "BAR"),
                ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FO"),
                ("CLIENT", "TRACKING", "ON"),
                ("CLIENT", "TRACKINGINFO"), ("CLIENT", "GETREDIR"),
                ("CLIENT", "CACHING", "YES"), ("CLIENT", "CACHING", "NO"),
                ("CLIENT", "CACHING", "MAYBE"),
                ("CLIENT", "TRACKING", "OFF"),
                ("CLIENT", "TRACKING", "ON", "OPTIN"),
                ("CLIENT", "TRACKING", "ON", "OPTOUT"),
                ("CLIENT", "CACHING", "NO"),
                ("CLIENT", "TRACKING", "OFF"), ("CLIENT", "TRACKING", "OFF")):
        t.call(*cmd)
    t.call("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "x")
    line = t.p.call("CLIENT", "INFO")
    assert b" flags=tB " in line and b" redir=0 " in line
    t.call("CLIENT", "TRACKING", "OFF")
    u, v = conns(), conns()
    u.call("CLIENT", "TRACKING", "ON")
    u.call("MGET", "k1", "k2")
    v.call("CLIENT", "TRACKING", "ON")
    v.call("GET", "k1")
    w = conns()
    w.call("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p1", "PREFIX", "p2")
    info = t.p.call("INFO")
    for field, want in (("tracking_clients", 3), ("tracking_total_keys", 2),
                        ("tracking_total_items", 3), ("tracking_total_prefixes", 2)):
        assert re.search(rb"\r\n" + field.encode() + rb":(\d+)\r\n", info).group(1) == str(want).encode()
    t.call("RESET")
    u.call("RESET")
    assert b" flags=N " in u.p.call("CLIENT", "INFO")


def test_table_bound(conns):
    t, sub, w = conns(), conns(), conns()
    sub.call("SUBSCRIBE", "__redis__:invalidate")
    redirect(t, sub)
    for i in range(50):
        t.call("GET", f"key{i}")
    w.call("CONFIG", "SET", "tracking-table-max-keys", "10")
    assert w.call("CONFIG", "GET", "tracking-table-max-keys").endswith(b"$2\r\n10\r\n")
    got = [sub.p.read_raw() for _ in range(40)]
    assert len(set(got)) == 40
    sub.r.buf.clear()
    info = t.p.call("INFO", "stats")
    assert b"\r\ntracking_total_keys:10\r\n" in info
    w.call("CONFIG", "SET", "tracking-table-max-keys", "1000000")


def test_redis_py_invalidation_push(pkvs_srv):
    """redis-py's RESP3 parser hands pkvs's invalidation push to its
    handler (redis-py's own cache wants Redis 7.4, so the push is taken
    from the connection as its cache takes it)."""
    r = redis.Redis(port=pkvs_srv.resp_port, protocol=3)
    w = redis.Redis(port=pkvs_srv.resp_port)
    conn = r.connection_pool.get_connection()
    got = []
    conn._parser.set_invalidation_push_handler(got.append)
    conn.send_command("CLIENT", "TRACKING", "ON")
    assert conn.read_response() in (b"OK", "OK")
    w.set("cached", "1")
    conn.send_command("GET", "cached")
    assert conn.read_response() == b"1"
    w.set("cached", "2")
    conn.send_command("PING")
    assert conn.read_response() in (b"PONG", "PONG", True)
    assert got == [[b"invalidate", [b"cached"]]]
    w.flushdb()
    conn.send_command("PING")
    conn.read_response()
    assert got[1] == [b"invalidate", None]
    r.connection_pool.release(conn)
    r.close()
    w.close()
