"""examples/durable_log and examples/echo_rpc (built with the project:
$PASTE_BUILD/examples/), driven by Python socket clients on 127.0.0.1 and
a free port.

durable_log: length-prefixed records from several connections at once,
split anywhere across reads; every record gets its LSN, in order, and only
then; after kill -9 every acknowledged record is in the log with its bytes
(paste-store dump --data) and a restart recovers them and goes on from the
next LSN. Both durability paths: emulated PM (/dev/shm) and group commit
(fdatasync, /var/tmp). echo_rpc: both engines, many connections, large
and tiny writes.
"""
import base64
import json
import os
import random
import shutil
import struct
import tempfile
import threading

import pytest

from conftest import ENGINES, binary, connect, run_tool, uring_unavailable_reason
from paste_proc import LISTEN_RE, Server, run_to_exit


@pytest.fixture
def store_dir(request):
    base = getattr(request, "param", "/dev/shm")
    d = tempfile.mkdtemp(prefix="paste-example-", dir=base)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True)
def need_uring():
    reason = uring_unavailable_reason()
    if reason:
        pytest.skip(reason)


def start(name, *args):
    srv = Server([binary(f"examples/{name}"), *[str(a) for a in args]], listen_re=LISTEN_RE)
    return srv.start()


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def send_in_pieces(sock, data, rng):
    """Send data in random pieces (1 byte up to 64 KiB), sometimes pausing so
    the server sees them in separate reads: length prefixes split too."""
    i = 0
    while i < len(data):
        n = rng.choice([1, 2, 3, 7, 100, 1500, 4096, 65536])
        sock.sendall(data[i:i + n])
        i += n
        if rng.random() < 0.05:
            threading.Event().wait(0.002)


def frame(records):
    return b"".join(struct.pack(">I", len(r)) + r for r in records)


def log_client(port, records, seed, out, errors):
    """One connection: send records (in pieces), read one 8-byte LSN each."""
    try:
        rng = random.Random(seed)
        with connect(port, timeout=20) as s:
            sender = threading.Thread(target=send_in_pieces, args=(s, frame(records), rng))
            sender.start()
            acks = recv_exact(s, 8 * len(records))
            sender.join()
        lsns = [struct.unpack(">Q", acks[i:i + 8])[0] for i in range(0, len(acks), 8)]
        out.append(list(zip(lsns, records)))
    except Exception as e:   # reported by the test thread
        errors.append(repr(e))


def run_clients(port, nconns, per_conn, seed):
    """nconns connections at once, per_conn random records each; returns
    [(lsn, record)] per connection."""
    rng = random.Random(seed)
    sizes = [0, 1, 3, 4, 100, 2047, 2048, 2049, 5000, 40000, 131072]
    out, errors, threads = [], [], []
    for c in range(nconns):
        records = [os.urandom(rng.choice(sizes)) for _ in range(per_conn)]
        t = threading.Thread(target=log_client, args=(port, records, seed * 100 + c, out, errors))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(out) == nconns
    return out


def check_acks(conns, per_conn):
    all_lsns = []
    for acked in conns:
        lsns = [lsn for lsn, _ in acked]
        assert len(lsns) == per_conn, f"{len(lsns)} acks for {per_conn} records"
        assert all(lsns), f"a record was refused (ack 0): {lsns}"
        assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns), f"acks out of order: {lsns}"
        all_lsns += lsns
    assert len(set(all_lsns)) == len(all_lsns), "an LSN acknowledged twice"
    return {lsn: rec for acked in conns for lsn, rec in acked}


def dump(store):
    cp = run_tool(store, "dump", "--data")     # the store as a plain argument
    assert cp.returncode == 0, cp.stderr
    return {r["lsn"]: base64.b64decode(r["data_b64"])
            for r in map(json.loads, cp.stdout.splitlines())}


@pytest.mark.parametrize("store_dir", ["/dev/shm", "/var/tmp"], indirect=True,
                         ids=["emulated", "fsync"])
@pytest.mark.crash
def test_durable_log(store_dir):
    store = os.path.join(store_dir, "log.store")
    srv = start("durable_log", store, 0)
    mode = "emulated" if store_dir.startswith("/dev/shm/") else "fsync"
    assert "0 records" in srv.stderr() and f"durability {mode}" in srv.stderr(), srv.stderr()
    acked = check_acks(run_clients(srv.port, nconns=6, per_conn=25, seed=1), 25)
    srv.kill9()   # a crash: what was acknowledged must be in the log
    logged = dump(store)
    missing = [lsn for lsn in acked if logged.get(lsn) != acked[lsn]]
    assert not missing, f"acknowledged records missing or different after kill -9: {missing}"
    assert run_tool("--store", store, "check").returncode == 0
    # Restart: every record recovered, new records go on after them.
    srv.start()
    assert f"{len(logged)} records (lsn {min(logged)}..{max(logged)})" in srv.stderr(), srv.stderr()
    more = check_acks(run_clients(srv.port, nconns=2, per_conn=5, seed=2), 5)
    assert min(more) > max(logged)
    srv.stop()    # SIGTERM: exit 0
    logged = dump(store)
    assert all(logged.get(lsn) == rec for lsn, rec in {**acked, **more}.items())


def test_durable_log_too_long(store_dir):
    """A record longer than 64 buffers closes the connection, unacknowledged;
    the records before it were acknowledged and the server serves on."""
    srv = start("durable_log", os.path.join(store_dir, "log.store"), 0)
    with connect(srv.port, timeout=10) as s:
        s.sendall(frame([b"fine"]) + struct.pack(">I", 1 << 20) + b"x" * 1000)
        assert struct.unpack(">Q", recv_exact(s, 8))[0] == 1
        s.settimeout(10)
        assert s.recv(8) == b"", "no close after an over-long record"
    check_acks(run_clients(srv.port, nconns=1, per_conn=3, seed=3), 3)
    srv.stop()


def test_durable_log_usage():
    rc, err = run_to_exit([binary("examples/durable_log")])
    assert rc == 2 and "usage" in err


def echo_client(port, payloads, out, errors):
    try:
        with connect(port, timeout=20) as s:
            data = b"".join(payloads)
            sender = threading.Thread(target=lambda: [s.sendall(p) for p in payloads])
            sender.start()
            got = recv_exact(s, len(data))
            sender.join()
            out.append(got == data)
    except Exception as e:
        errors.append(repr(e))


@pytest.mark.parametrize("engine", ENGINES)
def test_echo(store_dir, engine):
    srv = start("echo_rpc", os.path.join(store_dir, "echo.store"), 0, engine)
    assert f"{engine} engine" in srv.stderr()
    rng = random.Random(4)
    out, errors, threads = [], [], []
    for c in range(20):
        payloads = [os.urandom(rng.choice([1, 10, 1000, 2048, 3000, 20000])) for _ in range(20)]
        if c == 0:
            payloads.append(os.urandom(4 << 20))   # more than the receive ring holds
        t = threading.Thread(target=echo_client, args=(srv.port, payloads, out, errors))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert out == [True] * 20
    srv.stop()   # SIGTERM: exit 0


def test_echo_usage(store_dir):
    rc, err = run_to_exit([binary("examples/echo_rpc"), os.path.join(store_dir, "s"), "0",
                           "bogus"])
    assert rc == 2 and "usage" in err
