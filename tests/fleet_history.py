"""A generated fleet history whose every number is known: the truth `ridgeline report` is checked
against (tests/test_report_e2e.py) and the data benchmarks/bench_report.py backfills.

Each GPU runs a schedule of segments — a workload (pod or HPC job, or nothing), one raw regime,
constant t·k and DRAM activity — and the history writes what Prometheus would have stored:

* raw series, as a Ridgeline daemon exports them and Prometheus labels them (`instance`, `job`,
  `node`, `cluster`): ridgeline_regime_seconds_total{regime} (all four), ridgeline_flop_total,
  ridgeline_dram_bytes_total, growing by dt, t·k·P·dt and d·B·dt between scrapes; a GPU that
  changes pod continues its counters under the new labels (a new series that starts at the
  carried value), exactly as the daemon's totals do;
* recorded series (only for the benchmark, where a week of raw series cannot be had), as
  rules/ridgeline-recording.rules.yml would record them: namespace_pod:* and cluster:* rates
  over the 5 minutes before each evaluation, computed from the same schedule.

`truth()` integrates the schedules exactly. Output is OpenMetrics text for
`promtool tsdb create-blocks-from openmetrics` (and VictoriaMetrics' Prometheus-text import),
written in time order per series and streamed, never held whole.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

from exporter.sampling.workloads import WORKLOAD_RETENTION_SECONDS

REGIMES = ("idle", "memory_bound", "compute_bound", "latency_bound")
CARDS = {
    # key: (NVML name, bf16 dense peak FLOP/s, bandwidth bytes/s) as exporter/data/cards.yaml has them
    "h100-sxm": ("NVIDIA H100 80GB HBM3", 989.5e12, 3.35e12),
    "a100-sxm4-80gb": ("NVIDIA A100-SXM4-80GB", 312e12, 2.039e12),
}

# (kind, namespace, pod prefix, regime, t·k, DRAM activity); pod None: no pod
WORKLOADS = (
    ("train", "llm-train", "trainer", "compute_bound", 0.71, 0.28),
    ("decode", "inference", "decode", "memory_bound", 0.11, 0.72),
    ("etl", "data-eng", "embed-etl", "latency_bound", 0.04, 0.09),
    ("notebook", "research", "notebook", "idle", 0.0, 0.0),
    ("free", None, None, "idle", 0.0, 0.0),
    ("hpc", None, None, "compute_bound", 0.64, 0.31),
)
HPC_IDLE_TAIL_SECONDS = 1800.0
"""An HPC job's last half hour is idle (it holds its GPUs while it waits on its file system):
idle while allocated, by a job no pod holds."""


@dataclass(frozen=True, slots=True)
class Segment:
    start: float
    end: float
    regime: str
    tk: float
    dram: float
    namespace: str | None = None
    pod: str | None = None
    hpc_job: str | None = None


@dataclass(frozen=True, slots=True)
class Gpu:
    node: str
    index: int
    card: str
    segments: tuple[Segment, ...]

    @property
    def uuid(self) -> str:
        return f"GPU-{self.node}-{self.index:02d}"

    @property
    def model(self) -> str:
        return CARDS[self.card][0]

    @property
    def peak(self) -> float:
        return CARDS[self.card][1]

    @property
    def bandwidth(self) -> float:
        return CARDS[self.card][2]


@dataclass(frozen=True, slots=True)
class Outage:
    """Nodes nobody scraped in (start, end): no samples there. restart: their daemons were down
    too and start again at `end` with counters at 0, so the time in [start, end) is lost; else
    the daemons kept counting and the first scrape after the outage carries it all."""

    nodes: frozenset[str]
    start: float
    end: float
    restart: bool = False


@dataclass(frozen=True, slots=True)
class Fleet:
    start: float
    end: float
    scrape_seconds: float
    gpus: tuple[Gpu, ...]
    cluster: str = "test"
    outages: tuple[Outage, ...] = ()


def make_fleet(
    *,
    nodes: int,
    gpus_per_node: int,
    start: float,
    hours: float,
    scrape_seconds: float = 15.0,
    min_segment_hours: float = 1.0,
    max_segment_hours: float = 4.0,
    whole_nodes: bool = False,
    teams: int = 0,
    seed: int = 12,
) -> Fleet:
    """A deterministic fleet: the first two thirds of the nodes are H100s, the rest A100s; each
    GPU runs workloads of min..max hours back to back (pods named per node so that a pod's GPUs
    share a node). whole_nodes: every GPU of a node runs the node's one schedule (one pod holds
    the whole node, as large jobs do), so workloads are nodes' segments, not GPUs'. teams: spread
    each kind's pods over that many namespaces (`llm-train-3`)."""
    rng = random.Random(seed)
    end = start + hours * 3600.0
    gpus = []
    for n in range(nodes):
        node = f"node-{n:04d}"
        card = "h100-sxm" if n < max(1, (2 * nodes + 2) // 3) else "a100-sxm4-80gb"
        shared: tuple[Segment, ...] | None = None
        for i in range(gpus_per_node):
            if whole_nodes and shared is not None:
                gpus.append(Gpu(node=node, index=i, card=card, segments=shared))
                continue
            t = start
            segments = []
            k = 0
            while t < end:
                length = rng.uniform(min_segment_hours, max_segment_hours) * 3600.0
                length = round(length / scrape_seconds) * scrape_seconds
                stop = min(end, t + length)
                if end - stop < min_segment_hours * 3600.0:
                    stop = end  # no segment shorter than the minimum, the last one included
                kind, namespace, prefix, regime, tk, dram = WORKLOADS[rng.randrange(len(WORKLOADS))]
                if namespace is not None and teams:
                    namespace = f"{namespace}-{rng.randrange(teams)}"
                who = node if whole_nodes else f"{node}-{i}"
                pod = f"{prefix}-{who}-{k}" if prefix else None
                job = f"{4000 + n * 10 + (0 if whole_nodes else i)}" if kind == "hpc" else None
                busy_until = stop - HPC_IDLE_TAIL_SECONDS if job is not None else stop
                segments.append(
                    Segment(
                        start=t,
                        end=busy_until,
                        regime=regime,
                        tk=tk,
                        dram=dram,
                        namespace=namespace,
                        pod=pod,
                        hpc_job=job,
                    )
                )
                if busy_until < stop:
                    segments.append(
                        Segment(start=busy_until, end=stop, regime="idle", tk=0.0, dram=0.0, hpc_job=job)
                    )
                t = stop
                k += 1
            shared = tuple(segments)
            gpus.append(Gpu(node=node, index=i, card=card, segments=shared))
    return Fleet(start=start, end=end, scrape_seconds=scrape_seconds, gpus=tuple(gpus))


# -- the truth ---------------------------------------------------------------------------------


@dataclass
class Truth:
    gpu_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(REGIMES, 0.0))
    idle_allocated: float = 0.0
    flop: float = 0.0
    dram_bytes: float = 0.0

    @property
    def total(self) -> float:
        return sum(self.gpu_seconds.values())


def series_labels(fleet: Fleet, gpu: Gpu, segment: Segment) -> dict[str, str]:
    """The labels Prometheus stores on the GPU's series during the segment."""
    labels = {
        "card": gpu.card,
        "cluster": fleet.cluster,
        "gpu": str(gpu.index),
        "instance": f"{gpu.node}:10295",
        "job": "ridgeline",
        "model": gpu.model,
        "node": gpu.node,
        "uuid": gpu.uuid,
    }
    if segment.pod is not None and segment.namespace is not None:
        labels.update(namespace=segment.namespace, pod=segment.pod, container="main")
    if segment.hpc_job is not None:
        labels["hpc_job"] = segment.hpc_job
    return labels


def _lost(fleet: Fleet, gpu: Gpu, segment: Segment, lo: float, hi: float) -> float:
    """Seconds of the segment within [lo, hi] that a restart outage of the GPU's node lost."""
    return sum(
        max(0.0, min(hi, segment.end, o.end) - max(lo, segment.start, o.start))
        for o in fleet.outages
        if o.restart and gpu.node in o.nodes
    )


def truth(
    fleet: Fleet,
    by: Iterable[str],
    start: float | None = None,
    end: float | None = None,
    *,
    lost: bool = False,
) -> dict[tuple[str, ...], Truth]:
    """GPU-seconds by regime, idle-while-allocated seconds, FLOPs and bytes per group over
    [start, end], integrated from the schedules; the key is the group's label values ("" absent).
    Time restart outages lost is not in it (the counters never had it); lost: only that time."""
    by = tuple(by)
    lo = fleet.start if start is None else start
    hi = fleet.end if end is None else end
    out: dict[tuple[str, ...], Truth] = {}
    for gpu in fleet.gpus:
        for segment in gpu.segments:
            seconds = min(hi, segment.end) - max(lo, segment.start) - _lost(fleet, gpu, segment, lo, hi)
            if lost:
                seconds = _lost(fleet, gpu, segment, lo, hi)
            if seconds <= 0:
                continue
            labels = series_labels(fleet, gpu, segment)
            key = tuple(labels.get(label, "") for label in by)
            total = out.setdefault(key, Truth())
            total.gpu_seconds[segment.regime] += seconds
            if segment.regime == "idle" and (segment.pod is not None or segment.hpc_job is not None):
                total.idle_allocated += seconds
            total.flop += segment.tk * gpu.peak * seconds
            total.dram_bytes += segment.dram * gpu.bandwidth * seconds
    return out


# -- OpenMetrics ---------------------------------------------------------------------------------


def _label_text(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))


def _scrape_times(fleet: Fleet, start: float, end: float, *, include_end: bool) -> Iterator[float]:
    """Scrape times t in [start, end] (end itself only if include_end), on the fleet's grid."""
    step = fleet.scrape_seconds
    k = max(0, -int(-(start - fleet.start) // step))  # ceil
    while True:
        t = fleet.start + k * step
        if t > end + 1e-9 or (not include_end and t >= end - 1e-9):
            return
        yield t
        k += 1


def _raw_rows(
    fleet: Fleet, gpu: Gpu, start: float, end: float, family: str
) -> Iterator[tuple[str, float, float]]:
    """(series text, timestamp, value) of one GPU's raw series of one family, in time order per
    series, for scrapes in [start, end].

    Counters start at 0 at the fleet's start and carry across segments; a segment's series has
    one sample per scrape from the first scrape at or after its start (the scrape at a boundary
    belongs to the later segment, whose sample already includes the time up to it). Values are
    computed in closed form, so a short stretch of a long history costs only its own samples.
    """
    seconds = dict.fromkeys(REGIMES, 0.0)
    flop = dram = 0.0
    outages = [o for o in fleet.outages if gpu.node in o.nodes]
    for segment in gpu.segments:
        last = segment.end >= fleet.end
        lo, hi = max(start, segment.start), min(end, segment.end)
        if lo <= hi:
            labels = series_labels(fleet, gpu, segment)
            times = [
                t
                for t in _scrape_times(fleet, lo, hi, include_end=last or hi < segment.end)
                if not any(o.start < t < o.end for o in outages)
            ]
            flop_rate = segment.tk * gpu.peak
            dram_rate = segment.dram * gpu.bandwidth
            if family == "ridgeline_regime_seconds":
                for regime in REGIMES:
                    text = "ridgeline_regime_seconds_total{" + _label_text({**labels, "regime": regime}) + "}"
                    base = seconds[regime]
                    grows = regime == segment.regime
                    for t in times:
                        value = base + (t - segment.start if grows else 0.0)
                        yield text, t, value - (_restarted(fleet, gpu, t)[0][regime] if outages else 0.0)
            elif family == "ridgeline_flop":
                text = "ridgeline_flop_total{" + _label_text(labels) + "}"
                for t in times:
                    yield (
                        text,
                        t,
                        flop
                        + flop_rate * (t - segment.start)
                        - (_restarted(fleet, gpu, t)[1] if outages else 0.0),
                    )
            elif family == "ridgeline_dram_bytes":
                text = "ridgeline_dram_bytes_total{" + _label_text(labels) + "}"
                for t in times:
                    yield (
                        text,
                        t,
                        dram
                        + dram_rate * (t - segment.start)
                        - (_restarted(fleet, gpu, t)[2] if outages else 0.0),
                    )
            else:  # the debounced-regime state set (the recording rules count GPUs with it)
                for regime in REGIMES:
                    text = "ridgeline_regime{" + _label_text({**labels, "regime": regime}) + "}"
                    value = 1.0 if regime == segment.regime else 0.0
                    for t in times:
                        yield text, t, value
        length = segment.end - segment.start
        seconds[segment.regime] += length
        flop += segment.tk * gpu.peak * length
        dram += segment.dram * gpu.bandwidth * length


def _counters_at(gpu: Gpu, at: float) -> tuple[dict[str, float], float, float]:
    """The GPU's regime seconds, FLOPs and bytes counted from the fleet's start up to `at`."""
    seconds = dict.fromkeys(REGIMES, 0.0)
    flop = dram = 0.0
    for segment in gpu.segments:
        length = max(0.0, min(at, segment.end) - segment.start)
        seconds[segment.regime] += length
        flop += segment.tk * gpu.peak * length
        dram += segment.dram * gpu.bandwidth * length
    return seconds, flop, dram


def _restarted(fleet: Fleet, gpu: Gpu, at: float) -> tuple[dict[str, float], float, float]:
    """What the GPU's counters lost at its daemon's last restart up to `at` (zeros: none)."""
    ends = [o.end for o in fleet.outages if o.restart and gpu.node in o.nodes and o.end <= at]
    return _counters_at(gpu, max(ends)) if ends else (dict.fromkeys(REGIMES, 0.0), 0.0, 0.0)


_FAMILIES = (
    ("ridgeline_regime_seconds", "counter"),
    ("ridgeline_flop", "counter"),
    ("ridgeline_dram_bytes", "counter"),
)
_WORKLOAD_FAMILIES = (
    ("ridgeline_workload_regime_seconds", "counter"),
    ("ridgeline_workload_flop", "counter"),
    ("ridgeline_workload_dram_bytes", "counter"),
    ("ridgeline_workload_gpus", "gauge"),
    ("ridgeline_workload_peak_flop_per_second", "gauge"),
    ("ridgeline_workload_peak_bandwidth_bytes_per_second", "gauge"),
)
_PER_GPU_LABELS = frozenset({"gpu", "model", "uuid", "container"})


def workload_labels(fleet: Fleet, gpu: Gpu, segment: Segment) -> dict[str, str]:
    """The labels Prometheus stores on the per-workload series of the workload holding the GPU
    during the segment: the GPU's series labels without those of the GPU itself."""
    return {k: v for k, v in series_labels(fleet, gpu, segment).items() if k not in _PER_GPU_LABELS}


def _workloads(fleet: Fleet) -> dict[str, list[tuple[Gpu, Segment]]]:
    """Each workload's (label text) GPU segments, in the fleet's order."""
    out: dict[str, list[tuple[Gpu, Segment]]] = {}
    for gpu in fleet.gpus:
        for segment in gpu.segments:
            out.setdefault(_label_text(workload_labels(fleet, gpu, segment)), []).append((gpu, segment))
    return out


def _workload_rows(
    fleet: Fleet, text: str, parts: list[tuple[Gpu, Segment]], start: float, end: float, family: str
) -> Iterator[tuple[str, float, float]]:
    """(series text, timestamp, value) of one workload's series of one family for scrapes in
    [start, end], as the daemon's ledger writes them: its counters are what its GPUs gained while
    they were its own (from the daemon's last restart), kept WORKLOAD_RETENTION_SECONDS after its
    last GPU left; its gauges are its GPUs now, absent while it has none."""
    nodes = {gpu.node for gpu, _ in parts}
    outages = [o for o in fleet.outages if o.nodes & nodes]
    born = min(s.start for _, s in parts)
    left = max(s.end for _, s in parts)
    until = fleet.end if left >= fleet.end else left + WORKLOAD_RETENTION_SECONDS
    times = [
        t
        for t in _scrape_times(fleet, max(start, born), min(end, until), include_end=left >= fleet.end)
        if not any(o.start < t < o.end for o in outages)
    ]
    for t in times:
        since = max([o.end for o in outages if o.restart and o.end <= t], default=fleet.start)
        held = [(gpu, s) for gpu, s in parts if s.start <= t < s.end or (t == s.end == fleet.end)]
        if since > fleet.start and not any(s.end > since for _, s in parts):
            continue  # its GPUs had left before the daemon restarted: a new ledger never saw it
        if family == "ridgeline_workload_gpus":
            counts: dict[str, int] = {}
            for _, s in held:
                counts[s.regime] = counts.get(s.regime, 0) + 1
            for regime, count in counts.items():
                yield f'{family}{{{text},regime="{regime}"}}', t, float(count)
            continue
        if family.startswith("ridgeline_workload_peak"):
            if held:
                peak = family == "ridgeline_workload_peak_flop_per_second"
                yield f"{family}{{{text}}}", t, sum(g.peak if peak else g.bandwidth for g, _ in held)
            continue
        seconds = dict.fromkeys(REGIMES, 0.0)
        flop = dram = 0.0
        for gpu, s in parts:
            length = max(0.0, min(t, s.end) - max(since, s.start))
            seconds[s.regime] += length
            flop += s.tk * gpu.peak * length
            dram += s.dram * gpu.bandwidth * length
        if family == "ridgeline_workload_regime_seconds":
            for regime in REGIMES:
                yield f'{family}_total{{{text},regime="{regime}"}}', t, seconds[regime]
        else:
            yield f"{family}_total{{{text}}}", t, flop if family == "ridgeline_workload_flop" else dram


def write_raw(
    fleet: Fleet,
    out: TextIO,
    start: float | None = None,
    end: float | None = None,
    *,
    workloads: bool = True,
    milliseconds: bool = False,
) -> int:
    """The raw series between start and end as OpenMetrics (without the # EOF); returns samples.
    workloads adds the per-workload families (what the recording rules read; the report itself
    reads only the per-GPU counters). milliseconds: integer ms timestamps, as the Prometheus text
    format (VictoriaMetrics' /api/v1/import/prometheus) writes them; OpenMetrics has seconds.

    One family at a time (the OpenMetrics parser wants a family's lines together), so the GPUs
    are walked once per family.
    """
    lo = fleet.start if start is None else start
    hi = fleet.end if end is None else end
    written = 0

    def write(rows: Iterable[tuple[str, float, float]]) -> None:
        nonlocal written
        for series, t, value in rows:
            stamp = f"{round(t * 1000)}" if milliseconds else f"{t:.3f}"
            out.write(f"{series} {value!r} {stamp}\n")
            written += 1

    for family, kind in _FAMILIES:
        out.write(f"# TYPE {family} {kind}\n")
        for gpu in fleet.gpus:
            write(_raw_rows(fleet, gpu, lo, hi, family))
    if workloads:
        groups = _workloads(fleet)
        for family, kind in _WORKLOAD_FAMILIES:
            out.write(f"# TYPE {family} {kind}\n")
            for text, parts in groups.items():
                write(_workload_rows(fleet, text, parts, lo, hi, family))
    return written


def write_recorded(
    fleet: Fleet,
    out: TextIO,
    start: float,
    end: float,
    *,
    eval_seconds: float = 60.0,
    milliseconds: bool = False,
) -> int:
    """namespace_pod:*, instance:*, hpc_job:* and cluster:* series as the recording rules would
    record them at each evaluation in [start, end] (rates over the 5 minutes before it),
    idle-while-allocated seconds included; without the # EOF."""
    from exporter.report.series import CLUSTER, HPC_JOB, INSTANCE, NAMESPACE_POD

    window = 300.0

    def stamp(at: float) -> str:
        return f"{round(at * 1000)}" if milliseconds else f"{at:.3f}"

    evals = []
    t = start
    while t <= end + 1e-9:
        evals.append(t)
        t += eval_seconds
    # per series (name, labels) -> list of values per evaluation
    written = 0
    pods: dict[tuple[str, str], list[tuple[Gpu, Segment]]] = {}
    for gpu in fleet.gpus:
        for segment in gpu.segments:
            if segment.pod is not None and segment.namespace is not None:
                pods.setdefault((segment.namespace, segment.pod), []).append((gpu, segment))
    jobs: dict[str, list[tuple[Gpu, Segment]]] = {}
    for gpu in fleet.gpus:
        for segment in gpu.segments:
            if segment.hpc_job is not None:
                jobs.setdefault(segment.hpc_job, []).append((gpu, segment))
    cluster = {"cluster": fleet.cluster}

    def rates(
        parts: list[tuple[Gpu, Segment]], at: float
    ) -> tuple[dict[str, float], float, float, dict[str, float]]:
        seconds = dict.fromkeys(REGIMES, 0.0)
        flop = dram = 0.0
        gpus_by_card: dict[str, float] = {}
        for gpu, segment in parts:
            overlap = min(at, segment.end) - max(at - window, segment.start)
            if overlap > 0:
                seconds[segment.regime] += overlap / window
                flop += segment.tk * gpu.peak * overlap / window
                dram += segment.dram * gpu.bandwidth * overlap / window
            if segment.start <= at < segment.end:
                gpus_by_card[f"{segment.regime}|{gpu.card}"] = (
                    gpus_by_card.get(f"{segment.regime}|{gpu.card}", 0) + 1
                )
        return seconds, flop, dram, gpus_by_card

    levels = (
        (
            NAMESPACE_POD,
            [({"namespace": ns, "pod": pod, **cluster}, parts) for (ns, pod), parts in sorted(pods.items())],
        ),
        (INSTANCE, [(node_labels, parts) for node_labels, parts in _by_node(fleet)]),
        (HPC_JOB, [({"hpc_job": job, **cluster}, parts) for job, parts in sorted(jobs.items())]),
        (CLUSTER, [(dict(cluster), [(gpu, s) for gpu in fleet.gpus for s in gpu.segments])]),
    )
    for level, groups in levels:
        for kind in ("regime_seconds", "flop", "dram_bytes", "gpus"):
            name = getattr(level, kind)
            out.write(f"# TYPE {name} gauge\n")
            for labels, parts in groups:
                lo = min(s.start for _, s in parts)
                hi = max(s.end for _, s in parts)
                series: dict[str, list[str]] = {}
                for at in evals:
                    if at < lo or at - window >= hi:
                        continue  # nothing before the pod's first sample, nor 5 min after its last
                    seconds, flop, dram, gpus = rates(parts, at)
                    if kind == "regime_seconds":
                        for regime in REGIMES:
                            text = _label_text({**labels, "regime": regime})
                            series.setdefault(text, []).append(f"{seconds[regime]!r} {stamp(at)}")
                    elif kind == "flop":
                        series.setdefault(_label_text(labels), []).append(f"{flop!r} {stamp(at)}")
                    elif kind == "dram_bytes":
                        series.setdefault(_label_text(labels), []).append(f"{dram!r} {stamp(at)}")
                    else:
                        for key, count in gpus.items():
                            regime, card = key.split("|")
                            text = _label_text({**labels, "regime": regime, "card": card})
                            series.setdefault(text, []).append(f"{count!r} {stamp(at)}")
                for text, rows in series.items():
                    for row in rows:
                        out.write(f"{name}{{{text}}} {row}\n")
                        written += 1
    for level, groups in ((INSTANCE, levels[1][1]), (CLUSTER, levels[3][1])):
        name = level.idle_allocated
        assert name is not None
        out.write(f"# TYPE {name} gauge\n")
        for labels, parts in groups:
            held = [(gpu, s) for gpu, s in parts if s.pod is not None or s.hpc_job is not None]
            for at in evals:
                idle = rates(held, at)[0]["idle"]
                if idle > 0:  # the rule's inputs are absent while 0
                    out.write(f"{name}{{{_label_text(labels)}}} {idle!r} {stamp(at)}\n")
                    written += 1
    return written


def _by_node(fleet: Fleet) -> list[tuple[dict[str, str], list[tuple[Gpu, Segment]]]]:
    nodes: dict[str, list[tuple[Gpu, Segment]]] = {}
    for gpu in fleet.gpus:
        nodes.setdefault(gpu.node, []).extend((gpu, s) for s in gpu.segments)
    out = []
    for node, parts in sorted(nodes.items()):
        labels = {"cluster": fleet.cluster, "instance": f"{node}:10295", "job": "ridgeline", "node": node}
        out.append((labels, parts))
    return out
