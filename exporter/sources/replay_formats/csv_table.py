"""CSV replay files: a header row naming the columns, then one sample per row.

Entity columns: timestamp (or ts, time), gpu, uuid, model, gpu_instance, namespace, pod,
container. Every other column is a field, named by DCGM id ("1005"), DCGM name
(DCGM_FI_PROF_DRAM_ACTIVE) or dmon tag (DRAMA); unknown columns are ignored with one warning.
An empty cell or N/A is a blank. Without a timestamp column, rows are batched like dmon text
(a new batch when a GPU repeats) and spaced by the sample interval.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence

from exporter.sample import Sample
from exporter.sources.replay_formats.common import (
    BLANK_TOKENS,
    BadValue,
    Batch,
    ParseContext,
    ReplayFormatError,
    clean_number,
    group_by_timestamp,
    parse_gpu_index,
    parse_number_text,
    parse_timestamp,
)

_ENTITY_COLUMNS = {
    "timestamp": "ts",
    "ts": "ts",
    "time": "ts",
    "gpu": "gpu",
    "gpu_index": "gpu",
    "uuid": "uuid",
    "model": "model",
    "modelname": "model",
    "gpu_instance": "gpu_instance",
    "gpu_i_id": "gpu_instance",
    "namespace": "namespace",
    "pod": "pod",
    "container": "container",
}
"""Header spellings (lower case) of the entity columns -> the role they play."""


def parse_csv(lines: Sequence[str], ctx: ParseContext) -> list[Batch]:
    """Parse a CSV table; rows that cannot be read are skipped and counted."""
    header_index = _find_header(lines)
    if header_index is None:
        raise ReplayFormatError(f"{ctx.name}: no CSV header row found")
    header = next(csv.reader([lines[header_index]]))
    roles: dict[str, int] = {}
    fields: list[tuple[int, int]] = []
    for column, raw_name in enumerate(header):
        name = raw_name.strip().lstrip("#").strip()
        role = _ENTITY_COLUMNS.get(name.lower())
        if role is not None:
            roles.setdefault(role, column)
            continue
        if not name:
            continue
        fid = ctx.lookup_field(name)
        if fid is not None:
            fields.append((column, fid))
    if "gpu" not in roles:
        raise ReplayFormatError(
            f"{ctx.name}:{header_index + 1}: CSV header has no 'gpu' column (columns: {', '.join(header)})"
        )
    if not fields:
        raise ReplayFormatError(f"{ctx.name}:{header_index + 1}: CSV header names no known DCGM field")
    width = len(header)
    ts_col = roles.get("ts")
    gpu_col = roles["gpu"]
    optional_roles = ("uuid", "model", "gpu_instance", "namespace", "pod", "container")
    opt = {role: roles.get(role) for role in optional_roles}

    rows: list[tuple[float, Sample, int]] = []
    # Without a timestamp column, a batch ends when a GPU repeats (like dmon text).
    synthetic_index = 0
    seen_in_batch: set[tuple[int, int | None]] = set()
    body = [(i, line) for i, line in enumerate(lines) if i > header_index]
    reader = csv.reader(line for _, line in body)
    for (index, raw_line), cells in zip(body, reader, strict=True):
        line_number = index + 1
        if not cells or (len(cells) == 1 and not cells[0].strip()) or raw_line.lstrip().startswith("#"):
            continue
        ctx.lines_read += 1
        if len(cells) != width:
            ctx.skip(line_number, "column_count", f"{len(cells)} cells where the header has {width}")
            continue
        try:
            gpu = parse_gpu_index(cells[gpu_col])
            gpu_instance = _optional_int(cells, opt["gpu_instance"])
            model = _optional_text(cells, opt["model"]) or ctx.default_model
            if model is None:
                raise ReplayFormatError(
                    f"{ctx.name}:{line_number}: no model for GPU {gpu} and no --model given; "
                    "pass --model with the GPU's NVML name"
                )
            values: dict[int, float | None] = {}
            for column, fid in fields:
                cell = cells[column]
                if cell in BLANK_TOKENS:
                    values[fid] = None
                    continue
                try:
                    number: float | None = float(cell)
                except ValueError:
                    number = parse_number_text(fid, cell)
                values[fid] = clean_number(fid, number)
        except BadValue as exc:
            ctx.skip(line_number, "bad_value", str(exc))
            continue
        except ValueError as exc:
            ctx.skip(line_number, "bad_entity", str(exc))
            continue
        namespace = _optional_text(cells, opt["namespace"])
        pod = _optional_text(cells, opt["pod"])
        attribution = None
        if namespace or pod:
            container = _optional_text(cells, opt["container"]) or ""
            attribution = ctx.attribution(namespace or "", pod or "", container)
        entity = ctx.entity(gpu, _optional_text(cells, opt["uuid"]), model, gpu_instance)
        if ts_col is not None:
            try:
                timestamp = parse_timestamp(cells[ts_col])
            except ValueError as exc:
                ctx.skip(line_number, "bad_timestamp", str(exc))
                continue
        else:
            if entity.key in seen_in_batch:
                synthetic_index += 1
                seen_in_batch.clear()
            seen_in_batch.add(entity.key)
            timestamp = ctx.base_timestamp + synthetic_index * ctx.interval_seconds
        rows.append(
            (
                timestamp,
                Sample(timestamp=timestamp, entity=entity, values=values, attribution=attribution),
                line_number,
            )
        )
    return group_by_timestamp(rows, ctx)


def _find_header(lines: Sequence[str]) -> int | None:
    for index, line in enumerate(lines):
        text = line.strip()
        if not text:
            continue
        if text.startswith("#") and "," not in text:
            continue  # a comment
        return index
    return None


def _optional_text(cells: list[str], column: int | None) -> str | None:
    if column is None:
        return None
    text = cells[column].strip()
    return None if text in BLANK_TOKENS else text


def _optional_int(cells: list[str], column: int | None) -> int | None:
    text = _optional_text(cells, column)
    if text is None:
        return None
    value = int(text)
    if value < 0:
        raise ValueError(f"gpu_instance {value} is negative")
    return value
