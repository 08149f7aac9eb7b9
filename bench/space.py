#!/usr/bin/env python3
"""How well pkvs uses its store: bytes of store per live value, the most
live data a store holds under random overwrites before it refuses a write,
and what the cleaner costs.

Points (each on a fresh store of --store-size, default 256M, /dev/shm):
- density: --keys redis-benchmark SETs of --sizes bytes (1024 and 100) to
  distinct random keys, 50 clients, one SET per read (-P 1: each arrives in
  a receive buffer of its own) and 16 (-P 16); reported: the store bytes
  that hold data (INFO pkvs_held_bytes, or used_memory where a build has no
  such field: every held buffer but the receive ring's
  empty ones) per live value byte. 1.0 would be a store holding nothing
  but the values.
- fill: random overwrites of 1 KiB values over a keyspace that grows by one
  new key every --grow overwrites, until the first write is refused (OOM);
  reported: live value bytes at that moment over the store's buffer bytes
  (the most the store held), the overwrites done, the cleaner's work, and
  the server's CPU per overwrite in the last tenth of the run (when the
  cleaner works hardest) beside that of the first tenth.
With --base-build DIR the same points run on that build's pkvs too, side
by side (a store of its own layout).

The client is redis-py (pipelines of 50): the numbers here are about the
store, not about speed; the CPU per op compares phases of one run.
Writes bench/results/space-<time>.md and .json.
"""

import argparse
import os
import random
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import paste_proc  # noqa: E402

try:
    import redis
except ImportError:
    redis = None


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def start(build, size, args=()):
    exe = os.path.join(build, "pkvs")
    srv = paste_proc.Pkvs(["--store-size", size, "--http-port", "off"] + list(args), exe=exe,
                          http=False)
    srv.start()
    return srv


def client(srv):
    return redis.Redis(host="127.0.0.1", port=srv.resp_port, protocol=2, socket_timeout=60)


def info(r):
    m = r.info("memory")
    m = {k: m.get(k) for k in ("used_memory", "pkvs_held_bytes", "maxmemory", "pkvs_live_bytes",
                                  "pkvs_live_buffers", "pkvs_clean_moved",
                                  "pkvs_clean_moved_bytes", "pkvs_clean_ms",
                                  "pkvs_space_checkpoints")}
    # The store's held buffers: pkvs_held_bytes where INFO has it (its
    # used_memory is the dataset maxmemory bounds), else used_memory.
    if m["pkvs_held_bytes"] is not None:
        m["used_memory"] = m["pkvs_held_bytes"]
    return m


def density(build, size, nkeys, vlen, pipeline):
    """redis-benchmark -t set over nkeys random keys, 50 clients: each SET
    in a read of its own (pipeline 1) or 16 to a read."""
    srv = start(build, size)
    try:
        # -r 1e9: nearly every key distinct, so every value stays live
        subprocess.run(["redis-benchmark", "-p", str(srv.resp_port), "-t", "set", "-q",
                        "-n", str(nkeys), "-r", "1000000000", "-d", str(vlen), "-c", "50",
                        "-P", str(pipeline)], check=True, capture_output=True, timeout=600)
        r = client(srv)
        time.sleep(1.2)          # a checkpoint: the log's references go
        r.ping()
        m = info(r)
        keys = r.dbsize()
        live = keys * vlen
        if m["used_memory"] is None:
            # A pkvs without INFO's Memory section: the buffers its store
            # holds, as paste-store info counts them once it stopped.
            srv.stop(keep_store=True)
            out = subprocess.run([os.path.join(build, "paste-store"), "--store", srv.store, "info"],
                                 capture_output=True, text=True, check=True).stdout
            g = re.search(r"buffers:\s+\d+ x (\d+) bytes: (\d+) held", out)
            m["used_memory"] = int(g.group(1)) * int(g.group(2))
        return {"point": f"density {vlen} B -P {pipeline}", "keys": keys, "value_bytes": vlen,
                "used_memory": m["used_memory"], "per_value_byte": m["used_memory"] / live,
                "info": m}
    finally:
        if srv.proc.poll() is None:
            srv.stop()
        else:
            srv.remove_store()


def fill(build, size, vlen, grow, seed):
    srv = start(build, size)
    try:
        r = client(srv)
        rng = random.Random(seed)
        keys, done, refused, samples = 1, 0, None, []
        val = b"x" * vlen
        t0 = time.time()
        while refused is None and time.time() - t0 < 600:
            pipe = r.pipeline(transaction=False)
            for _ in range(50):
                if done % grow == 0:
                    keys += 1
                    k = keys - 1
                else:
                    k = rng.randrange(keys)
                pipe.set(b"key:%09d" % k, val)
                done += 1
            for x in pipe.execute(raise_on_error=False):
                if x is not True and refused is None:
                    refused = x
            if done % 5000 < 50:
                samples.append((done, cpu_ticks(srv.proc.pid), r.info("memory")))
        m = info(r)
        cap = m["maxmemory"]
        if m["pkvs_live_bytes"] is None:
            # A pkvs without INFO's Memory section: the live values are its
            # keys' (every value vlen bytes), the store its buffers.
            m["pkvs_live_bytes"] = r.dbsize() * vlen
            g = re.search(r"(\d+) x (\d+)-byte buffers", srv.stderr())
            cap = int(g.group(1)) * int(g.group(2))
        tick = os.sysconf("SC_CLK_TCK")

        def cpu_per_op(a, b):
            return (b[1] - a[1]) / tick / max(1, b[0] - a[0]) * 1e6

        n = len(samples)
        first = cpu_per_op(samples[0], samples[max(1, n // 10)]) if n > 2 else None
        last = cpu_per_op(samples[n - 1 - max(1, n // 10)], samples[-1]) if n > 2 else None
        return {"point": f"fill {vlen} B", "overwrites": done, "keys": keys,
                "refused": str(refused) if refused is not None else None,
                "live_fraction": m["pkvs_live_bytes"] / cap if cap else None,
                "cpu_us_first_tenth": first, "cpu_us_last_tenth": last, "info": m}
    finally:
        srv.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--store-size", default="256M")
    p.add_argument("--keys", type=int, default=100000, help="density: distinct keys")
    p.add_argument("--sizes", default="1024,100")
    p.add_argument("--grow", type=int, default=8, help="fill: one new key every N overwrites")
    p.add_argument("--points", default="density,fill")
    p.add_argument("--base-build", help="also measure this build's pkvs")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if redis is None:
        raise harness.BenchError("redis-py is not installed (make deps)")
    builds = [("pkvs", str(paste_proc.BUILD))]
    if args.base_build:
        builds.append(("pkvs@base", args.base_build))
    rows = []
    for name, build in builds:
        for point in args.points.split(","):
            if point == "density":
                for vlen in (int(x) for x in args.sizes.split(",")):
                    for depth in (1, 16):
                        row = density(build, args.store_size, args.keys, vlen, depth)
                        row["system"] = name
                        rows.append(row)
                        print(f"{name} {row['point']}: {row['per_value_byte']:.2f} store bytes "
                              f"per value byte ({row['used_memory']} for {row['keys']} x {vlen})",
                              flush=True)
            elif point == "fill":
                row = fill(build, args.store_size, 1024, args.grow, args.seed)
                row["system"] = name
                rows.append(row)
                lf = row["live_fraction"]
                print(f"{name} {row['point']}: {row['overwrites']} overwrites over "
                      f"{row['keys']} keys until {row['refused'] or 'no refusal'}; live "
                      f"{lf * 100 if lf else 0:.1f} % of the store; CPU/op first tenth "
                      f"{row['cpu_us_first_tenth']}, last tenth {row['cpu_us_last_tenth']} us; "
                      f"moved {row['info']['pkvs_clean_moved']}", flush=True)
    lines = ["# Store space (bench/space.py)", "",
             f"- command: {' '.join(['space.py'] + sys.argv[1:])}",
             f"- store: {args.store_size} on /dev/shm, 2 KiB buffers", "",
             "| system | point | result |", "|---|---|---|"]
    for row in rows:
        if row["point"].startswith("density"):
            res = f"{row['per_value_byte']:.2f} store bytes per value byte"
        else:
            lf = row["live_fraction"] or 0
            res = (f"{lf * 100:.1f} % of the store live at the first refusal; "
                   f"CPU/op {row['cpu_us_first_tenth']:.1f} -> {row['cpu_us_last_tenth']:.1f} us"
                   if row["cpu_us_first_tenth"] is not None else f"{lf * 100:.1f} % live")
        lines.append(f"| {row['system']} | {row['point']} | {res} |")
    harness.save("space", "\n".join(lines), rows)


if __name__ == "__main__":
    harness.main_guard(main)
