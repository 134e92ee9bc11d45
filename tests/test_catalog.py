"""The card catalog: the required entries and figures (docs/design.md, "Card catalog"), lookup by any
name, user files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pydantic import BaseModel

from exporter.catalog import Catalog, CatalogError, UnknownCard, UnknownPrecision, load_catalog

# key: (bf16-or-fp16 dense TFLOP/s, fp8 dense TFLOP/s or None, TB/s, NVML names): the required cards
REQUIRED: dict[str, tuple[float, float | None, float, tuple[str, ...]]] = {
    "v100-sxm2": (125, None, 0.90, ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB")),
    "t4": (65, None, 0.32, ("Tesla T4",)),
    "a10": (125, None, 0.60, ("NVIDIA A10", "NVIDIA A10G")),
    "a30": (165, None, 0.933, ("NVIDIA A30",)),
    "a100-sxm4-40gb": (312, None, 1.555, ("NVIDIA A100-SXM4-40GB",)),
    "a100-sxm4-80gb": (312, None, 2.039, ("NVIDIA A100-SXM4-80GB",)),
    "a100-pcie-40gb": (312, None, 1.555, ("NVIDIA A100-PCIE-40GB",)),
    "a100-pcie-80gb": (312, None, 1.935, ("NVIDIA A100 80GB PCIe",)),
    "a800-sxm4-80gb": (312, None, 2.039, ("NVIDIA A800-SXM4-80GB",)),
    "a800-pcie-80gb": (312, None, 1.935, ("NVIDIA A800 80GB PCIe",)),
    "a40": (149.7, None, 0.696, ("NVIDIA A40",)),
    "l4": (121, 242.5, 0.30, ("NVIDIA L4",)),
    "l40": (181.05, 362, 0.864, ("NVIDIA L40",)),
    "l40s": (362, 733, 0.864, ("NVIDIA L40S",)),
    "rtx-6000-ada": (364.2, 728.5, 0.96, ("NVIDIA RTX 6000 Ada Generation",)),
    "rtx-pro-6000-blackwell-server": (500, 1000, 1.597, ("NVIDIA RTX PRO 6000 Blackwell Server Edition",)),
    "h100-sxm": (989.5, 1979, 3.35, ("NVIDIA H100 80GB HBM3",)),
    "h100-pcie": (756, 1513, 2.0, ("NVIDIA H100 PCIe",)),
    "h100-nvl": (835.5, 1670.5, 3.9, ("NVIDIA H100 NVL",)),
    "h800-sxm": (989.5, 1979, 3.35, ("NVIDIA H800",)),
    "h800-pcie": (756, 1513, 2.0, ("NVIDIA H800 PCIe",)),
    "h20": (148, 296, 4.0, ("NVIDIA H20",)),
    "h200": (989.5, 1979, 4.8, ("NVIDIA H200",)),
    "h200-nvl": (835.5, 1670.5, 4.8, ("NVIDIA H200 NVL",)),
    "gh200": (989.5, 1979, 4.0, ("NVIDIA GH200 480GB",)),
    "gh200-144g": (989.5, 1979, 4.9, ("NVIDIA GH200 144G HBM3e",)),
    "b200": (2250, 4500, 7.7, ("NVIDIA B200",)),  # the cited HGX table; DGX B200 says 8.0
    "gb200": (2500, 5000, 8.0, ("NVIDIA GB200",)),
    "b300": (2250, 4500, 8.0, ("NVIDIA B300 SXM6 AC",)),
    "gb300": (2500, 5000, 8.0, ("NVIDIA GB300",)),
    "mi300x": (1307.4, 2614.9, 5.3, ()),
    "mi325x": (1307.4, 2614.9, 6.0, ()),
    "mi355x": (2516.6, 5033.2, 8.0, ()),
    "tpu-v5e": (197, None, 0.819, ()),
    "tpu-v5p": (459, None, 2.765, ()),
    "tpu-v6e": (918, None, 1.638, ()),
}
REFERENCE_ONLY = ("mi300x", "mi325x", "mi355x", "tpu-v5e", "tpu-v5p", "tpu-v6e")


def test_the_catalog_holds_at_least_35_cards(catalog: Catalog) -> None:
    assert len(catalog) >= 35


@pytest.mark.parametrize("key", sorted(REQUIRED))
def test_required_card_has_the_design_figures(catalog: Catalog, key: str) -> None:
    half, fp8, tbps, nvml_names = REQUIRED[key]
    card = catalog.get(key)
    assert card is not None, f"{key} missing from the catalog"
    tensor = "bf16" if "bf16" in card.peak_tflops else "fp16"
    assert card.peak_tflops[tensor] == pytest.approx(half)
    if fp8 is None:
        assert "fp8" not in card.peak_tflops
    else:
        assert card.peak_tflops["fp8"] == pytest.approx(fp8)
    assert card.bandwidth_tbps == pytest.approx(tbps)
    for name in nvml_names:
        assert catalog.lookup(name).key == key
    assert card.source.startswith("https://")


def test_reference_only_cards_match_no_gpu(catalog: Catalog) -> None:
    for key in REFERENCE_ONLY:
        card = catalog.lookup(key)
        assert card.reference_only
        assert card.nvml_names == [] and card.nvml_patterns == []
        assert card.vendor in ("amd", "google")


@pytest.mark.parametrize(
    "spelling", ["nvidia h100 80gb hbm3", "NVIDIA H100 80GB HBM3", "  NVIDIA H100 80GB HBM3 "]
)
def test_nvml_name_lookup_ignores_case_and_padding(catalog: Catalog, spelling: str) -> None:
    assert catalog.lookup(spelling).key == "h100-sxm"


@pytest.mark.parametrize(
    ("alias", "key"), [("h100", "h100-sxm"), ("a100", "a100-sxm4-80gb"), ("a10g", "a10")]
)
def test_aliases_find_their_card(catalog: Catalog, alias: str, key: str) -> None:
    assert catalog.lookup(alias).key == key


@pytest.mark.parametrize(
    ("name", "key"),
    [
        # the 144 GB HBM3e part is not the 96 GB part: 4.9 TB/s, not 4.0
        ("NVIDIA GH200 144G HBM3e", "gh200-144g"),
        ("NVIDIA GH200 144GB HBM3e", "gh200-144g"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("NVIDIA GH200 120GB", "gh200"),
        ("NVIDIA B300 SXM6 AC", "b300"),
        ("NVIDIA B300", "b300"),
    ],
)
def test_an_nvml_pattern_matches_a_variant_name(catalog: Catalog, name: str, key: str) -> None:
    assert catalog.lookup(name).key == key


def test_the_gh200_parts_keep_their_own_bandwidth(catalog: Catalog) -> None:
    hbm3e = catalog.lookup("NVIDIA GH200 144G HBM3e")
    hbm3 = catalog.lookup("NVIDIA GH200 480GB")
    assert (hbm3e.bandwidth_tbps, hbm3.bandwidth_tbps) == (4.9, 4.0)


def test_unknown_card_suggests_near_matches(catalog: Catalog) -> None:
    with pytest.raises(UnknownCard) as caught:
        catalog.lookup("h100-sxm4")
    assert "h100-sxm" in caught.value.suggestions
    assert "did you mean" in str(caught.value)
    assert catalog.find_by_nvml_name("NVIDIA Imaginary 9000") is None


def test_missing_precision_lists_what_the_card_has(catalog: Catalog) -> None:
    with pytest.raises(UnknownPrecision) as caught:
        catalog.lookup("t4").roof("fp8")
    assert caught.value.available == ["fp32", "fp16", "int8"]
    assert "fp16" in str(caught.value)


def test_ridge_comes_from_peak_and_bandwidth(catalog: Catalog) -> None:
    roof = catalog.lookup("h100-sxm").roof("bf16")
    assert roof.ridge_flop_per_byte == pytest.approx(989.5 / 3.35)


def test_a_card_holds_plain_records_and_only_its_spec_is_pydantic(catalog: Catalog) -> None:
    """The model reads frozen records; the validated entry stays on `spec` (for GET /cards)."""
    for card in catalog:
        for part in dataclasses.fields(card):
            value = getattr(card, part.name)
            assert isinstance(value, BaseModel) == (part.name == "spec"), (card.key, part.name)
    card = catalog.lookup("h100-sxm")
    assert card.mig is not None and card.clock_basis is not None and card.links is not None
    assert card.links.bytes_per_second("nvlink") == card.link_bytes_per_second("nvlink") == 450e9
    assert card.clock_basis.peak_mhz("bf16") == card.peak_clock_mhz("bf16") == 1830.0


USER_FILE = """
cards:
  - key: h100-sxm
    name: NVIDIA H100 SXM5 80GB (derated)
    nvml_names: ["NVIDIA H100 80GB HBM3"]
    peak_tflops: {bf16: 700}
    bandwidth_tbps: 3.0
    source: https://example.com/our-measurements
  - key: lab-card
    name: Lab accelerator
    vendor: other
    nvml_names: ["Lab Accelerator X1"]
    peak_tflops: {bf16: 100, fp8: 200}
    bandwidth_tbps: 1.0
    source: https://example.com/x1
"""


def test_user_file_overrides_by_key_and_adds_cards(tmp_path: Path) -> None:
    path = tmp_path / "cards.yaml"
    path.write_text(USER_FILE)
    catalog = load_catalog([path])
    assert catalog.lookup("NVIDIA H100 80GB HBM3").peak_tflops == {"bf16": 700}
    assert catalog.lookup("lab accelerator x1").key == "lab-card"
    assert catalog.lookup("h200").key == "h200"  # built-ins stay


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "cards:\n  - key: Bad_Key\n    name: x\n    peak_tflops: {bf16: 1}\n    bandwidth_tbps: 1\n"
            "    source: https://e.com\n",
            ["entry 'Bad_Key'", "field key"],
        ),
        (
            "cards:\n  - key: ok\n    name: x\n    peak_tflops: {bf16: -1}\n    bandwidth_tbps: 1\n"
            "    source: https://e.com\n",
            ["entry 'ok'", "peak_tflops.bf16"],
        ),
        (
            "cards:\n  - key: ok\n    name: x\n    peak_tflops: {fp12: 1}\n    bandwidth_tbps: 1\n"
            "    source: https://e.com\n",
            ["entry 'ok'", "fp12"],
        ),
        (
            "cards:\n  - key: ok\n    name: x\n    peak_tflops: {bf16: 1}\n    source: https://e.com\n",
            ["entry 'ok'", "bandwidth_tbps"],
        ),
        ("cards: [\n", ["not valid YAML"]),
        ("- just a list\n", ["cards:"]),
    ],
)
def test_bad_user_file_names_file_entry_and_field(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(CatalogError) as caught:
        load_catalog([path])
    message = str(caught.value)
    assert str(path) in message
    for part in expected:
        assert part in message


def test_user_file_reusing_another_cards_nvml_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(
        "cards:\n  - key: mine\n    name: x\n    nvml_names: ['NVIDIA H200']\n    peak_tflops: {bf16: 1}\n"
        "    bandwidth_tbps: 1\n    source: https://e.com\n"
    )
    with pytest.raises(CatalogError, match="NVIDIA H200"):
        load_catalog([path])


def test_missing_user_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"nope\.yaml"):
        load_catalog([tmp_path / "nope.yaml"])


def test_user_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"cards:\n  - key: x\n    name: \xe9\xff\n")
    with pytest.raises(CatalogError, match=r"latin1\.yaml"):
        load_catalog([path])


def test_user_file_clashing_with_a_built_in_alias_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "clash.yaml"
    path.write_text(
        "cards:\n  - key: h100\n    name: x\n    peak_tflops: {bf16: 1}\n"
        "    bandwidth_tbps: 1\n    source: https://e.com\n"
    )
    with pytest.raises(CatalogError) as caught:
        load_catalog([path])
    assert str(path) in str(caught.value) and "'h100'" in str(caught.value)


@pytest.mark.parametrize(
    ("figures", "field"),
    [
        ("peak_tflops: {bf16: 1e300}\n    bandwidth_tbps: 1", "peak_tflops"),
        ("peak_tflops: {bf16: 1e290}\n    bandwidth_tbps: 1e-30", "ridge"),
        ("peak_tflops: {bf16: 1}\n    bandwidth_tbps: 1e300", "bandwidth_tbps"),
    ],
)
def test_figures_that_overflow_once_scaled_are_refused(tmp_path: Path, figures: str, field: str) -> None:
    # finite in TFLOP/s and TB/s, but FLOP/s, bytes/s or the ridge overflow a float: every answer
    # (GET /cards, `ridgeline cards --json`) would carry an Infinity
    path = tmp_path / "huge.yaml"
    path.write_text(f"cards:\n  - key: huge\n    name: x\n    {figures}\n    source: https://e.com\n")
    with pytest.raises(CatalogError) as caught:
        load_catalog([path])
    message = str(caught.value)
    assert str(path) in message and "entry 'huge'" in message and field in message
