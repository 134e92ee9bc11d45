"""The one sample record every source yields: when, which GPU, and DCGM field id -> value.

Plain immutable records, not pydantic: they are built once per GPU per second in the sample
loop, where validation on every sample would cost more than it buys. `Sample` is a
NamedTuple because a replay at --speed max builds hundreds of thousands a second: construction
is one tuple allocation, where a frozen dataclass's __init__ pays an object.__setattr__ per field.
`Entity` and `Attribution` stay frozen slotted dataclasses: each is built once per GPU or pod and
shared, they are dict keys, and as dataclasses they never compare equal to a plain tuple.
"""

from __future__ import annotations

import re
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
    """The MIG profile of a GPU instance as NVIDIA names it ("3g.40gb", "1g.10gb+me"): from
    dcgm-exporter's GPU_I_PROFILE label, a replay file, or --mig-profile. None for a whole GPU
    and for an instance whose profile no source told. It sets the instance's roof
    (docs/model.md, "MIG roofs"); an instance without a known one gets no roof."""
    node: str | None = None
    """The node a multi-node replay line names (its `node` key or column); None elsewhere: a live
    source is one node, and Prometheus adds the target's labels."""
    sm_count: int | None = None
    """A GPU instance's SMs as the GPU library reports them (NVML's GPU instance profile info); it
    overrides the catalog's `mig_sms` (Card.mig_slices). None: no source told."""

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


MAX_ENTITIES = 1024
"""Entities one batch may hold. DCGM watches at most 32 GPUs (DCGM_MAX_NUM_DEVICES) with up to 7
GPU instances each (256 entities); a page or file naming more is hostile or broken, and the rest
is skipped and counted rather than letting memory grow with the input."""


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
    hpc_job: str | None = None
    """The HPC job id(s) on this GPU, comma-separated, when the source knows them (a scraped
    dcgm-exporter page with its job mapping on); else the sampler asks --hpc-job-mapping-dir."""


JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}")
"""An HPC job id: Slurm ids are digits, array tasks `1234_7`, heterogeneous components `1234+0`;
other schedulers use letters and dots. Never a comma (the separator of join_hpc_jobs), a space,
a quote or a control character: a value outside it is no job id and is left out where read."""


HPC_JOB_SEPARATOR = ","
"""How a GPU's several HPC jobs are listed in one value (join_hpc_jobs)."""


def single_hpc_job(jobs: str | None) -> str | None:
    """The one job a GPU's value names, or None when it names none or several: a GPU shared by
    jobs carries no hpc_job label (each job is told by ridgeline_hpc_job_info instead)."""
    return None if jobs is None or HPC_JOB_SEPARATOR in jobs else jobs


def join_hpc_jobs(jobs: list[str]) -> str | None:
    """One hpc_job label value for every job on a GPU: ids joined by commas, numeric ids in
    numeric order ("9,10,array_1"), so the value does not depend on who wrote them first."""
    if not jobs:
        return None
    return HPC_JOB_SEPARATOR.join(sorted(dict.fromkeys(jobs), key=_job_order))


def _job_order(job: str) -> tuple[int, int, str]:
    return (0, int(job), job) if job.isdigit() else (1, 0, job)
