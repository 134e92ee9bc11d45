"""`dcgmi dmon` text as NVIDIA prints it, captured with `dcgmi dmon -e ... > file`.

What dcgmi prints (NVIDIA DCGM dcgmi/DeviceMonitor.cpp):

    #Entity   GRACT     SMACT     DRAMA               <- DCGM 3.x+: "#Entity", columns left-aligned
    ID                                                <- the units line (" W", " C", "KB/s", "#")
    GPU 0     0.871     0.802     N/A
    GPU-I 1   0.420     0.398     0.212               <- MIG: GPU instance, then its compute
    GPU-CI 3  0.400     0.390     N/A                    instances, after their parent GPU
    ...                                               <- header again every 14 samples
    dmon was stopped do to receiving a signal         <- after Ctrl-C (older: "...due to...")

Older DCGM (2.x) prints "# Entity" and "Id", right-aligned. Blanks are N/A; values wider than
their column end in "...". There is no timestamp: a batch is one block of rows until an entity
repeats (or the header is printed again), spaced by the -d delay (--interval).

Liberal in what we accept: tabs, CRLF, blank lines, a leading "dcgmi dmon ..." echo, "#"
comments, a leading epoch timestamp per row, unit suffixes, columns named by field id.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from exporter.sample import Entity, Sample
from exporter.sources.replay_formats.common import (
    BadValue,
    Batch,
    ParseContext,
    ReplayFormatError,
    clean_number,
    parse_number_text,
    parse_timestamp,
)

ENTITY_KINDS = frozenset({"GPU", "GPU-I", "GPU-CI", "VGPU", "SWITCH", "CPU", "CORE", "LINK", "CX"})
"""Entity group names dcgmi prints in the first column (upper-cased here)."""

_UNIT_TOKENS = frozenset({"W", "C", "KB/s", "MB/s", "GB/s", "mJ", "MHz", "%", "#"})

_TRAILER = re.compile(r"dmon was stopped|^\^C|received? a signal", re.IGNORECASE)
_ROW = re.compile(r"^\s*(?:\S+\s+)?(GPU|GPU-I|GPU-CI|vGPU|Switch)\s+\d+(\s|$)", re.IGNORECASE)


def is_header(text: str) -> bool:
    """True for the "#Entity" / "# Entity" column header line."""
    return text.startswith("#") and text.lstrip("#").lstrip().lower().startswith("entity")


def looks_like_row(text: str) -> bool:
    """True for a dmon data row such as "GPU 0  0.888  N/A" (used by format detection)."""
    return _ROW.match(text) is not None


def parse_dmon(lines: Sequence[str], ctx: ParseContext) -> list[Batch]:
    """Parse dmon text into batches; rows that cannot be read are skipped and counted."""
    if ctx.default_model is None:
        raise ReplayFormatError(
            f"{ctx.name}: dcgmi dmon text does not name the GPU model; pass --model with the GPU's "
            "NVML name (e.g. --model 'NVIDIA H100 80GB HBM3')"
        )
    model = ctx.default_model
    columns: list[int | None] | None = None
    header_text = ""
    batches: list[Batch] = []
    current: dict[tuple[int, int | None], tuple[Entity, dict[int, float | None]]] = {}
    current_row_time: float | None = None
    last_gpu_in_batch = -1
    parent_gpu: int | None = None
    seen_header = False

    def close_batch() -> None:
        nonlocal current, last_gpu_in_batch, parent_gpu, current_row_time
        if current:
            if current_row_time is not None:
                timestamp = current_row_time
            elif batches:
                timestamp = batches[-1][0] + ctx.interval_seconds
            else:
                timestamp = ctx.base_timestamp
            samples = [
                Sample(timestamp=timestamp, entity=entity, values=values, attribution=None)
                for entity, values in current.values()
            ]
            batches.append((timestamp, samples))
        current = {}
        last_gpu_in_batch = -1
        parent_gpu = None
        current_row_time = None

    expect_units = False
    for index, raw_line in enumerate(lines):
        line = raw_line.expandtabs(8).rstrip()
        text = line.strip()
        line_number = index + 1
        if not text:
            continue
        if is_header(text):
            close_batch()
            tags = text.lstrip("#").split()[1:]
            columns = [_column_field(tag, ctx) for tag in tags]
            header_text = line
            seen_header = True
            expect_units = True
            continue
        if expect_units:
            expect_units = False
            if text.split()[0].lower() == "id":
                continue
        if text.startswith("#") or _TRAILER.search(text):
            continue
        tokens = text.split()
        time_token: float | None = None
        if len(tokens) > 2 and tokens[0].upper() not in ENTITY_KINDS and tokens[1].upper() in ENTITY_KINDS:
            # A row prefixed with its time (`dcgmi dmon | ts`, a logging wrapper): epoch seconds
            # or ISO 8601 set the batch time; any other prefix (a time of day) is dropped.
            try:
                time_token = parse_timestamp(tokens[0])
            except ValueError:
                time_token = None
            tokens = tokens[1:]
        kind = tokens[0].upper()
        if kind not in ENTITY_KINDS:
            if seen_header:
                ctx.lines_read += 1
                ctx.skip(line_number, "not_a_row", f"not a dmon row: {text[:60]!r}")
            continue  # text before the first header: a command echo or a banner
        ctx.lines_read += 1
        if columns is None:
            ctx.skip(line_number, "no_header", "row before any #Entity header")
            continue
        if len(tokens) < 2 or not tokens[1].isdigit():
            ctx.skip(line_number, "bad_entity", f"entity {' '.join(tokens[:2])!r} has no numeric id")
            continue
        entity_id = int(tokens[1])
        cells = tokens[2:]
        if len(cells) != len(columns):
            realigned = _realign(cells, line, header_text, len(columns))
            if realigned is None:
                ctx.skip(
                    line_number,
                    "column_count",
                    f"{len(tokens) - 2} values where the header has {len(columns)} columns",
                )
                continue
            cells = realigned
        if kind == "GPU":
            gpu, instance = entity_id, None
            if gpu <= last_gpu_in_batch or (gpu, None) in current:
                close_batch()  # dmon prints GPUs in ascending order: a lower index starts a new sample
            last_gpu_in_batch = gpu
            parent_gpu = gpu
        elif kind == "GPU-I":
            if parent_gpu is None:
                parent_gpu = 0
                ctx.warn_once(
                    "dmon:orphan-instance",
                    f"line {line_number}: GPU-I rows without a GPU row before them are attributed to GPU 0",
                )
            gpu, instance = parent_gpu, entity_id
            if (gpu, instance) in current:
                close_batch()
                parent_gpu = gpu
        elif kind == "GPU-CI":
            ctx.skip(
                line_number, "compute_instance", "GPU-CI rows are not replayed (one sample per instance)"
            )
            continue
        else:
            ctx.skip(line_number, "unsupported_entity", f"{tokens[0]} rows are not GPUs")
            continue
        try:
            values = _values(cells, columns)
        except BadValue as exc:
            ctx.skip(line_number, "bad_value", str(exc))
            continue
        if time_token is not None:
            if current_row_time is not None and time_token != current_row_time and current:
                close_batch()
                if kind == "GPU":
                    last_gpu_in_batch = gpu
                    parent_gpu = gpu
            current_row_time = time_token
        entity = _entity(ctx, gpu, instance, model)
        current[(gpu, instance)] = (entity, values)
    close_batch()
    if not seen_header:
        raise ReplayFormatError(f"{ctx.name}: no '#Entity' header line; this is not dcgmi dmon output")
    return batches


def _column_field(tag: str, ctx: ParseContext) -> int | None:
    fid = ctx.field_ids.get(tag)
    if fid is None and tag not in ctx.field_ids:
        fid = ctx.lookup_field(tag)
    return fid


def _values(cells: list[str], columns: list[int | None]) -> dict[int, float | None]:
    values: dict[int, float | None] = {}
    for cell, fid in zip(cells, columns, strict=True):
        if fid is None:
            continue
        if cell == "N/A":
            values[fid] = None
            continue
        try:
            number: float | None = float(cell)
        except ValueError:
            number = parse_number_text(fid, cell)
        values[fid] = clean_number(fid, number)
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


def _entity(ctx: ParseContext, gpu: int, instance: int | None, model: str) -> Entity:
    uuid = f"GPU-dmon-{gpu}" if instance is None else f"MIG-dmon-{gpu}-{instance}"
    return ctx.entity(gpu, uuid, model, instance)
