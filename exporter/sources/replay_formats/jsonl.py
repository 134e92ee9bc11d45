"""Ridgeline's JSON Lines replay format: one sample per line, fields keyed by DCGM id or name.

    {"ts": 1764432000.0, "gpu": 0, "uuid": "GPU-8e5c...", "model": "NVIDIA H100 80GB HBM3",
     "gpu_instance": null, "fields": {"1005": 0.71, "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.93},
     "namespace": "llm", "pod": "decode-7f9", "container": "server"}

`ts` (or `timestamp`) and `gpu` are required; `uuid`, `model` (else --model), `gpu_instance`
and the pod labels are optional; null is a blank. This is also what `ridgeline record` writes.

Speed (docs/replay-formats.md, "Throughput"): lines are decoded with orjson when it is
installed, and a line of the usual shape (numeric ts, integer gpu, an entity and pod already
seen, a fields object) takes a fast path that reuses the entity, the pod and the key -> field id
mapping resolved for earlier lines. Any other line, and any line orjson refuses (NaN or
Infinity literals, lone surrogates), is decoded again with the standard library and read by
the general path, so every outcome (values, skips, messages) is the standard library's.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Sequence
from itertools import chain

from exporter.fields import FP64_BLANK, RATIO_FIELDS
from exporter.sample import Attribution, Entity, Sample
from exporter.sources.replay_formats.common import (
    BadValue,
    Batch,
    ParseContext,
    ReplayFormatError,
    clean_number,
    parse_gpu_index,
    parse_timestamp,
    regroup,
)

try:
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover - orjson is a runtime dependency; the stdlib still works
    _orjson_loads = None  # type: ignore[assignment]

ENTITY_KEYS = frozenset(
    {"ts", "timestamp", "gpu", "uuid", "model", "gpu_instance", "fields", "namespace", "pod", "container"}
)
"""Top-level keys a line may carry besides known field names."""

DECODER = "orjson" if _orjson_loads is not None else "json"
"""Which decoder reads lines first: "orjson" (fast) or "json" (the standard library). Outcomes
are the same either way; benchmarks/bench_replay.py flips it to compare the two."""

_CHUNK_LINES = 2048
"""Lines decoded per step. orjson decodes the chunk with one map() call; the standard library
decodes it as one array (one call lets its C scanner reuse key strings, about twice as fast).
A chunk with a line either refuses is redone line by line."""

_SKIPPED = object()
"""Stands in for a line that is not JSON at all (already counted and logged)."""

_Found = tuple[Entity, int]
"""A known entity and its batching slot (one slot per GPU index and GPU instance)."""


def sample_to_json(sample: Sample) -> str:
    """The one writer of a replay line: what `parse_jsonl` reads back as an equal Sample.

    Fields are keyed by DCGM id strings in id order and a blank is null; the pod labels appear
    only when attributed. `ridgeline record`, the demo-trace and scenario generators, the
    benchmarks and the tests all write lines with it. NaN or infinity raise ValueError (JSON has
    no such numbers; the recorder counts and skips that sample).
    """
    entity = sample.entity
    line: dict[str, object] = {
        "ts": sample.timestamp,
        "gpu": entity.gpu,
        "uuid": entity.uuid,
        "model": entity.model,
        "gpu_instance": entity.gpu_instance,
        "fields": {str(fid): value for fid, value in sorted(sample.values.items())},
    }
    if sample.attribution is not None:
        line["namespace"] = sample.attribution.namespace
        line["pod"] = sample.attribution.pod
        line["container"] = sample.attribution.container
    return json.dumps(line, separators=(",", ":"), allow_nan=False)


def parse_jsonl(lines: Sequence[str], ctx: ParseContext) -> list[Batch]:
    """Parse every line; corrupt ones are skipped and counted (see ParseContext.skip).

    Lines are grouped into batches as they are read: a new batch starts when the timestamp
    changes. A file out of time order, or with two lines for one GPU in a batch, is regrouped
    by timestamp at the end exactly as common.regroup does for every format.
    """
    texts = [line for line in lines if line and not line.isspace()]
    numbers: Sequence[int]
    if len(texts) == len(lines):
        numbers = range(1, len(lines) + 1)
    else:
        numbers = [index + 1 for index, line in enumerate(lines) if line and not line.isspace()]
    ctx.lines_read += len(texts)

    limits: dict[str, tuple[int, float] | None] = {}
    # Raw (gpu, uuid, model, gpu_instance) and (namespace, pod, container) as they appear in
    # the JSON -> what a line with them yields; filled from lines the general path accepted.
    entities: dict[tuple[object, ...], _Found] = {}
    attributions: dict[tuple[object, ...], Attribution] = {}
    slot_of: dict[tuple[int, int | None], int] = {}
    marks: list[int] = []  # per slot: the last batch it had a sample in

    batches: list[Batch] = []
    dropped: set[int] = set()  # where skipped lines are in texts (to regroup the others)
    current: list[Sample] = []
    current_ts = -math.inf
    batch_no = 0
    in_order = True
    entity_keys = ENTITY_KEYS
    lookup_field = ctx.lookup_field

    for start in range(0, len(texts), _CHUNK_LINES):
        end = start + _CHUNK_LINES
        decoded = _decode_chunk(texts[start:end], numbers[start:end], ctx)
        for offset, obj in enumerate(decoded, start):
            sample: Sample | None = None
            found: _Found | None = None
            # Fast path: a line of the usual shape whose entity and pod were seen before.
            if type(obj) is dict and obj.keys() <= entity_keys:
                raw_ts = obj.get("ts")
                if raw_ts is None:
                    raw_ts = obj.get("timestamp")
                if type(raw_ts) is int:
                    raw_ts = float(raw_ts)
                gpu = obj.get("gpu")
                instance = obj.get("gpu_instance")
                raw_fields = obj.get("fields")
                if (
                    type(raw_ts) is float
                    and -1e12 < raw_ts < 1e12
                    and type(gpu) is int
                    and (instance is None or type(instance) is int)
                    and type(raw_fields) is dict
                ):
                    attribution: Attribution | None = None
                    try:
                        found = entities.get((gpu, obj.get("uuid"), obj.get("model"), instance))
                        namespace = obj.get("namespace")
                        pod = obj.get("pod")
                        if namespace is not None or pod is not None:
                            attribution = attributions.get((namespace, pod, obj.get("container")))
                            if attribution is None:
                                found = None
                        if found is not None:
                            values = _clean_fields(raw_fields, limits, lookup_field)
                            sample = Sample(
                                timestamp=raw_ts, entity=found[0], values=values, attribution=attribution
                            )
                    except (TypeError, ValueError):  # an unhashable label or a bad value
                        sample = None
            if sample is None or found is None:
                # General path: the standard library's decoding and every check, in order.
                if obj is _SKIPPED:
                    dropped.add(offset)
                    continue
                number = numbers[offset]
                with contextlib.suppress(ValueError, RecursionError):  # else keep orjson's value
                    obj = json.loads(texts[offset])
                if type(obj) is not dict:
                    ctx.skip(number, "bad_json", "not a JSON object")
                    dropped.add(offset)
                    continue
                try:
                    sample = _sample_from_object(obj, ctx, limits)
                except (ValueError, TypeError) as exc:
                    ctx.skip(number, _reason(exc), str(exc))
                    dropped.add(offset)
                    continue
                found = _remember(obj, sample, entities, attributions, slot_of, marks)
            # Batching: consecutive lines with one timestamp form a batch.
            timestamp = sample.timestamp
            if timestamp != current_ts:
                if timestamp < current_ts:
                    in_order = False
                current_ts = timestamp
                batch_no += 1
                current = []
                batches.append((timestamp, current))
            slot = found[1]
            if marks[slot] == batch_no:
                in_order = False  # a second sample for this GPU in one batch
            marks[slot] = batch_no
            current.append(sample)
    if in_order:
        return batches
    samples = chain.from_iterable(samples for _, samples in batches)
    kept = (numbers[i] for i in range(len(texts)) if i not in dropped)
    return regroup([(s.timestamp, s, number) for s, number in zip(samples, kept, strict=True)], ctx)


def _decode_chunk(texts: list[str], numbers: Sequence[int], ctx: ParseContext) -> list[object]:
    """The JSON value of each line (_SKIPPED where a line is not JSON, counted and logged)."""
    if DECODER == "orjson" and _orjson_loads is not None:
        try:
            return list(map(_orjson_loads, texts))
        except ValueError:
            pass
        decoded: list[object] = []
        for text, number in zip(texts, numbers, strict=True):
            try:
                decoded.append(_orjson_loads(text))
            except ValueError:  # NaN/Infinity literals, lone surrogates, or not JSON at all
                decoded.append(_stdlib_decode(text, number, ctx))
        return decoded
    try:
        values = json.loads("[" + ",".join(texts) + "]")
    except (ValueError, RecursionError):
        values = None
    if type(values) is list and len(values) == len(texts):
        return values
    # A corrupt line (or one holding two values, "1,2"): decode one by one to find it.
    return [_stdlib_decode(text, number, ctx) for text, number in zip(texts, numbers, strict=True)]


def _stdlib_decode(text: str, number: int, ctx: ParseContext) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        ctx.skip(number, "bad_json", f"not valid JSON ({exc.msg} at column {exc.colno})")
    except ValueError as exc:  # e.g. an integer too long to convert
        ctx.skip(number, "bad_json", f"not valid JSON ({exc})")
    except RecursionError:
        ctx.skip(number, "bad_json", "not valid JSON (nested too deeply)")
    return _SKIPPED


def _remember(
    obj: dict[str, object],
    sample: Sample,
    entities: dict[tuple[object, ...], _Found],
    attributions: dict[tuple[object, ...], Attribution],
    slot_of: dict[tuple[int, int | None], int],
    marks: list[int],
) -> _Found:
    """Note what an accepted line's raw labels yield, so later lines like it take the fast path.

    Only integer gpu and gpu_instance values are keyed: 1.0 and True hash like 1, and the
    general path treats them differently.
    """
    entity = sample.entity
    key = (entity.gpu, entity.gpu_instance)
    slot = slot_of.get(key)
    if slot is None:
        slot = slot_of[key] = len(marks)
        marks.append(0)
    found = (entity, slot)
    gpu = obj.get("gpu")
    instance = obj.get("gpu_instance")
    if type(gpu) is int and (instance is None or type(instance) is int):
        entities[(gpu, obj.get("uuid"), obj.get("model"), instance)] = found
    namespace = obj.get("namespace")
    pod = obj.get("pod")
    if sample.attribution is not None and (namespace is not None or pod is not None):
        attributions[(namespace, pod, obj.get("container"))] = sample.attribution
    return found


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

    values = _clean_fields(raw_fields, limits, ctx.lookup_field)

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
    return Sample(timestamp=timestamp, entity=entity, values=values, attribution=attribution)


def _clean_fields(
    raw_fields: dict[str, object],
    limits: dict[str, tuple[int, float] | None],
    lookup_field: Callable[[str], int | None],
) -> dict[int, float | None]:
    """A 'fields' object as field id -> clean value; unknown names are ignored (warned once).

    Raises BadValue for a value that is neither a number nor a blank.
    """
    values: dict[int, float | None] = {}
    for key, raw in raw_fields.items():
        try:
            limit = limits[key]
        except KeyError:
            limit = limits[key] = _limit(lookup_field(key))
        if limit is None:
            continue
        fid, upper = limit
        # Fast path for the common case (an in-range float); clean_number handles the rest.
        if type(raw) is float and 0.0 <= raw <= upper:
            values[fid] = raw
        else:
            values[fid] = clean_number(fid, raw)
    return values


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
