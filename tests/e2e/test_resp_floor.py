"""bench/resp-floor, the floor bench/kvs.py measures beside pkvs and Redis: a
RESP server on a paste port that stores nothing. Its numbers are only
worth reporting if it answers what pkvs answers, in order, whatever way the
commands are cut: SET with +OK, GET with a value as long as the last SET's,
through redis-cli, pipelines sent a byte at a time, a value spread over
many receive buffers, and pload's run as kvs.py drives it; a malformed
frame gets Redis's protocol error and a close; SIGTERM stops it and
removes its store file. With a durability mode (kvs.py's floor-durable) a
batch of SETs pays one fence or one group commit, what it stores is in the
file once +OK came back, and reads flush nothing."""

import json
import os
import subprocess

import pytest

from conftest import RespConn, binary, resp_command
from paste_proc import RespFloor


def start_floor(store, *mode):
    return RespFloor(store, mode).start()


def stop_counting(floor):
    """SIGTERM (exit 0); the fences and commits its port paid."""
    floor.stop()
    return floor.counts()


@pytest.fixture
def floor(tmp_path):
    srv = start_floor(tmp_path / "floor.store")
    yield srv
    srv.kill9()


def test_answers_like_a_store_that_keeps_only_lengths(floor):
    with RespConn(floor.port) as c:
        assert c.command("PING") == "PONG"
        assert c.command("GET", "k") is None           # no SET yet: a miss
        assert c.command("SET", "k", "hello") == "OK"
        assert c.command("GET", "other") == b"xxxxx"  # the last SET's length
        assert str(c.command("HSET", "h", "f", "v")).startswith("ERR unknown command")
    out = subprocess.run(["redis-cli", "-p", str(floor.port), "SET", "a", "x" * 300],
                         capture_output=True, text=True, timeout=10)
    assert out.stdout.strip() == "OK", out
    out = subprocess.run(["redis-cli", "-p", str(floor.port), "GET", "a"],
                         capture_output=True, text=True, timeout=10)
    assert out.stdout.strip() == "x" * 300, out


def test_pipelines_cut_anywhere_are_answered_in_order(floor):
    cmds = []
    for i in range(100):
        cmds.append(resp_command("SET", f"k{i}", "v" * (i + 1)))
        cmds.append(resp_command("GET", f"k{i}"))
    wire = b"".join(cmds) + b"PING\r\n"                  # an inline command last
    with RespConn(floor.port) as c:
        for i in range(len(wire)):                       # a byte per write
            c.send(wire[i:i + 1])
        for i in range(100):
            assert c.read_reply() == "OK"
            assert c.read_reply() == b"x" * (i + 1)
        assert c.read_reply() == "PONG"


def test_a_value_over_many_receive_buffers(floor):
    big = b"v" * (300 << 10)                             # ~150 2 KiB buffers
    with RespConn(floor.port, timeout=10) as c:
        c.send(resp_command("SET", "big", big) + resp_command("GET", "big"))
        assert c.read_reply() == "OK"
        assert c.read_reply() == b"x" * len(big)


def test_a_malformed_frame_gets_the_protocol_error_and_a_close(floor):
    with RespConn(floor.port) as c:
        c.send(b"*2\r\n$3\r\nGET\r\nxx\r\n")
        reply = c.read_reply()
        assert "Protocol error" in str(reply), reply
        assert c.is_closed()
    with RespConn(floor.port) as c:                      # others are served
        assert c.command("PING") == "PONG"


def test_pload_drives_it_as_kvs_py_does(floor, tmp_path):
    req = tmp_path / "set.resp"
    req.write_bytes(resp_command("SET", "key:__rand_int__", "x" * 1024))
    cp = subprocess.run([binary("bench/pload"), "--resp", "-k", "10000", "-P", "4",
                         "-c", "8", "-d", "1", "-f", str(req), "127.0.0.1", str(floor.port)],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    r = json.loads(cp.stdout)
    assert r["requests"] > 1000, r
    assert r["error_replies"] == 0 and r["null_replies"] == 0 and r["socket_errors"] == 0, r


def test_sigterm_stops_it_and_removes_its_store(floor):
    assert floor.store.exists()
    assert floor.stop() == 0
    assert not floor.store.exists()


def test_usage_and_an_existing_store_are_refused(floor, tmp_path):
    cp = subprocess.run([binary("bench/resp-floor")], capture_output=True, text=True, timeout=10)
    assert cp.returncode == 2 and "usage" in cp.stderr
    cp = subprocess.run([binary("bench/resp-floor"), str(floor.store), "0"],
                        capture_output=True, text=True, timeout=10)
    assert cp.returncode == 1 and "resp-floor:" in cp.stderr, cp
    assert floor.store.exists()                          # not someone else's to remove


@pytest.mark.parametrize("mode", ["none", "emulated", "fsync"])
def test_durable_floor_pays_a_barrier_per_batch_of_sets(tmp_path, mode):
    floor = start_floor(tmp_path / "floor.store", mode)
    try:
        assert floor.durability.split(",")[0] == mode
        with RespConn(floor.port, timeout=10) as c:
            for i in range(20):                          # 20 batches of one SET
                assert c.command("SET", f"k{i}", "v" * 1500) == "OK"
            c.send(resp_command("SET", "big", b"w" * (100 << 10)))   # over many buffers
            assert c.read_reply() == "OK"
        fences, commits = stop_counting(floor)
    finally:
        floor.kill9()
    if mode == "none":
        assert (fences, commits) == (0, 0)
    elif mode == "emulated":
        assert fences >= 21 and commits == 0, (fences, commits)
    else:
        assert commits >= 21 and fences == 0, (fences, commits)


def test_durable_floor_flushes_nothing_for_reads(tmp_path):
    floor = start_floor(tmp_path / "floor.store", "emulated")
    try:
        with RespConn(floor.port) as c:
            assert c.command("SET", "k", "v" * 100) == "OK"
            for _ in range(30):
                assert c.command("GET", "k") == b"x" * 100
                assert c.command("PING") == "PONG"
        fences, commits = stop_counting(floor)
    finally:
        floor.kill9()
    assert (fences, commits) == (1, 0)


def test_durable_floor_acks_a_set_once_its_bytes_are_in_the_file(tmp_path):
    """With direct writes the store is mapped privately: the file changes
    only by a commit's writes, so a value found there after its +OK was
    flushed where it landed and committed before the ack."""
    floor = start_floor(tmp_path / "floor.store", "fsync")
    try:
        if "direct writes" not in floor.durability:
            pytest.skip(f"the file system takes no direct writes here ({floor.durability})")
        values = [os.urandom(16).hex().encode() * 40 for _ in range(3)]   # 1280 B each
        with RespConn(floor.port) as c:
            for i, v in enumerate(values):
                assert c.command("SET", f"k{i}", v) == "OK"
                data = floor.store.read_bytes()
                assert v in data, f"SET {i}: its value is not in the file after +OK"
    finally:
        floor.kill9()


def test_durable_floor_refuses_an_unknown_mode(tmp_path):
    cp = subprocess.run([binary("bench/resp-floor"), str(tmp_path / "f.store"), "0", "sometimes"],
                        capture_output=True, text=True, timeout=10)
    assert cp.returncode == 2 and "usage" in cp.stderr, cp
    assert not (tmp_path / "f.store").exists()
