#!/usr/bin/env python3
"""What the live view costs, and where: the sampler's side (trails) and the page's side.

(a) Trails.observe per published snapshot, 8 and 64 GPUs: the only work the view adds to the
    sampler thread (nothing is added to /metrics or GET /classify). Shown beside the cost of
    one Sampler.ingest (fold + publish) in the same run, for scale;
(b) building GET /live.json (verdicts + one SVG per card) once per new snapshot, and the
    cached answer for a snapshot already built (what every further open page costs);
(c) GET /roofline.svg's build, and `ridgeline top`'s text roofline.

.venv/bin/python benchmarks/bench_live_view.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from exporter import fields
from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig
from exporter.sample import Entity, Sample
from exporter.sampler import Sampler
from exporter.sources.base import SourceOptions
from exporter.state import Derived, Snapshot
from exporter.view.chart_svg import render_svg_document
from exporter.view.chart_text import render_text
from exporter.view.node_view import charts_from_verdicts
from exporter.view.roofline_chart import layout
from exporter.view.trails import Trails
from exporter.web.live_routes import gpu_verdict
from exporter.web.view_routes import ViewBuilder

CATALOG = load_catalog()
H100 = "NVIDIA H100 80GB HBM3"


def batch(ts: float, gpus: int, idle: bool = False) -> list[Sample]:
    return [
        Sample(
            ts,
            Entity(g, f"GPU-{g}", H100),
            {
                fields.DRAM_ACTIVE: 0.0 if idle else 0.2 + (g % 7) / 10,
                fields.PIPE_TENSOR_ACTIVE: 0.0 if idle else 0.1 + (g % 5) / 6,
                fields.GR_ENGINE_ACTIVE: 0.0 if idle else 0.95,
            },
        )
        for g in range(gpus)
    ]


def idle_publish(gpus: int, repeat: int) -> tuple[float, float]:
    """Trails.observe on a snapshot of idle GPUs (no trail, so no step to wait for: every publish
    asks each GPU), as it runs and with every Estimate derived as it was before `nothing_to_plot`,
    in the same run: seconds per publish."""
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())
    sampler.ingest(batch(1000.0, gpus, idle=True))
    idle = sampler.snapshot
    fresh = [shifted(idle, -10 - i, i + 1.0) for i in range(1000)]
    t_skip = best(repeat, 1000, lambda i: Trails().observe(fresh[i]))
    t_make = best(repeat, 1000, lambda i: Trails())

    def derive_all(i: int) -> None:
        Trails().observe(fresh[i])
        for gpu in fresh[i].gpus:
            _ = gpu.inference.estimate  # what observe derived of each idle GPU before (unmemoised)

    t_derive = best(repeat, 1000, derive_all)
    return max(0.0, t_skip - t_make), max(0.0, t_derive - t_make)


def best(repeat: int, runs: int, work: Callable[[int], object]) -> float:
    """Best-of-`repeat` seconds per call over `runs` calls."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        for i in range(runs):
            work(i)
        times.append((time.perf_counter() - started) / runs)
    return min(times)


def shifted(snapshot: Snapshot, generation: int, seconds: float) -> Snapshot:
    """The same GPUs `seconds` later, as a new generation."""
    gpus = tuple(
        g._replace(
            inference=g.inference._replace(timestamp=g.inference.timestamp + seconds), derived=Derived()
        )
        for g in snapshot.gpus
    )
    return snapshot._replace(generation=generation, gpus=gpus)


def measure(gpus: int, repeat: int) -> None:
    trails = Trails()
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig(), observers=(trails.observe,))
    fresh = [batch(1000.0 + i, gpus) for i in range(200 * repeat)]
    t_ingest = best(repeat, 200, lambda i: sampler.ingest(fresh.pop(0)))
    snapshot = sampler.snapshot
    due = [shifted(snapshot, -10 - i, (i + 1) * 5.0) for i in range(1000)]  # a point for every GPU
    t_add = best(1, 1000, lambda i: trails.observe(due[i]))
    last = due[-1]
    t_none = best(repeat, 1000, lambda i: trails.observe(shifted(last, -5000 - i, 0.0)))
    t_make = best(repeat, 1000, lambda i: shifted(last, -5000 - i, 0.0))  # subtract the set-up
    t_seen = best(repeat, 1000, lambda i: trails.observe(last))
    print(f"{gpus} GPUs:")
    print(
        f"  (a) Trails.observe: {t_add * 1e6:.1f} us when every trail takes a point (once per 5 s of "
        f"samples), {max(0.0, t_none - t_make) * 1e6:.1f} us otherwise, {t_seen * 1e6:.2f} us for a "
        f"snapshot already seen; one Sampler.ingest, for scale: {t_ingest * 1e6:.0f} us"
    )
    t_idle, t_idle_derived = idle_publish(gpus, repeat)
    print(
        f"  (a) with every GPU idle: {t_idle * 1e6:.1f} us per publish; deriving their Estimates "
        f"as before nothing_to_plot: {t_idle_derived * 1e6:.1f} us"
    )
    current = [sampler.snapshot]
    builder = ViewBuilder(lambda: current[0], CATALOG, trails.current)

    def rebuild(i: int) -> bytes:
        """A new snapshot's answer: its GpuStates with empty memos, so the verdicts are built."""
        builder._cached = None
        current[0] = snapshot._replace(gpus=tuple(g._replace(derived=Derived()) for g in snapshot.gpus))
        return builder.live_json()

    t_build = best(repeat, 20, rebuild)
    t_cached = best(repeat, 2000, lambda i: builder.live_json())
    size = len(builder.live_json())
    print(
        f"  (b) /live.json: {t_build * 1e3:.2f} ms per new snapshot ({size // 1024} KiB), "
        f"{t_cached * 1e6:.1f} us cached"
    )
    verdicts = [gpu_verdict(g, sampler.snapshot) for g in sampler.snapshot.gpus]
    specs, _ = charts_from_verdicts(verdicts, catalog=CATALOG, trails=trails.current())
    t_svg = best(repeat, 50, lambda i: render_svg_document([layout(s) for s in specs]))
    bare, _ = charts_from_verdicts(verdicts)
    t_text = best(repeat, 50, lambda i: [render_text(s, 100, 14) for s in bare])
    print(f"  (c) /roofline.svg build {t_svg * 1e3:.2f} ms; top's text roofline {t_text * 1e3:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for gpus in (8, 64):
        measure(gpus, args.repeat)


if __name__ == "__main__":
    main()
