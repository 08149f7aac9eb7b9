"""A failed store: no acknowledgement without durability, and a clear exit.

phttpd-shim reads PASTE_FAULT="OP:N" and makes the Nth fence (sfence
path), fdatasync (the epoll engine's synchronous fsync-mode fence) or
commit (the uring port's asynchronous group commit) fail with EIO. Under
concurrent POST load from several connections, on both engines, both
durability modes and one or two threads:
  - the server exits 1, naming the store and the error on stderr;
  - every 201 received is for a record that is present and intact after a
    restart without the fault, both in the store and in the shim's image
    (what a power failure would have left: only fenced/committed lines);
  - once any client has received a 503, no request sent after that gets
    a 201; refused writes get 503 naming the failure, or a closed
    connection; DELETE and GET get 503 too (507, store full, is allowed:
    it acknowledges nothing).
Also: the store file removed or truncated while serving (the server stops
acknowledging and exits 1 with a message, never dies of SIGBUS), and
--durability pmem refused on a file system without DAX.
"""
import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import ConnectionClosed, HttpConn, RefusedLoad, check_records, sha256

BODY_SIZES = (1, 100, 1000, 3000)
EXIT_TIMEOUT = 10.0
# Which barrier each engine pays in each mode, and how many succeed first.
FAULT = {("uring", "emulated"): "fence:40", ("epoll", "emulated"): "fence:40",
         ("epoll-batch", "emulated"): "fence:40",
         ("uring", "fsync"): "commit:25", ("epoll", "fsync"): "fdatasync:25",
         ("epoll-batch", "fsync"): "fdatasync:25"}
EIO = "Input/output error"


class Load(RefusedLoad):
    """POST /log from several connections, reconnecting after a close, until
    the server is gone. Records every 201 (with the time its request was
    sent) and every 503 (with the time it arrived)."""

    def __init__(self, port, conns=6, seed=None):
        super().__init__(port, conns, seed)
        self.acked = {}        # lsn -> body
        self.full = 0

    def _connect(self):
        return HttpConn(self.port, timeout=5)

    def _write(self, conn, tid, n, rng):
        body = rng.randbytes(rng.choice(BODY_SIZES))
        return conn.request("POST", "/log", body), body

    def _record(self, r, body, sent):
        if r.status == 201:
            lsn = int(r.header("X-Paste-LSN"))
            if r.body != f"{lsn}\n".encode() or lsn in self.acked:
                self.problems.append(("bad 201", r))
            self.acked[lsn] = body
            self.acks.append((sent, lsn))
        elif r.status == 503:
            self.refused.append((time.monotonic(), r.body))
        elif r.status == 507:
            self.full += 1          # store full: allowed, nothing acknowledged
        else:
            self.problems.append(("unexpected", r))
        return r.status == 503


def wait_exit(srv, timeout=EXIT_TIMEOUT):
    """The server must stop by itself; returns (exit code, stderr). Marks it
    so teardown does not expect a clean SIGTERM stop."""
    try:
        rc = srv.proc.wait(timeout)
    except Exception:
        srv.proc.kill()
        srv.proc.wait()
        srv.killed = True
        pytest.fail(f"phttpd did not exit within {timeout}s of the failure; stderr:\n{srv.stderr()}")
    srv.reader.join(2)
    srv.killed = True
    return rc, srv.stderr()


def assert_failed_exit(rc, err, store, *words):
    assert rc == 1, f"exit {rc} (want 1; negative: killed by a signal); stderr:\n{err}"
    lines = [line for line in err.splitlines() if line.startswith(f"phttpd: store {store} failed")]
    assert lines, f"no 'phttpd: store {store} failed: ...' line; stderr:\n{err}"
    for w in words:
        assert any(w in line for line in lines), f"'{w}' not in {lines}"


def late_acks(load, after):
    """201s for requests sent after `after` (monotonic seconds)."""
    return sorted(lsn for sent, lsn in load.acks if after is not None and sent > after)


def probe_refusals(port, deadline):
    """While the server drains: DELETE and GET on fresh connections must get 503
    (or find the server gone). Returns the statuses seen."""
    seen = []
    for method, path in (("DELETE", "/log?upto=1"), ("GET", "/log/1")):
        if time.monotonic() > deadline:
            break
        try:
            with HttpConn(port, timeout=2) as c:
                seen.append((method, c.request(method, path).status))
        except (ConnectionClosed, OSError):
            pass
    return seen


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("durability", ["emulated", "fsync"])
@pytest.mark.crash
def test_failed_barrier_stops_acks(phttpd, engine, durability, threads):
    store = phttpd.new_store("/var/tmp" if durability == "fsync" else "/dev/shm")
    image = Path(phttpd.tmpdir()) / "image"
    fault = FAULT[(engine, durability)]
    srv = phttpd.start(engine, mode="wal", store=store, binary_name="phttpd-shim",
                       extra_args=["--durability", durability, "--threads", str(threads)],
                       env={"PASTE_FAULT": fault, "PASTE_SHIM_IMAGE": str(image)})
    load = Load(srv.port).start()
    probes = []
    t0 = time.monotonic()
    while srv.running() and time.monotonic() - t0 < EXIT_TIMEOUT:
        if load.first_refusal() is not None and not probes:
            probes = probe_refusals(srv.port, time.monotonic() + 1) or [None]
        time.sleep(0.01)
    rc, err = wait_exit(srv)
    load.stop()
    assert_failed_exit(rc, err, store, EIO)
    assert not load.problems, load.problems[:5]
    assert load.acked, f"nothing was acknowledged before the fault {fault}: make N larger"
    assert load.refused or load.closes, "writes after the failure were neither refused nor closed"
    for _, body in load.refused:
        assert body.startswith(b"store failed: ") and EIO.encode() in body, body
    late = late_acks(load, load.first_refusal())
    assert not late, f"201 for requests sent after a 503 was received: LSNs {late[:10]}"
    assert all(status == 503 for _, status in filter(None, probes)), probes
    # What was acknowledged is durable: in the store, and in the image
    # (only lines whose barrier succeeded ever reach it).
    want = {lsn: sha256(body) for lsn, body in load.acked.items()}
    copy = Path(phttpd.tmpdir()) / "image.store"
    shutil.copyfile(image, copy)
    for path in (store, str(copy)):
        again = phttpd.start(engine, mode="wal", store=path)
        bad = check_records(again.port, want)
        assert not bad, (f"{path}: {len(bad)} of {len(want)} acknowledged records missing "
                         f"or wrong after the failure, e.g. (lsn, status, len) {bad[:10]}")
        again.stop()


def serve_then(phttpd, engine, damage, words):
    """Serve POST load, damage the store file, and expect a prompt exit 1."""
    store = phttpd.new_store()
    srv = phttpd.start(engine, mode="wal", store=store)
    load = Load(srv.port, conns=4).start()
    assert wait_or_stop(lambda: len(load.acks) >= 20, srv), "no load acknowledged"
    damage(store)
    t_damage = time.monotonic()
    rc, err = wait_exit(srv, 6.0)
    took = time.monotonic() - t_damage
    load.stop()
    assert_failed_exit(rc, err, store, *words)
    assert took < 5.0, f"exited {took:.1f}s after the damage"
    assert not load.problems, load.problems[:5]
    late = late_acks(load, load.first_refusal())
    assert not late, f"201 for requests sent after a 503 was received: LSNs {late[:10]}"
    # The watch stats the file once a second: nothing sent 2.5 s after the
    # damage may be acknowledged.
    late = late_acks(load, t_damage + 2.5)
    assert not late, f"201 for requests sent 2.5 s after the damage: LSNs {late[:10]}"


def wait_or_stop(pred, srv, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and srv.running():
        if pred():
            return True
        time.sleep(0.01)
    return pred()


@pytest.mark.crash
def test_store_removed_while_serving(phttpd, engine):
    serve_then(phttpd, engine, os.unlink, ["removed"])


@pytest.mark.crash
def test_store_truncated_while_serving(phttpd, engine):
    # To one page: every buffer and log lane is gone from under the
    # mapping. Whichever comes first (the watch, or a SIGBUS in a copy,
    # flush or log write), the server must say so and exit 1.
    serve_then(phttpd, engine, lambda path: os.truncate(path, 4096), ["truncated"])


@pytest.mark.parametrize("base", ["/dev/shm", "/var/tmp"])
def test_pmem_refused_without_dax(phttpd, base):
    code, err = phttpd.start_failing("uring", mode="wal", extra_args=["--durability", "pmem"],
                                     store=phttpd.new_store(base))
    assert code == 2, (code, err)      # a configuration the store's file system cannot serve
    assert "DAX" in err and "MAP_SYNC" in err, err
