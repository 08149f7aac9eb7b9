#!/usr/bin/env python3
"""Figures of the benchmarks: PNG and SVG next to each report.

Every benchmark (rpc.py, wal.py, short.py, kvs.py) writes its raw results
as bench/results/<kind>-<time>.json: {"meta": {"kind", "title", "command",
"date", "machine", "cpus", "reps", "duration", ...}, "results": [points]},
each point {"workload", "conns" (kvs: "clients"), "system", "runs":
[{"rps", "lat_mean_us", "cpu_us_per_req", ...} or null per repetition]}.
Files written before the meta existed are the bare list of points; both
are read. This draws them: markers at the median of the repetitions,
error bars from the smallest to the largest.

- rpc: requests/s and mean latency against connections, a line per
  system (the seed's first figure);
- wal, short, kvs: grouped bars per workload and connection count,
  throughput above and server CPU per request below (the seed's second
  figure is wal's).

Regenerate any figure from its JSON:

    python3 bench/plot.py bench/results/rpc-20261123-150102.json [--out docs/figures/rpc]

matplotlib comes from Debian (python3-matplotlib) or PyPI (make deps).
"""

import argparse
import json
import os
import statistics
import sys

UNITS = {"rpc": "req", "wal": "req", "short": "conn", "kvs": "op"}
TITLES = {
    "rpc": "RPC: keep-alive GET, 151 B reply; phttpd uring vs epoll vs nginx",
    "wal": "WAL: 1 KiB POST made durable; zero copy, copy, epoll baseline",
    "short": "Short connections: one GET per TCP connection; phttpd vs nginx",
    "kvs": "Key-value: 1 KiB SET/GET over RESP; pkvs vs Redis 7",
}


def split(doc):
    """(meta, points) of a results JSON: {"meta", "results"}, or the bare
    list of points of files written before the meta (meta {})."""
    if isinstance(doc, dict) and isinstance(doc.get("results"), list):
        return doc.get("meta") or {}, doc["results"]
    if isinstance(doc, list):
        return {}, doc
    raise ValueError('want {"meta": ..., "results": [...]} or a list of points')


def _stats(runs, key, scale=1.0):
    vals = [r[key] * scale for r in runs if r and r.get(key) is not None]
    if not vals:
        return None, 0.0, 0.0
    med = statistics.median(vals)
    return med, med - min(vals), max(vals) - med


def _points(raw):
    """[(label, conns, system, runs)] in the order of the report."""
    return [(p["workload"], p.get("conns", p.get("clients")), p["system"], p["runs"]) for p in raw]


def _systems(raw):
    seen = []
    for p in raw:
        if p["system"] not in seen:
            seen.append(p["system"])
    return seen


def _lines(ax, raw, key, scale, ylabel):
    systems = _systems(raw)
    for s in systems:
        pts = sorted((c, runs) for _, c, sys_, runs in _points(raw) if sys_ == s)
        xs, ys, lo, hi = [], [], [], []
        for c, runs in pts:
            med, dlo, dhi = _stats(runs, key, scale)
            if med is None:
                continue
            xs.append(c)
            ys.append(med)
            lo.append(dlo)
            hi.append(dhi)
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=4, label=s)
    ax.set_xlabel("concurrent connections")
    ax.set_ylabel(ylabel)
    ax.set_xscale("log")
    conns = sorted({c for _, c, _, _ in _points(raw)})
    ax.set_xticks(conns)
    ax.set_xticklabels([str(c) for c in conns])
    ax.minorticks_off()
    ax.grid(True, alpha=0.3)


def _bars(ax, raw, key, scale, ylabel):
    systems = _systems(raw)
    groups = []
    for label, c, _, _ in _points(raw):
        if (label, c) not in groups:
            groups.append((label, c))
    width = 0.8 / max(1, len(systems))
    for i, s in enumerate(systems):
        xs, ys, lo, hi = [], [], [], []
        for g, (label, c) in enumerate(groups):
            runs = next((r for l, cc, ss, r in _points(raw) if (l, cc, ss) == (label, c, s)), None)
            if runs is None:
                continue
            med, dlo, dhi = _stats(runs, key, scale)
            if med is None:
                continue
            xs.append(g + (i - (len(systems) - 1) / 2) * width)
            ys.append(med)
            lo.append(dlo)
            hi.append(dhi)
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=s)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{label}\n{c} conns" for label, c in groups], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)


def figure(kind, raw, base, title=None):
    """Draw raw (a benchmark's JSON, either form) to base.png and base.svg;
    returns the paths. Raises ImportError when matplotlib is missing."""
    _, raw = split(raw)
    if not raw or "workload" not in raw[0]:
        return []          # not a throughput run (bench/space.py): a table, no figure
    # bench/demo.py's runs are "demo-rpc", "demo-wal": drawn as rpc, wal.
    kind = next((k for k in UNITS if kind == k or kind.endswith("-" + k)), kind)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    unit = UNITS.get(kind, "req")
    rate = f"K {unit}/s"
    ngroups = len({(p["workload"], p.get("conns", p.get("clients"))) for p in raw})
    width = 8 if kind == "rpc" else max(8, 1.35 * ngroups)
    fig, axes = plt.subplots(2, 1, figsize=(width, 7.5))
    if kind == "rpc":
        _lines(axes[0], raw, "rps", 1e-3, f"throughput ({rate})")
        _lines(axes[1], raw, "lat_mean_us", 1.0, "mean latency (us)")
    else:
        _bars(axes[0], raw, "rps", 1e-3, f"throughput ({rate})")
        _bars(axes[1], raw, "cpu_us_per_req", 1.0, f"server CPU per {unit} (us)")
    axes[0].legend(fontsize=8)
    if title is None:
        title = TITLES.get(kind, kind)
        media = {p.get("medium") for p in raw} - {None}
        if len(media) == 1:         # kvs.py says where the stores lived
            title += f" ({media.pop()})"
    fig.suptitle(title +
                 "\nmedians; error bars: min-max over the repetitions", fontsize=10)
    fig.tight_layout()
    paths = [base + ".png", base + ".svg"]
    for p in paths:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return paths


def main(argv=None):
    p = argparse.ArgumentParser(description="Draw a benchmark's JSON results (PNG and SVG).")
    p.add_argument("json", help="bench/results/<kind>-<time>.json")
    p.add_argument("--out", help="output path without extension (default: next to the JSON)")
    p.add_argument("--title")
    args = p.parse_args(argv)
    try:
        with open(args.json) as f:
            doc = json.load(f)
        meta, raw = split(doc)
    except (OSError, ValueError) as e:
        print(f"plot.py: {args.json}: {e}", file=sys.stderr)
        return 1
    kind = meta.get("kind") or os.path.basename(args.json)[:-len(".json")].split("-", 1)[0]
    base = args.out or args.json[:-5]
    try:
        paths = figure(kind, raw, base, args.title)
    except ImportError:
        print("plot.py: matplotlib is not installed: run `make deps`", file=sys.stderr)
        return 1
    print("\n".join(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
