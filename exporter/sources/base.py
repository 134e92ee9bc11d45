"""The one small protocol every source implements, and the errors it may raise.

A source is opened once, read once per sampling interval by the sampler thread (never by a
scrape), and closed at shutdown. Adding a source means one module and one line in
exporter/sources/__init__.py's registry, as node_exporter does with its collectors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from exporter.sample import Sample


class SourceError(Exception):
    """A source could not produce a batch; `reason` is a short label for the errors counter."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message

    def __str__(self) -> str:
        return self.message


class SourceUnavailable(SourceError):
    """A source cannot run on this machine at all (no library, no GPU, no profiling support)."""


class EndOfStream(Exception):
    """A non-looping replay has played its last sample."""


REPLAY_FORMATS: tuple[str, ...] = ("jsonl", "csv", "dmon")
"""The replay file formats (docs/replay-formats.md): `--replay-format` choices, one parser each."""


@dataclass(frozen=True, slots=True)
class MigProfileHint:
    """`--mig-profile [GPU:]GI=PROFILE`: the MIG profile (and, with GPU, the parent) of a GPU
    instance that the input does not name itself (dcgmi dmon prints neither)."""

    gpu_instance: int
    profile: str
    gpu: int | None = None
    """The parent GPU; None: this GPU-instance id on every GPU."""


def hinted_profile(hints: Sequence[MigProfileHint], gpu: int, gpu_instance: int) -> str | None:
    """The profile the hints give GPU `gpu`'s instance `gpu_instance`; a hint naming the GPU wins
    over one for every GPU."""
    fallback = None
    for hint in hints:
        if hint.gpu_instance != gpu_instance:
            continue
        if hint.gpu == gpu:
            return hint.profile
        if hint.gpu is None:
            fallback = hint.profile
    return fallback


def hinted_parent(hints: Sequence[MigProfileHint], gpu_instance: int) -> int | None:
    """The parent GPU a hint names for a GPU-instance id, when exactly one hint names one."""
    parents = {hint.gpu for hint in hints if hint.gpu_instance == gpu_instance and hint.gpu is not None}
    return parents.pop() if len(parents) == 1 else None


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What every source is built with: the flags all sources share, and each chosen source's
    own settings record under its name, as its module's options_from built it (the registry
    hands a source its record: exporter/sources/__init__.py's create_source)."""

    interval_seconds: float = 1.0
    gpus: tuple[int, ...] | None = None
    mig_profiles: tuple[MigProfileHint, ...] = ()
    settings: Mapping[str, object] = field(default_factory=dict)
    """Source name -> that source's settings record (a frozen dataclass its module declares)."""


class Source(Protocol):
    """What the sampler needs from a source."""

    name: str
    paced: bool
    """True when read() itself waits until the next batch is due (replay); False when the
    sampler must wait `interval_seconds` between reads (live GPU sources)."""

    @property
    def records_skipped(self) -> int:
        """Input records (replay lines) skipped as unreadable since open(): the sampler counts
        them in `ridgeline_sample_errors_total{reason="corrupt_line"}`. 0 for sources that read
        a library rather than a text."""

    def open(self) -> None:
        """Connect, watch fields, check support; raise SourceUnavailable with a clear reason."""

    def read(self) -> list[Sample]:
        """One batch: one sample per entity. Raises SourceError or EndOfStream."""

    def close(self) -> None:
        """Release the library handles; safe to call twice."""


class BatchingSource(Source, Protocol):
    """A source that keeps its samples at its own rate between reads (DCGM's watches keep every
    value at the watch rate): the sampler reads it about once a second, or when a reader asks,
    and folds every batch it hands over in one pass. Detected by `read_batches` alone."""

    def read_batches(self) -> list[list[Sample]]:
        """Every batch since the previous read, oldest first (none: an empty list). Raises
        SourceError or EndOfStream, as read() does."""
