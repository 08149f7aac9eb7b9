#!/usr/bin/env python3
"""A WAL load client that remembers exactly what the server acknowledged.

Load drives phttpd --mode wal with POST /log over keep-alive connections
(python/paste_proc.py's HttpConn, one thread per connection) and keeps
{lsn: sha256 hex of the body} for every record whose 201 response arrived
complete; snapshot() copies it at any moment (the crash-image tests take
one before each image copy). It is meant to survive the server dying under
it (kill -9): a connection error ends that connection's loop and nothing
half-received counts. run_load() runs one Load to its end; verify() then
reads every acknowledged LSN back and compares hashes.

Used by bench/demo.py and by the crash tests in tests/e2e/. Standard
library and paste_proc only.
"""

import argparse
import hashlib
import os
import sys
import threading
import time

_PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
if _PYTHON not in sys.path:
    sys.path.insert(0, _PYTHON)
import paste_proc  # noqa: E402  (python/paste_proc.py: the HTTP client, client threads)

DEFAULT_BODY_SIZES = (0, 1, 64, 1024, 1500, 2048, 4096)
# What ends one connection's loop: the server closed or reset it, or sent
# something that is not HTTP.
CONN_ERRORS = (OSError, paste_proc.ConnectionClosed)


class Load(paste_proc.ClientThreads):
    """POST random bodies (sizes from body_sizes) on `conns` keep-alive
    connections until `duration` s have passed or stop() is called.

    acked: {lsn: sha256 hex} of every record acknowledged with a complete
    201 response. stats() counts requests that got other statuses
    (status_507, ...), connect_errors and connection_errors (normal after a
    crash), protocol_errors, bad_201 and duplicate_lsn (the same LSN
    acknowledged for two different bodies: a server bug), plus
    "acknowledged". join() returns within duration + the 5 s socket
    timeout."""

    def __init__(self, host, port, conns=50, duration=5.0, body_sizes=DEFAULT_BODY_SIZES,
                 seed=None, stop=None):
        super().__init__(conns, seed, stop)
        self.host, self.port = host, port
        self.body_sizes = tuple(body_sizes)
        self.acked = {}
        self.counts = {}
        self.deadline = time.monotonic() + duration

    def snapshot(self):
        with self.lock:
            return dict(self.acked)

    def stats(self):
        with self.lock:
            return dict(self.counts, acknowledged=len(self.acked))

    def _count(self, key, n=1):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def _run(self, tid, rng):
        """One connection's loop: POST until the deadline or the first error."""
        try:
            conn = paste_proc.HttpConn(self.port, self.host)
        except OSError:
            self._count("connect_errors")
            return
        try:
            while time.monotonic() < self.deadline and not self.done.is_set():
                body = rng.randbytes(rng.choice(self.body_sizes))
                r = conn.request("POST", "/log", body)
                if r.status != 201:
                    self._count(f"status_{r.status}")
                    if r.status == 507:
                        time.sleep(0.001)  # store full: let a checkpoint happen
                    if (r.header("Connection") or "").lower() == "close":
                        return
                    continue
                lsn_text = r.header("X-Paste-LSN") or ""
                if not lsn_text.isdigit() or r.body != f"{lsn_text}\n".encode():
                    self._count("bad_201")
                    continue
                lsn = int(lsn_text)
                digest = hashlib.sha256(body).hexdigest()
                with self.lock:
                    if lsn in self.acked and self.acked[lsn] != digest:
                        self.counts["duplicate_lsn"] = self.counts.get("duplicate_lsn", 0) + 1
                    self.acked[lsn] = digest
        except CONN_ERRORS:
            self._count("connection_errors")  # expected once the server is killed
        except paste_proc.ProtocolError as e:
            self._count("protocol_errors")
            self._count("protocol_error: " + str(e)[:120])
        finally:
            conn.close()


def run_load(host, port, conns=50, duration=5.0, body_sizes=DEFAULT_BODY_SIZES,
             stats=None, seed=None, stop=None):
    """One Load run to its end: returns its acked; if `stats` is a dict it
    receives Load.stats(). Setting the threading.Event `stop` ends the
    load early."""
    load = Load(host, port, conns, duration, body_sizes, seed, stop).start().join()
    if stats is not None:
        stats.update(load.stats())
    return load.acked


def _verify_some(host, port, items, out, lock):
    conn, gone = None, None
    for lsn, digest in items:
        status, body = gone, b""
        # One reconnect if the server closed on us; after that the server
        # is taken for gone and the rest is reported without waiting on it.
        for _ in range(0 if gone else 2):
            try:
                if conn is None:
                    conn = paste_proc.HttpConn(port, host)
                r = conn.request("GET", f"/log/{lsn}")
                status, body = r.status, r.body
                if (r.header("Connection") or "").lower() == "close":
                    conn.close()
                    conn = None
                break
            except CONN_ERRORS + (paste_proc.ProtocolError,) as e:
                if conn is not None:
                    conn.close()
                    conn = None
                status = gone = f"no answer: {e}"
        if status == 200 and hashlib.sha256(body).hexdigest() == digest:
            kind = "intact"
        elif status == 200:
            kind = "damaged"
        else:
            kind = "lost"
        with lock:
            out[kind].append(lsn if kind == "intact" else (lsn, status))
    if conn is not None:
        conn.close()


def verify(host, port, acked, conns=4):
    """GET /log/<lsn> for every acknowledged record and compare hashes.

    Returns {"intact": [lsn], "lost": [(lsn, status)], "damaged": [(lsn, 200)]}:
    lost = 404 or no answer, damaged = 200 with other bytes. A server that
    stops answering costs at most two socket timeouts per thread."""
    out = {"intact": [], "lost": [], "damaged": []}
    lock = threading.Lock()
    items = sorted(acked.items())
    paste_proc.run_threads(conns, lambda i: _verify_some(host, port, items[i::conns], out, lock))
    return out


def main():
    p = argparse.ArgumentParser(description="POST load against phttpd --mode wal, "
                                "then read every acknowledged record back")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--conns", type=int, default=50)
    p.add_argument("--duration", type=float, default=5.0)
    args = p.parse_args()
    stats = {}
    acked = run_load(args.host, args.port, args.conns, args.duration, stats=stats)
    print(f"load: {stats}")
    res = verify(args.host, args.port, acked)
    print(f"{len(acked)} acknowledged records, {len(res['intact'])} intact, "
          f"{len(res['lost'])} lost, {len(res['damaged'])} damaged")
    return 0 if len(res["intact"]) == len(acked) else 1


if __name__ == "__main__":
    sys.exit(main())
