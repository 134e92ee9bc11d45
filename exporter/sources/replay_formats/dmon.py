"""`dcgmi dmon` text as NVIDIA prints it, captured with `dcgmi dmon -e ... > file`.

The layout is NVIDIA DCGM's dcgmi/DeviceMonitor.cpp, in both the DCGM 2.x and 3.x+ shapes. There
is no timestamp: a sample is the block of rows until an entity repeats or the header is printed
again, spaced by --interval; a GPU-I row belongs to the GPU row before it unless `--mig-profile`
names its parent. What is accepted and why: docs/replay-formats.md, "`dcgmi dmon` text".
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from exporter.sources.base import hinted_parent
from exporter.sources.replay_formats.common import (
    BadValue,
    Batch,
    Column,
    ParseContext,
    RepeatBatcher,
    ReplayFormatError,
    parse_timestamp,
    read_value,
)
from exporter.sources.replay_formats.lines import Line

ENTITY_KINDS = frozenset({"GPU", "GPU-I", "GPU-CI", "VGPU", "SWITCH", "CPU", "CORE", "LINK", "CX"})
"""Entity group names dcgmi prints in the first column (upper-cased here)."""

_UNIT_TOKENS = frozenset({"W", "C", "KB/s", "MB/s", "GB/s", "mJ", "MHz", "%", "#"})

TRAILERS = re.compile(
    r"dmon was stopped d(?:ue|o) to receiv(?:ing|ed) a signal|^\^C|receiv(?:ing|ed) a signal", re.IGNORECASE
)
"""What dcgmi prints when stopped by a signal. DCGM 2.x-3.x (DeviceInfo, std::cout): "dmon was
stopped due to receiving a signal." DCGM 3.x-4.x (DeviceMonitor, fmt::print): "dmon was stopped
do to receiving a signal" (sic), later spelled "due to", without the full stop."""

_ROW = re.compile(r"^\s*(?:\S+\s+)?(GPU|GPU-I|GPU-CI|vGPU|Switch)\s+\d+(\s|$)", re.IGNORECASE)
_MAX_ID_DIGITS = 5


def is_header(text: str) -> bool:
    """True for the "#Entity" / "# Entity" column header line."""
    return text.startswith("#") and text.lstrip("#").lstrip().lower().startswith("entity")


def looks_like_row(text: str) -> bool:
    """True for a dmon data row such as "GPU 0  0.888  N/A" (used by format detection)."""
    return _ROW.match(text) is not None


def iter_dmon(lines: Iterator[Line], ctx: ParseContext) -> Iterator[Batch]:
    """Batches of dmon text as it streams; rows that cannot be read are skipped and counted."""
    if ctx.default_model is None:
        raise ReplayFormatError(
            f"{ctx.name}: dcgmi dmon text does not name the GPU model; pass --model with the GPU's "
            "NVML name (e.g. --model 'NVIDIA H100 80GB HBM3')"
        )
    reader = _DmonReader(ctx, ctx.default_model)
    for number, text in lines:
        if text is None:
            ctx.lines_read += 1
            ctx.skip(number, "line_too_long", "line too long for a dmon row")
            continue
        closed = reader.line(number, text)
        if closed is not None:
            yield closed
    last = reader.batcher.close()
    if last is not None:
        yield last
    if not reader.seen_header:
        raise ReplayFormatError(f"{ctx.name}: no '#Entity' header line; this is not dcgmi dmon output")


class _DmonReader:
    """The state between lines: the header's columns, the GPU rows' parents, the open sample."""

    def __init__(self, ctx: ParseContext, model: str) -> None:
        self.ctx = ctx
        self.model = model
        self.columns: list[Column | None] | None = None
        self.header_text = ""
        self.seen_header = False
        self.expect_units = False
        self.last_gpu: int | None = None
        """The GPU of the last GPU row: a GPU-I row after it is its instance."""
        self.parents: dict[int, int] = {}
        """GPU-I id -> the parent it was first seen under (kept for the rest of the file)."""
        self.batcher = RepeatBatcher(ctx)

    def line(self, number: int, raw: str) -> Batch | None:
        """Read one line; returns the batch it closed, if any."""
        ctx = self.ctx
        line = raw.expandtabs(8).rstrip()
        text = line.strip()
        if not text:
            return None
        if is_header(text):
            return self._header(line, text)
        if self.expect_units:
            self.expect_units = False
            if text.split()[0].lower() == "id":
                return None
        if text.startswith("#") or TRAILERS.search(text):
            return None
        row_time, tokens = _split_row_time(text.split())
        kind = tokens[0].upper()
        if kind not in ENTITY_KINDS:
            if self.seen_header:
                ctx.lines_read += 1
                ctx.skip(number, "not_a_row", f"not a dmon row: {text[:60]!r}")
            return None  # text before the first header: a command echo or a banner
        ctx.lines_read += 1
        if self.columns is None:
            ctx.skip(number, "no_header", "row before any #Entity header")
            return None
        entity_id = self._entity_id(number, kind, tokens)
        if entity_id is None:
            return None
        values = self._row_values(number, tokens[2:], line, self.columns)
        if values is None:
            return None
        if kind == "GPU":
            self.last_gpu = entity_id
            gpu, instance = entity_id, None
        else:
            gpu, instance = self._parent(number, entity_id), entity_id
        uuid = f"GPU-dmon-{gpu}" if instance is None else f"MIG-dmon-{gpu}-{instance}"
        entity = ctx.entity(gpu, uuid, self.model, instance)
        return self.batcher.add(number, entity, values, row_time=row_time)

    def _header(self, line: str, text: str) -> Batch | None:
        """Take a (repeated) #Entity header's columns; it closes the open sample."""
        self.columns = [self.ctx.column(tag) for tag in text.lstrip("#").split()[1:]]
        self.header_text = line
        self.seen_header = True
        self.expect_units = True
        self.last_gpu = None
        return self.batcher.close()

    def _entity_id(self, number: int, kind: str, tokens: list[str]) -> int | None:
        """A GPU or GPU-I row's numeric entity id; None (the row skipped) for anything else."""
        ctx = self.ctx
        id_text = tokens[1] if len(tokens) > 1 else ""
        if not (id_text.isascii() and id_text.isdigit() and len(id_text) <= _MAX_ID_DIGITS):
            ctx.skip(number, "bad_entity", f"entity {' '.join(tokens[:2])[:40]!r} has no numeric id")
            return None
        if kind == "GPU-CI":
            ctx.skip(number, "compute_instance", "GPU-CI rows are not replayed (one sample per instance)")
            return None
        if kind not in ("GPU", "GPU-I"):
            ctx.skip(number, "unsupported_entity", f"{tokens[0]} rows are not GPUs")
            return None
        return int(id_text)

    def _row_values(
        self, number: int, cells: list[str], line: str, columns: list[Column | None]
    ) -> dict[int, float | None] | None:
        """The row's field values, realigned to the header if need be; None (skipped) if bad."""
        ctx = self.ctx
        if len(cells) != len(columns):
            realigned = _realign(cells, line, self.header_text, len(columns))
            if realigned is None:
                ctx.skip(
                    number,
                    "column_count",
                    f"{len(cells)} values where the header has {len(columns)} columns",
                )
                return None
            cells = realigned
        try:
            return _values(cells, columns)
        except BadValue as exc:
            ctx.skip(number, "bad_value", str(exc))
            return None

    def _parent(self, number: int, instance: int) -> int:
        """A GPU-I row's GPU: named by --mig-profile, else the one it was first seen under, else
        the GPU row before it (GPU 0, with a warning, when there is none)."""
        named = hinted_parent(self.ctx.mig_profiles, instance)
        if named is not None:
            return named
        known = self.parents.get(instance)
        if known is not None:
            return known
        parent = self.last_gpu
        if parent is None:
            parent = 0
            self.ctx.warn_once(
                "dmon:orphan-instance",
                f"line {number}: GPU-I rows without a GPU row before them are attributed to GPU 0 "
                "(name the parent with --mig-profile GPU:GI=PROFILE)",
            )
        if len(self.parents) < 4096:
            self.parents[instance] = parent
        return parent


def _split_row_time(tokens: list[str]) -> tuple[float | None, list[str]]:
    """A row's leading time, if it has one, and the row without it."""
    if len(tokens) > 2 and tokens[0].upper() not in ENTITY_KINDS and tokens[1].upper() in ENTITY_KINDS:
        # A row prefixed with its time (`dcgmi dmon | ts`, a logging wrapper): epoch seconds
        # or ISO 8601 set the batch time; any other prefix (a time of day) is dropped.
        try:
            row_time: float | None = parse_timestamp(tokens[0])
        except ValueError:
            row_time = None
        return row_time, tokens[1:]
    return None, tokens


def _values(cells: list[str], columns: list[Column | None]) -> dict[int, float | None]:
    values: dict[int, float | None] = {}
    for cell, column in zip(cells, columns, strict=True):
        if column is None:
            continue
        value = read_value(column, cell)
        if values.get(column.fid) is None:
            values[column.fid] = value
    return values


def _realign(cells: list[str], line: str, header: str, width: int) -> list[str] | None:
    """Cells for a row whose token count differs from the header's column count.

    First drop bare unit tokens ("250.0 W"); then cut the row at the header's column
    positions (the header and the rows share fixed widths), which also keeps a value that
    contains spaces (a GPU name) in one column.
    """
    without_units = [cell for cell in cells if cell not in _UNIT_TOKENS]
    if len(without_units) == width:
        return without_units
    starts = [m.start() for m in re.finditer(r"\S+", header)][1:]
    if len(starts) != width or header.startswith("# ") or len(line) <= starts[-1]:
        return None  # old right-aligned layout, or a row cut short: no safe way to place values
    result = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < width else len(line)
        result.append(line[start:end].strip() or "N/A")
    return result
