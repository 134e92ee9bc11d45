"""What every replay parser shares: the parse context, skip accounting and fast value cleaning.

Parsers turn a file's lines into batches (one timestamp, one sample per entity) once, at
open(), so that read() in the sampler loop only hands out prebuilt samples. Every line that is
skipped is counted by reason and logged as "FILE:LINE: what was wrong", so an operator can fix
the file, and the rest of the file is still served.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from exporter.fields import FP64_BLANK, RATIO_FIELDS, clean_value, field_id
from exporter.sample import Attribution, Entity, Sample

log = logging.getLogger("exporter.sources.replay")

MAX_LOGGED_SKIPS = 20
"""Skipped lines logged one by one; beyond this, one summary line (a corrupt 1 GB file must not
flood the journal)."""

BLANK_TOKENS = frozenset({"", "N/A", "NA", "n/a", "na", "-", "null", "NULL", "None", "nan", "NaN"})
"""Cell texts that mean "no value" in CSV and dmon text (dmon prints N/A for DCGM blanks)."""

Batch = tuple[float, list[Sample]]
"""One timestamp and the samples taken at it, one per entity."""


class ReplayFormatError(Exception):
    """The file cannot be replayed at all (wrong format, no header, no model); one clear line."""


@dataclass(frozen=True, slots=True)
class ReplayStats:
    """How a replay file was read, for the daemon's counters and the operator's logs."""

    lines_read: int
    lines_skipped: int
    skipped_by_reason: dict[str, int]
    samples: int
    batches: int
    loops: int = 0


@dataclass
class ParseContext:
    """State of one parse: where we are, what was skipped, and the caches that keep it fast."""

    name: str
    """The file as the operator named it, used as the prefix of every log line."""
    default_model: str | None
    interval_seconds: float
    base_timestamp: float
    """Time of the first batch for formats without timestamps (dmon, CSV without a ts column)."""
    lines_read: int = 0
    line_offset: int = 0
    """Added to the line numbers the parser logs: a file read in parts (exporter/sources/
    replay_stream.py) hands each part to the parser alone."""
    skipped: dict[str, int] = field(default_factory=dict)
    logged_skips: int = 0
    warned: set[str] = field(default_factory=set)
    field_ids: dict[str, int | None] = field(default_factory=dict)
    entities: dict[tuple[int, str, str, int | None], Entity] = field(default_factory=dict)
    attributions: dict[tuple[str, str, str], Attribution] = field(default_factory=dict)

    def skip(self, line_number: int, reason: str, message: str) -> None:
        """Count a skipped line under `reason` and log it with its file and line number."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if self.logged_skips < MAX_LOGGED_SKIPS:
            log.warning("%s:%d: %s; line skipped", self.name, line_number + self.line_offset, message)
        self.logged_skips += 1

    def warn_once(self, key: str, message: str) -> None:
        """Log a warning the first time `key` comes up (an unknown column, a MIG fallback)."""
        if key not in self.warned:
            self.warned.add(key)
            log.warning("%s: %s", self.name, message)

    def finish_logging(self) -> None:
        """Say how many skipped lines were not logged one by one."""
        extra = self.logged_skips - MAX_LOGGED_SKIPS
        if extra > 0:
            log.warning("%s: %d more lines skipped (not logged one by one)", self.name, extra)

    def lookup_field(self, name: str) -> int | None:
        """Field id for a key or column name, warning once per unknown name."""
        try:
            return self.field_ids[name]
        except KeyError:
            fid = field_id(name)
            if fid is None:
                self.warn_once(f"field:{name}", f"unknown field {name!r} ignored")
            self.field_ids[name] = fid
            return fid

    def entity(self, gpu: int, uuid: str | None, model: str, gpu_instance: int | None) -> Entity:
        """One shared Entity object per GPU (saves memory and time on long traces)."""
        if uuid is None:
            uuid = f"GPU-replay-{gpu}" if gpu_instance is None else f"MIG-replay-{gpu}-{gpu_instance}"
        key = (gpu, uuid, model, gpu_instance)
        found = self.entities.get(key)
        if found is None:
            found = Entity(gpu=gpu, uuid=uuid, model=model, gpu_instance=gpu_instance)
            self.entities[key] = found
        return found

    def attribution(self, namespace: str, pod: str, container: str) -> Attribution:
        """One shared Attribution object per pod/container."""
        key = (namespace, pod, container)
        found = self.attributions.get(key)
        if found is None:
            found = Attribution(namespace=namespace, pod=pod, container=container)
            self.attributions[key] = found
        return found


class BadValue(ValueError):
    """A cell or JSON value that is neither a number nor a blank."""


def clean_number(fid: int, raw: object) -> float | None:
    """A raw value as Ridgeline keeps it (exporter.fields.clean_value), with a fast path.

    Plain in-range floats (nearly every value of a real trace) skip the general function; the
    rest go through clean_value so blanks, NaN and odd ratios follow one rule. Raises BadValue
    for text that is not a number and for booleans, lists and objects.
    """
    kind = type(raw)
    if kind is float or kind is int:
        value = float(raw)  # type: ignore[arg-type]
        if fid in RATIO_FIELDS:
            if 0.0 <= value <= 1.0:
                return value
        elif 0.0 <= value < FP64_BLANK:
            return value
        return clean_value(fid, value)
    if raw is None:
        return None
    if kind is str:
        return clean_value(fid, parse_number_text(fid, raw))  # type: ignore[arg-type]
    raise BadValue(f"field {fid}: {raw!r} is not a number")


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
            if unit == "%" and fid in RATIO_FIELDS:
                value /= 100.0
            return value
    raise BadValue(f"field {fid}: {text!r} is not a number")


def parse_gpu_index(raw: object) -> int:
    """A GPU index from JSON or a CSV cell; ValueError when it is not a non-negative integer."""
    if type(raw) is int:
        gpu = raw
    elif isinstance(raw, float) and raw.is_integer():
        gpu = int(raw)
    elif isinstance(raw, str):
        text = raw.strip()
        if text.upper().startswith("GPU"):
            text = text[3:].strip(" -:")
        gpu = int(text)
    else:
        raise ValueError(f"gpu {raw!r} is not an integer")
    if gpu < 0:
        raise ValueError(f"gpu {gpu} is negative")
    return gpu


def parse_timestamp(raw: object) -> float:
    """Seconds since the epoch from a number or ISO 8601 text; ValueError otherwise."""
    if isinstance(raw, bool):
        raise ValueError(f"timestamp {raw!r} is not a time")
    if isinstance(raw, int | float):
        value = float(raw)
    elif isinstance(raw, str):
        text = raw.strip()
        try:
            value = float(text)
        except ValueError:
            from datetime import UTC, datetime

            try:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                raise ValueError(f"timestamp {raw!r} is neither epoch seconds nor ISO 8601") from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            value = parsed.timestamp()
    else:
        raise ValueError(f"timestamp {raw!r} is not a time")
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"timestamp {raw!r} is not finite")
    return value


def group_by_timestamp(rows: Sequence[tuple[float, Sample, int]], ctx: ParseContext) -> list[Batch]:
    """Samples grouped into batches by timestamp, oldest first, one sample per entity.

    Files are nearly always in time order, so consecutive rows are grouped in one cheap pass;
    out-of-order rows (a file written GPU by GPU) are regrouped by value. A second sample for
    the same entity and timestamp replaces the first and is counted.
    """
    batches: list[Batch] = []
    current: list[Sample] = []
    current_ts = -math.inf
    keys: set[tuple[int, int | None]] = set()
    for timestamp, sample, _line_number in rows:
        if timestamp != current_ts:
            if timestamp < current_ts:
                return regroup(rows, ctx)
            current = []
            keys = set()
            batches.append((timestamp, current))
            current_ts = timestamp
        entity = sample.entity
        key = (entity.gpu, entity.gpu_instance)
        if key in keys:
            return regroup(rows, ctx)
        keys.add(key)
        current.append(sample)
    return batches


def regroup(rows: Sequence[tuple[float, Sample, int]], ctx: ParseContext) -> list[Batch]:
    by_time: dict[float, dict[tuple[int, int | None], Sample]] = {}
    for timestamp, sample, line_number in rows:
        batch = by_time.get(timestamp)
        if batch is None:
            batch = by_time[timestamp] = {}
        key = (sample.entity.gpu, sample.entity.gpu_instance)
        if key in batch:
            ctx.skip(
                line_number,
                "duplicate_entity",
                f"second sample for GPU {sample.entity.gpu} at timestamp {timestamp}; it replaces the first",
            )
        batch[key] = sample
    return [(ts, list(by_time[ts].values())) for ts in sorted(by_time)]
