"""CSV replay files (RFC 4180): a header row naming the columns, then one sample per record.

Entity columns: timestamp (or ts, time), gpu, uuid, model, gpu_instance, gpu_instance_profile,
namespace, pod, container, node (or hostname: a multi-node trace). Every other column is a
field, named by DCGM id ("1005"), DCGM name (DCGM_FI_PROF_DRAM_ACTIVE) or dmon tag (DRAMA);
unknown columns are ignored with one warning.
An empty cell or N/A is a blank. Records are read by the standard library's csv module, so a
quoted cell may hold commas, doubled quotes and line breaks; a UTF-8 byte-order mark is
dropped. Without a timestamp column, records are batched like dmon text (a new batch when a GPU
repeats) and spaced by the sample interval.
"""

from __future__ import annotations

import csv
from collections import deque
from collections.abc import Iterator

from exporter.sample import Sample
from exporter.sources.replay_formats.common import (
    BLANK_TOKENS,
    BadValue,
    Batch,
    Column,
    ParseContext,
    RepeatBatcher,
    ReplayFormatError,
    TimeBatcher,
    parse_index,
    parse_timestamp,
    profile_text,
    read_value,
)
from exporter.sources.replay_formats.lines import MAX_LINE_BYTES, Line

_NVIDIA_SMI_COLUMNS = (
    "utilization.gpu",
    "clocks.sm",
    "clocks.current.sm",
    "pci.bus_id",
    "memory.used",
    "power.draw",
)
"""`nvidia-smi --query-gpu` property names (`nvidia-smi --help-query-gpu`), as its CSV header prints
them (`utilization.gpu [%]`): how a refusal recognises nvidia-smi's format."""


def _nvidia_smi_hint(header: list[str]) -> str:
    """A refusal's tail naming nvidia-smi when the header is its --query-gpu CSV, else ''."""
    names = {cell.strip().split(" [", 1)[0].lower() for cell in header}
    if names.isdisjoint(_NVIDIA_SMI_COLUMNS):
        return ""
    return (
        "; this is nvidia-smi --query-gpu CSV, which carries no DCGM profiling fields: record with "
        "`dcgmi dmon -e 1001,1002,1004,1005` or from dcgm-exporter instead (docs/sources.md)"
    )


_ENTITY_COLUMNS = {
    "timestamp": "ts",
    "ts": "ts",
    "time": "ts",
    "gpu": "gpu",
    "gpu_index": "gpu",
    "uuid": "uuid",
    "node": "node",
    "hostname": "node",
    "model": "model",
    "modelname": "model",
    "gpu_instance": "gpu_instance",
    "gpu_i_id": "gpu_instance",
    "gpu_instance_profile": "profile",
    "gpu_i_profile": "profile",
    "namespace": "namespace",
    "pod": "pod",
    "container": "container",
}
"""Header spellings (lower case) of the entity columns -> the role they play."""


MAX_QUOTED_LINES = 64
"""Physical lines one quoted cell may span; a quote still open after them is unterminated."""
MAX_QUOTED_CHARS = csv.field_size_limit()
"""Characters one quoted cell may span (csv's own limit on a cell, 131,072): the lines held while
looking for its closing quote stay within it."""


def _quote_open_after(text: str, in_quote: bool) -> tuple[bool, int]:
    """Whether csv (the default dialect, as csv.reader reads it) is inside a quoted cell at the end
    of this line, given whether it was at its start; and the 1-based column of the quote that
    opened the cell still open (0 when none opened on this line)."""
    state = "quoted" if in_quote else "start"
    opened = 0
    for column, char in enumerate(text, 1):
        if state == "quoted":
            if char == '"':
                state = "quote_in_quoted"
        elif state == "quote_in_quoted":
            state = "quoted" if char == '"' else ("start" if char == "," else "field")
        elif char == ",":
            state = "start"
        elif state == "start" and char == '"':
            state, opened = "quoted", column
        else:
            state = "field"
    return state == "quoted", opened if state == "quoted" else 0


class _Records:
    """The file's physical lines fed to csv.reader (with their line breaks, so quoted breaks
    survive), and the physical line each record starts on."""

    def __init__(self, lines: Iterator[Line], ctx: ParseContext) -> None:
        self._lines = lines
        self._ctx = ctx
        self._reader = csv.reader(self._texts())
        self.too_long: list[int] = []
        self.unterminated: list[tuple[int, int]] = []
        """(line, column) of quotes never closed within MAX_QUOTED_LINES; those lines were left
        out and reading went on from the next."""
        self._number = 0
        """The physical number of the last line handed to csv (a run of blank lines is handed
        over as one, so csv's own line_num is not the file's)."""

    def _balanced(self) -> Iterator[Line]:
        """The lines, less any whose quote is not closed within MAX_QUOTED_LINES lines (or by the
        end of the file): csv would read the rest of the file into one cell. The lines held
        while looking for the closing quote are read again as if the quote had not been there."""
        lines = self._lines
        again: deque[Line] = deque()
        while True:
            line = again.popleft() if again else next(lines, None)
            if line is None:
                return
            number, text = line
            if text is None or '"' not in text:
                yield line
                continue
            open_, column = _quote_open_after(text, False)
            held = [line]
            chars = len(text)
            while open_ and len(held) <= MAX_QUOTED_LINES and chars <= MAX_QUOTED_CHARS:
                following = again.popleft() if again else next(lines, None)
                if following is None:
                    break
                held.append(following)
                chars += len(following[1] or "")
                if following[1] is not None and '"' in following[1]:
                    open_ = _quote_open_after(following[1], True)[0]
            if not open_:
                yield from held
                continue
            self.unterminated.append((number, column))
            again.extendleft(reversed(held[1:]))

    def _texts(self) -> Iterator[str]:
        for number, text in self._balanced():
            self._number = number
            if text is None:
                self.too_long.append(number)
                yield "\n"
            else:
                yield text + "\n"

    def __iter__(self) -> Iterator[tuple[int, list[str] | str]]:
        """(first line, cells) per record, or (first line, error text) where csv refused one."""
        reader = self._reader
        while True:
            start = self._number + 1
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                yield start, str(exc)
                continue
            yield start, cells


def iter_csv(lines: Iterator[Line], ctx: ParseContext) -> Iterator[Batch]:
    """Batches of a CSV table as it streams; records that cannot be read are skipped and counted."""
    source = _Records(lines, ctx)
    records = iter(source)
    header: list[str] | None = None
    header_line = 0
    for start, cells in records:
        if isinstance(cells, str) or not _is_content(cells):
            continue
        header, header_line = cells, start
        break
    if header is None:
        raise ReplayFormatError(f"{ctx.name}: no CSV header row found")
    table = _Table(header, header_line, ctx)
    batcher_by_time = TimeBatcher(ctx) if table.ts_col is not None else None
    batcher_by_repeat = RepeatBatcher(ctx)
    for start, cells in records:
        _report_dropped(source, ctx)
        if isinstance(cells, str):
            ctx.lines_read += 1
            ctx.skip(start, "bad_csv", f"not a CSV record ({cells})")
            continue
        if not _is_content(cells):
            continue
        ctx.lines_read += 1
        result = table.read(start, cells)
        if result is None:
            continue
        sample, timestamp = result
        if batcher_by_time is not None and timestamp is not None:
            yield from batcher_by_time.add(start, sample._replace(timestamp=timestamp))
        else:
            closed = batcher_by_repeat.add(start, sample.entity, dict(sample.values), sample.attribution)
            if closed is not None:
                yield closed
    _report_dropped(source, ctx)
    if batcher_by_time is not None:
        yield from batcher_by_time.finish()
    last = batcher_by_repeat.close()
    if last is not None:
        yield last


def _report_dropped(source: _Records, ctx: ParseContext) -> None:
    """Count and log the lines the record reader left out (too long, an unterminated quote)."""
    while source.too_long:
        ctx.lines_read += 1
        ctx.skip(source.too_long.pop(0), "line_too_long", f"line is longer than {MAX_LINE_BYTES} bytes")
    while source.unterminated:
        line, column = source.unterminated.pop(0)
        ctx.lines_read += 1
        ctx.skip(
            line,
            "unterminated_quote",
            f'the quote (") at column {column} is never closed (not within {MAX_QUOTED_LINES} lines '
            f"or {MAX_QUOTED_CHARS} characters, nor by the end of the file)",
            outcome="line skipped, reading on from the next line",
        )


def _is_content(cells: list[str]) -> bool:
    """False for blank records and "#" comment records."""
    if not cells or (len(cells) == 1 and not cells[0].strip()):
        return False
    return not (cells[0].lstrip().startswith("#") and len(cells) == 1)


class _Table:
    """The header's meaning: which column plays which role, and how each field column is read."""

    def __init__(self, header: list[str], line: int, ctx: ParseContext) -> None:
        self._ctx = ctx
        roles: dict[str, int] = {}
        self.fields: list[tuple[int, Column]] = []
        for index, raw_name in enumerate(header):
            name = raw_name.strip().lstrip("#").strip()
            role = _ENTITY_COLUMNS.get(name.lower())
            if role is not None:
                roles.setdefault(role, index)
                continue
            if not name:
                continue
            column = ctx.column(name)
            if column is not None:
                self.fields.append((index, column))
        if "gpu" not in roles:
            shown = ", ".join(h[:40] for h in header[:20])
            hint = _nvidia_smi_hint(header)
            raise ReplayFormatError(
                f"{ctx.name}:{line}: CSV header has no 'gpu' column (columns: {shown}){hint}"
            )
        if not self.fields:
            raise ReplayFormatError(
                f"{ctx.name}:{line}: CSV header names no known DCGM field{_nvidia_smi_hint(header)}"
            )
        self.width = len(header)
        self.ts_col = roles.get("ts")
        self.roles = roles

    def _text(self, cells: list[str], role: str) -> str | None:
        index = self.roles.get(role)
        if index is None:
            return None
        text = cells[index].strip()
        return None if text in BLANK_TOKENS else text

    def read(self, line: int, cells: list[str]) -> tuple[Sample, float | None] | None:
        """The record as a sample (timestamp filled in by the batcher without a ts column)."""
        ctx = self._ctx
        if len(cells) != self.width:
            ctx.skip(line, "column_count", f"{len(cells)} cells where the header has {self.width}")
            return None
        try:
            gpu = parse_index(cells[self.roles["gpu"]], "gpu")
            instance_text = self._text(cells, "gpu_instance")
            gpu_instance = None if instance_text is None else parse_index(instance_text, "gpu_instance")
            profile = profile_text(self._text(cells, "profile"))
            timestamp = None
            if self.ts_col is not None:
                timestamp = parse_timestamp(cells[self.ts_col])
        except ValueError as exc:
            reason = "bad_timestamp" if "timestamp" in str(exc) else "bad_entity"
            ctx.skip(line, reason, _with_break_hint(str(exc), cells))
            return None
        model = self._text(cells, "model") or ctx.default_model
        if model is None:
            ctx.skip(
                line,
                "no_model",
                f"no model for GPU {gpu} and no --model given; pass --model with the GPU's NVML name",
            )
            return None
        values: dict[int, float | None] = {}
        try:
            for index, column in self.fields:
                value = read_value(column, cells[index])
                if values.get(column.fid) is None:
                    values[column.fid] = value
        except BadValue as exc:
            ctx.skip(line, "bad_value", _with_break_hint(str(exc), cells))
            return None
        namespace, pod = self._text(cells, "namespace"), self._text(cells, "pod")
        attribution = None
        if namespace or pod:
            attribution = ctx.attribution(namespace or "", pod or "", self._text(cells, "container") or "")
        entity = ctx.entity(
            gpu,
            self._text(cells, "uuid"),
            model,
            gpu_instance,
            profile if gpu_instance is not None else None,
            self._text(cells, "node"),
        )
        sample = Sample(timestamp=0.0, entity=entity, values=values, attribution=attribution)
        return sample, timestamp


def _with_break_hint(message: str, cells: list[str]) -> str:
    if any("\n" in cell for cell in cells):
        return message + " (a cell holds a line break: an unterminated quote?)"
    return message
