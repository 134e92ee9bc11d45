#!/usr/bin/env python3
"""Start-up time of `ridgeline classify ...` (a whole answer, process start to exit), median of N.

`python -c pass` is timed beside it: the interpreter's own floor, which no CLI can beat. The
command runs as `python -m exporter` with the venv's interpreter, as the console script would.

    .venv/bin/python benchmarks/bench_cli_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CLASSIFY = ["-m", "exporter", "classify", "--card", "h100-sxm", "--flops", "4e12", "--bytes", "40e9"]
CARDS = ["-m", "exporter", "cards"]


def median_ms(argv: list[str], runs: int) -> tuple[float, float]:
    """(median, min) wall time in ms of running the interpreter with argv; one unmeasured warm-up."""
    subprocess.run([sys.executable, *argv], check=True, capture_output=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, *argv], check=True, capture_output=True)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    for label, argv in (
        ("python -c pass", ["-c", "pass"]),
        ("ridgeline classify (kernel)", CLASSIFY),
        ("ridgeline cards", CARDS),
    ):
        median, best = median_ms(argv, args.runs)
        print(f"{label:<30} median {median:7.1f} ms   min {best:7.1f} ms   ({args.runs} runs)")


if __name__ == "__main__":
    main()
