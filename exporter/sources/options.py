"""The source flags every source shares (--interval, --mig-profile, --gpus), their parsers, and
the protocol by which a source module declares its own.

A source module may define `OPTIONS`, a tuple of OptionSpec (exporter/option_specs.py), a frozen
settings dataclass of its own (fields, defaults, checks), and `options_from(values, chosen)`,
which reads those flags off the parsed namespace and returns that record. `chosen` says whether
this source was picked (`--source`, or `auto` for the sources it tries), so a flag that belongs
to another source can be refused by name. The source's class takes SourceOptions (the shared
flags) and the record. The registry (exporter/sources/__init__.py) collects the flags for
`serve` and `record` and hands each source its record; a module without flags of its own
defines none of the three, and its class takes SourceOptions alone.
"""

from __future__ import annotations

import argparse
from typing import Any

from exporter.option_specs import OptionSpec, positive_seconds
from exporter.sources.base import MigProfileHint


def gpu_list(text: str) -> tuple[int, ...]:
    try:
        indexes = tuple(int(part) for part in str(text).split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPU indexes like 0,1,3, got {text!r}") from None
    if not indexes or any(i < 0 for i in indexes):
        raise argparse.ArgumentTypeError(f"expected GPU indexes like 0,1,3, got {text!r}")
    return indexes


def mig_profiles(text: str) -> tuple[MigProfileHint, ...]:
    """--mig-profile: comma-separated [GPU:]GI=PROFILE, e.g. 1=3g.40gb,0:2=2g.20gb."""
    hints: list[MigProfileHint] = []
    expected = "[GPU:]GI=PROFILE pairs like 1=3g.40gb,0:2=2g.20gb"
    for item in str(text).split(","):
        if not item.strip():
            continue
        where, equals, profile = item.strip().partition("=")
        gpu_text, colon, instance_text = where.strip().rpartition(":")
        profile = profile.strip()
        indexes = [instance_text, gpu_text] if colon else [instance_text]
        if (
            not equals
            or not all(t.strip().isascii() and t.strip().isdigit() and len(t.strip()) <= 5 for t in indexes)
            or not profile
            or not profile.isascii()
            or not all(c.isalnum() or c in ".+_-" for c in profile)
            or len(profile) > 64
        ):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {item.strip()!r}")
        hints.append(
            MigProfileHint(
                gpu_instance=int(instance_text),
                profile=profile,
                gpu=int(gpu_text) if colon else None,
            )
        )
    if not hints:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return tuple(hints)


INTERVAL = OptionSpec(
    flag="--interval",
    dest="interval",
    type=positive_seconds,
    default=1.0,
    metavar="S",
    help="seconds between samples of a live source (default 1; --source scrape GETs at this"
    " interval only around the upstream's next due change); dmon/CSV sample spacing",
)
MIG_PROFILE = OptionSpec(
    flag="--mig-profile",
    dest="mig_profile",
    type=mig_profiles,
    default=(),
    metavar="[GPU:]GI=PROFILE,...",
    help="MIG profile of GPU instances the input does not name (dcgmi dmon), e.g. 1=3g.40gb,0:2=2g.20gb;"
    " GPU: also names the instance's parent GPU",
)
GPUS = OptionSpec(
    flag="--gpus", dest="gpus", type=gpu_list, metavar="0,1,...", help="sample only these GPU indexes"
)
COMMON_OPTIONS: tuple[OptionSpec, ...] = (INTERVAL, MIG_PROFILE, GPUS)
"""The flags of more than one source: the sampling interval, MIG hints, the GPUs to sample."""


def common_options_from(values: Any) -> dict[str, Any]:
    """The SourceOptions fields COMMON_OPTIONS give (every one but `settings`)."""
    return {
        "interval_seconds": values.interval,
        "mig_profiles": values.mig_profile,
        "gpus": values.gpus,
    }
