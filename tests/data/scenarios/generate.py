"""Writes the seeded scenario traces (Ridgeline JSON Lines) that tests/test_rules_e2e.py replays.

Each file is one node of a fleet, two GPUs (one for the frozen-counter case), 60 one-second samples
per GPU, played in a loop. Values are ratios as DCGM reports them (GPU_UTIL, field 203, in percent;
SM clock, field 100, in MHz). Re-run `python tests/data/scenarios/generate.py` to rewrite them; the
seed makes the output identical every time.

  decode-serving   LLM decode: DRAM_ACTIVE 0.70-0.78 (near the 0.8 wall), tensor ~0.1 -> memory_bound
  training         tensor 0.72-0.80, with a 4 s memory-bound optimizer phase every 20 s -> compute_bound
  input-starved    GR engine ~0.9 but SM_ACTIVE ~0.3, DRAM and tensor 0.05-0.10 -> latency_bound
  allocated-idle   everything ~0; GPU 0 held by a notebook pod, GPU 1 held by nobody -> idle
  profiling-frozen GR engine 0.92 and GPU_UTIL 97 %, DRAM and tensor exactly 0 (counters not collected)
  slurm-job        LLM decode as above on two GPUs no pod holds; the e2e test maps both to one Slurm
                   job (hpc_job) through a job-mapping directory

Decode GPUs draw at their power limit with field 112's SW power cap bit (0x4) set, and the
input-starved GPUs are held by sync boost (0x10): the clock-event findings have a workload in
each cluster of the federation test. Fields 112, 155 (W) and 160 (W) are constants, so the seeded
ratios are what they were before they were added. Decode GPUs also carry constant PCIe and
NVLink rates (fields 1009-1012), well below the link wall, so the link families have data.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from exporter.sample import Attribution, Entity, Sample
from exporter.sources.replay_formats.jsonl import sample_to_json

HERE = Path(__file__).resolve().parent
SEED = 20251129
START = 1764432000.0  # trace time of the first sample; the e2e test shifts it to "now"
SAMPLES = 60
MODEL = "NVIDIA H100 80GB HBM3"
SM_CLOCK_MHZ = 1980.0

Fields = dict[str, float]
Profile = Callable[[random.Random, int], Fields]


def _busy(
    rng: random.Random,
    gr: float,
    sm: float,
    dram: tuple[float, float],
    tensor: tuple[float, float],
    util: float,
) -> Fields:
    return {
        "1001": round(gr + rng.uniform(-0.02, 0.02), 4),
        "1002": round(sm + rng.uniform(-0.02, 0.02), 4),
        "1003": round(sm * 0.4, 4),
        "1004": round(rng.uniform(*tensor), 4),
        "1005": round(rng.uniform(*dram), 4),
        "100": SM_CLOCK_MHZ,
        "203": util,
    }


DECODE_LINKS: Fields = {
    "1009": 2.0e9,  # PCIe TX, bytes/s: tokens and logits back to the host
    "1010": 1.0e9,  # PCIe RX: prompts in
    "1011": 3.0e10,  # NVLink TX: a tensor-parallel pair's per-layer all-reduce, 7 % of 450 GB/s
    "1012": 3.0e10,  # NVLink RX
}


def decode(rng: random.Random, _t: int) -> Fields:
    return {
        **_busy(rng, 0.95, 0.85, (0.70, 0.78), (0.08, 0.12), 98.0),
        "112": 4.0,
        "155": 699.0,
        "160": 700.0,
        **DECODE_LINKS,
    }


def training(rng: random.Random, t: int) -> Fields:
    if t % 20 >= 16:  # optimizer step: streams weights and moments, little tensor work
        return _busy(rng, 0.96, 0.9, (0.70, 0.76), (0.06, 0.10), 99.0)
    return _busy(rng, 0.97, 0.92, (0.30, 0.40), (0.72, 0.80), 99.0)


def input_starved(rng: random.Random, _t: int) -> Fields:
    return {**_busy(rng, 0.90, 0.30, (0.05, 0.10), (0.05, 0.10), 90.0), "112": 16.0}


def idle(rng: random.Random, _t: int) -> Fields:
    return {
        "1001": round(rng.uniform(0.0, 0.01), 4),
        "1002": round(rng.uniform(0.0, 0.005), 4),
        "1003": 0.0,
        "1004": 0.0,
        "1005": round(rng.uniform(0.0, 0.005), 4),
        "100": 345.0,
        "203": 0.0,
    }


def frozen(rng: random.Random, _t: int) -> Fields:
    fields = _busy(rng, 0.92, 0.80, (0.0, 0.0), (0.0, 0.0), 97.0)
    fields["1004"] = 0.0
    fields["1005"] = 0.0
    return fields


# scenario -> list of (profile, attribution or None) per GPU
SCENARIOS: dict[str, list[tuple[Profile, tuple[str, str, str] | None]]] = {
    "decode-serving": [(decode, ("llm", "decode-0", "server")), (decode, ("llm", "decode-1", "server"))],
    "training": [
        (training, ("train", "pretrain-0", "trainer")),
        (training, ("train", "pretrain-0", "trainer")),
    ],
    "input-starved": [(input_starved, ("vision", "resnet-train-0", "trainer"))] * 2,
    "allocated-idle": [(idle, ("research", "notebook-0", "jupyter")), (idle, None)],
    "profiling-frozen": [(frozen, ("batch", "etl-0", "worker"))],
    "slurm-job": [(decode, None), (decode, None)],
}


def _pod(labels: tuple[str, str, str] | None) -> Attribution | None:
    if labels is None:
        return None
    namespace, pod, container = labels
    return Attribution(namespace=namespace, pod=pod, container=container)


def trace(name: str, rng: random.Random) -> list[str]:
    lines: list[str] = []
    gpus = SCENARIOS[name]
    for t in range(SAMPLES):
        for gpu, (profile, attribution) in enumerate(gpus):
            sample = Sample(
                timestamp=START + t,
                entity=Entity(gpu=gpu, uuid=f"GPU-{name}-{gpu}", model=MODEL),
                values={int(fid): value for fid, value in profile(rng, t).items()},
                attribution=_pod(attribution),
            )
            lines.append(sample_to_json(sample))
    return lines


def main() -> None:
    rng = random.Random(SEED)
    for name in SCENARIOS:
        (HERE / f"{name}.jsonl").write_text("\n".join(trace(name, rng)) + "\n")


if __name__ == "__main__":
    main()
