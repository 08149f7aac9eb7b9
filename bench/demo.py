#!/usr/bin/env python3
"""`make demo`: about a minute showing what paste does.

1. RPC, uring vs epoll side by side at 100 connections (rpc.py --quick).
2. Durability: phttpd --mode wal under POST load is killed with SIGKILL,
   restarted on the same store, and every acknowledged record is read back
   and compared by sha256; then paste-store checks the file offline.
3. WAL, uring vs uring --copy vs epoll with 10 us emulated PM latency per
   fence at 100 connections (wal.py --quick).

Exits non-zero if any acknowledged record is lost or damaged, the store
check fails, or a benchmark run fails.
"""

import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import paste_proc  # noqa: E402  (harness put python/ on sys.path)
import rpc  # noqa: E402
import wal  # noqa: E402
import walclient  # noqa: E402

LOAD_CONNS = 50
LOAD_SECONDS = 6.0
KILL_AFTER = 3.5
WAL_ARGS = ["--mode", "wal", "--store-size", "1G"]


def banner(text):
    print(f"\n{'=' * 72}\n{text}\n{'=' * 72}", flush=True)


def show_server_lines(server, prefix="    "):
    for line in server.stderr_tail:
        print(prefix + line)


def durability_demo():
    """Returns 0 when every acknowledged record survived the crash intact."""
    server_cpu, client_cpu = harness.default_cpus()
    os.sched_setaffinity(0, {client_cpu})
    # 1G: room for every POST of the run (~130 K buffers in the default
    # 256M store), so every one of them is acknowledged, none refused (507).
    first = harness.Server("wal-demo", WAL_ARGS, server_cpu, "/dev/shm")
    second = None
    try:
        first.start()
        print(f"started: phttpd {' '.join(WAL_ARGS)} --store {first.store} (pid {first.pid})")
        show_server_lines(first)
        stats, acked = {}, {}

        def load():
            acked.update(walclient.run_load("127.0.0.1", first.port, LOAD_CONNS,
                                            LOAD_SECONDS, stats=stats))

        loader = threading.Thread(target=load)
        loader.start()
        time.sleep(KILL_AFTER)
        first.kill9()
        print(f"kill -9 after {KILL_AFTER} s of POST load on {LOAD_CONNS} connections")
        loader.join()
        print("load client: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
        if not acked:
            print("FAIL: no record was acknowledged before the kill")
            return 1

        second = harness.Server("wal-demo-restart", WAL_ARGS, server_cpu,
                                store=first.store)
        t0 = time.monotonic()
        second.start()
        print(f"restarted on the same store in {time.monotonic() - t0:.2f} s:")
        show_server_lines(second)
        res = walclient.verify("127.0.0.1", second.port, acked)
        code = second.stop()
        if code != 0:
            print(f"FAIL: the restarted server exited with code {code} on SIGTERM")
        check = subprocess.run([paste_proc.binary("paste-store"), "--store",
                                first.store, "check"],
                               capture_output=True, text=True, timeout=120)
        print(f"paste-store check (exit {check.returncode}):")
        for line in (check.stdout + check.stderr).strip().splitlines():
            print("    " + line)
        for kind in ("lost", "damaged"):
            for lsn, status in res[kind][:10]:
                print(f"    {kind}: LSN {lsn} -> {status}")
        intact, lost, damaged = len(res["intact"]), len(res["lost"]), len(res["damaged"])
        print(f"\n{len(acked)} acknowledged records, {intact} intact, {lost} lost"
              + (f", {damaged} damaged" if damaged else ""))
        bad = (lost or damaged or check.returncode != 0 or code != 0
               or stats.get("duplicate_lsn") or stats.get("protocol_errors"))
        return 1 if bad else 0
    finally:
        if second is not None:
            second.stop()
        first.stop()  # already dead: removes the store file


def part(failed, name, fn):
    """Run one part; a failure is reported and the next part still runs."""
    try:
        if fn():
            failed.append(name)
    except (harness.BenchError, paste_proc.MissingBinary) as e:
        print(f"demo: {name}: {e}", file=sys.stderr)
        failed.append(name)


def main():
    failed = []
    banner("1/3 RPC: 44 B requests, uring vs epoll, 100 connections (quick: 1 x 3 s)")
    part(failed, "RPC benchmark", lambda: rpc.run(["--quick"], kind="demo-rpc"))
    banner("2/3 Durability: kill -9 under load, restart, read back every acknowledged record")
    part(failed, "durability", durability_demo)
    banner("3/3 WAL: 1 KiB POSTs, 10 us emulated PM fence, uring vs uring --copy vs epoll")
    part(failed, "WAL benchmark", lambda: wal.run(["--quick"], kind="demo-wal"))
    if failed:
        print(f"\ndemo: FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    print("\ndemo: all parts passed")
    return 0


if __name__ == "__main__":
    harness.main_guard(main)
