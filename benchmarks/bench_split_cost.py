"""In-process CPU of the three hot functions issue 21 split, this checkout against another.

Run: .venv/bin/python benchmarks/bench_split_cost.py --base /work/main [--rounds 21]
     [--what encode,replay,fold]

Each checkout runs this file with --worker in its own process (its own .venv and code), prepares
its inputs once and times one round (thread CPU time) per line it reads; the driver alternates
the two, round by round, and prints the medians, their ratio and the load average. A round:
* encode: 40 /metrics encodes of a 1,024-entity snapshot (both formats, with the SeriesCache);
* replay: 20 changed dcgm-exporter pages of 1,024 entities read by their template;
* fold: 200 batches of 56 MIG instances at 10 Hz through EntityFold.add (11,200 samples);
* fold-roofed: the same with each instance's MIG profile (1g.10gb) known, so each has a roof and
  the fold counts its FLOPs and DRAM bytes too (the `fold` instances have no profile, no roof).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROUNDS = {
    "encode": "40 encodes of 1,024 entities",
    "replay": "20 changed-page replays of 1,024 entities",
    "fold": "200 batches x 56 samples folded",
    "fold-roofed": "200 batches x 56 samples folded, on a MIG roof",
}
FOLD_SAMPLES = 200 * 56


def encode_round() -> Callable[[], None]:
    """Eight snapshots' families, encoded 40 times a round, half in each format."""
    from bench_metrics import entities, entity_values

    from exporter.catalog import load_catalog
    from exporter.exposition import SeriesCache, build_families, encode
    from exporter.inference import InferenceConfig
    from exporter.sample import Sample
    from exporter.sampler import Sampler
    from exporter.sources import SourceOptions

    sampler = Sampler("replay", SourceOptions(), load_catalog(), InferenceConfig())
    series = SeriesCache()
    ents = entities(1024)
    snapshots = []
    for step in range(8):
        sampler.ingest([Sample(1000.0 + step, e, entity_values(i, step), a) for i, (e, a) in enumerate(ents)])
        snapshots.append(build_families(sampler.snapshot, cache=series))

    def run() -> None:
        for k in range(40):
            encode(snapshots[k % 8], openmetrics=bool(k & 8), cache=series)

    return run


def replay_round() -> Callable[[], None]:
    """Five changed pages of one template, replayed 20 times a round."""
    from bench_scrape_source import page

    from exporter.sources.scrape import PageReader, replay

    pages = [page(1024, version) for version in range(6)]
    reader = PageReader(1000.0, record=True)
    reader.feed(pages[0])
    reader.finish()
    template = reader.template()
    if template is None:
        raise SystemExit("the benchmark's page gave no template")

    def run() -> None:
        for k in range(20):
            replayed = replay(template, pages[1 + k % 5], 1000.0, ())
            if replayed is None:
                raise SystemExit("a changed page was not replayed")
            replayed.finish()

    return run


def fold_round(mig_profile: str | None = None) -> Callable[[], None]:
    """56 MIG instances' folds, 200 batches a round, 0.1 s apart (with this MIG profile, if any)."""
    import dataclasses

    from bench_metrics import MODEL, entities, entity_values

    from exporter.catalog import load_catalog
    from exporter.inference import EntityFold, InferenceConfig
    from exporter.sample import Sample

    card = load_catalog().find_by_nvml_name(MODEL)
    config = InferenceConfig(expected_interval_seconds=0.1)
    ents = [(dataclasses.replace(e, profile=mig_profile), a) for e, a in entities(56)]
    folds = [EntityFold() for _ in ents]
    values = [[entity_values(i, variant) for i in range(len(ents))] for variant in range(10)]
    clock = [1000.0]

    def run(batches: int = 200) -> None:
        for b in range(batches):
            clock[0] += 0.1
            now, row = clock[0], values[b % 10]
            for fold, sample in zip(
                folds, [Sample(now, e, row[i], a) for i, (e, a) in enumerate(ents)], strict=True
            ):
                fold.add(sample, card, config)

    run(50)  # warm: every fold past its first samples
    return run


def worker() -> None:
    """Times one round of what each stdin line names; prints its thread CPU seconds."""
    sys.path.insert(0, str(Path(__file__).parent))
    rounds = {
        "encode": encode_round,
        "replay": replay_round,
        "fold": fold_round,
        "fold-roofed": lambda: fold_round("1g.10gb"),
    }
    prepared = {what: prepare() for what, prepare in rounds.items()}  # all first, in one order
    for line in sys.stdin:
        run = prepared[line.strip()]
        start = time.thread_time()
        run()
        print(time.thread_time() - start, flush=True)


class Worker:
    """One checkout's worker process."""

    def __init__(self, root: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.process = subprocess.Popen(
            [str(root / ".venv/bin/python"), str(Path(__file__).resolve()), "--worker"],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def once(self, what: str) -> float:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(what + "\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def side_by_side(base: Path, rounds: int, what: list[str]) -> None:
    """Alternating rounds of each named part, base and this checkout; medians and ratios."""
    workers = {"base": Worker(base), "this": Worker(Path(__file__).resolve().parent.parent)}
    print(f"load before: {Path('/proc/loadavg').read_text().strip()}")
    for part in what:
        times: dict[str, list[float]] = {name: [] for name in workers}
        for worker_ in workers.values():
            worker_.once(part)  # prepare and warm
        for n in range(rounds):
            for name in ("base", "this") if n % 2 == 0 else ("this", "base"):
                times[name].append(workers[name].once(part))
        base_s, this_s = (statistics.median(times[name]) for name in ("base", "this"))
        line = (
            f"{part}: {ROUNDS[part]}, {rounds} alternating rounds, medians base {base_s * 1e3:.2f} ms, "
            f"this {this_s * 1e3:.2f} ms, ratio this/base {this_s / base_s:.4f}"
        )
        if part.startswith("fold"):
            line += f" ({base_s / FOLD_SAMPLES * 1e6:.2f} / {this_s / FOLD_SAMPLES * 1e6:.2f} us per sample)"
        print(line, flush=True)
    print(f"load after: {Path('/proc/loadavg').read_text().strip()}")
    for worker_ in workers.values():
        worker_.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="a checkout with its own .venv (e.g. /work/main)")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--what", default="encode,replay,fold")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    if args.base is None:
        parser.error("--base DIR is required: the figures are ratios against it")
    side_by_side(args.base, args.rounds, args.what.split(","))


if __name__ == "__main__":
    main()
