"""Verdicts that hold on real fleets (issue 9): every pipe's FLOPs, MIG roofs, partial and
contradictory readings, busy SMs without FP pipes, counters from the first reading.

Readings are written from the formats' published facts: DCGM's profiling fields 1001-1008 as
ratios, `dcgmi dmon -e 1001,1004` (GR engine and tensor only, as NVIDIA's own examples do),
dcgm-exporter's MIG labels (GPU_I_ID, GPU_I_PROFILE "3g.20gb"), the A100 40GB MIG table
(3g.20gb = 3 of 7 compute slices, 4 of 8 memory slices; NVIDIA MIG user guide).
"""

from __future__ import annotations

import itertools
import math

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter import fields, readings, roofline
from exporter.catalog import Card, load_catalog
from exporter.exposition import MetricsEndpoint
from exporter.inference import EntityInference, InferenceConfig, card_profile, step
from exporter.roofline import CounterReading, Thresholds, counter_position, judge_counters
from exporter.sample import Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.web.app import create_app

CATALOG = load_catalog()
A100 = CATALOG.lookup("a100-sxm4-40gb")
H200 = CATALOG.lookup("h200")
H100 = CATALOG.lookup("h100-sxm")
B200 = CATALOG.lookup("b200")
L40S = CATALOG.lookup("l40s")
A100_NAME = "NVIDIA A100-SXM4-40GB"
H100_NAME = "NVIDIA H100 80GB HBM3"
CRISP = InferenceConfig(smoothing_seconds=0.0, dwell_seconds=0.0)
TH = Thresholds()

IDS = {
    "dram": fields.DRAM_ACTIVE,
    "tensor": fields.PIPE_TENSOR_ACTIVE,
    "gr": fields.GR_ENGINE_ACTIVE,
    "sm": fields.SM_ACTIVE,
    "occ": fields.SM_OCCUPANCY,
    "fp64": fields.PIPE_FP64_ACTIVE,
    "fp32": fields.PIPE_FP32_ACTIVE,
    "fp16": fields.PIPE_FP16_ACTIVE,
    "clock": fields.SM_CLOCK,
    "util": fields.GPU_UTIL,
}


def reading(**ratios: float) -> dict[int, float | None]:
    return {IDS[name]: value for name, value in ratios.items()}


def feed(
    entity: Entity, card: Card | None, *readings: dict[int, float | None], config: InferenceConfig = CRISP
) -> EntityInference:
    state: EntityInference | None = None
    for i, values in enumerate(readings):
        state = step(state, Sample(1000.0 + i, entity, values), card, config)
    assert state is not None
    return state


GPU = Entity(0, "GPU-a100", A100_NAME)


# --- 1. FLOPs from every pipe ----------------------------------------------------------------


def test_fp64_hpc_on_cuda_cores_is_compute_bound_on_fp64_with_its_flops_counted() -> None:
    # an FP64 stencil/DGEMM on CUDA cores: FP64 pipe near its wall, tensors idle, DRAM moderate
    state = feed(GPU, A100, *[reading(dram=0.3, tensor=0.0, gr=0.97, sm=0.95, fp64=0.85)] * 3)
    estimate = state.estimate
    assert estimate is not None
    assert estimate.regime == "compute_bound" and estimate.pipe == "fp64"
    assert estimate.lever == roofline.LEVER_FP64_PIPE  # A100 has FP64 tensor cores at 2x
    assert estimate.achieved_flop_per_second == pytest.approx(0.85 * 9.7e12)
    assert estimate.intensity_flop_per_byte == pytest.approx(0.85 * 9.7e12 / (0.3 * 1.555e12))
    assert estimate.position is not None and estimate.position > 1  # the compute side, as its verdict says
    assert estimate.compute_roof_flop_per_second == pytest.approx(9.7e12)  # the FP64 pipe's own peak
    assert estimate.fraction_of_peak == pytest.approx(1.0)
    # two integrated seconds of FP64 work, not zero
    assert state.totals.flop_total == pytest.approx(2 * 0.85 * 9.7e12)


@pytest.mark.parametrize(
    ("card", "lever"),
    [(B200, roofline.LEVER_FP64_PIPE_NO_TENSOR), (L40S, roofline.LEVER_FP64_PIPE_NO_TENSOR)],
    ids=["b200-fp64-tensor-not-faster", "l40s-no-fp64-tensor"],
)
def test_fp64_lever_names_tensor_cores_only_where_the_card_has_faster_ones(card: Card, lever: str) -> None:
    state = feed(GPU, card, reading(dram=0.2, tensor=0.0, gr=0.9, fp64=0.9))
    assert state.estimate is not None and state.estimate.lever == lever


@pytest.mark.parametrize(
    ("pipe", "lever"), [("fp32", roofline.LEVER_FP32_PIPE), ("fp16", roofline.LEVER_FP16_PIPE)]
)
def test_each_busy_vector_pipe_names_its_own_lever(pipe: str, lever: str) -> None:
    state = feed(GPU, A100, reading(dram=0.1, tensor=0.02, gr=0.95, **{pipe: 0.8}))
    assert state.estimate is not None
    assert (state.estimate.regime, state.estimate.pipe, state.estimate.lever) == (
        "compute_bound",
        pipe,
        lever,
    )
    assert "TF32" in roofline.LEVER_FP32_PIPE and "tensor cores" in lever


def test_achieved_flops_sum_every_pipe_at_its_own_peak_and_clock() -> None:
    clock = 990.0  # half of the H100's 1980 MHz, the clock of its CUDA-core peaks
    state = feed(GPU, H100, reading(dram=0.2, tensor=0.3, fp32=0.2, fp64=0.1, fp16=0.05, clock=clock))
    assert state.estimate is not None
    tensor_k = clock / 1830.0  # 989.5 TFLOP/s = 132 SMs x 4096 FLOP/clock x 1830 MHz
    vector_k = clock / 1980.0  # 67 TFLOP/s FP32 = 132 SMs x 256 FLOP/clock x 1980 MHz
    expected = tensor_k * 0.3 * 989.5e12 + vector_k * (0.2 * 67e12 + 0.1 * 34e12 + 0.05 * 133.8e12)
    assert state.estimate.achieved_flop_per_second == pytest.approx(expected)


PIPE_NAMES = ("tensor_active", "fp64_active", "fp32_active", "fp16_active")


@settings(max_examples=150, deadline=None)
@given(
    base=st.fixed_dictionaries({name: st.floats(0.0, 1.0) for name in PIPE_NAMES}),
    pipe=st.sampled_from(PIPE_NAMES),
    more=st.floats(0.0, 1.0),
    clock=st.floats(0.05, 1.0),
)
def test_achieved_flops_are_monotone_in_each_pipe(
    base: dict[str, float], pipe: str, more: float, clock: float
) -> None:
    peaks = roofline.pipe_peaks(H100.roof("bf16"), {"fp64": 34e12, "fp32": 67e12, "fp16": 133.8e12})
    low = CounterReading(dram_active=0.3, clock_ratio=clock, **base)
    high = low._replace(**{pipe: min(1.0, base[pipe] + more)})
    before = counter_position(low, peaks, 3.35e12).achieved_flop_per_second
    after = counter_position(high, peaks, 3.35e12).achieved_flop_per_second
    assert before is not None and after is not None
    assert after >= before


# --- 2. MIG roofs --------------------------------------------------------------------------


def instance(gi: int, profile: str | None) -> Entity:
    return Entity(0, "GPU-a100", A100_NAME, gpu_instance=gi, profile=profile)


def test_a_3g_20gb_instance_gets_42_of_108_sms_and_4_of_8_bandwidth() -> None:
    state = feed(
        instance(1, "3g.20gb"), A100, reading(dram=0.5, tensor=0.5, gr=0.9), config=InferenceConfig()
    )
    roof = state.estimate.roof if state.estimate else None
    assert roof is not None
    assert roof.peak_flop_per_second == pytest.approx(312e12 * 42 / 108)
    assert roof.bandwidth_bytes_per_second == pytest.approx(1.555e12 * 4 / 8)


def test_a_mig_instance_fp64_pipe_peak_scales_with_its_sms() -> None:
    state = feed(instance(1, "3g.20gb"), A100, reading(dram=0.1, tensor=0.0, gr=0.9, fp64=0.8))
    assert state.estimate is not None
    assert state.estimate.achieved_flop_per_second == pytest.approx(0.8 * 9.7e12 * 42 / 108)


@pytest.mark.parametrize("profile", ["3g.71gb", "1c.3g.40gb"])
def test_a_profile_without_a_published_sm_count_gets_a_regime_but_no_roof(profile: str) -> None:
    card = H200 if profile.endswith("71gb") else CATALOG.lookup("h100-sxm")
    state = feed(instance(1, profile), card, *[reading(dram=0.1, tensor=0.9, gr=0.95)] * 2)
    assert state.estimate is not None
    assert state.estimate.regime == "compute_bound"
    assert state.estimate.roof is None and state.estimate.achieved_flop_per_second is None
    assert state.totals.flop_total is None


@pytest.mark.parametrize("profile", [None, "5g.99gb", "not a profile"])
def test_an_unknown_profile_gets_ratios_and_a_regime_but_no_roof(profile: str | None) -> None:
    state = feed(instance(2, profile), A100, *[reading(dram=0.7, tensor=0.1, gr=0.9)] * 2)
    estimate = state.estimate
    assert estimate is not None
    assert estimate.regime == "memory_bound" and estimate.dram_active == pytest.approx(0.7)
    assert estimate.roof is None and estimate.achieved_flop_per_second is None
    assert estimate.card == "a100-sxm4-40gb"
    assert state.totals.flop_total is None and state.totals.dram_bytes_total is None
    assert state.totals.regime_seconds is not None and state.totals.regime_seconds["memory_bound"] == 1.0


def _partitions(card: Card) -> list[tuple[str, ...]]:
    """Every multiset of the card's GPU-instance profiles that fits its compute and memory slices."""
    assert card.mig is not None
    names = sorted(card.mig.profiles)
    found = []
    for size in range(1, card.mig.compute_slices + 1):
        for combo in itertools.combinations_with_replacement(names, size):
            compute = sum(card.mig.profiles[p][0] for p in combo)
            memory = sum(card.mig.profiles[p][1] for p in combo)
            if compute <= card.mig.compute_slices and memory <= card.mig.memory_slices:
                found.append(combo)
    return found


MIG_CARDS = [card for card in CATALOG if card.mig is not None]


@pytest.mark.parametrize("card", MIG_CARDS, ids=lambda c: c.key)
def test_instances_peaks_never_sum_above_the_card(card: Card) -> None:
    precision = card.stand_in_precision("bf16")
    whole = card.roof(precision)
    partitions = _partitions(card)
    assert partitions
    for combo in partitions:
        roofs = [card_profile(card, CRISP, instance=True, mig_profile=p).roof for p in combo]
        # a roof exactly where the card publishes the profile's SM count (cards.yaml mig_sms)
        assert [r is not None for r in roofs] == [p in card.mig_sms for p in combo], combo
        assert math.fsum(r.peak_flop_per_second for r in roofs if r) <= whole.peak_flop_per_second * (
            1 + 1e-12
        )
        assert math.fsum(r.bandwidth_bytes_per_second for r in roofs if r) <= (
            whole.bandwidth_bytes_per_second * (1 + 1e-12)
        )
        vectors = [card_profile(card, CRISP, instance=True, mig_profile=p).vector_peaks for p in combo]
        for pipe in ("fp64", "fp32", "fp16"):
            own = card.vector_peak_flop_per_second(pipe)
            if own is not None:
                assert math.fsum(v.get(pipe, 0.0) for v in vectors) <= own * (1 + 1e-12)


def test_a_gpu_and_its_instances_count_flops_and_bytes_once(catalog_sampler: Sampler) -> None:
    """dcgm-exporter pages carry the parent GPU and its GPU-I entities: only the instances
    integrate FLOPs and bytes, and the parent shows no roof, so no sum counts the card twice."""
    parent = Entity(0, "GPU-a100", A100_NAME)
    instances = [instance(1, "3g.20gb"), instance(2, "3g.20gb")]
    busy = reading(dram=0.8, tensor=0.93, gr=1.0)
    for ts in range(4):
        catalog_sampler.ingest([Sample(1000.0 + ts, e, busy) for e in (parent, *instances)])
    by_instance = {g.entity.gpu_instance: g for g in catalog_sampler.snapshot.gpus}
    assert by_instance[None].mig_parent
    assert by_instance[None].totals.flop_total is None and by_instance[None].totals.dram_bytes_total is None
    flops = [by_instance[gi].totals.flop_total for gi in (1, 2)]
    assert all(f is not None and f > 0 for f in flops)
    # 3 s of two 3g instances at their wall: never above 3 s of the whole card
    assert math.fsum(f for f in flops if f) <= 3 * A100.peak_flop_per_second("bf16")
    body, _ = MetricsEndpoint(lambda: catalog_sampler.snapshot).render(None)
    text = body.decode()
    # the instances carry a roof (a precision to join the card constants on); the parent none
    roof_lines = [
        line for line in text.splitlines() if line.startswith("ridgeline_gpu_info{") and "precision=" in line
    ]
    assert len(roof_lines) == 2 and all("gpu_instance=" in line for line in roof_lines)
    flop_lines = [line for line in text.splitlines() if line.startswith("ridgeline_flop_total{")]
    assert len(flop_lines) == 2 and all("gpu_instance=" in line for line in flop_lines)


# --- 3. partial readings -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ratios", "regime", "unknown_because"),
    [
        # `dcgmi dmon -e 1001,1004`: GR engine and tensor only
        (dict(gr=0.98, tensor=0.9), "compute_bound", ()),
        (dict(gr=0.98, tensor=0.3), "unknown", ("DCGM_FI_PROF_DRAM_ACTIVE",)),
        (dict(gr=0.02, tensor=0.0), "idle", ()),
        # DRAM alone (dmon -e 1005)
        (dict(dram=0.7), "memory_bound", ()),
        (dict(dram=0.2), "unknown", ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",)),
        (dict(dram=0.005), "idle", ()),
        # activity alone
        (dict(gr=0.01), "idle", ()),
        (dict(gr=0.9), "unknown", ("DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")),
        (dict(sm=0.01), "idle", ()),
        # an FP pipe alone near its wall
        (dict(gr=0.9, fp64=0.9), "compute_bound", ()),
    ],
)
def test_a_partial_reading_gives_the_verdict_its_fields_can(
    ratios: dict[str, float], regime: str, unknown_because: tuple[str, ...]
) -> None:
    state = feed(GPU, A100, reading(**ratios))
    assert state.estimate is not None
    assert state.estimate.regime == regime
    assert state.estimate.unknown_because == unknown_because


def test_no_flop_total_without_a_compute_pipe_and_no_byte_total_without_dram() -> None:
    dram_only = feed(GPU, A100, *[reading(dram=0.7)] * 3)
    assert dram_only.totals.flop_total is None and dram_only.totals.dram_bytes_total == pytest.approx(
        2 * 0.7 * 1.555e12
    )
    tensor_only = feed(GPU, A100, *[reading(gr=0.98, tensor=0.9)] * 3)
    assert tensor_only.totals.dram_bytes_total is None and tensor_only.totals.flop_total == pytest.approx(
        2 * 0.9 * 312e12
    )


optional = st.none() | st.floats(0.0, 1.0)


@settings(max_examples=400, deadline=None)
@given(
    values=st.fixed_dictionaries({name: optional for name in readings.READING_FIELDS}),
    clock=st.floats(0.05, 1.0),
    mig=st.booleans(),
)
def test_a_partial_reading_never_contradicts_the_full_reading_with_neutral_values(
    values: dict[str, float | None], clock: float, mig: bool
) -> None:
    """Neutral values: a missing activity (DRAM, a pipe, SM_ACTIVE) is 0, which adds no evidence.
    GR_ENGINE_ACTIVE is not an amount of work but the idle gate, and 0 there would assert idleness:
    it stays as given. Whatever a partial reading calls (other than unknown), the full reading
    with those zeros calls the same."""
    partial = CounterReading(clock_ratio=clock, **values)
    call = judge_counters(partial, TH, mig_instance=mig)
    if call.regime == "unknown":
        return
    keep = ("gr_engine_active", "sm_occupancy")
    neutral = {name: (v if name in keep or v is not None else 0.0) for name, v in values.items()}
    full = CounterReading(clock_ratio=clock, **neutral)
    assert judge_counters(full, TH, mig_instance=mig).regime == call.regime


@pytest.fixture
def api() -> TestClient:
    return TestClient(create_app(CATALOG))


@pytest.mark.parametrize(
    ("body", "regime", "missing"),
    [
        ({"gr_engine_active": 0.98, "tensor_active": 0.9}, "compute_bound", []),
        ({"dram_active": 0.7}, "memory_bound", []),
        ({"gr_engine_active": 0.9}, "unknown", ["dram_active", "tensor_active"]),
        ({"gr_engine_active": 0.01}, "idle", []),
    ],
)
def test_post_classify_accepts_any_counter_body_with_an_activity_field(
    api: TestClient, body: dict[str, float], regime: str, missing: list[str]
) -> None:
    r = api.post("/classify", json={"card": "a100-sxm4-40gb", **body})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["form"] == "counters" and answer["regime"] == regime
    assert answer["missing"] == missing and answer["reading"] == ("partial" if missing else "ok")
    if "dram_active" not in body:
        assert answer["achieved_bandwidth_bytes_per_second"] is None
    if "tensor_active" not in body:
        assert answer["achieved_flop_per_second"] is None


def test_post_classify_without_an_activity_field_names_them(api: TestClient) -> None:
    r = api.post("/classify", json={"card": "h100-sxm", "sm_occupancy": 0.4, "sm_clock_mhz": 1980})
    assert r.status_code == 422
    assert "at least one activity field" in r.json()["error"] and "dram_active" in r.json()["error"]


def test_post_classify_partial_reading_skips_compare_with_the_reason(api: TestClient) -> None:
    r = api.post("/classify", json={"card": "h100-sxm", "tensor_active": 0.9, "compare": ["a100"]})
    assert r.status_code == 200
    (skipped,) = r.json()["compare_skipped"]
    assert "dram_active" in skipped["reason"]


# --- 4. contradictory readings ---------------------------------------------------------------


def test_gr_engine_stuck_at_zero_while_dram_streams_is_not_idle() -> None:
    # dcgm-exporter issue #662: GR_ENGINE_ACTIVE 0 while GPU_UTIL reads 99 %
    state = feed(GPU, A100, *[reading(gr=0.0, dram=0.7, tensor=0.05, sm=0.9, util=99.0)] * 2)
    estimate = state.estimate
    assert estimate is not None
    assert estimate.regime == "memory_bound" and estimate.gr_engine_contradicted
    assert state.totals.regime_seconds is not None and state.totals.regime_seconds["idle"] == 0.0


@pytest.mark.parametrize(
    "evidence",
    [{"sm_active": 0.5}, {"tensor_active": 0.4}, {"fp32_active": 0.3}, {"dram_active": 0.5}],
    ids=["sm", "tensor", "fp32", "dram"],
)
def test_each_busier_evidence_overrules_an_idle_gr_engine(evidence: dict[str, float]) -> None:
    base = {"gr_engine_active": 0.0, "dram_active": 0.0, "tensor_active": 0.0}
    call = judge_counters(CounterReading(**{**base, **evidence}), TH)
    assert call.gr_engine_contradicted and call.regime != "idle"


def test_light_work_under_an_idle_gr_engine_is_no_contradiction() -> None:
    # SM 4 %, DRAM 3 % and copy-engine traffic do not prove the engine wrong
    for values in (dict(gr=0.03, sm=0.04, dram=0.03, tensor=0.0), dict(gr=0.0, dram=0.3, tensor=0.0)):
        call = judge_counters(
            CounterReading(
                gr_engine_active=values["gr"],
                sm_active=values.get("sm"),
                dram_active=values["dram"],
                tensor_active=values["tensor"],
            ),
            TH,
        )
        assert not call.gr_engine_contradicted and call.regime == "idle"


def test_the_contradiction_is_exported_per_gpu(catalog_sampler: Sampler) -> None:
    stuck, fine = Entity(0, "GPU-stuck", A100_NAME), Entity(1, "GPU-fine", A100_NAME)
    catalog_sampler.ingest(
        [
            Sample(1000.0, stuck, reading(gr=0.0, dram=0.7, tensor=0.05)),
            Sample(1000.0, fine, reading(gr=0.9, dram=0.7, tensor=0.05)),
        ]
    )
    body, _ = MetricsEndpoint(lambda: catalog_sampler.snapshot).render(None)
    rows = {
        line.split('uuid="')[1].split('"')[0]: line.rsplit(" ", 1)[1]
        for line in body.decode().splitlines()
        if line.startswith("ridgeline_gr_engine_contradicted{")
    }
    assert rows == {"GPU-stuck": "1.0"}  # written only where it holds (issue 24.9)


def test_a_mig_instance_whose_gr_tops_out_below_one_is_not_told_to_fuse_kernels() -> None:
    # one busy compute instance of three on a 3g instance: GR and SM_ACTIVE read about 1/3
    values = reading(gr=0.33, sm=0.32, occ=0.4, dram=0.1, tensor=0.05, fp32=0.05)
    mig = feed(instance(1, "3g.20gb"), A100, values)
    whole = feed(GPU, A100, values)
    assert mig.estimate is not None and whole.estimate is not None
    assert mig.estimate.lever == roofline.LEVER_LATENCY_MIG_PARTIAL
    assert whole.estimate.lever == roofline.LEVER_LATENCY_FEW_SMS


# --- 5. busy SMs, idle tensor and DRAM -------------------------------------------------------


def test_busy_sms_without_fp_pipes_ask_for_fields_1006_to_1008_not_cuda_graphs() -> None:
    state = feed(GPU, A100, reading(gr=0.97, sm=0.93, occ=0.45, dram=0.1, tensor=0.02))
    estimate = state.estimate
    assert estimate is not None
    assert estimate.regime == "unknown"
    assert estimate.lever == roofline.LEVER_SMS_BUSY_NO_FP_PIPES
    assert "1006-1008" in estimate.lever and "CUDA graphs" not in estimate.lever
    assert estimate.unknown_because == (
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
    )


def test_busy_sms_with_quiet_fp_pipes_are_latency_bound_on_something_else() -> None:
    state = feed(GPU, A100, reading(gr=0.97, sm=0.93, occ=0.45, dram=0.1, tensor=0.02, fp32=0.1, fp64=0.0))
    assert state.estimate is not None
    assert state.estimate.regime == "latency_bound"
    assert state.estimate.lever == roofline.LEVER_LATENCY_BUSY_SMS
    assert "CUDA graphs" not in state.estimate.lever


def test_few_busy_sms_still_point_at_launch_overhead() -> None:
    state = feed(GPU, A100, reading(gr=0.6, sm=0.3, dram=0.1, tensor=0.02))
    assert state.estimate is not None and state.estimate.lever == roofline.LEVER_LATENCY_STARVED


# --- 9. counters from the first reading --------------------------------------------------


def test_counters_appear_at_zero_with_the_first_reading() -> None:
    state = feed(GPU, A100, reading(dram=0.5, tensor=0.5, gr=0.9))
    totals = state.totals
    assert totals.regime_seconds is not None and set(totals.regime_seconds.values()) == {0.0}
    assert totals.flop_total == 0.0 and totals.dram_bytes_total == 0.0


def test_no_counter_before_any_reading() -> None:
    state = feed(GPU, A100, reading(util=97.0, clock=1410.0))
    assert state.estimate is None
    assert state.totals.regime_seconds is None and state.totals.flop_total is None


@pytest.fixture
def catalog_sampler() -> Sampler:
    return Sampler("scrape", SourceOptions(), CATALOG, CRISP)


def test_counter_reading_validates_partial_input() -> None:
    with pytest.raises(roofline.RooflineInputError, match="dram_active"):
        roofline.check_reading(CounterReading(dram_active=1.5))
    assert not roofline.has_activity(CounterReading(sm_occupancy=0.5))


# --- issue 19: each peak with its clock ------------------------------------------------------

CLOCKED_CARDS = [card for card in CATALOG if card.clock_basis is not None and not card.reference_only]


@settings(max_examples=300, deadline=None)
@given(
    card=st.sampled_from(CLOCKED_CARDS),
    clock=st.floats(min_value=1.0, max_value=4000.0),
    activities=st.fixed_dictionaries(
        {pipe: st.floats(0.0, 1.0) for pipe in ("tensor", "fp64", "fp32", "fp16")}
    ),
)
def test_achieved_flops_never_exceed_the_roof_at_the_reported_clock(
    card: Card, clock: float, activities: dict[str, float]
) -> None:
    gpu = Entity(0, "GPU-clocked", card.nvml_names[0])
    state = feed(gpu, card, reading(dram=0.3, gr=0.9, clock=clock, **activities))
    estimate = state.estimate
    assert estimate is not None and estimate.precision is not None
    achieved = estimate.achieved_flop_per_second
    if achieved is None:  # the counted pipes read 0 while a pipe without a peak is busy: unknown
        assert estimate.uncounted_pipes
        return
    basis, vector_basis = card.peak_clock_mhz(estimate.precision), card.vector_clock_mhz()
    assert basis is not None and vector_basis is not None
    # each pipe's roof at this clock: its peak × min(1, clock / the clock that peak is quoted at)
    roofs = {"tensor": card.peak_flop_per_second(estimate.precision) * min(1.0, clock / basis)}
    for pipe in ("fp64", "fp32", "fp16"):
        vector = card.vector_peak_flop_per_second(pipe)
        if vector is not None:
            roofs[pipe] = vector * min(1.0, clock / vector_basis)
    assert achieved <= math.fsum(activities[p] * roof for p, roof in roofs.items()) * (1 + 1e-9) + 1.0
    # so never above the mix's roof at this clock with every pipe saturated
    assert achieved <= math.fsum(roofs.values()) * (1 + 1e-9)
    assert estimate.compute_roof_flop_per_second is not None
    assert achieved <= estimate.compute_roof_flop_per_second * (1 + 1e-9) + 1.0
    assert estimate.clock_ratio == pytest.approx(min(1.0, clock / basis))


def test_a_h100_gemm_at_a_realistic_clock_is_not_read_7_percent_low() -> None:
    # 90 % tensor at 1755 MHz: 1755 / 1830 of the quoted 989.5 TFLOP/s, not 1755 / 1980
    gpu = Entity(0, "GPU-h100", H100_NAME)
    state = feed(gpu, H100, reading(dram=0.3, tensor=0.9, gr=0.98, clock=1755.0))
    assert state.estimate is not None
    assert state.estimate.achieved_flop_per_second == pytest.approx(0.9 * 989.5e12 * 1755 / 1830)


def test_a_b200_without_a_published_clock_says_so_and_does_not_scale() -> None:
    gpu = Entity(0, "GPU-b200", "NVIDIA B200")
    state = feed(gpu, B200, reading(dram=0.3, tensor=0.9, gr=0.98, clock=1200.0))
    assert state.estimate is not None
    assert state.estimate.clock_ratio is None  # unknown, never a silent 1.0
    assert state.estimate.achieved_flop_per_second == pytest.approx(0.9 * B200.peak_flop_per_second("bf16"))


# --- issue 19: unknown is not zero -----------------------------------------------------------


def test_tensor_at_zero_with_the_fp_pipes_unreported_is_unknown_not_zero() -> None:
    # dcgm-exporter's default field list (1001-1005): an FP32 elementwise kernel shows tensor 0
    gpu = Entity(0, "GPU-h100", H100_NAME)
    state = feed(gpu, H100, reading(dram=0.6, tensor=0.0, gr=0.95, sm=0.9))
    estimate = state.estimate
    assert estimate is not None
    assert estimate.achieved_flop_per_second is None and estimate.intensity_flop_per_byte is None
    assert estimate.position is None and estimate.uncounted_pipes == ("fp64", "fp32", "fp16")
    assert estimate.achieved_bandwidth_bytes_per_second == pytest.approx(0.6 * 3.35e12)
    sampler = Sampler("replay", SourceOptions(), CATALOG, CRISP)
    sampler.ingest([Sample(1000.0, gpu, reading(dram=0.6, tensor=0.0, gr=0.95, sm=0.9))])
    body, _ = MetricsEndpoint(lambda: sampler.snapshot).render(None)
    text = body.decode()
    assert "ridgeline_arithmetic_intensity_flop_per_byte{" not in text  # no series, not a 0
    assert "ridgeline_dram_bytes_total{" in text


def test_all_pipes_reported_at_zero_is_a_known_zero() -> None:
    gpu = Entity(0, "GPU-h100", H100_NAME)
    state = feed(gpu, H100, reading(dram=0.6, tensor=0.0, gr=0.95, fp64=0.0, fp32=0.0, fp16=0.0))
    assert state.estimate is not None and state.estimate.uncounted_pipes == ()
    assert state.estimate.achieved_flop_per_second == 0.0 and state.estimate.intensity_flop_per_byte == 0.0


def test_some_pipes_give_a_lower_bound_and_the_answer_says_so() -> None:
    client = TestClient(create_app(catalog=CATALOG))
    body = {"card": "h100", "dram_active": 0.3, "tensor_active": 0.5, "gr_engine_active": 0.9}
    answer = client.post("/classify", json=body).json()
    assert answer["flops_lower_bound"] is True and answer["uncounted_pipes"] == ["fp64", "fp32", "fp16"]
    assert answer["achieved_flop_per_second"] == pytest.approx(0.5 * 989.5e12)
    every_pipe = {**body, "fp64_active": 0, "fp32_active": 0, "fp16_active": 0}
    full = client.post("/classify", json=every_pipe).json()
    assert full["flops_lower_bound"] is False and full["uncounted_pipes"] == []
    zero = client.post("/classify", json={**body, "tensor_active": 0.0}).json()
    assert zero["achieved_flop_per_second"] is None and zero["intensity_flop_per_byte"] is None
    assert zero["flops_lower_bound"] is False


def test_a_busy_pipe_without_a_peak_on_the_card_is_uncounted() -> None:
    # B200 publishes no CUDA-core FP16 figure: its FP16 pipe's FLOPs cannot be counted
    gpu = Entity(0, "GPU-b200", "NVIDIA B200")
    state = feed(gpu, B200, reading(dram=0.2, tensor=0.1, gr=0.9, fp64=0.0, fp32=0.1, fp16=0.6))
    assert state.estimate is not None and state.estimate.uncounted_pipes == ("fp16",)


# --- issue 19: levers per pipe and precision -------------------------------------------------


def _dgemm(**more: float) -> dict[int, float | None]:
    values = reading(dram=0.3, tensor=0.9, gr=0.98, sm=0.95, **more)
    values[fields.PIPE_TENSOR_DFMA_ACTIVE] = 0.9  # DFMA busiest: the tensor cores run FP64
    return values


def test_an_fp64_dgemm_at_its_roof_is_not_told_to_use_fp8() -> None:
    state = feed(GPU, A100, _dgemm(), config=InferenceConfig(smoothing_seconds=0.0, dwell_seconds=0.0))
    estimate = state.estimate
    assert estimate is not None and estimate.precision == "fp64_tensor"
    assert estimate.regime == "compute_bound" and estimate.pipe == "tensor"
    assert estimate.lever == roofline.LEVER_COMPUTE_FP64_TENSOR
    assert "fp8" not in estimate.lever and "int8" not in estimate.lever


FP64_READINGS = [
    dict(dram=0.3, tensor=0.0, gr=0.97, sm=0.95, fp64=0.85),  # compute-bound on the FP64 pipe
    dict(dram=0.7, tensor=0.0, gr=0.97, sm=0.9, fp64=0.2),  # a memory-bound FP64 stencil
    dict(dram=0.55, tensor=0.0, gr=0.97, sm=0.9, fp64=0.55, fp32=0.0, fp16=0.0),
]


@pytest.mark.parametrize("ratios", FP64_READINGS)
@pytest.mark.parametrize("card", [A100, H100, B200], ids=lambda c: c.key)
def test_fp64_work_on_any_card_in_any_regime_never_hears_fp8(ratios: dict[str, float], card: Card) -> None:
    state = feed(Entity(0, "GPU-x", card.nvml_names[0]), card, reading(**ratios))
    assert state.estimate is not None and state.estimate.pipe == "fp64"
    lever = state.estimate.lever
    assert "fp8" not in lever and "int8" not in lever, (state.estimate.regime, lever)


@pytest.mark.parametrize(
    ("key", "precision", "lever"),
    [
        ("a100", "bf16", roofline.LEVER_COMPUTE_NO_FP8),  # Ampere has no fp8
        ("h100", "bf16", roofline.LEVER_COMPUTE),
        ("h100", "tf32", roofline.LEVER_COMPUTE_TF32),
        ("h100", "fp8", roofline.LEVER_COMPUTE_LOWEST),  # no fp4 on Hopper
        ("b200", "fp8", roofline.LEVER_COMPUTE_FP8),  # Blackwell has fp4
        ("b200", "fp4", roofline.LEVER_COMPUTE_LOWEST),
        ("a100", "fp64_tensor", roofline.LEVER_COMPUTE_FP64_TENSOR),
    ],
)
def test_each_tensor_precisions_compute_lever_fits_it(key: str, precision: str, lever: str) -> None:
    client = TestClient(create_app(catalog=CATALOG))
    body = {
        "card": key,
        "precision": precision,
        "dram_active": 0.2,
        "tensor_active": 0.9,
        "gr_engine_active": 0.97,
    }
    answer = client.post("/classify", json=body).json()
    assert answer["regime"] == "compute_bound" and answer["lever"] == lever


@pytest.mark.parametrize(
    ("precision", "lever"), [("fp64", roofline.LEVER_FP64_PIPE), ("fp32", roofline.LEVER_FP32_PIPE)]
)
def test_a_compute_bound_kernel_at_a_cuda_core_precision_gets_that_pipes_lever(
    precision: str, lever: str
) -> None:
    client = TestClient(create_app(catalog=CATALOG))
    answer = client.post(
        "/classify", json={"card": "a100", "precision": precision, "flops": 1e13, "bytes": 1e9}
    ).json()
    assert answer["regime"] == "compute_bound" and answer["lever"] == lever
    memory = client.post(
        "/classify", json={"card": "a100", "precision": "fp64", "flops": 1e9, "bytes": 1e10}
    ).json()
    assert memory["regime"] == "memory_bound" and memory["lever"] == roofline.LEVER_MEMORY_FP64
