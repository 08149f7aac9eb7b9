#!/usr/bin/env python3
"""docs/results.md, and README.md's headline table, from the benchmarks' JSON.

    python3 bench/results_md.py                 # write docs/results.md and the README table
    python3 bench/results_md.py --check         # exit 1 if either differs from the JSON
    python3 bench/results_md.py --take rpc bench/results/rpc-20261126-120000.json
                                                # keep that run as docs/figures/rpc.json,
                                                # redraw its figure, then write both

Every table and ratio comes from docs/figures/<name>.json (the files the
benchmarks write under bench/results/, {"meta", "results"}; files written
before the meta existed are a bare list of points, and their meta is
taken from LEGACY below). The prose between the tables is hand-written in
docs/results-notes/<section>.md and copied in as it is, so the numbers
cannot drift from the figures. A section whose JSON is missing says which
command makes it. Python 3 standard library only (the figures need
matplotlib, through bench/plot.py, only with --take).
"""

import argparse
import json
import os
import re
import shutil
import sys

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
import harness  # noqa: E402  (the reports' number formats: one definition)
import plot  # noqa: E402  (the JSON's two forms; figures, matplotlib only when drawing)
FIGURES = os.path.join(ROOT, "docs", "figures")
NOTES = os.path.join(ROOT, "docs", "results-notes")
RESULTS_MD = os.path.join(ROOT, "docs", "results.md")
README = os.path.join(ROOT, "README.md")
HEADLINE_BEGIN = "<!-- headline table: written by bench/results_md.py from docs/figures/*.json -->"
HEADLINE_END = "<!-- end of headline table -->"

AMD = ("2-vCPU KVM guest (Firecracker), AMD EPYC (Zen 3, 2.45 GHz, 512 KiB L2 per core, "
       "32 MiB L3), Linux 6.18.44")
EARLIER = "2-vCPU KVM guest, Linux 6.18 (CPU model not recorded)"
PLOAD = "bench/pload, one thread, io_uring"
KVS_SHM = ("python3 bench/kvs.py --client pload --tests set,get --conns 50,100 --pipeline 1,16 "
           "--reps 3 --duration 4 --sizes 1024 "
           "--systems pkvs,redis-always,redis-off,floor,floor-durable")
KVS_DISK_FLOOR = ("python3 bench/kvs.py --client pload --medium disk --tests set --conns 50,100 "
                  "--pipeline 1 --reps 3 --duration 4 --sizes 1024 "
                  "--systems pkvs,floor-durable,redis-always")
KVS_DISK = ("python3 bench/kvs.py --client pload --medium disk --tests set --conns 50,100 "
            "--pipeline 1 --reps 3 --duration 4 --sizes 1024 "
            "--systems pkvs,pkvs-pagecache,pkvs-epoll-batch,redis-always")

KVS_TYPES = ("python3 bench/kvs.py --tests set,get,incr,mset,hset,lpush,rpush,lpop,rpop,sadd,"
             "spop,zadd,zpopmin,lrange_100,lrange_300,lrange_600 --sizes 1024,3 --conns 50 "
             "--pipeline 1,16 --systems pkvs,redis-always,redis-off,valkey-off --reps 3 "
             "--duration 3")

PUBSUB = "python3 bench/pubsub.py --reps 3"

# The meta of the files written before the JSON carried its own: the
# commands, machines and dates recorded beside the figures at the time.
LEGACY = {
    "rpc.json": {"command": "python3 bench/rpc.py --client pload --conns 1,50,100,400 "
                            "--reps 3 --duration 4",
                 "date": "2026-11-23", "machine": EARLIER + "; stores on /dev/shm (tmpfs)",
                 "client": PLOAD, "reps": 3, "duration": 4},
    "wal.json": {"command": "python3 bench/wal.py --configs emul0,emul10 --conns 100 "
                            "--reps 3 --duration 4",
                 "date": "2026-11-23", "machine": EARLIER + "; stores on /dev/shm (tmpfs)",
                 "client": PLOAD, "reps": 3, "duration": 4},
    "short.json": {"command": "python3 bench/short.py --reps 5 --duration 5",
                   "date": "2026-11-23", "machine": EARLIER + "; stores on /dev/shm (tmpfs)",
                   "client": PLOAD + " (--reconnect)", "reps": 5, "duration": 5},
    "kvs-floor.json": {"command": KVS_SHM, "date": "2026-11-26",
                       "machine": AMD + "; stores on /dev/shm (tmpfs)",
                       "client": PLOAD + " (--resp)", "reps": 3, "duration": 4},
    "kvs-disk-floor.json": {"command": KVS_DISK_FLOOR, "date": "2026-11-26",
                            "machine": AMD + "; stores in /var/tmp: ext4 on a virtio disk",
                            "client": PLOAD + " (--resp)", "reps": 3, "duration": 4},
    "kvs-disk.json": {"command": KVS_DISK.replace(",pkvs-epoll-batch", ""),
                      "date": "2026-11-26",
                      "machine": AMD + "; stores in /var/tmp: ext4 on a virtio disk",
                      "client": PLOAD + " (--resp)", "reps": 3, "duration": 4},
}


PER_SECOND = {"req": "req", "conn": "conn", "op": "ops", "msg": "msg"}
# The JSON's keys of a point's name and of a run's rate, CPU and syscalls:
# the request-counting benchmarks', and pubsub.py's (per delivered message).
KEYS = {"workload": "workload", "rate": "rps", "cpu": "cpu_us_per_req",
        "sys": "syscalls_per_req"}
MSG_KEYS = {"workload": "point", "rate": "msgs_per_s", "cpu": "cpu_us_per_msg",
            "sys": "syscalls_per_msg"}


class Source:
    """One JSON file of docs/figures feeding a section: which systems of it
    to show (None: all), and a label when a section has several."""

    def __init__(self, name, command, systems=None, label=None):
        self.name, self.command, self.systems, self.label = name, command, systems, label


class Section:
    """One workload: its JSON, the systems compared, the notes file. peers
    get a ratio column each; floor_of adds "pkvs over it" (that system's
    CPU per op minus the row's, in the same point)."""

    def __init__(self, key, title, sources, unit, peers, figures=(), floor_of=None, keys=KEYS):
        self.key, self.title, self.sources, self.unit = key, title, sources, unit
        self.peers, self.figures, self.floor_of = peers, list(figures), floor_of
        self.keys = keys


SECTIONS = [
    Section("rpc", "RPC",
            [Source("rpc.json", LEGACY["rpc.json"]["command"])], "req",
            ["epoll", "nginx"], ["rpc"]),
    Section("short", "Short connections",
            [Source("short.json", LEGACY["short.json"]["command"])], "conn",
            ["epoll", "nginx", "nginx-deferred"], ["short"]),
    Section("wal-pm", "WAL on emulated PM",
            [Source("wal.json", LEGACY["wal.json"]["command"])], "req",
            ["epoll", "uring --copy"], ["wal"]),
    Section("wal-disk", "WAL on disk",
            [Source("wal-disk.json", "python3 bench/wal.py --configs fsync --conns 50,100 "
                    "--reps 3 --duration 4")], "req",
            ["epoll", "uring --copy"], ["wal-disk"]),
    Section("kvs-shm", "pkvs against Redis on /dev/shm",
            [Source("kvs-floor.json", KVS_SHM,
                    ["pkvs", "pkvs-epoll-batch", "redis-always", "redis-off"])], "op",
            ["redis-always", "redis-off"], ["kvs-floor"]),
    Section("kvs-disk", "pkvs against Redis on disk",
            [Source("kvs-disk.json", KVS_DISK)], "op", ["redis-always"], ["kvs-disk"]),
    Section("kvs-types", "pkvs's data types against Redis and Valkey",
            [Source("kvs-types.json", KVS_TYPES)], "op",
            ["redis-always", "redis-off", "valkey-off"], ["kvs-types"]),
    Section("pubsub", "PUBLISH fan-out",
            [Source("pubsub.json", PUBSUB)], "msg", ["redis-off", "valkey-off"], [],
            keys=MSG_KEYS),
    Section("floors", "The floors",
            [Source("kvs-floor.json", KVS_SHM, ["floor", "floor-durable"], "/dev/shm"),
             Source("kvs-disk-floor.json", KVS_DISK_FLOOR, ["floor", "floor-durable"], "disk")],
            "op", ["redis-always", "redis-off"], ["kvs-disk-floor"], floor_of="pkvs"),
]

# README's headline table: (workload, section, source file, system, peer,
# workload in the JSON, client counts, what the peer is).
HEADLINE = [
    ("RPC, keep-alive, 64-byte reply", "rpc", "rpc.json", "uring", "epoll", "rpc",
     (50, 100), "epoll + read/write"),
    ("RPC, keep-alive, 64-byte reply", "rpc", "rpc.json", "uring", "nginx", "rpc",
     (50, 100), "nginx 1.22, one worker"),
    ("a connection per request", "short", "short.json", "uring", "nginx", "short",
     (50, 400), "nginx 1.22, one worker"),
    ("durable log, 1 KiB POST, 10 us PM fence", "wal-pm", "wal.json", "uring", "epoll",
     "wal emulated pm 10us", (50, 100), "epoll + read/write"),
    ("durable log on disk, 1 KiB POST", "wal-disk", "wal-disk.json", "uring", "epoll",
     "wal fsync (disk)", (50, 100), "an fdatasync per request"),
    ("durable SET, 1 KiB, /dev/shm", "kvs-shm", "kvs-floor.json", "pkvs", "redis-always",
     "SET 1024 B", (50, 100), "Redis 7, appendfsync always"),
    ("GET, 1 KiB, /dev/shm", "kvs-shm", "kvs-floor.json", "pkvs", "redis-off",
     "GET 1024 B", (50, 100), "Redis 7, persistence off"),
    ("durable SET, 1 KiB, disk", "kvs-disk", "kvs-disk.json", "pkvs", "redis-always",
     "SET 1024 B", (50, 100), "Redis 7, appendfsync always"),
]


class DocError(Exception):
    """A failure the user should see as one sentence."""


# ---------------------------------------------------------------- data

def split(doc, name):
    """(meta, points, legacy) of a results JSON in either form (plot.split);
    a bare list's meta comes from LEGACY."""
    try:
        meta, points = plot.split(doc)
    except ValueError as e:
        raise DocError(f"{name}: {e}")
    legacy = isinstance(doc, list)
    return (dict(LEGACY.get(name, {})) if legacy else meta), points, legacy


_cache = {}


def load(name):
    """(meta, points, legacy) of docs/figures/<name>, or None if absent."""
    if name not in _cache:
        path = os.path.join(FIGURES, name)
        if not os.path.exists(path):
            _cache[name] = None
        else:
            try:
                with open(path) as f:
                    _cache[name] = split(json.load(f), name)
            except ValueError as e:
                raise DocError(f"{path}: not JSON ({e})")
    return _cache[name]


def conns_of(p):
    return p.get("conns", p.get("clients"))


fmt = harness.fmt
median = harness.median_of


def spread(runs, key, digits, scale=1.0):
    """The median of the runs' key with [min-max], as the reports print it."""
    return harness.spread([r.get(key) for r in runs if r], digits, scale)


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "n/a"


def find(points, workload, conns, system, name="workload"):
    return next((p["runs"] for p in points if p[name] == workload
                 and conns_of(p) == conns and p["system"] == system), None)


# ---------------------------------------------------------------- text

def anchor(title):
    """GitHub's anchor for a heading."""
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


def machine_text(m):
    if isinstance(m, str):
        return m
    if not m:
        return "not recorded"
    cpu = m.get("cpu") or "CPU model unknown"
    parts = [f"{m.get('ncpu')} {'vCPUs' if m.get('virtual') else 'CPUs'}, {cpu}"]
    if m.get("memory_gib"):
        parts.append(f"{m['memory_gib']:g} GiB")
    parts.append(f"Linux {m.get('kernel')}")
    if m.get("virtual"):
        parts.append("a virtual machine")
    stores = []
    for s in m.get("stores") or []:
        where = s.get("fs") or "unknown file system"
        if s.get("device"):
            where += f" on {s['device']}"
            if s.get("driver"):
                where += f" ({s['driver']})"
        stores.append(f"{s.get('dir')}: {where}")
    text = ", ".join(parts)
    return text + ("; stores in " + "; ".join(stores) if stores else "")


def about_runs(loaded):
    """The lines that say how, where and when a section's runs were made
    (a line the run before already said is not repeated)."""
    lines, said, legacy = [], set(), []
    for src, (meta, _, old) in loaded:
        label = f" ({src.label})" if src.label else ""
        cpus = meta.get("cpus")
        pin = (f"servers on CPU {cpus['server']}, the client on CPU {cpus['client']}"
               if cpus else "servers on CPU 1, the client on CPU 0")
        run = [f"- Command{label}: `{meta.get('command') or src.command}`",
               f"- Machine: {machine_text(meta.get('machine'))}",
               f"- {meta.get('reps', '?')} repetition{'' if meta.get('reps') == 1 else 's'} "
               + (f"of {meta['duration']} s " if meta.get('duration') else "") +
               f"per point, systems interleaved; {pin}; client: {meta.get('client') or 'n/a'}; "
               f"{meta.get('date', 'date not recorded')}"]
        lines += [l for l in run if l not in said]
        said.update(run)
        if old:
            legacy.append(f"`{src.name}`")
    legacy = list(dict.fromkeys(legacy))
    if len(legacy) == 1:
        lines.append(f"- {legacy[0]} predates the meta in the JSON: its command, machine and "
                     "date were recorded beside its figure.")
    elif legacy:
        lines.append(f"- {' and '.join(legacy)} predate the meta in the JSON: their commands, "
                     "machines and dates were recorded beside their figures.")
    return lines


def notes(key):
    path = os.path.join(NOTES, key + ".md")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read().strip()


def section_table(sec, loaded):
    """The section's one table: a row per (source, point, system)."""
    u = sec.unit
    rate = PER_SECOND[u]
    many = len(loaded) > 1
    batch = any(r and r.get("mean_batch") is not None
                for _, (_, pts, _) in loaded for p in pts for r in p["runs"])
    cols = (["medium"] if many else []) + [
        "workload", "clients", "system", f"K {rate}/s median [min-max]",
        f"server CPU us/{u} median [min-max]", f"syscalls/{u}"]
    if batch:
        cols.append("events per pass")
    cols += [f"vs {p}: CPU, {rate}/s" for p in sec.peers]
    if sec.floor_of:
        cols.append(f"{sec.floor_of} over it, us/{u}")
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for src, (_, pts, _) in loaded:
        for p in pts:
            if src.systems is not None and p["system"] not in src.systems:
                continue
            runs = [r for r in p["runs"] if r]
            k = sec.keys
            name = p[k["workload"]]
            cells = ([src.label] if many else []) + [
                name, str(conns_of(p)), p["system"],
                spread(runs, k["rate"], 1, 1e-3), spread(runs, k["cpu"], 3 if u == "msg" else 2),
                fmt(median(runs, k["sys"]), 3)]
            if batch:
                cells.append(fmt(median(runs, "mean_batch"), 1))
            cpu, rate = median(runs, k["cpu"]), median(runs, k["rate"])
            for peer in sec.peers:
                other = find(pts, name, conns_of(p), peer, k["workload"])
                if peer == p["system"] or other is None:
                    cells.append("-")
                    continue
                cells.append(f"{ratio(cpu, median(other, k['cpu']))}, "
                             f"{ratio(rate, median(other, k['rate']))}")
            if sec.floor_of:
                own = find(pts, name, conns_of(p), sec.floor_of, k["workload"])
                oc = median(own, k["cpu"]) if own else None
                cells.append(f"{oc - cpu:+.2f}" if oc is not None and cpu is not None else "-")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def take_command(src):
    name = src.name[:-len(".json")]
    return (f"python3 bench/results_md.py --take {name} "
            f"bench/results/{name.split('-')[0]}-<time>.json")


def again_line(sec, loaded):
    takes = [f"`{take_command(src)}`" + (f" for the {src.label} run" if src.label else "")
             for src, _ in loaded]
    return ("To run it again: the command above (its report and JSON land in bench/results/), "
            "then " + ", and ".join(takes) + ": that keeps the JSON in docs/figures, redraws "
            "the figure and rewrites this file and the README's headline table.")


def section_md(sec, missing):
    out = [f"## {sec.title}", ""]
    loaded = []
    for src in sec.sources:
        got = load(src.name)
        if got is None:
            missing.append((sec.title, src))
            out.append(f"No run is kept for this section yet (`docs/figures/{src.name}` is "
                       f"missing). Make it with `{src.command}`, then `{take_command(src)}`.")
            out.append("")
        else:
            loaded.append((src, got))
    if loaded:
        out += about_runs(loaded)
        out += ["", section_table(sec, loaded), ""]
        for fig in sec.figures:
            if os.path.exists(os.path.join(FIGURES, fig + ".svg")):
                out += [f"![{sec.title}](figures/{fig}.svg)", ""]
    text = notes(sec.key)
    if text:
        out += [text, ""]
    if loaded:
        out += [again_line(sec, loaded), ""]
    return "\n".join(out)


def results_md():
    missing = []
    body = [section_md(sec, missing) for sec in SECTIONS]
    extra = notes("design")
    head = ["# Measured results", "",
            "<!-- Written by bench/results_md.py from docs/figures/*.json and "
            "docs/results-notes/*.md; edit those, then run it. -->", ""]
    method = notes("method")
    if method:
        head += [method, ""]
    toc = [f"- [{s.title}](#{anchor(s.title)})" for s in SECTIONS]
    if extra:
        toc.append("- [Measurements behind design choices]"
                   "(#measurements-behind-design-choices)")
    head += toc + ["", ""]
    text = "\n".join(head) + "\n".join(body)
    if extra:
        text += "## Measurements behind design choices\n\n" + extra + "\n"
    return text.rstrip("\n") + "\n", missing


def pair_cells(points, workload, system, peer, conns):
    """(clients, CPU ratios, rate ratios, syscalls) over the client counts
    both systems have at this workload."""
    got = [c for c in conns if find(points, workload, c, system) and find(points, workload, c, peer)]
    if not got:
        return None
    cpu, rate, sys_a, sys_b = [], [], [], []
    for c in got:
        a, b = find(points, workload, c, system), find(points, workload, c, peer)
        cpu.append(ratio(median(a, "cpu_us_per_req"), median(b, "cpu_us_per_req")))
        rate.append(ratio(median(a, "rps"), median(b, "rps")))
        sys_a.append(fmt(median(a, "syscalls_per_req"), 3))
        sys_b.append(fmt(median(b, "syscalls_per_req"), 2))
    return (" / ".join(map(str, got)), " / ".join(cpu), " / ".join(rate),
            f"{' / '.join(sys_a)} vs {' / '.join(sys_b)}")


def headline_table():
    titles = {s.key: s.title for s in SECTIONS}
    lines = ["| workload | paste against | clients | server CPU per op | ops/s | "
             "syscalls per op | details |", "|---|---|---|---|---|---|---|"]
    for what, key, name, system, peer, workload, conns, against in HEADLINE:
        got = load(name)
        cells = got and pair_cells(got[1], workload, system, peer, conns)
        if not cells:
            continue        # no run kept yet: results.md names the command
        link = f"[results](docs/results.md#{anchor(titles[key])})"
        lines.append(f"| {what} | {against} | {cells[0]} | {cells[1]} | {cells[2]} | "
                     f"{cells[3]} | {link} |")
    return "\n".join(lines)


def readme_with_table(text):
    if HEADLINE_BEGIN not in text or HEADLINE_END not in text:
        raise DocError(f"README.md has no headline markers ({HEADLINE_BEGIN} ... {HEADLINE_END})")
    head, rest = text.split(HEADLINE_BEGIN, 1)
    _, tail = rest.split(HEADLINE_END, 1)
    return head + HEADLINE_BEGIN + "\n" + headline_table() + "\n" + HEADLINE_END + tail


# ---------------------------------------------------------------- main

def take(name, path):
    """Keep a run as docs/figures/<name>.json and redraw its figure."""
    known = {s.name[:-len(".json")] for sec in SECTIONS for s in sec.sources}
    if name not in known:
        raise DocError(f"--take: {name!r} feeds no section; one of {', '.join(sorted(known))}")
    try:
        with open(path) as f:
            meta, _, legacy = split(json.load(f), os.path.basename(path))
    except OSError as e:
        raise DocError(f"--take: {e}")
    except ValueError as e:
        raise DocError(f"--take: {path}: not JSON ({e})")
    if legacy:
        raise DocError(f"--take: {path} has no meta (written before bench/harness.py recorded "
                       "one): run the benchmark again")
    dest = os.path.join(FIGURES, name + ".json")
    shutil.copyfile(path, dest)
    _cache.pop(name + ".json", None)
    try:
        with open(dest) as f:
            figs = plot.figure(meta.get("kind") or name.split("-")[0], json.load(f), dest[:-5])
        print("redrew " + ", ".join(os.path.relpath(p, ROOT) for p in figs))
    except ImportError:
        print("results_md.py: matplotlib is not installed (make deps): the figure of "
              f"{name} was not redrawn", file=sys.stderr)


def main(argv=None):
    p = argparse.ArgumentParser(description="Write docs/results.md and README.md's headline "
                                "table from docs/figures/*.json.")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if either file differs from what the JSON gives")
    p.add_argument("--take", nargs=2, action="append", metavar=("NAME", "JSON"), default=[],
                   help="first keep JSON (a bench/results file) as docs/figures/NAME.json "
                   "and redraw its figure")
    args = p.parse_args(argv)
    try:
        if args.check and args.take:
            raise DocError("--check and --take do not go together")
        for name, path in args.take:
            take(name, path)
        text, missing = results_md()
        with open(README) as f:
            readme = f.read()
        new_readme = readme_with_table(readme)
        with open(RESULTS_MD) as f:
            old = f.read()
    except (DocError, OSError) as e:
        print(f"results_md.py: {e}", file=sys.stderr)
        return 1
    if args.check:
        stale = [n for n, a, b in (("docs/results.md", old, text),
                                   ("README.md", readme, new_readme)) if a != b]
        for n in stale:
            print(f"results_md.py: {n} differs from what docs/figures/*.json give: "
                  "run python3 bench/results_md.py", file=sys.stderr)
        return 1 if stale else 0
    with open(RESULTS_MD, "w") as f:
        f.write(text)
    if new_readme != readme:
        with open(README, "w") as f:
            f.write(new_readme)
    print(f"wrote docs/results.md ({text.count(chr(10))} lines) and README.md's headline table")
    for title, src in missing:
        print(f"no run kept for \"{title}\" (docs/figures/{src.name}): make it with "
              f"`{src.command}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
