"""pkvs's MONITOR (services/cmd_monitor.c) against Debian's redis-server
7.0.15, line for line: each monitor line is compared after its
timestamp and client address (which differ between the two servers)
are checked for form and cut.

- Commands and their arguments as Redis quotes them (binary bytes,
  quotes, backslashes, control characters), the database they ran in.
- What Redis hides (admin commands: CONFIG, CLIENT LIST) and what it
  redacts (AUTH's arguments, HELLO's AUTH pair).
- MULTI/EXEC (the queued commands at EXEC, before it; a failed
  transaction shows MULTI and EXEC only), scripts (EVAL, then its
  commands as [db lua]), FCALL.
- MONITOR twice (no reply), MONITOR inside EXEC (an error), RESET and
  QUIT end it, CLIENT LIST's O flag and cmd=monitor, RESP3.
- redis-py's Monitor reads pkvs's lines.
"""
import re
import time

import pytest
import redis

from conftest import resp_command
from pkvs_module import pkvs_srv  # noqa: F401 (pkvs_srv: a fixture)
from redis_peer import RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)
from test_pkvs_pubsub import Twin

LINE = re.compile(rb"^\+(\d{10})\.(\d{6}) \[(\d+) ([^\]]+)\] (.*)\r\n$", re.S)


def cut(line, addr=None):
    """A monitor line without its time and address: (db, address, rest)."""
    m = LINE.match(line)
    assert m, f"not a monitor line: {line!r}"
    if addr is not None:
        assert m.group(4) in (addr, b"lua"), line
    return m.group(3), m.group(4) == b"lua", m.group(5)


def addr_of(conn):
    info = conn.call("CLIENT", "INFO")
    return re.search(rb" addr=(\S+) ", info).group(1)


class Side:
    """A monitor and a client on one server."""

    def __init__(self, port, proto):
        self.port = port
        self.mon = RawConn(port, proto)
        self.cli = RawConn(port, 2)
        self.cli.call("FLUSHALL")
        self.cli.call("SCRIPT", "FLUSH")
        assert self.mon.call("MONITOR") == b"+OK\r\n"
        self.addr = addr_of(self.cli)   # (CLIENT INFO is shown: read it)
        cut(self.mon.read_raw(), self.addr)

    def lines(self, n):
        return [cut(self.mon.read_raw(), self.addr) for _ in range(n)]

    def close(self):
        self.mon.close()
        self.cli.close()


@pytest.fixture(params=[2, 3], ids=lambda p: f"resp{p}")
def pair(request, pkvs_srv, redis_peer):
    sides = [Side(pkvs_srv.resp_port, request.param), Side(redis_peer.port, request.param)]
    yield sides
    for s in sides:
        s.close()


def run_both(pair, *cmds):
    """Each command on both clients: their replies must match."""
    for cmd in cmds:
        got, want = (s.cli.call(*cmd) for s in pair)
        assert got == want, (cmd, got, want)


def same_lines(pair, n):
    got, want = pair[0].lines(n), pair[1].lines(n)
    assert got == want
    return got


def test_commands_and_quoting(pair):
    run_both(pair, ("SET", "foo", "bar"), ("GET", "foo"),
             ("SET", b"k\x00\xff\x7f", b'q"b\\s\n\r\t\x07\x08 end'),
             ("SELECT", "3"), ("INCR", "n"), ("SELECT", "0"), ("PING",), ("ECHO", ""))
    lines = same_lines(pair, 8)
    assert lines[0] == (b"0", False, b'"SET" "foo" "bar"')
    assert lines[2][2] == b'"SET" "k\\x00\\xff\\x7f" "q\\"b\\\\s\\n\\r\\t\\a\\b end"'
    assert lines[3][0] == b"3" and lines[4][0] == b"3" and lines[5][0] == b"0"


def test_line_form_and_address(pair):
    p = pair[0]
    p.cli.call("SET", "a", "1")
    line = p.mon.read_raw()
    m = LINE.match(line)
    assert m and m.group(4) == p.addr and m.group(3) == b"0"


def test_hidden_and_redacted(pair):
    # CONFIG and CLIENT LIST are admin: not shown; CLIENT ID is.
    run_both(pair, ("CONFIG", "GET", "maxmemory"))
    for s in pair:
        s.cli.call("CLIENT", "LIST")
        s.cli.call("CLIENT", "ID")
    run_both(pair, ("AUTH", "not-real"), ("AUTH", "not-real", "not-a-password"),
             ("AUTH", "a", "b", "c"), ("HELLO", "2", "AUTH", "not-real", "not-a-password"),
             ("HELLO", "2", "SETNAME", "x", "AUTH", "u", "p"), ("HELLO", "9", "AUTH", "u", "p"),
             ("PING",))
    lines = same_lines(pair, 8)
    assert lines[0][2] == b'"CLIENT" "ID"'
    assert lines[1][2] == b'"AUTH" "(redacted)"'
    assert lines[2][2] == b'"AUTH" "(redacted)" "(redacted)"'
    assert lines[4][2] == b'"HELLO" "2" "AUTH" "(redacted)" "(redacted)"'
    assert lines[7][2] == b'"PING"'


def test_multi_exec(pair):
    run_both(pair, ("MULTI",), ("SET", "foo", "bar"), ("INCR", "c"), ("EXEC",))
    assert [r for _, _, r in same_lines(pair, 4)] == [
        b'"MULTI"', b'"SET" "foo" "bar"', b'"INCR" "c"', b'"EXEC"']
    # A transaction refused at EXEC: MULTI and EXEC only.
    run_both(pair, ("MULTI",), ("NOSUCHCOMMAND", "x"), ("EXEC",))
    assert [r for _, _, r in same_lines(pair, 2)] == [b'"MULTI"', b'"EXEC"']
    # DISCARD and WATCH are shown; a command refused for its arity is not.
    run_both(pair, ("WATCH", "w"), ("UNWATCH",), ("GET",), ("PING",))
    assert [r for _, _, r in same_lines(pair, 3)] == [b'"WATCH" "w"', b'"UNWATCH"', b'"PING"']


def test_scripts(pair):
    run_both(pair, ("EVAL", "redis.call('set', KEYS[1], ARGV[1]) return redis.call('get', KEYS[1])",
                    "1", "foo", "bar"))
    lines = same_lines(pair, 3)
    assert lines[0][1] is False and lines[0][2].startswith(b'"EVAL"')
    assert lines[1] == (b"0", True, b'"set" "foo" "bar"')
    assert lines[2] == (b"0", True, b'"get" "foo"')
    run_both(pair, ("EVAL", "redis.call('select', 5) return redis.call('incr', 'n')", "0"))
    lines = same_lines(pair, 3)
    assert lines[2] == (b"5", True, b'"incr" "n"')
    lib = "#!lua name=mon\nredis.register_function('f', function() return redis.call('set', 'foo', 'bar') end)"
    run_both(pair, ("FUNCTION", "LOAD", "REPLACE", lib), ("FCALL", "f", "0"))
    lines = same_lines(pair, 3)
    assert lines[1][2] == b'"FCALL" "f" "0"' and lines[2] == (b"0", True, b'"set" "foo" "bar"')
    run_both(pair, ("FUNCTION", "DELETE", "mon"))
    same_lines(pair, 1)
    # Shown before they run, even when they fail: a missing script, a
    # bad numkeys; a script's refused call is not shown.
    run_both(pair, ("EVALSHA", "0" * 40, "0"), ("EVAL", "return 1", "-1"),
             ("EVAL", "return redis.pcall('nosuch')", "0"))
    assert [r for _, _, r in same_lines(pair, 3)] == [
        b'"EVALSHA" "' + b"0" * 40 + b'" "0"', b'"EVAL" "return 1" "-1"',
        b'"EVAL" "return redis.pcall(\'nosuch\')" "0"']


def test_streamed_set(pair):
    """A SET whose value arrives over several reads (pkvs streams it into
    the store) is shown whole."""
    value = bytes(range(256)) * 64
    data = resp_command("SET", "big", value)
    for s in pair:
        s.cli.send(data[:5000])
    time.sleep(0.1)
    for s in pair:
        s.cli.send(data[5000:])
        assert s.cli.read_raw() == b"+OK\r\n"
    lines = same_lines(pair, 1)
    assert lines[0][2].startswith(b'"SET" "big" "\\x00\\x01')
    # Queued inside MULTI, shown at EXEC.
    for s in pair:
        assert s.cli.call("MULTI") == b"+OK\r\n"
        s.cli.send(data[:5000])
    time.sleep(0.1)
    for s in pair:
        s.cli.send(data[5000:])
        assert s.cli.read_raw() == b"+QUEUED\r\n"
    run_both(pair, ("EXEC",))
    lines = same_lines(pair, 3)
    assert lines[0][2] == b'"MULTI"' and lines[1][2].startswith(b'"SET" "big"')


def test_blocked_command_shown_once(pair):
    for s in pair:
        s.cli.send(resp_command("BLPOP", "bl", "0"))
    lines = same_lines(pair, 1)
    assert lines[0][2] == b'"BLPOP" "bl" "0"'
    others = [RawConn(s.port) for s in pair]
    for o, s in zip(others, pair):
        assert o.call("RPUSH", "bl", "x") == b":1\r\n"
        assert s.cli.read_raw() == b"*2\r\n$2\r\nbl\r\n$1\r\nx\r\n"
        s.addr = None                                # (the pusher's address)
    assert [r for _, _, r in same_lines(pair, 1)] == [b'"RPUSH" "bl" "x"']
    for o in others:
        o.close()


def test_monitor_twice_and_in_exec(pkvs_srv, redis_peer):
    ports = (pkvs_srv.resp_port, redis_peer.port)
    m = Twin(ports, 2)
    assert m.call("MONITOR") == b"+OK\r\n"
    m.send("MONITOR")                               # no reply
    m.quiet()
    m.close()
    c = Twin(ports, 2)
    c.call("MULTI")
    c.call("MONITOR")
    assert b"MONITOR isn't allowed for DENY BLOCKING client" in c.call("EXEC")
    assert c.call("PING") == b"+PONG\r\n"
    c.close()


def test_reset_and_quit_end_it(pkvs_srv, redis_peer):
    for port in (pkvs_srv.resp_port, redis_peer.port):
        m, c = RawConn(port), RawConn(port)
        assert m.call("MONITOR") == b"+OK\r\n"
        listing = c.call("CLIENT", "LIST")
        mine = [ln for ln in listing.split(b"\n") if b"cmd=monitor" in ln]
        assert len(mine) == 1 and b" flags=O " in mine[0]
        assert m.call("RESET") == b"+RESET\r\n"
        c.call("SET", "x", "1")
        assert m.call("PING") == b"+PONG\r\n"       # no monitor line came before it
        assert b"flags=O" not in c.call("CLIENT", "LIST")
        m2 = RawConn(port)
        assert m2.call("MONITOR") == b"+OK\r\n"
        c.call("GET", "x")
        assert cut(m2.read_raw())[2] == b'"GET" "x"'
        m2.send(resp_command("QUIT"))
        assert m2.read_raw() == b"+OK\r\n"
        m2.close()
        c.call("SET", "y", "2")
        assert b"flags=O" not in c.call("CLIENT", "LIST")
        m.close()
        c.close()


def test_monitor_sees_its_own_and_others(pkvs_srv, redis_peer):
    got = []
    for port in (pkvs_srv.resp_port, redis_peer.port):
        m, m2 = RawConn(port), RawConn(port, 3)
        m.call("MONITOR")
        m2.call("MONITOR")
        m.send(resp_command("PING"))
        out = [m.read_raw(), cut(m.read_raw())[2], cut(m2.read_raw())[2]]
        got.append(out)
        m.close()
        m2.close()
    assert got[0] == got[1] == [b"+PONG\r\n", b'"PING"', b'"PING"']


def test_redis_py_monitor(pkvs_srv):
    r = redis.Redis(port=pkvs_srv.resp_port)
    other = redis.Redis(port=pkvs_srv.resp_port, db=2)
    with r.monitor() as m:
        other.set("hello", "wo rld")
        cmd = m.next_command()
        while cmd["command"] != "SET hello wo rld":
            cmd = m.next_command()
        assert cmd["db"] == 2 and cmd["client_type"] == "tcp"
        other.lpush("l", "a\"b")
        cmd = m.next_command()
        assert cmd["command"] == 'LPUSH l a"b'
    other.close()
    r.close()
