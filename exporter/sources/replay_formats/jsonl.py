"""Ridgeline JSON Lines replay format: one sample per line, fields keyed by DCGM id or name.

This is also what `ridgeline record` writes (`sample_to_json`, the one writer). Each line
(exporter/sources/replay_formats/lines.py) is decoded with the standard library's json, and a bad
line is one skip with its own line number. The keys: docs/replay-formats.md, "Ridgeline JSON
Lines".
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from exporter.sample import Sample
from exporter.sources.replay_formats.common import (
    BadValue,
    Batch,
    Column,
    LineError,
    ParseContext,
    TimeBatcher,
    parse_index,
    parse_timestamp,
    profile_text,
    read_value,
)
from exporter.sources.replay_formats.lines import MAX_LINE_BYTES, Line

ENTITY_KEYS = frozenset(
    {
        "ts",
        "timestamp",
        "gpu",
        "uuid",
        "model",
        "gpu_instance",
        "gpu_instance_profile",
        "gpu_instance_sm_count",
        "fields",
        "namespace",
        "pod",
        "container",
        "hpc_job",
        "node",
    }
)
"""Top-level keys a line may carry besides known field names."""

MAX_SM_COUNT = 1024
"""A GPU instance's SMs a line may state (a whole Blackwell card has under 200)."""


def sample_to_json(sample: Sample) -> str:
    """The one writer of a replay line: what `iter_jsonl` reads back as an equal Sample.

    Fields are keyed by DCGM id strings in id order and a blank is null; the MIG profile, the
    pod labels and the HPC job id(s) appear only when known. `ridgeline record`, the demo-trace and scenario
    generators, the benchmarks and the tests all write lines with it. NaN or infinity raise
    ValueError (JSON has no such numbers; the recorder counts and skips that sample).
    """
    entity = sample.entity
    line: dict[str, object] = {
        "ts": sample.timestamp,
        "gpu": entity.gpu,
        "uuid": entity.uuid,
        "model": entity.model,
        "gpu_instance": entity.gpu_instance,
    }
    if entity.profile is not None:
        line["gpu_instance_profile"] = entity.profile
    if entity.sm_count is not None:
        line["gpu_instance_sm_count"] = entity.sm_count
    line["fields"] = {str(fid): value for fid, value in sorted(sample.values.items())}
    if sample.attribution is not None:
        line["namespace"] = sample.attribution.namespace
        line["pod"] = sample.attribution.pod
        line["container"] = sample.attribution.container
    if sample.hpc_job is not None:
        line["hpc_job"] = sample.hpc_job
    if entity.node is not None:
        line["node"] = entity.node
    return json.dumps(line, separators=(",", ":"), allow_nan=False)


def iter_jsonl(lines: Iterator[Line], ctx: ParseContext) -> Iterator[Batch]:
    """Batches of a JSON Lines file as it streams; bad lines are skipped and counted."""
    batcher = TimeBatcher(ctx)
    for number, text in lines:
        if text is None:
            ctx.lines_read += 1
            ctx.skip(number, "line_too_long", f"line is longer than {MAX_LINE_BYTES} bytes")
            continue
        if not text or text.isspace():
            continue
        ctx.lines_read += 1
        sample = _read_line(number, text, ctx)
        if sample is not None:
            yield from batcher.add(number, sample)
    yield from batcher.finish()


def _read_line(number: int, text: str, ctx: ParseContext) -> Sample | None:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        ctx.skip(number, "bad_json", f"not valid JSON ({exc.msg} at column {exc.colno})")
        return None
    except ValueError as exc:  # e.g. an integer too long to convert
        ctx.skip(number, "bad_json", f"not valid JSON ({exc})")
        return None
    except RecursionError:
        ctx.skip(number, "bad_json", "not valid JSON (nested too deeply)")
        return None
    if not isinstance(obj, dict):
        ctx.skip(number, "bad_json", "not a JSON object")
        return None
    try:
        return sample_from_object(obj, ctx)
    except BadValue as exc:
        ctx.skip(number, "bad_value", str(exc))
    except LineError as exc:
        ctx.skip(number, exc.reason, str(exc))
    return None


def _text(obj: dict[str, object], key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise LineError("bad_entity", f"{key!r} must be a string, not {str(value)[:40]!r}")
    return value


def sample_from_object(obj: dict[str, object], ctx: ParseContext) -> Sample:
    """One line's object as a Sample; LineError or BadValue says what is wrong with it."""
    values = _field_values(obj, ctx)
    timestamp = _timestamp(obj)
    gpu = _gpu(obj)
    model = _model(obj, ctx, gpu)
    uuid = _text(obj, "uuid")
    gpu_instance = _gpu_instance(obj)
    try:
        profile = profile_text(obj.get("gpu_instance_profile"))
    except ValueError as exc:
        raise LineError("bad_entity", str(exc)) from None
    sm_count = _sm_count(obj)

    attribution = None
    namespace, pod, container = _text(obj, "namespace"), _text(obj, "pod"), _text(obj, "container")
    if namespace is not None or pod is not None:
        attribution = ctx.attribution(namespace or "", pod or "", container or "")
    entity = ctx.entity(
        gpu,
        uuid,
        model,
        gpu_instance,
        profile if gpu_instance is not None else None,
        _text(obj, "node") or None,
        sm_count if gpu_instance is not None else None,
    )
    return Sample(
        timestamp=timestamp,
        entity=entity,
        values=values,
        attribution=attribution,
        hpc_job=_text(obj, "hpc_job"),
    )


def _field_values(obj: dict[str, object], ctx: ParseContext) -> dict[int, float | None]:
    """The line's field values: its `fields` object, then known field names at the top level."""
    raw_fields = obj.get("fields")
    if raw_fields is None:
        raw_fields = {}
    elif not isinstance(raw_fields, dict):
        raise LineError("bad_fields", f"'fields' must be an object, not {type(raw_fields).__name__}")
    values: dict[int, float | None] = {}
    for key, raw in raw_fields.items():
        column = ctx.column(key)
        if column is not None:
            _keep(values, column, raw)
    for key in obj.keys() - ENTITY_KEYS:  # field values at the top level, by a known name
        column = ctx.column(key)
        if column is None:
            raise LineError("unknown_key", f"unknown key {key[:40]!r}")
        _keep(values, column, obj[key])
    return values


def _timestamp(obj: dict[str, object]) -> float:
    """`ts`, else `timestamp`: required."""
    raw_ts = obj["ts"] if "ts" in obj else obj.get("timestamp")
    if raw_ts is None:
        raise LineError("bad_timestamp", "no 'ts' (timestamp)")
    try:
        return parse_timestamp(raw_ts)
    except ValueError as exc:
        raise LineError("bad_timestamp", str(exc)) from None


def _gpu(obj: dict[str, object]) -> int:
    """The GPU index: required."""
    if obj.get("gpu") is None:
        raise LineError("bad_gpu", "no 'gpu' index")
    try:
        return parse_index(obj["gpu"], "gpu")
    except ValueError as exc:
        raise LineError("bad_gpu", str(exc)) from None


def _model(obj: dict[str, object], ctx: ParseContext, gpu: int) -> str:
    """The line's `model`, else --model; a line with neither names the flag."""
    model = _text(obj, "model")
    if model is None:
        model = ctx.default_model
        if model is None:
            raise LineError(
                "no_model",
                f"line for GPU {gpu} has no 'model' and no --model was given; pass --model with "
                "the GPU's NVML name (e.g. 'NVIDIA H100 80GB HBM3')",
            )
    elif not model:
        raise LineError("bad_entity", "'model' must be a non-empty string")
    return model


def _gpu_instance(obj: dict[str, object]) -> int | None:
    """The MIG GPU-instance id, a JSON integer; None for a whole GPU."""
    raw_instance = obj.get("gpu_instance")
    if raw_instance is None:
        return None
    if isinstance(raw_instance, bool) or not isinstance(raw_instance, int):
        raise LineError(
            "bad_entity", f"'gpu_instance' must be a non-negative integer, not {str(raw_instance)[:20]!r}"
        )
    try:
        return parse_index(raw_instance, "gpu_instance")
    except ValueError as exc:
        raise LineError("bad_entity", str(exc)) from None


def _sm_count(obj: dict[str, object]) -> int | None:
    """The SMs a live source read for the instance, if the line has them."""
    sm_count = obj.get("gpu_instance_sm_count")
    if sm_count is not None and (
        isinstance(sm_count, bool) or not isinstance(sm_count, int) or not 0 < sm_count <= MAX_SM_COUNT
    ):
        raise LineError(
            "bad_entity",
            f"'gpu_instance_sm_count' must be an integer in 1..{MAX_SM_COUNT}, not {str(sm_count)[:20]!r}",
        )
    return sm_count


def _keep(values: dict[int, float | None], column: Column, raw: object) -> None:
    """Store one field; a second spelling of a field already present does not overwrite it
    unless the first was blank."""
    value = read_value(column, raw)
    if values.get(column.fid) is None:
        values[column.fid] = value
