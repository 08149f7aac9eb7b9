"""Connection churn and hostile clients, on both engines.

Short connections (one request each, the server closes), resets in the
middle of a request or of a large reply, requests split at every byte,
connections that send half a request and then sit there, ten thousand
idle connections: every well-behaved client must still get its whole
answer, and the server must come back to an idle state (no connections,
no held buffers) once the clients are gone.

Every test is bounded: sockets time out after a few seconds and the
threaded clients stop at a deadline, so a server that loses connections
makes a test fail with counts, not hang. Standard library only.
"""
import random
import re
import shutil
import socket
import subprocess
import threading
import time

import pytest

from conftest import (HttpConn, ProtocolError, build_request, check_records, connect,
                      get_stats, post_log, raise_nofile_limit, reset, run_threads,
                      take_response, wait_until)

RPC_BODY = b"x" * 64
SOCK_TIMEOUT = 3.0        # one well-behaved request on loopback: milliseconds


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

class Tally:
    """Thread-safe counts of good and bad outcomes, with the first few failures."""

    def __init__(self, total):
        self.total = total
        self.lock = threading.Lock()
        self.ok = 0
        self.bad = {}           # kind -> count
        self.examples = []

    def good(self, n=1):
        with self.lock:
            self.ok += n

    def fail(self, kind, detail):
        with self.lock:
            self.bad[kind] = self.bad.get(kind, 0) + 1
            if len(self.examples) < 8:
                self.examples.append(f"{kind}: {detail}")

    def summary(self):
        missing = max(0, self.total - self.ok - sum(self.bad.values()))
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.bad.items()))
        return (f"{self.ok} of {self.total} answered correctly"
                + (f"; {kinds}" if kinds else "")
                + (f"; {missing} not attempted before the deadline" if missing else "")
                + ("; first failures:\n  " + "\n  ".join(self.examples) if self.examples else ""))


def send_pieces(sock, data, cuts, pause):
    last = 0
    for cut in list(cuts) + [len(data)]:
        if cut > last:
            sock.sendall(data[last:cut])
            last = cut
            if cut < len(data):
                time.sleep(pause)


def read_to_eof(sock, limit=1 << 22):
    data = bytearray()
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > limit:
            raise AssertionError(f"more than {limit} bytes without EOF")


def parse_close_response(data):
    """Exactly one HTTP/1.1 response, then EOF: the Response, or a reason."""
    buf = bytearray(data)
    try:
        r = take_response(buf)
    except ProtocolError as e:
        return f"{e} ({len(data)} bytes)"
    if r is None:
        return f"no whole response in {data[:120]!r} ({len(data)} bytes)"
    if buf:
        return f"{len(buf)} bytes after the response's Content-Length: {r!r}"
    if r.version != "HTTP/1.1":
        return f"{r.version} response: {r!r}"
    if (r.header("Connection") or "").lower() != "close":
        return f"no 'Connection: close' on a closing response: {r!r}"
    return r


def one_shot(port, data, cuts=(), pause=0.0, timeout=SOCK_TIMEOUT):
    """Connect, send data (in pieces at cuts), read to EOF: parse_close_response's result.
    Raises socket.timeout when the server never answers or never closes."""
    s = connect(port, timeout=timeout)
    try:
        send_pieces(s, data, cuts, pause)
        return parse_close_response(read_to_eof(s))
    finally:
        s.close()


def stats_line(port):
    s = get_stats(port)
    return (f"server: accepts={s['accepts']} requests={s['requests']} conns={s['conns']} "
            f"bufs_held={s['bufs_held']}")


def wait_idle(port, timeout=10):
    """Wait until the only open connection is the one asking; returns the stats."""
    ok = wait_until(lambda: get_stats(port)["conns"] == 1, timeout)
    s = get_stats(port)
    assert ok, f"connections did not drain within {timeout}s: {s}"
    return s


def wal_body(i, size):
    """A body of size bytes that differs for every i."""
    return (f"record-{i}-".encode() + random.Random(i).randbytes(size))[:size]


# --------------------------------------------------------------------------
# short connections
# --------------------------------------------------------------------------

AB_REQUESTS = 20000


def test_ab_short_connections(phttpd, engine):
    """ab -n 20000 -c 50: HTTP/1.0 without keep-alive, the server closes every
    connection. No failed request, and the server's counters agree: exactly
    one request per ab request, plus the /stats request that reads them (it
    counts itself and its own connection). Accepts: one per request, plus up
    to 49 connections ab opened without using them (ab counts a request as
    started when it writes it, so near the end the other 49 slots may have
    connected already; they close without a request when ab exits)."""
    if shutil.which("ab") is None:
        pytest.skip("ab is not installed (apache2-utils)")
    srv = phttpd.start(engine)
    s0 = get_stats(srv.port)
    # -s 5: a connection the server never answers ends ab within 5 s
    # ("apr_pollset_poll: The timeout specified has expired").
    cp = subprocess.run(["ab", "-q", "-s", "5", "-n", str(AB_REQUESTS), "-c", "50",
                         f"http://127.0.0.1:{srv.port}/"],
                        capture_output=True, text=True, timeout=120)
    s1 = get_stats(srv.port)
    counts = (f"server since start of ab: {s1['accepts'] - s0['accepts'] - 1} accepts, "
              f"{s1['requests'] - s0['requests'] - 1} requests answered")
    assert cp.returncode == 0, f"ab failed ({counts}):\n{cp.stdout[-1500:]}{cp.stderr[-1500:]}"
    m = re.search(r"Complete requests:\s+(\d+)", cp.stdout)
    assert m and int(m.group(1)) == AB_REQUESTS, cp.stdout
    m = re.search(r"Failed requests:\s+(\d+)", cp.stdout)
    assert m and int(m.group(1)) == 0, cp.stdout
    assert "Non-2xx" not in cp.stdout, cp.stdout
    assert s1["requests"] - s0["requests"] == AB_REQUESTS + 1, (counts, s0, s1)
    assert AB_REQUESTS + 1 <= s1["accepts"] - s0["accepts"] <= AB_REQUESTS + 1 + 49, \
        (counts, s0, s1)
    wait_idle(srv.port)


CHURN_REQUESTS = 5000
CHURN_THREADS = 20
CHURN_DEADLINE = 25.0


def churn_request(i):
    """Request i of the churn: four shapes, every one asks the server to close."""
    kind = i % 4
    if kind == 0:
        return b"GET /churn/%d HTTP/1.0\r\n\r\n" % i
    if kind == 1:
        return build_request("GET", f"/churn/{i}", headers=[("Connection", "close")])
    if kind == 2:
        return build_request("POST", f"/churn/{i}", b"p" * (i % 700 + 1), version="HTTP/1.0")
    return build_request("POST", f"/churn/{i}", b"q" * (i % 1900 + 1),
                         headers=[("Connection", "close")])


def test_threaded_raw_churn(phttpd, engine):
    """20 threads, 5000 requests, each on its own connection, HTTP/1.0 and
    Connection: close mixed, GET and POST; every fifth head arrives in three
    writes 1 ms apart. Each must get exactly one full 200 and then EOF."""
    srv = phttpd.start(engine)
    s0 = get_stats(srv.port)
    tally = Tally(CHURN_REQUESTS)
    deadline = time.monotonic() + CHURN_DEADLINE

    def worker(t):
        for i in range(t, CHURN_REQUESTS, CHURN_THREADS):
            if time.monotonic() > deadline:
                return
            req = churn_request(i)
            head_len = req.index(b"\r\n\r\n") + 4
            cuts = (3, head_len // 2, head_len - 1) if i % 5 == 0 else ()
            try:
                r = one_shot(srv.port, req, cuts, pause=0.001)
            except socket.timeout:
                tally.fail("timed out", f"request {i} {req[:30]!r}: no response or no EOF "
                           f"within {SOCK_TIMEOUT}s")
                continue
            except OSError as e:
                tally.fail("socket error", f"request {i}: {e!r}")
                continue
            if isinstance(r, str):
                tally.fail("bad response", f"request {i}: {r}")
            elif r.status != 200 or r.body != RPC_BODY:
                tally.fail("bad response", f"request {i}: status {r.status}, body {r.body[:40]!r}")
            else:
                tally.good()

    stuck = run_threads(CHURN_THREADS, worker, CHURN_DEADLINE + SOCK_TIMEOUT + 5)
    assert stuck == 0, f"{stuck} client threads did not finish"
    assert tally.ok == CHURN_REQUESTS, f"{tally.summary()}\n{stats_line(srv.port)}"
    s1 = get_stats(srv.port)
    assert s1["accepts"] - s0["accepts"] == CHURN_REQUESTS + 1, (s0, s1)
    assert s1["requests"] - s0["requests"] == CHURN_REQUESTS + 1, (s0, s1)
    wait_idle(srv.port)


def test_wal_post_churn(phttpd, engine):
    """Many short connections each POST one record (HTTP/1.0 or Connection:
    close, 1 B .. 3 KiB): every 201's LSN is distinct and GET /log/LSN
    returns exactly that body."""
    srv = phttpd.start(engine, "wal")
    total, nthreads = 2000, 10
    tally = Tally(total)
    acked = {}
    lock = threading.Lock()
    deadline = time.monotonic() + CHURN_DEADLINE

    def worker(t):
        for i in range(t, total, nthreads):
            if time.monotonic() > deadline:
                return
            body = wal_body(i, 1 + (i * 7919) % 3000)
            if i % 2:
                req = build_request("POST", "/log", body, version="HTTP/1.0")
            else:
                req = build_request("POST", "/log", body, headers=[("Connection", "close")])
            try:
                r = one_shot(srv.port, req)
            except socket.timeout:
                tally.fail("timed out", f"POST {i}: no response or no EOF within {SOCK_TIMEOUT}s")
                continue
            except OSError as e:
                tally.fail("socket error", f"POST {i}: {e!r}")
                continue
            lsn = None if isinstance(r, str) else r.header("X-Paste-LSN") or ""
            if lsn is None or r.status != 201 or not lsn.isdigit():
                tally.fail("bad response", f"POST {i}: {r}")
                continue
            lsn = int(lsn)
            with lock:
                if lsn in acked:
                    tally.fail("duplicate LSN", f"POST {i}: LSN {lsn} acknowledged twice")
                    continue
                acked[lsn] = body
            tally.good()

    stuck = run_threads(nthreads, worker, CHURN_DEADLINE + SOCK_TIMEOUT + 5)
    assert stuck == 0, f"{stuck} client threads did not finish"
    assert tally.ok == total, f"{tally.summary()}\n{stats_line(srv.port)}"
    assert get_stats(srv.port)["log_records"] == total
    bad = check_records(srv.port, acked)
    assert not bad, f"{len(bad)} acknowledged records read back wrong (lsn, status, length): {bad[:10]}"
    wait_idle(srv.port)


# --------------------------------------------------------------------------
# resets
# --------------------------------------------------------------------------

BIG = 1000000


def test_resets_mid_request_and_mid_response(phttpd, engine):
    """RPC with a 1 MB reply: clients that reset half-way through their head,
    half-way through a POST body, right after sending, or after reading the
    first KiB of the reply (a small receive buffer keeps the server's send
    blocked), interleaved with clients that read the whole megabyte. Every
    normal client is answered in full; afterwards no connection is left and
    the server still answers."""
    srv = phttpd.start(engine, extra_args=["--body-len", str(BIG)])
    get = build_request("GET", "/big")
    post = build_request("POST", "/big", b"b" * 20000)
    post_head = post.index(b"\r\n\r\n") + 4
    nthreads, rounds = 4, 12
    tally = Tally(nthreads * rounds * 2)      # normal clients: two requests a round
    resets = []
    deadline = time.monotonic() + 20

    def normal(tag):
        try:
            with HttpConn(srv.port, timeout=5) as c:
                for _ in range(2):
                    r = c.request("GET", "/big")
                    if r.status == 200 and len(r.body) == BIG and r.body.count(b"x") == BIG:
                        tally.good()
                    else:
                        tally.fail("bad response", f"{tag}: {r!r}")
        except (OSError, AssertionError) as e:
            tally.fail("error", f"{tag}: {e!r}")

    def hostile(kind):
        s = connect(srv.port, timeout=5, rcvbuf=4096 if kind == "mid response" else None)
        try:
            if kind == "mid head":
                s.sendall(get[:len(get) // 2])
            elif kind == "mid body":
                s.sendall(post[:post_head + 7000])
            elif kind == "after request":
                s.sendall(get)
            else:                               # mid response
                s.sendall(get)
                got = 0
                while got < 1024:
                    chunk = s.recv(1024 - got)
                    if not chunk:
                        break
                    got += len(chunk)
            time.sleep(0.002)
        finally:
            reset(s)
        resets.append(kind)

    kinds = ["mid head", "mid body", "after request", "mid response"]

    def worker(t):
        for r in range(rounds):
            if time.monotonic() > deadline:
                return
            try:
                hostile(kinds[(t + r) % len(kinds)])
            except OSError as e:
                tally.fail("hostile client error", repr(e))
            normal(f"thread {t} round {r}")
            try:
                hostile(kinds[(t + r + 2) % len(kinds)])
            except OSError as e:
                tally.fail("hostile client error", repr(e))

    stuck = run_threads(nthreads, worker, 40)
    assert stuck == 0, f"{stuck} client threads did not finish"
    assert tally.ok == tally.total, f"{tally.summary()}\n{stats_line(srv.port)}"
    assert len(resets) == nthreads * rounds * 2
    wait_idle(srv.port)
    with HttpConn(srv.port, timeout=5) as c:
        r = c.request("GET", "/after")
        assert r.status == 200 and len(r.body) == BIG
    assert srv.running()


def test_wal_resets_release_buffers(phttpd, engine):
    """WAL: resets half-way through a POST body (the server holds its
    buffers), and while a 120 KiB record is being sent from the store (the
    reply pins them), between clients that read records back. Afterwards
    the store holds what it held before (no leaked holds or pins), the log
    did not change, and appends still work."""
    srv = phttpd.start(engine, "wal")
    big = wal_body(1, 120 * 1024)
    with HttpConn(srv.port) as c:
        big_lsn = post_log(c, big)
        small_lsn = post_log(c, b"small record")
    before = wait_idle(srv.port)
    post = build_request("POST", "/log", b"z" * 100000)
    post_head = post.index(b"\r\n\r\n") + 4
    get_big = build_request("GET", f"/log/{big_lsn}")
    tally = Tally(3 * 8 * 2)
    deadline = time.monotonic() + 20

    def hostile(kind):
        s = connect(srv.port, timeout=5, rcvbuf=4096 if kind == "mid response" else None)
        try:
            if kind == "mid body":
                send_pieces(s, post[:post_head + 60000], [post_head + 3000, post_head + 30000],
                            0.002)
            else:
                s.sendall(get_big)
                got = 0
                while got < 2048:
                    chunk = s.recv(2048 - got)
                    if not chunk:
                        break
                    got += len(chunk)
            time.sleep(0.005)
        finally:
            reset(s)

    def worker(t):
        for r in range(8):
            if time.monotonic() > deadline:
                return
            try:
                hostile("mid body" if (t + r) % 2 else "mid response")
                with HttpConn(srv.port, timeout=5) as c:
                    for lsn, want in ((big_lsn, big), (small_lsn, b"small record")):
                        got = c.request("GET", f"/log/{lsn}")
                        if got.status == 200 and got.body == want:
                            tally.good()
                        else:
                            tally.fail("bad record", f"LSN {lsn}: {got!r}")
            except (OSError, AssertionError) as e:
                tally.fail("error", repr(e))

    stuck = run_threads(3, worker, 40)
    assert stuck == 0, f"{stuck} client threads did not finish"
    assert tally.ok == tally.total, f"{tally.summary()}\n{stats_line(srv.port)}"
    after = wait_idle(srv.port)
    assert after["log_records"] == before["log_records"] == 2, (before, after)
    # Both samples include the one buffer of their own /stats request. The
    # uring port also keeps up to 63 free buffers in an allocation cache that
    # /stats counts as held; the resets above held ~350 buffers in all, so a
    # leak per reset still shows.
    slack = 63 if engine == "uring" else 0
    assert wait_until(lambda: abs(get_stats(srv.port)["bufs_held"] - before["bufs_held"])
                      <= slack, 5), (before, get_stats(srv.port))
    with HttpConn(srv.port) as c:
        lsn = post_log(c, b"after the resets")
        assert c.request("GET", f"/log/{lsn}").body == b"after the resets"


# --------------------------------------------------------------------------
# split requests
# --------------------------------------------------------------------------

SPLIT_PAUSE = 0.003


@pytest.mark.parametrize("kind", ["rpc-get", "wal-post"])
def test_request_split_at_every_offset(phttpd, engine, kind):
    """Every cut of one request into two writes (a pause between them), on
    one keep-alive connection and on a fresh Connection: close connection
    per cut. WAL: every acknowledged record reads back exactly."""
    srv = phttpd.start(engine, "wal" if kind == "wal-post" else "rpc")
    acked = {}

    def request(cut, close):
        """The same length for every cut: (bytes, WAL body or None)."""
        headers = [("Connection", "close")] if close else []
        if kind == "rpc-get":
            return build_request("GET", f"/split/{cut:03d}", headers=headers), None
        body = f"split {cut:03d} {'close' if close else 'keep'}".encode().ljust(40, b".")
        return build_request("POST", "/log", body, headers=headers), body

    def check(resp, what, body):
        if kind == "rpc-get":
            assert resp.status == 200 and resp.body == RPC_BODY, (what, resp)
        else:
            assert resp.status == 201, (what, resp)
            acked[int(resp.header("X-Paste-LSN"))] = body

    cuts = 0
    keep = HttpConn(srv.port, timeout=SOCK_TIMEOUT)
    try:
        for close in (False, True):
            n = len(request(0, close)[0])
            for cut in range(1, n):
                req, body = request(cut, close)
                what = f"{'close' if close else 'keep-alive'}, cut at {cut} of {n}"
                c = HttpConn(srv.port, timeout=SOCK_TIMEOUT) if close else keep
                try:
                    send_pieces(c.sock, req, [cut], SPLIT_PAUSE)
                    check(c.read_response(), what, body)
                    if close:
                        assert c.is_closed(), f"{what}: connection left open"
                finally:
                    if close:
                        c.close()
                cuts += 1
    finally:
        keep.close()
    if kind == "wal-post":
        assert len(acked) == cuts, (len(acked), cuts)
        bad = check_records(srv.port, acked)
        assert not bad, bad[:10]
    wait_idle(srv.port)


# --------------------------------------------------------------------------
# connections that hold resources
# --------------------------------------------------------------------------

def test_half_sent_requests_do_not_starve_others(phttpd, engine):
    """WAL, a store with ~1.5 K free buffers beyond the receive ring: 2000
    connections each send a POST head and half of a 4000-byte body, 500
    more half a head, and all of them stay open. Other clients' POSTs on
    fresh connections still get an answer (201, or a clean 507 when the
    half bodies took the store), never a hang; once the half-senders go,
    every buffer comes back and appends succeed again."""
    limit = raise_nofile_limit()
    if limit < 3000:
        pytest.skip(f"RLIMIT_NOFILE hard limit {limit} is below the 3000 this test needs")
    # Sized so that the half bodies take every free buffer: the uring ring
    # keeps 4096 of its own, the epoll engine none.
    size = "12M" if engine == "uring" else "4M"
    srv = phttpd.start(engine, "wal", extra_args=["--store-size", size])
    before = get_stats(srv.port)
    body = b"h" * 4000
    post = build_request("POST", "/log", body)
    half_body = post[:post.index(b"\r\n\r\n") + 4 + len(body) // 2]
    half_head = post[:20]
    holders = []
    try:
        for i in range(2500):
            s = connect(srv.port, timeout=10)
            holders.append(s)
            s.sendall(half_body if i < 2000 else half_head)
        assert wait_until(lambda: get_stats(srv.port)["conns"] >= 2501, 15), stats_line(srv.port)
        statuses = []
        for i in range(20):
            with HttpConn(srv.port, timeout=10) as c:
                r = c.request("POST", "/log", wal_body(i, 1500))
            assert r.status in (201, 507), r
            statuses.append(r.status)
        # The server is still responsive on other routes too.
        s = get_stats(srv.port)
        assert s["conns"] >= 2501, s
    finally:
        for s in holders:
            s.close()
    wait_idle(srv.port, 20)
    acked = {}
    with HttpConn(srv.port, timeout=10) as c:
        for i in range(20):
            lsn = post_log(c, wal_body(100 + i, 1500))
            acked[lsn] = wal_body(100 + i, 1500)
    assert not check_records(srv.port, acked)
    after = get_stats(srv.port)
    # The half bodies gave everything back: only the records hold buffers
    # (one or two each), and the uring port keeps up to 64 free ones in its
    # allocation cache.
    records = statuses.count(201) + 20
    assert after["log_records"] == records, (statuses, after)
    assert after["bufs_free"] >= before["bufs_free"] - records * 2 - 64, (before, after)
    assert 507 in statuses, f"the half bodies did not fill the store: {statuses}, {after}"


def test_10000_idle_connections(phttpd, engine):
    """10 000 open connections, most silent, every tenth with half a head
    sent: others are served meanwhile (short connections and a keep-alive
    one), a sample of the idle ones is answered when it finally asks, and
    all 10 000 are gone from the server after the clients close."""
    n = 10000
    limit = raise_nofile_limit()
    if limit < n + 500:
        pytest.skip(f"RLIMIT_NOFILE hard limit {limit} is below the {n + 500} this test needs")
    # --defer-accept 0: the silent connections are to be accepted and held.
    srv = phttpd.start(engine, extra_args=["--store-size", "32M", "--defer-accept", "0"])
    socks = []
    try:
        for i in range(n):
            s = connect(srv.port, timeout=10)
            socks.append(s)
            if i % 10 == 9:
                s.sendall(b"GET /idle HTTP/1.1\r\nHo")
        assert wait_until(lambda: get_stats(srv.port)["conns"] >= n + 1, 20), stats_line(srv.port)
        with HttpConn(srv.port) as keep:
            for i in range(100):
                r = keep.request("GET", f"/keep/{i}")
                assert r.status == 200 and r.body == RPC_BODY, r
                r = one_shot(srv.port, build_request("GET", f"/short/{i}",
                                                     headers=[("Connection", "close")]))
                assert not isinstance(r, str) and r.status == 200 and r.body == RPC_BODY, (i, r)
        for i in range(0, n, 100):            # silent ones finally ask
            socks[i].sendall(build_request("GET", f"/late/{i}"))
        for i in range(0, n, 100):
            r = HttpConn.over(socks[i]).read_response()
            assert r.status == 200 and r.body == RPC_BODY, (i, r)
        for i in range(9, n, 1000):          # and half heads are completed
            socks[i].sendall(b"st: x\r\n\r\n")
            r = HttpConn.over(socks[i]).read_response()
            assert r.status == 200 and r.body == RPC_BODY, (i, r)
    finally:
        for s in socks:
            s.close()
    wait_idle(srv.port, 20)
