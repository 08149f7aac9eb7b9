"""pkvs's databases (services/cmd_db.c, kv_db.c): SELECT, SWAPDB, MOVE,
--databases.

- Every command and error byte for byte against Debian's redis-server
  7.0.15 (tests/e2e/redis_peer.py), in RESP2 and RESP3: indexes that are
  not integers, outside an int, negative or past the last database; MOVE
  to the same database, of an absent key, onto a present one.
- Databases are apart: the same key in each, DBSIZE, FLUSHDB of one;
  SWAPDB swaps what they hold while connections stay on their number.
- MOVE keeps a key's deadline, and a hash moves whole (its fields are not
  under the key: O(1)); a moved hash deleted later is swept.
- --databases N: SELECT N-1 works, N is out of range; bad values refused.
- Databases, SWAPDB and MOVE survive a restart and a kill -9.
"""
import time

import pytest

from conftest import RespConn
from pkvs_module import pkvs_srv  # noqa: F401 (pkvs_srv: a fixture)
from redis_peer import Peers, redis_peer  # noqa: F401 (redis_peer: a fixture)

PROTOS = [2, 3]



@pytest.fixture(params=PROTOS, ids=lambda p: f"resp{p}")
def peers(request, pkvs_srv, redis_peer):
    p = Peers(pkvs_srv.resp_port, redis_peer.port, request.param)
    p.same("FLUSHALL")
    yield p
    p.close()


def same_all(p, script):
    return [p.same(*line.split()) for line in script.strip().splitlines()]



@pytest.mark.parametrize("cmd", [
    "SELECT -1", "SELECT 16", "SELECT 2147483648", "SELECT -2147483649",
    "SELECT 9223372036854775807", "SELECT 9223372036854775808", "SELECT 01", "SELECT +1",
    "SELECT 1.0", "SELECT abc", "SELECT", "SELECT 1 2",
    "SWAPDB -1 0", "SWAPDB 0 16", "SWAPDB x 0", "SWAPDB 0 x", "SWAPDB 2147483648 0",
    "SWAPDB 0 -2147483649", "SWAPDB 0", "SWAPDB 0 0",
    "MOVE k -1", "MOVE k 16", "MOVE k 0", "MOVE k x", "MOVE k 2147483648", "MOVE k",
    "MOVE nokey 1",
])
def test_errors(peers, cmd):
    peers.same(*cmd.split())


def test_databases_are_apart(peers):
    for d in range(16):
        peers.same("SELECT", d)
        peers.same("SET", "k", f"v{d}")
        for i in range(d):
            peers.same("SET", f"extra{i}", i)
    for d in range(16):
        peers.same("SELECT", d)
        assert peers.same("GET", "k") == b"$%d\r\nv%d\r\n" % (len(str(d)) + 1, d)
        assert peers.same("DBSIZE") == b":%d\r\n" % (d + 1)
    same_all(peers, """
        SELECT 7
        FLUSHDB
        DBSIZE
        GET k
        SELECT 8
        DBSIZE
        SELECT 0
        DBSIZE
    """)


def test_swapdb(peers):
    out = same_all(peers, """
        SELECT 1
        SET a in1
        SET b in1
        SELECT 2
        SET a in2
        SWAPDB 1 2
        GET a
        DBSIZE
        SELECT 1
        GET a
        GET b
        DBSIZE
        SWAPDB 1 1
        GET a
        SWAPDB 1 9
        GET a
        DBSIZE
        SELECT 9
        GET a
        KEYS *
    """)
    assert out[6] == b"$3\r\nin1\r\n" and out[9] == b"$3\r\nin2\r\n"
    assert out[15] in (b"$-1\r\n", b"_\r\n") and out[18] == b"$3\r\nin2\r\n"


def test_swapdb_seen_by_other_connections(pkvs_srv, redis_peer):
    """A connection stays on its database number and sees what was swapped
    in, in pkvs as in Redis."""
    for port in (pkvs_srv.resp_port, redis_peer.port):
        with RespConn(port) as a, RespConn(port) as b:
            a.command("FLUSHALL")
            assert a.command("SELECT", 3) == "OK"
            assert a.command("SET", "x", "three") == "OK"
            assert b.command("SELECT", 4) == "OK"
            assert b.command("SET", "x", "four") == "OK"
            assert a.command("SWAPDB", 3, 4) == "OK"
            assert a.command("GET", "x") == b"four"
            assert b.command("GET", "x") == b"three"


def test_move(peers):
    out = same_all(peers, """
        SET a 1
        MOVE a 1
        MOVE a 1
        EXISTS a
        SELECT 1
        GET a
        SET b here
        SELECT 0
        SET b there
        MOVE b 1
        GET b
        SELECT 1
        GET b
        DBSIZE
        MOVE a 15
        DBSIZE
        SELECT 15
        GET a
    """)
    assert out[1] == b":1\r\n" and out[2] == b":0\r\n" and out[9] == b":0\r\n"
    assert out[14] == b":1\r\n" and out[17] == b"$1\r\n1\r\n"


def test_move_keeps_the_deadline(peers, pkvs_srv):
    same_all(peers, """
        SET t v EX 1000
        SET p v
        MOVE t 2
        MOVE p 2
        SELECT 2
        TTL p
    """)
    for p in (peers.pkvs, peers.redis):
        ttl = p.call("TTL", "t")
        assert ttl in (b":1000\r\n", b":999\r\n"), ttl
    # An expired key is absent here: MOVE answers 0, and absent there: MOVE
    # onto it works.
    same_all(peers, """
        SET gone v PX 20
        SELECT 3
        SET gone2 v PX 20
        SELECT 2
    """)
    time.sleep(0.1)
    out = same_all(peers, """
        MOVE gone 3
        SET gone2 fresh
        MOVE gone2 3
        SELECT 3
        GET gone2
        TTL gone2
    """)
    assert out[0] == b":0\r\n" and out[2] == b":1\r\n" and out[4] == b"$5\r\nfresh\r\n"


def test_move_a_hash(peers, pkvs_srv):
    fields = []
    for i in range(300):
        fields += [f"f{i:03d}", f"v{i}"]
    peers.same("HSET", "h", *fields)
    out = same_all(peers, """
        SELECT 4
        HSET h old 1
        SELECT 0
        MOVE h 4
        SELECT 4
        DEL h
        SELECT 0
        MOVE h 4
        EXISTS h
        SELECT 4
        HLEN h
        HGET h f123
        TYPE h
        HGETALL h
    """)
    assert out[3] == b":0\r\n" and out[7] == b":1\r\n" and out[10] == b":300\r\n"
    # Deleted in its new database: the fields go with it.
    same_all(peers, """
        DEL h
        EXISTS h
        HLEN h
        SELECT 0
        HLEN h
    """)


def test_databases_flag(pkvs):
    srv = pkvs.start(["--databases", "4"], http=False)
    with RespConn(srv.resp_port) as c:
        assert c.command("SELECT", 3) == "OK"
        assert str(c.command("SELECT", 4)) == "ERR DB index is out of range"
        assert str(c.command("SWAPDB", 0, 4)) == "ERR DB index is out of range"
        assert c.command("SET", "k", "v") == "OK"
        assert str(c.command("MOVE", "k", 4)) == "ERR DB index is out of range"
        assert c.command("MOVE", "k", 0) == 1
    for bad in ("0", "65", "x", "-1"):
        code, err = pkvs.start_failing(["--databases", bad])
        assert code == 2, (bad, code, err)
        assert "databases" in err


@pytest.mark.parametrize("how", ["restart", "kill9"])
def test_databases_survive_a_restart(pkvs, how):
    srv = pkvs.start(["--databases", "32"], http=False)
    with RespConn(srv.resp_port) as c:
        for d in (0, 5, 31):
            c.command("SELECT", d)
            assert c.command("SET", "k", f"db{d}") == "OK"
            assert c.command("SET", f"only{d}", "x") == "OK"
        assert c.command("SWAPDB", 5, 6) == "OK"
        assert c.command("SELECT", 31) == "OK"
        assert c.command("MOVE", "only31", 7) == 1
        assert c.command("SELECT", 0) == "OK"
        assert c.command("FLUSHDB") == "OK"
    if how == "kill9":
        srv.kill9()
        srv.start()
    else:
        srv.restart()
    with RespConn(srv.resp_port) as c:
        want = {0: (None, 0), 5: (None, 0), 6: (b"db5", 2), 7: (None, 1), 31: (b"db31", 1)}
        for d, (val, size) in want.items():
            assert c.command("SELECT", d) == "OK"
            assert c.command("GET", "k") == val, d
            assert c.command("DBSIZE") == size, d
        assert c.command("SELECT", 7) == "OK"
        assert c.command("GET", "only31") == b"x"
