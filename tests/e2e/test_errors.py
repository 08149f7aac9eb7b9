"""Protocol errors on both engines: each bad request gets the right status,
"Connection: close", and then the server closes that connection; the next
connection is served normally."""
import pytest

from conftest import HttpConn, build_request

MAX_BODY = 100000

BAD_REQUESTS = {
    # 400: malformed
    "garbage request line": (400, b"GARBAGE\r\n\r\n"),
    "request line without target": (400, b"GET HTTP/1.1\r\nHost: a\r\n\r\n"),
    "header line without colon": (400, b"GET / HTTP/1.1\r\nHost a\r\n\r\n"),
    "obs-fold": (400, b"GET / HTTP/1.1\r\nHost: a\r\nX-Long: one\r\n  two\r\n\r\n"),
    "content-length not a number": (400, b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n"),
    "negative content-length": (400, b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"),
    "differing duplicate content-length":
        (400, b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
    # 413: over --max-body
    "content-length over max-body":
        (413, build_request("POST", "/", headers=[("Content-Length", str(MAX_BODY + 1))])),
    "huge content-length": (413, build_request("POST", "/", headers=[("Content-Length", "99999999999")])),
    # ... and at once, even when the client waits for "100 Continue"
    "content-length over max-body, expecting 100-continue":
        (413, build_request("POST", "/", headers=[("Expect", "100-continue"),
                                                  ("Content-Length", str(MAX_BODY + 1))])),
    # 417: an expectation other than 100-continue
    "unknown expectation": (417, build_request("POST", "/", headers=[("Expect", "teapot"),
                                                                     ("Content-Length", "5")])
                            + b"hello"),
    # 431: head over 8 KiB
    "one huge header": (431, build_request("GET", "/", headers=[("X-Big", "a" * 9000)])),
    "many headers": (431, build_request("GET", "/", headers=[(f"X-H{i}", "v" * 40) for i in range(250)])),
    # 501: transfer codings other than identity
    "chunked": (501, build_request("POST", "/", headers=[("Transfer-Encoding", "chunked")])
                + b"5\r\nhello\r\n0\r\n\r\n"),
    "gzip transfer-encoding": (501, build_request("POST", "/", headers=[("Transfer-Encoding", "gzip")])),
    # 505: not HTTP/1.0 or 1.1
    "HTTP/2.0": (505, b"GET / HTTP/2.0\r\nHost: a\r\n\r\n"),
    "HTTP/0.9 version": (505, b"GET / HTTP/0.9\r\nHost: a\r\n\r\n"),
}


def assert_error_then_closed(conn, status, before=0):
    for _ in range(before):
        r = conn.read_response()
        assert r.status == 200, r
    r = conn.read_response()
    assert r.status == status, r
    assert r.version == "HTTP/1.1" and r.reason, r
    assert (r.header("Connection") or "").lower() == "close", r
    assert conn.is_closed(), f"connection still open after {status}"
    return r


def assert_still_serving(port):
    with HttpConn(port) as c:
        r = c.request("GET", "/fine")
        assert r.status == 200 and r.body == b"x" * 64, r


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_bad_request(phttpd, engine, case):
    status, data = BAD_REQUESTS[case]
    srv = phttpd.start(engine, extra_args=["--max-body", str(MAX_BODY)])
    bystander = HttpConn(srv.port)
    try:
        assert bystander.request("GET", "/").status == 200
        with HttpConn(srv.port) as c:
            c.send(data)
            assert_error_then_closed(c, status)
        assert bystander.request("GET", "/").status == 200
    finally:
        bystander.close()
    assert_still_serving(srv.port)


def test_default_max_body_is_1mib(phttpd, engine):
    srv = phttpd.start(engine)
    with HttpConn(srv.port) as c:
        c.send(build_request("POST", "/", headers=[("Content-Length", str(1048577))]))
        assert_error_then_closed(c, 413)
    with HttpConn(srv.port) as c:
        r = c.request("POST", "/", b"m" * 1048576)
        assert r.status == 200 and r.body == b"x" * 64, r


def test_error_after_good_pipelined_requests(phttpd, engine):
    srv = phttpd.start(engine)
    with HttpConn(srv.port) as c:
        c.send(build_request("GET", "/1") + build_request("GET", "/2") + b"BROKEN\r\n\r\n"
               + build_request("GET", "/never"))
        assert_error_then_closed(c, 400, before=2)
    assert_still_serving(srv.port)


def test_head_just_under_limit_is_served(phttpd, engine):
    srv = phttpd.start(engine)
    req = build_request("GET", "/", headers=[("X-Pad", "")])
    pad = 8000 - len(req)
    with HttpConn(srv.port) as c:
        r = c.request("GET", "/", headers=[("X-Pad", "p" * pad)])
        assert r.status == 200, r


@pytest.mark.parametrize("case", ["garbage request line", "content-length over max-body", "chunked"])
def test_errors_in_wal_mode(phttpd, engine, case):
    status, data = BAD_REQUESTS[case]
    srv = phttpd.start(engine, mode="wal", extra_args=["--max-body", str(MAX_BODY)])
    with HttpConn(srv.port) as c:
        c.send(data)
        assert_error_then_closed(c, status)
    with HttpConn(srv.port) as c:
        assert c.request("POST", "/log", b"ok").status == 201
