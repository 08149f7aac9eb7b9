"""pkvs's pub/sub (services/cmd_pubsub.c): SUBSCRIBE, UNSUBSCRIBE,
PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB, and the shard channels
(SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH) as one node answers them.

- Every command byte for byte against Debian's redis-server 7.0.15
  (tests/e2e/redis_peer.py), in RESP2 and RESP3 (a message is a push,
  '>', in RESP3): subscription replies and counts, messages and
  pattern messages, arity and subcommand errors, PUBSUB's answers (as
  sets where Redis's order is its hash table's), the replies of
  subscribed RESP2 connections (only the subscribe commands, PING in
  its own form, QUIT, RESET), CLIENT REPLY OFF/SKIP (messages still
  come), SUBSCRIBE inside MULTI, Redis's glob in patterns.
- Many subscribers on channels and patterns, a 1 MiB message, messages
  in order with a subscriber's own replies (pipelined PINGs), and
  subscribers that close (cleanly, mid-message, or with QUIT/RESET):
  the counts follow and nothing is sent to them after.
- A subscriber that never reads: past client-output-buffer-limit's
  pubsub class (hard, or soft for its seconds) it is dropped, as Redis
  drops it, the publisher's count then leaves it out, and pkvs's memory
  stays bounded meanwhile; the class keeps its limit when CONFIG SET
  changes another, and the setting reads back as Redis's (every class,
  in bytes; the same errors).
"""
import os
import re
import socket
import time

import pytest

from conftest import RespConn, resp_command, sanitized, wait_until
from pkvs_module import pkvs_srv  # noqa: F401 (pkvs_srv: a fixture)
from redis_peer import Peers, RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)

PROTOS = [2, 3]


class Twin:
    """One connection to pkvs and one to redis-server, used in step: each
    command goes to both, each reply read from both must be the same
    bytes."""

    def __init__(self, ports, proto):
        self.p = RawConn(ports[0], proto)
        self.r = RawConn(ports[1], proto)

    def send(self, *cmd):
        data = resp_command(*cmd)
        self.p.send(data)
        self.r.send(data)

    def read(self):
        got, want = self.p.read_raw(), self.r.read_raw()
        assert got == want, f"pkvs {got[:300]!r}, redis-server {want[:300]!r}"
        return got

    def call(self, *cmd, replies=1):
        self.send(*cmd)
        return [self.read() for _ in range(replies)][-1]

    def read_set(self, n):
        """n replies whose order is Redis's hash table's (UNSUBSCRIBE of
        every channel): the same replies but their counts, in any order,
        and the same counts in order."""
        got = [self.p.read_raw() for _ in range(n)]
        want = [self.r.read_raw() for _ in range(n)]
        cut = lambda rs: sorted(r[:r.rindex(b":")] for r in rs)  # noqa: E731
        assert cut(got) == cut(want)
        assert [r[r.rindex(b":"):] for r in got] == [r[r.rindex(b":"):] for r in want]
        return got

    def quiet(self, timeout=0.2):
        """Nothing more came on either."""
        for c in (self.p, self.r):
            c.sock.settimeout(timeout)
            try:
                data = c.sock.recv(4096)
            except socket.timeout:
                data = b""
            finally:
                c.sock.settimeout(10.0)
            assert not data and not c.buf, f"unexpected bytes {bytes(c.buf) + data!r}"

    def close(self):
        self.p.close()
        self.r.close()


class Room:
    """Named twins on pkvs and redis-server, in one protocol."""

    def __init__(self, pkvs_port, redis_port, proto):
        self.ports = (pkvs_port, redis_port)
        self.proto = proto
        self.twins = {}
        self["_"].call("FLUSHALL")
        self["_"].call("CONFIG", "SET", "notify-keyspace-events", "")

    def __getitem__(self, name):
        if name not in self.twins:
            self.twins[name] = Twin(self.ports, self.proto)
        return self.twins[name]

    def close(self):
        for t in self.twins.values():
            t.close()


@pytest.fixture(params=PROTOS, ids=lambda p: f"resp{p}")
def room(request, pkvs_srv, redis_peer):
    r = Room(pkvs_srv.resp_port, redis_peer.port, request.param)
    yield r
    r.close()


# ---------------------------------------------------------------------------
# SUBSCRIBE, UNSUBSCRIBE, PUBLISH
# ---------------------------------------------------------------------------

def test_publish_subscribe_basics(room):
    s, pub = room["s"], room["pub"]
    s.call("SUBSCRIBE", "chan1", "chan2", replies=2)
    assert pub.call("PUBLISH", "chan1", "hello") == b":1\r\n"
    pub.call("PUBLISH", "chan2", "world")
    s.read()
    s.read()
    s.call("UNSUBSCRIBE", "chan1")
    pub.call("PUBLISH", "chan1", "hello")
    pub.call("PUBLISH", "chan2", "world")
    msg = s.read()
    want = b"$7\r\nmessage\r\n$5\r\nchan2\r\n$5\r\nworld\r\n"
    assert msg == (b">3\r\n" if room.proto == 3 else b"*3\r\n") + want
    s.call("UNSUBSCRIBE", "chan2")
    assert pub.call("PUBLISH", "chan2", "world") == b":0\r\n"
    s.quiet()


def test_two_subscribers_and_repeats(room):
    a, b, pub = room["a"], room["b"], room["pub"]
    a.call("SUBSCRIBE", "c", "c", "c", replies=3)        # counts 1 1 1
    b.call("SUBSCRIBE", "c")
    assert pub.call("PUBLISH", "c", "x") == b":2\r\n"
    a.read()
    b.read()
    a.call("UNSUBSCRIBE", "foo", "bar", "c", replies=3)  # 1 1 0
    b.call("UNSUBSCRIBE", "nope")
    a.quiet()


def test_unsubscribe_all_and_always_reply(room):
    s, pub = room["s"], room["pub"]
    s.call("UNSUBSCRIBE")                                 # nothing: [unsubscribe, nil, 0]
    s.call("PUNSUBSCRIBE")
    s.call("SUNSUBSCRIBE")
    s.call("SUBSCRIBE", "c1", "c2", "c3", replies=3)
    s.send("UNSUBSCRIBE")
    s.read_set(3)                                         # each channel once, counts 2 1 0
    for c in ("c1", "c2", "c3"):
        assert pub.call("PUBLISH", c, "x") == b":0\r\n"
    s.call("PSUBSCRIBE", "a.*", "b.*", "c.*", replies=3)
    s.call("PUNSUBSCRIBE", replies=3)                     # in the order subscribed
    s.call("PUNSUBSCRIBE", "x.*", "y.*", replies=2)
    assert pub.call("PUBLISH", "a.1", "x") == b":0\r\n"


def test_empty_and_binary_names(room):
    s, pub = room["s"], room["pub"]
    name = b"\x00\xff\r\n ch"
    s.call("SUBSCRIBE", "", name, replies=2)
    pub.call("PUBLISH", "", "")
    s.read()
    pub.call("PUBLISH", name, b"\r\n\x00")
    s.read()
    s.call("UNSUBSCRIBE", name)
    s.call("UNSUBSCRIBE", "")


# ---------------------------------------------------------------------------
# Patterns
# ---------------------------------------------------------------------------

def test_psubscribe_basics(room):
    s, pub = room["s"], room["pub"]
    s.call("PSUBSCRIBE", "foo.*", "bar.*", replies=2)
    for ch, n in (("foo.1", 1), ("bar.1", 1), ("foo1", 0), ("barfoo.1", 0), ("qux.1", 0)):
        assert pub.call("PUBLISH", ch, "hello") == b":%d\r\n" % n
    s.read()
    s.read()
    s.call("PUNSUBSCRIBE", "foo.*")
    pub.call("PUBLISH", "foo.1", "hello")
    pub.call("PUBLISH", "bar.1", "hello")
    s.read()
    s.call("PUNSUBSCRIBE", "bar.*")
    s.quiet()


@pytest.mark.parametrize("pattern, channels", [
    ("h?llo", ["hello", "hallo", "hllo", "heello"]),
    ("h*llo", ["hllo", "heeeello", "hello!"]),
    ("h[ae]llo", ["hello", "hallo", "hillo"]),
    ("h[^e]llo", ["hallo", "hello", "hbllo"]),
    ("h[a-b]llo", ["hallo", "hbllo", "hcllo"]),
    ("h[b-a]llo", ["hallo", "hbllo", "hcllo"]),
    ("a\\*b", ["a*b", "axb"]),
    ("a[\\]]b", ["a]b", "axb"]),
    ("*", ["", "anything"]),
    ("[", ["[", "x"]),
    ("a[", ["a", "a["]),
    ("**x", ["x", "abx", "xa"]),
])
def test_glob_patterns(room, pattern, channels):
    s, pub = room["s"], room["pub"]
    s.call("PSUBSCRIBE", pattern)
    for ch in channels:
        n = pub.call("PUBLISH", ch, "m")
        if n == b":1\r\n":
            s.read()
    s.quiet()


def test_channel_and_pattern_both(room):
    s, pub = room["s"], room["pub"]
    s.call("SUBSCRIBE", "foo.bar")
    s.call("PSUBSCRIBE", "foo.*")                         # count 2: channels and patterns
    assert pub.call("PUBLISH", "foo.bar", "hello") == b":2\r\n"
    s.read()                                              # message first,
    s.read()                                              # then pmessage
    room["t"].call("PSUBSCRIBE", "foo.*", "*")
    room["u"].call("PSUBSCRIBE", "*.bar")
    assert pub.call("PUBSUB", "NUMPAT") == b":3\r\n"
    assert pub.call("PUBLISH", "foo.bar", "x") == b":5\r\n"


# ---------------------------------------------------------------------------
# Subscribed mode: what a RESP2 connection may run
# ---------------------------------------------------------------------------

def test_subscribed_mode(room):
    s = room["s"]
    s.call("SUBSCRIBE", "somechannel")
    s.call("PING")                                        # RESP2: [pong, ""]
    s.call("PING", "foo")
    if room.proto == 2:
        s.call("HELLO", "3")                              # refused too (HELLO is the protocol's)
    for cmd in (("GET", "a"), ("SET", "a", "b"), ("CLIENT", "GETNAME"), ("CONFIG", "GET", "x"), ("PUBLISH", "a", "b"),
                ("PUBSUB", "NUMPAT"), ("ECHO", "x")):
        s.call(*cmd)                                      # RESP2: refused; RESP3: run
    s.call("NOSUCHCMD")                                   # unknown before refused
    s.call("GET")                                         # arity before refused
    if room.proto == 2:
        s.call("MULTI")                                   # refused: no transaction either
    s.call("UNSUBSCRIBE", "somechannel")
    s.call("PING")                                        # PONG again
    s.call("GET", "a")


def test_reset_and_quit_while_subscribed(room):
    s, pub = room["s"], room["pub"]
    s.call("SUBSCRIBE", "c")
    s.call("PSUBSCRIBE", "d*")
    s.call("RESET")
    assert pub.call("PUBLISH", "c", "x") == b":0\r\n"
    assert pub.call("PUBLISH", "dx", "x") == b":0\r\n"
    s.call("GET", "c")
    q = room["q"]
    q.call("SUBSCRIBE", "c")
    q.call("QUIT")
    assert q.p.is_closed() and q.r.is_closed()
    assert wait_until(lambda: pub.call("PUBLISH", "c", "x") == b":0\r\n", 5)


def test_pipelined_replies_stay_in_order(room):
    s, pub = room["s"], room["pub"]
    s.call("SUBSCRIBE", "c")
    s.send("PING", "1")
    pub.call("PUBLISH", "c", "between")
    s.send("PING", "2")
    for _ in range(3):
        s.read()


def test_client_reply_off_and_skip(room):
    s, pub = room["s"], room["pub"]
    s.send("CLIENT", "REPLY", "OFF")
    s.call("SUBSCRIBE", "channel")                        # the push still comes
    s.call("PSUBSCRIBE", "ch*")
    pub.call("PUBLISH", "channel", "hello")
    s.read()
    s.read()
    s.call("UNSUBSCRIBE", "channel")
    s.call("PUNSUBSCRIBE", "ch*")
    s.send("CLIENT", "REPLY", "ON")
    s.read()
    t = room["t"]
    t.send("CLIENT", "REPLY", "SKIP")
    t.call("SUBSCRIBE", "x")                              # skipped? no: a push
    pub.call("PUBLISH", "x", "y")
    t.read()


def test_subscribe_inside_multi(room):
    s, pub = room["s"], room["pub"]
    s.call("MULTI")
    s.call("SUBSCRIBE", "a", "b")
    s.call("PSUBSCRIBE", "c*")
    s.call("SSUBSCRIBE", "d")
    s.call("EXEC")                                        # subscribe replies inside, SSUBSCRIBE refused
    assert pub.call("PUBLISH", "a", "1") == b":1\r\n"
    s.read()


def test_resp3_publisher_subscribed_to_itself(pkvs_srv, redis_peer):
    t = Twin((pkvs_srv.resp_port, redis_peer.port), 3)
    try:
        t.call("SUBSCRIBE", "self")
        t.send("PUBLISH", "self", "me")
        t.read()                                          # the push,
        assert t.read() == b":1\r\n"                      # then the reply
        t.call("SET", "k", "v")                           # RESP3: any command runs
    finally:
        t.close()


# ---------------------------------------------------------------------------
# PUBSUB introspection, errors
# ---------------------------------------------------------------------------

def test_pubsub_introspection(room):
    a, b, c = room["a"], room["b"], room["c"]
    a.call("SUBSCRIBE", "news.1", "news.2", "other", replies=3)
    b.call("SUBSCRIBE", "news.1")
    b.call("PSUBSCRIBE", "n*", "x*", replies=2)
    a.call("PSUBSCRIBE", "n*")
    c.call("SSUBSCRIBE", "shard1", "shard2", replies=2)
    q = room["q"]
    for cmd in (("PUBSUB", "CHANNELS"), ("PUBSUB", "CHANNELS", "news.*"),
                ("PUBSUB", "SHARDCHANNELS"), ("PUBSUB", "SHARDCHANNELS", "*1")):
        q.send(*cmd)
        got, want = q.p.read_raw(), q.r.read_raw()
        split = lambda r: (r.split(b"\r\n", 1)[0], sorted(r.split(b"\r\n")[1:]))  # noqa: E731
        assert split(got) == split(want), cmd
    q.call("PUBSUB", "CHANNELS", "nomatch*")
    q.call("PUBSUB", "NUMSUB", "news.1", "news.2", "nobody", "shard1")
    q.call("PUBSUB", "NUMSUB")
    q.call("PUBSUB", "NUMPAT")
    q.call("PUBSUB", "SHARDNUMSUB", "shard1", "news.1")
    q.call("PUBSUB", "SHARDNUMSUB")
    q.call("PUBSUB", "HELP")
    q.call("pubsub", "help")


def test_client_list_subscriptions(room):
    """CLIENT LIST's flags, sub, psub and ssub for subscribed clients, as
    redis-server gives them."""
    a, b, q = room["a"], room["b"], room["q"]
    a.call("CLIENT", "SETNAME", "suba")
    b.call("CLIENT", "SETNAME", "subb")
    a.call("SUBSCRIBE", "x", "y", replies=2)
    a.call("PSUBSCRIBE", "p*")
    b.call("SSUBSCRIBE", "s1")
    q.send("CLIENT", "LIST")
    got, want = q.p.read_raw(), q.r.read_raw()

    def fields(raw):
        out = {}
        for line in raw.decode().splitlines():
            m = re.search(r"name=(sub\w) .*flags=(\S+) .*sub=(\d+) psub=(\d+) ssub=(\d+)", line)
            if m:
                out[m.group(1)] = m.groups()[1:]
        return out
    assert fields(got) == fields(want) and set(fields(got)) == {"suba", "subb"}, (got, want)


@pytest.mark.parametrize("cmd", [
    ("SUBSCRIBE",), ("PSUBSCRIBE",), ("SSUBSCRIBE",), ("PUBLISH", "a"), ("PUBLISH", "a", "b", "c"),
    ("SPUBLISH", "a"), ("PUBSUB",), ("PUBSUB", "NUMPAT", "x"), ("PUBSUB", "CHANNELS", "a", "b"),
    ("PUBSUB", "SHARDCHANNELS", "a", "b"), ("PUBSUB", "HELP", "x"), ("PUBSUB", "NOPE"),
    ("PUBSUB", "channelz"), ("PUBLISH", "nobody", "x"), ("SPUBLISH", "nobody", "x"),
])
def test_errors_and_edges(room, cmd):
    room["q"].call(*cmd)


# ---------------------------------------------------------------------------
# Shard channels (one node holds every shard)
# ---------------------------------------------------------------------------

def test_shard_channels(room):
    a, b, pub = room["a"], room["b"], room["pub"]
    a.call("SSUBSCRIBE", "chan1")
    a.call("SSUBSCRIBE", "chan2")
    b.call("SUBSCRIBE", "chan1")                          # a plain channel of the same name
    assert pub.call("SPUBLISH", "chan1", "hello") == b":1\r\n"
    a.read()                                              # smessage
    assert pub.call("PUBLISH", "chan1", "hello") == b":1\r\n"
    b.read()
    pub.call("PUBSUB", "SHARDNUMSUB", "chan1")
    pub.call("PUBSUB", "NUMSUB", "chan1")
    a.call("SSUBSCRIBE", "chan1", "chan1", replies=2)
    a.call("SUNSUBSCRIBE", "foo")
    a.call("SUNSUBSCRIBE", "chan1")
    assert pub.call("SPUBLISH", "chan1", "x") == b":0\r\n"
    a.call("PSUBSCRIBE", "chan*")                         # patterns: never for shard messages
    assert pub.call("SPUBLISH", "chan2", "y") == b":1\r\n"
    a.read()
    a.call("SUNSUBSCRIBE")
    a.call("SUNSUBSCRIBE")
    assert pub.call("SPUBLISH", "chan2", "y") == b":0\r\n"
    a.call("PING")                                        # still subscribed to a pattern


def test_shard_reply_off(room):
    s, pub = room["s"], room["pub"]
    s.send("CLIENT", "REPLY", "OFF")
    s.send("PING")
    s.call("SSUBSCRIBE", "channel")
    pub.call("SPUBLISH", "channel", "hello")
    s.read()
    s.call("SUNSUBSCRIBE", "channel")


# ---------------------------------------------------------------------------
# Many subscribers, big messages, subscribers that go
# ---------------------------------------------------------------------------

def test_many_subscribers(pkvs_srv, redis_peer):
    n = 40
    subs = [Twin((pkvs_srv.resp_port, redis_peer.port), 2 + i % 2) for i in range(n)]
    pats = [Twin((pkvs_srv.resp_port, redis_peer.port), 2 + i % 2) for i in range(10)]
    pub = Twin((pkvs_srv.resp_port, redis_peer.port), 2)
    try:
        for t in subs:
            t.call("SUBSCRIBE", "wide", "other", replies=2)
        for i, t in enumerate(pats):
            t.call("PSUBSCRIBE", "wi*" if i % 2 else "*e")
        for k in range(5):
            assert pub.call("PUBLISH", "wide", f"m{k}") == b":%d\r\n" % (n + 10)
        for t in subs + pats:
            for _ in range(5):
                t.read()
        pub.call("PUBSUB", "NUMSUB", "wide", "other")
        pub.call("PUBSUB", "NUMPAT")
    finally:
        for t in subs + pats + [pub]:
            t.close()


def test_big_message(room):
    s, pub = room["s"], room["pub"]
    s.call("SUBSCRIBE", "big")
    s.call("PSUBSCRIBE", "b*")
    body = os.urandom(1 << 20)
    assert pub.call("PUBLISH", "big", body) == b":2\r\n"
    assert len(s.read()) > 1 << 20
    s.read()


def test_subscribers_that_close(pkvs_srv):
    port = pkvs_srv.resp_port
    pub = RespConn(port)
    subs = []
    for i in range(20):
        c = RespConn(port)
        c.command("SUBSCRIBE", "going")
        if i % 2:
            c.command("PSUBSCRIBE", "go*")
        subs.append(c)
    assert pub.command("PUBLISH", "going", "x") == 30
    # Half close at once (with their messages unread, some with a reset),
    # a quarter QUIT, the rest RESET.
    for i, c in enumerate(subs):
        if i < 10:
            if i < 5:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                  b"\x01\x00\x00\x00\x00\x00\x00\x00")
            c.close()
            continue
        for _ in range(1 + i % 2):
            assert c.read_reply()[0] in (b"message", b"pmessage")
        if i < 15:
            assert c.command("QUIT") == "OK"
        else:
            assert c.command("RESET") == "RESET"
    assert wait_until(lambda: pub.command("PUBLISH", "going", "y") == 0, 5)
    assert pub.command("PUBSUB", "NUMSUB", "going") == [b"going", 0]
    assert pub.command("PUBSUB", "NUMPAT") == 0
    assert pub.command("PUBSUB", "CHANNELS") == []
    for c in subs[15:]:
        assert c.command("GET", "going") is None          # out of subscribed mode
        c.close()
    pub.close()


# ---------------------------------------------------------------------------
# A subscriber that never reads
# ---------------------------------------------------------------------------

def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def flood(port, sub_conn, limit_cmd, chunk=64 << 10, rounds=200, pause=0.0, pid=None):
    """Set the limit, subscribe sub_conn (which then never reads), publish
    chunk-byte messages until a PUBLISH counts nobody: the rounds it took
    (None: never), and the largest RSS of pid seen meanwhile (KiB)."""
    peak = [0]
    pub = RespConn(port)
    try:
        assert pub.command("CONFIG", "SET", "client-output-buffer-limit", limit_cmd) == "OK"
        sub_conn.send(resp_command("SUBSCRIBE", "flood"))
        assert wait_until(lambda: pub.command("PUBSUB", "NUMSUB", "flood")[1] == 1, 5)
        body = b"x" * chunk
        for i in range(rounds):
            if pid:
                peak[0] = max(peak[0], rss_kb(pid))
            if pub.command("PUBLISH", "flood", body) == 0:
                return i, peak[0]
            if pause:
                time.sleep(pause)
        return None, peak[0]
    finally:
        pub.command("CONFIG", "SET", "client-output-buffer-limit", "pubsub 32mb 8mb 60")
        pub.close()


def test_output_limit_setting_as_redis(pkvs_srv, redis_peer):
    """CONFIG SET client-output-buffer-limit changes the classes it names
    and keeps the others; CONFIG GET reads every class back in bytes; a
    wrong class, number or word count is refused in Redis's words."""
    p = Peers(pkvs_srv.resp_port, redis_peer.port)
    try:
        for value in ["pubsub 64mb 1mb 5", "replica 1gb 512kb 10", "normal 1k 0 0",
                      "pubsub 1mb", "master 1 1 1", "normal 1x 1 1", "slave 1 2", "",
                      "SLAVE 2mb 1mb 3 Pubsub 0 0 0"]:
            p.same("CONFIG", "SET", "client-output-buffer-limit", value)
            p.same("CONFIG", "GET", "client-output-buffer-limit")
    finally:
        p.same("CONFIG", "SET", "client-output-buffer-limit",
               "normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60")
        p.close()


def test_pubsub_limit_kept_when_another_class_changes(pkvs_srv):
    """The pubsub class set, then the replica class: the subscriber that
    never reads is still dropped at the pubsub class's 1 MiB."""
    c = RespConn(pkvs_srv.resp_port)
    sub = RespConn(pkvs_srv.resp_port, rcvbuf=4096)
    try:
        assert c.command("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 0 0") == "OK"
        rounds, _ = flood(pkvs_srv.resp_port, sub, "replica 300mb 60mb 30")
        assert rounds is not None and rounds < 150, rounds
    finally:
        sub.close()
        c.command("CONFIG", "SET", "client-output-buffer-limit",
                  "normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60")
        c.close()


@pytest.mark.parametrize("server", ["pkvs", "redis"])
def test_subscriber_never_reads_hard_limit(pkvs_srv, redis_peer, server):
    port = pkvs_srv.resp_port if server == "pkvs" else redis_peer.port
    sub = RespConn(port, rcvbuf=4096)
    try:
        # 1 MiB hard limit, 64 KiB messages: dropped after ~16 plus what
        # the socket buffers took.
        rounds, _ = flood(port, sub, "pubsub 1mb 0 0")
        assert rounds is not None and rounds < 150, rounds
        assert _drains_to_eof(sub)
    finally:
        sub.close()


def _drains_to_eof(conn):
    """What the kernel had taken reads out, then the end (or a reset)."""
    conn.sock.settimeout(5)
    try:
        while conn.sock.recv(1 << 16):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_subscriber_never_reads_soft_limit(pkvs_srv):
    port = pkvs_srv.resp_port
    sub = RespConn(port, rcvbuf=4096)
    try:
        # Over 256 KiB for more than 1 s: dropped in the second or so after.
        t0 = time.monotonic()
        rounds, _ = flood(port, sub, "pubsub 0 256kb 1", chunk=32 << 10, rounds=400, pause=0.02)
        took = time.monotonic() - t0
        assert rounds is not None and 1.0 <= took < 6, (rounds, took)
    finally:
        sub.close()


def test_subscriber_never_reads_memory_bounded(pkvs_srv):
    """With the default limit, a subscriber that never reads costs pkvs at
    most about the 32 MiB hard limit: up to 64 MiB published to it, RSS
    grows by less than 48 MiB meanwhile, and it is dropped."""
    port = pkvs_srv.resp_port
    before = rss_kb(pkvs_srv.pid)
    sub = RespConn(port, rcvbuf=4096)
    try:
        rounds, peak = flood(port, sub, "pubsub 32mb 8mb 60", chunk=256 << 10, rounds=256,
                             pid=pkvs_srv.pid)
        assert rounds is not None and rounds <= 200, rounds
        grew = peak - before
        if not sanitized():
            assert grew < 48 << 10, f"RSS grew {grew} KiB"
    finally:
        sub.close()
