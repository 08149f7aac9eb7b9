"""paste-store info|check|dump|upgrade on real stores written by phttpd,
and on a version-1 store built here byte by byte."""
import base64
import json
import os
import re
import struct
import time

import pytest

from conftest import HttpConn, file_sha256, post_all, run_tool


def records_in(info_text):
    m = re.search(r'records"?\s*[:=]?\s*(\d+|none)', info_text)
    assert m, f"info does not mention a record count:\n{info_text}"
    return 0 if m.group(1) == "none" else int(m.group(1))


def dump_lines(store):
    cp = run_tool("--store", store, "dump")
    assert cp.returncode == 0, cp.stderr
    return [json.loads(line) for line in cp.stdout.splitlines() if line.strip()]


def record_len(rec):
    for key in ("len", "length", "bytes", "size"):
        if key in rec:
            return rec[key]
    raise AssertionError(f"dump line has no length field: {rec}")


@pytest.fixture
def fresh_store(phttpd):
    srv = phttpd.start("uring", mode="wal", extra_args=["--store-size", "16M", "--buf-size", "4096",
                                                     "--ring-bufs", "256"])
    srv.stop()
    return srv.store


@pytest.fixture
def store_with_records(phttpd):
    srv = phttpd.start("uring", mode="wal")
    records = post_all(srv.port, [os.urandom(n) for n in (0, 10, 2048, 3000, 7777)])
    srv.stop()
    return srv.store, records


def test_help():
    cp = run_tool("--help")
    assert cp.returncode == 0, cp
    for word in ("--store", "info", "check", "dump", "upgrade", "--tree"):
        assert word in cp.stdout + cp.stderr, f"--help does not mention {word}"


@pytest.mark.parametrize("cmd", ["info", "check", "dump"])
def test_missing_file(tmp_path, cmd):
    missing = str(tmp_path / "no-such.store")
    cp = run_tool("--store", missing, cmd)
    assert cp.returncode == 2, cp
    assert missing in cp.stderr, f"message does not name the file: {cp.stderr!r}"
    assert not os.path.exists(missing), "the tool created the missing store"


def test_bad_usage(fresh_store):
    for args in (["--store", fresh_store, "frobnicate"], ["--store", fresh_store], ["--bogus"]):
        cp = run_tool(*args)
        assert cp.returncode == 2, (args, cp)
        assert cp.stderr.strip(), f"{args}: exit 2 without a message"


def test_not_a_store(tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(os.urandom(1 << 20))
    cp = run_tool("--store", junk, "check")
    assert cp.returncode == 2, cp
    assert re.search(r"(?i)magic", cp.stderr + cp.stdout), cp


def test_fresh_store(fresh_store):
    before = file_sha256(fresh_store)
    info = run_tool("--store", fresh_store, "info")
    assert info.returncode == 0, info.stderr
    assert records_in(info.stdout) == 0
    assert "4096" in info.stdout, f"info does not show the buffer size:\n{info.stdout}"
    assert str(16 << 20) in info.stdout or re.search(r"16\s*M", info.stdout), info.stdout
    check = run_tool("--store", fresh_store, "check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert dump_lines(fresh_store) == []
    assert file_sha256(fresh_store) == before, "a read-only tool modified the store"


def test_store_with_records(store_with_records):
    store, records = store_with_records
    before = file_sha256(store)
    info = run_tool("--store", store, "info")
    assert info.returncode == 0, info.stderr
    assert records_in(info.stdout) == len(records)
    check = run_tool("--store", store, "check")
    assert check.returncode == 0, check.stdout + check.stderr
    lines = dump_lines(store)
    assert [rec["lsn"] for rec in lines] == sorted(records), "dump is not one line per record in LSN order"
    for rec in lines:
        assert record_len(rec) == len(records[rec["lsn"]]), rec
    assert file_sha256(store) == before, "a read-only tool modified the store"


def test_check_after_truncation(phttpd):
    srv = phttpd.start("epoll", mode="wal")
    records = post_all(srv.port, [os.urandom(100) for _ in range(6)])
    lsns = sorted(records)
    with HttpConn(srv.port) as c:
        assert c.request("DELETE", f"/log?upto={lsns[2]}").status == 200
    srv.stop()
    info = run_tool("--store", srv.store, "info")
    assert records_in(info.stdout) == 3, info.stdout
    assert [rec["lsn"] for rec in dump_lines(srv.store)] == lsns[3:]
    assert run_tool("--store", srv.store, "check").returncode == 0


def test_check_refuses_a_live_store(phttpd):
    """A running server may free and reuse a buffer between check's reads:
    check must not report that as damage, so it refuses (exit 4, in use) while a
    server holds the store; info and dump still work and say so. Once
    the server stopped, check runs."""
    srv = phttpd.start("uring", mode="wal")
    post_all(srv.port, [os.urandom(300) for _ in range(20)])
    cp = run_tool("--store", srv.store, "check")
    assert cp.returncode == 4, cp.stdout + cp.stderr
    assert "in use by a running server" in cp.stderr, cp.stderr
    info = run_tool("--store", srv.store, "info")
    assert info.returncode == 0 and "in use:" in info.stdout, info.stdout + info.stderr
    assert len(dump_lines(srv.store)) == 20
    srv.stop()
    cp = run_tool("--store", srv.store, "check")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "in use" not in run_tool("--store", srv.store, "info").stdout


@pytest.fixture
def fresh_kv_store(pkvs):
    """A store pkvs created (it has a node area; phttpd's have none)."""
    srv = pkvs.start(["--store-size", "16M", "--buf-size", "4096", "--ring-bufs", "256"],
                     store_size="16M")
    srv.stop(keep_store=True)
    return srv.store


def test_fresh_store_has_only_the_layout_entry(fresh_kv_store):
    """A store pkvs created holds one tree key, pkvs's own: the version
    of its key layout."""
    info = run_tool("--store", fresh_kv_store, "info")
    assert info.returncode == 0, info.stderr
    assert re.search(r"node area:\s+\d+ bytes", info.stdout), info.stdout
    assert re.search(r"tree:\s+1 keys", info.stdout), info.stdout
    check = run_tool("--store", fresh_kv_store, "check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "reference counts consistent" in check.stdout, check.stdout
    cp = run_tool("--store", fresh_kv_store, "dump", "--tree")
    assert cp.returncode == 0, cp
    keys = [base64.b64decode(json.loads(x)["key_b64"]) for x in cp.stdout.splitlines()]
    assert keys == [b"\xfdlayout"], keys
    cp = run_tool("--store", fresh_kv_store, "info", "--tree")
    assert cp.returncode == 2, cp


def test_phttpd_store_has_no_tree(store_with_records):
    """phttpd creates its stores without a node area (every buffer serves
    the log); the tools say so and still check the log."""
    store, records = store_with_records
    info = run_tool("--store", store, "info").stdout
    assert re.search(r"node area:\s+none", info), info
    check = run_tool("--store", store, "check")
    assert check.returncode == 0, check.stdout + check.stderr


# --------------------------------------------------------------------------
# Version 1 -> 2
# --------------------------------------------------------------------------

def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def write_v1_store(path, size=16 << 20, buf_size=2048, lanes=2, log_size=1 << 20):
    """A store as the version-1 build formatted it: superblock (96 bytes,
    CRC32C of the first 92 at 92), zeroed checkpoints and log, buffers."""
    ckpt_offset = 4096
    log_offset = ckpt_offset + 4096
    lane_size = log_size // lanes
    buf_offset = log_offset + lanes * lane_size
    nbufs = (size - buf_offset) // buf_size
    sb = b"PASTESTO" + struct.pack("<IIIII", 1, 96, buf_size, nbufs, lanes)
    sb += struct.pack("<QQQQQ", size, ckpt_offset, log_offset, lane_size, buf_offset)
    sb += os.urandom(16) + struct.pack("<Q", time.time_ns())
    assert len(sb) == 92
    sb += struct.pack("<I", crc32c(sb))
    with open(path, "wb") as f:
        f.write(sb.ljust(4096, b"\0"))
        f.truncate(size)
    return nbufs


def test_version1_refused_then_upgraded(phttpd, tmp_path):
    store = str(tmp_path / "v1.store")
    nbufs = write_v1_store(store)
    before = file_sha256(store)
    # Refused, saying how to upgrade, by the tool and by the server.
    for cmd in ("info", "check", "dump"):
        cp = run_tool("--store", store, cmd)
        assert cp.returncode == 2, cp
        assert "version 1" in cp.stderr and f"paste-store --store {store} upgrade" in cp.stderr, cp.stderr
    rc, err = phttpd.start_failing(mode="wal", store=store)
    assert rc != 0 and "upgrade" in err and store in err, err
    assert file_sha256(store) == before, "a refused open modified the store"
    # The upgrade, then the store works as before (same buffers).
    cp = run_tool("--store", store, "upgrade")
    assert cp.returncode == 0 and "upgraded" in cp.stdout, cp
    info = run_tool("--store", store, "info")
    assert info.returncode == 0, info.stderr
    assert "version 3" in info.stdout and "node area:   none" in info.stdout, info.stdout
    assert f"{nbufs} x 2048 bytes" in info.stdout, info.stdout
    srv = phttpd.start("uring", mode="wal", store=store)
    post_all(srv.port, [os.urandom(n) for n in (5, 500, 5000)])
    srv.stop()
    assert records_in(run_tool("--store", store, "info").stdout) == 3
    assert run_tool("--store", store, "check").returncode == 0
    # Again: nothing to do, and said so.
    cp = run_tool("--store", store, "upgrade")
    assert cp.returncode == 0 and "already" in cp.stderr, cp


def test_upgrade_refuses_what_is_not_version1(fresh_store, tmp_path):
    before = file_sha256(fresh_store)
    cp = run_tool("--store", fresh_store, "upgrade")
    assert cp.returncode == 0 and "already layout version 3" in cp.stderr, cp
    assert file_sha256(fresh_store) == before
    junk = tmp_path / "junk"
    junk.write_bytes(os.urandom(1 << 16))
    cp = run_tool("--store", junk, "upgrade")
    assert cp.returncode == 2 and "magic" in cp.stderr, cp
    damaged = str(tmp_path / "damaged-v1.store")
    write_v1_store(damaged)
    with open(damaged, "r+b") as f:
        f.seek(70)
        f.write(b"\xff")
    before = file_sha256(damaged)
    cp = run_tool("--store", damaged, "upgrade")
    assert cp.returncode == 3 and "checksum" in cp.stderr, cp     # 3: damaged
    assert file_sha256(damaged) == before
