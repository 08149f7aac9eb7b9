"""Timeouts and the held-buffer limit, both engines.

--header-timeout: a request head not complete in time gets 408 and the
connection closes (the clock starts at the head's first byte; more bytes
do not reset it). --body-timeout: too long between two reads of a body:
408, close, and the buffers the partial body held go back to the store.
--idle-timeout: a keep-alive connection with no request in progress is
closed without a word. --max-held: a body trickling in tiny reads pins at
most that much store space. 0 disables each timeout.

The server checks timeouts twice a second, so a 1 s timeout fires after
1.0-1.5 s; the bounds below allow for a loaded machine.
"""
import os
import select
import time

import pytest

from conftest import HttpConn, build_request, get_stats, wait_until

LATE = 2.6          # a 1 s timeout must have fired by then
BUF = 2048          # the default buffer size
# bufs_held also counts the free buffers a uring port takes from the store
# in one batch to refill its ring (ALLOC_BATCH in lib/port_uring.c), so it
# returns to its start value only within that much; body_bufs (buffers
# pinned by unfinished bodies) is exact.
PORT_CACHE = 64


def elapsed_until_reply(conn, timeout=5.0):
    """Seconds until the server sends something (or closes)."""
    t0 = time.monotonic()
    ready, _, _ = select.select([conn.sock], [], [], timeout)
    assert ready, f"no reply within {timeout}s"
    return time.monotonic() - t0


def assert_408_and_closed(conn):
    r = conn.read_response()
    assert r.status == 408 and r.reason == "Request Timeout", r
    assert (r.header("Connection") or "").lower() == "close", r
    assert conn.is_closed(), "the connection stayed open after 408"


def test_header_timeout(phttpd, engine):
    srv = phttpd.start(engine, extra_args=["--header-timeout", "1"])
    # A head that stops halfway.
    with HttpConn(srv.port) as c:
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n")
        t = elapsed_until_reply(c)
        assert 0.8 <= t <= LATE, f"408 after {t:.2f}s for a 1 s header timeout"
        assert_408_and_closed(c)
    # A head trickled a line every 0.2 s: the clock is not reset by data.
    with HttpConn(srv.port) as c:
        t0 = time.monotonic()
        c.send(b"GET / HTTP/1.1\r\n")
        for i in range(20):
            if select.select([c.sock], [], [], 0.2)[0]:
                break
            c.send(f"X-Slow-{i}: y\r\n".encode())
        t = time.monotonic() - t0
        assert 0.8 <= t <= LATE, f"408 after {t:.2f}s of a trickled head"
        assert_408_and_closed(c)
    # A head that completes in time, in two parts, is served.
    with HttpConn(srv.port) as c:
        c.send(b"GET / HTTP/1.1\r\n")
        time.sleep(0.5)
        c.send(b"Host: x\r\n\r\n")
        assert c.read_response().status == 200
    assert get_stats(srv.port)["timeouts"] == 2


def test_idle_timeout(phttpd, engine):
    srv = phttpd.start(engine, extra_args=["--idle-timeout", "1"])
    with HttpConn(srv.port) as c:
        assert c.request("GET", "/").status == 200
        t = elapsed_until_reply(c)
        assert 0.8 <= t <= LATE, f"closed after {t:.2f}s idle for a 1 s idle timeout"
        assert c.is_closed(), f"sent something instead of closing: {bytes(c.buf[:100])!r}"
    # A connection that never sends a byte is idle too.
    with HttpConn(srv.port) as c:
        t = elapsed_until_reply(c)
        assert t <= LATE and c.is_closed()
    # Requests 0.4 s apart keep a connection open past the timeout.
    with HttpConn(srv.port) as c:
        for _ in range(5):
            time.sleep(0.4)
            assert c.request("GET", "/").status == 200
    st = get_stats(srv.port)
    assert st["idle_closes"] >= 2 and st["timeouts"] == 0, st


def test_body_timeout_returns_held_buffers(phttpd, engine):
    srv = phttpd.start(engine, mode="wal", extra_args=["--body-timeout", "1"])
    base = get_stats(srv.port)
    assert base["body_bufs"] == 0, base
    with HttpConn(srv.port) as c:
        c.send(build_request("POST", "/log", headers=[("Content-Length", "20000")]))
        for _ in range(4):
            c.send(os.urandom(1000))
            time.sleep(0.03)
        assert wait_until(lambda: get_stats(srv.port)["body_bufs"] > 0, 2), \
            "a partial body held no store buffers: the test proves nothing"
        t = elapsed_until_reply(c)
        assert t <= LATE, f"408 after {t:.2f}s for a 1 s body timeout"
        assert_408_and_closed(c)
    slack = PORT_CACHE if engine == "uring" else 0
    assert wait_until(lambda: get_stats(srv.port)["body_bufs"] == 0, 3), get_stats(srv.port)
    after = get_stats(srv.port)
    assert after["bufs_held"] <= base["bufs_held"] + slack, (base, after)
    # A slow body whose reads come closer together than the timeout is fine.
    body = os.urandom(5000)
    with HttpConn(srv.port) as c:
        c.send(build_request("POST", "/log", headers=[("Content-Length", str(len(body)))]))
        for i in range(0, len(body), 1000):
            time.sleep(0.5)
            c.send(body[i:i + 1000])
        r = c.read_response()
        assert r.status == 201, r
        assert c.request("GET", f"/log/{int(r.header('X-Paste-LSN'))}").body == body
    assert get_stats(srv.port)["timeouts"] == 1


def trickle_peak(port, body, chunk=200):
    """POST body in `chunk`-byte reads; returns (reply, most buffers held meanwhile above the start)."""
    peak = 0
    with HttpConn(port, timeout=10) as c:
        c.send(build_request("POST", "/log", headers=[("Content-Length", str(len(body)))]))
        for n, i in enumerate(range(0, len(body), chunk)):
            c.send(body[i:i + chunk])
            time.sleep(0.004)           # one read per chunk
            if n % 8 == 7:
                peak = max(peak, get_stats(port)["body_bufs"])
        r = c.read_response()
        if r.status == 201:
            assert c.request("GET", f"/log/{int(r.header('X-Paste-LSN'))}").body == body
    return r, peak


def test_max_held(phttpd, engine):
    limit = 8 * BUF
    srv = phttpd.start(engine, mode="wal", extra_args=["--max-held", str(limit)])
    # A body whose dense copy alone exceeds the limit: 413 at its head.
    with HttpConn(srv.port) as c:
        c.send(build_request("POST", "/log", headers=[("Content-Length", str(limit + 1)),
                                                      ("Expect", "100-continue")]))
        r = c.read_response()
        assert r.status == 413, r
    body = os.urandom(limit - 100)
    r, peak = trickle_peak(srv.port, body)
    assert r.status == 201, r
    assert 0 < peak <= 8, f"a trickled body pinned {peak} buffers with --max-held {limit}"
    assert get_stats(srv.port)["body_bufs"] == 0
    if engine == "uring":
        # Without the limit the same trickle pins a buffer per read (the
        # epoll engine always copies densely): the limit is what helped.
        srv.stop()
        srv.argv[srv.argv.index("--max-held") + 1] = "0"
        srv.start()
        r, peak = trickle_peak(srv.port, body)
        assert r.status == 201 and peak > 8, (r, peak)


@pytest.mark.parametrize("which", ["header", "body", "idle"])
@pytest.mark.slow
def test_zero_disables(phttpd, engine, which):
    timeouts = {"header": "1", "body": "1", "idle": "1"}
    timeouts[which] = "0"
    args = [a for k, v in timeouts.items() for a in (f"--{k}-timeout", v)]
    srv = phttpd.start(engine, mode="wal", extra_args=args)
    with HttpConn(srv.port) as c:
        if which == "header":     # a head in progress: the idle timeout does not apply
            c.send(b"POST /log HTTP/1.1\r\nHost: x\r\n")
        elif which == "body":
            c.send(build_request("POST", "/log", headers=[("Content-Length", "3")]) + b"a")
        else:
            assert c.request("POST", "/log", b"abc").status == 201
        time.sleep(2.2)
        assert not c.is_closed(0.1), f"timed out with --{which}-timeout 0: {bytes(c.buf[:100])!r}"
        if which == "header":
            c.send(b"Content-Length: 3\r\n\r\nabc")
        elif which == "body":
            c.send(b"bc")
        else:
            c.send(build_request("POST", "/log", b"abc"))
        r = c.read_response()
        assert r.status == 201, r
    assert get_stats(srv.port)["timeouts"] == 0


def test_bad_values_refused(phttpd):
    for args in (["--header-timeout", "-1"], ["--idle-timeout", "x"],
                 ["--max-held", "1000"]):       # less than one buffer
        code, err = phttpd.start_failing("uring", extra_args=args)
        assert code == 2, (args, code, err)
        assert args[0] in err, err
