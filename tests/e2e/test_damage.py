"""A damaged store is never silently dropped, and a start's failure says why.

pkvs (driven with redis-py) and phttpd write records one acknowledged
write at a time, stop, and the store file is damaged with Python: bytes of
a value still in the log, a tree page, both meta slots, the superblock.
The restart must refuse with exit 3, naming the store (and for the log the
lane, the offset and the LSNs at stake), and leave the file byte for byte
as it was; `paste-store check` finds the damage (exit 3); `paste-store
salvage` keeps what can be kept on a copy, says what was lost, and the
salvaged store starts, holds every write that was not lost, and checks
clean. A torn tail (damage with nothing durable behind it) is still cut.

Then the start-up exit codes (docs: phttpd(1), pkvs(1), "EXIT STATUS"): a
store too small for the ring is a configuration error (2) and leaves no
file behind; a create that runs out of file size is an I/O error (5) and
leaves nothing; two servers creating one new store at once: one serves,
the other says "in use" (4), never "bad magic"; a store held by a running
server is "in use" (4).
"""
import base64
import json
import os
import random
import re
import resource
import select
import signal
import string
import struct
import subprocess
import time
from pathlib import Path

import pytest
import redis

from conftest import DEFAULT_STORE_SIZE, HttpConn, binary, file_sha256, post_all, run_tool
import paste_proc

EXIT_USAGE, EXIT_DAMAGED, EXIT_IN_USE, EXIT_IO = 2, 3, 4, 5

# Checkpoints off (every write stays in the log), or every 100 ms.
LOG_ONLY = ["--checkpoint-ms", "3600000", "--checkpoint-records", "1000000"]
CHECKPOINTS = ["--checkpoint-ms", "100"]


def values(n, seed):
    """{key: value} for n keys: printable, unique (each holds its key), 60-300 bytes."""
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        key = f"key:{i:05d}"
        tail = "".join(rng.choice(string.ascii_letters) for _ in range(rng.randrange(40, 280)))
        out[key] = f"<{key}>{tail}".encode()
    return out


def set_each(port, kv):
    """SET every key, one acknowledged command at a time (each its own batch)."""
    r = redis.Redis(port=port, socket_timeout=10)
    for k, v in kv.items():
        assert r.set(k, v) is True
    r.close()


def read_all(port, keys):
    r = redis.Redis(port=port, socket_timeout=10)
    got = dict(zip(keys, r.mget(keys))) if keys else {}
    dbsize = r.dbsize()
    r.close()
    return got, dbsize


def flip(path, offsets):
    fd = os.open(path, os.O_RDWR)
    try:
        for off in offsets:
            os.pwrite(fd, bytes([os.pread(fd, 1, off)[0] ^ 0x5A]), off)
    finally:
        os.close(fd)


def buffers(store):
    """(offset of buffer 0, buffer size) from paste-store info."""
    info = run_tool("--store", store, "info").stdout
    return (int(re.search(r"buf_offset:\s+(\d+)", info).group(1)),
            int(re.search(r"buffers:\s+\d+ x (\d+) bytes", info).group(1)))


def flip_extents(store, ext):
    """Flip five bytes in the middle of the bytes of extents [[buf, off, len], ...]."""
    base, size = buffers(store)
    offsets = [base + b * size + o + i for b, o, n in ext for i in range(n)]
    mid = len(offsets) // 2
    flip(store, offsets[mid:mid + 5])


def damage_key(store, key):
    """Damage the value of key where the store holds it (paste-store dump --tree)."""
    want = base64.b64encode(b"\0" + key.encode()).decode()   # database 0's byte, the name
    lines = [json.loads(x) for x in run_tool("--store", store, "dump", "--tree").stdout.splitlines()]
    flip_extents(store, [x for x in lines if x["key_b64"] == want][0]["extents"])


def damage_record(store, lsn):
    """Damage the data of log record lsn (paste-store dump)."""
    lines = [json.loads(x) for x in run_tool("--store", store, "dump").stdout.splitlines()]
    flip_extents(store, [x for x in lines if x["lsn"] == lsn][0]["extents"])


def refused(factory, store, words, **kw):
    """Start on store must exit 3 without touching it; returns stderr."""
    before = file_sha256(store)
    rc, err = factory.start_failing(store=store, **kw)
    assert rc == EXIT_DAMAGED, f"exit {rc}, want {EXIT_DAMAGED}:\n{err}"
    assert "listening" not in err and "ready" not in err, err
    assert store in err, f"the message does not name the store: {err}"
    for w in words:
        assert re.search(w, err), f"the message lacks {w!r}: {err}"
    assert file_sha256(store) == before, "a refused start wrote to the store"
    cp = run_tool("--store", store, "check")
    assert cp.returncode == EXIT_DAMAGED, f"check: exit {cp.returncode}\n{cp.stdout}{cp.stderr}"
    assert file_sha256(store) == before
    return err


def salvage(store, *how):
    cp = run_tool("--store", store, "salvage", *how)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0, f"salvage: exit {cp.returncode}\n{out}"
    assert re.search(r"ok: \d+ records", out), out      # it checks what it made
    return out


def check_clean(store):
    cp = run_tool("--store", store, "check")
    assert cp.returncode == 0, f"check {store}: exit {cp.returncode}\n{cp.stdout}{cp.stderr}"


# --------------------------------------------------------------------------
# The tree's pages (docs/design.md, "The B+tree", "Where it lives")
# --------------------------------------------------------------------------

PAGE = 4096


def node_area(store):
    info = run_tool("--store", store, "info").stdout
    m = re.search(r"node area:\s+(\d+) bytes at offset (\d+)", info)
    assert m, info
    return int(m.group(2)), int(m.group(1)) // PAGE


def newest_meta(data, nodes):
    """(slot, root, height) of the meta slot with the higher sequence."""
    best = None
    for slot in (0, 1):
        at = nodes + slot * PAGE
        magic, _, seq = struct.unpack_from("<IIQ", data, at)
        root, height = struct.unpack_from("<II", data, at + 40)
        if magic == 0x4D544250 and (best is None or seq > best[0]):
            best = (seq, slot, root, height)
    assert best, "no meta slot"
    return best[1:]


def page_keys(data, nodes, no):
    """The keys of leaf page no, and the child pages of inner page no."""
    at = nodes + no * PAGE
    ptype, _level = data[at + 6], data[at + 7]
    nkeys, = struct.unpack_from("<H", data, at + 20)
    child0, = struct.unpack_from("<I", data, at + 24)
    keys, children = [], [child0]
    for i in range(nkeys):
        e = at + struct.unpack_from("<H", data, at + 32 + 2 * i)[0]
        klen, = struct.unpack_from("<H", data, e)
        if ptype == 1:      # leaf: klen, nexts, flags, vlen, crc, [word], extents, key
            nexts, flags = data[e + 2], data[e + 3]
            k = e + 12 + (8 if flags & 0x10 else 0) + 12 * nexts
            if data[k] == 0:   # a key of database 0: its byte, then the name
                keys.append(bytes(data[k + 1:k + klen]).decode())
        else:               # inner: klen, zero, child, key
            children.append(struct.unpack_from("<I", data, e + 4)[0])
    return ptype, keys, children


# --------------------------------------------------------------------------
# pkvs: the log, the tree
# --------------------------------------------------------------------------

def written_store(pkvs, n, seed, args=LOG_ONLY, settle=0.0):
    """A pkvs store with n keys set one at a time, stopped after settle
    seconds. Returns (store, {key: value})."""
    store = pkvs.new_store()
    srv = pkvs.start(args, store=store, http=False)
    kv = values(n, seed)
    set_each(srv.resp_port, kv)
    time.sleep(settle)
    srv.stop()
    return store, kv


@pytest.mark.crash
def test_pkvs_damaged_record_refused_then_salvaged(pkvs):
    store, kv = written_store(pkvs, 300, 1)
    lost = "key:00150"
    damage_key(store, lost)
    err = refused(pkvs, store, [r"log lane 0", r"damaged record at offset \d+ \(data crc mismatch\)",
                                r"after lsn \d+; 149 valid records follow it \(lsn \d+\.\.\d+\)"])
    assert "paste-store salvage" in err, err

    before = file_sha256(store)
    copy = store + ".salvaged"
    out = salvage(store, "--to", copy)
    assert file_sha256(store) == before, "salvage --to changed the store it salvages"
    assert re.search(r"the records with LSNs between \d+ and \d+ are lost \(those whose header "
                     r"survived: lsn \d+\)", out), out
    # the 299 keys' records and the one of pkvs's layout entry
    assert "kept 300 records" in out, out

    srv = pkvs.start(store=copy, http=False)
    got, dbsize = read_all(srv.resp_port, list(kv))
    srv.stop()
    assert dbsize == 299
    assert got[lost] is None
    wrong = [k for k, v in kv.items() if k != lost and got[k] != v]
    assert not wrong, f"{len(wrong)} keys lost or changed by salvage: {wrong[:5]}"
    check_clean(copy)


@pytest.mark.crash
def test_pkvs_torn_tail_is_cut(pkvs):
    """The last write's value damaged, nothing behind it: a torn tail as a
    crash leaves it, cut at start as ever (the key is gone, the rest
    stays), and the store checks clean after."""
    store, kv = written_store(pkvs, 50, 2)
    last = "key:00049"
    damage_key(store, last)
    srv = pkvs.start(store=store, http=False)
    got, dbsize = read_all(srv.resp_port, list(kv))
    srv.stop()
    assert "torn record" in srv.stderr(), srv.stderr()
    assert dbsize == 49 and got[last] is None
    assert all(got[k] == v for k, v in kv.items() if k != last)
    check_clean(store)


def checkpointed_store(pkvs, n=800, seed=3):
    """A pkvs store whose keys all went into a checkpoint (the log then
    truncated), stopped. Returns (store, {key: value})."""
    # a checkpoint at least 100 ms after the last write
    store, kv = written_store(pkvs, n, seed, CHECKPOINTS, settle=1.0)
    info = run_tool("--store", store, "info").stdout
    assert re.search(r"records:\s+none", info), f"the log still holds records:\n{info}"
    return store, kv


@pytest.mark.crash
def test_pkvs_damaged_tree_page_refused_then_salvaged(pkvs):
    store, kv = checkpointed_store(pkvs)
    nodes, _ = node_area(store)
    data = Path(store).read_bytes()
    _slot, root, height = newest_meta(data, nodes)
    assert height == 2, f"want a root over leaves, height {height}"
    _, _, children = page_keys(data, nodes, root)
    leaf = children[len(children) // 2]
    ptype, leaf_keys, _ = page_keys(data, nodes, leaf)
    assert ptype == 1 and leaf_keys

    # One key of that leaf written again after the checkpoint: it lives in
    # the log too, and comes back from there.
    srv = pkvs.start(LOG_ONLY, store=store, http=False)
    again = leaf_keys[0]
    kv[again] = b"written again after the checkpoint"
    set_each(srv.resp_port, {again: kv[again]})
    srv.stop()

    flip(store, [nodes + leaf * PAGE + 100])
    refused(pkvs, store, [r"B\+tree is damaged", rf"page {leaf}: page checksum mismatch"])

    before = file_sha256(store)
    out = salvage(store, "--in-place")
    assert file_sha256(store + ".damaged") == before, "--in-place kept no copy of the store"
    assert re.search(rf"page {leaf}: page checksum mismatch: its keys, from .* up to .* "
                     r"\(not included\), are lost but for those the log holds", out), out

    srv = pkvs.start(store=store, http=False)
    got, dbsize = read_all(srv.resp_port, list(kv))
    srv.stop()
    gone = set(leaf_keys) - {again}
    assert dbsize == len(kv) - len(gone), out
    assert got[again] == kv[again], "the key the log held newer is lost"
    assert all(got[k] is None for k in gone)
    wrong = [k for k, v in kv.items() if k not in gone and got[k] != v]
    assert not wrong, f"{len(wrong)} keys outside the damaged page lost or changed: {wrong[:5]}"
    check_clean(store)


@pytest.mark.crash
def test_pkvs_both_meta_slots_damaged(pkvs):
    store, kv = checkpointed_store(pkvs, n=400, seed=4)
    nodes, _ = node_area(store)
    flip(store, [nodes + 20, nodes + PAGE + 20])     # inside each slot's sequence
    refused(pkvs, store, [r"both B\+tree meta slots are damaged"])
    copy = store + ".salvaged"
    out = salvage(store, "--to", copy)
    assert "no meta slot holds: the newest tree found is generation" in out, out
    srv = pkvs.start(store=copy, http=False)
    got, dbsize = read_all(srv.resp_port, list(kv))
    srv.stop()
    assert dbsize == len(kv) and got == kv
    check_clean(copy)


@pytest.mark.crash
def test_pkvs_bad_superblock(pkvs):
    store = pkvs.new_store()
    srv = pkvs.start(store=store, http=False)
    set_each(srv.resp_port, values(5, 5))
    srv.stop()
    flip(store, [108])                                # the superblock's CRC
    refused(pkvs, store, [r"superblock checksum mismatch"])
    cp = run_tool("--store", store, "salvage", "--to", store + ".salvaged")
    assert cp.returncode == EXIT_DAMAGED and "superblock" in cp.stderr, cp


# --------------------------------------------------------------------------
# phttpd's log
# --------------------------------------------------------------------------

@pytest.mark.crash
def test_phttpd_damaged_record_refused_then_salvaged(phttpd):
    srv = phttpd.start("uring", mode="wal")
    rng = random.Random(6)
    bodies = [bytes(rng.randrange(256) for _ in range(rng.randrange(100, 3000))) for _ in range(40)]
    records = post_all(srv.port, bodies)       # one request after the other's 201
    srv.stop(keep_store=True)
    store = srv.store
    lsns = sorted(records)
    mid = lsns[20]
    damage_record(store, mid)
    refused(phttpd, store, [r"log lane \d+: damaged record at offset \d+",
                            rf"19 valid records follow it \(lsn {lsns[21]}\.\.{lsns[-1]}\)"],
            mode="wal")
    copy = store + ".salvaged"
    out = salvage(store, "--to", copy)
    assert f"lsn {mid})" in out, out
    srv = phttpd.start("uring", mode="wal", store=copy)
    with HttpConn(srv.port) as c:
        for lsn in lsns:
            r = c.request("GET", f"/log/{lsn}")
            if lsn == mid:
                assert r.status == 404
            else:
                assert r.status == 200 and r.body == records[lsn], f"LSN {lsn}"
    srv.stop()
    check_clean(copy)


# --------------------------------------------------------------------------
# Start-up: exit codes, creation
# --------------------------------------------------------------------------

def pkvs_argv(store, *args):
    return paste_proc.pkvs_argv(binary("pkvs"), store, list(args), http_port=None)


def test_store_too_small_leaves_no_file(pkvs):
    store = pkvs.new_store()
    rc, err = paste_proc.run_to_exit(pkvs_argv(store, "--store-size", "4M"))
    assert rc == EXIT_USAGE, (rc, err)
    assert "the ring needs" in err, err
    assert not os.path.exists(store), "a failed start left the store it created"
    srv = pkvs.start(store=store, http=False)     # a fresh start creates it anew
    srv.stop()


def test_failed_create_leaves_no_file(pkvs):
    """A file size limit below the store's size: the create fails while
    allocating, as on a full disk. Exit 5, and nothing left."""
    store = pkvs.new_store()

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, 8 << 20))
    cp = subprocess.run(pkvs_argv(store, "--store-size", DEFAULT_STORE_SIZE), preexec_fn=limit,
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == EXIT_IO, (cp.returncode, cp.stderr)
    assert "while creating" in cp.stderr, cp.stderr
    assert os.listdir(os.path.dirname(store)) == [], "a failed create left a file"


@pytest.mark.parametrize("round_", range(4))
def test_creation_race_loser_says_in_use(pkvs, round_):
    store = pkvs.new_store()
    argv = pkvs_argv(store, "--store-size", DEFAULT_STORE_SIZE)
    procs = [subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for _ in range(2)]
    try:
        # The loser exits; the winner runs until told to stop.
        deadline = time.monotonic() + 20
        while all(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.02)
        losers = [p for p in procs if p.poll() is not None]
        assert len(losers) == 1, "neither server gave up"
        err = losers[0].stderr.read().decode()
        assert losers[0].returncode == EXIT_IN_USE, (losers[0].returncode, err)
        assert "in use" in err and "magic" not in err and "truncated" not in err, err
        winner = [p for p in procs if p is not losers[0]][0]
        seen = b""
        while b"pkvs: ready" not in seen and time.monotonic() < deadline:
            if select.select([winner.stderr], [], [], 0.5)[0]:
                seen += winner.stderr.read1(4096)
        assert b"pkvs: ready" in seen, seen.decode()
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            p.wait(timeout=20)
    assert winner.returncode == 0, winner.stderr.read().decode()
    check_clean(store)


def test_store_held_by_another_server(pkvs):
    srv = pkvs.start(http=False)
    rc, err = paste_proc.run_to_exit(pkvs_argv(srv.store))
    assert rc == EXIT_IN_USE and "in use" in err, (rc, err)
    cp = run_tool("--store", srv.store, "check")
    assert cp.returncode == EXIT_IN_USE, cp
    srv.stop()


def test_usage_and_configuration_errors(pkvs):
    store = pkvs.new_store()
    rc, err = paste_proc.run_to_exit(pkvs_argv(store, "--no-such-option"))
    assert rc == EXIT_USAGE, (rc, err)
    Path(store).write_bytes(b"not a store" * 1000)
    rc, err = paste_proc.run_to_exit(pkvs_argv(store))
    assert rc == EXIT_USAGE and "not a paste store" in err, (rc, err)
    cp = run_tool("--store", store, "salvage")
    assert cp.returncode == EXIT_USAGE and "--to NEW" in cp.stderr, cp
