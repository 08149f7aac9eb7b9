"""SLOWLOG (services/cmd_slowlog.c) against Debian's redis-server 7.0.15:
the same commands on both with slowlog-log-slower-than 0, and each entry's
arguments compared (ids, times, durations and ports differ by nature):
trimming past 32 arguments and 128 bytes, redaction of passwords (CONFIG
SET requirepass/masterauth, ACL SETUSER, AUTH), EXEC's commands logged
one by one and EXEC not, a script's commands as its client's, a SET whose
value streamed logged with its value's head, slowlog-max-len, -1 turning
it off; a blocked command logged when it is served (not when it blocks,
nor for a timeout); GET's count, LEN, RESET, HELP and the errors byte for
byte.
"""
import time

from conftest import resp_command
from pkvs_module import pkvs_srv  # noqa: F401 (pkvs_srv: a fixture)
from redis_peer import Peers, RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)


def parse(b, i=0):
    """A RESP2 reply as Python values (arrays as lists, integers as int,
    bulks as bytes) and the offset after it."""
    end = b.index(b"\r\n", i)
    kind, head = b[i:i + 1], b[i + 1:end]
    if kind == b"*":
        out, at = [], end + 2
        for _ in range(int(head)):
            v, at = parse(b, at)
            out.append(v)
        return out, at
    if kind == b":":
        return int(head), end + 2
    if kind == b"$":
        n = int(head)
        return b[end + 2:end + 2 + n], end + 4 + n
    return head, end + 2


def entries(conn):
    """SLOWLOG GET -1 as (arguments, client name) per entry, newest first,
    after checking each entry's shape."""
    got, _ = parse(conn.call("SLOWLOG", "GET", "-1"))
    out = []
    for e in got:
        assert len(e) == 6 and e[0] >= 0 and e[1] > 1_700_000_000 and e[2] >= 0, e
        assert e[4].startswith(b"127.0.0.1:") or e[4] == b"?:0", e     # ?:0: a script's
        out.append((e[3], e[5]))
    return out


def run_both(pkvs_port, redis_port, steps):
    """steps on fresh logs of both servers; their entries."""
    seen = []
    for port in (pkvs_port, redis_port):
        c = RawConn(port)
        c.call("FLUSHALL")
        c.call("CONFIG", "SET", "slowlog-max-len", "128")
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
        c.call("SLOWLOG", "RESET")
        for step in steps:
            if step[0] == "SPLIT":               # a SET whose value arrives in two reads
                wire = resp_command("SET", step[1], step[2])
                c.send(wire[:-300])
                time.sleep(0.05)
                c.send(wire[-300:])
                c.read_raw()
            else:
                c.call(*step)
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
        seen.append(entries(c))
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
        c.close()
    return seen


def test_entries_as_redis(pkvs_srv, redis_peer):
    steps = [
        ("CLIENT", "SETNAME", "logger"),
        ("SET", "a", "1"),
        ("SADD", "set") + tuple(str(i) for i in range(3, 34)),
        ("SADD", "set", "foo", "A" * 129),
        ("CONFIG", "SET", "requirepass", "secret"),
        ("AUTH", "secret"),
        ("CONFIG", "SET", "masterauth", "x", "requirepass", ""),
        ("ACL", "SETUSER", "u1", "on", ">pw", "+get"),
        ("MULTI",), ("INCR", "n"), ("LPUSH", "l", "x"), ("EXEC",),
        ("EVAL", "redis.call('set', 'e', '1') return 1", "0"),
        ("SPLIT", "streamed", b"v" * 1000),
        ("SPLIT", "short", b"w" * 600),
        ("GET", "streamed"),
    ]
    mine, want = run_both(pkvs_srv.resp_port, redis_peer.resp_port, steps)
    assert mine == want, (mine, want)
    argvs = [e[0] for e in mine]
    assert [b"EXEC"] not in argvs and ([b"set", b"e", b"1"], b"") in mine
    assert [b"SET", b"streamed", b"v" * 128 + b"... (872 more bytes)"] in argvs, argvs
    assert [b"ACL", b"SETUSER", b"(redacted)", b"(redacted)", b"(redacted)", b"(redacted)"] in argvs


def test_max_len_and_off(pkvs_srv, redis_peer):
    for port in (pkvs_srv.resp_port, redis_peer.resp_port):
        c = RawConn(port)
        c.call("SLOWLOG", "RESET")
        c.call("CONFIG", "SET", "slowlog-max-len", "10")
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
        for _ in range(30):
            c.call("PING")
        assert c.call("SLOWLOG", "LEN") == b":10\r\n"
        assert len(parse(c.call("SLOWLOG", "GET", "5"))[0]) == 5
        assert len(parse(c.call("SLOWLOG", "GET"))[0]) == 10
        assert parse(c.call("SLOWLOG", "GET", "0"))[0] == []
        c.call("CONFIG", "SET", "slowlog-max-len", "1")
        c.call("PING")
        assert c.call("SLOWLOG", "LEN") == b":1\r\n"
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
        c.call("SLOWLOG", "RESET")
        c.call("PING")
        assert c.call("SLOWLOG", "LEN") == b":0\r\n"
        c.call("CONFIG", "SET", "slowlog-max-len", "128")
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
        c.close()


def test_replies_and_errors_as_redis(pkvs_srv, redis_peer):
    p = Peers(pkvs_srv.resp_port, redis_peer.resp_port)
    for cmd in [("SLOWLOG", "RESET"), ("SLOWLOG", "LEN"), ("SLOWLOG", "GET"),
                ("SLOWLOG", "GET", "-2"), ("SLOWLOG", "GET", "x"), ("SLOWLOG", "GET", "1", "2"),
                ("SLOWLOG", "LEN", "x"), ("SLOWLOG", "NOPE"), ("SLOWLOG",), ("SLOWLOG", "HELP"),
                ("CONFIG", "SET", "slowlog-log-slower-than", "-2"),
                ("CONFIG", "SET", "slowlog-max-len", "-1"),
                ("CONFIG", "GET", "slowlog-log-slower-than"), ("CONFIG", "GET", "slowlog-max-len")]:
        p.same(*cmd)
    p.close()


def blocked_steps(port):
    """A client blocks and is served by a push, by a push inside EXEC, by
    a ZADD, and times out: the entries, which Redis writes when a blocked
    command is served (not when it blocks, nor for a timeout)."""
    a, b = RawConn(port), RawConn(port)
    a.call("FLUSHALL")
    a.call("CONFIG", "SET", "slowlog-max-len", "128")
    a.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    b.call("CLIENT", "SETNAME", "blocker")
    a.call("SLOWLOG", "RESET")

    def blocked():
        for _ in range(200):
            if b"blocked_clients:1" in a.call("INFO", "clients"):
                return
            time.sleep(0.01)
        raise AssertionError("the client did not block")
    for block, serve in ((("BLPOP", "l", "0"), [("LPUSH", "l", "x")]),
                         (("BLPOP", "l", "0"), [("MULTI",), ("LPUSH", "l", "y"), ("EXEC",)]),
                         (("BZPOPMIN", "z", "0"), [("ZADD", "z", "1", "m")])):
        b.send(resp_command(*block))
        blocked()
        for step in serve:
            a.call(*step)
        b.read_raw()
    assert b.call("BRPOP", "l2", "0.05") == b"*-1\r\n"
    a.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
    # The INFO polls above are as many as the wait took: left out.
    got = [e for e in entries(a) if e[0] != [b"INFO", b"clients"]]
    a.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
    a.close()
    b.close()
    return got


def test_blocked_commands_logged_when_served(pkvs_srv, redis_peer):
    mine, want = blocked_steps(pkvs_srv.resp_port), blocked_steps(redis_peer.resp_port)
    assert mine == want, (mine, want)
    argvs = [e[0] for e in mine]
    assert argvs.count([b"BLPOP", b"l", b"0"]) == 2 and [b"BRPOP", b"l2", b"0.05"] not in argvs
