#!/usr/bin/env python3
"""Draws the benchmark's ratios against their targets and floors as an SVG.

Usage: chart.py RATIOS.json OUT.svg

RATIOS.json is what the benchmark client writes after a run (target/bench/ratios.json): one
entry per workload row with its ratio (with the pipeline / without), SPEC 6's target (at most,
or at least for throughputs) and the floor's ratio (the same writes by hand, without a pipeline).
One horizontal bar per row: the bar is the ratio, a tick the floor, a vertical mark the target;
a bar is green where the target is met, red where it is missed, grey where there is none.
"""

import json
import sys

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

matplotlib.rcParams["svg.hashsalt"] = "pg_eventtime"  # the same numbers draw the same file


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    rows = doc["rows"]
    if not rows:
        print("no workload rows to draw", file=sys.stderr)
        return 1
    names = [r["workload"].replace("`", "") for r in rows]
    labels = [n if len(n) <= 60 else n[:57] + "..." for n in names]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(rows) + 1.6))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows):
        target, kind = r["target"], r["target_kind"]
        met = None if target is None else (r["ratio"] <= target if kind == "at_most" else r["ratio"] >= target)
        color = "#9e9e9e" if met is None else ("#2e7d32" if met else "#c62828")
        ax.barh(y, r["ratio"], color=color, height=0.6)
        ax.text(r["ratio"], y, f" {r['ratio']:.2f}×", va="center", fontsize=8)
        if r.get("floor_ratio") is not None:
            ax.plot([r["floor_ratio"]] * 2, [y - 0.35, y + 0.35], color="black", linewidth=2)
        if target is not None:
            ax.plot([target] * 2, [y - 0.45, y + 0.45], color="#1565c0", linewidth=1.5, linestyle="--")
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    ax.axvline(1.0, color="#bdbdbd", linewidth=0.8)
    ax.set_xlabel("with the pipeline ÷ without (times: lower is better; throughputs (g): higher is better)")
    title = f"pg_eventtime benchmark, {doc.get('date', '')}"
    if doc.get("smoke"):
        title += " (smoke: tiny sizes, the ratios mean nothing)"
    ax.set_title(title + "\nbar: ratio (green: target met, red: missed); dashed: target; black tick: floor", fontsize=9)
    fig.tight_layout()
    fig.savefig(sys.argv[2], format="svg", metadata={"Date": None})
    print(f"chart of {len(rows)} ratios written to {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
