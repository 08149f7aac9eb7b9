"""WAL mode end to end on both engines: POST /log records, read them back
byte for byte, truncate, restart, fill the store, and inspect it with
paste-store."""
import json
import os
import subprocess

import pytest

from conftest import HttpConn, build_request, check_records, post_all, post_log, run_tool
from test_store_tool import records_in

SIZES = [0, 1, 1024, 2048, 5000, 100000]


def wal(phttpd, engine, copy=False, extra=(), store=None):
    args = list(extra) + (["--copy"] if copy else [])
    return phttpd.start(engine, mode="wal", extra_args=args, store=store)


def get_log(port, lsn):
    with HttpConn(port) as c:
        return c.request("GET", f"/log/{lsn}")


@pytest.mark.parametrize("copy", [False, True], ids=["zerocopy", "copy"])
@pytest.mark.basic
def test_post_and_get_exact_bytes(phttpd, engine, copy):
    srv = wal(phttpd, engine, copy)
    bodies = [os.urandom(n) for n in SIZES] + [b"\r\n\r\nGET / HTTP/1.1\r\n\r\n"]
    records = post_all(srv.port, bodies)
    with HttpConn(srv.port, timeout=10) as c:
        for lsn, body in records.items():
            r = c.request("GET", f"/log/{lsn}")
            assert r.status == 200, r
            assert r.header("Content-Type") == "application/octet-stream", r
            assert r.body == body, f"LSN {lsn}: {len(r.body)} bytes back for {len(body)} posted"


@pytest.mark.parametrize("copy", [False, True], ids=["zerocopy", "copy"])
def test_largest_record(phttpd, engine, copy):
    # README: in WAL mode a body is also limited to 64 buffers (one record
    # holds at most PASTE_WAL_MAX_EXTENTS extents), 64 x 2048 bytes here.
    srv = wal(phttpd, engine, copy)
    cap = 64 * 2048
    records = post_all(srv.port, [os.urandom(cap), os.urandom(cap - 1)])
    assert check_records(srv.port, records) == []
    with HttpConn(srv.port) as c:
        c.send(build_request("POST", "/log", headers=[("Content-Length", str(cap + 1))]))
        r = c.read_response()
        assert r.status == 413 and (r.header("Connection") or "").lower() == "close", r
        assert c.is_closed()


def test_unknown_paths_and_methods(phttpd, engine):
    srv = wal(phttpd, engine)
    (lsn,) = post_all(srv.port, [b"one"])
    with HttpConn(srv.port) as c:
        assert c.request("GET", f"/log/{lsn + 1000}").status == 404
        assert c.request("GET", "/log/999999999999").status == 404
        assert c.request("GET", "/elsewhere").status == 404
        assert c.request("POST", "/elsewhere", b"x").status == 404
        assert c.request("PUT", "/log", b"x").status == 405
        assert c.request("GET", f"/log/{lsn}").body == b"one"


def test_delete_truncates_up_to_lsn(phttpd, engine):
    srv = wal(phttpd, engine)
    records = post_all(srv.port, [os.urandom(300 * i) for i in range(10)])
    lsns = sorted(records)
    upto = lsns[5]
    with HttpConn(srv.port) as c:
        r = c.request("DELETE", f"/log?upto={upto}")
        assert r.status == 200, r
        assert json.loads(r.body) == {"truncated": 6}, r
        for lsn in lsns:
            r = c.request("GET", f"/log/{lsn}")
            if lsn <= upto:
                assert r.status == 404, (lsn, r)
            else:
                assert r.status == 200 and r.body == records[lsn], (lsn, r)
        r = c.request("DELETE", f"/log?upto={upto}")
        assert r.status == 200 and json.loads(r.body) == {"truncated": 0}, r
    srv.restart()
    assert all(get_log(srv.port, lsn).status == 404 for lsn in lsns[:6])
    assert check_records(srv.port, {lsn: records[lsn] for lsn in lsns[6:]}) == []


@pytest.mark.parametrize("copy", [False, True], ids=["zerocopy", "copy"])
def test_records_survive_restart(phttpd, engine, copy):
    srv = wal(phttpd, engine, copy)
    records = post_all(srv.port, [os.urandom(n) for n in SIZES * 3])
    srv.restart()
    assert check_records(srv.port, records) == []
    more = post_all(srv.port, [os.urandom(n) for n in SIZES])
    assert min(more) > max(records), "LSNs were reused after a restart"
    srv.restart()
    records.update(more)
    assert check_records(srv.port, records) == []


@pytest.mark.parametrize("body_size", [8000, 1], ids=["big", "small"])
def test_full_store_507_then_delete_frees(phttpd, engine, body_size):
    srv = wal(phttpd, engine, extra=["--store-size", "4M", "--ring-bufs", "256"])
    records, full = {}, None
    with HttpConn(srv.port, timeout=10) as c:
        for i in range(30000):
            body = os.urandom(body_size)
            r = c.request("POST", "/log", body)
            if r.status == 507:
                full = i
                break
            assert r.status == 201, r
            records[int(r.header("X-Paste-LSN"))] = body
        assert full is not None, f"no 507 after {len(records)} records in a 4 MiB store"
        assert records, "507 before the first record"
        assert c.request("POST", "/log", body).status == 507
    assert check_records(srv.port, records) == []
    srv.restart()
    assert check_records(srv.port, records) == []
    lsns = sorted(records)
    upto = lsns[len(lsns) // 2]
    with HttpConn(srv.port) as c:
        r = c.request("DELETE", f"/log?upto={upto}")
        assert r.status == 200 and json.loads(r.body)["truncated"] == len(lsns) // 2 + 1, r
        new = post_log(c, os.urandom(body_size))
    assert new > lsns[-1]
    assert check_records(srv.port, {l: b for l, b in records.items() if l > upto}) == []


def test_pipelined_posts(phttpd, engine):
    srv = wal(phttpd, engine)
    bodies = [os.urandom(37 * i) for i in range(50)]
    with HttpConn(srv.port, timeout=10) as c:
        c.send(b"".join(build_request("POST", "/log", b) for b in bodies))
        resps = c.read_responses(["POST"] * len(bodies))
    lsns = [int(r.header("X-Paste-LSN")) for r in resps]
    assert all(r.status == 201 for r in resps), resps
    assert lsns == sorted(set(lsns)), lsns
    assert check_records(srv.port, dict(zip(lsns, bodies))) == []


def test_store_tool_sees_records(phttpd, engine):
    srv = wal(phttpd, engine)
    records = post_all(srv.port, [os.urandom(n) for n in SIZES])
    srv.stop()
    check = run_tool("--store", srv.store, "check")
    assert check.returncode == 0, check.stdout + check.stderr
    info = run_tool("--store", srv.store, "info")
    assert info.returncode == 0, info.stderr
    assert records_in(info.stdout) == len(records), info.stdout
    dump = run_tool("--store", srv.store, "dump")
    assert dump.returncode == 0, dump.stderr
    lines = [json.loads(line) for line in dump.stdout.splitlines() if line.strip()]
    assert sorted(d["lsn"] for d in lines) == sorted(records), dump.stdout[:2000]


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def read_exactly(conn, n):
    while len(conn.buf) < n:
        conn._fill()
    data = bytes(conn.buf[:n])
    del conn.buf[:n]
    return data


@pytest.mark.parametrize("mode", ["wal", "rpc"])
def test_expect_100_continue(phttpd, engine, mode):
    """RFC 9110 10.1.1: a client that sends "Expect: 100-continue" may wait
    for the interim response before sending the body; it gets one, in
    order behind earlier replies, and only when it has not sent the body
    along with the head."""
    srv = phttpd.start(engine, mode=mode)
    body = os.urandom(5000)
    path = "/log" if mode == "wal" else "/rpc"
    ok = 201 if mode == "wal" else 200
    head = build_request("POST", path, headers=[("Expect", "100-continue"),
                                                ("Content-Length", str(len(body)))])
    with HttpConn(srv.port) as c:
        c.send(head)
        assert read_exactly(c, len(CONTINUE)) == CONTINUE
        c.send(body)
        first = c.read_response("POST")
        assert first.status == ok, first
        # The body right behind the head: no interim response.
        c.send(head + body)
        second = c.read_response("POST")
        assert second.status == ok, second
        # A pipelined POST, then a head that waits: the 100 comes after
        # the first reply (which waited for its barrier), never before it.
        c.send(build_request("POST", path, b"earlier") + head)
        earlier = c.read_response("POST")
        assert earlier.status == ok, earlier
        assert read_exactly(c, len(CONTINUE)) == CONTINUE
        c.send(body)
        assert c.read_response("POST").status == ok
    if mode == "wal":
        lsns = [int(r.header("X-Paste-LSN")) for r in (first, second)]
        for lsn in lsns:
            assert get_log(srv.port, lsn).body == body
        # HTTP/1.0 clients get no 100 (RFC 9110 10.1.1): the reply is final.
        with HttpConn(srv.port) as c:
            c.send(build_request("POST", "/log", headers=[("Expect", "100-continue"),
                                                          ("Content-Length", "3")],
                                 version="HTTP/1.0") + b"abc")
            assert c.read_response("POST").status == 201


def test_curl_waits_for_100_continue(phttpd, engine, tmp_path):
    srv = phttpd.start(engine, mode="wal")
    data = tmp_path / "body"
    data.write_bytes(os.urandom(20000))
    cp = subprocess.run(["curl", "-sv", "--max-time", "10", "-H", "Expect: 100-continue",
                         "--data-binary", f"@{data}", f"http://127.0.0.1:{srv.port}/log"],
                        capture_output=True, text=True, timeout=20)
    assert cp.returncode == 0, cp.stderr
    assert "< HTTP/1.1 100 Continue" in cp.stderr, cp.stderr
    assert "< HTTP/1.1 201 Created" in cp.stderr, cp.stderr
    assert get_log(srv.port, int(cp.stdout)).body == data.read_bytes()
