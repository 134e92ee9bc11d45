"""POST /classify and /cards through the app (TestClient): forms, fields, compare, errors."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import COMMON_FIELDS, COUNTER_FIELDS, KERNEL_FIELDS
from fastapi import APIRouter
from fastapi.testclient import TestClient

from exporter.catalog import Catalog
from exporter.roofline import Thresholds
from exporter.web.app import create_app


@pytest.fixture(scope="module")
def client(catalog: Catalog) -> TestClient:
    return TestClient(create_app(catalog))


def post(client: TestClient, body: Any) -> Any:
    return client.post("/classify", json=body)


def assert_error(response: Any, status: int, field: str | None, *words: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["field"] == field, body
    assert isinstance(body["detail"], list) and body["detail"]
    for word in words:
        assert word in body["error"], body
    return dict(body)


def test_kernel_form_answers_the_design_check(client: TestClient) -> None:
    r = post(client, {"card": "h100-sxm", "precision": "bf16", "flops": 4e12, "bytes": 40e9})
    assert r.status_code == 200
    body = r.json()
    assert set(body) >= COMMON_FIELDS | KERNEL_FIELDS
    assert body["card"] == "h100-sxm"
    assert body["regime"] == "memory_bound"
    assert body["intensity_flop_per_byte"] == pytest.approx(100)
    assert body["ridge_flop_per_byte"] == pytest.approx(295.37, rel=1e-3)
    assert body["memory_time_seconds"] == pytest.approx(11.94e-3, rel=1e-3)
    assert body["attainable_flop_per_second"] == pytest.approx(335e12)
    assert body["fraction_of_peak"] == pytest.approx(0.3386, rel=1e-3)


def test_card_may_be_given_by_nvml_name(client: TestClient) -> None:
    r = post(client, {"card": "nvidia h200", "flops": 1e12, "bytes": 1e9})
    assert r.json()["card"] == "h200"


def test_custom_card_in_flop_per_second_and_bytes_per_second(client: TestClient) -> None:
    r = post(client, {"peak_flops": 1e15, "bandwidth": 1e12, "flops": 1e12, "bytes": 1e10})
    body = r.json()
    assert body["card"] == "custom"
    assert body["ridge_flop_per_byte"] == pytest.approx(1000)
    assert body["regime"] == "memory_bound"
    assert body["floor_time_seconds"] == pytest.approx(0.01)


def test_gemm_operation_derives_flops_and_bytes(client: TestClient) -> None:
    r = post(client, {"card": "h100", "op": "gemm", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"})
    body = r.json()
    assert set(body) >= COMMON_FIELDS | KERNEL_FIELDS
    assert body["flops"] == 2 * 8192**3
    assert body["bytes"] == 2 * 3 * 8192**2
    assert body["regime"] == "compute_bound"
    assert body["operation"]["op"] == "gemm"


def test_integral_floats_are_accepted_for_dimensions(client: TestClient) -> None:
    r = post(client, {"card": "h100", "op": "gemm", "m": 1.0, "n": 4096.0, "k": 4096})
    assert r.status_code == 200
    assert r.json()["regime"] == "memory_bound"  # a gemv


def test_elementwise_operation_in_fp32(client: TestClient) -> None:
    body = post(client, {"card": "a100", "op": "elementwise", "n": 1 << 28, "dtype": "fp32"}).json()
    assert body["precision"] == "fp32"
    assert body["intensity_flop_per_byte"] == pytest.approx(1 / 8)
    assert body["regime"] == "memory_bound"


def test_decode_with_int8_weights_and_bf16_math(client: TestClient) -> None:
    body = post(
        client,
        {
            "card": "h100",
            "op": "decode",
            "parameters": 70e9,
            "batch": 16,
            "dtype": "int8",
            "precision": "bf16",
        },
    ).json()
    assert body["precision"] == "bf16"
    assert body["operation"]["element_bytes"] == 1
    assert body["intensity_flop_per_byte"] == pytest.approx(32)


def test_default_precision_on_a_card_without_bf16_uses_fp16(client: TestClient) -> None:
    body = post(client, {"card": "v100", "flops": 1e12, "bytes": 1e9}).json()
    assert body["precision"] == "fp16"
    assert body["precision_source"] == "default_substitute"


def test_counter_form_fields_and_clock_ratio(client: TestClient) -> None:
    r = post(
        client,
        {
            "card": "NVIDIA H100 80GB HBM3",
            "dram_active": 0.72,
            "tensor_active": 0.18,
            "gr_engine_active": 0.97,
            "sm_clock_mhz": 915,
        },
    )
    body = r.json()
    assert set(body) >= COMMON_FIELDS | COUNTER_FIELDS
    # 989.5 TFLOP/s bf16 is quoted at 1830 MHz (132 SMs x 4096 FLOP/clock), the FP pipes at 1980
    assert body["clock_ratio"] == pytest.approx(0.5) and body["peak_clock_mhz"] == 1830
    assert body["vector_clock_ratio"] == pytest.approx(915 / 1980)
    assert body["clock_note"] is None
    assert body["flop_utilization"] == pytest.approx(0.09)
    assert body["regime"] == "memory_bound"
    assert body["achieved_bandwidth_bytes_per_second"] == pytest.approx(0.72 * 3.35e12)
    assert "workload mix" in body["note"]


@pytest.mark.parametrize(
    ("body", "note"),
    [
        ({"card": "b200", "sm_clock_mhz": 1200}, "card b200 has no clock basis"),
        ({"card": "h100"}, "no sm_clock_mhz given"),
        ({"peak_flops": 1e15, "bandwidth": 3e12, "sm_clock_mhz": 1200}, "custom roof"),
    ],
)
def test_a_verdict_without_a_clock_basis_says_so_not_a_silent_one(
    client: TestClient, body: dict[str, object], note: str
) -> None:
    answer = post(client, {**body, "dram_active": 0.1, "tensor_active": 0.9, "gr_engine_active": 0.95}).json()
    assert answer["clock_ratio"] is None and answer["vector_clock_ratio"] is None
    assert note in answer["clock_note"]
    # FLOP/s at the quoted clock, an upper bound, as the note says
    assert answer["achieved_flop_per_second"] == pytest.approx(0.9 * answer["peak_flop_per_second"])


def test_counter_precision_from_the_dominant_tensor_pipe(client: TestClient) -> None:
    body = post(client, {"card": "h100", "dram_active": 0.2, "tensor_active": 0.7, "imma_active": 0.6}).json()
    assert body["precision"] == "int8"
    assert body["precision_source"] == "tensor_pipes"
    assert body["peak_flop_per_second"] == pytest.approx(1979e12)


def test_counter_thresholds_override_per_request(client: TestClient) -> None:
    base = {"card": "h100", "dram_active": 0.4, "tensor_active": 0.05, "gr_engine_active": 0.9}
    assert post(client, base).json()["regime"] == "latency_bound"
    body = post(client, {**base, "thresholds": {"theta": 0.5}}).json()
    assert body["regime"] == "memory_bound"
    assert body["thresholds"]["theta"] == 0.5


def test_server_thresholds_and_precision_default_apply(catalog: Catalog) -> None:
    client = TestClient(create_app(catalog, precision_default="fp8", thresholds=Thresholds(theta=0.5)))
    body = client.post("/classify", json={"card": "h100", "dram_active": 0.4, "tensor_active": 0.05}).json()
    assert body["precision"] == "fp8"
    assert body["regime"] == "memory_bound"


def test_compare_places_the_same_kernel_on_other_cards(client: TestClient) -> None:
    body = post(
        client, {"card": "h100", "flops": 4e12, "bytes": 40e9, "compare": ["h200", "t4", "h100-sxm"]}
    ).json()
    rows = {row["card"]: row for row in body["compare"]}
    assert set(rows) == {"h200"}  # itself left out, t4 has no bf16
    assert rows["h200"]["floor_time_seconds"] == pytest.approx(40e9 / 4.8e12)
    assert rows["h200"]["speedup"] == pytest.approx(4.8 / 3.35)
    assert body["compare_skipped"][0]["card"] == "t4"
    assert "fp16" in body["compare_skipped"][0]["reason"]


def test_compare_marks_a_reversed_verdict(client: TestClient) -> None:
    # I = 250: memory-bound on H100 (ridge 295), compute-bound on H200 (ridge 206)
    body = post(client, {"card": "h100", "flops": 250e9, "bytes": 1e9, "compare": ["h200"]}).json()
    assert body["regime"] == "memory_bound"
    assert body["compare"][0]["regime"] == "compute_bound"
    assert body["compare"][0]["reverses"] is True


def test_compare_all_covers_the_catalog(client: TestClient, catalog: Catalog) -> None:
    body = post(client, {"card": "h100", "flops": 1e12, "bytes": 1e9, "compare": "all"}).json()
    listed = {row["card"] for row in body["compare"]} | {s["card"] for s in body["compare_skipped"]}
    assert listed == set(catalog.keys()) - {"h100-sxm"}


def test_counter_compare_uses_a_one_second_kernel(client: TestClient) -> None:
    body = post(
        client, {"card": "h100", "dram_active": 0.8, "tensor_active": 0.1, "compare": ["h200"]}
    ).json()
    row = body["compare"][0]
    assert row["floor_time_seconds"] == pytest.approx(0.8 * 3.35 / 4.8)


def test_unknown_compare_card_is_404_with_its_index(client: TestClient) -> None:
    r = post(client, {"card": "h100", "flops": 1e12, "bytes": 1e9, "compare": ["h200", "h2000"]})
    body = assert_error(r, 404, "compare[1]", "h2000")
    assert "h200" in body["suggestions"]


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "word"),
    [
        ({"card": "h100", "flops": -1, "bytes": 1e9}, "flops", "greater than 0"),
        ({"card": "h100", "flops": 1e12, "bytes": 0}, "bytes", "greater than 0"),
        ({"card": "h100", "flops": "1e12", "bytes": 1e9}, "flops", "valid number"),
        ({"card": "h100", "flops": True, "bytes": 1e9}, "flops", "valid number"),
        ({"card": "h100", "flops": 1e31, "bytes": 1e9}, "flops", "1e+30"),
        ({"card": "h100", "flops": 1e12, "bytes": 1e9, "precision": "fp12"}, "precision", "bf16"),
        ({"card": "h100", "op": "conv", "n": 5}, "op", "gemm"),
        ({"card": "h100", "op": "gemm", "m": 5, "n": 5}, "k", "requires"),
        ({"card": "h100", "op": "gemm", "m": 2**40, "n": 2**40, "k": 2**20}, "op", "limit"),
        ({"card": "h100", "op": "decode", "parameters": 7e9, "batch": 1, "m": 3}, "m", "does not apply"),
        (
            {"card": "h100", "dram_active": 1.5, "tensor_active": 0.1},
            "dram_active",
            "at most 1",
        ),
        (
            {"card": "h100", "dram_active": 0.5, "tensor_active": 0.1, "thresholds": {"theta": 0}},
            "thresholds.theta",
            "greater than 0",
        ),
        ({"card": "h100", "flops": 1e12, "bytes": 1e9, "flopz": 3}, "flopz", "unknown field"),
        ({"flops": 1e12, "bytes": 1e9}, "card", "card is required"),
        ({"peak_flops": 1e15, "flops": 1e12, "bytes": 1e9}, "bandwidth", "bandwidth"),
        (
            {"card": "h100", "peak_flops": 1e15, "bandwidth": 1e12, "flops": 1, "bytes": 1},
            "peak_flops",
            "not both",
        ),
        ({"card": "h100", "flops": 1e12, "bytes": 1e9, "compare": "some"}, "compare", '"all"'),
        ({"card": "h100"}, None, "none of the three forms"),
    ],
)
def test_bad_fields_get_422_naming_field_and_rule(
    client: TestClient, body: Any, field: str, word: str
) -> None:
    assert_error(post(client, body), 422, field, word)


def test_json_nan_literal_is_refused_naming_the_field(client: TestClient) -> None:
    for literal in ("NaN", "Infinity", "-Infinity", "1e999"):
        r = client.post(
            "/classify",
            content=f'{{"card": "h100", "flops": {literal}, "bytes": 1e9}}',
            headers={"content-type": "application/json"},
        )
        assert_error(r, 422, "flops", "finite")


def test_unknown_precision_for_the_card_lists_what_it_has(client: TestClient) -> None:
    body = assert_error(
        post(client, {"card": "t4", "precision": "fp8", "flops": 1, "bytes": 1}), 422, "precision"
    )
    assert body["available"] == ["fp32", "fp16", "int8"]


def test_ambiguous_body_names_both_forms(client: TestClient) -> None:
    r = post(client, {"card": "h100", "flops": 1e12, "bytes": 1e9, "dram_active": 0.5, "tensor_active": 0.1})
    body = assert_error(r, 422, "dram_active", "kernel", "counters")
    assert {d["field"] for d in body["detail"]} == {"flops", "bytes", "dram_active", "tensor_active"}


def test_unknown_card_is_404_with_near_matches(client: TestClient) -> None:
    body = assert_error(
        post(client, {"card": "H100 SXM", "flops": 1, "bytes": 1}), 404, "card", "did you mean"
    )
    assert body["suggestions"]


def test_overflowing_custom_roof_is_422_not_500(client: TestClient) -> None:
    r = post(client, {"peak_flops": 1e-300, "bandwidth": 1e21, "flops": 1e30, "bytes": 1e30})
    assert_error(r, 422, None, "overflow")


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (b"", 400),
        (b"{", 400),
        (b"\xff\xfe\x00", 400),
        (b"[1, 2]", 422),
        (b'"text"', 422),
        (b"[" * 5000, 400),
        (b"1" * 5000, 400),
    ],
)
def test_not_a_json_object(client: TestClient, content: bytes, status: int) -> None:
    r = client.post("/classify", content=content, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    assert "error" in r.json()


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_wrong_content_type_is_415(client: TestClient, content_type: str | None) -> None:
    headers = {"content-type": content_type} if content_type else {}
    r = client.post("/classify", content=b'{"card": "h100", "flops": 1, "bytes": 1}', headers=headers)
    assert_error(r, 415, "content-type", "application/json")


def test_json_with_charset_is_accepted(client: TestClient) -> None:
    r = client.post(
        "/classify",
        content=b'{"card": "h100", "flops": 1, "bytes": 1}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert r.status_code == 200


def test_oversized_body_is_413(client: TestClient) -> None:
    r = client.post("/classify", content=b" " * (64 * 1024 + 1), headers={"content-type": "application/json"})
    assert_error(r, 413, "(body)", "limit")


# --- cards, landing, health, live router -----------------------------------------------------------


def test_cards_lists_every_card_in_si_units(client: TestClient, catalog: Catalog) -> None:
    cards = client.get("/cards").json()
    assert [c["key"] for c in cards] == catalog.keys()
    h100 = next(c for c in cards if c["key"] == "h100-sxm")
    assert h100["peak_flop_per_second"]["bf16"] == pytest.approx(989.5e12)
    assert h100["ridge_flop_per_byte"]["bf16"] == pytest.approx(295.37, rel=1e-3)


@pytest.mark.parametrize("name", ["h100-sxm", "h100", "NVIDIA H100 80GB HBM3"])
def test_card_by_key_alias_or_nvml_name(client: TestClient, name: str) -> None:
    r = client.get(f"/cards/{name}")
    assert r.status_code == 200
    assert r.json()["key"] == "h100-sxm"


def test_unknown_card_path_is_404_with_suggestions(client: TestClient) -> None:
    body = assert_error(client.get("/cards/h10"), 404, "key", "h10")
    assert "h100" in body["suggestions"]


def test_landing_links_everything(client: TestClient) -> None:
    r = client.get("/")
    assert r.headers["content-type"].startswith("text/html")
    for path in ("/metrics", "/classify", "/cards", "/docs", "/healthz", "/readyz"):
        assert f'href="{path}"' in r.text


def test_healthz(client: TestClient) -> None:
    r = client.get("/healthz")
    assert (r.status_code, r.text.strip()) == (200, "ok")


def test_unknown_route_and_method_use_the_error_shape(client: TestClient) -> None:
    assert_error(client.get("/nope"), 404, None, "/nope")
    r = client.put("/classify")
    assert_error(r, 405, None)
    assert "POST" in r.headers["allow"]


def test_openapi_documents_the_three_forms_with_examples(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    body = schema["paths"]["/classify"]["post"]["requestBody"]["content"]["application/json"]
    refs = {item["$ref"].rsplit("/", 1)[-1] for item in body["schema"]["oneOf"]}
    assert refs == {"KernelBody", "OperationBody", "CounterBody"}
    assert refs <= set(schema["components"]["schemas"])
    assert {"kernel", "operation", "counters", "custom_card", "compare"} <= set(body["examples"])


def test_openapi_examples_are_valid_bodies(client: TestClient) -> None:
    body = client.get("/openapi.json").json()["paths"]["/classify"]["post"]["requestBody"]
    for name, example in body["content"]["application/json"]["examples"].items():
        assert post(client, example["value"]).status_code == 200, name


def test_live_router_is_mounted_beside_post_classify(catalog: Catalog) -> None:
    live = APIRouter()

    @live.get("/classify")
    async def live_classify() -> dict[str, str]:
        return {"live": "yes"}

    client = TestClient(create_app(catalog, live_router=live))
    assert client.get("/classify").json() == {"live": "yes"}
    assert post(client, {"card": "h100", "flops": 1, "bytes": 1}).status_code == 200


def test_create_app_refuses_an_unknown_default_precision(catalog: Catalog) -> None:
    with pytest.raises(ValueError, match="fp12"):
        create_app(catalog, precision_default="fp12")


@pytest.mark.parametrize(
    ("peak", "bandwidth"), [(1e24, 5e-324), (5e-324, 5e-324)], ids=["ridge-overflow", "subnormal"]
)
def test_counter_form_on_a_subnormal_custom_roof_is_never_500(
    client: TestClient, peak: float, bandwidth: float
) -> None:
    response = client.post(
        "/classify",
        json={"peak_flops": peak, "bandwidth": bandwidth, "dram_active": 0.5, "tensor_active": 0.5},
    )
    assert response.status_code in (200, 422), response.text
    assert "NaN" not in response.text and "Infinity" not in response.text


def test_a_power_capped_gemm_names_the_cause_and_what_the_clock_gives_back(client: TestClient) -> None:
    body = {
        "card": "h100",
        "dram_active": 0.3,
        "tensor_active": 0.85,
        "gr_engine_active": 0.99,
        "sm_clock_mhz": 1185,
        "clock_event_reasons": 0x4 | 0x1,  # SW power cap; GPU idle is no cause
        "power_usage_watts": 699.4,
        "power_limit_watts": 700,
    }
    answer = post(client, body).json()
    assert answer["regime"] == "compute_bound"  # at its wall at 1185 MHz, not latency-bound
    assert answer["clock_event_reasons"] == ["sw_power_cap"] and answer["clock_causes"] == ["power cap"]
    assert "gives back up to 54% more FLOP/s" in answer["lever"] and "nvidia-smi -pl" in answer["lever"]
    # the draw at its limit names the power cap without field 112
    no_bits = post(client, {k: v for k, v in body.items() if k != "clock_event_reasons"}).json()
    assert no_bits["clock_causes"] == ["power cap"]
    unknown = post(client, {k: v for k, v in body.items() if not k.startswith(("clock_", "power_"))}).json()
    assert unknown["clock_causes"] == [] and "cause not reported" in unknown["lever"]
    full = post(client, {**body, "sm_clock_mhz": 1830}).json()
    assert "reduced clock" not in full["lever"]
