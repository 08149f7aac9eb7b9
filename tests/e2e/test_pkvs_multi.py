"""pkvs's transactions (services/cmd_multi.c): MULTI, EXEC, DISCARD, WATCH,
UNWATCH.

- Every command and error byte for byte against Debian's redis-server
  7.0.15 (tests/e2e/redis_peer.py), in RESP2 and RESP3: queued replies,
  EXECABORT after a refusal while queueing, errors inside EXEC per command,
  nested MULTI, EXEC/DISCARD without MULTI, WATCH inside MULTI, EXEC of the
  wrong arity inside MULTI.
- WATCH broken by every kind of change, by the same or another
  connection: writes, DEL, MOVE, expiry, FLUSHDB, FLUSHALL, SWAPDB; and
  not broken where Redis is not (a key that did not exist and still does
  not, another database, a key deleted while absent).
- Values that do not fit one read queued where they landed (a streamed
  SET inside MULTI), large replies inside EXEC, pipelined and inline
  transactions.
- What only pkvs has: the queues' bound (--max-request-total) answered
  with Redis's OOM error, and a transaction that finds the store full is
  refused whole (EXECABORT) with none of its writes kept.
"""
import time

import pytest

from conftest import RespConn, RespError, resp_command
from pkvs_module import pkvs_srv  # noqa: F401 (pkvs_srv: a fixture)
from redis_peer import Peers, RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)

PROTOS = [2, 3]



class Clients:
    """Named clients, each a connection to pkvs and one to redis-server;
    every reply is compared byte for byte."""

    def __init__(self, pkvs_port, redis_port, proto):
        self.ports = (pkvs_port, redis_port)
        self.proto = proto
        self.peers = {}
        self.same("_", "FLUSHALL")

    def __getitem__(self, name):
        if name not in self.peers:
            self.peers[name] = Peers(*self.ports, self.proto)
        return self.peers[name]

    def same(self, name, *cmd):
        if len(cmd) == 1 and isinstance(cmd[0], str):
            cmd = cmd[0].split()
        return self[name].same(*cmd)

    def run(self, script):
        """script: lines "name: COMMAND args" (name 'a' when left out)."""
        out = []
        for line in script.strip().splitlines():
            name, _, cmd = line.strip().rpartition(": ")
            out.append(self.same(name or "a", cmd))
        return out

    def close(self):
        for p in self.peers.values():
            p.close()


@pytest.fixture(params=PROTOS, ids=lambda p: f"resp{p}")
def cl(request, pkvs_srv, redis_peer):
    c = Clients(pkvs_srv.resp_port, redis_peer.port, request.param)
    yield c
    c.close()



# ---------------------------------------------------------------------------
# MULTI, EXEC, DISCARD
# ---------------------------------------------------------------------------

def test_exec_runs_the_queue(cl):
    out = cl.run("""
        SET x 10
        MULTI
        SET a 1
        INCR a
        INCRBY x 5
        GET a
        PING
        ECHO hello
        EXEC
        GET a
        GET x
    """)
    assert out[1] == b"+OK\r\n" and out[2] == b"+QUEUED\r\n"
    assert out[8] == b"*6\r\n+OK\r\n:2\r\n:15\r\n$1\r\n2\r\n+PONG\r\n$5\r\nhello\r\n"


def test_empty_transaction_and_discard(cl):
    out = cl.run("""
        MULTI
        EXEC
        SET k v
        MULTI
        DEL k
        SET k2 v2
        DISCARD
        GET k
        EXISTS k2
        EXEC
        DISCARD
    """)
    assert out[1] == b"*0\r\n"
    assert out[6] == b"+OK\r\n" and out[7] == b"$1\r\nv\r\n" and out[8] == b":0\r\n"
    assert out[9] == b"-ERR EXEC without MULTI\r\n"
    assert out[10] == b"-ERR DISCARD without MULTI\r\n"


def test_nested_multi_and_watch_inside_multi_do_not_abort(cl):
    out = cl.run("""
        MULTI
        MULTI
        WATCH x
        SET q 1
        EXEC
        GET q
    """)
    assert out[1] == b"-ERR MULTI calls can not be nested\r\n"
    assert out[2] == b"-ERR WATCH inside MULTI is not allowed\r\n"
    assert out[4] == b"*1\r\n+OK\r\n"


@pytest.mark.parametrize("bad", [
    "NOSUCHCOMMAND a b",            # unknown
    "SET onlykey",                  # arity
    "GET",                          # arity
    "MULTI extra",                  # arity of a command run at once
    "DISCARD extra",
    "WATCH",
])
def test_refused_while_queueing_aborts_exec(cl, bad):
    out = cl.run(f"""
        MULTI
        SET foo1 bar1
        {bad}
        SET foo2 bar2
        EXEC
        EXISTS foo1 foo2
        PING
    """)
    assert out[2].startswith(b"-ERR ")
    assert out[4] == b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    assert out[5] == b":0\r\n" and out[6] == b"+PONG\r\n"


def test_exec_of_wrong_arity_inside_multi_discards(cl):
    out = cl.run("""
        MULTI
        SET a 1
        EXEC now
        EXEC
        EXISTS a
    """)
    assert out[2] == (b"-EXECABORT Transaction discarded because of: wrong number of "
                      b"arguments for 'exec' command\r\n")
    assert out[3] == b"-ERR EXEC without MULTI\r\n" and out[4] == b":0\r\n"


def test_errors_inside_exec_are_per_command(cl):
    out = cl.run("""
        SET s notanumber
        MULTI
        INCR s
        SET t 1
        INCRBY t notanumber
        SET u 1 NX XX
        SELECT 99
        GET t
        EXEC
    """)
    assert out[8] == (b"*6\r\n-ERR value is not an integer or out of range\r\n+OK\r\n"
                      b"-ERR value is not an integer or out of range\r\n-ERR syntax error\r\n"
                      b"-ERR DB index is out of range\r\n$1\r\n1\r\n")


def test_wrongtype_inside_exec(cl, pkvs_srv):
    cl.run("""
        HSET h f v
        MULTI
        GET h
        HGET h f
        INCR h
        EXEC
    """)


def test_no_multi_commands_refused(cl, pkvs_srv):
    out = cl.run("""
        MULTI
        SET foo bar
        SAVE
        EXEC
        GET foo
    """)
    assert out[2] == b"-ERR Command not allowed inside a transaction\r\n"
    assert out[3].startswith(b"-EXECABORT")


def test_min_replicas_refuse_writes(cl):
    # pkvs has no replicas: with min-replicas-to-write set (and a max lag)
    # a write is refused NOREPLICAS, queued or not, and an EXEC of a
    # queued write EXECABORT, as Redis refuses them without good replicas.
    try:
        out = cl.run("""
            CONFIG RESETSTAT
            SET xx 1
            MULTI
            INCR xx
            b: CONFIG SET min-replicas-to-write 2
            EXEC
            GET xx
            SET xx 2
            MULTI
            GET xx
            EXEC
            MULTI
            SET a b
            GET a
            EXEC
            b: CONFIG SET min-slaves-max-lag 0
            SET xx 3
            b: CONFIG SET min-slaves-max-lag 5
            DEL xx
            b: CONFIG SET min-replicas-to-write 0
            INCR xx
            INFO errorstats
            b: CONFIG SET min-replicas-to-write 1
        """)
        # Scripts: one that may write is refused before it runs, a write
        # inside one without flags is refused, a read runs.
        cl.same("a", "EVAL", "#!lua\nreturn 1", "0")
        cl.same("a", "EVAL", "#!lua flags=no-writes\nreturn 1", "0")
        cl.same("a", "EVAL", "return redis.call('set', 'xx', 1)", "0")
        cl.same("a", "EVAL", "return redis.call('get', 'xx')", "0")
        cl.same("a", "FCALL", "nosuch", "0")
    finally:
        cl.same("b", "CONFIG SET min-replicas-to-write 0 min-replicas-max-lag 10")
    assert out[5] == b"-EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write.\r\n"
    assert out[6] == b"$1\r\n1\r\n" and out[7].startswith(b"-NOREPLICAS")
    assert out[10] == b"*1\r\n$1\r\n1\r\n"           # reads only: runs
    assert out[12].startswith(b"-NOREPLICAS") and out[14].startswith(b"-EXECABORT")
    assert out[16] == b"+OK\r\n" and out[18].startswith(b"-NOREPLICAS") and out[20] == b":4\r\n"


def test_select_inside_multi_moves_the_connection(cl):
    out = cl.run("""
        MULTI
        SELECT 5
        SET z 1
        EXEC
        GET z
        SELECT 0
        GET z
    """)
    assert out[3] == b"*2\r\n+OK\r\n+OK\r\n" and out[4] == b"$1\r\n1\r\n"
    assert out[6] in (b"$-1\r\n", b"_\r\n")


def test_pipelined_and_inline_transactions(cl):
    """Several transactions in one write, and inline commands."""
    batch = b"".join(resp_command(*c.split()) for c in [
        "MULTI", "SET p 1", "INCR p", "EXEC", "MULTI", "INCR p", "NOPE", "EXEC",
        "MULTI", "GET p", "EXEC"])
    got = []
    for conn in (cl["pipe"].pkvs, cl["pipe"].redis):
        conn.send(batch)
        got.append([conn.read_raw() for _ in range(11)])
    assert got[0] == got[1]
    assert got[0][3] == b"*2\r\n+OK\r\n:2\r\n"
    inline = b"MULTI\r\nSET i 'a b'\r\nGET i\r\nEXEC\r\n"
    got = []
    for conn in (cl["inl"].pkvs, cl["inl"].redis):
        conn.send(inline)
        got.append([conn.read_raw() for _ in range(4)])
    assert got[0] == got[1] and got[0][3] == b"*2\r\n+OK\r\n$3\r\na b\r\n"


def info_field(conn, name):
    info = conn.command("INFO", "stats").decode()
    return int(info.split(f"\n{name}:")[1].split()[0])


def max_value(port):
    with RespConn(port) as c:
        return info_field(c, "max_value")


def test_large_values_queued_and_returned(cl, pkvs_srv):
    """Values over a read (a streamed SET inside MULTI, held where they
    landed, or written in chunks as they arrive and named by the key at
    EXEC) and a large GET inside a writing EXEC (its reply gathered)."""
    top = min(3 << 20, max_value(pkvs_srv.resp_port))
    big = bytes(range(256)) * 400             # 100 KiB: held where it landed
    huge = b"h" * (top - 3) + b"end"          # 3 MiB: over one entry, in chunks
    for conn in (cl["big"].pkvs, cl["big"].redis):
        conn.send(resp_command("MULTI") + resp_command("SET", "big", big) +
                  resp_command("GET", "big") + resp_command("SET", "huge", huge) +
                  resp_command("STRLEN", "huge") + resp_command("GETRANGE", "huge", -3, -1) +
                  resp_command("EXEC"))
    replies = [[c.read_raw() for _ in range(7)] for c in (cl["big"].pkvs, cl["big"].redis)]
    assert replies[0] == replies[1]
    assert replies[0][6].startswith(b"*5\r\n+OK\r\n$%d\r\n" % len(big))
    assert replies[0][6].endswith(b"+OK\r\n:%d\r\n$3\r\nend\r\n" % len(huge))
    assert cl.same("c", "GET", "huge") == b"$%d\r\n" % len(huge) + huge + b"\r\n"
    # A streamed value queued in a transaction that is discarded or aborted
    # is not written.
    for conn in (cl["big"].pkvs, cl["big"].redis):
        conn.send(resp_command("MULTI") + resp_command("SET", "gone1", huge) +
                  resp_command("DISCARD") + resp_command("MULTI") +
                  resp_command("SET", "gone2", huge) + resp_command("NOPE") +
                  resp_command("EXEC"))
    replies = [[c.read_raw() for _ in range(7)] for c in (cl["big"].pkvs, cl["big"].redis)]
    assert replies[0] == replies[1]
    assert cl.same("c", "EXISTS", "gone1", "gone2") == b":0\r\n"


def test_split_across_reads(pkvs_srv, redis_peer):
    """A transaction sent a few bytes at a time: its arguments are copied
    out of the read buffers they arrived in."""
    cmds = (resp_command("MULTI") + resp_command("SET", "sp", "x" * 3000) +
            resp_command("STRLEN", "sp") + resp_command("GET", "sp") +
            resp_command("EXEC"))
    got = []
    for port in (pkvs_srv.resp_port, redis_peer.port):
        with RawConn(port) as c:
            c.call("DEL", "sp")
            for i in range(0, len(cmds), 7):
                c.send(cmds[i:i + 7])
                time.sleep(0.0005)
            got.append([c.read_raw() for _ in range(5)])
    assert got[0] == got[1]


# ---------------------------------------------------------------------------
# WATCH
# ---------------------------------------------------------------------------

NULL = {2: b"*-1\r\n", 3: b"_\r\n"}


def test_watch_unmodified_key(cl):
    out = cl.run("""
        WATCH x y z
        WATCH k
        WATCH k
        MULTI
        PING
        EXEC
    """)
    assert out[5] == b"*1\r\n+PONG\r\n"


@pytest.mark.parametrize("who", ["a", "b"])
def test_watch_broken_by_a_write(cl, who):
    out = cl.run(f"""
        SET x 30
        WATCH a b x k z
        {who}: SET x 40
        MULTI
        SET won yes
        EXEC
        EXISTS won
    """)
    assert out[5] == NULL[cl.proto] and out[6] == b":0\r\n"


@pytest.mark.parametrize("setup,change", [
    ("DEL w", "b: SET w v"),            # created
    ("SET w 1", "b: DEL w"),            # deleted
    ("SET w 1", "b: INCR w"),
    ("SET w 1", "b: MSET q 1 w 2"),
    ("SET w 1", "b: SET w v XX"),
    ("SET w 1", "b: FLUSHDB"),
    ("SET w 1", "b: FLUSHALL"),
    ("SET w 1", "b: MOVE w 3"),
    ("SET w 1", "a: MOVE w 3"),         # by the watcher itself
    ("SET w 1", "b: MULTI\nb: INCR w\nb: EXEC"),
])
def test_watch_broken_by_changes(cl, setup, change):
    out = cl.run(f"""
        {setup}
        WATCH w
        {change}
        MULTI
        PING
        EXEC
    """)
    assert out[-1] == NULL[cl.proto]


@pytest.mark.parametrize("change", [
    "b: DEL w",              # absent: no change
    "b: SET other 1",
    "b: FLUSHDB",            # w did not exist
    "b: FLUSHALL",
    "b: SELECT 2",
    "b: SET w v XX",         # not set: w absent
])
def test_watch_not_broken(cl, change):
    out = cl.run(f"""
        DEL w
        WATCH w
        {change}
        b: SET w2 1
        MULTI
        PING
        EXEC
    """)
    assert out[-1] == b"*1\r\n+PONG\r\n"


def test_watch_remembers_its_database(cl):
    out = cl.run("""
        SELECT 5
        SET x 30
        WATCH x
        SELECT 1
        SET x 10
        b: SET x 11
        b: SELECT 6
        b: SET x 12
        b: FLUSHDB
        SELECT 5
        MULTI
        PING
        EXEC
        b: SELECT 5
        b: SET x 31
        MULTI
        PING
        EXEC
    """)
    assert out[12] == b"*1\r\n+PONG\r\n"
    # Watched no more after EXEC: a later change does not matter.
    assert out[17] == b"*1\r\n+PONG\r\n"


def test_watch_swapdb(cl):
    """SWAPDB breaks a WATCH on a key that existed, or exists after."""
    out = cl.run("""
        SET x 30
        WATCH x
        b: SWAPDB 0 1
        MULTI
        PING
        EXEC
        b: FLUSHALL
        b: SELECT 1
        b: SET y 30
        WATCH y
        b: SWAPDB 0 1
        MULTI
        PING
        EXEC
        WATCH nowhere
        b: SWAPDB 0 1
        MULTI
        PING
        EXEC
    """)
    assert out[5] == NULL[cl.proto] and out[13] == NULL[cl.proto]
    assert out[18] == b"*1\r\n+PONG\r\n"


def test_watch_after_exec_discard_unwatch(cl):
    out = cl.run("""
        SET x 30
        WATCH x
        SET x 40
        MULTI
        PING
        EXEC
        SET x 40
        MULTI
        PING
        EXEC
        WATCH x
        SET x 41
        UNWATCH
        MULTI
        PING
        EXEC
        UNWATCH
        WATCH x
        SET x 10
        MULTI
        DISCARD
        MULTI
        INCR x
        EXEC
        WATCH x
        MULTI
        UNWATCH
        b: SET x 1
        EXEC
    """)
    assert out[5] == NULL[cl.proto]            # modified after WATCH
    assert out[9] == b"*1\r\n+PONG\r\n"         # the failed EXEC unwatched it
    assert out[15] == b"*1\r\n+PONG\r\n"        # UNWATCH
    assert out[16] == b"+OK\r\n"                # UNWATCH with nothing watched
    assert out[23] == b"*1\r\n:11\r\n"          # DISCARD cleared the dirty flag
    assert out[28] == NULL[cl.proto]            # UNWATCH inside MULTI is queued


def test_flushall_while_watching_several_keys(cl):
    out = cl.run("""
        MSET a a b b
        WATCH b a
        FLUSHALL
        PING
        MULTI
        EXEC
    """)
    assert out[5] == NULL[cl.proto]


def test_watch_and_expiry(cl, pkvs_srv):
    # A deadline set on a watched key is a change.
    out = cl.run("""
        SET x foo
        WATCH x
        b: EXPIRE x 100
        MULTI
        PING
        EXEC
    """)
    assert out[-1] == NULL[cl.proto]
    # A watched key whose deadline passes before EXEC breaks it, whether
    # or not anything removed it yet.
    cl.run("""
        SET e1 foo PX 150
        SET e2 foo PX 150
        WATCH e1
        b: WATCH e2
    """)
    time.sleep(0.4)
    out = cl.run("""
        b: EXISTS e2
        MULTI
        PING
        EXEC
        b: MULTI
        b: PING
        b: EXEC
    """)
    assert out[3] == NULL[cl.proto] and out[6] == NULL[cl.proto]
    # Watched live by one, then removed as expired by another's WATCH:
    # broken for the first, not for the second.
    cl.run("""
        SET e3 foo PX 100
        WATCH e3 other
        c: WATCH other
    """)
    time.sleep(0.3)
    out = cl.run("""
        b: WATCH e3
        c: WATCH e3
        WATCH e3
        MULTI
        PING
        EXEC
        b: MULTI
        b: PING
        b: EXEC
        c: MULTI
        c: EXEC
    """)
    assert out[5] == NULL[cl.proto] and out[8] == b"*1\r\n+PONG\r\n" and out[10] == b"*0\r\n"
    # A key already expired at WATCH is absent: its removal is no change.
    cl.run("SET st foo PX 20")
    time.sleep(0.1)
    out = cl.run("""
        WATCH st
        b: EXISTS st
        MULTI
        PING
        EXEC
    """)
    assert out[-1] == b"*1\r\n+PONG\r\n"


def test_watcher_that_closes_and_many_watchers(pkvs_srv):
    """Watches go with their connection; a key watched by many: each
    broken once, the table empty again after."""
    conns = [RespConn(pkvs_srv.resp_port) for _ in range(20)]
    for i, c in enumerate(conns):
        assert c.command("WATCH", "shared", f"own{i}", "shared") == "OK"
    for c in conns[10:]:
        c.close()
    with RespConn(pkvs_srv.resp_port) as w:
        assert w.command("SET", "shared", "1") == "OK"
        assert w.command("SET", "shared", "2") == "OK"
        assert w.command("SET", "own3", "x") == "OK"
    for c in conns[:10]:
        assert c.command("MULTI") == "OK"
        assert c.command("PING") == "QUEUED"
        assert c.command("EXEC") is None
        c.close()


# ---------------------------------------------------------------------------
# What only pkvs has: its bounds
# ---------------------------------------------------------------------------

OOM = "OOM command not allowed when used memory > 'maxmemory'."


def test_queues_count_against_max_request_total(pkvs):
    """Arguments copied into queues (MSET's values are gathered, not
    streamed into store buffers) share --max-request-total."""
    srv = pkvs.start(["--max-request-total", "1M"], http=False)
    val = b"v" * 100_000
    with RespConn(srv.resp_port) as c, RespConn(srv.resp_port) as d:
        assert c.command("MULTI") == "OK"
        replies = [c.command("MSET", f"k{i}", val) for i in range(20)]
        assert "QUEUED" in replies
        refused = [r for r in replies if isinstance(r, RespError)]
        assert refused and str(refused[0]) == OOM, replies
        # Another client's queue shares the bound.
        assert d.command("MULTI") == "OK"
        assert str(d.command("MSET", "d", val)) == OOM
        assert d.command("DISCARD") == "OK"
        assert str(c.command("EXEC")) == \
            "EXECABORT Transaction discarded because of previous errors."
        assert c.command("EXISTS", "k0", "k1") == 0
        # The memory came back: the same transaction fits after it went.
        assert c.command("MULTI") == "OK"
        assert [c.command("MSET", f"k{i}", val) for i in range(5)] == ["QUEUED"] * 5
        assert c.command("EXEC") == ["OK"] * 5
        assert c.command("EXISTS", *[f"k{i}" for i in range(5)]) == 5


def test_full_store_refuses_the_whole_transaction(pkvs):
    """A transaction whose writes find no room (after a checkpoint and the
    cleaner) is refused whole: EXECABORT with Redis's OOM words, and none
    of its writes is there, not even those that fitted."""
    srv = pkvs.start(["--no-clean"], http=False, store_size="16M")
    fill = b"F" * 60_000
    big = b"B" * min(900_000, max_value(srv.resp_port) - 1000)   # MSET gathers it whole
    with RespConn(srv.resp_port) as c:
        failures = 0
        for i in range(2000):
            r = c.command("SET", f"fill{i}", fill)
            if isinstance(r, RespError):
                assert str(r) == OOM
                failures += 1
                if failures == 3:       # nothing more to make room with
                    break
        else:
            pytest.fail("a 16 MiB store took 120 MB of values")
        # Room for small values, not for big: a fill less, then a fill more
        # until big finds none.
        assert c.command("DEL", "fill0") == 1
        for i in range(100):
            if isinstance(c.command("MSET", "probe", big), RespError):
                break
            assert c.command("DEL", "probe") == 1
            c.command("SET", f"more{i}", fill)
        else:
            pytest.fail("room for a big value after 100 more fills")
        assert c.command("SET", "probe", "small") == "OK"
        assert c.command("DEL", "probe") == 1
        # A value streamed into store buffers as it arrives: refused while
        # queueing when the store drops its bytes (as Redis refuses
        # commands in MULTI when out of memory); else it is in buffers
        # already and may fit. Either way all or nothing.
        assert c.command("MULTI") == "OK"
        assert c.command("SET", "t1", "small") == "QUEUED"
        queued = c.command("SET", "t2", big[:120_000])
        assert queued == "QUEUED" or str(queued) == OOM
        r = c.command("EXEC")
        if r == ["OK", "OK"]:
            assert c.command("DEL", "t1", "t2") == 2
        else:
            assert str(r) in ("EXECABORT Transaction discarded because of: " + OOM,
                              "EXECABORT Transaction discarded because of previous errors.")
            assert c.command("EXISTS", "t1", "t2") == 0
        # MSET's value is copied into the store at EXEC, inside the group,
        # after two writes that fit (INFO's pkvs_sets counts them).
        sets = info_field(c, "pkvs_sets")
        assert c.command("MULTI") == "OK"
        assert c.command("SET", "t1", "small") == "QUEUED"
        assert c.command("INCR", "t-counter") == "QUEUED"
        assert c.command("MSET", "t2", big) == "QUEUED"
        assert c.command("SET", "t3", "small") == "QUEUED"
        r = c.command("EXEC")
        assert isinstance(r, RespError), r
        assert str(r) == "EXECABORT Transaction discarded because of: " + OOM
        assert info_field(c, "pkvs_sets") >= sets + 2      # written, then taken back
        assert c.command("EXISTS", "t1", "t-counter", "t2", "t3") == 0
        # Deletes still go (the store keeps a reserve for them).
        assert c.command("MULTI") == "OK"
        assert c.command("DEL", "fill1", "fill2", "fill3") == "QUEUED"
        assert c.command("GET", "t1") == "QUEUED"
        assert c.command("EXEC") == [3, None]
    srv.stop(keep_store=True)
    srv.start()
    with RespConn(srv.resp_port) as c:
        assert c.command("EXISTS", "t1", "t-counter", "t2", "t3", "fill1", "fill4") == 1


def test_reply_after_the_commit_is_durable(pkvs):
    """An EXEC acknowledged before a kill -9 is there after the restart
    (the reply leaves with the barrier that covers the commit)."""
    srv = pkvs.start(http=False)
    with RespConn(srv.resp_port) as c:
        for i in range(50):
            c.send(resp_command("MULTI") + resp_command("SET", f"d{i}", i) +
                   resp_command("INCR", "dcount") + resp_command("EXEC"))
        acked = [[c.read_reply() for _ in range(4)][-1] for _ in range(50)]
    assert acked[-1] == ["OK", 50]
    srv.kill9()
    srv.start()
    with RespConn(srv.resp_port) as c:
        assert c.command("GET", "dcount") == b"50"
        assert c.command("EXISTS", *[f"d{i}" for i in range(50)]) == 50


def test_watch_again_after_a_broken_one(pkvs_srv):
    """A connection whose watch broke watches nothing more (its watches go
    at the change, as in Redis): a WATCH then changes nothing, EXEC fails;
    after it, WATCH works again."""
    with RespConn(pkvs_srv.resp_port) as a, RespConn(pkvs_srv.resp_port) as b:
        assert a.command("WATCH", "hot") == "OK"
        assert b.command("SET", "hot", 1) == "OK"
        for i in range(1000):
            b.send(resp_command("SET", f"cold{i % 10}", i))
        assert [b.read_reply() for _ in range(1000)] == ["OK"] * 1000
        assert a.command("WATCH", "hot") == "OK"     # dirty: EXEC fails anyway
        assert a.command("MULTI") == "OK"
        assert a.command("EXEC") is None
        assert a.command("WATCH", "hot") == "OK"
        assert a.command("MULTI") == "OK"
        assert a.command("EXEC") == []
