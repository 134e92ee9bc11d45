"""The Prometheus input: a client for any Prometheus-compatible query API, and the query plan that
turns a range into per-group `Usage` (exporter/report/model.py).

The client is the standard library's, configured by exporter/http_client.py (`--prometheus.*`);
the plan — scrape interval from the data, a step sized to the range, recorded series where they
cover a window, one instant query per stretch and quantity — is docs/report.md's "How the
numbers are read".
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from exporter.http_client import PROMETHEUS_FLAGS, ClientConfigError, HTTPClientConfig
from exporter.report import coverage, promql
from exporter.report.model import (
    Collected,
    Coverage,
    CoverageStretch,
    Provenance,
    TimelinePoint,
    Usage,
    Window,
    iso_time,
    merge_usage,
    remainder,
)
from exporter.report.series import (
    CLUSTER,
    GROUP_LEVELS,
    INSTANCE,
    RATE_WINDOW_SECONDS,
    RAW_CLOCK_LOST,
    RAW_DRAM_BYTES,
    RAW_FLOP,
    RAW_REGIME_SECONDS,
    RecordedLevel,
)
from exporter.roofline import REGIMES

log = logging.getLogger("exporter.report.prometheus")

MAX_WINDOWS = 250
"""About how many query windows a range is cut into (a week: 168 one-hour windows)."""

ROUND_STEPS: tuple[int, ...] = (
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
)  # fmt: skip
"""Window lengths the step is rounded up to (seconds); from 5 minutes on, multiples of 300 s,
as the recorded series need."""

SAMPLE_PROBE_SECONDS = 600
DEFAULT_SAMPLE_INTERVAL_SECONDS = 60.0
"""Assumed when no raw sample can be found to measure the scrape interval (a coarse guess that
keeps raw windows wide enough to hold samples)."""

PARALLEL_QUERIES = 4

MAX_STRETCH_SECONDS = 86400
"""One instant query sums at most a day of windows: the server's memory for a subquery grows
with its range (the measured cost: docs/report.md, "How the numbers are read")."""


class QueryError(Exception):
    """The query API could not be reached or refused a query; the message says which and why."""


CLIENT_PREFIX = PROMETHEUS_FLAGS
"""The report's HTTP client flags: --prometheus.basic-auth.username, --prometheus.tls.ca-file, ..."""


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """How to reach the query API (the `--prometheus*` flags)."""

    url: str
    client: HTTPClientConfig = field(default_factory=HTTPClientConfig)
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float = 120.0


def api_url(url: str) -> str:
    """The query API's base URL, checked to be http(s), without a trailing slash."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise QueryError(f"--prometheus {url!r}: expected an http:// or https:// URL")
    return url.rstrip("/")


Series = tuple[dict[str, str], float]
Matrix = tuple[dict[str, str], list[tuple[float, float]]]


class PrometheusClient:
    """Instant and range queries against one Prometheus-compatible API."""

    def __init__(self, settings: ClientSettings) -> None:
        base = api_url(settings.url)
        try:
            url, self._client = settings.client.with_url_credentials(base)
            self._client.check()
            self._client.authorization()  # a missing password or token file fails before any query
            self._context = self._client.context_for(url)
        except ClientConfigError as exc:
            raise QueryError(str(exc)) from None
        self.url = url.rstrip("/")
        self._timeout = settings.timeout_seconds
        self._headers = {"Accept": "application/json", "User-Agent": "ridgeline-report", **settings.headers}
        self.queries = 0
        """Queries sent (for the benchmark and the report's notes)."""

    def query(self, expr: str, at: float) -> list[Series]:
        """An instant query at time `at`: (labels, value) per series, non-finite values dropped."""
        data = self._post("/api/v1/query", {"query": expr, "time": _ts(at)})
        if data.get("resultType") == "scalar":
            value = _number(data["result"][1])
            return [] if value is None else [({}, value)]
        out: list[Series] = []
        for item in data.get("result") or []:
            value = _number(item["value"][1])
            if value is not None:
                out.append((item.get("metric") or {}, value))
        return out

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Matrix]:
        """A range query: (labels, [(time, value), ...]) per series, non-finite values dropped."""
        data = self._post(
            "/api/v1/query_range",
            {"query": expr, "start": _ts(start), "end": _ts(end), "step": promql.duration(step)},
        )
        out: list[Matrix] = []
        for item in data.get("result") or []:
            points = [(float(t), v) for t, raw in item["values"] if (v := _number(raw)) is not None]
            out.append((item.get("metric") or {}, points))
        return out

    def labels(self, matches: Sequence[str], start: float, end: float) -> list[str]:
        """The label names the series matching any of `matches` carry within [start, end]."""
        form = [("start", _ts(start)), ("end", _ts(end)), *(("match[]", m) for m in matches)]
        data: Any = self._post("/api/v1/labels", form)
        return sorted(str(name) for name in data) if isinstance(data, list) else []

    def _post(self, path: str, form: dict[str, str] | list[tuple[str, str]]) -> Any:
        pairs = list(form.items()) if isinstance(form, dict) else form
        query = next((value for key, value in pairs if key in ("query", "match[]")), "")
        body = urllib.parse.urlencode(pairs).encode("ascii")
        try:
            authorization = self._client.authorization()
        except ClientConfigError as exc:
            raise QueryError(str(exc)) from None
        headers = {**self._headers, "Content-Type": "application/x-www-form-urlencoded"}
        if authorization is not None:
            headers["Authorization"] = authorization
        request = urllib.request.Request(self.url + path, data=body, method="POST", headers=headers)
        self.queries += 1
        log.debug("POST %s %s", path, form)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._context) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise QueryError(_http_error(self.url, path, exc, query)) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, ssl.SSLError):
                raise QueryError(
                    f"TLS with {self.url} failed: {reason.reason or reason} "
                    f"(--{CLIENT_PREFIX}.tls.ca-file names the CA that signed its certificate)"
                ) from None
            raise QueryError(f"cannot reach {self.url}: {reason}") from None
        except TimeoutError:
            raise QueryError(
                f"{self.url} did not answer within {self._timeout:g} s (--prometheus-timeout): {query[:200]}"
            ) from None
        except OSError as exc:
            raise QueryError(f"cannot reach {self.url}: {exc}") from None
        try:
            document = json.loads(raw)
        except ValueError:
            raise QueryError(
                f"{self.url}{path} did not answer JSON (is this a Prometheus query API?): {raw[:120]!r}"
            ) from None
        if not isinstance(document, dict) or document.get("status") != "success":
            error = document.get("error") if isinstance(document, dict) else None
            raise QueryError(f"{self.url}{path}: {error or 'not a Prometheus API answer'}")
        data = document.get("data")
        if not isinstance(data, (dict, list)):
            raise QueryError(f"{self.url}{path}: the answer has no data")
        return data


def _http_error(url: str, path: str, exc: urllib.error.HTTPError, query: str) -> str:
    detail = ""
    try:
        document = json.loads(exc.read())
        if isinstance(document, dict):
            detail = f"{document.get('errorType', '')}: {document.get('error', '')}".strip(": ")
    except (ValueError, OSError):
        pass
    if exc.code in (401, 403):
        return (
            f"{url}{path}: HTTP {exc.code} {exc.reason}: check --{CLIENT_PREFIX}.basic-auth.username and "
            f"--{CLIENT_PREFIX}.basic-auth.password-file, or --{CLIENT_PREFIX}.bearer-token-file"
        )
    if exc.code == 404:
        return f"{url}{path}: HTTP 404: no Prometheus query API there (the URL should end before /api/v1)"
    return f"{url}{path}: HTTP {exc.code}: {detail or exc.reason} (query: {query[:300]})"


def _ts(value: float) -> str:
    return f"{value:.3f}"


def _number(raw: object) -> float | None:
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


# -- the plan ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PrometheusCollected(Collected):
    """What the Prometheus input measured, and how many queries it took."""

    queries: int


@dataclass(frozen=True, slots=True)
class _Stretch:
    """Consecutive windows read the same way: (start, end] and the level (None: raw)."""

    start: float
    end: float
    level: RecordedLevel | None
    fleet_level: RecordedLevel | None
    lookback: float | None = None
    """How old a recorded reading may be (1.5 evaluation intervals)."""
    dialect: str = "promql"
    sample_interval: float | None = None
    edge: bool = False
    """A piece of the range before its first or after its last whole window: one window of its
    own length, read with a plain instant query (no subquery alignment)."""
    piece: int | None = None
    """The coverage run (exporter/report/coverage.py) this stretch reads, if any: its answers are
    kept apart too, to measure what each group saw in it."""


def round_step(seconds: float) -> int:
    """The smallest round window length at least `seconds` long (beyond a day: whole days)."""
    for step in ROUND_STEPS:
        if step >= seconds:
            return step
    return math.ceil(seconds / 86400.0) * 86400


def choose_step(range_seconds: float, sample_interval: float | None) -> int:
    """The query window for a range: about MAX_WINDOWS of them, each >= 4 scrape intervals."""
    interval = sample_interval or DEFAULT_SAMPLE_INTERVAL_SECONDS
    return round_step(max(range_seconds / MAX_WINDOWS, 4.0 * interval, 1.0))


def aligned_range(start: float, end: float, step: int) -> tuple[float, float]:
    """[start, end] moved down to multiples of the step (subquery points sit there)."""
    a = math.floor(start / step) * step
    b = math.floor(end / step) * step
    if b <= a:
        b = a + step
    return float(a), float(b)


def inner_range(start: float, end: float, step: int) -> tuple[float, float]:
    """The whole windows inside [start, end]: both ends moved inwards to multiples of the step
    (subquery points sit there); the pieces outside them are read as edges."""
    return float(math.ceil(start / step) * step), float(math.floor(end / step) * step)


def level_for(
    by: Sequence[str], matchers: Sequence[promql.Matcher], raw_present: bool = True
) -> RecordedLevel | None:
    """The recorded level that keeps every grouping and matcher label, if any (a level only for
    servers without raw counters: only where `raw_present` is False)."""
    wanted = set(by) | {m.label for m in matchers}
    for level in GROUP_LEVELS:
        if level.without_raw_only and raw_present:
            continue
        if wanted <= level.labels:
            return level
    return None


def workload_labels(by: Sequence[str]) -> tuple[str, ...]:
    """What a "workload" is in the top lists: an HPC job when grouping by hpc_job, else a pod."""
    return ("hpc_job",) if "hpc_job" in by else ("namespace", "pod")


def collect(
    client: PrometheusClient,
    *,
    by: Sequence[str],
    start: float,
    end: float,
    step: int | None = None,
    matchers: Sequence[promql.Matcher] = (),
    use_recorded: bool = True,
    parallel: int = PARALLEL_QUERIES,
    require_by: bool = True,
) -> PrometheusCollected:
    """Measure every group's usage over [start, end] (docs/report.md, "How the numbers are read")."""
    notes: list[str] = []
    by = tuple(by)
    workload_by = workload_labels(by)
    plan = _plan(client, by, workload_by, start, end, step, matchers, use_recorded, notes)
    units = _unit_readings(
        client,
        plan.start,
        plan.end,
        plan.step,
        plan.fleet_level,
        matchers,
        plan.lookback,
        plan.dialect,
        plan.sample_interval,
    )
    lookback = plan.lookback
    interval = plan.sample_interval or (lookback / 1.5 if lookback else DEFAULT_SAMPLE_INTERVAL_SECONDS)
    runs = coverage.find_runs(units, plan.step, interval)
    widen = 1 if plan.raw_present else 0  # raw counters read across a run from a window either side
    pieces = [
        (plan.start + (r.first - widen) * plan.step, plan.start + (r.last + 1 + widen) * plan.step)
        for r in runs
    ]
    group_stretches = _read_ways(plan, pieces, plan.level, plan.fleet_level)
    workload_stretches = _read_ways(plan, pieces, plan.workload_level, None)
    fleet_stretches = _read_ways(plan, pieces, plan.fleet_level, plan.fleet_level)
    measured = _measure(
        client,
        plan,
        by,
        workload_by,
        matchers,
        parallel,
        (group_stretches, workload_stretches, fleet_stretches),
        _CoverageInput(units=units, runs=runs, pieces=pieces, interval=interval),
    )
    notes.extend(measured.notes)
    notes.extend(_reading_notes(group_stretches, measured.complete))
    missing_by = _check_grouping(
        client, by, measured.groups, measured.fleet, plan.wanted_start, plan.wanted_end, require_by
    )
    if missing_by is not None:
        notes.append(missing_by)
    if not plan.raw_present:
        notes.append(
            f"no raw counters: the GPU-seconds lost to a reduced clock ({RAW_CLOCK_LOST}, read raw "
            "only) are not measured"
        )
    if use_recorded and plan.level is None and plan.step >= RATE_WINDOW_SECONDS:
        notes.append(
            f"no recorded level keeps {', '.join(by)} (and the --match labels): groups read from "
            "the raw counters"
        )
    gaps = _gaps(measured.timeline, plan.start, plan.end, plan.step)
    series = _described(group_stretches, fleet_stretches)
    provenance = Provenance(
        kind="prometheus",
        location=client.url,
        start=plan.wanted_start,
        end=plan.wanted_end,
        step_seconds=float(plan.step),
        sample_interval_seconds=plan.sample_interval,
        series=series,
        gaps=tuple(gaps),
        timeline=tuple(measured.timeline),
        notes=tuple(notes),
        clock_loss_measured=plan.raw_present,
        coverage=measured.coverage,
    )
    return PrometheusCollected(
        groups=measured.groups,
        fleet=measured.fleet,
        workloads=measured.workloads,
        provenance=provenance,
        queries=client.queries,
    )


@dataclass(frozen=True, slots=True)
class _Plan:
    """What collect decides before it measures: the range in whole windows and how each is read."""

    dialect: str
    sample_interval: float | None
    step: int
    wanted_start: float
    wanted_end: float
    start: float
    """The range's whole windows (wanted_start..start and end..wanted_end: its partial edges)."""
    end: float
    raw_present: bool
    level: RecordedLevel | None
    workload_level: RecordedLevel | None
    fleet_level: RecordedLevel | None
    covered: set[float]
    lookback: float | None


@dataclass(frozen=True, slots=True)
class _Queries:
    """What every query of one measurement shares: the client, the pool they run on, the plan
    (step, dialect, levels, raw counters or not) and the --match matchers."""

    client: PrometheusClient
    pool: ThreadPoolExecutor
    plan: _Plan
    matchers: Sequence[promql.Matcher]

    def query(self, expr: str, at: float) -> Future[list[Series]]:
        """An instant query at `at`, submitted to the pool."""
        return self.pool.submit(self.client.query, expr, at)


def _plan(
    client: PrometheusClient,
    by: tuple[str, ...],
    workload_by: tuple[str, ...],
    start: float,
    end: float,
    step: int | None,
    matchers: Sequence[promql.Matcher],
    use_recorded: bool,
    notes: list[str],
) -> _Plan:
    """The dialect, the scrape interval, the step, the windows and the recorded levels to read."""
    dialect = _dialect(client, end)
    if dialect == "metricsql":
        notes.append(
            "MetricsQL server (VictoriaMetrics): raw counters read with increase_prometheus over "
            "windows one scrape interval longer, as its increase() would credit a label set that "
            "returns after a gap with the gap"
        )
    probe = min(float(SAMPLE_PROBE_SECONDS), math.floor(end - start))
    sample_interval = _sample_interval(client, end, probe, matchers)
    if sample_interval is None:
        notes.append(
            f"no raw sample in the last {probe:g} s of the range: the scrape "
            f"interval is unknown; raw windows assume {DEFAULT_SAMPLE_INTERVAL_SECONDS:g} s"
        )
    if step is None:
        step = choose_step(end - start, sample_interval)
    wanted_start, wanted_end = float(round(start)), float(round(end))
    start, end = inner_range(wanted_start, wanted_end, step)
    if end <= start:  # shorter than a window: the whole windows that hold it
        start, end = aligned_range(wanted_start, wanted_end, step)
        wanted_start, wanted_end = start, end
    raw_present = sample_interval is not None or _raw_in_range(client, wanted_start, wanted_end, matchers)
    level, workload_level, fleet_level = _levels(
        by, workload_by, matchers, raw_present, use_recorded, step, notes
    )
    needed = [lv for lv in (level, workload_level, fleet_level) if lv is not None]
    # Where the complete cluster level is recorded, the rules ran: a workload level without series
    # there has no workloads (a shard of Slurm nodes has no pods), not a gap in the rules.
    checked = [lv for lv in needed if not (fleet_level is CLUSTER and lv.allocated_only)]
    covered = _covered_windows(client, checked, start, end, step, matchers)
    lookback = None
    for lv in needed if covered else []:  # measured on the first level with readings
        if (lookback := _lookback(client, lv, max(covered))) is not None:
            break
    return _Plan(
        dialect=dialect,
        sample_interval=sample_interval,
        step=step,
        wanted_start=wanted_start,
        wanted_end=wanted_end,
        start=start,
        end=end,
        raw_present=raw_present,
        level=level,
        workload_level=workload_level,
        fleet_level=fleet_level,
        covered=covered,
        lookback=lookback,
    )


def _levels(
    by: tuple[str, ...],
    workload_by: tuple[str, ...],
    matchers: Sequence[promql.Matcher],
    raw_present: bool,
    use_recorded: bool,
    step: int,
    notes: list[str],
) -> tuple[RecordedLevel | None, RecordedLevel | None, RecordedLevel | None]:
    """The recorded levels the groups, the workloads and the fleet are read from (None: raw)."""
    if not use_recorded:
        return None, None, None
    level = level_for(by, matchers, raw_present)
    workload_level = level_for(workload_by, matchers, raw_present)
    fleet_level = CLUSTER if {m.label for m in matchers} <= CLUSTER.labels else level
    if step < RATE_WINDOW_SECONDS and (level or workload_level or fleet_level):
        notes.append(
            f"query windows of {step:g} s are shorter than the recorded series' 5-minute rates: "
            "read from the raw counters"
        )
        return None, None, None
    return level, workload_level, fleet_level


def _read_ways(
    plan: _Plan,
    pieces: Sequence[tuple[float, float]],
    lv: RecordedLevel | None,
    fleet_lv: RecordedLevel | None,
) -> list[_Stretch]:
    """The range as stretches read one way, carved around the coverage runs' pieces, with the
    partial windows at either edge read the way their neighbour is."""
    covered = plan.covered if lv is not None else set()
    plain = _stretches(plan.start, plan.end, plan.step, covered, lv, fleet_lv, plan.lookback)
    plain = _carved(plain, pieces, reconstruct=plan.raw_present)
    if plain and plan.wanted_start < plan.start:  # the head, read the way its neighbour is
        plain.insert(0, replace(plain[0], start=plan.wanted_start, end=plan.start, edge=True, piece=None))
    if plain and plan.wanted_end > plan.end:
        plain.append(replace(plain[-1], start=plan.end, end=plan.wanted_end, edge=True, piece=None))
    return [replace(s, dialect=plan.dialect, sample_interval=plan.sample_interval) for s in plain]


@dataclass(frozen=True, slots=True)
class _CoverageInput:
    """Every target's window readings, the runs in which some went unseen, and their pieces."""

    units: dict[coverage.Key, list[float]]
    runs: Sequence[coverage.Run]
    pieces: Sequence[tuple[float, float]]
    interval: float


@dataclass(frozen=True, slots=True)
class _Measured:
    groups: list[Usage]
    fleet: Usage
    workloads: list[Usage]
    timeline: list[TimelinePoint]
    coverage: Coverage
    complete: bool
    """The groups hold every GPU (the fleet is their sum)."""
    notes: list[str]
    """What coverage found: unseen targets, parts whose fleet readings are missing."""


def _measure(
    client: PrometheusClient,
    plan: _Plan,
    by: tuple[str, ...],
    workload_by: tuple[str, ...],
    matchers: Sequence[promql.Matcher],
    parallel: int,
    stretches: tuple[list[_Stretch], list[_Stretch], list[_Stretch]],
    seen: _CoverageInput,
) -> _Measured:
    """The groups', the workloads' and the fleet's usage, and the coverage, from one pool of
    queries: every query is submitted first, then the answers are read (no task waits on another;
    only a part's missing fleet readings, found in the answers, cost a second round)."""
    group_stretches, workload_stretches, fleet_stretches = stretches
    level, step, raw_present, pieces = plan.level, plan.step, plan.raw_present, seen.pieces
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        q = _Queries(client=client, pool=pool, plan=plan, matchers=matchers)
        # groups that are unions of workloads (namespace of namespace/pod) are summed from the
        # workloads' answers: one set of queries instead of two
        derived = set(by) < set(workload_by) and level is plan.workload_level
        # every answer keeps the shards apart (cluster, shard) until the remainder is taken
        workload_keys, group_keys = _partitioned(workload_by), _partitioned(by)
        workload_jobs, workload_pieces, workload_each = _usage_jobs_by_piece(
            q, workload_keys, workload_stretches
        )
        if workload_by == by or derived:
            group_jobs, group_pieces, group_by = workload_jobs, workload_pieces, workload_keys
            read = _GroupReads(stretches=workload_stretches, jobs=workload_each, by=workload_keys)
        else:
            group_jobs, group_pieces, group_each = _usage_jobs_by_piece(q, group_keys, group_stretches)
            group_by = group_keys
            read = _GroupReads(stretches=group_stretches, jobs=group_each, by=group_keys)
        complete = _complete(read.stretches, raw_present)
        fleet_jobs = _fleet_jobs(q, fleet_stretches, totals=not complete)
        neighbours = [_neighbour_jobs(q, by, p) for p in pieces]
        piece_units = [
            q.query(_unit_expr(b - a, None, matchers, None, plan.dialect, plan.sample_interval), b)
            if raw_present
            else None
            for a, b in pieces
        ]
        partitioned_workloads = _usage(workload_jobs, workload_keys)
        if derived:
            partitioned_groups = _relabelled(partitioned_workloads, group_keys)
        elif group_jobs is workload_jobs:
            partitioned_groups = partitioned_workloads
        else:
            partitioned_groups = _usage(group_jobs, group_keys)
        fleets, timeline = _fleet(fleet_jobs, step)
        workloads = _relabelled(partitioned_workloads, workload_by)
        readings = _fleet_windows(fleet_jobs)
        # the fleet's level is recorded an evaluation after the node level: the tolerance's unit
        lag = plan.lookback / 1.5 if plan.lookback else seen.interval
        found = _fleet_holes(plan, read, fleet_stretches, _part_units(seen.units), readings, lag)
        if complete:
            # Groups that hold every GPU are the fleet: its own level (cluster:*) is recorded an
            # evaluation or two after theirs, so a difference would be a remainder of nobody's GPUs.
            groups = merge_usage(_relabelled(partitioned_groups, by))
            fleet = _sum_of(groups)
            holes: list[_Hole] = []
            more_notes = _timeline_notes(_joined(found, lag), plan.fleet_level)
        else:
            holes = _with_stand_ins(q, found, read)
            more_notes = _unread_notes(partitioned_groups, readings, holes, plan.fleet_level)
            groups, fleet = _with_remainders(partitioned_groups, _patched(fleets, readings, holes), by)
        seen_in_pieces = [
            _relabelled(_usage(group_pieces.get(k, []), group_by), by) for k in range(len(pieces))
        ]
        measured = _coverage(
            seen.runs,
            pieces,
            seen.units,
            [None if f is None else _per_unit(f.result()) for f in piece_units],
            [(_answered(b, by), _answered(a, by)) for b, a in neighbours],
            seen_in_pieces,
            start=plan.start,
            step=step,
            interval=seen.interval,
            reconstructed=raw_present,
        )
    spans = _joined(holes, lag)
    notes = [*_coverage_notes(measured), *_hole_notes(spans, plan.fleet_level), *more_notes]
    return _Measured(
        groups=groups,
        fleet=fleet,
        workloads=workloads,
        timeline=timeline,
        coverage=_with_holes(measured, spans, by),
        complete=complete,
        notes=notes,
    )


def _reading_notes(group_stretches: Sequence[_Stretch], complete: bool) -> list[str]:
    """How the groups were read from workload-level series, where they were."""
    if not any(stretch.level is not None and stretch.level.allocated_only for stretch in group_stretches):
        return []
    if complete:
        return [
            "groups come from workload-level series (pods or HPC jobs); GPUs held by no such "
            "workload are read from the raw counters of the same windows (the ungrouped group)"
        ]
    return [
        "groups come from workload-level series (pods or HPC jobs): GPUs held by no such "
        "workload form the ungrouped remainder, the fleet's cluster:* series less the groups' "
        "(the rules record them an evaluation apart: off by up to an evaluation interval's "
        "GPU-seconds at each end of the range); its idle time is allocated as far as the "
        "fleet's idle-while-allocated time exceeds the groups'"
    ]


def _check_grouping(
    client: PrometheusClient,
    by: Sequence[str],
    groups: Sequence[Usage],
    fleet: Usage,
    start: float,
    end: float,
    require_by: bool = True,
) -> str | None:
    """An empty answer or a grouping no series carries is the user's mistake, not a report of
    nothing: a QueryError naming the labels the Ridgeline series there have. require_by False
    (the default grouping, which a fleet without pods lacks): a note instead, for the latter."""
    if fleet.total_gpu_seconds > 0 and any(u.labels for u in groups):
        return None
    names = dict.fromkeys([RAW_REGIME_SECONDS, *(lv.regime_seconds for lv in (*GROUP_LEVELS, CLUSTER))])
    present = [name for name in client.labels(list(names), start, end) if name != "__name__"]
    there = ", ".join(present) or "none: no Ridgeline series at all"
    if fleet.total_gpu_seconds <= 0:
        raise QueryError(
            f"no GPU-seconds between {iso_time(start)} and {iso_time(end)} on {client.url} "
            f"(raw counters or recorded series); labels there: {there}"
        )
    if set(by) & set(present):
        return None
    message = f"--by {','.join(by)}: no Ridgeline series carries it; the labels they have: {there}"
    if require_by:
        raise QueryError(message)
    return message


def _sample_interval(
    client: PrometheusClient, end: float, window: float, matchers: Sequence[promql.Matcher]
) -> float | None:
    """The scrape interval: a probe window over the median sample count of one counter per GPU
    in it, taken once the window's older half holds about as many samples as its newer half.
    Series younger than the window (a Prometheus up for 90 s, a report over 20 minutes) would
    make the interval look longer — 35 s for a 5 s scrape — so then only the newer half counts,
    once the series reach into the older one; the window is halved until they do."""
    half = math.floor(window / 2)  # query windows are whole seconds
    while half >= 1:
        recent = _median_samples(client, half, end, matchers)
        if recent is None or recent < 2:
            return None
        older = _median_samples(client, half, end - half, matchers)
        if older is not None and older >= recent - 1:  # full: one sample either way is alignment
            return 2 * half / (recent + older)
        if older:  # the series began in the older half: the newer one is full
            return half / recent
        half = math.floor(half / 2)
    return None


def _raw_in_range(
    client: PrometheusClient, start: float, end: float, matchers: Sequence[promql.Matcher]
) -> bool:
    """Whether any raw counter lies in [start, end] (its last 10 minutes may hold none: a fleet
    that shrank to nothing); the series index answers, no sample is read."""
    return bool(client.labels([promql.raw_series(matchers)], start, end))


def _median_samples(
    client: PrometheusClient, window: float, at: float, matchers: Sequence[promql.Matcher]
) -> float | None:
    found = client.query(promql.sample_count_expr(window, matchers), at)
    return found[0][1] if found else None


def _dialect(client: PrometheusClient, at: float) -> str:
    """ "metricsql" when the server answers a MetricsQL-only function, else "promql"."""
    try:
        client.query(promql.DIALECT_PROBE, at)
    except QueryError:
        return "promql"
    return "metricsql"


def _lookback(client: PrometheusClient, level: RecordedLevel, at: float) -> float | None:
    """1.5 evaluation intervals of the recording rules, measured at `at` (a covered window's end);
    None (the server's own lookback) when it cannot be measured."""
    found = client.query(promql.evaluation_count_expr(level, SAMPLE_PROBE_SECONDS), at)
    if not found or found[0][1] < 2:
        return None
    return min(float(RATE_WINDOW_SECONDS), 1.5 * SAMPLE_PROBE_SECONDS / found[0][1])


def _covered_windows(
    client: PrometheusClient,
    levels: Sequence[RecordedLevel],
    start: float,
    end: float,
    step: int,
    matchers: Sequence[promql.Matcher],
) -> set[float]:
    """Window ends at which every level needed has recorded series."""
    covered: set[float] | None = None
    for level in dict.fromkeys(levels):
        usable = [m for m in matchers if m.label in level.labels]
        ends: set[float] = set()
        for _labels, points in client.query_range(
            promql.coverage_expr(level, step, usable), start + step, end, step
        ):
            ends.update(t for t, v in points if v > 0)
        covered = ends if covered is None else covered & ends
    return covered or set()


def _stretches(
    start: float,
    end: float,
    step: int,
    covered: set[float],
    level: RecordedLevel | None,
    fleet_level: RecordedLevel | None,
    lookback: float | None = None,
) -> list[_Stretch]:
    """The range cut into runs of windows read the same way (recorded where covered, else raw),
    each at most MAX_STRETCH_SECONDS long."""
    out: list[_Stretch] = []
    count = round((end - start) / step)
    for i in range(count):
        window_end = start + (i + 1) * step
        recorded = level is not None and window_end in covered
        lv = level if recorded else None
        flv = fleet_level if recorded else None
        back = lookback if recorded else None
        if (
            out
            and out[-1].level is lv
            and out[-1].fleet_level is flv
            and out[-1].end - out[-1].start + step <= max(MAX_STRETCH_SECONDS, step)
        ):
            out[-1] = _Stretch(start=out[-1].start, end=window_end, level=lv, fleet_level=flv, lookback=back)
        else:
            out.append(
                _Stretch(start=window_end - step, end=window_end, level=lv, fleet_level=flv, lookback=back)
            )
    return out


def _carved(
    plain: Sequence[_Stretch], pieces: Sequence[tuple[float, float]], *, reconstruct: bool
) -> list[_Stretch]:
    """The stretches cut at the coverage runs' edges, each cut part marked with its run; with
    `reconstruct`, a run's parts become one raw reading across it (an edge: one window of its own
    length), since the daemon's counters kept counting while nobody scraped them."""
    cut: list[_Stretch] = []
    for stretch in plain:
        edges = sorted(
            {stretch.start, stretch.end, *(t for p in pieces for t in p if stretch.start < t < stretch.end)}
        )
        for a, b in itertools.pairwise(edges):
            piece = next((k for k, (ps, pe) in enumerate(pieces) if ps <= a and b <= pe), None)
            cut.append(replace(stretch, start=a, end=b, piece=piece))
    if not reconstruct:
        return cut
    out: list[_Stretch] = []
    for part in cut:
        if part.piece is not None and out and out[-1].piece == part.piece:
            out[-1] = replace(out[-1], end=part.end)
        elif part.piece is not None:
            out.append(replace(part, level=None, fleet_level=None, lookback=None, edge=True))
        else:
            out.append(part)
    return out


def _unit_expr(
    length: float,
    level: RecordedLevel | None,
    matchers: Sequence[promql.Matcher],
    lookback: float | None,
    dialect: str,
    sample_interval: float | None,
) -> str:
    """GPU-seconds per scrape target over one window (all regimes summed)."""
    window = promql.window_expr(
        "regime",
        coverage.UNIT_LABELS,
        length,
        level=level,
        matchers=matchers,
        lookback=lookback if level is not None else None,
        dialect=dialect,
        sample_interval=sample_interval,
    )
    return f"sum by ({', '.join(coverage.UNIT_LABELS)}) ({window})"


def _unit_readings(
    client: PrometheusClient,
    start: float,
    end: float,
    step: int,
    fleet_level: RecordedLevel | None,
    matchers: Sequence[promql.Matcher],
    lookback: float | None,
    dialect: str,
    sample_interval: float | None,
) -> dict[coverage.Key, list[float]]:
    """Every scrape target's GPU-seconds in every window: from the node level where it is
    recorded (and the fleet is read recorded), else from the raw counters."""
    level = INSTANCE if fleet_level is not None and {m.label for m in matchers} <= INSTANCE.labels else None
    covered = _covered_windows(client, [INSTANCE], start, end, step, matchers) if level is not None else set()
    count = round((end - start) / step)
    index = {start + (i + 1) * step: i for i in range(count)}
    readings: dict[coverage.Key, list[float]] = {}
    for stretch in _stretches(start, end, step, covered, level, level, lookback):
        expr = _unit_expr(step, stretch.level, matchers, stretch.lookback, dialect, sample_interval)
        for metric, points in client.query_range(expr, stretch.start + step, stretch.end, step):
            row = readings.setdefault(tuple(metric.get(k, "") for k in coverage.UNIT_LABELS), [0.0] * count)
            for t, v in points:
                if t in index:
                    row[index[t]] += v
    return readings


def _per_unit(answer: Sequence[Series]) -> dict[coverage.Key, float]:
    out: dict[coverage.Key, float] = {}
    for metric, value in answer:
        key = tuple(metric.get(k, "") for k in coverage.UNIT_LABELS)
        out[key] = out.get(key, 0.0) + value
    return out


def _group_key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _per_group(answer: Sequence[Series], by: Sequence[str]) -> dict[tuple[tuple[str, str], ...], float]:
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for metric, value in answer:
        if metric.get("regime") in REGIMES:
            key = _group_key(_labels(metric, by))
            out[key] = out.get(key, 0.0) + value
    return out


def _answered(future: Future[list[Series]] | None, by: Sequence[str]) -> _GroupSeconds | None:
    return None if future is None else _per_group(future.result(), by)


def _relabelled(usages: Sequence[Usage], by: Sequence[str]) -> list[Usage]:
    return merge_usage(replace(u, labels=_labels(u.labels, by)) for u in usages)


def _neighbour_jobs(
    q: _Queries, by: Sequence[str], piece: tuple[float, float]
) -> tuple[Future[list[Series]] | None, Future[list[Series]] | None]:
    """The groups' GPU-seconds in the window just before a run's piece and the one just after
    (None: outside the range)."""
    plan = q.plan
    last = plan.start + round((plan.end - plan.start) / plan.step) * plan.step

    def window(at: float) -> Future[list[Series]] | None:
        if not plan.start + plan.step <= at <= last:
            return None
        lv = plan.level if plan.level is not None and at in plan.covered else None
        expr = promql.window_expr(
            "regime",
            by,
            plan.step,
            level=lv,
            matchers=q.matchers,
            lookback=plan.lookback if lv is not None else None,
            dialect=plan.dialect,
            sample_interval=plan.sample_interval,
        )
        return q.query(expr, at)

    return window(piece[0]), window(piece[1] + plan.step)


def _coverage(
    runs: Sequence[coverage.Run],
    pieces: Sequence[tuple[float, float]],
    units: Mapping[coverage.Key, Sequence[float]],
    piece_units: Sequence[Mapping[coverage.Key, float] | None],
    neighbours: Sequence[tuple[_GroupSeconds | None, _GroupSeconds | None]],
    seen_in_pieces: Sequence[Sequence[Usage]],
    *,
    start: float,
    step: int,
    interval: float,
    reconstructed: bool,
) -> Coverage:
    """What each run expected and saw, per target and per group (docs/report.md, "Coverage")."""
    stretches = []
    group_missing: dict[tuple[tuple[str, str], ...], float] = {}
    for k, run in enumerate(runs):
        a, b = pieces[k]
        first, last = round((a - start) / step), round((b - start) / step) - 1
        expected = lost = 0.0
        for key, series in units.items():
            want = coverage.expected_over(series, first, last)
            read = piece_units[k]
            got = read.get(key, 0.0) if read is not None else sum(series[first : last + 1])
            expected += want
            lost += coverage.missing(want, got, b - a, interval)
        stretches.append(
            CoverageStretch(
                start=a,
                end=b,
                expected_gpu_seconds=expected,
                seen_gpu_seconds=expected - lost,
                reconstructed=reconstructed,
                targets=tuple(coverage.unit_name(u) for u in run.units),
            )
        )
        before, after = neighbours[k]
        seen = {_group_key(u.labels): u.total_gpu_seconds for u in seen_in_pieces[k]}
        for group in dict.fromkeys([*(before or {}), *(after or {})]):
            want = coverage.expected_between(
                None if before is None else before.get(group, 0.0),
                None if after is None else after.get(group, 0.0),
                last - first + 1,
            )
            short = coverage.missing(want, seen.get(group, 0.0), b - a, interval)
            if short > 0:
                group_missing[group] = group_missing.get(group, 0.0) + short
    return Coverage(stretches=tuple(stretches), group_missing=group_missing)


_GroupSeconds = dict[tuple[tuple[str, str], ...], float]


def _coverage_notes(measured: Coverage) -> list[str]:
    """One sentence per stretch with unseen targets: which, when, how much, and whether read across."""
    notes = []
    for s in measured.stretches:
        shown = ", ".join(s.targets[:6]) + (f" and {len(s.targets) - 6} more" if len(s.targets) > 6 else "")
        if not s.reconstructed:
            how = "not reconstructed: this server has no raw counters to read across it"
        elif s.missing_gpu_seconds > 0:
            how = "read from the raw counters across it, which lack part of it (counters that restarted)"
        else:
            how = "read from the raw counters across it (they kept counting while unscraped)"
        notes.append(
            f"{iso_time(s.start)} to {iso_time(s.end)}: {len(s.targets)} target(s) unseen ({shown}); "
            f"{how}; {s.missing_gpu_seconds / 3600.0:.3g} of {s.expected_gpu_seconds / 3600.0:.3g} "
            "expected GPU-hours missing"
        )
    return notes


def _usage_jobs_by_piece(
    q: _Queries, by: tuple[str, ...], stretches: Sequence[_Stretch]
) -> tuple[_Jobs, dict[int, _Jobs], list[_Jobs]]:
    """_usage_jobs, with each coverage run's answers also kept apart, and each stretch's."""
    jobs: _Jobs = []
    pieces: dict[int, _Jobs] = {}
    each: list[_Jobs] = []
    for stretch in stretches:
        mine = _usage_jobs(q, by, [stretch])
        jobs.extend(mine)
        each.append(mine)
        if stretch.piece is not None:
            pieces.setdefault(stretch.piece, []).extend(mine)
    return jobs, pieces, each


def _labels(metric: Mapping[str, str], by: Sequence[str]) -> dict[str, str]:
    return {label: metric[label] for label in by if metric.get(label)}


_Jobs = list[tuple[str, Future[Any]]]


def _usage_jobs(q: _Queries, by: tuple[str, ...], stretches: Sequence[_Stretch]) -> _Jobs:
    """One instant query per quantity per stretch, summing every window of it per group; the
    GPU-seconds lost to a reduced clock from the raw counter whatever the stretch reads (with
    `raw_present`: a server without raw counters cannot tell them). Where a stretch reads an
    allocated-only level and the raw counters are there, the GPUs the level leaves out are read
    from the raw counters of the same windows (they come back without the grouping labels):
    measured, never the fleet's total less the groups', which two levels the rules record one
    evaluation apart would make a group of GPUs that every pod holds."""
    raw_present = q.plan.raw_present
    jobs: _Jobs = []
    for stretch in stretches:
        jobs.extend(_stretch_jobs(q, by, stretch, q.matchers, clock_lost=raw_present))
        held_by = stretch.level.held_by if stretch.level is not None else None
        if raw_present and held_by is not None:
            unheld = promql.Matcher(label=held_by, op="=", value="")
            raw = replace(stretch, level=None, fleet_level=None, lookback=None)
            # their clock loss came with the stretch's own (raw whatever the stretch reads)
            jobs.extend(_stretch_jobs(q, by, raw, [*q.matchers, unheld], clock_lost=False))
    return jobs


def _complete(stretches: Sequence[_Stretch], raw_present: bool) -> bool:
    """Whether the groups read over `stretches` (as _usage_jobs reads them) hold every GPU."""
    return all(
        s.level is None or not s.level.allocated_only or (raw_present and s.level.held_by is not None)
        for s in stretches
    )


def _stretch_jobs(
    q: _Queries,
    by: tuple[str, ...],
    stretch: _Stretch,
    matchers: Sequence[promql.Matcher],
    *,
    clock_lost: bool,
) -> _Jobs:
    step = q.plan.step
    jobs: _Jobs = []
    length = stretch.end - stretch.start
    lv = stretch.level
    quantities = ["regime", "flop", "dram_bytes"]
    if clock_lost:
        quantities.append("clock_lost")
    if lv is None or not lv.allocated_only:
        quantities.append("idle_allocated")  # else: the level's idle time is all allocated
    if lv is not None:
        quantities.append("cards")
    for quantity in quantities:
        q_level = None if quantity == "clock_lost" else lv
        if lv is not None and quantity == "idle_allocated" and not lv.allocated_only:
            q_level = lv if lv.idle_allocated is not None else None  # else raw counters
        keys: tuple[str, ...] = by
        if quantity == "regime" and lv is None:
            keys = (*by, "card")  # raw: the card split comes with the regimes
        window = promql.window_expr(
            quantity,
            keys,
            length if stretch.edge else step,
            level=q_level,
            matchers=matchers,
            lookback=stretch.lookback if q_level is not None else None,
            dialect=stretch.dialect,
            sample_interval=stretch.sample_interval,
        )
        expr = window if stretch.edge else promql.stretch_total(window, length, step)
        allocated = quantity == "regime" and lv is not None and lv.allocated_only
        job = "regime allocated" if allocated else quantity
        jobs.append((job, q.query(expr, stretch.end)))
    return jobs


def _usage(jobs: _Jobs, by: Sequence[str]) -> list[Usage]:
    """The answers of _usage_jobs as one Usage per group."""
    parts: list[Usage] = []
    for quantity, future in jobs:
        for metric, value in future.result():
            labels = _labels(metric, by)
            if quantity in ("regime", "regime allocated"):
                regime = metric.get("regime")
                if regime not in REGIMES:
                    continue
                card = metric.get("card")
                parts.append(
                    Usage(
                        labels=labels,
                        gpu_seconds={regime: value},
                        idle_allocated_gpu_seconds=value
                        if quantity != "regime" and regime == "idle"
                        else 0.0,
                        card_gpu_seconds={card: value} if card else {},
                    )
                )
            elif quantity == "cards":
                card = metric.get("card")
                if card:
                    parts.append(Usage(labels=labels, card_gpu_seconds={card: value}))
            elif quantity == "flop":
                parts.append(Usage(labels=labels, flop=value))
            elif quantity == "dram_bytes":
                parts.append(Usage(labels=labels, dram_bytes=value))
            elif quantity == "clock_lost":
                cause = metric.get("cause")
                if cause and value > 0:
                    parts.append(Usage(labels=labels, clock_lost_gpu_seconds={cause: value}))
            else:
                parts.append(Usage(labels=labels, idle_allocated_gpu_seconds=value))
    merged = merge_usage(parts)
    return [
        u
        for u in merged
        if u.total_gpu_seconds > 0 or u.flop > 0 or u.dram_bytes > 0 or u.clock_lost_gpu_seconds
    ]


def _fleet_jobs(q: _Queries, stretches: Sequence[_Stretch], totals: bool = True) -> _FleetJobs:
    """One range query per quantity per stretch: the fleet per window (totals False: its regime
    seconds only, for the timeline and the gaps, when the fleet is its groups' sum)."""
    jobs: _FleetJobs = []
    step = q.plan.step
    quantities = ("regime", "flop", "dram_bytes", "idle_allocated") if totals else ("regime",)
    for stretch in stretches:
        lv = stretch.fleet_level
        usable = [m for m in q.matchers if lv is None or m.label in lv.labels]
        for quantity in quantities:
            if (
                quantity == "idle_allocated"
                and lv is not None
                and lv.idle_allocated is None
                and not lv.allocated_only
            ):
                continue  # a level that cannot tell; the groups' sum stands
            expr = promql.window_expr(
                quantity,
                PARTITION_LABELS,
                stretch.end - stretch.start if stretch.edge else step,
                level=lv,
                matchers=usable,
                lookback=stretch.lookback,
                dialect=stretch.dialect,
                sample_interval=stretch.sample_interval,
            )
            if stretch.edge:  # one value: a run read across is its windows' average on the timeline
                across = (stretch.start, stretch.end) if stretch.piece is not None else None
                jobs.append((f"edge {quantity}", q.query(expr, stretch.end), across, stretch.end))
            else:
                future = q.pool.submit(q.client.query_range, expr, stretch.start + step, stretch.end, step)
                jobs.append((quantity, future, None, stretch.end))
    return jobs


def _sum_of(groups: Sequence[Usage]) -> Usage:
    """The groups' usage added up (labels dropped): the fleet when they hold every GPU."""
    merged = merge_usage(replace(u, labels={}) for u in groups)
    return merged[0] if merged else Usage(labels={})


_FleetJobs = list[tuple[str, Future[Any], tuple[float, float] | None, float]]
"""(quantity, answer, the span of a coverage run read across in one value, the stretch's end)."""


def _fleet(jobs: _FleetJobs, step: int) -> tuple[dict[_Partition, Usage], list[TimelinePoint]]:
    """Each shard's totals (cluster, shard: empty on a server of one) and the fleet's timeline
    (GPUs per regime in each window)."""
    parts: list[Usage] = []
    per_window: dict[float, dict[str, float]] = {}
    for job, future, across, _end in jobs:
        quantity = job.removeprefix("edge ")
        for metric, answer in future.result():
            points = [(math.nan, answer)] if job.startswith("edge ") else answer
            labels = _labels(metric, PARTITION_LABELS)
            total = sum(v for _, v in points)
            if quantity == "regime":
                regime = metric.get("regime")
                if regime not in REGIMES:
                    continue
                parts.append(Usage(labels=labels, gpu_seconds={regime: total}))
                for t, v in points:
                    if not math.isnan(t):
                        window = per_window.setdefault(t, {})
                        window[regime] = window.get(regime, 0.0) + v / step
                    elif across is not None:
                        a, b = across
                        for i in range(round((b - a) / step)):
                            window = per_window.setdefault(a + (i + 1) * step, {})
                            window[regime] = window.get(regime, 0.0) + v / (b - a)
            elif quantity == "flop":
                parts.append(Usage(labels=labels, flop=total))
            elif quantity == "idle_allocated":
                parts.append(Usage(labels=labels, idle_allocated_gpu_seconds=total))
            else:
                parts.append(Usage(labels=labels, dram_bytes=total))
    timeline = [TimelinePoint(end=t, gpus=per_window[t]) for t in sorted(per_window)]
    return {_partition(u.labels): u for u in merge_usage(parts)}, timeline


PARTITION_LABELS: tuple[str, ...] = ("cluster", "shard")
"""What tells the parts of a global view apart: each cluster's (or shard's) Prometheus names
itself in these external labels (deploy/federation/prometheus-global.yml)."""

_Partition = tuple[str, ...]


def _partition(labels: Mapping[str, str]) -> _Partition:
    return tuple(labels.get(k, "") for k in PARTITION_LABELS)


def _partitioned(by: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*by, *PARTITION_LABELS]))


def _with_remainders(
    groups: Sequence[Usage], fleets: Mapping[_Partition, Usage], by: Sequence[str]
) -> tuple[list[Usage], Usage]:
    """The groups with each part's remainder (GPUs its groups do not account for) taken within
    the part and added, and the fleet as their sum: a global view's numbers are then its shards'
    reports summed, whatever each shard's remainder came to."""
    rows: list[Usage] = []
    parts = dict.fromkeys([*fleets, *(_partition(u.labels) for u in groups)])
    for part in parts:
        mine = _relabelled([u for u in groups if _partition(u.labels) == part], by)
        fleet = fleets.get(part, Usage(labels={}))
        rest = remainder(mine, fleet)
        where = dict(zip(PARTITION_LABELS, part, strict=True))
        rows.extend(mine)
        if rest is not None:
            rows.append(replace(rest, labels=_labels(where, by)))
    merged = merge_usage(rows)
    measured = merge_usage(replace(u, labels={}) for u in fleets.values())
    grouped = merge_usage(replace(u, labels={}) for u in merged)
    # the fleet's GPU-seconds are its rows' (remainders included: none is left for build_report
    # to take again); its FLOPs, bytes and idle-allocated time are as measured
    fleet = measured[0] if measured else Usage(labels={})
    return merged, replace(fleet, gpu_seconds=grouped[0].gpu_seconds if grouped else {})


# -- a part's missing fleet readings (a global server) ----------------------------------------


@dataclass(frozen=True, slots=True)
class _GroupReads:
    """How the groups were read: their stretches, each stretch's queries, the keys they answer by."""

    stretches: Sequence[_Stretch]
    jobs: Sequence[_Jobs]
    by: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Hole:
    """Windows (start, end] of one group stretch in which a part's fleet reading is missing, or
    short of what its scrape targets reported there: its remainder is not taken over them."""

    part: _Partition
    start: float
    end: float
    stretch: int
    """The group stretch the windows lie in (its index)."""
    expected: float | None
    """The part's GPU-seconds its scrape targets reported there (None: a partial window at an edge
    of the range, which coverage does not measure)."""
    groups: Usage | None = None
    """What the part's groups were read to have there: its fleet there (so no remainder)."""


def _part_units(units: Mapping[coverage.Key, Sequence[float]]) -> dict[_Partition, list[float]]:
    """Each part's GPU-seconds per window: its scrape targets' summed."""
    out: dict[_Partition, list[float]] = {}
    for key, row in units.items():
        part = _partition(dict(zip(coverage.UNIT_LABELS, key, strict=True)))
        total = out.setdefault(part, [0.0] * len(row))
        for i, value in enumerate(row):
            total[i] += value
    return out


def _fleet_reading(quantity: str, metric: Mapping[str, str], value: float) -> Usage | None:
    """One answer of _fleet_jobs as a Usage (None: a regime the model does not know)."""
    if quantity == "regime":
        regime = metric.get("regime")
        return Usage(labels={}, gpu_seconds={regime: value}) if regime in REGIMES else None
    if quantity == "flop":
        return Usage(labels={}, flop=value)
    if quantity == "idle_allocated":
        return Usage(labels={}, idle_allocated_gpu_seconds=value)
    return Usage(labels={}, dram_bytes=value)


def _fleet_windows(jobs: _FleetJobs) -> dict[_Partition, dict[float, Usage]]:
    """Each part's fleet reading per window, by the window's end (a stretch read in one value: by
    the stretch's end)."""
    parts: dict[_Partition, dict[float, list[Usage]]] = {}
    for job, future, _across, end in jobs:
        quantity = job.removeprefix("edge ")
        for metric, answer in future.result():
            points = [(end, answer)] if job.startswith("edge ") else answer
            slots = parts.setdefault(_partition(metric), {})
            for t, value in points:
                reading = _fleet_reading(quantity, metric, value)
                if reading is not None:
                    slots.setdefault(t, []).append(reading)
    return {part: {t: _sum_of(us) for t, us in windows.items()} for part, windows in parts.items()}


def _recorded_ends(fleet_stretches: Sequence[_Stretch], step: int) -> set[float]:
    """The ends of the whole windows the fleet is read recorded in."""
    return {
        s.start + (i + 1) * step
        for s in fleet_stretches
        if s.fleet_level is not None and not s.edge
        for i in range(round((s.end - s.start) / step))
    }


def _short_windows(
    plan: _Plan,
    fleet_stretches: Sequence[_Stretch],
    part_units: Mapping[_Partition, Sequence[float]],
    readings: Mapping[_Partition, Mapping[float, Usage]],
    interval: float,
) -> dict[_Partition, list[float]]:
    """Per part, the ends of the windows read from the fleet's recorded level in which its fleet
    reading is missing, or short of its scrape targets' GPU-seconds beyond coverage's tolerance."""
    recorded = _recorded_ends(fleet_stretches, plan.step)
    out: dict[_Partition, list[float]] = {}
    for part, row in part_units.items():
        mine = readings.get(part, {})
        for i, want in enumerate(row):
            t = plan.start + (i + 1) * plan.step
            got = mine[t].total_gpu_seconds if t in mine else 0.0
            if t in recorded and want > 0 and coverage.missing(want, got, plan.step, interval) > 0:
                out.setdefault(part, []).append(t)
    return out


def _fleet_holes(
    plan: _Plan,
    read: _GroupReads,
    fleet_stretches: Sequence[_Stretch],
    part_units: Mapping[_Partition, Sequence[float]],
    readings: Mapping[_Partition, Mapping[float, Usage]],
    interval: float,
) -> list[_Hole]:
    """Where a part's fleet reading is missing or short: runs of whole windows (against its
    targets' readings), and the range's partial edges where its groups have GPU-seconds and its
    fleet none."""
    short = _short_windows(plan, fleet_stretches, part_units, readings, interval)
    recorded_edges = {(s.start, s.end) for s in fleet_stretches if s.edge and s.fleet_level is not None}
    holes: list[_Hole] = []
    for k, stretch in enumerate(read.stretches):
        if stretch.edge:
            if (stretch.start, stretch.end) in recorded_edges:
                holes.extend(_edge_holes(k, stretch, _usage(read.jobs[k], read.by), readings))
            continue
        holes.extend(_window_holes(plan, k, stretch, short, part_units))
    return holes


def _window_holes(
    plan: _Plan,
    k: int,
    stretch: _Stretch,
    short: Mapping[_Partition, Sequence[float]],
    part_units: Mapping[_Partition, Sequence[float]],
) -> list[_Hole]:
    """Each part's short windows inside one stretch as runs, with what its targets reported there."""
    holes: list[_Hole] = []
    for part, ends in short.items():
        for run in _runs([t for t in ends if stretch.start < t <= stretch.end], plan.step):
            first = round((run[0] - plan.start) / plan.step) - 1
            expected = sum(part_units[part][first : first + len(run)])
            holes.append(
                _Hole(part=part, start=run[0] - plan.step, end=run[-1], stretch=k, expected=expected)
            )
    return holes


def _runs(ends: Sequence[float], step: int) -> list[list[float]]:
    """Window ends (sorted) cut into runs of consecutive windows."""
    runs: list[list[float]] = []
    for t in ends:
        if runs and t == runs[-1][-1] + step:
            runs[-1].append(t)
        else:
            runs.append([t])
    return runs


def _edge_holes(
    k: int, edge: _Stretch, groups: Sequence[Usage], readings: Mapping[_Partition, Mapping[float, Usage]]
) -> list[_Hole]:
    """A partial window at the range's edge is a hole of each part whose groups have GPU-seconds
    there and whose fleet has no reading."""
    seen: dict[_Partition, float] = {}
    for u in groups:
        seen[_partition(u.labels)] = seen.get(_partition(u.labels), 0.0) + u.total_gpu_seconds
    return [
        _Hole(part=part, start=edge.start, end=edge.end, stretch=k, expected=None)
        for part, seconds in seen.items()
        if seconds > 0 and edge.end not in readings.get(part, {})
    ]


def _within(q: _Queries, part: _Partition) -> _Queries:
    """The queries restricted to one part (a label it lacks: matched as empty)."""
    escaped = [v.replace("\\", "\\\\").replace('"', '\\"') for v in part]
    where = [promql.Matcher(label=k, op="=", value=v) for k, v in zip(PARTITION_LABELS, escaped, strict=True)]
    return replace(q, matchers=[*q.matchers, *where])


def _with_stand_ins(q: _Queries, holes: Sequence[_Hole], read: _GroupReads) -> list[_Hole]:
    """Each hole with its part's groups' usage there: a whole stretch's from its answers, a run
    inside one from one instant query per quantity (restricted to the part)."""
    jobs: list[tuple[_Jobs, tuple[str, ...]]] = []
    for h in holes:
        stretch = read.stretches[h.stretch]
        if (h.start, h.end) == (stretch.start, stretch.end):
            jobs.append((read.jobs[h.stretch], read.by))
        elif stretch.level is None and not q.plan.raw_present:
            jobs.append(([], PARTITION_LABELS))  # read raw where there are none: nothing
        else:
            inside = replace(stretch, start=h.start, end=h.end, piece=None)
            jobs.append((_usage_jobs(_within(q, h.part), PARTITION_LABELS, [inside]), PARTITION_LABELS))
    return [
        replace(h, groups=_sum_of([u for u in _usage(answers, keys) if _partition(u.labels) == h.part]))
        for h, (answers, keys) in zip(holes, jobs, strict=True)
    ]


def _patched(
    fleets: Mapping[_Partition, Usage],
    readings: Mapping[_Partition, Mapping[float, Usage]],
    holes: Sequence[_Hole],
) -> dict[_Partition, Usage]:
    """Each part's fleet with its readings in its holes replaced by its groups' usage there: its
    remainder is then taken over the windows its fleet was read in, not less the groups' time in
    the others (a silent minus), and the fleet's FLOPs and bytes hold its groups' there."""
    out = dict(fleets)
    for part in dict.fromkeys(h.part for h in holes):
        mine = [h for h in holes if h.part == part]
        kept = [u for t, u in readings.get(part, {}).items() if not any(h.start < t <= h.end for h in mine)]
        total = _sum_of([*kept, *(h.groups for h in mine if h.groups is not None)])
        out[part] = replace(
            total, labels=_labels(dict(zip(PARTITION_LABELS, part, strict=True)), PARTITION_LABELS)
        )
    return out


@dataclass(frozen=True, slots=True)
class _Span:
    """Adjacent holes of one part joined: what its targets reported there (None: not measured),
    what its groups hold there, and the GPU-seconds of its remainder not counted."""

    part: _Partition
    start: float
    end: float
    expected: float | None
    grouped: float
    missing: float


def _span(h: _Hole) -> _Span:
    grouped = h.groups.total_gpu_seconds if h.groups is not None else 0.0
    return _Span(part=h.part, start=h.start, end=h.end, expected=h.expected, grouped=grouped, missing=0.0)


def _joined(holes: Sequence[_Hole], interval: float) -> list[_Span]:
    """Each part's adjacent holes as one span (a measured one and an edge's apart), with the
    ungrouped GPU-seconds not counted there beyond coverage's tolerance."""
    spans: list[_Span] = []
    for span in (_span(h) for h in sorted(holes, key=lambda h: (h.part, h.start))):
        last = spans[-1] if spans else None
        if last is None or (last.part, last.end, last.expected is None) != (
            span.part,
            span.start,
            span.expected is None,
        ):
            spans.append(span)
            continue
        expected = None if span.expected is None or last.expected is None else last.expected + span.expected
        spans[-1] = replace(last, end=span.end, expected=expected, grouped=last.grouped + span.grouped)
    return [
        replace(s, missing=coverage.missing(s.expected, s.grouped, s.end - s.start, interval))
        if s.expected is not None
        else s
        for s in spans
    ]


def _part_name(part: _Partition) -> str:
    return " ".join(f"{k}={v}" for k, v in zip(PARTITION_LABELS, part, strict=True) if v) or "(unlabelled)"


def _with_holes(measured: Coverage, spans: Sequence[_Span], by: Sequence[str]) -> Coverage:
    """The coverage with each measured span as a stretch (its part's fleet totals unseen: what its
    targets reported there expected, what its groups hold seen) and its missing time the part's
    remainder's."""
    stretches = list(measured.stretches)
    group_missing = dict(measured.group_missing)
    for s in spans:
        if s.expected is None:
            continue
        stretches.append(
            CoverageStretch(
                start=s.start,
                end=s.end,
                expected_gpu_seconds=s.expected,
                seen_gpu_seconds=s.expected - s.missing,
                reconstructed=False,
                targets=(f"{_part_name(s.part)} fleet totals",),
            )
        )
        rest = _group_key(_labels(dict(zip(PARTITION_LABELS, s.part, strict=True)), by))
        if s.missing > 0:
            group_missing[rest] = group_missing.get(rest, 0.0) + s.missing
    stretches.sort(key=lambda c: (c.start, c.end))
    return Coverage(stretches=tuple(stretches), group_missing=group_missing)


def _unread_notes(
    groups: Sequence[Usage],
    readings: Mapping[_Partition, Mapping[float, Usage]],
    holes: Sequence[_Hole],
    fleet_level: RecordedLevel | None,
) -> list[str]:
    """A part whose groups have GPU-seconds but whose fleet was read in no window and which no hole
    accounts for (no node-level readings to find them by): it has no remainder at all, and the
    notes say so rather than leave it out silently."""
    level = f"{fleet_level.name}:*" if fleet_level is not None else "fleet"
    holed = {h.part for h in holes}
    parts = dict.fromkeys(_partition(u.labels) for u in groups if u.total_gpu_seconds > 0)
    return [
        f"{_part_name(part)}: no fleet totals ({level}) in the range, nor node-level readings to "
        "measure its windows by: its groups are counted, any GPUs they do not hold are not"
        for part in parts
        if part not in readings and part not in holed
    ]


def _timeline_notes(spans: Sequence[_Span], fleet_level: RecordedLevel | None) -> list[str]:
    """Where the groups hold every GPU (the fleet is their sum) a part's missing fleet readings cost
    only the timeline, which is drawn from them: one sentence per part, its whole windows."""
    level = f"{fleet_level.name}:*" if fleet_level is not None else "fleet"
    notes = []
    for part in dict.fromkeys(s.part for s in spans if s.expected is not None):
        mine = [s for s in spans if s.part == part and s.expected is not None]
        seconds = sum(s.end - s.start for s in mine)
        when = ", ".join(f"{iso_time(s.start)} to {iso_time(s.end)}" for s in mine)
        notes.append(
            f"{_part_name(part)}: fleet totals ({level}) missing or short for {seconds / 60:g} min "
            f"({when}): the timeline lacks its GPUs there; its numbers are its groups' and hold them"
        )
    return notes


def _hole_cost(spans: Sequence[_Span]) -> str:
    """What a part's holes cost: its ungrouped GPU-hours not counted, of what its targets reported."""
    measured = [s for s in spans if s.expected is not None]
    if not measured:
        return "not measured: a partial window at the range's edge"
    missing = sum(s.missing for s in measured) / 3600.0
    expected = sum(s.expected or 0.0 for s in measured) / 3600.0
    cost = f"{missing:.3g} of the {expected:.3g} GPU-hours its targets reported there"
    return cost + ("; the range's partial windows not measured" if len(measured) < len(spans) else "")


def _hole_notes(spans: Sequence[_Span], fleet_level: RecordedLevel | None) -> list[str]:
    """One sentence per part whose fleet readings are missing: which, how long, what it costs."""
    level = f"{fleet_level.name}:*" if fleet_level is not None else "fleet"
    notes = []
    for part in dict.fromkeys(s.part for s in spans):
        mine = [s for s in spans if s.part == part]
        seconds = sum(s.end - s.start for s in mine)
        when = ", ".join(f"{iso_time(s.start)} to {iso_time(s.end)}" for s in mine)
        notes.append(
            f"{_part_name(part)}: fleet totals ({level}) missing or short for {seconds / 60:g} min "
            f"({when}): its groups there are counted, its ungrouped GPUs there are not "
            f"({_hole_cost(mine)}); its remainder is taken from the other windows"
        )
    return notes


def _gaps(timeline: Sequence[TimelinePoint], start: float, end: float, step: int) -> list[Window]:
    """Windows in which no GPU reported anything, merged into stretches."""
    present = {p.end for p in timeline if sum(p.gpus.values()) > 0}
    gaps: list[Window] = []
    count = round((end - start) / step)
    for i in range(count):
        window_end = start + (i + 1) * step
        if window_end in present:
            continue
        if gaps and gaps[-1].end == window_end - step:
            gaps[-1] = Window(start=gaps[-1].start, end=window_end)
        else:
            gaps.append(Window(start=window_end - step, end=window_end))
    return gaps


def _described(group: Sequence[_Stretch], fleet: Sequence[_Stretch]) -> dict[str, str]:
    """Which series each part of the range was read from (the report prints it); neighbouring
    stretches read the same way are one part."""
    parts: list[tuple[float, float, str]] = []
    for g in group:
        if g.level is None:
            what = f"raw counters ({RAW_REGIME_SECONDS}, {RAW_FLOP}, {RAW_DRAM_BYTES})"
        else:
            fleet_level = next((f.fleet_level for f in fleet if f.start <= g.start < f.end), None)
            what = f"{g.level.name}:* recorded series"
            if fleet_level is not None and fleet_level is not g.level:
                what += f" (fleet totals from {fleet_level.name}:*)"
        if parts and parts[-1][2] == what and parts[-1][1] == g.start:
            parts[-1] = (parts[-1][0], g.end, what)
        else:
            parts.append((g.start, g.end, what))
    return {f"{iso_time(a)} to {iso_time(b)}": what for a, b, what in parts}
