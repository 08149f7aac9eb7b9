"""Redis itself as the reference for pkvs's replies: a Debian redis-server
started by a test, and replies compared byte for byte.

    from redis_peer import peers, redis_peer, RawConn, Peers  # noqa: F401 (fixtures)

- redis_peer: a pytest fixture (module scope) giving a running
  redis-server (python/paste_proc.py's RedisServer: persistence off, a
  directory of its own, a free loopback port); the tests that use it are
  skipped when redis-server is not installed.
- peers: a fixture giving (run, srv): a fresh pkvs (conftest's pkvs
  fixture) and run(proto), which opens Peers on it and on redis_peer
  after FLUSHALL on both.
- RawConn(port, proto): a Redis-protocol connection that returns each
  reply as the exact bytes the server sent (HELLO 3 first when proto=3).
- Peers(pkvs_port, redis_port, proto): one RawConn to each; same(*cmd)
  sends the command to both and asserts the two replies are the same
  bytes (returns them); both(*cmd) returns the pair without asserting.
- flushed_peers(pkvs_port, redis_port, proto): Peers after FLUSHALL on both.
- run_script(p, script): each command of script through Peers p, the
  replies the same bytes, or the same once sorted for (UNORDERED, cmd...);
  (SLEEP, s) waits. script_like_redis(server, redis_peer, script, proto)
  runs one on flushed peers. parse and unordered read a raw reply.
"""
import os
import shutil
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from paste_proc import Conn, ProtocolError, RedisServer, resp_command  # noqa: E402


class RawConn(Conn):
    """A RESP connection whose replies are returned as raw bytes."""

    def __init__(self, port, proto=2, host="127.0.0.1", timeout=10.0):
        super().__init__(port, host, timeout)
        if proto == 3:
            reply = self.call("HELLO", "3")
            if not reply.startswith(b"%"):
                raise ProtocolError(f"HELLO 3 did not answer a map: {reply[:200]!r}")

    def _need(self, end):
        while len(self.buf) < end:
            self._fill()

    def _line_end(self, pos):
        while True:
            i = self.buf.find(b"\r\n", pos)
            if i >= 0:
                return i
            self._fill()

    def _skip(self, pos):
        """The offset just past the reply that starts at pos."""
        end = self._line_end(pos)
        kind, head = self.buf[pos:pos + 1], bytes(self.buf[pos + 1:end])
        pos = end + 2
        if kind in (b"$", b"=", b"!"):
            n = int(head)
            if n < 0:
                return pos
            self._need(pos + n + 2)
            return pos + n + 2
        if kind in (b"*", b"~", b">", b"%", b"|"):
            n = int(head)
            if n < 0:
                return pos
            for _ in range(n * (2 if kind in (b"%", b"|") else 1)):
                pos = self._skip(pos)
            return pos
        if kind in (b"+", b"-", b":", b"_", b",", b"#", b"("):
            return pos
        raise ProtocolError(f"unknown RESP type {kind!r} in {bytes(self.buf[:80])!r}")

    def read_raw(self):
        end = self._skip(0)
        data = bytes(self.buf[:end])
        del self.buf[:end]
        return data

    def call(self, *args):
        self.send(resp_command(*args))
        return self.read_raw()


class Peers:
    """The same commands to pkvs and to redis-server, replies compared."""

    def __init__(self, pkvs_port, redis_port, proto=2):
        self.pkvs = RawConn(pkvs_port, proto)
        self.redis = RawConn(redis_port, proto)

    def both(self, *args):
        return self.pkvs.call(*args), self.redis.call(*args)

    def same(self, *args):
        got, want = self.both(*args)
        assert got == want, f"{args!r}: pkvs {got[:300]!r}, redis-server {want[:300]!r}"
        return got

    def close(self):
        self.pkvs.close()
        self.redis.close()


def flushed_peers(pkvs_port, redis_port, proto=2):
    """Peers on two servers just emptied by FLUSHALL (both must say OK)."""
    p = Peers(pkvs_port, redis_port, proto)
    assert p.same("FLUSHALL") == b"+OK\r\n"
    return p


@pytest.fixture(scope="module")
def redis_peer():
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (Debian's redis-server: `make deps`)")
    srv = RedisServer(dir_base="/dev/shm", tag="peer")
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def peers(pkvs, redis_peer):  # noqa: F811
    srv = pkvs.start()
    made = []

    def run(proto):
        p = Peers(srv.resp_port, redis_peer.resp_port, proto)
        made.append(p)
        p.both("FLUSHALL")
        return p
    yield run, srv
    for p in made:
        p.close()


def parse(b, i=0):
    """One raw RESP reply at b[i:]: (value, end). Aggregates are (type,
    [items]); bulks bytes; other lines their raw bytes."""
    t = b[i:i + 1]
    e = b.index(b"\r\n", i)
    head = b[i + 1:e]
    i = e + 2
    if t in (b"*", b"~", b">", b"%") and int(head) >= 0:
        items = []
        for _ in range(int(head) * (2 if t == b"%" else 1)):
            v, i = parse(b, i)
            items.append(v)
        return (t, items), i
    if t == b"$" and int(head) >= 0:
        return b[i:i + int(head)], i + int(head) + 2
    return t + head, i


def unordered(raw):
    """A reply with its aggregates' elements sorted (pairs kept whole)."""
    def norm(v):
        if isinstance(v, tuple):
            return (v[0], sorted((norm(x) for x in v[1]), key=repr))
        return v
    v, end = parse(raw)
    assert end == len(raw), raw
    return norm(v)


UNORDERED = object()      # (UNORDERED, cmd...): compared once sorted
SLEEP = object()          # (SLEEP, seconds): wait, send nothing


def run_script(p, script):
    for cmd in script:
        if cmd[0] is SLEEP:
            time.sleep(cmd[1])
        elif cmd[0] is UNORDERED:
            got, want = p.both(*cmd[1:])
            assert unordered(got) == unordered(want), f"{cmd[1:]!r}: pkvs {got[:300]!r}, redis {want[:300]!r}"
        else:
            p.same(*cmd)


def script_like_redis(server, redis_peer, script, proto=2):
    """run_script on flushed peers: the pkvs server's and redis_peer's."""
    p = flushed_peers(server.resp_port, redis_peer.resp_port, proto)
    try:
        run_script(p, script)
    finally:
        p.close()
