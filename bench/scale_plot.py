#!/usr/bin/env python3
"""Draws bench/scale.py's results: wall time and peak memory of each stage against the session's
length, on log-log axes, as one self-contained SVG; and prints them as a Markdown table with the
slope of each stage's time (the exponent b of t ~ n^b between the first and last length).

  bench/scale_plot.py scale.jsonl [more.jsonl ...] -o scale.svg [--title TEXT]
"""
import argparse
import json
import math
from collections import defaultdict

STAGES = ["capture", "bare", "capture-q4", "compare", "branch", "layers", "exact"]
COLORS = ["#1f77b4", "#7f7f7f", "#aec7e8", "#2ca02c", "#d62728", "#9467bd", "#ff7f0e"]


def load(paths):
    """{stage: {tokens: (wall, rss, per_unit)}} from scale.jsonl rows; per fork / per flip."""
    rows = [json.loads(line) for p in paths for line in open(p) if line.strip()]
    tokens = {r["length"]: r["tokens"] for r in rows if "tokens" in r}
    units = {(r["length"], r["stage"].split("-")[0]): r.get("forks") or r.get("flips")
             for r in rows if r["stage"] in ("branch-count", "layers-count")}
    out = defaultdict(dict)
    for r in rows:
        if r["stage"] in STAGES and r["rc"] == 0 and r["length"] in tokens:
            n = units.get((r["length"], r["stage"]))
            out[r["stage"]][tokens[r["length"]]] = (r["wall_s"], r["peak_rss_mib"], r["wall_s"] / n if n else None)
    return out


def axis(lo, hi):
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return a, max(b, a + 1)


def panel(data, index, label, x0, w, h, xr, unit):
    """One log-log panel: index 0 = wall seconds, 1 = peak MiB."""
    values = [v[index] for s in data.values() for v in s.values()]
    ya, yb = axis(min(values), max(values))
    xa, xb = xr
    X = lambda n: x0 + 50 + (math.log10(n) - xa) / (xb - xa) * (w - 70)
    Y = lambda v: 20 + (yb - math.log10(v)) / (yb - ya) * (h - 60)
    s = [f'<text x="{x0 + w / 2}" y="14" text-anchor="middle" font-weight="bold">{label}</text>']
    for e in range(ya, yb + 1):
        s.append(f'<line x1="{x0 + 50}" x2="{x0 + w - 20}" y1="{Y(10**e)}" y2="{Y(10**e)}" stroke="#ddd"/>')
        s.append(f'<text x="{x0 + 46}" y="{Y(10**e) + 4}" text-anchor="end">{10**e:g} {unit}</text>')
    for e in range(xa, xb + 1):
        s.append(f'<line x1="{X(10**e)}" x2="{X(10**e)}" y1="20" y2="{h - 40}" stroke="#ddd"/>')
        s.append(f'<text x="{X(10**e)}" y="{h - 26}" text-anchor="middle">{10**e:g}</text>')
    s.append(f'<text x="{x0 + w / 2}" y="{h - 8}" text-anchor="middle">tokens in the session</text>')
    for stage, color in zip(STAGES, COLORS):
        pts = sorted(data.get(stage, {}).items())
        if pts:
            path = " ".join(f"{X(n):.1f},{Y(v[index]):.1f}" for n, v in pts)
            s.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
            s += [f'<circle cx="{X(n):.1f}" cy="{Y(v[index]):.1f}" r="3" fill="{color}"/>' for n, v in pts]
    return s


def svg(data, title):
    ns = [n for s in data.values() for n in s]
    xr = axis(min(ns), max(ns))
    w, h = 460, 340
    body = [f'<text x="{w}" y="16" text-anchor="middle" font-size="14">{title}</text>', '<g transform="translate(0,20)">']
    body += panel(data, 0, "wall time", 0, w, h, xr, "s") + panel(data, 1, "peak memory", w, w, h, xr, "MiB")
    body.append("</g>")
    for i, (stage, color) in enumerate(zip(STAGES, COLORS)):
        if stage in data:
            body.append(f'<rect x="{60 + i * 120}" y="{h + 28}" width="12" height="12" fill="{color}"/>'
                        f'<text x="{76 + i * 120}" y="{h + 38}">{stage}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w}" height="{h + 50}" font-family="sans-serif" '
            f'font-size="11">' + "".join(body) + "</svg>\n")


def table(data):
    ns = sorted({n for s in data.values() for n in s})
    lines = ["| stage | " + " | ".join(f"{n:,} tok" for n in ns) + " | slope of time |",
             "|---|" + "---|" * (len(ns) + 1)]
    for stage in STAGES:
        pts = data.get(stage)
        if not pts:
            continue
        cells = []
        for n in ns:
            v = pts.get(n)
            cells.append("" if v is None else f"{v[0]:.1f} s, {v[1]:,.0f} MiB" +
                         (f" ({v[2]:.2f} s each)" if v[2] is not None else ""))
        (n0, a), (n1, b) = min(pts.items()), max(pts.items())
        slope = math.log(b[0] / a[0]) / math.log(n1 / n0) if n1 > n0 and a[0] > 0 else float("nan")
        lines.append(f"| {stage} | " + " | ".join(cells) + f" | {slope:.2f} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("jsonl", nargs="+")
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--title", default="flipscope: cost of each stage against the session's length")
    a = p.parse_args()
    data = load(a.jsonl)
    open(a.out, "w").write(svg(data, a.title))
    print(table(data))


if __name__ == "__main__":
    main()
