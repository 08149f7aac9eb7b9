"""RPC mode end to end, on both engines: real clients (curl, http.client,
raw sockets, wrk) against a real phttpd."""
import http.client
import re
import selectors
import shutil
import signal
import subprocess
import time

import pytest

from conftest import (HttpConn, binary, build_request, connect, free_port, get_stats, http_once,
                      raise_nofile_limit, reset, wait_until)

STATS_KEYS = {"engine", "mode", "durability", "requests", "batches", "mean_batch",
              "syscalls", "syscalls_per_request", "bufs_free", "bufs_held", "enobufs",
              "conns", "fences", "commits", "accepts"}


def ok_body(resp, n=64):
    return resp.status == 200 and resp.body == b"x" * n


@pytest.mark.parametrize("body_len", [1, 64, 1500, 10000])
@pytest.mark.basic
def test_curl_get_body_len(phttpd, engine, body_len, tmp_path):
    srv = phttpd.start(engine, extra_args=["--body-len", str(body_len)])
    out = tmp_path / "body"
    cp = subprocess.run(["curl", "-sS", "--max-time", "5", "-D", "-", "-o", str(out),
                         f"http://127.0.0.1:{srv.port}/anything"],
                        capture_output=True, text=True, timeout=10)
    assert cp.returncode == 0, cp.stderr
    status_line = cp.stdout.splitlines()[0]
    assert re.match(r"HTTP/1\.1 200\b", status_line), cp.stdout
    assert re.search(rf"(?im)^content-length:\s*{body_len}\s*$", cp.stdout), cp.stdout
    assert out.read_bytes() == b"x" * body_len


def test_head_has_length_but_no_body(phttpd, engine):
    srv = phttpd.start(engine, extra_args=["--body-len", "100"])
    with HttpConn(srv.port) as c:
        r = c.request("HEAD", "/")
        assert r.status == 200 and r.header("Content-Length") == "100", r
        # If the server had sent a body after the HEAD reply, it would be
        # parsed here as the next status line and fail.
        assert ok_body(c.request("GET", "/"), 100)


def test_keepalive_200_requests(phttpd, engine):
    srv = phttpd.start(engine)
    before = get_stats(srv.port)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.connect()
    first_sock = conn.sock
    for i in range(200):
        conn.request("GET", f"/req/{i}")
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == 200 and body == b"x" * 64, (i, resp.status, body[:80])
        assert conn.sock is first_sock, f"connection was reopened at request {i}"
    conn.close()
    after = get_stats(srv.port)
    # One keep-alive connection plus the second /stats connection.
    assert after["accepts"] - before["accepts"] == 2, (before, after)
    assert 200 <= after["requests"] - before["requests"] <= 201, (before, after)


def test_http10_without_keepalive_is_closed(phttpd, engine):
    srv = phttpd.start(engine)
    with HttpConn(srv.port) as c:
        r = c.request("GET", "/", version="HTTP/1.0")
        assert ok_body(r), r
        assert c.is_closed(), "server kept an HTTP/1.0 connection without keep-alive open"


def test_http10_keepalive_stays_open(phttpd, engine):
    srv = phttpd.start(engine)
    with HttpConn(srv.port) as c:
        for _ in range(3):
            r = c.request("GET", "/", headers=[("Connection", "keep-alive")], version="HTTP/1.0")
            assert ok_body(r), r
        assert not c.is_closed(timeout=0.3)


def test_connection_close_on_http11(phttpd, engine):
    srv = phttpd.start(engine)
    with HttpConn(srv.port) as c:
        r = c.request("GET", "/", headers=[("Connection", "close")])
        assert ok_body(r), r
        assert c.is_closed(), "server ignored Connection: close"


def test_pipelining_100_in_one_write(phttpd, engine):
    srv = phttpd.start(engine)
    # GET, HEAD and POST interleaved: a response out of order or a HEAD
    # reply with a body desynchronises the stream and fails the parse.
    methods, data = [], b""
    for i in range(100):
        kind = i % 3
        if kind == 0:
            methods.append("GET")
            data += build_request("GET", f"/p/{i}")
        elif kind == 1:
            methods.append("HEAD")
            data += build_request("HEAD", f"/p/{i}")
        else:
            methods.append("POST")
            data += build_request("POST", f"/p/{i}", b"b" * (i * 7))
    with HttpConn(srv.port) as c:
        c.send(data)
        resps = c.read_responses(methods)
        for i, (m, r) in enumerate(zip(methods, resps)):
            assert r.status == 200, (i, r)
            assert r.body == (b"" if m == "HEAD" else b"x" * 64), (i, m, r)
        assert not c.is_closed(timeout=0.3)
        assert ok_body(c.request("GET", "/after"))


def test_request_one_byte_at_a_time(phttpd, engine):
    srv = phttpd.start(engine)
    with HttpConn(srv.port, nodelay=True) as c:
        for req in (build_request("GET", "/slow"), build_request("POST", "/slow", b"0123456789")):
            for i in range(len(req)):
                c.send(req[i:i + 1])
                time.sleep(0.002)
            assert ok_body(c.read_response()), req


def test_post_body_split_across_writes(phttpd, engine):
    srv = phttpd.start(engine)
    body = bytes(range(256)) * 12
    req = build_request("POST", "/upload", body)
    cuts = [9, 30, len(req) - len(body), len(req) - len(body) + 1, len(req) - 1000, len(req) - 1]
    with HttpConn(srv.port) as c:
        last = 0
        for cut in cuts + [len(req)]:
            c.send(req[last:cut])
            last = cut
            time.sleep(0.02)
        assert ok_body(c.read_response())
        assert ok_body(c.request("GET", "/next"))


def _read_all_responses(socks, timeout):
    """Read one HTTP response from every socket with a selector; returns {sock: bytes}."""
    sel = selectors.DefaultSelector()
    got = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        got[s] = b""
    done = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(socks) and time.monotonic() < deadline:
        for key, _ in sel.select(0.5):
            s = key.fileobj
            try:
                chunk = s.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except ConnectionError:
                chunk = b""
            got[s] += chunk
            head_end = got[s].find(b"\r\n\r\n")
            if head_end >= 0:
                m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", got[s][:head_end + 2])
                if m and len(got[s]) >= head_end + 4 + int(m.group(1)):
                    done[s] = got[s]
                    sel.unregister(s)
                    continue
            if not chunk:
                done[s] = got[s]
                sel.unregister(s)
    sel.close()
    return done


def test_1000_concurrent_connections(phttpd, engine):
    limit = raise_nofile_limit()
    if limit < 1100:
        pytest.skip(f"RLIMIT_NOFILE hard limit {limit} is below the 1100 this test needs")
    srv = phttpd.start(engine)
    socks = []
    try:
        for _ in range(1000):
            s = connect(srv.port, timeout=5)
            socks.append(s)
        for s in socks:
            s.sendall(build_request("GET", "/many"))
        done = _read_all_responses(socks, timeout=30)
        good = sum(1 for v in done.values() if v.startswith(b"HTTP/1.1 200") and v.endswith(b"x" * 64))
        assert good == 1000, f"only {good} of 1000 connections got 200 ({len(done)} answered)"
        # All 1000 are still open on the server's side.
        assert get_stats(srv.port)["conns"] >= 1001
    finally:
        for s in socks:
            s.close()
    assert wait_until(lambda: get_stats(srv.port)["conns"] == 1, 10), get_stats(srv.port)


def test_malformed_request_does_not_disturb_others(phttpd, engine):
    srv = phttpd.start(engine)
    good = [HttpConn(srv.port) for _ in range(10)]
    try:
        for c in good:
            assert ok_body(c.request("GET", "/"))
        with HttpConn(srv.port) as bad:
            bad.send(b"THIS IS NOT HTTP\r\n\r\n")
            r = bad.read_response()
            assert r.status == 400, r
            assert bad.is_closed()
        for c in good:
            assert ok_body(c.request("GET", "/again"))
    finally:
        for c in good:
            c.close()


def test_clients_that_vanish_mid_request(phttpd, engine):
    srv = phttpd.start(engine)
    post = build_request("POST", "/vanish", b"y" * 5000)
    head_len = post.index(b"\r\n\r\n") + 4
    partials = [
        ("half head", post[:head_len // 2], "close"),
        ("half body", post[:head_len + 2500], "close"),
        ("half head, reset", post[:head_len // 2], "rst"),
        ("head only, reset", post[:head_len], "rst"),
        ("half body, reset", post[:head_len + 2500], "rst"),
    ]
    socks = []
    for name, data, _ in partials:
        s = connect(srv.port, timeout=5)
        s.sendall(data)
        socks.append(s)
    assert wait_until(lambda: get_stats(srv.port)["conns"] == len(partials) + 1, 5), \
        get_stats(srv.port)
    for s, (_, _, how) in zip(socks, partials):
        reset(s) if how == "rst" else s.close()
    assert wait_until(lambda: get_stats(srv.port)["conns"] == 1, 5), get_stats(srv.port)
    with HttpConn(srv.port) as c:
        assert ok_body(c.request("POST", "/after", b"z" * 5000))
        assert ok_body(c.request("GET", "/after"))


@pytest.mark.parametrize("extra", [[], ["--busy-poll"]], ids=["sleeping", "busy-poll"])
@pytest.mark.slow
def test_wrk_short_run(phttpd, engine, extra):
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed")
    srv = phttpd.start(engine, extra_args=extra)
    cp = subprocess.run(["wrk", "-t1", "-c50", "-d2s", f"http://127.0.0.1:{srv.port}/"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    m = re.search(r"(\d+) requests in", cp.stdout)
    assert m and int(m.group(1)) > 0, cp.stdout
    assert "Non-2xx or 3xx responses" not in cp.stdout, cp.stdout
    assert "Socket errors" not in cp.stdout, cp.stdout
    assert get_stats(srv.port)["requests"] >= int(m.group(1))


def test_stats_json(phttpd, engine):
    srv = phttpd.start(engine)
    s0 = get_stats(srv.port)
    assert STATS_KEYS <= set(s0), f"missing keys: {STATS_KEYS - set(s0)}"
    assert s0["engine"] == engine and s0["mode"] == "rpc", s0
    assert s0["durability"] in ("none", "emulated", "pmem", "fsync"), s0
    for key in STATS_KEYS - {"engine", "mode", "durability"}:
        assert isinstance(s0[key], (int, float)) and s0[key] >= 0, (key, s0[key])
    with HttpConn(srv.port) as c:
        for _ in range(5):
            assert ok_body(c.request("GET", "/"))
    s1 = get_stats(srv.port)
    assert 5 <= s1["requests"] - s0["requests"] <= 6, (s0, s1)
    assert s1["accepts"] - s0["accepts"] == 2, (s0, s1)
    assert s1["syscalls"] > s0["syscalls"], (s0, s1)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_exits_zero_with_open_connections(phttpd, engine, sig):
    # --defer-accept 0: the silent connection must be one the server
    # accepted (with TCP_DEFER_ACCEPT the kernel keeps it until it speaks).
    srv = phttpd.start(engine, extra_args=["--defer-accept", "0"])
    idle = HttpConn(srv.port)
    busy = HttpConn(srv.port)
    try:
        assert ok_body(busy.request("GET", "/"))
        busy.send(b"GET / HT")          # a request cut short
        srv.stop(sig)                   # asserts exit 0 within a few seconds
        assert idle.is_closed(1) and busy.is_closed(1)
    finally:
        idle.close()
        busy.close()


def test_ipv6_loopback(phttpd, engine):
    try:
        free_port("::1")
    except OSError as e:
        pytest.skip(f"no IPv6 loopback: {e}")
    srv = phttpd.start(engine, host="::1")
    assert ok_body(http_once(srv.port, "GET", "/", host="::1"))


def test_help_and_bad_flags():
    exe = binary("phttpd")
    cp = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10)
    assert cp.returncode == 0, cp
    for flag in ("--port", "--engine", "--mode", "--store", "--durability", "--max-body"):
        assert flag in cp.stdout + cp.stderr, f"--help does not mention {flag}"
    for bad in (["--no-such-flag"], ["--engine", "bogus"], ["--mode", "bogus"],
                ["--port", "notaport"], ["--durability", "bogus"], ["--threads", "0x"]):
        cp = subprocess.run([exe] + bad, capture_output=True, text=True, timeout=10)
        assert cp.returncode == 2, (bad, cp.returncode, cp.stderr)
        assert cp.stderr.strip(), f"{bad}: exit 2 without a message"
