"""The one sample record every source yields: when, which GPU, and DCGM field id -> value.

Plain immutable records, not pydantic: they are built once per GPU per second in the sample
loop, where validation on every sample would cost more than it buys. `Sample` is a
NamedTuple because a replay at --speed max builds hundreds of thousands a second: construction
is one tuple allocation, where a frozen dataclass's __init__ pays an object.__setattr__ per field.
`Entity` and `Attribution` stay frozen slotted dataclasses: each is built once per GPU or pod and
shared, they are dict keys, and as dataclasses they never compare equal to a plain tuple.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class Entity:
    """A GPU, or one GPU instance of a MIG-partitioned GPU (gpu_instance set)."""

    gpu: int
    uuid: str
    model: str
    gpu_instance: int | None = None
    profile: str | None = None
    """A MIG instance's GPU-instance profile as dcgm-exporter's GPU_I_PROFILE label prints it
    ("3g.20gb"); None for a whole GPU or when the source does not say. It sets the instance's
    roof (docs/model.md, "MIG roofs")."""

    @property
    def key(self) -> tuple[int, int | None]:
        """Identity within one node: the GPU index and, for MIG, the instance id."""
        return (self.gpu, self.gpu_instance)


@dataclass(frozen=True, slots=True)
class Attribution:
    """The Kubernetes pod holding a GPU (from the kubelet or from dcgm-exporter's labels)."""

    namespace: str
    pod: str
    container: str


class Sample(NamedTuple):
    """One reading of one entity.

    values maps DCGM field ids to floats; None is a blank (the field was watched but had no
    value) and must never be read as 0. A field absent from the mapping was not reported at all.
    Immutable: `_replace` makes a changed copy.
    """

    timestamp: float
    entity: Entity
    values: Mapping[int, float | None]
    attribution: Attribution | None = None
