"""DCGM's field-value records decoded many at a time, not one ctypes attribute at a time.

The callback keeps a copy of each record's first 32 bytes (`ENTITY_CALLBACK`); once the
enumeration is done, one memoryview over each entity's copies (`FIELD_VALUE_V1_HEADS`), or over
dcgmEntitiesGetLatestValues' array (`in_place`), is cast to each member's C type at DCGM's own
offsets, so one C call reads that member of every record. `layout_matches` checks the offsets
against the bindings' Structures; where they differ the source reads value by value. Why and
the offsets: docs/sources.md, "Reading the callback's records".
"""

from __future__ import annotations

import ctypes
import dataclasses
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exporter import fields

DOUBLE_KIND = ord("d")
"""DCGM_FT_DOUBLE (dcgm_fields.h), as the number the record's fieldType holds."""
INT64_KIND = ord("i")
"""DCGM_FT_INT64."""


@dataclass(frozen=True)
class RecordLayout:
    """Where the members Ridgeline reads lie in one record (byte offsets) and the record's size.

    The union `value` holds `i64` and `dbl` at its first byte; `str` and `blob` are never read.
    """

    name: str
    size: int
    field_id: int
    """unsigned short fieldId"""
    field_type: int
    """unsigned short fieldType (the Python bindings declare c_short: the same two bytes, and
    every DCGM_FT_* is an ASCII letter)"""
    status: int
    """int status: DCGM_ST_OK or the DCGM_ST_* that left this value out"""
    ts: int
    """int64_t ts, usec since 1970"""
    value: int
    entity_group: int | None = None
    """dcgm_field_entity_group_t entityGroupId (an enum: 4 bytes), v2 only"""
    entity_id: int | None = None
    """dcgm_field_eid_t entityId (unsigned int), v2 only"""


FIELD_VALUE_V1 = RecordLayout(
    name="dcgmFieldValue_v1", size=4120, field_id=4, field_type=6, status=8, ts=16, value=24
)
"""unsigned int version (0); fieldId (4), fieldType (6); status (8); 4 bytes of padding so ts is
8-aligned (16); the union (24), DCGM_MAX_BLOB_LENGTH = 4096 bytes: 24 + 4096 = 4120."""
FIELD_VALUE_V2 = RecordLayout(
    name="dcgmFieldValue_v2",
    size=4128,
    entity_group=4,
    entity_id=8,
    field_id=12,
    field_type=14,
    status=16,
    ts=24,
    value=32,
)
"""version (0), entityGroupId (4), entityId (8), fieldId (12), fieldType (14), status (16), unsigned
int unused (20, "to align ts to an 8-byte boundary"), ts (24), the union (32): 32 + 4096 = 4128."""

_MEMBERS = (
    ("fieldId", "field_id", 2),
    ("fieldType", "field_type", 2),
    ("status", "status", 4),
    ("ts", "ts", 8),
    ("entityGroupId", "entity_group", 4),
    ("entityId", "entity_id", 4),
)
"""(the ctypes member, the RecordLayout attribute, its C size in bytes)."""


_CHECKED: dict[tuple[RecordLayout, object], bool] = {}


def layout_matches(layout: RecordLayout, structure: object) -> bool:
    """Whether a ctypes Structure class (the bindings' c_dcgmFieldValue_v1 or _v2) lays a record
    out as `layout` says: its size, each member's offset and size, the union's i64 and dbl at 0.
    Checked once per class (each read asks)."""
    known = _CHECKED.get((layout, structure))
    if known is None:
        known = _CHECKED[(layout, structure)] = _matches(layout, structure)
    return known


def _matches(layout: RecordLayout, structure: Any) -> bool:
    try:
        if ctypes.sizeof(structure) != layout.size:
            return False
        for member, attribute, size in _MEMBERS:
            offset = getattr(layout, attribute)
            if offset is None:
                continue
            described = getattr(structure, member)
            if (described.offset, described.size) != (offset, size):
                return False
        value = structure.value
        union = dict(structure._fields_)["value"]
        return bool(
            value.offset == layout.value
            and (union.i64.offset, union.i64.size, union.dbl.offset, union.dbl.size) == (0, 8, 0, 8)
        )
    except (AttributeError, KeyError, TypeError):
        return False


@dataclass
class Columns:
    """Decoded records, one list per member, in the order DCGM handed them over."""

    ts: list[int]
    field_ids: list[int]
    values: list[float | None]
    entity_groups: list[int] | None = None
    entity_ids: list[int] | None = None

    def extend(self, more: Columns) -> None:
        """Append another callback's records of the same entity (DCGM may split them)."""
        self.ts.extend(more.ts)
        self.field_ids.extend(more.field_ids)
        self.values.extend(more.values)


def kind_code(kind: object) -> int:
    """A DCGM_FT_* constant ('d', b'd' or 100) as the number a record holds."""
    if isinstance(kind, int):
        return kind
    if isinstance(kind, bytes):
        return kind[0]
    return ord(str(kind)[0])


def in_place(address: int, count: int, layout: RecordLayout) -> memoryview:
    """`count` records of `layout` at `address` as bytes, not copied (valid while they are)."""
    if count <= 0 or not address:
        return memoryview(b"")
    return memoryview((ctypes.c_char * (count * layout.size)).from_address(address)).cast("B")


def heads_layout(layout: RecordLayout) -> RecordLayout:
    """`layout` cut after the union's first 8 bytes (every member Ridgeline reads), as
    `record_heads` packs records: the same offsets, a record every value + 8 bytes."""
    return dataclasses.replace(
        layout, name=f"{layout.name}, first {layout.value + 8} bytes", size=layout.value + 8
    )


FIELD_VALUE_V1_HEADS = heads_layout(FIELD_VALUE_V1)
"""dcgmFieldValue_v1 as `record_heads` packs it: 32 bytes a record."""


HEADS = ctypes.POINTER(ctypes.c_char * FIELD_VALUE_V1_HEADS.size)
"""What a callback's `values` is declared as here: a pointer to the first record's first 32 bytes,
so one value reads as `values.contents.raw` (one copy, no ctypes Structure)."""
ENTITY_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int32, ctypes.c_uint32, ctypes.c_uint32, HEADS, ctypes.c_int32, ctypes.c_void_p
)
"""dcgmFieldValueEntityEnumeration_f as the C library calls it (int (unsigned int entityGroupId,
unsigned int entityId, dcgmFieldValue_v1 *values, int numValues, void *userData)), with `values`
as HEADS rather than the bindings' POINTER(c_dcgmFieldValue_v1): the same pointer to C, and
libdcgm calls it through a C function pointer (the bindings' dcgmGetValuesSince_v2 passes it on
unchecked)."""


def record_heads(address: int, count: int, layout: RecordLayout = FIELD_VALUE_V1) -> bytes:
    """A copy of the first value + 8 bytes of each of `count` records at `address`, packed: what a
    callback handed several records keeps (DCGM reuses its buffer once a callback returns)."""
    view = in_place(address, count, layout)
    return b"".join(part for (part,) in _splitter(layout).iter_unpack(view))


_SPLITTERS: dict[RecordLayout, struct.Struct] = {}


def _splitter(layout: RecordLayout) -> struct.Struct:
    """A record as (its first value + 8 bytes, the rest skipped)."""
    splitter = _SPLITTERS.get(layout)
    if splitter is None:
        head = layout.value + 8
        splitter = _SPLITTERS[layout] = struct.Struct(f"{head}s{layout.size - head}x")
    return splitter


def decode(records: memoryview, layout: RecordLayout, double: int, int64: int) -> Columns:
    """Every record of `layout` in `records` (bytes, a whole number of records), one list per
    member. `double` and `int64` are the bindings' DCGM_FT_DOUBLE and DCGM_FT_INT64 codes."""
    raw = records.cast("B") if records.format != "B" else records
    if not len(raw):
        return Columns(ts=[], field_ids=[], values=[])
    shorts, ints, longs = raw.cast("H"), raw.cast("i"), raw.cast("q")
    size = layout.size  # each view's step is one record; its start, the member's offset
    field_ids = shorts[layout.field_id // 2 :: size // 2].tolist()
    columns = Columns(
        ts=longs[layout.ts // 8 :: size // 8].tolist(),
        field_ids=field_ids,
        values=clean_values(
            field_ids,
            shorts[layout.field_type // 2 :: size // 2].tolist(),
            ints[layout.status // 4 :: size // 4].tolist(),
            raw.cast("d")[layout.value // 8 :: size // 8].tolist(),
            longs[layout.value // 8 :: size // 8].tolist(),
            double,
            int64,
        ),
    )
    if layout.entity_group is not None and layout.entity_id is not None:
        columns.entity_groups = ints[layout.entity_group // 4 :: size // 4].tolist()
        columns.entity_ids = ints[layout.entity_id // 4 :: size // 4].tolist()
    return columns


_BLANK = fields.FP64_BLANK
_RATIOS = fields.RATIO_FIELDS


def clean_values(
    field_ids: Sequence[int],
    kinds: Sequence[int],
    statuses: Sequence[int],
    doubles: Sequence[float],
    longs: Sequence[int],
    double: int,
    int64: int,
) -> list[float | None]:
    """Each record's value as `DcgmSource._value` reads one: None for a failed status, a type
    other than double or int64, a blank or anything else `fields.clean_value` refuses.

    A number clean_value would keep unchanged (in [0, 1], or in [0, blank) on a field that is no
    ratio) is taken as it is; anything else (NaN, blanks, negatives, ratios to clamp or drop)
    goes through clean_value itself."""
    clean = fields.clean_value
    return [
        (d if 0.0 <= d <= 1.0 or (0.0 <= d < _BLANK and f not in _RATIOS) else clean(f, d))
        if k == double and not s
        else (x if 0.0 <= (x := float(i)) <= 1.0 or (0.0 <= x < _BLANK and f not in _RATIOS) else clean(f, i))
        if k == int64 and not s
        else None
        for f, k, s, d, i in zip(field_ids, kinds, statuses, doubles, longs, strict=True)
    ]
