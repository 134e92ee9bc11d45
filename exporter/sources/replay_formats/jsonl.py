"""Ridgeline's JSON Lines replay format: one sample per line, fields keyed by DCGM id or name.

    {"ts": 1764432000.0, "gpu": 0, "uuid": "GPU-8e5c...", "model": "NVIDIA H100 80GB HBM3",
     "gpu_instance": null, "fields": {"1005": 0.71, "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.93},
     "namespace": "llm", "pod": "decode-7f9", "container": "server"}

`ts` (or `timestamp`) and `gpu` are required; `uuid`, `model` (else --model), `gpu_instance`
and the pod labels are optional; null is a blank. This is also what `ridgeline record` writes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from exporter.fields import FP64_BLANK, RATIO_FIELDS
from exporter.sample import Sample
from exporter.sources.replay_formats.common import (
    BadValue,
    Batch,
    ParseContext,
    ReplayFormatError,
    clean_number,
    group_by_timestamp,
    parse_gpu_index,
    parse_timestamp,
)

ENTITY_KEYS = frozenset(
    {"ts", "timestamp", "gpu", "uuid", "model", "gpu_instance", "fields", "namespace", "pod", "container"}
)
"""Top-level keys a line may carry besides known field names."""

_CHUNK_LINES = 2048
"""Lines decoded per json.loads call: one call over many lines lets the C scanner reuse its key
strings, which about doubles decoding speed; a chunk with a corrupt line is redone line by line."""


def parse_jsonl(lines: Sequence[str], ctx: ParseContext) -> list[Batch]:
    """Parse every line; corrupt ones are skipped and counted (see ParseContext.skip)."""
    rows: list[tuple[float, Sample, int]] = []
    append = rows.append
    limits: dict[str, tuple[int, float] | None] = {}
    numbered = [(index + 1, line) for index, line in enumerate(lines) if line and not line.isspace()]
    ctx.lines_read += len(numbered)
    for start in range(0, len(numbered), _CHUNK_LINES):
        chunk = numbered[start : start + _CHUNK_LINES]
        for line_number, obj in _decode_chunk(chunk, ctx):
            if type(obj) is not dict:
                ctx.skip(line_number, "bad_json", "not a JSON object")
                continue
            try:
                sample = _sample_from_object(obj, ctx, limits)
            except (ValueError, TypeError) as exc:
                ctx.skip(line_number, _reason(exc), str(exc))
                continue
            append((sample.timestamp, sample, line_number))
    return group_by_timestamp(rows, ctx)


def _decode_chunk(chunk: list[tuple[int, str]], ctx: ParseContext) -> list[tuple[int, object]]:
    """JSON values of a chunk of lines, decoded together when every line is valid."""
    try:
        values = json.loads("[" + ",".join(line for _, line in chunk) + "]")
    except ValueError:
        values = None
    if type(values) is list and len(values) == len(chunk):
        return [(number, value) for (number, _), value in zip(chunk, values, strict=True)]
    # A corrupt line (or one holding two values, "1,2"): decode one by one to find it.
    decoded: list[tuple[int, object]] = []
    for line_number, line in chunk:
        try:
            decoded.append((line_number, json.loads(line)))
        except json.JSONDecodeError as exc:
            ctx.skip(line_number, "bad_json", f"not valid JSON ({exc.msg} at column {exc.colno})")
        except ValueError as exc:  # e.g. an integer too long to convert
            ctx.skip(line_number, "bad_json", f"not valid JSON ({exc})")
    return decoded


class _LineError(ValueError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _reason(exc: Exception) -> str:
    if isinstance(exc, _LineError):
        return exc.reason
    if isinstance(exc, BadValue):
        return "bad_value"
    return "bad_entity"


def _sample_from_object(
    obj: dict[str, object],
    ctx: ParseContext,
    limits: dict[str, tuple[int, float] | None],
) -> Sample:
    extra = None if ENTITY_KEYS.issuperset(obj) else obj.keys() - ENTITY_KEYS
    raw_fields = obj.get("fields")
    if raw_fields is None:
        raw_fields = {}
    elif type(raw_fields) is not dict:
        raise _LineError("bad_fields", f"'fields' must be an object, not {type(raw_fields).__name__}")
    if extra:
        # Field values at the top level are accepted when the key is a known field name.
        raw_fields = dict(raw_fields)
        for key in extra:
            if ctx.lookup_field(key) is None:
                raise _LineError("unknown_key", f"unknown key {key!r}")
            raw_fields[key] = obj[key]

    raw_ts = obj.get("ts")
    if raw_ts is None:
        raw_ts = obj.get("timestamp")
    if raw_ts is None:
        raise _LineError("bad_timestamp", "no 'ts' (timestamp)")
    kind = type(raw_ts)
    timestamp = float(raw_ts) if kind is float or kind is int else _timestamp(raw_ts)  # type: ignore[arg-type]
    if not -1e12 < timestamp < 1e12:  # also rejects NaN and infinities
        raise _LineError("bad_timestamp", f"timestamp {raw_ts!r} is out of range")

    raw_gpu = obj.get("gpu")
    if raw_gpu is None:
        raise _LineError("bad_gpu", "no 'gpu' index")
    if type(raw_gpu) is int and raw_gpu >= 0:
        gpu: int = raw_gpu
    else:
        try:
            gpu = parse_gpu_index(raw_gpu)
        except ValueError as exc:
            raise _LineError("bad_gpu", str(exc)) from None

    model = obj.get("model")
    if model is None:
        model = ctx.default_model
        if model is None:
            raise ReplayFormatError(
                f"{ctx.name}: line for GPU {gpu} has no 'model' and no --model was given; "
                "pass --model with the GPU's NVML name (e.g. 'NVIDIA H100 80GB HBM3')"
            )
    elif type(model) is not str or not model:
        raise _LineError("bad_entity", f"'model' must be a non-empty string, not {model!r}")

    uuid = obj.get("uuid")
    if uuid is not None and type(uuid) is not str:
        raise _LineError("bad_entity", f"'uuid' must be a string, not {uuid!r}")
    gpu_instance = obj.get("gpu_instance")
    if gpu_instance is not None and (type(gpu_instance) is not int or gpu_instance < 0):
        raise _LineError("bad_entity", f"'gpu_instance' must be a non-negative integer, not {gpu_instance!r}")

    values: dict[int, float | None] = {}
    for key, raw in raw_fields.items():
        try:
            limit = limits[key]
        except KeyError:
            limit = limits[key] = _limit(ctx.lookup_field(key))
        if limit is None:
            continue
        fid, upper = limit
        # Fast path for the common case (an in-range float); clean_number handles the rest.
        if type(raw) is float and 0.0 <= raw <= upper:
            values[fid] = raw
        else:
            values[fid] = clean_number(fid, raw)

    attribution = None
    namespace = obj.get("namespace")
    pod = obj.get("pod")
    if namespace is not None or pod is not None:
        container = obj.get("container")
        for label, text in (("namespace", namespace), ("pod", pod), ("container", container)):
            if text is not None and type(text) is not str:
                raise _LineError("bad_entity", f"{label!r} must be a string, not {text!r}")
        attribution = ctx.attribution(
            namespace or "",  # type: ignore[arg-type]
            pod or "",  # type: ignore[arg-type]
            container or "",  # type: ignore[arg-type]
        )
    entity = ctx.entity(gpu, uuid, model, gpu_instance)
    return Sample(timestamp, entity, values, attribution)


def _limit(fid: int | None) -> tuple[int, float] | None:
    """A field id and the largest value the fast path may keep as is (1 for ratios)."""
    if fid is None:
        return None
    return fid, (1.0 if fid in RATIO_FIELDS else math.nextafter(FP64_BLANK, 0.0))


def _timestamp(raw: object) -> float:
    try:
        return parse_timestamp(raw)
    except ValueError as exc:
        raise _LineError("bad_timestamp", str(exc)) from None
