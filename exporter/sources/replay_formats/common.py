"""What every replay parser shares: the parse context, skip accounting, values and batching.

Parsers read a file's physical lines as they stream from disk and hand out batches (one
timestamp, one sample per entity) as soon as each is complete, so memory does not grow with the
file. Every line that is skipped is counted by reason and logged as "FILE:LINE: what was wrong",
so an operator can fix the file, and the rest of the file is still served.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from exporter import fields, readings
from exporter.sample import MAX_ENTITIES, Attribution, Entity, Sample
from exporter.sources.base import MigProfileHint, hinted_profile

log = logging.getLogger("exporter.sources.replay")

MAX_LOGGED_SKIPS = 20
"""Skipped lines logged one by one; beyond this, one summary line (a corrupt 1 GB file must not
flood the journal)."""

MAX_INDEX = 99_999
"""The largest GPU index or GPU-instance id a file may name (DCGM numbers GPUs below 32)."""

REORDER_TIMESTAMPS = 64
"""Distinct timestamps held back to put lines written slightly out of time order (a file written
GPU by GPU in short runs) back in order; a line older than what has been played is skipped."""
REORDER_SAMPLES = 4096
"""Samples held back at most while reordering (memory bound, whatever the number of GPUs)."""

_CACHE_LIMIT = 4096
"""Entries kept in each lookup cache (field names, entities, pods) before it is cleared."""

BLANK_TOKENS = frozenset({"", "N/A", "NA", "n/a", "na", "-", "null", "NULL", "None", "nan", "NaN"})
"""Cell texts that mean "no value" in CSV and dmon text (dmon prints N/A for DCGM blanks)."""

Batch = tuple[float, list[Sample]]
"""One timestamp and the samples taken at it, one per entity."""


class ReplayFormatError(Exception):
    """The file cannot be replayed at all (wrong format, no header); one clear line."""


class LineError(ValueError):
    """One line cannot be read; `reason` labels the skip count."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ReplayStats:
    """How a replay file was read, for the daemon's counters and the operator's logs."""

    lines_read: int
    lines_skipped: int
    skipped_by_reason: dict[str, int]
    samples: int
    batches: int
    loops: int = 0


@dataclass(frozen=True, slots=True)
class Column:
    """How a key or column name is read: the field Ridgeline keeps and the factor to its unit.

    `util_ratio`: the name is DCGM_FI_DEV_GPU_UTIL_RATIO, whose unit each value tells
    (fields.gpu_util_ratio_is_percent).
    """

    fid: int
    factor: float = 1.0
    util_ratio: bool = False


def column_for(name: str) -> Column | None:
    """A replay key or column name (DCGM id, legacy/4.6/4.7 name, dmon tag) -> how to read it."""
    text = name.strip()
    if text.upper() == fields.GPU_UTIL_RATIO_NAME:
        return Column(fields.GPU_UTIL, util_ratio=True)
    if text.upper() in fields.CONVERTED_NAMES:
        converted, factor = fields.CONVERTED_NAMES[text.upper()]
        return Column(converted, factor)
    fid = readings.field_id(text)
    if fid is None:
        return None
    if fid in fields.CONVERTED_IDS:
        kept, factor = fields.CONVERTED_IDS[fid]
        return Column(kept, factor)
    return Column(fid)


_EntityKey = tuple[int, str, str, int | None, str | None, str | None, int | None]
"""(gpu, uuid, model, GPU instance, profile, node, SM count): one shared Entity each."""


@dataclass
class ParseContext:
    """State of one pass over a file: where we are, what was skipped, and small lookup caches."""

    name: str
    """The file as the operator named it, used as the prefix of every log line."""
    default_model: str | None
    interval_seconds: float
    base_timestamp: float
    """Time of the first batch for formats without timestamps (dmon, CSV without a ts column)."""
    mig_profiles: tuple[MigProfileHint, ...] = ()
    quiet: bool = False
    """A later loop over the same file: nothing is logged again."""
    lines_read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    logged_skips: int = 0
    warned: set[str] = field(default_factory=set)
    _columns: dict[str, Column | None] = field(default_factory=dict)
    _entities: dict[_EntityKey, Entity] = field(default_factory=dict)
    _attributions: dict[tuple[str, str, str], Attribution] = field(default_factory=dict)

    def skip(self, line_number: int, reason: str, message: str, outcome: str = "line skipped") -> None:
        """Count a skipped line under `reason` and log it with its file and line number."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if self.logged_skips < MAX_LOGGED_SKIPS and not self.quiet:
            log.warning("%s:%d: %s; %s", self.name, line_number, message, outcome)
        self.logged_skips += 1

    def warn_once(self, key: str, message: str) -> None:
        """Log a warning the first time `key` comes up (an unknown column, a MIG fallback)."""
        if key in self.warned or len(self.warned) >= MAX_LOGGED_SKIPS:
            return
        self.warned.add(key)
        if not self.quiet:
            log.warning("%s: %s", self.name, message)

    def finish_logging(self) -> None:
        """Say how many skipped lines were not logged one by one."""
        extra = self.logged_skips - MAX_LOGGED_SKIPS
        if extra > 0 and not self.quiet:
            log.warning("%s: %d more lines skipped (not logged one by one)", self.name, extra)

    def column(self, name: str) -> Column | None:
        """How to read a key or column, warning once per unknown name."""
        try:
            return self._columns[name]
        except KeyError:
            pass
        found = column_for(name)
        if found is None:
            self.warn_once(f"field:{name}", f"unknown field {name[:80]!r} ignored")
        if len(self._columns) >= _CACHE_LIMIT:
            self._columns.clear()
        self._columns[name] = found
        return found

    def entity(
        self,
        gpu: int,
        uuid: str | None,
        model: str,
        gpu_instance: int | None,
        profile: str | None = None,
        node: str | None = None,
        sm_count: int | None = None,
    ) -> Entity:
        """One shared Entity per GPU, so the sampler sees the same identity batch after batch.
        Without a uuid, a GPU is named by its node and index (a MIG instance by its GPU's, as
        DCGM's instances carry their GPU's UUID): index alone would merge two nodes' GPU 0."""
        if uuid is None:
            uuid = f"GPU-replay-{gpu}" if node is None else f"GPU-replay-{node}-{gpu}"
        if gpu_instance is not None and profile is None:
            profile = hinted_profile(self.mig_profiles, gpu, gpu_instance)
        key = (gpu, uuid, model, gpu_instance, profile, node, sm_count)
        found = self._entities.get(key)
        if found is None:
            if len(self._entities) >= _CACHE_LIMIT:
                self._entities.clear()
            found = self._entities[key] = Entity(
                gpu=gpu,
                uuid=uuid,
                model=model,
                gpu_instance=gpu_instance,
                profile=profile,
                node=node,
                sm_count=sm_count,
            )
        return found

    def attribution(self, namespace: str, pod: str, container: str) -> Attribution:
        """One shared Attribution per pod/container."""
        key = (namespace, pod, container)
        found = self._attributions.get(key)
        if found is None:
            if len(self._attributions) >= _CACHE_LIMIT:
                self._attributions.clear()
            found = self._attributions[key] = Attribution(namespace=namespace, pod=pod, container=container)
        return found


# -- values ------------------------------------------------------------------------------------


class BadValue(ValueError):
    """A cell or JSON value that is neither a number nor a blank."""


_UNIT_SUFFIXES = ("KB/s", "MB/s", "GB/s", "B/s", "MHz", "mJ", "W", "C", "%")


def parse_number_text(fid: int, text: str) -> float | None:
    """A number written as text (CSV cell, dmon column, JSON string); None for blank words.

    Accepts a trailing unit ("250.3 W", "1980MHz"); a trailing "%" on a ratio field is divided
    by 100. dmon truncates a too-wide value to "123...": that reads as blank, not a number.
    """
    text = text.strip()
    if text in BLANK_TOKENS:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    if text.endswith("..."):
        return None
    for unit in _UNIT_SUFFIXES:
        if text.endswith(unit):
            number = text[: -len(unit)].strip()
            try:
                value = float(number)
            except ValueError:
                break
            if unit == "%" and fid in fields.RATIO_FIELDS:
                value /= 100.0
            return value
    raise BadValue(f"field {fid}: {text[:40]!r} is not a number")


def read_value(column: Column, raw: object) -> float | None:
    """A raw value (JSON number or string, CSV cell, dmon column) as Ridgeline keeps it.

    Blanks, NaN and odd ratios follow exporter.fields.clean_value; values in another unit are
    converted (Column.factor, or per value for DCGM_FI_DEV_GPU_UTIL_RATIO). Raises BadValue for
    text that is not a number and for booleans, lists and objects.
    """
    if raw is None:
        return None
    if isinstance(raw, str):
        number = parse_number_text(column.fid, raw)
        if number is None:
            return None
        written_as_integer = not any(c in raw for c in ".eE")
    elif isinstance(raw, int | float) and not isinstance(raw, bool):
        try:
            number = float(raw)
        except OverflowError:
            raise BadValue(f"field {column.fid}: {raw!r} is out of range") from None
        written_as_integer = isinstance(raw, int)
    else:
        raise BadValue(f"field {column.fid}: {str(raw)[:40]!r} is not a number")
    if math.isnan(number) or fields.is_blank(number):
        return fields.clean_value(column.fid, number)
    if column.util_ratio:
        if not fields.gpu_util_ratio_is_percent(number, written_as_integer):
            number *= 100.0
        return fields.clean_value(column.fid, number)
    return fields.clean_value(column.fid, number * column.factor)


def parse_index(raw: object, what: str) -> int:
    """A GPU index or GPU-instance id from JSON or text; ValueError unless 0..MAX_INDEX.

    Text must be ASCII digits ("GPU 0" and "GPU-0" are accepted): "²" or "٣" are digits to
    Python's int() but no GPU's index.
    """
    if isinstance(raw, bool):
        raise ValueError(f"{what} {raw!r} is not an integer")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    elif isinstance(raw, str):
        text = raw.strip()
        if text[:3].upper() == "GPU":
            text = text[3:].strip(" -:")
        if not (text.isascii() and text.isdigit() and len(text) <= len(str(MAX_INDEX))):
            raise ValueError(f"{what} {raw[:20]!r} is not an index")
        value = int(text)
    else:
        raise ValueError(f"{what} {str(raw)[:20]!r} is not an integer")
    if not 0 <= value <= MAX_INDEX:
        raise ValueError(f"{what} {value} is out of range 0..{MAX_INDEX}")
    return value


def parse_timestamp(raw: object) -> float:
    """Seconds since the epoch from a number or ISO 8601 text; ValueError otherwise."""
    if isinstance(raw, bool):
        raise ValueError(f"timestamp {raw!r} is not a time")
    if isinstance(raw, int | float):
        try:
            value = float(raw)
        except OverflowError:
            raise ValueError("timestamp is out of range") from None
    elif isinstance(raw, str):
        text = raw.strip()
        try:
            value = float(text)
        except ValueError:
            from datetime import UTC, datetime

            try:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                raise ValueError(f"timestamp {raw[:40]!r} is neither epoch seconds nor ISO 8601") from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            value = parsed.timestamp()
    else:
        raise ValueError(f"timestamp {str(raw)[:40]!r} is not a time")
    if not -1e12 < value < 1e12:  # also rejects NaN and infinities
        raise ValueError(f"timestamp {raw!r} is out of range")
    return value


def profile_text(raw: object) -> str | None:
    """A MIG profile name from a file ("3g.40gb"); ValueError for anything else."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ValueError(f"profile {str(raw)[:20]!r} is not text")
    text = raw.strip()
    if not text:
        return None
    if len(text) > 64 or not text.isascii() or not all(c.isalnum() or c in ".+_-" for c in text):
        raise ValueError(f"profile {text[:20]!r} is not a MIG profile name")
    return text


# -- batching ----------------------------------------------------------------------------------


class TimeBatcher:
    """Groups timestamped samples into batches, oldest first, one sample per entity.

    A batch is handed out once REORDER_TIMESTAMPS newer timestamps (or REORDER_SAMPLES samples)
    are waiting behind it, or at the end of the file, so a file a little out of time order plays
    in order with bounded memory. A line older than a batch already handed out is skipped
    (`out_of_order`); a second sample for one entity and timestamp replaces the first
    (`duplicate_entity`). An entity is its uuid and GPU instance, as the sampler keys it: a
    multi-node trace's GPUs 0 are as many entities as they have uuids (or nodes).
    """

    def __init__(self, ctx: ParseContext) -> None:
        self._ctx = ctx
        self._pending: dict[float, dict[tuple[str, int | None], Sample]] = {}
        self._order: list[float] = []
        self._held = 0
        self._played = -math.inf

    def add(self, line_number: int, sample: Sample) -> Iterator[Batch]:
        """File one sample; yields the batches it completes."""
        timestamp = sample.timestamp
        if timestamp <= self._played:
            self._ctx.skip(
                line_number,
                "out_of_order",
                f"timestamp {timestamp} is older than what has been played (a file more than "
                f"{REORDER_TIMESTAMPS} timestamps out of time order must be sorted first)",
            )
            return
        batch = self._pending.get(timestamp)
        if batch is None:
            batch = self._pending[timestamp] = {}
            heapq.heappush(self._order, timestamp)
        key = (sample.entity.uuid, sample.entity.gpu_instance)
        if key in batch:
            self._ctx.skip(
                line_number,
                "duplicate_entity",
                f"second sample for GPU {sample.entity.gpu} at timestamp {timestamp}",
                outcome="it replaces the earlier one",
            )
        elif len(batch) >= MAX_ENTITIES:
            self._ctx.skip(
                line_number, "too_many_entities", f"more than {MAX_ENTITIES} GPUs at one timestamp"
            )
            return
        else:
            self._held += 1
        batch[key] = sample
        while len(self._pending) > REORDER_TIMESTAMPS or self._held > REORDER_SAMPLES:
            yield self._pop()

    def finish(self) -> Iterator[Batch]:
        """The batches still held, at the end of the file."""
        while self._pending:
            yield self._pop()

    def _pop(self) -> Batch:
        timestamp = heapq.heappop(self._order)
        samples = list(self._pending.pop(timestamp).values())
        self._held -= len(samples)
        self._played = timestamp
        return timestamp, samples


_Row = tuple[Entity, dict[int, float | None], Attribution | None]


class RepeatBatcher:
    """Batches for rows without timestamps (dmon, CSV without a time column), spaced by the
    sample interval from the base timestamp.

    A batch ends where an entity repeats, never where the GPU index falls: dmon's row order is
    fixed but need not be sorted. It also ends where a row comes before the previous one in the
    order of the last whole sample, so a GPU missing from one sample does not merge two samples;
    an entity new to that order never ends a batch by itself, and the order is learnt again from
    every sample at least as large.
    """

    def __init__(self, ctx: ParseContext) -> None:
        self._ctx = ctx
        self._rows: dict[tuple[int, int | None], _Row] = {}
        self._order: dict[tuple[int, int | None], int] = {}
        self._last_position: int | None = None
        self._row_time: float | None = None
        self._last_timestamp: float | None = None

    def add(
        self,
        line_number: int,
        entity: Entity,
        values: dict[int, float | None],
        attribution: Attribution | None = None,
        row_time: float | None = None,
    ) -> Batch | None:
        """File one row; returns the batch it closed, if it started a new one."""
        key = entity.key
        position = self._order.get(key)
        closed = None
        if (
            key in self._rows
            or (row_time is not None and self._row_time is not None and row_time != self._row_time)
            or (position is not None and self._last_position is not None and position < self._last_position)
        ):
            closed = self.close()
            position = self._order.get(key)  # the closed sample may have taught the order
        if len(self._rows) >= MAX_ENTITIES:
            self._ctx.skip(line_number, "too_many_entities", f"more than {MAX_ENTITIES} GPUs in one sample")
            return closed
        self._rows[key] = (entity, values, attribution)
        if position is not None:
            self._last_position = position
        if row_time is not None:
            self._row_time = row_time
        return closed

    def close(self) -> Batch | None:
        """End the open batch (a header line, a new sample, the end of the file)."""
        if not self._rows:
            return None
        previous = self._last_timestamp
        if self._row_time is not None:
            timestamp = self._row_time
        elif previous is not None:
            timestamp = previous + self._ctx.interval_seconds
        else:
            timestamp = self._ctx.base_timestamp
        if previous is not None and timestamp <= previous:
            timestamp = previous + self._ctx.interval_seconds
        samples = [
            Sample(timestamp=timestamp, entity=entity, values=values, attribution=attribution)
            for entity, values, attribution in self._rows.values()
        ]
        if len(self._rows) >= len(self._order):
            self._order = {key: index for index, key in enumerate(self._rows)}
        self._rows = {}
        self._last_position = None
        self._row_time = None
        self._last_timestamp = timestamp
        return timestamp, samples
