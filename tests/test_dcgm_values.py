"""DCGM's field-value records decoded a buffer at a time (exporter/sources/dcgm_values.py).

The layout Ridgeline reads the buffer with is checked against dcgm_structs.h's declarations (as
ctypes types), against NVIDIA's Python bindings' Structures (testing/python3/dcgm_structs.py, as
DCGM 3 and 4 ship them) and against the fake's; every decoded value is checked against the
record-by-record read it replaces (`DcgmSource._value`), and the tick splitting against
`values_as_ticks`.
"""

from __future__ import annotations

import ctypes
import importlib.util
import math
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter import fields
from exporter.sources import dcgm
from exporter.sources.base import SourceOptions
from exporter.sources.dcgm import DcgmSettings, DcgmSource, columns_as_ticks, values_as_ticks
from exporter.sources.dcgm_bindings import load_bindings
from exporter.sources.dcgm_values import (
    FIELD_VALUE_V1,
    FIELD_VALUE_V1_HEADS,
    FIELD_VALUE_V2,
    Columns,
    decode,
    in_place,
    layout_matches,
    record_heads,
)

FAKE_DIR = Path(__file__).parent / "fakes" / "dcgm"
FAKE_MODULES = ("pydcgm", "dcgm_agent", "dcgm_structs", "dcgm_fields", "dcgmvalue", "_fake_dcgm_engine")
START = 1_764_633_600_000_000
TICK = 100_000


@pytest.fixture
def fake() -> Iterator[ModuleType]:
    for name in FAKE_MODULES:
        sys.modules.pop(name, None)
    spec = importlib.util.spec_from_file_location("_fake_dcgm_engine", FAKE_DIR / "_fake_dcgm_engine.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_fake_dcgm_engine"] = module
    spec.loader.exec_module(module)
    module.reset()
    yield module
    for name in FAKE_MODULES:
        sys.modules.pop(name, None)
    while str(FAKE_DIR) in sys.path:
        sys.path.remove(str(FAKE_DIR))


# -- the layout --------------------------------------------------------------------------------

MAX_STR, MAX_BLOB = 256, 4096
"""DCGM_MAX_STR_LENGTH, DCGM_MAX_BLOB_LENGTH (dcgm_structs.h)."""


class HeaderValue(ctypes.Union):
    """dcgm_structs.h's union: int64_t i64; double dbl; char str[256]; char blob[4096]."""

    _fields_ = (
        ("i64", ctypes.c_int64),
        ("dbl", ctypes.c_double),
        ("str", ctypes.c_char * MAX_STR),
        ("blob", ctypes.c_char * MAX_BLOB),
    )


class HeaderV1(ctypes.Structure):
    """dcgm_structs.h's dcgmFieldValue_v1, member for member, in C types."""

    _fields_ = (
        ("version", ctypes.c_uint),
        ("fieldId", ctypes.c_ushort),
        ("fieldType", ctypes.c_ushort),
        ("status", ctypes.c_int),
        ("ts", ctypes.c_int64),
        ("value", HeaderValue),
    )


class HeaderV2(ctypes.Structure):
    """dcgmFieldValue_v2: entityGroupId is an enum (int-sized), entityId a dcgm_field_eid_t
    (unsigned int), and `unused` aligns ts to 8 bytes."""

    _fields_ = (
        ("version", ctypes.c_uint),
        ("entityGroupId", ctypes.c_int),
        ("entityId", ctypes.c_uint),
        ("fieldId", ctypes.c_ushort),
        ("fieldType", ctypes.c_ushort),
        ("status", ctypes.c_int),
        ("unused", ctypes.c_uint),
        ("ts", ctypes.c_int64),
        ("value", HeaderValue),
    )


class BindingsValue(ctypes.Union):
    """NVIDIA's bindings: blob as c_byte, not c_char."""

    _fields_ = (
        ("i64", ctypes.c_int64),
        ("dbl", ctypes.c_double),
        ("str", ctypes.c_char * MAX_STR),
        ("blob", ctypes.c_byte * MAX_BLOB),
    )


class BindingsV1(ctypes.Structure):
    """NVIDIA's c_dcgmFieldValue_v1 (fieldType declared c_short)."""

    _fields_ = (
        ("version", ctypes.c_uint),
        ("fieldId", ctypes.c_ushort),
        ("fieldType", ctypes.c_short),
        ("status", ctypes.c_int),
        ("ts", ctypes.c_int64),
        ("value", BindingsValue),
    )


class BindingsV2(ctypes.Structure):
    """NVIDIA's c_dcgmFieldValue_v2."""

    _fields_ = (
        ("version", ctypes.c_uint),
        ("entityGroupId", ctypes.c_uint),
        ("entityId", ctypes.c_uint),
        ("fieldId", ctypes.c_ushort),
        ("fieldType", ctypes.c_short),
        ("status", ctypes.c_int),
        ("unused", ctypes.c_uint),
        ("ts", ctypes.c_int64),
        ("value", BindingsValue),
    )


def _offsets(structure: Any) -> dict[str, tuple[int, int]]:
    return {
        name: (getattr(structure, name).offset, getattr(structure, name).size)
        for name, _ in structure._fields_
    }


def test_the_v1_layout_is_dcgm_structs_h_and_the_bindings(fake: ModuleType) -> None:
    bindings = load_bindings(FAKE_DIR)
    expected = {
        "version": (0, 4),
        "fieldId": (FIELD_VALUE_V1.field_id, 2),
        "fieldType": (FIELD_VALUE_V1.field_type, 2),
        "status": (FIELD_VALUE_V1.status, 4),
        "ts": (FIELD_VALUE_V1.ts, 8),
        "value": (FIELD_VALUE_V1.value, MAX_BLOB),
    }
    for structure in (HeaderV1, BindingsV1, bindings.dcgm_structs.c_dcgmFieldValue_v1):
        assert ctypes.sizeof(structure) == FIELD_VALUE_V1.size == 4120
        assert _offsets(structure) == expected
        assert layout_matches(FIELD_VALUE_V1, structure)


def test_the_v2_layout_is_dcgm_structs_h_and_the_bindings(fake: ModuleType) -> None:
    bindings = load_bindings(FAKE_DIR)
    assert FIELD_VALUE_V2.entity_group is not None and FIELD_VALUE_V2.entity_id is not None
    expected = {
        "version": (0, 4),
        "entityGroupId": (FIELD_VALUE_V2.entity_group, 4),
        "entityId": (FIELD_VALUE_V2.entity_id, 4),
        "fieldId": (FIELD_VALUE_V2.field_id, 2),
        "fieldType": (FIELD_VALUE_V2.field_type, 2),
        "status": (FIELD_VALUE_V2.status, 4),
        "unused": (20, 4),
        "ts": (FIELD_VALUE_V2.ts, 8),
        "value": (FIELD_VALUE_V2.value, MAX_BLOB),
    }
    for structure in (HeaderV2, BindingsV2, bindings.dcgm_structs.c_dcgmFieldValue_v2):
        assert ctypes.sizeof(structure) == FIELD_VALUE_V2.size == 4128
        assert _offsets(structure) == expected
        assert layout_matches(FIELD_VALUE_V2, structure)


def test_a_structure_laid_out_otherwise_does_not_match() -> None:
    class WideType(ctypes.Structure):  # fieldType as an int: status and ts would move
        _fields_ = (
            ("version", ctypes.c_uint),
            ("fieldId", ctypes.c_ushort),
            ("fieldType", ctypes.c_int),
            ("status", ctypes.c_int),
            ("ts", ctypes.c_int64),
            ("value", HeaderValue),
        )

    class Packed(ctypes.Structure):  # no padding before ts: the same members, 4 bytes earlier
        _pack_ = 4
        _fields_ = HeaderV1._fields_

    class NoDouble(ctypes.Structure):  # a union without dbl
        _fields_ = (*HeaderV1._fields_[:-1], ("value", ctypes.c_char * MAX_BLOB))

    class Shorter(ctypes.Union):
        _fields_ = (("i64", ctypes.c_int64), ("dbl", ctypes.c_double), ("blob", ctypes.c_char * 4088))

    class ShiftedValue(ctypes.Structure):  # the same size, the union 8 bytes later
        _fields_ = (*HeaderV1._fields_[:-1], ("spare", ctypes.c_int64), ("value", Shorter))

    assert ctypes.sizeof(ShiftedValue) == FIELD_VALUE_V1.size
    for structure in (WideType, Packed, NoDouble, ShiftedValue, HeaderV2):
        assert not layout_matches(FIELD_VALUE_V1, structure)
    assert not layout_matches(FIELD_VALUE_V2, HeaderV1)


# -- the values --------------------------------------------------------------------------------

DOUBLE, INT64, STRING, BINARY = (ord(kind) for kind in "disb")
RATIO = fields.DRAM_ACTIVE
NOT_RATIO = fields.POWER_USAGE
SPECIAL_DOUBLES = (
    0.0,
    -0.0,
    0.5,
    1.0,
    1.02,
    1.05,
    1.0500001,
    -0.25,
    7.5e9,
    math.nan,
    math.inf,
    -math.inf,
    fields.FP64_BLANK,
    fields.FP64_BLANK + 1.0,
    fields.FP64_BLANK + 3.0,
    math.nextafter(fields.FP64_BLANK, 0.0),
)
SPECIAL_INTS = (
    0,
    1,
    1755,
    -5,
    fields.INT32_BLANK,
    fields.INT64_BLANK,
    fields.INT64_BLANK + 2,
    int(fields.FP64_BLANK),  # as a number this is DCGM_FP64_BLANK: clean_value reads it as blank
    2**63 - 1,
    -(2**63),
)


def _records(rows: list[tuple[int, int, int, int, float | None, int | None]]) -> Any:
    """(field id, fieldType, status, ts, double or None, int64 or None) as a v1 array."""
    array = (HeaderV1 * len(rows))()
    for record, (field_id, kind, status, ts, double, long) in zip(array, rows, strict=True):
        record.version, record.fieldId, record.fieldType = 1, field_id, kind
        record.status, record.ts = status, ts
        if double is not None:
            record.value.dbl = double
        if long is not None:
            record.value.i64 = long
    return array


def _same(left: list[float | None], right: list[float | None]) -> bool:
    """Equal, bit for bit (so -0.0 is not 0.0), None where None."""
    return [None if v is None else struct.pack("<d", v) for v in left] == [
        None if v is None else struct.pack("<d", v) for v in right
    ]


@pytest.fixture
def source(fake: ModuleType) -> DcgmSource:
    """A source with the fake bindings loaded, for its record-by-record `_value`."""
    opened = DcgmSource(SourceOptions(), DcgmSettings(bindings=FAKE_DIR))
    opened._bindings = load_bindings(FAKE_DIR)
    return opened


def test_every_special_value_decodes_as_the_record_by_record_read(source: DcgmSource) -> None:
    rows: list[tuple[int, int, int, int, float | None, int | None]] = []
    for field_id in (RATIO, NOT_RATIO, fields.SM_CLOCK):
        rows += [(field_id, DOUBLE, 0, START, d, None) for d in SPECIAL_DOUBLES]
        rows += [(field_id, INT64, 0, START, None, i) for i in SPECIAL_INTS]
        rows += [(field_id, DOUBLE, status, START, 0.5, None) for status in (-15, -6, -18, 1)]
        rows += [(field_id, INT64, -15, START, None, 1755)]
        rows += [(field_id, kind, 0, START, 0.5, None) for kind in (STRING, BINARY, 0)]
    array = _records(rows)
    decoded = decode(
        in_place(ctypes.addressof(array), len(array), FIELD_VALUE_V1), FIELD_VALUE_V1, DOUBLE, INT64
    )
    expected = [source._value(record) for record in array]
    assert _same(decoded.values, expected)
    assert decoded.field_ids == [row[0] for row in rows]
    assert decoded.ts == [START] * len(rows)
    assert decoded.values[:3] == [0.0, -0.0, 0.5] and decoded.values[4] == 1.0  # 1.02 clamped
    assert all(v is None for v in decoded.values[len(SPECIAL_DOUBLES) + len(SPECIAL_INTS) :][:5])  # statuses


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from((RATIO, NOT_RATIO, fields.SM_CLOCK, fields.PIPE_TENSOR_ACTIVE, 9999)),
            st.sampled_from((DOUBLE, INT64, STRING)),
            st.sampled_from((0, 0, 0, -15, -6)),
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(SPECIAL_DOUBLES),
            st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.sampled_from(SPECIAL_INTS),
        ),
        max_size=60,
    )
)
def test_any_records_decode_as_the_record_by_record_read(
    source: DcgmSource, rows: list[tuple[int, int, int, int, float, int]]
) -> None:
    """Each row sets dbl or i64 as its type says (a union: one of them)."""
    array = _records(
        [(f, k, s, ts, d if k != INT64 else None, i if k == INT64 else None) for f, k, s, ts, d, i in rows]
    )
    decoded = decode(
        in_place(ctypes.addressof(array), len(array), FIELD_VALUE_V1), FIELD_VALUE_V1, DOUBLE, INT64
    )
    assert _same(decoded.values, [source._value(record) for record in array])
    packed = b"".join(record_heads(ctypes.addressof(record), 1) for record in array)
    assert packed == record_heads(ctypes.addressof(array), len(array)) or not len(array)
    assert decode(memoryview(packed), FIELD_VALUE_V1_HEADS, DOUBLE, INT64) == decoded
    assert decoded.ts == [row[3] for row in rows]
    assert decoded.field_ids == [row[0] for row in rows]


def test_v2_records_carry_their_entity(source: DcgmSource) -> None:
    array = (HeaderV2 * 3)()
    for index, record in enumerate(array):
        record.entityGroupId, record.entityId = (1, 4, 4)[index], (0, 7, 13)[index]
        record.fieldId, record.fieldType, record.ts = RATIO, DOUBLE, START + index
        record.value.dbl = index / 4
    decoded = decode(in_place(ctypes.addressof(array), 3, FIELD_VALUE_V2), FIELD_VALUE_V2, DOUBLE, INT64)
    assert decoded.entity_groups == [1, 4, 4]
    assert decoded.entity_ids == [0, 7, 13]
    assert decoded.ts == [START, START + 1, START + 2]
    assert decoded.values == [0.0, 0.25, 0.5]


def test_no_records_decode_as_empty_columns() -> None:
    assert decode(in_place(0, 0, FIELD_VALUE_V1), FIELD_VALUE_V1, DOUBLE, INT64) == Columns([], [], [])
    assert decode(memoryview(b""), FIELD_VALUE_V1_HEADS, DOUBLE, INT64) == Columns([], [], [])


def test_record_heads_keep_what_is_read_and_drop_the_blob() -> None:
    """A callback copies each record's first 32 bytes (DCGM reuses its record after the call);
    decoding the copies reads what decoding the records in place reads."""
    assert FIELD_VALUE_V1_HEADS.size == 32 == FIELD_VALUE_V1.value + 8
    assert (
        FIELD_VALUE_V1_HEADS.ts == FIELD_VALUE_V1.ts and FIELD_VALUE_V1_HEADS.status == FIELD_VALUE_V1.status
    )
    rows = [(RATIO, DOUBLE, 0, START + i, i / 10, None) for i in range(5)]
    rows += [(fields.SM_CLOCK, INT64, 0, START + 9, None, 1755), (RATIO, DOUBLE, -15, START + 10, 0.5, None)]
    array = _records(rows)
    ctypes.memset(ctypes.addressof(array[0].value) + 8, 0x7F, 64)  # the blob past the 8 bytes read
    one = record_heads(ctypes.addressof(array), 1)
    assert len(one) == 32 and one == bytes(array)[:32]
    packed = record_heads(ctypes.addressof(array), len(array))
    assert len(packed) == 32 * len(array)
    whole = decode(
        in_place(ctypes.addressof(array), len(array), FIELD_VALUE_V1), FIELD_VALUE_V1, DOUBLE, INT64
    )
    assert decode(memoryview(packed), FIELD_VALUE_V1_HEADS, DOUBLE, INT64) == whole
    assert whole.values == [0.0, 0.1, 0.2, 0.3, 0.4, 1755.0, None]


# -- ticks -------------------------------------------------------------------------------------


def _ticks_both_ways(rows: list[tuple[int, int, float | None]]) -> None:
    columns = Columns(ts=[r[0] for r in rows], field_ids=[r[1] for r in rows], values=[r[2] for r in rows])
    assert columns_as_ticks(columns) == values_as_ticks(rows)


def _regular(ticks: int, fields_: tuple[int, ...], step: int = 3) -> list[tuple[int, int, float | None]]:
    return [
        (START + tick * TICK + position * step, field_id, tick + position / 100)
        for tick in range(ticks)
        for position, field_id in enumerate(fields_)
    ]


def test_regular_ticks_split_as_values_as_ticks_does() -> None:
    rows = _regular(10, dcgm.WATCHED_FIELDS)
    _ticks_both_ways(rows)
    ticks = columns_as_ticks(Columns([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]))
    assert len(ticks) == 10 and all(len(values) == len(dcgm.WATCHED_FIELDS) for _stamp, values in ticks)
    assert ticks[3][0] == START + 3 * TICK + (len(dcgm.WATCHED_FIELDS) - 1) * 3


@pytest.mark.parametrize(
    "shape",
    [
        "field_major",
        "field_major_equal_stamps",
        "field_major_one_late_stamp",
        "partial_last_tick",
        "tail_with_a_new_field",
        "a_tick_lacks_a_field",
        "a_tick_adds_a_field",
        "unstamped",
        "one_value",
        "equal_stamps",
        "reordered_tick",
    ],
)
def test_irregular_ticks_split_as_values_as_ticks_does(shape: str) -> None:
    three = (1001, 1004, 1005)
    rows = _regular(4, three)
    if shape == "field_major":
        rows.sort(key=lambda row: three.index(row[1]))
    elif shape == "field_major_equal_stamps":  # a stable sort keeps these in the order given
        rows = sorted(
            ((START + (ts - START) // TICK, f, v) for ts, f, v in rows), key=lambda r: three.index(r[1])
        )
    elif shape == "field_major_one_late_stamp":
        rows.sort(key=lambda row: three.index(row[1]))
        rows[1] = (rows[1][0] + 2 * TICK, rows[1][1], rows[1][2])
    elif shape == "partial_last_tick":
        rows = rows[:-1]
    elif shape == "tail_with_a_new_field":
        rows.append((START + 9 * TICK, 100, 1755.0))
    elif shape == "a_tick_lacks_a_field":
        del rows[4]
    elif shape == "a_tick_adds_a_field":
        rows.insert(5, (rows[4][0] + 1, 100, 1755.0))
    elif shape == "unstamped":
        rows[2] = (0, rows[2][1], rows[2][2])
    elif shape == "one_value":
        rows = rows[:1]
    elif shape == "equal_stamps":
        rows = [(START, f, v) for _ts, f, v in rows]
    elif shape == "reordered_tick":
        rows[3], rows[4] = (rows[3][0], rows[4][1], rows[4][2]), (rows[4][0], rows[3][1], rows[3][2])
    _ticks_both_ways(rows)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=12),
            st.sampled_from((1001, 1004, 1005, 100)),
            st.none() | st.floats(allow_nan=False, min_value=0, max_value=1),
        ),
        max_size=40,
    )
)
def test_any_records_split_as_values_as_ticks_does(rows: list[tuple[int, int, float | None]]) -> None:
    _ticks_both_ways(rows)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=6), st.integers(min_value=0, max_value=2), st.randoms())
def test_regular_ticks_in_any_order_split_as_values_as_ticks_does(ticks: int, cut: int, rnd: Any) -> None:
    rows = _regular(ticks, (1001, 1004, 1005, 100))
    rows = rows[: len(rows) - cut]
    rnd.shuffle(rows)
    _ticks_both_ways(rows)


# -- the source, through the fake ----------------------------------------------------------------


def _two_h100(fake: ModuleType) -> Any:
    engine = fake.ENGINE
    busy = {f: 0.5 for f in dcgm.WATCHED_FIELDS} | {fields.SM_CLOCK: 1755, fields.GPU_UTIL: 100}
    engine.gpus = [
        fake.FakeGpu(
            0, "GPU-8e5c3a1f-2d4b-6c7e-9f01-23456789abcd", "NVIDIA H100 80GB HBM3", values=dict(busy)
        ),
        fake.FakeGpu(
            1, "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901", "NVIDIA H100 80GB HBM3", values=dict(busy)
        ),
    ]
    return engine


def _read(fake: ModuleType, **engine: Any) -> list[Any]:
    """read_since over three ticks of two GPUs; GPU 1 has a blank, a ratio to clamp and a stale value."""
    fake.reset()
    configured = _two_h100(fake)
    for name, value in engine.items():
        setattr(configured, name, value)
    configured.gpus[1].values[fields.DRAM_ACTIVE] = None
    configured.gpus[1].values[fields.SM_ACTIVE] = 1.03
    configured.statuses[(1, 1, fields.PIPE_TENSOR_ACTIVE)] = -15  # DCGM_ST_STALE_DATA
    source = DcgmSource(SourceOptions(), DcgmSettings(bindings=FAKE_DIR))
    source.open()
    for tick in range(3):
        configured.collect(START + tick * TICK)
    samples = source.read_since()
    source.close()
    return samples


def test_stale_values_blanks_and_clamps_read_as_before(fake: ModuleType) -> None:
    samples = _read(fake)
    assert len(samples) == 6
    gpu1 = [s for s in samples if s.entity.gpu == 1]
    assert all(s.values[fields.PIPE_TENSOR_ACTIVE] is None for s in gpu1)  # status -15
    assert all(s.values[fields.DRAM_ACTIVE] is None for s in gpu1)  # DCGM_FP64_BLANK
    assert all(s.values[fields.SM_ACTIVE] == 1.0 for s in gpu1)
    gpu0 = [s for s in samples if s.entity.gpu == 0]
    assert all(s.values[fields.PIPE_TENSOR_ACTIVE] == 0.5 and s.values[fields.SM_CLOCK] == 1755 for s in gpu0)


def test_latest_values_decode_statuses_too(fake: ModuleType) -> None:
    engine = _two_h100(fake)
    engine.statuses[(1, 0, fields.DRAM_ACTIVE)] = -18  # DCGM_ST_GPU_IS_LOST
    source = DcgmSource(SourceOptions(), DcgmSettings(bindings=FAKE_DIR))
    source.open()
    samples = {s.entity.gpu: s for s in source.read()}
    source.close()
    assert samples[0].values[fields.DRAM_ACTIVE] is None
    assert samples[1].values[fields.DRAM_ACTIVE] == 0.5
    assert samples[0].values[fields.SM_CLOCK] == 1755


@pytest.mark.parametrize(
    "engine",
    [
        {"callback_values": None, "field_major": False},  # one array an entity, tick by tick
        {"callback_values": None},
        {"callback_values": 7},
        {"field_major": False},
    ],
)
def test_values_in_one_array_or_tick_by_tick_read_as_dcgm_hands_them(fake: ModuleType, engine: Any) -> None:
    """The fake's default is DCGM's: one value a callback, field by field, into one reused record."""
    assert fake.Engine().callback_values == 1 and fake.Engine().field_major
    assert _read(fake, **engine) == _read(fake)


def test_bindings_with_another_layout_are_read_record_by_record(
    fake: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bindings release whose Structures differ from dcgm_structs.h's layout is never read
    through the memoryview: the ctypes Structure reads it, as before."""
    whole = _read(fake)
    decoded: list[int] = []
    real_decode = dcgm.decode

    def counting(*args: Any) -> Any:
        decoded.append(1)
        return real_decode(*args)

    monkeypatch.setattr(dcgm, "decode", counting)
    assert _read(fake) == whole and decoded
    decoded.clear()
    monkeypatch.setattr(dcgm, "layout_matches", lambda layout, structure: False)
    assert _read(fake) == whole
    assert not decoded
    fake.reset()
    engine = _two_h100(fake)
    engine.statuses[(1, 0, fields.DRAM_ACTIVE)] = -18
    source = DcgmSource(SourceOptions(), DcgmSettings(bindings=FAKE_DIR))
    source.open()
    latest = {s.entity.gpu: s for s in source.read()}
    source.close()
    assert latest[0].values[fields.DRAM_ACTIVE] is None and latest[1].values[fields.SM_CLOCK] == 1755
    assert not decoded
