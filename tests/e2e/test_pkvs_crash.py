"""Crash consistency of pkvs's tree: every acknowledged SET present with its
value, every acknowledged DEL absent, nothing unacknowledged half applied.

(a) kill -9 under concurrent SET/DEL load (checkpoints every few hundred
    records, so crashes land before, during and after checkpoints), restart,
    check; emulated PM (/dev/shm) and fsync (/var/tmp), both engines.
(b) crash images from pkvs-shim (only flushed-and-fenced lines, or lines a
    completed fdatasync covered): a copy taken at any moment, opened by
    pkvs, must hold the effect of every operation acknowledged before the
    copy began; paste-store check must find the tree and the reference
    counts consistent.

The load: N client threads, each owning its own keys and issuing one
command at a time, so per key the order of operations is known. A key's
state after a crash must be the result of its last acknowledged operation
or of a later (unacknowledged or in-flight) one, never anything else.
"""
import random
import threading
import time
from pathlib import Path

import pytest

from conftest import (ConnectionClosed, RespConn, RespError, check_image_copy, copy_image_at,
                      run_tool)

# Every test here crashes a server or damages its store.
pytestmark = pytest.mark.crash

CRASH_STORE_SIZE = "256M"
VALUE_SIZES = (1, 10, 100, 1000, 2048, 3000, 9000)
ABSENT = None


class OwnedKeysLoad:
    """Threads doing SET/DEL on keys of their own. history[key] is the list
    of (state after the op, ack time or None) in issue order."""

    def __init__(self, port, threads, duration, seed, keys_per_thread=40):
        self.port = port
        self.lock = threading.Lock()
        self.history = {}
        self.problems = []
        self.ops = 0
        self.deadline = time.monotonic() + duration
        self.threads = [threading.Thread(target=self._run,
                                         args=(i, random.Random(seed + i), keys_per_thread))
                        for i in range(threads)]

    def _run(self, tid, rng, nkeys):
        keys = [f"t{tid}:k{j}".encode() for j in range(nkeys)]
        try:
            conn = RespConn(self.port, timeout=10)
        except OSError as e:
            with self.lock:
                self.problems.append(repr(e))
            return
        try:
            while time.monotonic() < self.deadline:
                key = rng.choice(keys)
                if rng.random() < 0.25:
                    state, cmd = ABSENT, ("DEL", key)
                else:
                    state = rng.randbytes(rng.choice(VALUE_SIZES))
                    cmd = ("SET", key, state)
                entry = [state, None]
                with self.lock:
                    self.history.setdefault(key, []).append(entry)
                reply = conn.command(*cmd)
                ok = reply == "OK" if cmd[0] == "SET" else reply in (0, 1)
                if not ok:
                    with self.lock:
                        self.problems.append((cmd[0], reply))
                    return
                entry[1] = time.monotonic()
                with self.lock:
                    self.ops += 1
        except (OSError, AssertionError, ConnectionClosed) as e:
            # After the kill the op in flight stays unacknowledged; before
            # it, a lost connection is a failure.
            if self.killed_at is None or time.monotonic() < self.killed_at:
                with self.lock:
                    self.problems.append(repr(e))
        finally:
            conn.close()

    killed_at = None     # set by the test just before kill -9

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        for t in self.threads:
            t.join(20)

    def allowed(self, key, before=None):
        """The states key may be in after a crash, given acks up to `before`
        (monotonic time; None: every ack so far)."""
        with self.lock:
            hist = list(self.history.get(key, []))
        last = -1
        for i, (_, acked) in enumerate(hist):
            if acked is not None and (before is None or acked < before):
                last = i
        states = [ABSENT] if last < 0 else [hist[last][0]]
        states += [s for s, _ in hist[last + 1:]]
        return states


def check_state(port, load, before=None):
    """Every key's state against the load's history; returns the mismatches."""
    bad = []
    with RespConn(port, timeout=20) as c:
        for key in sorted(load.history):
            got = c.command("GET", key)
            assert not isinstance(got, RespError), got
            if got not in load.allowed(key, before):
                bad.append((key, None if got is None else len(got)))
    return bad


def check_tool_clean(store):
    cp = run_tool("--store", store, "check")
    assert cp.returncode == 0, f"paste-store check {store}: exit {cp.returncode}\n{cp.stdout}{cp.stderr}"


@pytest.mark.parametrize("durability", ["emulated", "fsync"])
@pytest.mark.slow
def test_kill9_under_set_del_load(pkvs, engine, durability):
    base = "/var/tmp" if durability == "fsync" else "/dev/shm"
    store = pkvs.new_store(base)
    args = ["--engine", engine, "--durability", durability, "--checkpoint-records", "400"]
    for round_ in range(3):
        srv = pkvs.start(args, store=store, store_size=CRASH_STORE_SIZE)
        load = OwnedKeysLoad(srv.resp_port, threads=8, duration=30, seed=random.getrandbits(32))
        load.start()
        time.sleep(random.uniform(0.8, 2.0))
        load.killed_at = time.monotonic()
        srv.kill9()
        load.join()
        assert not load.problems, load.problems[:5]
        assert load.ops > 100, f"only {load.ops} operations acknowledged before the kill"
        check_tool_clean(store)
        srv = pkvs.start(args, store=store)
        bad = check_state(srv.resp_port, load)
        assert not bad, f"round {round_}: {len(bad)} keys in a state no acknowledged history allows: {bad[:10]}"
        # Start the next round from a clean slate of histories.
        with RespConn(srv.resp_port) as c:
            assert c.command("FLUSHALL") == "OK"
        srv.stop(keep_store=True)



@pytest.mark.parametrize("durability", ["emulated", "fsync"])
@pytest.mark.slow
def test_shim_crash_images(pkvs, engine, durability):
    workdir = Path(pkvs.tmpdir())
    image = workdir / "image"
    store = pkvs.new_store("/var/tmp" if durability == "fsync" else "/dev/shm")
    args = ["--engine", engine, "--durability", durability, "--checkpoint-records", "300"]
    srv = pkvs.start(args, store=store, binary_name="pkvs-shim",
                     env={"PASTE_SHIM_IMAGE": str(image)}, store_size=CRASH_STORE_SIZE)
    assert image.is_file(), f"pkvs-shim did not create its image {image}"
    load = OwnedKeysLoad(srv.resp_port, threads=8, duration=2.0, seed=random.getrandbits(32))
    load.start()
    # Every copy holds the shim's lock, so no fence is applied while it
    # runs: a copy is the image at one instant between two fences. (An
    # unlocked copy spans many fences: its log would be older than its
    # buffers, which overwrites reuse, a state no crash produces. WAL
    # mode's test can copy unlocked because nothing frees buffers there.)
    # Acks before a copy's start must be in it.
    copies = copy_image_at(image, workdir, sorted(random.uniform(0.3, 1.8) for _ in range(4)),
                           time.monotonic, lambda i: True)
    load.join()
    srv.stop()
    assert not load.problems, load.problems[:5]
    assert load.ops > 100, f"only {load.ops} operations acknowledged"
    for copy, whole_fences, before in copies:
        check_image_copy(copy, whole_fences)
        img = pkvs.start(["--engine", engine, "--durability", durability], store=str(copy))
        bad = check_state(img.resp_port, load, before)
        assert not bad, f"{copy.name}: {len(bad)} keys in a state no acknowledged history allows: {bad[:10]}"
        img.stop()
