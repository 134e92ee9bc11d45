"""Scrape source: read an existing dcgm-exporter's `/metrics` page and turn it into samples.

For nodes that already run NVIDIA's dcgm-exporter: Ridgeline reads the page dcgm-exporter
serves instead of opening a second DCGM connection. The page is fetched under one deadline
(exporter/sources/http_fetch.py) and parsed as it streams in, line by line, keeping only the
GPUs it names and the values of the families Ridgeline uses, so memory does not grow with the
page. It accepts the legacy field names, DCGM 4.6's `*_UTIL_RATIO` names and dcgm-exporter
4.9's renames, and keeps the pod labels dcgm-exporter attached. A series Ridgeline cannot use
(an odd `gpu` label, a broken line) is skipped and counted, never the page. See docs/sources.md.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from exporter import __version__, fields, readings
from exporter.http_client import SCRAPE_FLAGS, ClientConfigError, HTTPClientConfig, client_flags, config_from
from exporter.option_specs import OptionError, OptionSpec, positive_seconds
from exporter.redaction import misread_credentials, redact_url
from exporter.sample import JOB_ID, MAX_ENTITIES, Attribution, Entity, Sample, join_hpc_jobs
from exporter.sources.base import (
    MigProfileHint,
    SourceError,
    SourceOptions,
    SourceUnavailable,
    hinted_profile,
)
from exporter.sources.http_fetch import Deadline, FetchError, KeptConnection, Request, Validators, get

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 * 1024
"""A page line longer than this is skipped (a dcgm-exporter line is a few hundred bytes)."""

MAX_INDEX_DIGITS = 5
"""A `gpu` or `GPU_I_ID` label longer than this is not an index (DCGM numbers GPUs below 32)."""

MAX_PROFILE_CHARS = 64

CLIENT_PREFIX = f"--{SCRAPE_FLAGS}."
"""The scrape source's HTTP client flags: --scrape.basic-auth.username, --scrape.tls.ca-file, ..."""

SKIP_LOG_EVERY_SECONDS = 60.0
"""Skipped series are logged on the first page that has them, then at most once a minute."""

MAX_REMEMBERED_BYTES = 4 * 1024 * 1024
"""A page up to this size is kept whole, so the next one is compared with it before any parse; a
bigger one is parsed as it streams and never kept (memory does not grow with the page)."""

CADENCE_GAPS = 8
"""The upstream's change cadence is the shortest of its last this many change-to-change gaps."""
MAX_SKIP_SECONDS = 10.0
"""Following the upstream's cadence, a GET is never skipped for longer than this: an upstream
that died is noticed within it (and the sampler's grace period) even if it changes rarely."""
GATHER_BELOW_SECONDS = 1.0
"""With an interval under this, reads between the sampler's (it reads a batching source about
this often: sampler.FOLD_EVERY_SECONDS) are made by the source's own thread, which keeps only
the pages that changed (_Gatherer); at this interval or above every read is the sampler's."""
MAX_PENDING_PAGES = 256
"""Changed pages kept for the sampler's next read at most (the oldest is dropped first)."""


_DEVICE_RE = re.compile(r"nvidia(\d{1,5})")
_GPU_LABEL = re.compile(r'(?:^|,)\s*gpu\s*=\s*"([^"\\]*)"')
_INSTANCE_LABEL = re.compile(r'(?:^|,)\s*GPU_I_ID\s*=\s*"([^"\\]*)"')
_LABEL_RE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_NAME_RE = re.compile(rb"[A-Za-z_:][A-Za-z0-9_:]*(?:[{\s]|$)")
_PROFILE_RE = re.compile(r"[0-9A-Za-z.+_-]+")
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

_KNOWN_NAMES = frozenset(
    [
        *readings.DCGM_NAMES.values(),
        *(n.upper() for n in readings.RENAMED),
        *fields.CONVERTED_NAMES,
        fields.GPU_UTIL_RATIO_NAME,
    ]
)


def metric_field(name: str) -> tuple[int, float] | None:
    """The Ridgeline field id and unit factor for a dcgm-exporter metric name; None if unused.

    Only DCGM_FI_* names count: a page may carry the exporter's own DCGM_EXP_* families or
    process metrics, which are not DCGM fields. DCGM_FI_DEV_GPU_UTIL_RATIO is not answered here:
    its unit depends on the page (see fields.gpu_util_ratio_is_percent).
    """
    upper = name.upper()
    if upper.endswith("_TOTAL") and upper[: -len("_TOTAL")] in _KNOWN_NAMES:
        upper = upper[: -len("_TOTAL")]
    if upper in fields.CONVERTED_NAMES:
        return fields.CONVERTED_NAMES[upper]
    if not upper.startswith("DCGM_FI_") or upper == fields.GPU_UTIL_RATIO_NAME:
        return None
    fid = readings.field_id(upper)
    if fid is None or fid not in readings.DCGM_NAMES:
        return None
    return (fid, 1.0)


# -- the page, line by line ------------------------------------------------------------------


@dataclass
class _Series:
    """What one entity (GPU or MIG instance) has gathered on this page so far."""

    entity: Entity
    attribution: Attribution | None
    timestamp: float | None
    values: dict[int, float | None] = field(default_factory=dict)
    hpc_jobs: list[str] = field(default_factory=list)
    """The job ids of a dcgm-exporter with --hpc-job-mapping-dir, which repeats each GPU's series
    once per job (label hpc_job); the sample carries them joined (sample.join_hpc_jobs)."""
    util_ratio: tuple[float, bool] | None = None
    """DCGM_FI_DEV_GPU_UTIL_RATIO as read (value, written as an integer); its unit is decided
    once the whole page is in."""


@dataclass(frozen=True, slots=True)
class _Labels:
    """What a label set yields: an entity (or why not) and a pod."""

    entity: Entity | None
    attribution: Attribution | None
    problem: str | None = None
    reason: str = "bad_gpu_label"
    hpc_job: str | None = None


_NO_ENTITY = _Labels(entity=None, attribution=None)


class PageReader:
    """Parses a dcgm-exporter page fed in chunks; `samples()` once the page is in.

    Keeps one record per GPU / MIG instance named by any DCGM_FI_* series (so a page without the
    profiling fields still yields every GPU, with the fields it has), the values of the families
    Ridgeline reads, and counts of what it skipped, by reason.
    """

    def __init__(self, now: float, hints: tuple[MigProfileHint, ...] = (), *, record: bool = False) -> None:
        self._now = now
        self._hints = hints
        self._plan: list[tuple[bytes | None, _Series | None, tuple[int, float] | str | None]] | None = (
            [] if record else None
        )
        """With record: per line, its bytes up to the label set's end (None: not a DCGM_FI_
        line) and the entity and family it gave a value to (a _Template is made of it)."""
        self._taken: tuple[_Series, tuple[int, float] | str] | None = None
        self._replayable = True
        """False once a line makes this page no template (a skip, a line with no label set)."""
        self._tail = b""
        self._discarding = False
        self._line_number = 0
        self._series: dict[tuple[int, int | None], _Series] = {}
        self._families: dict[str, tuple[int, float] | str | None] = {}
        self._labels: dict[str, _Labels] = {}
        self._settled: dict[bytes, _Series] = {}
        """Label sets (bytes between the braces) that can only add values to their entity."""
        self._family_bytes: dict[bytes, tuple[int, float]] = {}
        """Metric names (bytes before the brace) of the value families Ridgeline reads."""
        self._unread: set[bytes] = set()
        """`NAME{` of the DCGM_FI_* families seen on this page that Ridgeline does not read."""
        self._saw_exposition = False
        self.has_4_7_names = False
        self.skipped: dict[str, int] = {}
        self.first_skip: str | None = None

    # feeding

    def feed(self, chunk: bytes | memoryview) -> None:
        if self._discarding:
            chunk = bytes(chunk)
            newline = chunk.find(b"\n")
            if newline < 0:
                return
            self._discarding = False
            chunk = chunk[newline + 1 :]
        lines = (self._tail + chunk).split(b"\n")
        self._tail = lines.pop()
        for line in lines:
            self._line_number += 1
            if len(line) > MAX_LINE_BYTES:  # whole, but too long: the limit is on the line
                if line.startswith(b"DCGM_FI_"):
                    self._skip("line_too_long", f"line {self._line_number} is over {MAX_LINE_BYTES} bytes")
                continue
            self._line(line)
        if len(self._tail) > MAX_LINE_BYTES:
            self._line_number += 1
            if self._tail.startswith(b"DCGM_FI_"):
                self._skip("line_too_long", f"line {self._line_number} is over {MAX_LINE_BYTES} bytes")
            self._tail = b""
            self._discarding = True

    def finish(self) -> list[Sample]:
        """The samples of the page, in GPU order; call once, after the last chunk."""
        if self._tail and not self._discarding:
            self._line_number += 1
            self._line(self._tail)
        self._tail = b""
        self._decide_util_ratio()
        ordered = sorted(self._series.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1))
        return [
            Sample(
                timestamp=entry.timestamp if entry.timestamp is not None else self._now,
                entity=entry.entity,
                values=entry.values,
                attribution=entry.attribution,
                hpc_job=join_hpc_jobs(entry.hpc_jobs),
            )
            for _, entry in ordered
        ]

    @property
    def recorded(self) -> bool:
        """Whether this reader noted its page's structure (template() may give one)."""
        return self._plan is not None

    @property
    def looks_like_exposition(self) -> bool:
        """Whether any line had the Prometheus text format's shape (a comment or `name value`)."""
        return self._saw_exposition

    # one line

    def _line(self, raw: bytes) -> None:
        if self._plan is not None:
            self._record(raw)
            return
        self._read_line(raw)

    def _record(self, raw: bytes) -> None:
        """_read_line, noting what the line gave for the template."""
        assert self._plan is not None
        if not raw.startswith(b"DCGM_FI_"):
            self._plan.append((None, None, None))
            self._read_line(raw)
            return
        close_at = raw.rfind(b"}")
        if raw.find(b"{") < 0 or close_at < 0 or len(raw) > MAX_LINE_BYTES:
            self._replayable = False
        self._taken = None
        self._read_line(raw)
        taken = self._taken
        self._plan.append(
            (raw[: close_at + 1], *taken) if taken is not None else (raw[: close_at + 1], None, None)
        )

    def template(self) -> _Template | None:
        """What the next page's parse may reuse when its lines are this page's up to their values
        (recorded pages only; none after a skip or an odd line: those take the full parse)."""
        if self._plan is None or not self._replayable or self.skipped or not self._series:
            return None
        slots = {id(entry): slot for slot, entry in enumerate(self._series.values())}
        plan = self._plan
        return _Template(
            prefixes=tuple(b"" if prefix is None else prefix for prefix, _, _ in plan),
            value_slices=tuple(
                _NOTHING if prefix is None else slice(len(prefix), None) for prefix, _, _ in plan
            ),
            others=tuple(at for at, (prefix, _, _) in enumerate(plan) if prefix is None),
            values=tuple(
                (at, slots[id(entry)], family)
                for at, (prefix, entry, family) in enumerate(plan)
                if prefix is not None and entry is not None and family is not None
            ),
            series=tuple(self._series.items()),
            has_4_7_names=self.has_4_7_names,
        )

    def _read_line(self, raw: bytes) -> None:
        if not raw.startswith(b"DCGM_FI_"):
            if not self._saw_exposition:
                stripped = raw.strip()
                if stripped.startswith(b"#") or _NAME_RE.match(stripped):
                    self._saw_exposition = True
            return
        self._saw_exposition = True
        brace_at = raw.find(b"{")
        if brace_at > 0:
            close_at = raw.rfind(b"}")
            settled = self._settled.get(raw[brace_at + 1 : close_at]) if close_at > brace_at else None
            if raw[: brace_at + 1] in self._unread and (settled is not None or self._adds_nothing(raw)):
                return  # a family Ridgeline does not read, for a GPU already known: a prefix check
            if settled is not None and self._fast_value(raw, brace_at, close_at, settled):
                return
        self._full_line(raw, brace_at)

    def _full_line(self, raw: bytes, brace_at: int) -> None:
        """A DCGM_FI_* line the byte checks could not read: decoded, its labels parsed (or its
        entity found), its value taken; whatever is wrong with it counted as skipped."""
        if len(self._series) >= MAX_ENTITIES and not self._names_a_known_entity(raw):
            self._skip("too_many_entities", f"line {self._line_number}: over {MAX_ENTITIES} GPUs")
            return
        try:
            text = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError:
            self._skip("bad_line", f"line {self._line_number} is not UTF-8")
            return
        brace = text.find("{")
        if brace >= 0:
            close = text.rfind("}")
            if close < brace:
                self._skip("bad_line", f"line {self._line_number}: unclosed label set: {text[:80]!r}")
                return
            name, labels_text, rest = text[:brace], text[brace + 1 : close], text[close + 1 :]
        else:
            name, _, rest = text.partition(" ")
            labels_text = ""
        family = self._family(name.strip())
        entry = self._known_entry(labels_text)
        if entry is None:
            entry = self._entry_of(raw, brace_at, name, labels_text, text)
            if entry is None:
                return
        if family is None:
            if brace >= 0 and len(self._unread) < 4096:
                self._unread.add(raw[: raw.find(b"{") + 1])
            return  # a DCGM field Ridgeline does not read: the GPU is known, that is all
        self._take_value(entry, family, rest, text)

    def _entry_of(self, raw: bytes, brace_at: int, name: str, labels_text: str, text: str) -> _Series | None:
        """The entity's record from the line's parsed labels, made when new (pod and job noted);
        None where the line names no GPU or is skipped."""
        labels = self._labels_of(labels_text)
        if labels.problem is not None:
            self._skip(labels.reason, f"line {self._line_number}: {labels.problem}: {text[:120]!r}")
            return None
        entity = labels.entity
        if entity is None:
            return None  # a node-level series (no gpu label): nothing to attribute it to
        key = entity.key
        entry = self._series.get(key)
        if entry is None:
            if len(self._series) >= MAX_ENTITIES:
                self._skip("too_many_entities", f"line {self._line_number}: over {MAX_ENTITIES} GPUs")
                return None
            entry = _Series(entity=entity, attribution=labels.attribution, timestamp=None)
            self._series[key] = entry
        elif entry.attribution is None and labels.attribution is not None:
            entry.attribution = labels.attribution
        if labels.hpc_job is None:  # a job label is checked on every line (bad_hpc_job counts)
            self._settle(raw, brace_at, name, entry)
        if labels.hpc_job and labels.hpc_job not in entry.hpc_jobs:
            self._note_job(entry, labels.hpc_job)
        return entry

    def _note_job(self, entry: _Series, job: str) -> None:
        """Add an HPC job id to the entity's jobs; a label that is not one job id is counted."""
        if JOB_ID.fullmatch(job):
            entry.hpc_jobs.append(job)
        else:  # "12,34" would be read back as two jobs: no job, the readings are kept
            self._skip("bad_hpc_job", f"line {self._line_number}: hpc_job={job[:40]!a} is not a job id")

    def _take_value(self, entry: _Series, family: tuple[int, float] | str, rest: str, text: str) -> None:
        """The value (and any timestamp) after a line's labels, kept where the entity has none."""
        if self._plan is not None:
            self._taken = (entry, family)
        parts = rest.split()
        if not 1 <= len(parts) <= 2:
            self._skip("bad_line", f"line {self._line_number}: expected a value: {text[:120]!r}")
            return
        try:
            raw_value = float(parts[0])
            stamp = float(parts[1]) / 1000.0 if len(parts) == 2 else None
        except ValueError:
            self._skip("bad_line", f"line {self._line_number}: not a number: {text[:120]!r}")
            return
        if entry.timestamp is None and stamp is not None:
            entry.timestamp = stamp
        if family == fields.GPU_UTIL_RATIO_NAME:
            if entry.util_ratio is None:
                entry.util_ratio = (raw_value, not any(c in parts[0] for c in ".eEnN"))
            return
        assert not isinstance(family, str)
        fid, factor = family
        if entry.values.get(fid) is None:
            scaled = raw_value if fields.is_blank(raw_value) else raw_value * factor
            entry.values[fid] = fields.clean_value(fid, scaled)

    def _settle(self, raw: bytes, brace_at: int, name: str, entry: _Series) -> None:
        """Remember a label set (as bytes) that can add nothing to its entity but values, and its
        family's name, so the next line with both is read by _fast_value."""
        close_at = raw.rfind(b"}")
        if brace_at < 0 or close_at < brace_at:
            return
        if len(self._settled) >= 4096:
            self._settled.clear()
        self._settled[raw[brace_at + 1 : close_at]] = entry
        family = self._families.get(name.strip())
        if isinstance(family, tuple) and len(self._family_bytes) < 4096:
            self._family_bytes[raw[:brace_at]] = family

    def _fast_value(self, raw: bytes, brace_at: int, close_at: int, entry: _Series) -> bool:
        """A line whose label set was settled (`entry`) and whose family is a value Ridgeline
        reads: its value is taken without decoding the line (the bytes are those a decode already
        passed). False sends the line down the full path (anything new or odd)."""
        family = self._family_bytes.get(raw[:brace_at])
        if family is None:
            return False
        parts = raw[close_at + 1 :].split()
        if not 1 <= len(parts) <= 2:
            return False
        try:
            raw_value = float(parts[0])
            stamp = float(parts[1]) / 1000.0 if len(parts) == 2 else None
        except ValueError:
            return False
        if entry.timestamp is None and stamp is not None:
            entry.timestamp = stamp
        fid, factor = family
        if entry.values.get(fid) is None:
            scaled = raw_value if fields.is_blank(raw_value) else raw_value * factor
            entry.values[fid] = fields.clean_value(fid, scaled)
        if self._plan is not None:
            self._taken = (entry, family)
        return True

    def _adds_nothing(self, raw: bytes) -> bool:
        """Whether a line of an unread family can only name a GPU already kept, which has its pod
        (or the line brings none) and no job mapping: such a line is skipped undecoded."""
        if b"hpc_job=" in raw:
            return False
        gpu = _label_bytes(raw, b'gpu="')
        index = None if gpu is None else _index_bytes(gpu)
        if index is None:
            return False
        instance = _label_bytes(raw, b'GPU_I_ID="')
        instance_index = None if instance is None else _index_bytes(instance)
        if instance is not None and instance_index is None:
            return False
        entry = self._series.get((index, instance_index))
        if entry is None:
            return False
        return entry.attribution is not None or not _may_bring_a_pod(raw)

    def _names_a_known_entity(self, raw: bytes) -> bool:
        """Whether a line may belong to a GPU already kept, from its gpu and GPU_I_ID labels found
        by a byte search alone: once the entity cap is reached, a line for a GPU beyond it costs
        this, not a decode and a label parse (a 10,000-GPU page is served within the deadline). A
        line whose labels this cannot read (`device="nvidiaN"`, spaces) takes the full path."""
        gpu = _label_bytes(raw, b'gpu="')
        if gpu is None:
            return True
        index = _index_bytes(gpu)
        instance = _label_bytes(raw, b'GPU_I_ID="')
        instance_index = None if instance is None else _index_bytes(instance)
        if index is None or (instance is not None and instance_index is None):
            return True  # not an index: the full parse says what is wrong
        return (index, instance_index) in self._series

    def _known_entry(self, labels_text: str) -> _Series | None:
        """The entity's record when this label set names a GPU already known (and brings no pod
        it lacks), found from its gpu and GPU_I_ID labels alone: a page whose every line carries
        another label set then costs two short searches a line, not a parse."""
        if labels_text in self._labels:
            return None  # the cache answers as cheaply
        match = _GPU_LABEL.search(labels_text)
        if match is None:
            return None
        gpu = _index(match.group(1))
        instance_match = _INSTANCE_LABEL.search(labels_text)
        instance = None if instance_match is None else _index(instance_match.group(1))
        if gpu is None or (instance_match is not None and instance is None):
            return None  # let the full parse say what is wrong
        entry = self._series.get((gpu, instance))
        brings_pod = entry is not None and entry.attribution is None and 'pod="' in labels_text
        if entry is None or brings_pod or "hpc_job=" in labels_text:
            return None  # unknown, or this series may bring a pod or a job the GPU has none of yet
        return entry

    def _family(self, name: str) -> tuple[int, float] | str | None:
        """What a metric name means, cached: (field, factor), the GPU_UTIL_RATIO name, or None."""
        try:
            return self._families[name]
        except KeyError:
            pass
        upper = name.upper()
        meaning: tuple[int, float] | str | None
        meaning = fields.GPU_UTIL_RATIO_NAME if upper == fields.GPU_UTIL_RATIO_NAME else metric_field(name)
        if upper in fields.DCGM_4_7_NAMES:
            self.has_4_7_names = True
        if len(self._families) < 4096:
            self._families[name] = meaning
        return meaning

    def _labels_of(self, text: str) -> _Labels:
        """Labels -> entity and pod, cached by their text: dcgm-exporter repeats one label set per
        GPU on every family, so the page's thousands of lines parse a few label sets."""
        found = self._labels.get(text)
        if found is None:
            found = self._parse_labels(text)
            if len(self._labels) >= 4096:
                self._labels.clear()
            self._labels[text] = found
        return found

    def _parse_labels(self, text: str) -> _Labels:
        labels: dict[str, str] = {}
        position = 0
        while position < len(text):
            match = _LABEL_RE.match(text, position)
            if match is None:
                if text[position:].strip(" ,"):
                    return _Labels(None, None, "unreadable labels", reason="bad_line")
                break
            value = match.group(2)
            if "\\" in value:
                value = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], value)
            labels.setdefault(match.group(1), value)
            position = match.end()
        return _labels_to_entity(labels, self._hints)

    def _skip(self, reason: str, example: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if self.first_skip is None:
            self.first_skip = example

    def _decide_util_ratio(self) -> None:
        """DCGM_FI_DEV_GPU_UTIL_RATIO on this page: DCGM 4.6's field 203 in percent or 4.7's
        field 1613 as a ratio (fields.gpu_util_ratio_is_percent, per series), with the page's own
        evidence first: one value above 1 makes the whole family percent, one fraction makes it a
        ratio; where every value is a bare integer 0 or 1, a page with DCGM 4.7 names is 4.9's."""
        readings = [e.util_ratio for e in self._series.values() if e.util_ratio is not None]
        numbers = [value for value, _ in readings if not (fields.is_blank(value) or value != value)]
        if any(v > fields.RATIO_CLAMP_LIMIT for v in numbers):
            page: bool | None = True
        elif any(not v.is_integer() for v in numbers if abs(v) != float("inf")):
            page = False
        else:
            page = False if self.has_4_7_names else None
        for entry in self._series.values():
            if entry.util_ratio is None:
                continue
            value, integer = entry.util_ratio
            if entry.values.get(fields.GPU_UTIL) is not None:
                continue  # the page also printed DCGM_FI_DEV_GPU_UTIL: that one is unambiguous
            if fields.is_blank(value) or value != value:
                entry.values[fields.GPU_UTIL] = None
                continue
            percent = page if page is not None else fields.gpu_util_ratio_is_percent(value, integer)
            entry.values[fields.GPU_UTIL] = fields.clean_value(
                fields.GPU_UTIL, value if percent else value * 100.0
            )


_NOTHING = slice(0, 0)


@dataclass(frozen=True, slots=True)
class _Template:
    """A parsed page's structure, line by line (all of it in columns, one entry a line): each
    DCGM_FI_ line's bytes up to the end of its label set (b"" for any other line), where its
    value starts, the other lines, and the lines that give a value: (line, entity slot,
    family); the entities it named (index and instance -> their record: entity, pod, jobs); its
    4.7 names.

    dcgm-exporter prints the same series in the same order on every collect, only the values
    change. A next page whose every line is the template's line up to its value is read by
    `replay`: its checks run over whole columns (a prefix compare a line, one scan of the
    values' bytes), and only the lines that give a value are read one by one."""

    prefixes: tuple[bytes, ...]
    value_slices: tuple[slice, ...]
    """Per line, the slice after its prefix (an empty one for a line that is not DCGM_FI_)."""
    others: tuple[int, ...]
    """The lines that were not DCGM_FI_ lines (comments, other exporters' families)."""
    values: tuple[tuple[int, int, tuple[int, float] | str], ...]
    series: tuple[tuple[tuple[int, int | None], _Series], ...]
    has_4_7_names: bool


def replay(
    template: _Template, body: bytes, now: float, hints: tuple[MigProfileHint, ...]
) -> PageReader | None:
    """The page read by its template (finish() gives the samples), or None when a line is not
    the template's up to its value, or a value does not read: that page takes the full parse,
    which says what is wrong with it. What it gives is what the full parse gives: a line whose
    label set is byte for byte the template's means what it meant there; only the values and
    stamps after it are new, and they are taken as the full parse takes them."""
    rests = _value_rests(template, body)
    if rests is None:
        return None
    reader = PageReader(now, hints)
    entries = [
        _Series(entity=e.entity, attribution=e.attribution, timestamp=None, hpc_jobs=list(e.hpc_jobs))
        for _, e in template.series
    ]
    reader._series = {key: entry for (key, _), entry in zip(template.series, entries, strict=True)}
    reader.has_4_7_names = template.has_4_7_names
    reader._saw_exposition = True
    return reader if _read_values(template, rests, entries) else None


def _value_rests(template: _Template, body: bytes) -> list[bytes] | None:
    """Each line's bytes after the template's prefix (its value and stamp), or None when the
    page is not the template's up to its values: checked over whole columns."""
    lines = body.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    prefixes = template.prefixes
    if len(lines) != len(prefixes) or not all(map(bytes.startswith, lines, prefixes)):
        return None
    if max(map(len, lines), default=0) > MAX_LINE_BYTES:
        return None  # the full parse says which line (a long one that is not DCGM_FI_ it ignores)
    rests = list(map(bytes.__getitem__, lines, template.value_slices))
    after = b"\n".join(rests)
    if b"}" in after or not after.isascii():
        return None  # another label set's end, or bytes a decode would refuse
    if any(lines[at].startswith(b"DCGM_FI_") for at in template.others):
        return None
    return rests


def _read_values(template: _Template, rests: list[bytes], entries: list[_Series]) -> bool:
    """Reads each line that gives a value into its entry, as the full parse takes it; False at
    the first value that does not read. One loop, no call a value: the per-page hot part."""
    blank, ratios = fields.FP64_BLANK, fields.RATIO_FIELDS
    for at, slot, family in template.values:
        parts = rests[at].split()
        count = len(parts)
        if not 1 <= count <= 2:
            return False
        try:
            raw_value = float(parts[0])
            stamp = float(parts[1]) / 1000.0 if count == 2 else None
        except ValueError:
            return False
        entry = entries[slot]
        if entry.timestamp is None and stamp is not None:
            entry.timestamp = stamp
        if family.__class__ is str:  # GPU_UTIL_RATIO_NAME: its unit is decided with the page
            _take_util_ratio(entry, raw_value, parts[0])
            continue
        assert not isinstance(family, str)
        fid, factor = family
        values = entry.values
        if values.get(fid) is None:
            scaled = raw_value * factor if raw_value < blank else raw_value  # a blank stays one
            if 0.0 <= scaled < blank and (scaled <= 1.0 or fid not in ratios):
                values[fid] = scaled  # what fields.clean_value keeps as it is
            else:
                values[fid] = fields.clean_value(fid, scaled)
    return True


def _take_util_ratio(entry: _Series, raw_value: float, text: bytes) -> None:
    """The entry's first GPU_UTIL_RATIO_NAME value, with whether it was written as an integer
    (its unit is decided with the whole page, PageReader._decide_util_ratio)."""
    if entry.util_ratio is None:
        entry.util_ratio = (raw_value, not any(c in text for c in b".eEnN"))


def _label_bytes(raw: bytes, opening: bytes) -> bytes | None:
    """The value of the label `opening` (`gpu="`) as dcgm-exporter writes it (after `{` or `,`),
    found with bytes.find; None when it is not there in that shape."""
    at = raw.find(opening)
    if at <= 0 or raw[at - 1] not in b"{,":
        return None
    start = at + len(opening)
    end = raw.find(b'"', start)
    return raw[start:end] if end > 0 else None


def _may_bring_a_pod(raw: bytes) -> bool:
    """Whether a line may name a pod: both its namespace and pod labels non-empty, or either in a
    shape the byte search does not read (dcgm-exporter prints them empty for an idle GPU)."""
    if b'pod="' not in raw:
        return False
    pod = _label_bytes(raw, b'pod="')
    namespace = _label_bytes(raw, b'namespace="')
    return pod is None or namespace is None or (pod != b"" and namespace != b"")


def _index_bytes(text: bytes) -> int | None:
    """_index of a label value still in bytes."""
    if text.isdigit() and len(text) <= MAX_INDEX_DIGITS:
        return int(text)
    return None


def _index(text: str) -> int | None:
    """An index label as an int: ASCII digits only (`gpu="²"` is not GPU 2), a few at most."""
    if text.isascii() and text.isdigit() and len(text) <= MAX_INDEX_DIGITS:
        return int(text)
    return None


def _label(labels: Mapping[str, str], *names: str) -> str:
    for name in names:
        value = labels.get(name, "")
        if value:
            return value
    return ""


def _labels_to_entity(labels: Mapping[str, str], hints: tuple[MigProfileHint, ...]) -> _Labels:
    """The GPU (or MIG instance) a dcgm-exporter series describes, from its labels.

    dcgm-exporter labels every series with gpu, UUID, pci_bus_id, device (nvidiaN) and
    modelName, plus GPU_I_PROFILE/GPU_I_ID on MIG instances (pkg/dcgmexporter; e.g. the page
    quoted in NVIDIA/dcgm-exporter PR #736). For MIG, gpu and UUID name the parent GPU.
    """
    gpu_text = labels.get("gpu")
    if gpu_text is not None:
        gpu = _index(gpu_text)
        if gpu is None:
            return _Labels(None, None, f"gpu={gpu_text[:20]!r} is not a GPU index")
    else:
        match = _DEVICE_RE.fullmatch(labels.get("device", ""))
        if match is None:
            return _NO_ENTITY
        gpu = int(match.group(1))
    instance_text = labels.get("GPU_I_ID", "")
    gpu_instance: int | None = None
    profile: str | None = None
    if instance_text:
        gpu_instance = _index(instance_text)
        if gpu_instance is None:
            return _Labels(None, None, f"GPU_I_ID={instance_text[:20]!r} is not an instance id")
        label = labels.get("GPU_I_PROFILE", "").strip()
        if label and len(label) <= MAX_PROFILE_CHARS and _PROFILE_RE.fullmatch(label):
            profile = label
        else:
            profile = hinted_profile(hints, gpu, gpu_instance)
    uuid = _label(labels, "UUID", "uuid")
    if not uuid:  # the sampler keys GPUs by uuid: without one, every GPU would collide
        uuid = f"GPU-scrape-{gpu}"
    entity = Entity(
        gpu=gpu,
        uuid=uuid,
        model=_label(labels, "modelName", "model_name", "model"),
        gpu_instance=gpu_instance,
        profile=profile,
    )
    namespace = labels.get("namespace", "")
    pod = labels.get("pod", "")
    attribution = None
    if namespace and pod:
        attribution = Attribution(namespace=namespace, pod=pod, container=labels.get("container", ""))
    return _Labels(entity=entity, attribution=attribution, hpc_job=labels.get("hpc_job") or None)


def parse_page(text: str, now: float, hints: tuple[MigProfileHint, ...] = ()) -> list[Sample]:
    """Samples from a whole page held as text (tests and tools; the source streams)."""
    reader = PageReader(now, hints)
    reader.feed(text.encode("utf-8"))
    return reader.finish()


# -- the source ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Page:
    """The last page read: its bytes (or caching headers), what it gave, what it skipped.

    Its samples are handed out again, stamps and all, while the page is unchanged: the sampler
    takes them as duplicates (inference.step: no new interval), since dcgm-exporter has not
    collected anything new. The interval to the next page is integrated with that page's values.
    """

    body: bytes | None
    validators: Validators | None
    samples: list[Sample]
    skipped: dict[str, int]
    first_skip: str | None


class _Cadence:
    """When the upstream's page is next due, from the times its bytes were seen to change.

    dcgm-exporter collects on a timer (`-c`) and serves the same bytes in between, so a GET
    between two collects cannot see a change. Once two changes were seen, each by a GET within
    two intervals of the one before, the cadence is the shortest of the recent change-to-change
    gaps, and a read skips its GET from a change seen until two intervals before the next is
    due; from then on every read GETs until a change is seen (`due_at`: a stall, a longer
    cadence or a failing upstream is read every interval, as before). Reads still happen at the
    interval: a skipped one serves the last page. A GET is never skipped for longer than
    MAX_SKIP_SECONDS, nor when the cadence is under four intervals (too little to save).

    A change seen by a GET after a longer blind spell came earlier than due, or while no GET
    looked (dcgm-exporter restarted with a shorter `-c`): when it appeared is not known, so the
    cadence is forgotten and every read GETs until it is learned again from two new changes.
    So a change is seen within one interval of appearing while the cadence holds, and once late
    when it moves, by at most that blind spell: min(cadence - 2 intervals, MAX_SKIP_SECONDS).
    """

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        """The source's read interval (--interval); the GETs' interval around a due change."""
        self._margin = 2 * interval
        self._clock = clock
        self._changes: list[float] = []
        self._fetched_at: float | None = None
        self._learned: tuple[float, float] | None = None
        """(last change, period) in one attribute: the source's thread reads it for due_at
        without the lock while a read may be forgetting the cadence."""

    def saw(self, *, changed: bool) -> None:
        """A GET answered: the page changed since the last one, or not."""
        now = self._clock()
        blind = None if self._fetched_at is None else now - self._fetched_at
        self._fetched_at = now
        if not changed:
            return
        if blind is None or blind > self._margin:
            self.forget()  # when it changed is not known to within the margin: no reference
            return
        self._changes.append(now)
        del self._changes[: -(CADENCE_GAPS + 1)]
        if len(self._changes) >= 2:
            period = min(b - a for a, b in zip(self._changes, self._changes[1:], strict=False))
            self._learned = (now, period)

    def forget(self) -> None:
        """GET every read until the cadence is learned again from two new changes."""
        self._learned = None
        self._changes = []

    @property
    def period(self) -> float | None:
        """The upstream's cadence as seen (seconds), once two changes were."""
        learned = self._learned
        return None if learned is None else learned[1]

    def due_at(self) -> float:
        """The clock's time from which a read GETs the page (0.0: every read does)."""
        learned, fetched_at = self._learned, self._fetched_at
        if learned is None or fetched_at is None or learned[1] < 2 * self._margin:
            return 0.0
        last_change, period = learned
        return min(last_change + period - self._margin, fetched_at + MAX_SKIP_SECONDS)

    def may_skip(self) -> bool:
        """Whether this read may serve the last page without a GET: the next change cannot be
        there yet (it is not due within two intervals, and changes are seen a read late at most)."""
        return self._clock() < self.due_at()


class _Gatherer:
    """The reads between the sampler's, on a thread of their own, when reads are due more often
    than the sampler folds (--interval under GATHER_BELOW_SECONDS).

    The sampler reads a batching source about once a second; this thread reads the page every
    interval in between (but sleeps through the reads the upstream's cadence skips) and keeps
    only the pages that changed. A read of an unchanged page gives
    the sampler nothing new (dcgm-exporter's interval averages stand until its next collect), so
    it is not kept: folding it would have been a duplicate (inference.step: no interval). What
    the sampler is handed (`take`) is therefore what it would have folded read by read, less
    the duplicates. A failed read ends the thread; the failure is raised by the next `take`,
    after the pages read before it were handed over. Every read, the sampler's and this
    thread's, holds one lock: the source's page, connection and cadence are never shared.
    """

    def __init__(
        self,
        read: Callable[[], tuple[list[Sample], bool]],
        interval: float,
        closing: Callable[[], None],
        due: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self._read = read
        self._interval = interval
        self._due = due
        """When the source next GETs (_Cadence.due_at): a read before it would serve the last
        page, which this thread does not keep, so it sleeps until then."""
        self._closing = closing
        self._lock = threading.Lock()
        self._pending: list[list[Sample]] = []
        self._failure: Exception | None = None
        self._read_at = time.monotonic()
        self._stopping = False
        self._wake = threading.Lock()
        """Held until stop() releases it: the thread waits on it (a lock's timed acquire is a
        cheaper wait than an Event's)."""
        self._wake.acquire()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ridgeline-scrape", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """End the thread; it closes the connection itself if it was mid-read past `timeout`."""
        if not self._stopping:
            self._stopping = True
            self._wake.release()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stopping:
                delay = max(self._read_at + self._interval, self._due()) - time.monotonic()
                if delay > 0:
                    self._wake.acquire(timeout=delay)
                    continue  # the sampler may have read meanwhile: due again from its read
                if not self.gather():
                    return
        finally:
            if self._stopping:
                self._closing()  # stop() may have given up waiting: the connection is no one's

    def gather(self) -> bool:
        """One read of the thread's: a changed page is kept for the sampler. False once failed."""
        with self._lock:
            self._read_at = time.monotonic()
            try:
                samples, new = self._read()
            except Exception as exc:  # raised to the sampler by take(), as read() would
                self._failure = exc
                return False
            if new:
                self._pending.append(samples)
                del self._pending[:-MAX_PENDING_PAGES]
        return True

    def take(self) -> list[list[Sample]]:
        """The changed pages since the last call and this read's page, oldest first; the page
        once more (a duplicate) when nothing changed. A failure of the thread's is raised once
        the pages read before it are handed over; one of this read's, likewise."""
        with self._lock:
            batches, self._pending = self._pending, []
            failure = self._failure
            if failure is None:
                self._read_at = time.monotonic()
                try:
                    samples, new = self._read()
                except Exception as exc:
                    if not batches:
                        raise
                    self._failure = exc
                    return batches
                if new or not batches:
                    batches.append(samples)
                return batches
            if batches:
                return batches
            self._failure = None
            raise failure


class ScrapeSource:
    """Reads dcgm-exporter's `/metrics` once per sampling interval (paced by the sampler), and
    GETs it when the upstream's cadence says a new page may be there (_Cadence)."""

    name = "scrape"
    paced = False
    _gatherer: _Gatherer | None = None
    """The thread reading between the sampler's reads (read_batches); None until it starts."""
    _template: _Template | None = None
    """The last fully parsed page's structure, which a changed page is read by (`replay`)."""

    def __init__(self, options: SourceOptions, settings: ScrapeSettings | None = None) -> None:
        settings = settings if settings is not None else ScrapeSettings()
        self._url = settings.url
        self._timeout = settings.timeout_seconds
        client = settings.client
        self._client = client if client.prefix else replace(client, prefix=CLIENT_PREFIX)
        self._hints = options.mig_profiles
        self._request: Request | None = None
        self._sent: tuple[tuple[str | None, tuple[tuple[str, str], ...]], Request] | None = None
        """The last GET's credentials and conditional headers, and the Request made of them."""
        self._skipped_total = 0
        self._skip_logged_at: float | None = None
        self._page: _Page | None = None
        self._kept = KeptConnection()
        self._cadence = _Cadence(options.interval_seconds)
        self.display_name = redact_url(self._url)
        """The URL as it may be shown (logs, errors, /readyz): password replaced by xxxxx."""

    @property
    def records_skipped(self) -> int:
        """Series skipped (odd gpu label, broken line, too many GPUs) over every page read."""
        return self._skipped_total

    def open(self) -> None:
        """Check the URL and the credentials only: dcgm-exporter may start after Ridgeline, so a
        first failed read is reported by read() (source_up 0) rather than stopping the daemon."""
        shown = self.display_name
        try:
            parts = urlsplit(self._url)
            port = parts.port
        except ValueError:  # urllib's reason quotes the port, which may be half a password
            raise SourceUnavailable(
                "bad_url", f"--scrape-url {shown} is not a valid URL (its host or port does not parse)"
            ) from None
        if misread_credentials(self._url):
            raise SourceUnavailable(
                "bad_url",
                f"--scrape-url {shown} has an '@' after its host: percent-encode '/', '?', '#' and '@' "
                "in the user name or password (%2F, %3F, %23, %40)",
            )
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SourceUnavailable(
                "bad_url",
                f"--scrape-url must be an http(s) URL of a dcgm-exporter /metrics page, "
                f"e.g. http://localhost:9400/metrics; got {shown!r}",
            )
        if not self._timeout > 0:
            raise SourceUnavailable("bad_timeout", f"--scrape-timeout must be > 0 s, got {self._timeout}")
        try:
            _, self._client = self._client.with_url_credentials(self._url)
            self._client.check()
            self._client.authorization()  # a missing or empty file fails here, not at each scrape
            context = self._client.context_for(self._url)
        except ClientConfigError as exc:
            raise SourceUnavailable("bad_credentials", str(exc)) from None
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        self._sent = None
        self._request = Request(
            scheme=parts.scheme,
            host=parts.hostname,
            port=port if port is not None else (443 if parts.scheme == "https" else 80),
            target=target,
            headers=(
                ("User-Agent", f"ridgeline/{__version__}"),
                ("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1"),
            ),
            context=context,
        )

    def read(self) -> list[Sample]:
        return list(self._read_page()[0])

    def read_batches(self) -> list[list[Sample]]:
        """What the sampler folds, about once a second: this read's page and, with an interval
        under GATHER_BELOW_SECONDS, every changed page the source's thread read since the last
        call (_Gatherer), oldest first. An unchanged page is handed over once, not once per read:
        to the sampler each repeat was a duplicate. With a longer interval, one read per call."""
        gatherer = self._gatherer
        if gatherer is not None:
            return gatherer.take()
        samples = self.read()
        interval = self._cadence.interval
        if interval < GATHER_BELOW_SECONDS:
            self._gatherer = _Gatherer(self._read_page, interval, self._kept.close, self._cadence.due_at)
            self._gatherer.start()
        return [samples]

    def _read_page(self) -> tuple[list[Sample], bool]:
        """One read: the page's samples, and whether they are new (not the last page again)."""
        if self._request is None:
            raise SourceError("not_open", "scrape source read before open()")
        now = time.time()
        page = self._page
        if page is not None and self._cadence.may_skip():
            return page.samples, False  # the upstream has no new page yet: no GET at all
        validators = Validators()
        body, reader = self._fetch(self._page_request(page), validators, now, page)
        if reader is None:  # the same page as last time
            assert page is not None
            self._cadence.saw(changed=False)
            self._note_skipped(page.skipped, page.first_skip)  # what a parse would count again
            return page.samples, False
        samples = reader.finish()
        if reader.recorded or self._template is None:
            self._template = reader.template()  # a replayed page keeps the template it matched
        self._note_skipped(reader.skipped, reader.first_skip)
        if not samples:
            self._page = None
            self._template = None
            raise self._no_samples(reader)
        self._cadence.saw(changed=page is not None)  # a first page is no change: no cadence yet
        cachable = validators.etag is not None or validators.last_modified is not None
        self._page = _Page(
            body=body,
            validators=validators if cachable else None,
            samples=samples,
            skipped=dict(reader.skipped),
            first_skip=reader.first_skip,
        )
        return samples, True

    def _page_request(self, page: _Page | None) -> Request:
        """The GET with its credentials read afresh (a rotated secret applies) and, when the last
        page came with validators, the conditional headers that let the upstream answer 304."""
        assert self._request is not None
        try:
            authorization = self._client.authorization()
        except ClientConfigError as exc:
            raise SourceError("bad_credentials", str(exc)) from None
        conditional = page.validators.conditional_headers() if page is not None and page.validators else ()
        key = (authorization, conditional)
        if self._sent is not None and self._sent[0] == key:
            return self._sent[1]  # the same Request: the connection sends the bytes it built for it
        request = self._request
        if authorization is not None:
            request = replace(request, authorization=authorization)
        if conditional:
            request = replace(request, headers=request.headers + conditional)
        self._sent = (key, request)
        return request

    def _fetch(
        self, request: Request, validators: Validators, now: float, page: _Page | None
    ) -> tuple[bytes | None, PageReader | None]:
        """The page's body (None when too big to keep) and its reader, or no reader when the
        upstream sent the same page as last time; every failure as a SourceError."""
        shown = self.display_name
        deadline = Deadline(self._timeout)
        try:
            known = page.body if page is not None else None
            chunks, reader, same = self._download(request, deadline, validators, now, known)
            if page is not None and (validators.not_modified or same):
                return known, None
            body = b"".join(chunks) if chunks is not None else None
            if reader is None and body is not None and self._template is not None:
                reader = replay(self._template, body, now, self._hints)  # the same series, new values
            if reader is None:
                reader = PageReader(now, self._hints, record=True)
                for held in chunks or ():
                    reader.feed(held)
                    deadline.remaining()
            return body, reader
        except TimeoutError:
            raise SourceError("timeout", f"{shown} did not answer within {self._timeout:g} s") from None
        except FetchError as exc:
            if exc.reason == "connection":
                raise SourceError(exc.reason, f"cannot reach {shown}: {exc.message}") from None
            raise SourceError(exc.reason, f"{shown} {exc.message}") from None

    def _download(
        self, request: Request, deadline: Deadline, validators: Validators, now: float, known: bytes | None
    ) -> tuple[list[bytes] | None, PageReader | None, bool]:
        """The body's pieces while they fit MAX_REMEMBERED_BYTES (kept to compare with the next
        page); past that, no pieces and a reader that parsed them as they streamed. And whether
        the body is `known` (the last page's bytes) again: each piece (a view into the
        connection's buffer) is compared in place as it arrives, and while it matches it is not
        copied (its bytes are `known`'s): an unchanged body is never copied or joined."""
        chunks: list[bytes] | None = []
        size = 0
        reader: PageReader | None = None
        same = known is not None
        for piece in get(request, deadline, validators, self._kept):
            if same:
                assert known is not None
                if known.startswith(piece, size):  # a memcmp in place, no slice
                    size += len(piece)
                    continue
                same = False
                chunks = [known[:size]] if size else []  # what matched, as its own bytes
            size += len(piece)
            if chunks is not None and size <= MAX_REMEMBERED_BYTES:
                chunks.append(bytes(piece))  # a copy: the view's buffer is reused by the next read
                continue
            if chunks is not None:
                reader = PageReader(now, self._hints)  # too big to keep: parsed as it streams
                for held in chunks:
                    reader.feed(held)
                chunks = None
            assert reader is not None
            reader.feed(piece)  # parsed from the view, not copied first
            deadline.remaining()  # parsing counts against the deadline too
        if same and known is not None and size == len(known):
            return None, None, True
        if same and known is not None:
            chunks = [known[:size]] if size else []  # a prefix of the last page: a short page
        return chunks, reader, False

    def _no_samples(self, reader: PageReader) -> SourceError:
        """Why a page gave no sample: not the text format, every series skipped, or no DCGM series."""
        shown = self.display_name
        if not reader.looks_like_exposition:
            return SourceError("parse_error", f"{shown} did not return Prometheus text format")
        skipped = ", ".join(f"{r}: {n}" for r, n in sorted(reader.skipped.items()))
        if skipped:
            return SourceError(
                "no_dcgm_metrics", f"{shown}: every DCGM_FI_* GPU series was skipped ({skipped})"
            )
        return SourceError(
            "no_dcgm_metrics",
            f"{shown} answered, but with no DCGM_FI_* GPU series: is it dcgm-exporter's /metrics?",
        )

    def close(self) -> None:
        """Stop the reading thread, close the kept-alive connection (safe twice); the last page
        is kept."""
        gatherer, self._gatherer = self._gatherer, None
        if gatherer is not None:
            gatherer.stop(self._timeout + 1.0)  # a read ends by its deadline
        self._kept.close()

    def _note_skipped(self, skipped: Mapping[str, int], first_skip: str | None) -> None:
        count = sum(skipped.values())
        if not count:
            return
        self._skipped_total += count
        now = time.monotonic()
        if self._skip_logged_at is None or now - self._skip_logged_at >= SKIP_LOG_EVERY_SECONDS:
            self._skip_logged_at = now
            reasons = ", ".join(f"{r}: {n}" for r, n in sorted(skipped.items()))
            log.warning(
                "%s: skipped %d series on this page (%s; first: %s); %d skipped since start",
                self.display_name,
                count,
                reasons,
                first_skip,
                self._skipped_total,
            )


# -- the flags this source reads (exporter/sources/options.py) ------------------------------

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        flag="--scrape-url",
        dest="scrape_url",
        metavar="URL",
        help="dcgm-exporter /metrics URL for --source scrape (user:password@ allowed; shown redacted)",
    ),
    OptionSpec(
        flag="--scrape-timeout",
        dest="scrape_timeout",
        type=positive_seconds,
        default=5.0,
        metavar="S",
        help="one deadline for a whole scrape: lookup, connect, TLS, headers and body (default 5)",
    ),
    *client_flags(
        SCRAPE_FLAGS, "the scraped exporter", {"bearer-token-file": ("--scrape-bearer-token-file",)}
    ),
    OptionSpec(
        flag="--scrape-auth-file",
        dest="scrape_auth_file",
        metavar="PATH",
        help="file whose first line is user:password, for basic auth to the scraped exporter",
        replaced_by="--scrape.basic-auth.username and --scrape.basic-auth.password-file",
    ),
)


@dataclass(frozen=True, slots=True)
class ScrapeSettings:
    """What the --scrape-* flags say."""

    url: str = field(default="", repr=False)
    """--scrape-url; may hold user:password@, so never printed (repr=False): show it through
    exporter.redaction.redact_url."""
    timeout_seconds: float = 5.0
    """One deadline for the whole scrape: name lookup, connect, TLS, headers and body."""
    client: HTTPClientConfig = field(default_factory=HTTPClientConfig)
    """Basic auth, bearer token and TLS towards the upstream (the `--scrape.*` flags)."""


def options_from(values: Any, chosen: bool) -> ScrapeSettings:
    """The URL, the deadline and, when this source is chosen, its HTTP client configuration
    (checked, its files read once)."""
    if not chosen:
        return ScrapeSettings(url=values.scrape_url or "", timeout_seconds=values.scrape_timeout)
    if not values.scrape_url:
        raise OptionError("--source scrape needs --scrape-url URL (a dcgm-exporter /metrics page)")
    client = config_from(values, SCRAPE_FLAGS)
    if values.scrape_auth_file:
        client = replace(client, basic_auth_file=Path(values.scrape_auth_file))
        client.check()
    return ScrapeSettings(url=values.scrape_url, timeout_seconds=values.scrape_timeout, client=client)
