"""The metric families `ridgeline serve` exports, grouped into collectors an operator can switch off.

node_exporter's convention: `--collector.NAME` turns a collector on, `--no-collector.NAME` off,
`--collector.disable-defaults` starts from none. Every collector is on by default because the
shipped rules and dashboards read them (docs/rules-and-dashboards.md, "Series budget", says which
alert or panel goes empty without which collector); a large fleet that wants only the fleet view
can drop the per-GPU readings and keep the counters. The source-health families
(ridgeline_source_up, ridgeline_last_sample_timestamp_seconds,
ridgeline_last_data_advance_timestamp_seconds, ridgeline_samples_total,
ridgeline_sample_errors_total, ridgeline_build_info) are always exported: the health alerts need
them.

Standard library only, so that parsing `serve`'s flags does not import prometheus_client.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.roofline import REGIMES


@dataclass(frozen=True, slots=True)
class CollectorSpec:
    name: str
    families: tuple[str, ...]
    """The families it writes, by their exposition names (counters with _total)."""
    per_gpu: int
    """Series per whole GPU (or MIG instance) when every one of its readings is present."""
    summary: str


COLLECTORS: tuple[CollectorSpec, ...] = (
    CollectorSpec(
        "activity",
        ("ridgeline_dram_active_ratio", "ridgeline_tensor_active_ratio", "ridgeline_flop_utilization_ratio"),
        3,
        "the smoothed readings behind the regime (DRAM, tensor, flop utilization)",
    ),
    CollectorSpec(
        "roofline",
        ("ridgeline_arithmetic_intensity_flop_per_byte", "ridgeline_roofline_efficiency_ratio"),
        2,
        "each GPU's arithmetic intensity and roofline efficiency",
    ),
    CollectorSpec(
        "engine",
        (
            "ridgeline_gr_engine_active_ratio",
            "ridgeline_gpu_utilization_ratio",
            "ridgeline_gr_engine_contradicted",
        ),
        3,
        "GR_ENGINE_ACTIVE and GPU_UTIL where the source reports them, and whether GR_ENGINE_ACTIVE is "
        "contradicted by busier counters",
    ),
    CollectorSpec(
        "regime",
        ("ridgeline_regime", "ridgeline_gpu_share_ratio"),
        len(REGIMES),
        "the debounced regime, a state set (one series per regime), and the part of its physical "
        "GPU each MIG instance is",
    ),
    CollectorSpec(
        "totals",
        ("ridgeline_regime_seconds_total", "ridgeline_flop_total", "ridgeline_dram_bytes_total"),
        len(REGIMES) + 2,
        "the counters every recording rule is built on (time in each regime, FLOPs, DRAM bytes)",
    ),
    CollectorSpec(
        "card",
        (
            "ridgeline_gpu_info",
            "ridgeline_card_peak_flop_per_second",
            "ridgeline_card_peak_bandwidth_bytes_per_second",
            "ridgeline_card_ridge_flop_per_byte",
            "ridgeline_hpc_job_info",
        ),
        1,
        "one ridgeline_gpu_info per GPU naming its card and precision, the card constants once "
        "per card and precision on the node, and one ridgeline_hpc_job_info per HPC job on a GPU",
    ),
    CollectorSpec(
        "missing",
        ("ridgeline_profiling_field_missing",),
        0,
        "one series per DCGM profiling field (1001-1008, and the link fields 1009-1012 of each link "
        "its card has a figure for) a GPU lacks: none where the source reports them all, three per "
        "GPU where it lacks the FP pipes",
    ),
    CollectorSpec(
        "clocks",
        ("ridgeline_clock_ratio", "ridgeline_clock_event_active", "ridgeline_clock_lost_seconds_total"),
        12,
        "the SM clock against the clock the peak is quoted at, the cause holding it down (power "
        "cap, thermal, HW slowdown, sync boost, application clocks) while one does, and the "
        "GPU-seconds a reduced clock cost (six series, only on GPUs it ever did)",
    ),
    CollectorSpec(
        "links",
        ("ridgeline_link_bytes_per_second", "ridgeline_link_utilization_ratio"),
        6,
        "each GPU's PCIe and NVLink bytes/s per direction (DCGM 1009-1012) and each link's load "
        "against the card's per-direction bandwidth: the interconnect wall",
    ),
    CollectorSpec("process", ("process_*",), 0, "the exporter process' CPU, memory and file descriptors"),
)
BY_NAME = {c.name: c for c in COLLECTORS}
DEFAULT_COLLECTORS: frozenset[str] = frozenset(BY_NAME)


def collectors_from_flags(
    choices: dict[str, bool | None], *, disable_defaults: bool = False
) -> frozenset[str]:
    """The enabled set: the defaults (or none), then each explicit --collector.X / --no-collector.X."""
    enabled = set() if disable_defaults else set(DEFAULT_COLLECTORS)
    for name, on in choices.items():
        if name not in BY_NAME:
            raise ValueError(f"unknown collector {name!r}; known: {', '.join(BY_NAME)}")
        if on is True:
            enabled.add(name)
        elif on is False:
            enabled.discard(name)
    return frozenset(enabled)
