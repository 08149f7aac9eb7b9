"""paste-store info|check|dump on real stores written by phttpd."""
import json
import os
import re

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
    for word in ("--store", "info", "check", "dump"):
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
    check must not report that as damage, so it refuses (exit 2) while a
    server holds the store; info and dump still work and say so. Once
    the server stopped, check runs."""
    srv = phttpd.start("uring", mode="wal")
    post_all(srv.port, [os.urandom(300) for _ in range(20)])
    cp = run_tool("--store", srv.store, "check")
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert "in use by a running server" in cp.stderr, cp.stderr
    info = run_tool("--store", srv.store, "info")
    assert info.returncode == 0 and "in use:" in info.stdout, info.stdout + info.stderr
    assert len(dump_lines(srv.store)) == 20
    srv.stop()
    cp = run_tool("--store", srv.store, "check")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "in use" not in run_tool("--store", srv.store, "info").stdout
