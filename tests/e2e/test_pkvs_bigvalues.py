"""pkvs's values larger than one tree entry (63 buffers): up to Redis's
512 MiB, in chunk entries, through redis-py, redis-cli and curl.

Values of 1, 20 and 200 MiB read back byte-exact, by GET and by GETRANGE
across chunk boundaries, STRLEN and TYPE; across a restart; a kill -9
in the middle of a big SET (or right after it was sent) leaves the old
value whole or the new one whole, and a store paste-store check finds
clean; DEL of a big value gives its buffers back (INFO pkvs_held_bytes); and
pkvs holds no DRAM copy of a value it stores or sends (RssAnon).
"""
import hashlib
import os
import socket
import subprocess
import time

import pytest
import redis

from conftest import RespConn, resp_command, run_tool, tool, wait_until

MiB = 1 << 20
BUF = 2048
CHUNK = 32 * BUF          # the bytes of one chunk entry (kv_big.c)


def client(srv, protocol=3):
    return redis.Redis(host="127.0.0.1", port=srv.resp_port, protocol=protocol,
                       socket_timeout=120)


def value(n, seed):
    """n reproducible bytes (fast: a repeated random block, shifted by seed)."""
    block = hashlib.sha256(seed.to_bytes(4, "little")).digest() * 2048       # 64 KiB
    block = os.urandom(7) + block                                            # not chunk-aligned
    reps = n // len(block) + 1
    return (block * reps)[:n]


def rss_anon_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/pid/status")


def used_memory(r):
    """The store's held buffers (INFO used_memory is the dataset)."""
    return r.info("memory")["pkvs_held_bytes"]


def check_ranges(r, key, v):
    """GETRANGE across chunk boundaries, at the ends, and Redis's index rules."""
    n = len(v)
    for b in range(CHUNK, n, CHUNK * max(1, n // CHUNK // 16)):
        assert r.getrange(key, b - 5, b + 4) == v[b - 5:b + 5], b
    assert r.getrange(key, 0, 9) == v[:10]
    assert r.getrange(key, -10, -1) == v[-10:]
    assert r.getrange(key, n - 3, n + 100) == v[n - 3:]
    assert r.getrange(key, CHUNK - 1, 3 * CHUNK + 1) == v[CHUNK - 1:3 * CHUNK + 2]
    assert r.getrange(key, n, n + 5) == b""


def test_big_values_redis_py(pkvs):
    srv = pkvs.start(["--ring-bufs", "1024"], store_size="256M")
    r = client(srv)
    vals = {"one": value(MiB, 1), "twenty": value(20 * MiB, 2),
            "edge": value(63 * BUF + 1, 3), "fits": value(63 * BUF, 4)}
    for k, v in vals.items():
        assert r.set(k, v) is True
    for k, v in vals.items():
        assert r.get(k) == v, k
        assert r.strlen(k) == len(v)
        assert r.type(k) == b"string"
        check_ranges(r, k, v)
    # MSET's values come with the command, copied: chunked the same way.
    m = value(900 * 1024, 5)
    assert r.mset({"m1": m, "m2": b"small"}) is True
    assert r.get("m1") == m
    # Overwrites: big over small, small over big, big over big.
    assert r.set("fits", vals["one"]) is True
    assert r.get("fits") == vals["one"]
    assert r.set("one", b"now small") is True
    assert r.get("one") == b"now small"
    v2 = value(3 * MiB, 6)
    assert r.set("twenty", v2) is True and r.get("twenty") == v2
    assert sorted(r.keys("*")) == [b"edge", b"fits", b"m1", b"m2", b"one", b"twenty"]
    assert r.dbsize() == 6
    # A restart: every byte as it was.
    r.close()
    srv.restart()
    r = client(srv)
    assert r.get("twenty") == v2
    assert r.get("edge") == vals["edge"]
    assert r.get("fits") == vals["one"]
    check_ranges(r, "twenty", v2)
    r.close()
    srv.stop(keep_store=True)
    cp = run_tool("--store", srv.store, "check")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    srv.remove_store()


def test_big_values_redis_cli_and_curl(pkvs, tmp_path):
    srv = pkvs.start(["--ring-bufs", "1024"], store_size="256M")
    v = value(20 * MiB, 7)
    src = tmp_path / "v.bin"
    src.write_bytes(v)
    cli = tool("redis-cli")
    # redis-cli -x: the last argument from stdin.
    with open(src, "rb") as f:
        cp = subprocess.run([cli, "-p", str(srv.resp_port), "-x", "SET", "cli"], stdin=f,
                            capture_output=True, timeout=120)
    assert cp.returncode == 0 and cp.stdout == b"OK\n", cp
    cp = subprocess.run([cli, "-p", str(srv.resp_port), "GET", "cli"], capture_output=True,
                        timeout=120)
    assert cp.returncode == 0 and cp.stdout == v + b"\n"       # raw output, then a newline
    cp = subprocess.run([cli, "-p", str(srv.resp_port), "STRLEN", "cli"], capture_output=True)
    assert cp.stdout == b"%d\n" % len(v)
    # curl: PUT the file, GET it back, and what each front end wrote the
    # other reads.
    curl = tool("curl")
    url = f"http://127.0.0.1:{srv.port}/kv/"
    cp = subprocess.run([curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-T", str(src),
                         url + "http"], capture_output=True, text=True, timeout=120)
    assert cp.stdout == "201", cp
    out = tmp_path / "out.bin"
    for key in ("http", "cli"):
        cp = subprocess.run([curl, "-sS", "-o", str(out), "-w", "%{http_code}", url + key],
                            capture_output=True, text=True, timeout=120)
        assert cp.stdout == "200", cp
        assert out.read_bytes() == v, key
    cp = subprocess.run([curl, "-sSI", url + "http"], capture_output=True, text=True)
    assert f"Content-Length: {len(v)}" in cp.stdout, cp.stdout
    r = client(srv)
    assert r.get("http") == v
    # The listing gives a big value's length.
    cp = subprocess.run([curl, "-sS", f"http://127.0.0.1:{srv.port}/kv"],
                        capture_output=True, text=True)
    assert f'"len":{len(v)}' in cp.stdout, cp.stdout
    # Over --max-value and over the store: refused at the head.
    cp = subprocess.run([curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT",
                         "-H", f"Content-Length: {300 * MiB}", "--data-binary", "",
                         url + "huge"], capture_output=True, text=True, timeout=60)
    assert cp.stdout in ("507", "413"), cp
    assert r.get("huge") is None
    r.close()


@pytest.mark.slow
def test_200mib_value(pkvs):
    srv = pkvs.start(["--ring-bufs", "1024"], store_size="512M")
    r = client(srv)
    pid = srv.proc.pid
    base_anon = rss_anon_kib(pid)
    used0 = used_memory(r)
    v = value(200 * MiB, 8)
    assert r.set("big", v) is True
    # Held where it landed: the store grew by about the value, the
    # process's own memory did not.
    assert used_memory(r) - used0 >= 200 * MiB
    assert r.get("big") == v
    assert r.strlen("big") == len(v)
    check_ranges(r, "big", v)
    grown = rss_anon_kib(pid) - base_anon
    assert grown < 40 * 1024, f"RssAnon grew by {grown} KiB for a 200 MiB value"
    # redis-cli reads it too.
    cp = subprocess.run([tool("redis-cli"), "-p", str(srv.resp_port), "GET", "big"],
                        capture_output=True, timeout=120)
    assert cp.stdout == v + b"\n"
    r.close()
    srv.restart()
    r = client(srv)
    assert r.get("big") == v
    # DEL gives its buffers back (swept in bounded steps, freed once the
    # deletes are durable and out of the log).
    full = used_memory(r)
    assert r.delete("big") == 1
    assert r.get("big") is None
    assert wait_until(lambda: used_memory(r) < full - 190 * MiB, 30), \
        (full, used_memory(r))
    r.close()


def set_partly(port, key, v, upto):
    """Send SET key v up to byte `upto` of its value (all of it, CRLF
    included, when upto is len(v)); returns the socket, reply unread."""
    head = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n" % (len(key), key, len(v))
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(head)
    view = memoryview(v)
    for at in range(0, upto, MiB):
        s.sendall(view[at:min(upto, at + MiB)])
    if upto == len(v):
        s.sendall(b"\r\n")
    return s


@pytest.mark.crash
@pytest.mark.parametrize("part", [0.0, 0.4, 0.999, 1.0])
def test_kill9_in_a_big_set(pkvs, part):
    old, new = value(30 * MiB, 9), value(40 * MiB, 10)
    srv = pkvs.start(["--ring-bufs", "1024"], store_size="256M")
    r = client(srv)
    assert r.set("k", old) is True
    assert r.set("other", b"stays") is True
    s = set_partly(srv.resp_port, b"k", new, int(len(new) * part))
    time.sleep(0.3)                     # what was sent is in (or partly)
    srv.kill9()
    s.close()
    r.close()
    cp = run_tool("--store", srv.store, "check")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    srv.start()
    r = client(srv)
    got = r.get("k")
    if part < 1.0:
        assert got == old                 # never acknowledged: the old value, whole
    else:
        assert got in (old, new)          # whole, whichever
    assert r.get("other") == b"stays"
    # What the cut write left is swept: only the live value's buffers
    # stay (waiting for the sweeper, a checkpoint and the log to let go).
    assert wait_until(lambda: used_memory(r) < len(got) + 8 * MiB, 30), used_memory(r)
    r.close()
    srv.stop(keep_store=True)
    cp = run_tool("--store", srv.store, "check")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    srv.remove_store()


def test_connection_gone_in_a_big_set(pkvs):
    """A client that goes away in the middle of a big value: nothing is
    set, and what it had sent is given back."""
    srv = pkvs.start(["--ring-bufs", "1024"], store_size="256M")
    r = client(srv)
    base = used_memory(r)
    v = value(30 * MiB, 11)
    s = set_partly(srv.resp_port, b"gone", v, len(v) // 2)
    time.sleep(0.3)
    s.close()
    assert wait_until(lambda: used_memory(r) < base + 4 * MiB, 30), used_memory(r)
    assert r.get("gone") is None
    # And the next one arrives whole, with pipelined commands behind it.
    with RespConn(srv.resp_port, timeout=60) as c:
        c.send(resp_command("SET", "whole", v) + resp_command("GET", "whole") +
               resp_command("GETRANGE", "whole", CHUNK - 2, CHUNK + 1))
        assert c.read_reply() == "OK"
        assert c.read_reply() == v
        assert c.read_reply() == v[CHUNK - 2:CHUNK + 2]
    r.close()


def test_growth_past_the_store_refused_at_once(pkvs):
    """SETRANGE far past a string's end (and APPEND of more than the store
    holds) is refused with Redis's OOM words before any of it is written:
    promptly, the key as it was, the store checking clean after."""
    srv = pkvs.start(["--store-size", "64M"], store_size="64M")
    r = client(srv, protocol=2)
    assert r.set("a", "x") is True
    t0 = time.monotonic()
    with pytest.raises(redis.exceptions.OutOfMemoryError, match="command not allowed"):
        r.setrange("a", 200 << 20, "x")
    assert time.monotonic() - t0 < 2.0
    assert r.get("a") == b"x"
    r.close()
    srv.stop(keep_store=True)
    cp = run_tool("--store", srv.store, "check")
    assert cp.returncode == 0, cp.stdout + cp.stderr
