"""Prometheus exposition: the encoder that walks the enabled collectors, once per snapshot.

Each collector (exporter/collectors.py) reads fresh families off the snapshot it is handed; the
encoder times each one (ridgeline_scrape_collector_*), caches the bytes per (snapshot, content
type) and appends the process metrics, encoded fresh. Labels, formats and the cache:
docs/daemon.md, "Exposition"; `hpc_job` on a GPU several jobs share: docs/deployment.md, "Slurm
and other HPC schedulers".
"""

from __future__ import annotations

import logging
import threading
import time
from array import array
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from itertools import compress, repeat
from operator import is_not
from typing import Any, NamedTuple

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from exporter.collectors import (
    COLLECTORS,
    DEFAULT_COLLECTORS,
    SCRAPE_DURATION,
    SCRAPE_SUCCESS,
    SOURCE_HEALTH,
    WRITE_ORDER,
    ColumnRows,
    Extra,
    Family,
    Labelled,
    Row,
    gpu_labels,
    labelled_gpus,
)
from exporter.collectors import Collector as SnapshotReader
from exporter.sample import HPC_JOB_SEPARATOR
from exporter.state import GpuState, Snapshot

__all__ = [
    "HPC_JOB_SEPARATOR", "Family", "MetricsEndpoint", "Row", "SeriesCache", "build_families", "encode",
    "gpu_labels",
]  # fmt: skip

log = logging.getLogger(__name__)

OPENMETRICS_EOF = b"# EOF\n"

_go_float: Callable[[float], str] = floatToGoString
"""prometheus_client's number formatter (untyped upstream), so both encoders agree."""


class SnapshotCollector(Collector):
    """Yields fresh families for the snapshot `provider` returns at each collect()."""

    def __init__(
        self,
        provider: Callable[[], Snapshot],
        collectors: Collection[str] = DEFAULT_COLLECTORS,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._provider = provider
        self._collectors = collectors
        self._clock = clock

    def collect(self) -> Iterable[Metric]:
        return families(self._provider(), self._collectors, clock=self._clock)


def build_families(
    snapshot: Snapshot,
    collectors: Collection[str] = DEFAULT_COLLECTORS,
    *,
    registry: Sequence[SnapshotReader] = (*COLLECTORS, SOURCE_HEALTH),
    clock: Callable[[], float] = time.perf_counter,
    cache: SeriesCache | None = None,
) -> list[Family]:
    """The families of the enabled collectors for one snapshot (docs/design.md, "Prometheus
    metrics"), the source health always, in WRITE_ORDER; then each collector's success and
    duration. A collector that raises is logged and reports 0; the others are still written.
    With `cache`, each GPU's label dict is the one of the last snapshot while its labels stay
    the same (so `encode` with that cache finds its series' text already written)."""
    labelled = labelled_gpus(snapshot) if cache is None else cache.labelled(snapshot)
    written: dict[str, Family] = {}
    success: list[Row] = []
    duration: list[Row] = []
    for collector in registry:
        if collector.read is None or (collector.switchable and collector.name not in collectors):
            continue
        start = clock()
        found = _collect(collector, snapshot, labelled)
        seconds = clock() - start
        labels = {"collector": collector.name}
        success.append(Row(SCRAPE_SUCCESS.name, labels, (), 0.0 if found is None else 1.0))
        duration.append(Row(SCRAPE_DURATION.name, labels, (), seconds))
        written.update((family.name, family) for family in found or ())
    out = [written[spec.name] for spec in WRITE_ORDER if spec.name in written]
    return [*out, SCRAPE_SUCCESS.family(success), SCRAPE_DURATION.family(duration)]


def _collect(collector: SnapshotReader, snapshot: Snapshot, labelled: list[Labelled]) -> list[Family] | None:
    """The collector's families, or None when it raised (logged: node_exporter's "collector failed")."""
    try:
        return collector.collect(snapshot, labelled)
    except Exception:
        log.exception("collector %s failed; its families are left out of /metrics", collector.name)
        return None


class _FamilyListCollector(Collector):
    """Families already read, for prometheus_client's own encoders."""

    def __init__(self, family_list: list[Family]) -> None:
        self._families = family_list

    def collect(self) -> Iterable[Metric]:
        return as_metrics(self._families)


def as_metrics(family_list: Iterable[Family]) -> Iterator[Metric]:
    """The families as prometheus_client Metric objects (the reference the fast encoder must match)."""
    for family in family_list:
        metric = Metric(family.name, family.documentation, family.type)
        for row in family.rows:
            metric.add_sample(row.sample, {**row.labels, **dict(row.extra)}, row.value)
        yield metric


def families(
    snapshot: Snapshot,
    collectors: Collection[str] = DEFAULT_COLLECTORS,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[Metric]:
    """One snapshot's families as prometheus_client Metric objects."""
    return as_metrics(build_families(snapshot, collectors, clock=clock))


def _escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


_LabelKey = tuple[Hashable, ...]
"""What a GPU's labels are made of (collectors.gpu_labels): (entity, card, attribution, hpc_job)."""
_SeriesKey = tuple[int, str, tuple[tuple[str, str], ...]]
"""A series: (id of its label dict, sample name, extra labels)."""
_Lines = dict[_SeriesKey, list[Any]]
"""A series -> [the text its line starts with (a newline, then `name{labels} `), (the value last
written, its text)]."""


class _Column(NamedTuple):
    """A family of ColumnRows as encode last wrote it."""

    labels: list[Mapping[str, str]]
    extras: list[Extra]
    """Its label dicts and extra labels, in order."""
    starts: list[str]
    """Their line starts."""
    values: list[float]
    texts: list[str]
    """The values last written and their texts."""
    doubles: bytes
    """The same values as doubles (_value_bytes): -0.0 apart from 0.0, which == is not."""
    block: str
    """Its series' text, written from those values."""


_NO_VALUE: tuple[float | None, str] = (None, "")

MAX_LINES_PER_GPU = 64
"""Series kept per GPU on average; past it every series is dropped and rebuilt (the `fields`
label of ridgeline_profiling_fields_missing can take many values over a GPU's life)."""


class _Held(NamedTuple):
    """One generation of a SeriesCache, swapped in whole."""

    keys: list[_LabelKey]
    """What each GPU's labels are made of, in the order the snapshot read lists its GPUs."""
    labels: list[Mapping[str, str]]
    """Each of those GPUs' label dict, in the same order."""
    by_id: dict[int, Mapping[str, str]]
    """The same dicts by id: held here, so no other object has one of these ids meanwhile."""
    lines: _Lines
    """The series of those label dicts (only theirs), as encode last wrote them."""
    columns: dict[str, _Column]
    """Each family of ColumnRows by sample name, as encode last wrote it."""


def _empty() -> _Held:
    return _Held(keys=[], labels=[], by_id={}, lines={}, columns={})


class SeriesCache:
    """What stays the same across snapshots while a GPU's labels do: its label dict (one object
    for as long as its entity, card, pod and HPC job stay the same) and, per series, the escaped
    text its line starts with and the text of the value last written. Only the entities of the
    latest snapshot read are kept: one that departs, or whose labels change, is dropped with
    the next snapshot. Thread-safe by replacement: `labelled` builds a new generation and swaps
    it in; an encode uses the generation it found when it started.
    """

    def __init__(self) -> None:
        self.held = _empty()

    def labelled(self, snapshot: Snapshot) -> list[Labelled]:
        """collectors.labelled_gpus, with each GPU's label dict from the last snapshot where its
        labels are unchanged: found at the same place in the list first (a node's GPUs come in
        the same order batch after batch), so a dict keyed by entity is built only when one
        moved, came or changed."""
        known = self.held
        last_keys, last_labels = known.keys, known.labels
        keys: list[_LabelKey] = []
        dicts: list[Mapping[str, str]] = []
        moved: list[dict[_LabelKey, Mapping[str, str]]] = []

        def labels_of(gpu: GpuState) -> Mapping[str, str]:
            key = (gpu.entity, gpu.card, gpu.attribution, gpu.hpc_job)
            at = len(keys)
            if at < len(last_keys) and last_keys[at] == key:
                labels = last_labels[at]
            else:
                if not moved:
                    moved.append(dict(zip(last_keys, last_labels, strict=True)))
                found = moved[0].get(key)
                labels = gpu_labels(gpu) if found is None else found
            keys.append(key)
            dicts.append(labels)
            return labels

        labelled = labelled_gpus(snapshot, labels_of)
        by_id = dict(zip(map(id, dicts), dicts, strict=True))
        lines, columns = known.lines, known.columns
        if len(lines) > MAX_LINES_PER_GPU * max(1, len(by_id)):
            lines, columns = {}, {}
        elif by_id.keys() != known.by_id.keys():  # departed or relabelled: drop their series
            lines = {key: line for key, line in lines.items() if key[0] in by_id}
            columns = {}
        self.held = _Held(keys=keys, labels=dicts, by_id=by_id, lines=lines, columns=columns)
        return labelled

    def __len__(self) -> int:
        """The GPUs held (those of the latest snapshot read)."""
        return len(self.held.keys)

    @property
    def series(self) -> int:
        """The series whose text is held."""
        return len(self.held.lines)


_INF = float("inf")
_GO_SAME_MAX = 1e6
"""Below it (and finite), Python's repr of a float is what Go (and floatToGoString) writes."""


def encode(family_list: list[Family], *, openmetrics: bool, cache: SeriesCache | None = None) -> bytes:
    """Text format 0.0.4 or OpenMetrics 1.0.0, byte for byte what prometheus_client writes.

    prometheus_client re-validates and re-escapes every label name of every sample (its cost:
    docs/daemon.md, "Figures"). Ridgeline's label names are fixed and legal, and every series of
    one GPU shares one label dict, so the text a series' line starts with (`name{labels} `,
    the same in both formats) is built once per label dict: once per snapshot, or, for the label
    dicts of `cache` (SeriesCache.labelled), once while the GPU's labels stay the same, with
    the text of its value while that stays the same too. A family of ColumnRows whose series
    are those it had last time is written in one pass over its columns: as the same block of
    text when every value is the same double (info series, a regime that stays, an idle node),
    else with the texts of the values that are the objects written last time kept (a counter's
    regimes but the current one). Values are escaped as
    the formats require (backslash, newline, double quote) and numbers written as
    prometheus_client's floatToGoString writes them (its own call outside [-inf, 1e6)).
    tests/test_exposition.py checks the output equals prometheus_client's, in both formats.
    Each piece is written with the newline before it, so a line's start and its value are two
    pieces and a gauge's pieces are its line starts and values interleaved.
    """
    writer = _Writer(cache.held if cache is not None else _empty())
    for family in family_list:
        writer.family(family, openmetrics=openmetrics)
    out = writer.out
    if not out:
        return OPENMETRICS_EOF if openmetrics else b""
    out.append("\n# EOF\n" if openmetrics else "\n")
    return "".join(out).encode("utf-8")


def _family_head(family: Family, *, openmetrics: bool) -> str:
    """A family's HELP and TYPE lines, each after a newline (a counter is `_total` in 0.0.4)."""
    if openmetrics:
        doc = family.documentation.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        return f"\n# HELP {family.name} {doc}\n# TYPE {family.name} {family.type}"
    mname = family.name + "_total" if family.type == "counter" else family.name
    doc = family.documentation.replace("\\", "\\\\").replace("\n", "\\n")
    return f"\n# HELP {mname} {doc}\n# TYPE {mname} {family.type}"


_RowTuple = tuple[str, Mapping[str, str], tuple[tuple[str, str], ...], float]


class _Writer:
    """One encode call's pieces and what it reads and keeps across them: split out of `encode`
    so each part does one thing; the per-series loop stays in one method (`rows`)."""

    def __init__(self, held: _Held) -> None:
        self.lines, self.by_id, self.columns = held.lines, held.by_id, held.columns
        self.local: _Lines = {}
        """The series of label dicts not held (the source health's, the roofs'): alive while the
        families are, so their ids are theirs for this call."""
        self.same_values: dict[bytes, list[str]] = {}
        """The texts of each column's doubles written so far: a family whose values are another's
        (flop utilization and tensor activity at full clock) is not formatted twice."""
        self.out: list[str] = []

    def family(self, family: Family, *, openmetrics: bool) -> None:
        """Appends one family: its head, then its series (a column's block where one is written)."""
        head = _family_head(family, openmetrics=openmetrics)
        self.out.append(head if self.out else head[1:])
        rows: Iterable[_RowTuple] = family.rows
        if type(family.rows) is ColumnRows:  # its columns, without a Row each
            cols = family.rows
            block = self.column_block(cols)
            if block is not None:
                self.out.append(block)
                return
            rows = zip(repeat(cols.sample), cols.labels, cols.extras, cols.values)
        self.rows(rows)

    def line_of(self, sample: str, labels: Mapping[str, str], extra: Extra) -> list[Any]:
        """The series' line (held or local), built the first time it is met."""
        key = (id(labels), sample, extra)
        line = self.lines.get(key) or self.local.get(key)
        if line is None:
            line = ["\n" + _line_start(sample, labels, extra), _NO_VALUE]
            (self.lines if key[0] in self.by_id else self.local)[key] = line
        return line

    def column_block(self, cols: ColumnRows) -> str | None:
        """The column's text in one pass: the block written last time when every value is the
        same double, else one written afresh (and kept); None when a value is no plain float."""
        column = self.columns.get(cols.sample)
        # the same series as last time? (label dicts compared by identity first)
        if column is not None and (column.labels != cols.labels or column.extras != cols.extras):
            column = None
        doubles = _value_bytes(cols.values)
        if column is not None and doubles == column.doubles:  # every value as last time
            return column.block
        if doubles is None:
            return None
        texts = self.column_texts(cols, column, doubles)
        if texts is None:
            return None
        if column is not None:
            starts = column.starts
        else:
            pairs = zip(cols.labels, cols.extras, strict=True)
            starts = [self.line_of(cols.sample, labels, extra)[0] for labels, extra in pairs]
        block = _interleaved(starts, texts)
        self.columns[cols.sample] = _Column(
            cols.labels, cols.extras, starts, cols.values, texts, doubles, block
        )
        return block

    def column_texts(self, cols: ColumnRows, column: _Column | None, doubles: bytes) -> list[str] | None:
        """The texts of the column's values: another column's with the same doubles, or new."""
        texts = self.same_values.get(doubles)
        if texts is None:
            texts = _plain_texts(cols.values, column)
            if texts is not None:
                self.same_values[doubles] = texts
        return texts

    def rows(self, rows: Iterable[_RowTuple]) -> None:
        """Appends each series' line start and value text, the text kept while the value stays."""
        lines, append = self.lines, self.out.append
        for sample, labels, extra, value in rows:
            line = lines.get((id(labels), sample, extra))
            if line is None:
                line = self.line_of(sample, labels, extra)
            last = line[1]
            if value == last[0] and value:  # unchanged (not a zero: -0.0 is written apart)
                text = last[1]
            else:
                text = f"{float(value)!r}" if -_INF < value < _GO_SAME_MAX else _go_float(value)
                line[1] = (value, text)  # one assignment: a concurrent encode reads a pair
            append(line[0])
            append(text)


def _interleaved(starts: list[str], texts: list[str]) -> str:
    """Each line start followed by its value's text, as one string (two slice assignments: a
    zip into join built a tuple and an iterator per series)."""
    if len(starts) != len(texts):
        raise ValueError("a column's line starts and values differ in number")
    pieces: list[str] = [""] * (2 * len(starts))
    pieces[::2], pieces[1::2] = starts, texts
    return "".join(pieces)


def _value_bytes(values: list[float]) -> bytes | None:
    """The values as doubles, to compare with the last encode's in one memcmp: equal bytes are
    equal texts (floatToGoString writes float(value)); None for what is no double (a huge int)."""
    try:
        return array("d", values).tobytes()
    except (TypeError, OverflowError):
        return None


def _plain_texts(values: list[float], last: _Column | None = None) -> list[str] | None:
    """Each value's repr, where every one is a finite float below 1e6 (Python's repr is then
    what floatToGoString writes); None otherwise (NaN, an infinity, Go's exponent form, an int).
    With `last`, the same series' column as last written, a value that is the very object
    written last time keeps its text: a counter's regimes but the current one, an idle GPU's
    (the fold copies what did not move), so only what moved pays a repr."""
    total = sum(values)
    if not -_INF < total < _INF or (values and max(values) >= _GO_SAME_MAX):
        return None
    try:
        if last is None:
            return list(map(float.__repr__, values))
        moved = list(map(is_not, values, last.values))
        if sum(moved) * 2 > len(moved):  # most moved: every value afresh, without the merge
            return list(map(float.__repr__, values))
        texts = last.texts.copy()
        at = compress(range(len(moved)), moved)
        for index, text in zip(at, map(float.__repr__, compress(values, moved)), strict=True):
            texts[index] = text
        return texts
    except TypeError:
        return None


def _line_start(sample: str, labels: Mapping[str, str], extra: tuple[tuple[str, str], ...]) -> str:
    """`sample{labels} ` (or `sample `): the labels sorted by name, their values escaped."""
    pairs = [(k, f'{k}="{_escape_label_value(v)}"') for k, v in (*labels.items(), *extra)]
    if not pairs:
        return sample + " "
    return f"{sample}{{{','.join(text for _, text in sorted(pairs))}}} "


class MetricsEndpoint:
    """Encodes snapshots for /metrics with content negotiation, caching each snapshot's bytes.

    `collectors` are the enabled collectors (exporter/collectors.py); process metrics are written
    when "process" is among them, unless `process_metrics` says otherwise. A snapshot's families
    are read once, so both formats report the same collector durations; `clock` times them.
    """

    def __init__(
        self,
        provider: Callable[[], Snapshot],
        *,
        process_metrics: bool | None = None,
        collectors: Collection[str] = DEFAULT_COLLECTORS,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._provider = provider
        self._collectors = frozenset(collectors)
        self._clock = clock
        if process_metrics is None:
            process_metrics = "process" in self._collectors
        self._lock = threading.Lock()
        self._cached_snapshot: Snapshot | None = None
        self._cache: dict[str, bytes] = {}
        self._families: list[Family] | None = None
        self._retired: tuple[object, ...] = ()
        """The last snapshot and what was derived from it, until `release` frees them."""
        self._series = SeriesCache()
        self._process_registry: CollectorRegistry | None = None
        if process_metrics:
            self._process_registry = CollectorRegistry(auto_describe=False)
            ProcessCollector(registry=self._process_registry)

    def render(self, accept_header: str | None) -> tuple[bytes, str]:
        """(body, content type) for one scrape: text format unless OpenMetrics is asked for."""
        encoder, content_type = choose_encoder(accept_header or "")
        snapshot = self._provider()
        body = self._snapshot_bytes(snapshot, encoder, content_type)
        openmetrics = content_type.startswith("application/openmetrics-text")
        if self._process_registry is not None:
            extra = encoder(self._process_registry)
            body = body.removesuffix(OPENMETRICS_EOF) + extra if openmetrics else body + extra
        return body, content_type

    @property
    def retired(self) -> bool:
        """Whether a snapshot before the current one is held for `release`."""
        return bool(self._retired)

    def release(self) -> None:
        """Free the snapshot before the current one and what was derived from it. Freeing a
        1,024-entity snapshot's objects takes about 3 ms; a scrape that finds a new snapshot
        leaves it here, so the route calls this after its response is sent."""
        with self._lock:
            retired, self._retired = self._retired, ()
        del retired

    def _snapshot_bytes(
        self, snapshot: Snapshot, encoder: Callable[[Collector], bytes], content_type: str
    ) -> bytes:
        with self._lock:
            if snapshot is not self._cached_snapshot:
                # kept for `release` (one generation at most): not freed during this scrape
                retired, self._retired = self._retired, (self._cached_snapshot, self._cache, self._families)
                self._cache = {}
                self._families = None
                self._cached_snapshot = snapshot
            else:
                retired = ()
            cached = self._cache.get(content_type)
            family_list = self._families
        del retired  # an older generation that no `release` freed: freed here, as before
        if cached is not None:
            return cached
        if family_list is None:
            family_list = build_families(snapshot, self._collectors, clock=self._clock, cache=self._series)
        if content_type.startswith("application/openmetrics-text"):
            encoded = encode(family_list, openmetrics=True, cache=self._series)
        elif content_type == CONTENT_TYPE_PLAIN_0_0_4:
            encoded = encode(family_list, openmetrics=False, cache=self._series)
        else:  # text format 1.x with an escaping scheme: let prometheus_client write it
            registry = CollectorRegistry(auto_describe=False)
            registry.register(_FamilyListCollector(family_list))
            encoded = encoder(registry)
        with self._lock:
            if snapshot is self._cached_snapshot:
                self._cache[content_type] = encoded
                self._families = family_list
        return encoded
