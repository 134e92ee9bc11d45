#!/usr/bin/env python3
"""Start-up time of `ridgeline classify ...` (a whole answer, process start to exit), median of N.

`python -c pass` is timed beside it: the interpreter's own floor, which no CLI can beat. The
command runs as `python -m exporter` with the venv's interpreter, as the console script would.
Beside the wall time, the CPU time of the process (what a test suite that starts many pays), and
`serve`'s start-up mistakes, which end before it imports FastAPI (docs/testing.md).

    .venv/bin/python benchmarks/bench_cli_startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

CLASSIFY = ["-m", "exporter", "classify", "--card", "h100-sxm", "--flops", "4e12", "--bytes", "40e9"]
CARDS = ["-m", "exporter", "cards"]
SERVE = ["-m", "exporter", "serve", "--listen", "127.0.0.1:0"]
SERVE_MISTAKES = [
    ("serve --bad-flag", ["-m", "exporter", "serve", "--bad-flag"]),
    ("serve --listen nonsense", ["-m", "exporter", "serve", "--listen", "nonsense"]),
    ("serve --replay /nonexistent", [*SERVE, "--replay", "/nonexistent/trace.jsonl"]),
    ("serve --model (a typo)", [*SERVE, "--replay", "demo", "--model", "H100 typo"]),
]
"""Each ends with exit 2: timed to the exit, as a test of the mistake pays."""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def median_ms(argv: list[str], runs: int, check: bool = True) -> tuple[float, float, float]:
    """(median, min) wall time and median CPU time in ms of running the interpreter with argv;
    one unmeasured warm-up."""
    subprocess.run([sys.executable, *argv], check=check, capture_output=True)
    times, cpu = [], []
    for _ in range(runs):
        start, cpu_start = time.perf_counter(), _children_cpu()
        subprocess.run([sys.executable, *argv], check=check, capture_output=True)
        times.append((time.perf_counter() - start) * 1e3)
        cpu.append((_children_cpu() - cpu_start) * 1e3)
    return statistics.median(times), min(times), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    answers = [("python -c pass", ["-c", "pass"]), ("ridgeline classify (kernel)", CLASSIFY)]
    answers.append(("ridgeline cards", CARDS))
    for label, argv in [*answers, *SERVE_MISTAKES]:
        median, best, cpu = median_ms(argv, args.runs, check=(label, argv) in answers)
        print(
            f"{label:<30} median {median:7.1f} ms   min {best:7.1f} ms   CPU {cpu:6.1f} ms   "
            f"({args.runs} runs)"
        )


if __name__ == "__main__":
    main()
