"""Several worker threads: one ring, SO_REUSEPORT listener and log lane
each, one shared store. Records appended by one thread are read through
another, survive kill -9, and the store checks clean."""
import shutil
import subprocess
import sys

import pytest

from conftest import HERE, check_records, get_stats, run_tool

sys.path.insert(0, str(HERE.parent.parent / "bench"))
import walclient  # noqa: E402


@pytest.mark.slow
def test_rpc_two_threads_under_wrk(phttpd, engine):
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed")
    srv = phttpd.start(engine, extra_args=["--threads", "2"])
    cp = subprocess.run(["wrk", "-t1", "-c64", "-d2s", f"http://127.0.0.1:{srv.port}/"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    assert "Non-2xx" not in cp.stdout and "Socket errors" not in cp.stdout, cp.stdout
    st = get_stats(srv.port)
    assert st["threads"] == 2
    assert st["requests"] >= int(cp.stdout.split(" requests in")[0].split()[-1])
    srv.stop()


@pytest.mark.crash
def test_wal_two_threads_kill9(phttpd, engine):
    store = phttpd.new_store()
    args = ["--threads", "2", "--store-size", "256M"]
    srv = phttpd.start(engine, mode="wal", extra_args=args, store=store)
    load = walclient.Load("127.0.0.1", srv.port, conns=16, duration=1.5,
                          body_sizes=(10, 1024, 3000), seed=7).start()
    load.join(0.8)
    srv.kill9()
    load.join(15)
    assert not load.alive()
    acked = load.snapshot()
    assert acked, f"nothing acknowledged: {load.stats()}"
    srv.start()
    # Each connection lands on either thread: every GET may cross lanes.
    bad = check_records(srv.port, acked)
    assert not bad, f"{len(bad)} of {len(acked)} acknowledged records lost: {bad[:10]}"
    info = run_tool("--store", store, "info").stdout
    assert "2 lanes" in info, info
    srv.stop()
    cp = run_tool("--store", store, "check")
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_threads_beyond_lanes_refused(phttpd):
    store = phttpd.new_store()
    phttpd.start("uring", mode="wal", store=store).stop()       # 2 lanes
    code, err = phttpd.start_failing("uring", mode="wal", extra_args=["--threads", "3"], store=store)
    assert code != 0
    assert "lanes" in err, err
