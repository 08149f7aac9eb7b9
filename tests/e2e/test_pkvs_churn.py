"""pkvs's Redis port off the happy path, on both engines.

(1) Connection churn: thousands of short connections from several
    threads, each one SET or GET, or nothing, or half a command then a
    close (FIN or RST), or a whole SET reset before its reply: every
    acknowledged SET reads back, half commands store nothing, DBSIZE
    agrees, and no connection or store buffer is left behind.
(2) Timeouts: --header-timeout (a command that stalls before its framing
    is complete), --body-timeout (a value that stalls, short ones that are
    gathered whole as well as streamed ones: nothing is stored, the old
    value stays), --idle-timeout (a silent close), and the default that
    keeps idle connections forever, as Redis does.
(3) Injected barrier failures through pkvs-shim (PASTE_FAULT): no +OK for
    a SET sent after the failure was reported, exit 1 naming the store,
    and every acknowledged SET present after a fault-free restart, in the
    store and in the shim's crash image, with paste-store check clean.
(4) Slow readers: a client that pipelines 2000 GETs of a 64 KiB value and
    does not read for seconds does not stall other clients, and finally
    gets every reply whole and in order; one that gives up (RST) with
    ~128 MiB queued leaves no pinned buffer behind.

Every test is bounded: sockets time out after a few seconds and threaded
clients stop at a deadline. Standard library only.
"""
import random
import re
import select
import shutil
import threading
import time
from pathlib import Path

import pytest

from conftest import (ConnectionClosed, RefusedLoad, RespConn, RespError, connect, get_stats,
                      reset, resp_command, run_threads, run_tool, wait_until)

# The sweep runs twice a second against a once-per-pass clock: a 1 s
# timeout fires after 1.0-1.5 s; the bounds allow for a loaded machine.
LATE = 2.6
# A uring port keeps up to 64 free buffers in an allocation cache that
# bufs_held counts (ALLOC_BATCH in lib/port_uring.c); the epoll port none.
PORT_CACHE = {"uring": 64, "epoll": 0, "epoll-batch": 0}
TIMEOUT_REPLY = RespError("ERR timeout reading the command")


def engine_args(engine, *more):
    return ["--engine", engine] + [str(a) for a in more]


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def same(got, want):
    """Replies compare by type and text (RespError is an exception: no ==)."""
    if isinstance(want, RespError):
        return isinstance(got, RespError) and str(got) == str(want)
    return got == want


def connected_clients(port):
    """INFO clients' connected_clients (every open connection, this one included)."""
    with RespConn(port) as c:
        info = c.command("INFO", "clients")
    m = re.search(rb"connected_clients:(\d+)", info or b"")
    assert m, f"no connected_clients in INFO clients: {info!r}"
    return int(m.group(1))


def wait_clients(port, want, timeout=10):
    ok = wait_until(lambda: connected_clients(port) == want, timeout)
    assert ok, f"connections did not drain to {want} within {timeout}s: " \
               f"connected_clients {connected_clients(port)}"


def pipelined(port, commands, batch=100):
    """Replies to commands (tuples), sent in pipelined batches on one connection."""
    out = []
    with RespConn(port, timeout=20) as c:
        for i in range(0, len(commands), batch):
            part = commands[i:i + batch]
            c.send(b"".join(resp_command(*cmd) for cmd in part))
            out += [c.read_reply() for _ in part]
    return out


def value_of(i, size):
    """size bytes that differ for every i."""
    v = random.Random(i).randbytes(size)
    tag = f"<{i}>".encode()
    return tag + v[len(tag):] if size > 2 * len(tag) else v


def seconds_until_readable(sock, timeout):
    t0 = time.monotonic()
    ready, _, _ = select.select([sock], [], [], timeout)
    return time.monotonic() - t0 if ready else None


def assert_closed(c, what):
    assert c.is_closed(2), f"{what}: connection left open after the reply " \
                           f"(buffered {bytes(c.buf[:80])!r})"


# --------------------------------------------------------------------------
# (1) connection churn
# --------------------------------------------------------------------------

CHURN_CONNS = 3000
CHURN_THREADS = 8
CHURN_DEADLINE = 40.0
# 1 and 100 bytes are packed into shared buffers, 600 lands in a packet
# buffer that the tree then holds (zero copy), 5000 streams (>= 4096).
CHURN_SIZES = (1, 100, 600, 5000)
CHURN_KINDS = ("set", "get", "set", "silent", "half", "set", "set-reset", "get",
               "half-reset", "set", "get", "half")


def test_connection_churn(pkvs, engine):
    srv = pkvs.start(engine_args(engine))
    port = srv.resp_port
    base = connected_clients(port)
    lock = threading.Lock()
    acked = {}            # key -> value, SETs answered +OK
    maybe = {}            # key -> value, SETs reset before their reply
    halves = []           # keys of SETs sent in part
    problems = []
    done = [0]
    deadline = time.monotonic() + CHURN_DEADLINE

    def problem(what):
        with lock:
            problems.append(what)

    def one(i, mine):
        kind = CHURN_KINDS[i % len(CHURN_KINDS)]
        value = value_of(i, CHURN_SIZES[(i // len(CHURN_KINDS)) % len(CHURN_SIZES)])
        s = connect(port)
        try:
            if kind == "silent":
                return
            if kind == "get":
                key = mine[-1][0] if mine else f"never:{i}".encode()
                want = mine[-1][1] if mine else None
                s.sendall(resp_command("GET", key))
                got = RespConn.over(s).read_reply()
                if got != want:
                    problem(f"GET {key!r}: {None if got is None else len(got)} bytes, "
                            f"want {None if want is None else len(want)}")
                return
            key = f"{kind}:{i}".encode()
            cmd = resp_command("SET", key, value)
            if kind == "set":
                s.sendall(cmd)
                got = RespConn.over(s).read_reply()
                if got != "OK":
                    problem(f"SET {key!r} ({len(value)} bytes): {got!r}")
                    return
                mine.append((key, value))
                with lock:
                    acked[key] = value
            elif kind == "set-reset":
                with lock:
                    maybe[key] = value
                s.sendall(cmd)
                reset(s)
            else:                         # half, half-reset: cut anywhere
                cut = random.Random(i).randrange(1, len(cmd))
                with lock:
                    halves.append(key)
                s.sendall(cmd[:cut])
                if kind == "half-reset":
                    reset(s)
        finally:
            s.close()
            with lock:
                done[0] += 1

    def worker(t):
        mine = []
        for i in range(t, CHURN_CONNS, CHURN_THREADS):
            if time.monotonic() > deadline:
                return
            try:
                one(i, mine)
            except (OSError, AssertionError, ConnectionClosed) as e:
                problem(f"connection {i} ({CHURN_KINDS[i % len(CHURN_KINDS)]}): {e!r}")

    t0 = time.monotonic()
    stuck = run_threads(CHURN_THREADS, worker, CHURN_DEADLINE + 10)
    took = time.monotonic() - t0
    assert stuck == 0, f"{stuck} client threads did not finish"
    assert not problems, f"{len(problems)} problems, e.g. {problems[:8]}"
    assert done[0] == CHURN_CONNS, f"{done[0]} of {CHURN_CONNS} connections made in {took:.1f}s"
    assert srv.running()

    # Every +OK reads back; a SET reset before its reply is all or nothing;
    # half a SET stores nothing; DBSIZE is exactly what is there.
    keys = sorted(acked)
    got = pipelined(port, [("GET", k) for k in keys])
    bad = [(k, None if g is None else len(g)) for k, g in zip(keys, got) if g != acked[k]]
    assert not bad, f"{len(bad)} of {len(keys)} acknowledged SETs read back wrong: {bad[:10]}"
    mkeys = sorted(maybe)
    got = pipelined(port, [("GET", k) for k in mkeys])
    bad = [k for k, g in zip(mkeys, got) if g is not None and g != maybe[k]]
    assert not bad, f"SETs reset before their reply stored something else: {bad[:10]}"
    present = sum(g is not None for g in got)
    found = pipelined(port, [("EXISTS",) + tuple(halves[i:i + 50])
                             for i in range(0, len(halves), 50)])
    assert sum(found) == 0, f"{sum(found)} of {len(halves)} half-sent SETs were stored"
    with RespConn(port) as c:
        assert c.command("PING") == "PONG"
        dbsize = c.command("DBSIZE")
    assert dbsize == len(acked) + present, (dbsize, len(acked), present)
    assert len(acked) == CHURN_CONNS * CHURN_KINDS.count("set") // len(CHURN_KINDS), len(acked)
    wait_clients(port, base)

    # Half-streamed values hold store buffers; closing (FIN or RST) must
    # give every one back.
    held0 = get_stats(srv.port)["bufs_held"]
    value = value_of(1, 9000)
    head = resp_command("SET", "held", value)
    part = head[:len(head) - 3000]                # 6000 bytes of the value in
    socks = []
    try:
        for _ in range(150):
            s = connect(port)
            socks.append(s)
            s.sendall(part)
        assert wait_until(lambda: get_stats(srv.port)["bufs_held"] >= held0 + 150 * 2, 10), \
            f"150 half-streamed values hold too few buffers to show a leak: " \
            f"{held0} -> {get_stats(srv.port)['bufs_held']}"
    finally:
        for n, s in enumerate(socks):
            if n % 2:
                reset(s)
            else:
                s.close()
    wait_clients(port, base)
    slack = PORT_CACHE[engine]
    assert wait_until(lambda: get_stats(srv.port)["bufs_held"] <= held0 + slack, 5), \
        f"buffers held: {held0} before, {get_stats(srv.port)['bufs_held']} after the " \
        f"half-streamed connections closed"
    with RespConn(port) as c:
        assert c.command("EXISTS", "held") == 0


# --------------------------------------------------------------------------
# (2) timeouts
# --------------------------------------------------------------------------

def test_header_timeout_and_idle_default(pkvs, engine):
    """--header-timeout 1: commands that stall before their framing is
    complete get an error and a close, wherever they stall (multibulk
    head, after a whole command in the same write, inline); more bytes do
    not restart the clock. Meanwhile other connections are served, a
    command split 0.5 s apart is fine, and with the default idle timeout
    (0) connections that sent nothing, or finished a command, stay open."""
    srv = pkvs.start(engine_args(engine, "--header-timeout", 1))
    port = srv.resp_port
    base = connected_clients(port)
    silent = RespConn(port)
    finished = RespConn(port)
    assert finished.command("PING") == "PONG"
    stalls = {
        "multibulk head": b"*3\r\n$3\r\nSET\r\n$5\r\nstall",
        "after a whole command": resp_command("PING") + b"*3\r\n$3\r\nSET",
        "inline": b"SET inline",
        "trickled": b"*3\r\n",
    }
    conns = {what: RespConn(port) for what in stalls}
    other = RespConn(port)
    try:
        t0 = time.monotonic()
        for what, data in stalls.items():
            conns[what].send(data)
        assert conns["after a whole command"].read_reply() == "PONG"
        # A command split in two parts 0.5 s apart is served.
        split = resp_command("SET", "split", "yes")
        other.send(split[:9])
        time.sleep(0.5)
        other.send(split[9:])
        assert other.read_reply() == "OK"
        closed_at = {}
        # The key, not the last bulk, trickles in: the framing stays incomplete.
        trickle = [b"$3\r\n", b"SET\r\n", b"$40\r\n"] + [b"kkkk"] * 10
        while len(closed_at) < len(conns) and time.monotonic() - t0 < LATE + 1:
            ready, _, _ = select.select([c.sock for w, c in conns.items() if w not in closed_at],
                                        [], [], 0.2)
            now = time.monotonic() - t0
            for what, c in conns.items():
                if c.sock in ready:
                    closed_at[what] = now
            if trickle and "trickled" not in closed_at:
                conns["trickled"].send(trickle.pop(0))
            # Everyone else is served meanwhile.
            p0 = time.monotonic()
            assert other.command("PING") == "PONG"
            assert time.monotonic() - p0 < 0.5, "PING took over 0.5 s during the stalls"
        for what, c in conns.items():
            t = closed_at.get(what)
            assert t is not None and 0.8 <= t <= LATE, \
                f"{what}: {'no reply' if t is None else f'reply after {t:.2f}s'} for a 1 s header timeout"
            got = c.read_reply()
            assert same(got, TIMEOUT_REPLY), f"{what}: {got!r}"
            assert_closed(c, what)
        # Default --idle-timeout 0: idle connections are kept.
        assert not silent.is_closed(0.1), "a silent connection was closed (idle timeout 0)"
        assert not finished.is_closed(0.1), "an idle connection was closed (idle timeout 0)"
        assert silent.command("PING") == "PONG"
        assert finished.command("GET", "split") == b"yes"
        assert finished.command("DBSIZE") == 1, "a stalled SET stored something"
    finally:
        for c in list(conns.values()) + [other, silent, finished]:
            c.close()
    st = get_stats(srv.port)
    assert st["timeouts"] == len(stalls) and st["idle_closes"] == 0, st
    wait_clients(port, base)


BODY_CASES = {
    # (value size, bytes of the value sent, head split from the value)
    "short value, one write": (100, 50, False),
    "short value, head split": (100, 50, True),
    "short value, CRLF missing": (100, 100, False),
    "streamed value": (20000, 7000, False),
    "streamed value, CRLF missing": (20000, 20000, False),
}


def test_body_timeout(pkvs, engine):
    """--body-timeout 1 (header timeout at its default, 60 s): a SET whose
    value stalls part way, short (gathered whole) or streamed, is answered
    an error and closed; the key keeps its old value, and the buffers a
    streamed value held go back. A value trickled in pieces closer
    together than the timeout is stored."""
    srv = pkvs.start(engine_args(engine, "--body-timeout", 1))
    port = srv.resp_port
    base = connected_clients(port)
    old = {what: f"old value of {what}".encode() for what in BODY_CASES}
    with RespConn(port) as c:
        for what, v in old.items():
            assert c.command("SET", what, v) == "OK"
    held0 = get_stats(srv.port)["bufs_held"]
    conns = {}
    try:
        for what, (size, sent, split) in BODY_CASES.items():
            cmd = resp_command("SET", what, value_of(size, size))
            start = len(cmd) - size - 2              # the value's first byte
            c = conns[what] = RespConn(port)
            if split:
                c.send(cmd[:start - 3])
                time.sleep(0.1)
                c.send(cmd[start - 3:start + sent])
            else:
                c.send(cmd[:start + sent])
        t0 = time.monotonic()
        assert wait_until(lambda: get_stats(srv.port)["bufs_held"] > held0, 2), \
            "the streamed values hold no buffers: the leak check proves nothing"
        # Trickled values: pieces 0.4 s apart, 2 s in all, are stored.
        trickled = {}
        with RespConn(port) as a, RespConn(port) as b:
            for c, size in ((a, 100), (b, 20000)):
                v = value_of(size + 1, size)
                cmd = resp_command("SET", f"trickled{size}", v)
                trickled[f"trickled{size}"] = v
                c.send(cmd[:len(cmd) - size - 2])
            for piece in range(5):
                time.sleep(0.4)
                for c, size in ((a, 100), (b, 20000)):
                    v = trickled[f"trickled{size}"]
                    n = size // 5
                    c.send(v[piece * n:(piece + 1) * n] + (b"\r\n" if piece == 4 else b""))
            assert a.read_reply() == "OK" and b.read_reply() == "OK"
        closed_at = {}
        for what, c in conns.items():
            left = t0 + LATE - time.monotonic()
            t = seconds_until_readable(c.sock, max(0.0, left))
            closed_at[what] = None if t is None else time.monotonic() - t0
        late = {w: t for w, t in closed_at.items() if t is None}
        assert not late, f"no reply within {LATE}s of a stalled value (1 s body timeout): " \
                         f"{sorted(late)}; closed: {closed_at}"
        for what, c in conns.items():
            got = c.read_reply()
            assert same(got, TIMEOUT_REPLY), f"{what}: {got!r}"
            assert_closed(c, what)
    finally:
        for c in conns.values():
            c.close()
    keys = list(old) + list(trickled)
    want = [old[k] for k in old] + [trickled[k] for k in trickled]
    got = pipelined(port, [("GET", k) for k in keys])
    bad = [(k, g[:40] if g else g) for k, g, w in zip(keys, got, want) if g != w]
    assert not bad, f"values changed by SETs that timed out, or trickled SETs lost: {bad}"
    with RespConn(port) as c:
        assert c.command("DBSIZE") == len(keys)
    st = get_stats(srv.port)
    assert st["timeouts"] == len(BODY_CASES) and st["idle_closes"] == 0, st
    wait_clients(port, base)
    slack = PORT_CACHE[engine]
    assert wait_until(lambda: get_stats(srv.port)["bufs_held"] <= held0 + slack + 40, 3), \
        (held0, get_stats(srv.port)["bufs_held"])


def test_idle_timeout(pkvs, engine):
    """--idle-timeout 1: a connection after its reply, and one that never
    sent a byte, are closed without a word; commands 0.4 s apart keep a
    connection open past the timeout."""
    srv = pkvs.start(engine_args(engine, "--idle-timeout", 1))
    port = srv.resp_port
    after = RespConn(port)
    silent = RespConn(port)
    busy = RespConn(port)
    try:
        assert after.command("SET", "k", "v") == "OK"
        t0 = time.monotonic()
        for _ in range(6):
            time.sleep(0.4)
            assert busy.command("GET", "k") == b"v", "a busy connection was closed"
        for what, c in (("after a reply", after), ("silent", silent)):
            t = seconds_until_readable(c.sock, max(0.0, t0 + LATE - time.monotonic()))
            assert t is not None, f"{what}: still open {LATE}s into a 1 s idle timeout"
            assert c.is_closed(0.5), f"{what}: sent something instead of closing: " \
                                     f"{bytes(c.buf[:80])!r}"
    finally:
        for c in (after, silent, busy):
            c.close()
    st = get_stats(srv.port)
    assert st["idle_closes"] >= 2 and st["timeouts"] == 0, st
    with RespConn(port) as c:
        assert c.command("GET", "k") == b"v"


@pytest.mark.slow
def test_idle_timeout_spares_slow_reader(pkvs, engine):
    """--idle-timeout 2: a client reading ~19 MiB of pipelined replies over
    ~4.5 s sends nothing meanwhile, yet is not idle while its replies leave
    (Redis counts writes as activity): it gets them all and its next
    command is answered. (The clock restarts once the last reply is in the
    kernel's hands, so the read must end within the timeout after that:
    a small receive buffer keeps that tail short.)"""
    srv = pkvs.start(engine_args(engine, "--idle-timeout", 2))
    port = srv.resp_port
    value = value_of(7, BIG)
    with RespConn(port) as c:
        assert c.command("SET", "big", value) == "OK"
    slow = connect(port, timeout=30, nodelay=False, rcvbuf=65536)
    try:
        n = 300
        threading.Thread(target=slow.sendall, args=(resp_command("GET", "big") * n,),
                         daemon=True).start()
        want = len(b"$%d\r\n" % BIG) + BIG + 2
        got = bytearray()
        t0 = time.monotonic()
        while len(got) < n * want:
            chunk = slow.recv(min(65536, n * want - len(got)))
            assert chunk, f"closed after {len(got)} of {n * want} bytes, " \
                          f"{time.monotonic() - t0:.1f}s into a 2 s idle timeout"
            got += chunk
            time.sleep(0.015)         # ~4.4 MB/s: about 4.5 s for all of it
        assert time.monotonic() - t0 > 3, "read too fast to test the idle timer"
        reader = RespConn.over(slow)
        assert reader.command("PING") == "PONG", "closed as idle although it was reading"
    finally:
        slow.close()


# --------------------------------------------------------------------------
# (3) injected barrier failures
# --------------------------------------------------------------------------

# Which barrier each engine pays in each mode (as tests/e2e/test_faults.py),
# and how many succeed first: enough for a few dozen acknowledged SETs (the
# epoll engine batches one connection per pass, so about one SET a barrier).
FAULT = {("uring", "emulated"): "fence:60", ("epoll", "emulated"): "fence:60",
         ("epoll-batch", "emulated"): "fence:60",
         ("uring", "fsync"): "commit:40", ("epoll", "fsync"): "fdatasync:60",
         ("epoll-batch", "fsync"): "fdatasync:40"}
FAULT_SIZES = (8, 300, 700, 5000)       # packed, packed, held, streamed
EIO = "Input/output error"
EXIT_TIMEOUT = 10.0


class SetLoad(RefusedLoad):
    """SETs of keys never written twice, one at a time per connection from
    several connections (reconnecting after a close) until the server is
    gone. issued: every SET sent; acks: (time sent, key) for each +OK;
    refused: (time received, message) for each store-failed error."""

    def __init__(self, port, conns=6, seed=0):
        super().__init__(port, conns, seed)
        self.issued = {}
        self.acked = {}

    def _connect(self):
        return RespConn(self.port, timeout=5)

    def _write(self, conn, tid, n, rng):
        key = f"t{tid}:{n}".encode()
        value = rng.randbytes(rng.choice(FAULT_SIZES))
        with self.lock:
            self.issued[key] = value
        return conn.command("SET", key, value), (key, value)

    def _record(self, reply, what, sent):
        key, value = what
        if reply == "OK":
            self.acked[key] = value
            self.acks.append((sent, key))
            return False
        if isinstance(reply, RespError) and str(reply).startswith("ERR store failed: "):
            self.refused.append((time.monotonic(), str(reply)))
        else:
            self.problems.append((key, reply))
        return True                   # the server closes after the error


def probe_refusals(port):
    """After a refusal: commands on fresh connections get the store's error
    (or find the connection closed, or the server gone)."""
    seen = []
    for cmd in (("GET", "t0:0"), ("PING",), ("SET", "late", "x")):
        try:
            with RespConn(port, timeout=2) as c:
                seen.append((cmd[0], c.command(*cmd)))
        except (ConnectionClosed, OSError):
            pass
    return seen


def check_keys(port, acked, issued):
    """Every acknowledged key holds its value; an unacknowledged one holds
    its value or nothing; nothing else is there. Returns the problems."""
    keys = sorted(issued)
    got = pipelined(port, [("GET", k) for k in keys])
    bad = []
    for k, g in zip(keys, got):
        if k in acked and g != acked[k]:
            bad.append(("acknowledged", k, None if g is None else len(g)))
        elif k not in acked and g is not None and g != issued[k]:
            bad.append(("unacknowledged, different", k, len(g)))
    present = sum(g is not None for g in got)
    with RespConn(port) as c:
        dbsize = c.command("DBSIZE")
    if dbsize != present:
        bad.append(("DBSIZE", dbsize, present))
    return bad


def run_to_failure(srv, load, store, fault, words=EIO):
    """Wait for srv to exit under fault (probing the refusals once the first
    arrives), stop the load and check the exit: exit 1, the store's line
    naming the I/O error. Returns the probes' replies."""
    probes = None
    end = time.monotonic() + EXIT_TIMEOUT
    while srv.running() and time.monotonic() < end:
        if probes is None and load.first_refusal() is not None:
            probes = probe_refusals(srv.resp_port)
        time.sleep(0.01)
    rc = srv.wait_exit(max(0.1, end - time.monotonic()))
    srv.killed = True                 # it stops by itself: no clean stop at teardown
    load.stop()
    err = srv.stderr()
    if rc is None:
        srv.proc.kill()
        srv.proc.wait()
        pytest.fail(f"pkvs-shim still running {EXIT_TIMEOUT}s into {fault}; stderr:\n{err}")
    assert rc == 1, f"exit {rc} (want 1; negative: a signal); stderr:\n{err}"
    named = [ln for ln in err.splitlines() if ln.startswith(f"pkvs: store {store} failed: ") and words in ln]
    assert named, f"no 'pkvs: store {store} failed: ... {words}' line; stderr:\n{err}"
    return probes or []


@pytest.mark.parametrize("durability", ["emulated", "fsync"])
@pytest.mark.crash
def test_failed_barrier_stops_acks(pkvs, engine, durability):
    store = pkvs.new_store("/var/tmp" if durability == "fsync" else "/dev/shm")
    image = Path(pkvs.tmpdir()) / "image"
    fault = FAULT[(engine, durability)]
    args = engine_args(engine, "--durability", durability)
    srv = pkvs.start(args, store=store, binary_name="pkvs-shim",
                     env={"PASTE_FAULT": fault, "PASTE_SHIM_IMAGE": str(image)})
    load = SetLoad(srv.resp_port, seed=random.getrandbits(32)).start()
    probes = run_to_failure(srv, load, store, fault)
    assert not load.problems, load.problems[:5]
    assert len(load.acked) >= 20, f"only {len(load.acked)} SETs acknowledged before {fault}"
    assert load.refused or load.closes, "SETs after the failure were neither refused nor closed"
    for _, msg in load.refused:
        assert EIO in msg, msg
    first = load.first_refusal()
    late = sorted(k for sent, k in load.acks if first is not None and sent > first)
    assert not late, f"+OK for SETs sent after a store-failed error was received: {late[:10]}"
    for cmd, reply in probes:
        assert isinstance(reply, RespError) and str(reply).startswith("ERR store failed: "), \
            (cmd, reply)
    # What was acknowledged is durable: in the store (checked, then served
    # by a fault-free pkvs) and in the shim's image (only lines a
    # successful barrier covered ever reach it).
    copy = Path(pkvs.tmpdir()) / "image.store"
    shutil.copyfile(image, copy)
    for path in (store, str(copy)):
        cp = run_tool("--store", path, "check")
        assert cp.returncode == 0, f"paste-store check {path}: exit {cp.returncode}\n" \
                                   f"{cp.stdout}{cp.stderr}"
        again = pkvs.start(args, store=path)
        bad = check_keys(again.resp_port, load.acked, load.issued)
        assert not bad, f"{path}: {len(bad)} problems after the failure (of " \
                        f"{len(load.acked)} acknowledged SETs), e.g. {bad[:10]}"
        again.stop(keep_store=True)


# --------------------------------------------------------------------------
# (4) slow readers
# --------------------------------------------------------------------------

BIG = 64 * 1024
SLOW_GETS = 2000


class Prober:
    """PING, SET, GET (and a GET on a fresh connection every tenth round)
    in a loop until stopped: latencies of each round, and what went wrong."""

    def __init__(self, port):
        self.port = port
        self.rounds = []
        self.problems = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopped.set()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the prober hung"

    def _run(self):
        try:
            with RespConn(self.port, timeout=5) as c:
                i = 0
                while not self.stopped.is_set():
                    t0 = time.monotonic()
                    v = f"probe {i}".encode()
                    ok = (c.command("PING") == "PONG" and c.command("SET", "probe", v) == "OK"
                          and c.command("GET", "probe") == v)
                    if ok and i % 10 == 0:
                        with RespConn(self.port, timeout=5) as fresh:
                            ok = fresh.command("GET", "probe") == v
                    if not ok:
                        self.problems.append(f"round {i}: a wrong reply")
                        return
                    self.rounds.append(time.monotonic() - t0)
                    i += 1
                    time.sleep(0.01)
        except (OSError, AssertionError, ConnectionClosed) as e:
            self.problems.append(repr(e))


@pytest.mark.slow
def test_slow_reader_does_not_stall_others(pkvs, engine):
    srv = pkvs.start(engine_args(engine))
    port = srv.resp_port
    base = connected_clients(port)
    held0 = get_stats(srv.port)["bufs_held"]
    values = [value_of(1000 + j, BIG) for j in range(4)]
    with RespConn(port, timeout=10) as c:
        for j, v in enumerate(values):
            assert c.command("SET", f"big{j}", v) == "OK"
    held_values = get_stats(srv.port)["bufs_held"] - held0
    assert held_values >= 4 * BIG // 2048, held_values
    pipeline, expected = [], []
    for i in range(SLOW_GETS):
        pipeline.append(resp_command("GET", f"big{i % 4}"))
        expected.append(values[i % 4])
        if i % 100 == 99:               # markers: the order is checked, not only the values
            pipeline.append(resp_command("ECHO", f"mark {i}"))
            expected.append(f"mark {i}".encode())
    pipeline = b"".join(pipeline)
    slow = connect(port, timeout=30)
    quitter = connect(port, timeout=30)
    senders = [threading.Thread(target=s.sendall, args=(pipeline,), daemon=True)
               for s in (slow, quitter)]
    prober = Prober(port)
    try:
        for t in senders:
            t.start()
        prober.start()
        time.sleep(3.0)               # nobody reads ~256 MiB of queued replies
        reset(quitter)
        # Then trickle: 4 KiB every 5 ms for a second, while the prober runs.
        trickled = bytearray()
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            trickled += slow.recv(4096)
            time.sleep(0.005)
        prober.stop()
        assert not prober.problems, prober.problems[:5]
        rounds = prober.rounds
        assert len(rounds) >= 50, f"only {len(rounds)} probe rounds in 4 s beside a slow reader"
        worst = max(rounds)
        assert worst < 1.0, f"a probe round took {worst:.2f}s beside a slow reader " \
                            f"(median {sorted(rounds)[len(rounds) // 2] * 1000:.1f} ms)"
        for t in senders:
            t.join(10)
        assert not any(t.is_alive() for t in senders), "the pipeline was never read whole"
        # Now read everything: each reply whole, in order.
        reader = RespConn.over(slow)
        reader.buf += trickled
        for n, want in enumerate(expected):
            got = reader.read_reply()
            assert got == want, f"reply {n} of {len(expected)}: " \
                                f"{got[:40] if isinstance(got, bytes) else got!r}, want " \
                                f"{len(want)} bytes {want[:20]!r}"
        assert reader.command("PING") == "PONG"
    finally:
        slow.close()
        quitter.close()
    wait_clients(port, base)
    # The replies pinned the values' buffers; once the values are deleted
    # (and a checkpoint drops the log records naming them) every one must
    # come back, the ~128 MiB the quitter never read included. The probe's
    # key may keep a pack buffer.
    with RespConn(port) as c:
        assert c.command("DEL", "big0", "big1", "big2", "big3", "probe") == 5
    slack = PORT_CACHE[engine] + 2
    assert wait_until(lambda: get_stats(srv.port)["bufs_held"] <= held0 + slack, 5), \
        f"buffers held: {held0} before the values, {held0 + held_values} with them, " \
        f"{get_stats(srv.port)['bufs_held']} after they were deleted"
