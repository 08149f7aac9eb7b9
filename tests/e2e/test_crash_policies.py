"""Crash images of pkvs in which a crash persisted a subset of what was
written back but not yet fenced, as real persistent memory (or a disk's
cache) may.

pkvs-shim runs SET/DEL load (each thread on keys of its own, one command
at a time) with a checkpoint every two records, so most barriers are a
checkpoint's (its pages, its meta, the log's truncation). PASTE_FAULT fails the Nth barrier (N drawn per run)
and PASTE_SHIM_CRASH decides which of the lines written back since the
last barrier reach the shim's image there: the last k in write-back order
("reverse") or a random subset ("random"), seeded per run. The image must
then open in pkvs with every acknowledged operation in effect and every
key in a state its history allows, and `paste-store check` must find it
clean: a log record of the unacknowledged batch whole behind one that is
not is a torn tail (its durable mark says it was never durable), not
damage. The seed and N are in the failure message, to replay a run.
"""
import random
import shutil
import time
from pathlib import Path

import pytest

from conftest import run_tool
from test_pkvs_crash import OwnedKeysLoad, check_state

pytestmark = pytest.mark.crash

EXIT_TIMEOUT = 15.0
# The barrier each engine pays: with io_uring in fsync mode the batches'
# are asynchronous commits, and the synchronous fdatasyncs are the
# checkpoints' and the log truncation's alone.
FAULT_OP = {("uring", "emulated"): "fence", ("epoll", "emulated"): "fence",
            ("epoll-batch", "emulated"): "fence", ("uring", "fsync"): "fdatasync",
            ("epoll", "fsync"): "fdatasync", ("epoll-batch", "fsync"): "fdatasync"}


def check_crash_image(copy):
    """paste-store check on the image: clean. Returns the problems."""
    cp = run_tool("--store", copy, "check")
    return [] if cp.returncode == 0 else [f"exit {cp.returncode}", cp.stdout, cp.stderr]


@pytest.mark.parametrize("durability,policy", [("emulated", "reverse"), ("emulated", "random"),
                                               ("fsync", "random")])
def test_crash_persists_a_subset(pkvs, engine, durability, policy):
    rng = random.Random()
    seed = rng.getrandbits(32)
    nth = rng.randint(40, 160)
    fault = f"{FAULT_OP[(engine, durability)]}:{nth}"
    crash = f"{policy}:{seed}"
    replay = f"PASTE_FAULT={fault} PASTE_SHIM_CRASH={crash}"
    image = Path(pkvs.tmpdir()) / "image"
    store = pkvs.new_store("/var/tmp" if durability == "fsync" else "/dev/shm")
    args = ["--engine", engine, "--durability", durability, "--checkpoint-records", "2"]
    srv = pkvs.start(args, store=store, binary_name="pkvs-shim",
                     env={"PASTE_SHIM_IMAGE": str(image), "PASTE_FAULT": fault,
                          "PASTE_SHIM_CRASH": crash})
    load = OwnedKeysLoad(srv.resp_port, threads=6, duration=EXIT_TIMEOUT, seed=seed,
                         keys_per_thread=30)
    load.start()
    rc = srv.wait_exit(EXIT_TIMEOUT)
    srv.killed = True                # stopped by itself: teardown expects no clean stop
    if rc is None:
        srv.proc.kill()
        srv.proc.wait()
    load.killed_at = time.monotonic()
    load.join()
    assert rc == 1, f"{replay}: exit {rc} (want 1: the store failed); stderr:\n{srv.stderr()}"
    # Once the store failed, replies are its error or a closed connection.
    unexpected = [p for p in load.problems if "store failed" not in str(p) and
                  not any(w in str(p) for w in ("Connection", "BrokenPipe", "closed"))]
    assert not unexpected, f"{replay}: {unexpected[:5]}"
    assert load.ops >= 5, f"{replay}: only {load.ops} operations acknowledged before the fault"
    copy = Path(pkvs.tmpdir()) / "image.store"
    shutil.copyfile(image, copy)
    problems = check_crash_image(copy)
    assert not problems, f"{replay}: paste-store check on the crash image: {problems}"
    img = pkvs.start(["--engine", engine, "--durability", durability], store=str(copy))
    bad = check_state(img.resp_port, load)
    assert not bad, (f"{replay}: {len(bad)} keys in a state no acknowledged history allows "
                     f"(of {load.ops} operations acknowledged): {bad[:10]}")
    img.stop()
