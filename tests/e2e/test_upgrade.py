"""paste-store upgrade from layout version 2, through the real tool, on
stores version 2 wrote, then served by this build.

tests/data/pkvs-v2.store.gz is a 4 MiB store written by pkvs of layout
version 2 (--store-size 4M --ring-bufs 256): PHASE1 below run with
--checkpoint-records 50 and stopped after its last checkpoint (406 keys in
a tree of height 2, values packed and held across up to five buffers),
then PHASE2 run with no checkpoint (--checkpoint-records 1000000000
--checkpoint-ms 3600000), so its 63 SET and DEL records are in the log
after the checkpoint. The upgrade must give pkvs every key of model(), as
redis-cli reads them. A phttpd store of version 2 has no node area; its
records must come through with their LSNs and bytes. A kill -9 at any
instant of the upgrade leaves the version-2 file or the converted one;
damage is refused and changes nothing.
"""
import gzip
import os
import random
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import file_sha256, post_all, check_records, run_tool, tool, binary
from test_store_tool import crc32c, dump_lines

DATA = Path(__file__).resolve().parent.parent / "data" / "pkvs-v2.store.gz"


def pattern(seed, n):
    return bytes((seed * 31 + j * 7) % 251 for j in range(n))


PHASE1 = ([("SET", f"key:{i:04d}", f"v2 value {i} " * (1 + i % 5)) for i in range(400)]
          + [("SET", f"big:{i}", pattern(i, 2500 + 1500 * i)) for i in range(6)]
          + [("SET", "long:" + "k" * 295, "a long key, checkpointed"), ("DEL", "key:0399")])
PHASE2 = ([("SET", f"key:{i:04d}", f"overwritten after the checkpoint {i}") for i in range(20)]
          + [("DEL", f"key:{i:04d}") for i in range(100, 110)]
          + [("SET", f"new:{i:02d}", f"new after the checkpoint {i}") for i in range(30)]
          + [("SET", "big:0", pattern(100, 6000)), ("DEL", "big:1"),
             ("SET", "long:" + "n" * 295, "a long key, in the log")])


def model():
    keys = {}
    for op, key, *value in PHASE1 + PHASE2:
        if op == "SET":
            keys[key] = value[0] if isinstance(value[0], bytes) else value[0].encode()
        else:
            keys.pop(key, None)
    return keys


def v2_store(factory):
    path = os.path.join(factory.tmpdir(), "v2.store")
    with gzip.open(DATA, "rb") as f, open(path, "wb") as out:
        out.write(f.read())
    return path


def leftovers(store):
    d = os.path.dirname(store)
    return [n for n in os.listdir(d) if ".upgrade-" in n]


def cli(port, *args, stdin=None):
    r = subprocess.run([tool("redis-cli"), "-p", str(port)] + [str(a) for a in args],
                       input=stdin, capture_output=True, timeout=30)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def expect_keys(port, want):
    """pkvs holds exactly want, as redis-cli reads it."""
    assert cli(port, "DBSIZE") == f"{len(want)}\n".encode()
    assert sorted(cli(port, "KEYS", "*").decode().split("\n")[:-1]) == sorted(want)
    text = sorted(k for k, v in want.items() if b"\n" not in v and v.isascii())
    out = cli(port, stdin="".join(f"GET {k}\n" for k in text).encode())
    assert out.split(b"\n")[:-1] == [want[k] for k in text]
    for k in sorted(set(want) - set(text)):   # binary values: one GET each
        assert cli(port, "GET", k) == want[k] + b"\n", k


def test_pkvs_v2_store_upgraded(pkvs):
    store = v2_store(pkvs)
    want = model()
    before = file_sha256(store)
    # Refused, naming the upgrade, by the tool and by the server.
    cp = run_tool("--store", store, "info")
    assert cp.returncode == 2, cp
    assert "layout version 2" in cp.stderr and f"paste-store --store {store} upgrade" in cp.stderr, cp
    rc, err = pkvs.start_failing(store=store)
    assert rc != 0 and "upgrade" in err and store in err, err
    assert file_sha256(store) == before, "a refused open changed the store"

    cp = run_tool("--store", store, "upgrade")
    assert cp.returncode == 0, cp
    assert "upgraded" in cp.stdout and f"{len(want)} keys" in cp.stdout, cp.stdout
    assert "406 from its checkpoint, 63 log records after it" in cp.stdout, cp.stdout
    assert not leftovers(store)
    cp = run_tool("--store", store, "check")
    assert cp.returncode == 0, cp
    assert f"tree: {len(want)} keys, reference counts consistent" in cp.stdout, cp.stdout
    assert "ok: 0 records" in cp.stdout, "the old tree records are still in the log"
    cp = run_tool("--store", store, "upgrade")
    assert cp.returncode == 0 and "already layout version 3" in cp.stderr, cp

    srv = pkvs.start(["--ring-bufs", "256"], store=store)
    expect_keys(srv.resp_port, want)
    # The upgraded tree takes changes and keeps them across a restart.
    assert cli(srv.resp_port, "SET", "after:upgrade", "yes") == b"OK\n"
    assert cli(srv.resp_port, "DEL", "key:0200") == b"1\n"
    want["after:upgrade"] = b"yes"
    del want["key:0200"]
    srv.stop()
    srv = pkvs.start(["--ring-bufs", "256"], store=store)
    expect_keys(srv.resp_port, want)
    srv.stop()
    assert run_tool("--store", store, "check").returncode == 0


def make_v2(path):
    """What version 2 wrote, from a version-3 store without a tree: the
    same bytes under version 2's number (its superblock's CRC at 108)."""
    with open(path, "r+b") as f:
        sb = bytearray(f.read(112))
        struct.pack_into("<I", sb, 8, 2)
        struct.pack_into("<I", sb, 108, crc32c(bytes(sb[:108])))
        f.seek(0)
        f.write(sb)


def test_phttpd_v2_store_upgraded(phttpd):
    srv = phttpd.start("uring", mode="wal")
    records = post_all(srv.port, [os.urandom(n) for n in (1, 700, 2048, 5000, 0, 12345)])
    srv.stop()
    store = srv.store
    dump = dump_lines(store)
    make_v2(store)
    assert run_tool("--store", store, "info").returncode == 2
    cp = run_tool("--store", store, "upgrade")
    assert cp.returncode == 0, cp
    assert "in place" in cp.stdout, cp.stdout
    assert dump_lines(store) == dump, "the records or their buffers changed"
    assert run_tool("--store", store, "check").returncode == 0
    srv = phttpd.start("uring", mode="wal", store=store)
    assert check_records(srv.port, records) == []
    srv.stop()


def node_offset(store):
    with open(store, "rb") as f:
        return struct.unpack_from("<Q", f.read(112), 92)[0]


def tree_root(store):
    """The root page of the meta slot in force (the higher sequence)."""
    off = node_offset(store)
    metas = []
    with open(store, "rb") as f:
        for slot in (0, 1):
            f.seek(off + slot * 4096)
            m = f.read(128)
            if m[:4] == b"PBTM":
                metas.append((struct.unpack_from("<Q", m, 8)[0], struct.unpack_from("<I", m, 40)[0]))
    return max(metas)[1]


def flip(store, off):
    with open(store, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0xFF]))


@pytest.mark.crash
def test_damaged_v2_refused(pkvs):
    cases = [
        (lambda s: flip(s, node_offset(s) + tree_root(s) * 4096 + 3000), "page checksum mismatch"),
        (lambda s: (flip(s, node_offset(s) + 30), flip(s, node_offset(s) + 4096 + 30)),
         "both B+tree meta slots are damaged"),
    ]
    for damage, words in cases:
        store = v2_store(pkvs)
        damage(store)
        before = file_sha256(store)
        cp = run_tool("--store", store, "upgrade")
        assert cp.returncode != 0 and words in cp.stderr and "untouched" in cp.stderr, cp
        assert file_sha256(store) == before and not leftovers(store)


@pytest.mark.crash
def test_upgrade_killed(pkvs):
    """kill -9 at random instants: the version-2 file byte for byte, or
    the converted store; a copy a kill left is removed by the next run."""
    store = v2_store(pkvs)
    with open(store, "rb") as f:
        v2 = f.read()
    before = file_sha256(store)
    t0 = time.monotonic()
    assert run_tool("--store", store, "upgrade").returncode == 0
    full = time.monotonic() - t0
    rng = random.Random(7)
    intact = converted = 0
    for _ in range(30):
        os.unlink(store)
        with open(store, "wb") as f:
            f.write(v2)
        proc = subprocess.Popen([binary("paste-store"), "--store", store, "upgrade"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0, full * 1.5))
        proc.kill()
        proc.wait()
        if file_sha256(store) == before:
            intact += 1
            continue
        converted += 1
        cp = run_tool("--store", store, "check")
        assert cp.returncode == 0 and f"tree: {len(model())} keys" in cp.stdout, cp
    assert intact and converted, (intact, converted, full)
    os.unlink(store)
    with open(store, "wb") as f:
        f.write(v2)
    assert run_tool("--store", store, "upgrade").returncode == 0
    assert not leftovers(store)
    assert run_tool("--store", store, "check").returncode == 0
