#!/usr/bin/env python3
"""A WAL load client that remembers exactly what the server acknowledged.

run_load() drives phttpd --mode wal with POST /log over raw keep-alive
sockets (one thread per connection) and returns {lsn: sha256 hex of the
body} for every record whose 201 response arrived complete. It is meant to
survive the server dying under it (kill -9): a connection error ends that
connection's loop and nothing half-received counts. verify() then reads
every acknowledged LSN back and compares hashes.

Used by bench/demo.py and by the crash tests in tests/e2e/. Standard
library only.
"""

import argparse
import hashlib
import random
import socket
import sys
import threading
import time

DEFAULT_BODY_SIZES = (0, 1, 64, 1024, 1500, 2048, 4096)
MAX_HEAD = 16384


class ProtocolError(Exception):
    """The server sent something that is not a well-formed HTTP response."""


class HttpConn:
    """A keep-alive HTTP/1.1 client connection over a raw socket."""

    def __init__(self, host, port, timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def close(self):
        self.sock.close()

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def request(self, method, path, body=None):
        """Send one request; return (status, {lower-case header: value}, body)."""
        head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n"
        if body is not None:
            head += f"Content-Length: {len(body)}\r\n"
        self.sock.sendall(head.encode() + b"\r\n" + (body or b""))
        return self.read_response(head_only=(method == "HEAD"))

    def read_response(self, head_only=False):
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self.buf) > MAX_HEAD:
                raise ProtocolError("response head over %d bytes" % MAX_HEAD)
            self._fill()
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        del self.buf[:end + 4]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"bad status line {lines[0]!r}")
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolError(f"bad header line {line!r}")
            headers[name.strip().lower()] = value.strip()
        length = 0 if head_only else headers.get("content-length")
        if length is None or not str(length).isdigit():
            raise ProtocolError(f"response without a valid Content-Length: {lines!r}")
        length = int(length)
        while len(self.buf) < length:
            self._fill()
        body = bytes(self.buf[:length])
        del self.buf[:length]
        return int(parts[1]), headers, body


class _Tally:
    """Counters shared by the load threads (under one lock, touched rarely)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n


def _load_one(host, port, deadline, sizes, rng, acked, tally, stop):
    """One connection's loop: POST until the deadline or the first error."""
    try:
        conn = HttpConn(host, port)
    except OSError:
        tally.add("connect_errors")
        return
    try:
        while time.monotonic() < deadline and not stop.is_set():
            body = rng.randbytes(rng.choice(sizes))
            status, headers, reply = conn.request("POST", "/log", body)
            if status != 201:
                tally.add(f"status_{status}")
                if status == 507:
                    time.sleep(0.001)  # store full: let a checkpoint happen
                if headers.get("connection", "").lower() == "close":
                    return
                continue
            lsn_text = headers.get("x-paste-lsn", "")
            if not lsn_text.isdigit() or reply != f"{lsn_text}\n".encode():
                tally.add("bad_201")
                continue
            lsn = int(lsn_text)
            digest = hashlib.sha256(body).hexdigest()
            with tally.lock:
                if lsn in acked and acked[lsn] != digest:
                    tally.counts["duplicate_lsn"] = tally.counts.get("duplicate_lsn", 0) + 1
                acked[lsn] = digest
    except (OSError, ConnectionError):
        tally.add("connection_errors")  # expected once the server is killed
    except ProtocolError as e:
        tally.add("protocol_errors")
        tally.add("protocol_error: " + str(e)[:120])
    finally:
        conn.close()


def _run_threads(target, arg_tuples):
    threads = [threading.Thread(target=target, args=a, daemon=True) for a in arg_tuples]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_load(host, port, conns=50, duration=5.0, body_sizes=DEFAULT_BODY_SIZES,
             stats=None, seed=None, stop=None):
    """POST random bodies on `conns` keep-alive connections for `duration` s.

    Returns {lsn: sha256 hex} of every record acknowledged with a complete
    201 response. If `stats` is a dict it receives counters: requests that
    got other statuses (status_507, ...), connection_errors (normal after a
    crash), protocol_errors, bad_201, duplicate_lsn (the same LSN
    acknowledged for two different bodies: a server bug). Setting the
    threading.Event `stop` ends the load early. Always returns within
    duration + the 5 s socket timeout."""
    acked, tally = {}, _Tally()
    stop = stop or threading.Event()
    deadline = time.monotonic() + duration
    base = random.Random(seed)
    _run_threads(_load_one, [(host, port, deadline, tuple(body_sizes),
                              random.Random(base.getrandbits(64)), acked, tally, stop)
                             for _ in range(conns)])
    if stats is not None:
        stats.update(tally.counts)
        stats["acknowledged"] = len(acked)
    return acked


def _verify_some(host, port, items, out, lock):
    conn, gone = None, None
    for lsn, digest in items:
        status, body = gone, b""
        # One reconnect if the server closed on us; after that the server
        # is taken for gone and the rest is reported without waiting on it.
        for _ in range(0 if gone else 2):
            try:
                if conn is None:
                    conn = HttpConn(host, port)
                status, headers, body = conn.request("GET", f"/log/{lsn}")
                if headers.get("connection", "").lower() == "close":
                    conn.close()
                    conn = None
                break
            except (OSError, ProtocolError) as e:
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
    _run_threads(_verify_some, [(host, port, items[i::conns], out, lock)
                                for i in range(conns)])
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
