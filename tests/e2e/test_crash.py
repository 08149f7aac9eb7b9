"""Crash consistency of WAL mode.

(a) kill -9 under concurrent POST load, restart, every acknowledged record
    is there with the same bytes; for emulated PM (/dev/shm) and fsync
    (/var/tmp), both engines. fsync mode three ways: direct writes from
    the store's private mapping (one thread), the same with two threads
    over 4 KiB buffers (two direct writers: no block holds both threads'
    buffers), and the page cache (PASTE_FSYNC_IO=mapped). With direct
    writes a kill -9 loses every byte not flushed and committed, as a
    power cut would.
(b) crash images from phttpd-shim: the shim keeps a second image updated
    only with flushed-and-fenced lines; a copy taken at any moment must hold
    every record acknowledged before the copy began.
(c) damaged stores: flipped data bits, a corrupt superblock, a truncated file.
"""
import json
import os
import random
import re
import struct
import sys
import time
from pathlib import Path

import pytest

from conftest import (HERE, HttpConn, check_image_copy, check_records, copy_image_at,
                      file_sha256, post_all, run_tool)

sys.path.insert(0, str(HERE.parent.parent / "bench"))
import walclient  # noqa: E402  (bench/walclient.py: Load, run_load)

# Every test here crashes a server or damages its store.
pytestmark = pytest.mark.crash

BODY_SIZES = (0, 1, 100, 1024, 2000, 3000, 5000)
CRASH_STORE_SIZE = "256M"


def check_tool_clean(store):
    cp = run_tool("--store", store, "check")
    assert cp.returncode == 0, f"paste-store check {store}: exit {cp.returncode}\n{cp.stdout}{cp.stderr}"


def assert_load_sane(stats):
    for bad in ("protocol_errors", "bad_201", "duplicate_lsn"):
        assert not stats.get(bad), f"load client saw {bad}: {stats}"
    assert stats.get("acknowledged", 0) > 0, f"nothing was acknowledged: {stats}"


# --------------------------------------------------------------------------
# (a) kill -9 under load
# --------------------------------------------------------------------------

def truncated_are_gone(port, truncated, rng):
    """GET a sample of truncated LSNs (and the newest): each must stay 404."""
    sample = sorted(rng.sample(sorted(truncated), min(300, len(truncated))) + [max(truncated)])
    with HttpConn(port) as c:
        return [lsn for lsn in sample if c.request("GET", f"/log/{lsn}").status != 404]


FSYNC_WAYS = {"fsync": ([], {}), "fsync-2threads": (["--threads", "2", "--buf-size", "4096"], {}),
              "fsync-pagecache": ([], {"PASTE_FSYNC_IO": "mapped"})}


@pytest.mark.parametrize("durability", ["emulated"] + list(FSYNC_WAYS))
@pytest.mark.slow
def test_kill9_under_load(phttpd, engine, durability):
    fsync = durability.startswith("fsync")
    store = phttpd.new_store("/var/tmp" if fsync else "/dev/shm")
    extra, env = FSYNC_WAYS.get(durability, ([], {}))
    args = ["--durability", "fsync" if fsync else durability, "--store-size", CRASH_STORE_SIZE] + extra
    srv = phttpd.start(engine, mode="wal", extra_args=args, store=store, env=env)
    if fsync:                         # the banner names the way chosen
        way = "page cache" if env else "direct writes"
        assert any(f"durability fsync ({way})" in line for line in srv.lines), srv.lines[:10]
    rng = random.Random()
    live, seen, truncated = {}, {}, set()
    for round_no in range(3):
        load = walclient.Load("127.0.0.1", srv.port, conns=8, duration=1.5,
                              body_sizes=BODY_SIZES, seed=rng.getrandbits(32)).start()
        time.sleep(rng.uniform(0.2, 1.0))
        srv.kill9()
        load.join(15)
        assert not load.alive(), "load client did not finish after the kill"
        assert_load_sane(load.stats())
        result = load.snapshot()
        reused = sorted(lsn for lsn in result if lsn in seen)
        assert not reused, f"round {round_no}: LSNs acknowledged again after a crash: {reused[:10]}"
        seen.update(result)
        live.update(result)
        srv.start()
        bad = check_records(srv.port, live)
        assert not bad, (f"round {round_no}: {len(bad)} of {len(live)} acknowledged records "
                         f"lost or changed after kill -9, e.g. (lsn, status, len) {bad[:10]}")
        if truncated:
            back = truncated_are_gone(srv.port, truncated, rng)
            assert not back, f"round {round_no}: truncated records came back after kill -9: {back[:10]}"
        # Keep this round's records for the next crash, drop older ones so
        # the single lane in use does not fill up (507) over three rounds.
        older = [lsn for lsn in live if lsn not in result]
        if older:
            with HttpConn(srv.port) as c:
                r = c.request("DELETE", f"/log?upto={max(older)}")
            # Requests in flight at a kill (one per connection) may have
            # been logged without their reply arriving: they count too.
            dropped = json.loads(r.body)["truncated"] if r.status == 200 else None
            assert r.status == 200 and len(older) <= dropped <= len(older) + 8 * round_no, \
                (r, len(older))
            truncated.update(older)
            for lsn in older:
                del live[lsn]
    srv.stop()
    check_tool_clean(store)


# --------------------------------------------------------------------------
# (b) crash images from the persistence shim
# --------------------------------------------------------------------------

@pytest.mark.parametrize("durability", ["emulated", "fsync"])
@pytest.mark.slow
def test_shim_crash_images(phttpd, engine, durability):
    # fsync: the image takes a line only when the group commit (its direct
    # writes and fdatasync, in the persist object's ring) that covers it
    # completed.
    workdir = Path(phttpd.tmpdir())
    image = workdir / "image"
    args = ["--durability", durability, "--store-size", CRASH_STORE_SIZE]
    store = phttpd.new_store("/var/tmp" if durability == "fsync" else "/dev/shm")
    srv = phttpd.start(engine, mode="wal", extra_args=args, binary_name="phttpd-shim",
                       env={"PASTE_SHIM_IMAGE": str(image)}, store=store)
    assert image.is_file(), f"phttpd-shim did not create its image {image}"
    load = walclient.Load("127.0.0.1", srv.port, conns=8, duration=1.5, body_sizes=BODY_SIZES,
                          seed=random.getrandbits(32)).start()
    # Even copies hold the shim's lock (whole fences), odd ones may catch
    # a fence midway.
    copies = copy_image_at(image, workdir, sorted(random.uniform(0.2, 1.4) for _ in range(3)),
                           load.snapshot, lambda i: i % 2 == 0)
    load.join(15)
    assert not load.alive(), "load client did not finish"
    srv.stop()
    stats = load.stats()
    # A full store (507) acknowledges nothing and is allowed; anything else is not.
    problems = {k: n for k, n in stats.items() if k not in ("acknowledged", "status_507")}
    assert not problems, f"load problems: {stats}"
    assert copies[-1][2], "nothing was acknowledged before the last copy"
    for copy, whole_fences, before in copies:
        check_image_copy(copy, whole_fences)
        img = phttpd.start(engine, mode="wal", extra_args=args, store=str(copy))
        bad = check_records(img.port, before)
        assert not bad, (f"{copy.name}: {len(bad)} of {len(before)} records acknowledged before "
                         f"the copy are missing or wrong, e.g. {bad[:10]}")
        img.stop()


# --------------------------------------------------------------------------
# (c) damaged stores
# --------------------------------------------------------------------------

def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def find_superblock_crc(sb):
    """Locate the superblock's CRC32C field without knowing the layout: a u32
    equal to the CRC of the bytes before it, or of the first N bytes with the
    field zeroed. Returns (offset, recompute(bytes) -> crc) or None."""
    crc = crc32c(sb[:8])
    for off in range(8, 512, 4):
        value = struct.unpack_from("<I", sb, off)[0]
        if value == crc:
            return off, lambda b, o=off: crc32c(b[:o])
        for n in (64, 128, 256, 512, 1024, 2048, 4096):
            if n >= off + 4 and value == crc32c(sb[:off] + b"\0\0\0\0" + sb[off + 4:n]):
                return off, lambda b, o=off, n=n: crc32c(b[:o] + b"\0\0\0\0" + b[o + 4:n])
        crc = crc32c(sb[off:off + 4], crc)
    return None


STORE_VERSION = 3   # include/paste.h: PASTE_STORE_VERSION


def version_offset(sb):
    for off in range(8, 64, 4):
        if struct.unpack_from("<I", sb, off)[0] == STORE_VERSION:
            return off
    return None


def make_store(phttpd, nrecords=8, size=1000):
    """A store with nrecords records written and cleanly shut down; returns (path, {lsn: body})."""
    srv = phttpd.start("uring", mode="wal")
    records = post_all(srv.port, [os.urandom(size) for _ in range(nrecords)])
    srv.stop()
    return srv.store, records


def record_file_offsets(store, lsn, body):
    """File offsets of a record's data, from paste-store dump + info; falls
    back to searching the file for the bytes when the output cannot be used."""
    data = Path(store).read_bytes()
    try:
        info = run_tool("--store", store, "info").stdout
        buf_offset = int(re.search(r"(?i)buf(?:fer)?[_ ]offset\W+(\d+)", info).group(1))
        buf_size = int(re.search(r"(?i)buf(?:fer)?[_ ]size\W+(\d+)|\d+ x (\d+) bytes", info).group(1))
        for line in run_tool("--store", store, "dump").stdout.splitlines():
            rec = json.loads(line)
            if rec.get("lsn") != lsn:
                continue
            offsets = []
            for e in rec["extents"]:
                buf, off, n = (e["buf"], e["off"], e["len"]) if isinstance(e, dict) else e
                start = buf_offset + buf * buf_size + off
                offsets.extend(range(start, start + n))
            if bytes(data[o] for o in offsets) == body:
                return offsets
    except (AttributeError, KeyError, TypeError, ValueError):
        pass
    found = [m.start() for m in re.finditer(re.escape(body), data)]
    assert found, f"could not locate the data of LSN {lsn} in {store} (dump, info, nor search)"
    return [start + i for start in found for i in range(len(body))]


def flip_bytes(store, offsets):
    with open(store, "r+b") as f:
        for off in offsets:
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ 0x5A]))


def damage_record(store, lsn, body):
    offsets = record_file_offsets(store, lsn, body)
    n = len(body)
    # The middle 16 bytes of every copy of the data.
    flip_bytes(store, [o for i, o in enumerate(offsets) if n // 2 <= i % n < n // 2 + 16])


def served_exactly(port, lsn, body):
    with HttpConn(port) as c:
        r = c.request("GET", f"/log/{lsn}")
    assert r.status != 200 or r.body == body, f"LSN {lsn}: damaged bytes served with 200"
    return r.status == 200


def test_damaged_last_record(phttpd):
    """Nothing durable behind it: a torn tail, cut at start as a crash's."""
    store, records = make_store(phttpd)
    lsns = sorted(records)
    damage_record(store, lsns[-1], records[lsns[-1]])
    for _ in range(2):
        cp = run_tool("--store", store, "check")
        assert cp.returncode == 0, cp
        srv = phttpd.start("uring", mode="wal", store=store)
        for lsn in lsns[:-1]:
            assert served_exactly(srv.port, lsn, records[lsn]), f"LSN {lsn} lost"
        served_exactly(srv.port, lsns[-1], records[lsns[-1]])
        srv.stop()


def test_damaged_middle_record(phttpd):
    """Acknowledged records behind the damage: the start is refused (exit
    3, the store untouched) rather than dropping them; tests/e2e/
    test_damage.py salvages such stores."""
    store, records = make_store(phttpd)
    lsns = sorted(records)
    mid = lsns[len(lsns) // 2]
    damage_record(store, mid, records[mid])
    cp = run_tool("--store", store, "check")
    out = cp.stdout + cp.stderr
    assert cp.returncode == 3, f"check of a store with a damaged record: exit {cp.returncode}\n{out}"
    assert re.search(r"(?i)damage|corrupt|crc|checksum|mismatch", out), out
    before = file_sha256(store)
    rc, err = phttpd.start_failing(mode="wal", store=store)
    assert rc == 3 and "damaged record" in err and store in err, (rc, err)
    assert file_sha256(store) == before, "a refused start wrote to the store"


def _refuses(phttpd, store, words, code=3):
    """A start refused with exit code (3 damaged, 2 not a store of this
    layout), check likewise, and the file as it was."""
    before = file_sha256(store)
    size = os.path.getsize(store)
    rc, err = phttpd.start_failing(mode="wal", store=store)
    assert rc == code, (rc, err)
    assert "listening" not in err, err
    assert re.search(words, err, re.I), f"message does not name the problem ({words}): {err!r}"
    assert store in err, f"message does not name the file: {err!r}"
    cp = run_tool("--store", store, "check")
    assert cp.returncode == code, f"paste-store check: exit {cp.returncode}\n{cp.stdout}{cp.stderr}"
    assert re.search(words, cp.stdout + cp.stderr, re.I), cp.stdout + cp.stderr
    assert os.path.getsize(store) == size and file_sha256(store) == before, \
        "the damaged store was modified (reformatted?)"


def _edit_superblock(store, edit, fix_crc=True):
    with open(store, "r+b") as f:
        sb = bytearray(f.read(4096))
        where = find_superblock_crc(bytes(sb))
        edit(sb, where)
        if fix_crc and where:
            off, recompute = where
            struct.pack_into("<I", sb, off, recompute(bytes(sb)))
        f.seek(0)
        f.write(sb)


def test_bad_magic_refused(phttpd):
    store, _ = make_store(phttpd, 2)
    assert Path(store).read_bytes()[:8] == b"PASTESTO", "magic is not at offset 0"
    _edit_superblock(store, lambda sb, _: sb.__setitem__(slice(0, 8), b"NOTPASTE"))
    _refuses(phttpd, store, r"magic", code=2)


def test_other_version_refused(phttpd):
    store, _ = make_store(phttpd, 2)
    off = version_offset(Path(store).read_bytes()[:64])
    assert off is not None, f"no u32 field equal to version {STORE_VERSION} in the superblock's first 64 bytes"
    _edit_superblock(store, lambda sb, _: struct.pack_into("<I", sb, off, 99))
    _refuses(phttpd, store, r"version", code=2)


def test_bad_superblock_checksum_refused(phttpd):
    store, _ = make_store(phttpd, 2)
    where = find_superblock_crc(Path(store).read_bytes()[:4096])
    assert where, "no CRC32C field found in the superblock (see find_superblock_crc)"

    def flip(sb, w):
        sb[w[0]] ^= 0xFF
    _edit_superblock(store, flip, fix_crc=False)
    _refuses(phttpd, store, r"checksum|crc")


@pytest.mark.parametrize("keep", ["half", "100 bytes", "empty"])
def test_truncated_store_refused(phttpd, keep):
    store, _ = make_store(phttpd, 2)
    size = os.path.getsize(store)
    os.truncate(store, {"half": size // 2, "100 bytes": 100, "empty": 0}[keep])
    _refuses(phttpd, store, r"truncat|too small|short|empty")
