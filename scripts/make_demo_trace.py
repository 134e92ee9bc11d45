#!/usr/bin/env python3
"""Write the bundled demo trace, exporter/data/demo.jsonl.gz (`ridgeline serve --replay demo`).

A synthetic but realistic 10-minute, 1-second trace of one 8-GPU H100 SXM node, in Ridgeline's
JSON Lines replay format. Every GPU tells a different roofline story:

    GPU 0-3  LLM training (llm-train/trainer-0): 20 s steps of GEMM-heavy forward/backward
             (16 s, tensor 0.72-0.85, DRAM 0.30-0.40, compute side), an exposed all-reduce
             (2 s, NVLink bytes high, SM and tensor low) and a memory-bound optimizer step
             (2 s, DRAM 0.70-0.78, tensor ~0.05). Per second the raw regime follows the phases
             (the all-reduce, NVLink at 57-78 % of 450 GB/s per direction, interconnect-bound);
             smoothed over 10 s and debounced, the step reads compute-bound (the all-reduce and
             optimizer dip lasts less than the 5 s dwell). GPU 2 reports a blank DRAM_ACTIVE
             for 5 s (a DCGM hiccup).
    GPU 4-5  batched LLM decode serving (inference/decode-*): DRAM 0.65-0.78, near its wall,
             tensor 0.08-0.15: memory-bound. GPU 5 drops out for 20 s and comes back.
    GPU 6    an input-starved embedding job (data-eng/embed-etl-*): GR_ENGINE_ACTIVE ~0.85 but
             SM_ACTIVE ~0.25, DRAM and tensor ~0.05: latency-bound (waits on the host).
    GPU 7    allocated but idle (research/notebook-*): every activity ~0, SM clock parked low.

Fields: 1001-1008, 1011-1012 (NVLink bytes/s), 100 (SM clock, MHz), 203 (GPU_UTIL, %).
Values have three decimals, as dcgmi prints them. The output is byte-for-byte reproducible:
random.Random(SEED) drives every choice and the gzip header carries no time.

    .venv/bin/python scripts/make_demo_trace.py            # rewrites exporter/data/demo.jsonl.gz
    .venv/bin/python scripts/make_demo_trace.py --out x.jsonl --seconds 60
"""

from __future__ import annotations

import argparse
import gzip
import random
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from exporter.sample import Attribution, Entity, Sample
from exporter.sources.replay_formats.jsonl import sample_to_json

SEED = 20251129
START_TS = 1764432000.0
"""2025-11-29T16:00:00Z: an arbitrary, fixed start so the trace is reproducible."""
MODEL = "NVIDIA H100 80GB HBM3"
GPUS = 8
SECONDS = 600
MAX_SM_CLOCK_MHZ = 1980
IDLE_SM_CLOCK_MHZ = 345

BLANK_GPU, BLANK_FROM, BLANK_TO = 2, 200, 205
"""GPU 2 reports a blank DRAM_ACTIVE for these seconds (DCGM's blank sentinel -> null)."""
DROP_GPU, DROP_FROM, DROP_TO = 5, 400, 420
"""GPU 5 is missing from the trace for these seconds (e.g. an XID and a driver reset)."""

STEP_SECONDS = 20
"""Training step: 16 s forward/backward, 2 s all-reduce, 2 s optimizer."""

PODS = {
    0: ("llm-train", "trainer-0", "pytorch"),
    1: ("llm-train", "trainer-0", "pytorch"),
    2: ("llm-train", "trainer-0", "pytorch"),
    3: ("llm-train", "trainer-0", "pytorch"),
    4: ("inference", "decode-7f9c4b-x2kq8", "vllm"),
    5: ("inference", "decode-7f9c4b-m7d2p", "vllm"),
    6: ("data-eng", "embed-etl-5d6f8-qz4vn", "worker"),
    7: ("research", "notebook-alice-0", "jupyter"),
}


def _clip(value: float, low: float = 0.0, high: float = 1.0) -> float:
    return min(high, max(low, value))


def _phase_training(second: int, gpu: int, rng: random.Random) -> dict[str, float]:
    # The four ranks run the same step, a little out of phase with one another.
    t = (second + gpu % 2) % STEP_SECONDS
    if t < 16:  # forward/backward: GEMMs on the tensor cores
        tensor = rng.uniform(0.72, 0.85)
        return {
            "gract": rng.uniform(0.95, 0.99),
            "smact": rng.uniform(0.86, 0.93),
            "smocc": rng.uniform(0.30, 0.42),
            "tensor": tensor,
            "dram": rng.uniform(0.30, 0.40),
            "fp32": rng.uniform(0.05, 0.10),
            "fp16": rng.uniform(0.02, 0.05),
            "nvl": rng.uniform(8e9, 2.0e10),
        }
    if t < 18:  # all-reduce over NVLink: the SMs mostly wait on the links
        return {
            "gract": rng.uniform(0.85, 0.93),
            "smact": rng.uniform(0.15, 0.25),
            "smocc": rng.uniform(0.05, 0.10),
            "tensor": rng.uniform(0.01, 0.05),
            "dram": rng.uniform(0.15, 0.25),
            "fp32": rng.uniform(0.01, 0.03),
            "fp16": rng.uniform(0.0, 0.01),
            "nvl": rng.uniform(2.6e11, 3.4e11),
        }
    return {  # optimizer: elementwise Adam updates, DRAM-bound
        "gract": rng.uniform(0.95, 0.99),
        "smact": rng.uniform(0.80, 0.90),
        "smocc": rng.uniform(0.45, 0.60),
        "tensor": rng.uniform(0.03, 0.07),
        "dram": rng.uniform(0.70, 0.78),
        "fp32": rng.uniform(0.25, 0.35),
        "fp16": rng.uniform(0.0, 0.02),
        "nvl": rng.uniform(5e8, 2e9),
    }


def _phase_decode(second: int, gpu: int, rng: random.Random) -> dict[str, float]:
    # Batches large enough to keep the weights streaming: DRAM near its ~0.8 practical wall.
    return {
        "gract": rng.uniform(0.94, 0.99),
        "smact": rng.uniform(0.70, 0.82),
        "smocc": rng.uniform(0.22, 0.32),
        "tensor": rng.uniform(0.08, 0.15),
        "dram": rng.uniform(0.65, 0.78),
        "fp32": rng.uniform(0.04, 0.08),
        "fp16": rng.uniform(0.01, 0.03),
        "nvl": rng.uniform(1e8, 6e8),
    }


def _phase_starved(second: int, gpu: int, rng: random.Random) -> dict[str, float]:
    return {
        "gract": rng.uniform(0.80, 0.90),
        "smact": rng.uniform(0.20, 0.30),
        "smocc": rng.uniform(0.05, 0.12),
        "tensor": rng.uniform(0.03, 0.07),
        "dram": rng.uniform(0.03, 0.07),
        "fp32": rng.uniform(0.03, 0.06),
        "fp16": rng.uniform(0.0, 0.01),
        "nvl": rng.uniform(0.0, 1e6),
    }


def _phase_idle(second: int, gpu: int, rng: random.Random) -> dict[str, float]:
    return {
        "gract": rng.uniform(0.0, 0.004),
        "smact": rng.uniform(0.0, 0.002),
        "smocc": rng.uniform(0.0, 0.001),
        "tensor": 0.0,
        "dram": rng.uniform(0.0, 0.001),
        "fp32": 0.0,
        "fp16": 0.0,
        "nvl": 0.0,
    }


Phase = Callable[[int, int, random.Random], dict[str, float]]


def _phase(gpu: int) -> Phase:
    if gpu <= 3:
        return _phase_training
    if gpu <= 5:
        return _phase_decode
    if gpu == 6:
        return _phase_starved
    return _phase_idle


def generate(seconds: int = SECONDS, seed: int = SEED) -> Iterator[Sample]:
    """The trace's samples, in time order, GPU by GPU within each second."""
    rng = random.Random(seed)
    uuids = [f"GPU-{uuid.UUID(int=rng.getrandbits(128), version=4)}" for _ in range(GPUS)]
    for second in range(seconds):
        ts = START_TS + second
        for gpu in range(GPUS):
            phase = _phase(gpu)(second, gpu, rng)
            if gpu == DROP_GPU and DROP_FROM <= second < DROP_TO:
                continue
            idle = gpu == 7
            clock = IDLE_SM_CLOCK_MHZ if idle else MAX_SM_CLOCK_MHZ - rng.choice((0, 0, 0, 15, 30))
            dram: float | None = round(phase["dram"], 3)
            if gpu == BLANK_GPU and BLANK_FROM <= second < BLANK_TO:
                dram = None
            nvl_tx = phase["nvl"] * rng.uniform(0.97, 1.03)
            nvl_rx = phase["nvl"] * rng.uniform(0.97, 1.03)
            fields: dict[int, float | None] = {
                1001: round(phase["gract"], 3),
                1002: round(phase["smact"], 3),
                1003: round(phase["smocc"], 3),
                1004: round(phase["tensor"], 3),
                1005: dram,
                1006: 0.0,
                1007: round(phase["fp32"], 3),
                1008: round(phase["fp16"], 3),
                1011: int(nvl_tx),
                1012: int(nvl_rx),
                100: clock,
                203: 0 if idle else round(_clip(phase["gract"]) * 100),
            }
            namespace, pod, container = PODS[gpu]
            yield Sample(
                timestamp=ts,
                entity=Entity(gpu=gpu, uuid=uuids[gpu], model=MODEL),
                values=fields,
                attribution=Attribution(namespace=namespace, pod=pod, container=container),
            )


def main() -> None:
    default_out = Path(__file__).resolve().parent.parent / "exporter" / "data" / "demo.jsonl.gz"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=default_out, help="output file (.gz compresses)")
    parser.add_argument("--seconds", type=int, default=SECONDS, help="trace length in seconds")
    parser.add_argument("--seed", type=int, default=SEED, help="random seed")
    args = parser.parse_args()
    text = "".join(sample_to_json(sample) + "\n" for sample in generate(args.seconds, args.seed))
    data = text.encode("utf-8")
    if args.out.suffix == ".gz":
        data = gzip.compress(data, compresslevel=9, mtime=0)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out} ({len(data)} bytes, {text.count(chr(10))} samples)")


if __name__ == "__main__":
    main()
