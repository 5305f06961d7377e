"""``python -m benchmarks``: our figures beside the baselines, measured in the same run.

Prints a table and one JSON line; ``--write-docs`` also writes ``docs/benchmarks.json`` and
the plot ``docs/performance.png``. Exits 0 whatever the ratios: targets are reported, not
asserted (the machines are shared and noisy; tests assert behaviour, not speed).
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
from pathlib import Path
from typing import Any

from benchmarks._harness import Result

_SUITES = ("core", "async", "rx", "spark")


def _run_suite(name: str, quick: bool) -> list[Result]:
    module = importlib.import_module(f"benchmarks.{name}_bench")
    kwargs: dict[str, Any] = {}
    if quick:
        kwargs = getattr(module, "QUICK", {"n": 100_000, "repeats": 2})
    results: list[Result] = module.run(**kwargs)
    return results


def _table(results: list[Result]) -> str:
    rows = [("benchmark", "ours", "baseline", "unit", "ratio", "target", "")]
    for r in results:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
        target = f">= {r.target:g}x" if r.target is not None else "report"
        met = {True: "met", False: "MISSED", None: ""}[r.met]
        baseline = f"{r.baseline:,.0f}" if r.baseline is not None else "-"
        rows.append((r.name, f"{r.ours:,.0f}", baseline, r.unit, ratio, target, met))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(lines)


def _plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in results if r.ratio is not None]
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(shown) + 1.5))
    names = [r.name for r in shown]
    ratios = [r.ratio or 0.0 for r in shown]
    colors = [
        "tab:green" if r.met else "tab:red" if r.met is False else "tab:blue" for r in shown
    ]
    ax.barh(names, ratios, color=colors)
    for i, r in enumerate(shown):
        if r.target is not None:
            ax.plot([r.target, r.target], [i - 0.4, i + 0.4], color="black", linewidth=2)
    ax.axvline(1.0, color="grey", linestyle=":")
    ax.set_xscale("log")
    ax.set_xlabel("ours / baseline (same run; black tick = target; log scale)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--only", default=",".join(_SUITES), help="suites: core,async,rx,spark")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--write-docs", action="store_true", help="write docs/ figures")
    args = parser.parse_args(argv)

    results: list[Result] = []
    for suite in args.only.split(","):
        try:
            results += _run_suite(suite, args.quick)
        except ImportError as exc:
            print(f"[{suite}] skipped: {exc}", file=sys.stderr)
    print(_table(results))
    payload = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "results": [r.to_json() for r in results],
    }
    print(json.dumps(payload))
    if args.write_docs:
        docs = Path("docs")
        docs.mkdir(exist_ok=True)
        (docs / "benchmarks.json").write_text(json.dumps(payload, indent=1) + "\n", "utf-8")
        _plot(results, docs / "performance.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
