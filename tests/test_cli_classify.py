"""`ridgeline classify` and `ridgeline cards`: flags, environment, prose, --json, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from exporter.catalog import Catalog
from exporter.cli import main
from exporter.web.app import create_app


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_kernel_prose_reads_like_an_answer(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(capsys, "classify", "--card", "h100-sxm", "--flops", "4e12", "--bytes", "40e9")
    assert status == 0
    assert "ridge 295 FLOP/byte" in out
    assert "memory time 11.9 ms" in out
    assert "compute time 4.04 ms" in out
    assert "memory-bound" in out
    assert "attainable 335 TFLOP/s = 34% of peak" in out
    assert "lever:" in out and "fuse kernels" in out


def test_json_is_what_the_api_answers(capsys: pytest.CaptureFixture[str], catalog: Catalog) -> None:
    argv = [
        "classify",
        "--card",
        "h100",
        "--op",
        "gemm",
        "--m",
        "4096",
        "--n",
        "4096",
        "--k",
        "4096",
        "--json",
    ]
    status, out, _ = run_cli(capsys, *argv)
    assert status == 0
    api = TestClient(create_app(catalog)).post(
        "/classify", json={"card": "h100", "op": "gemm", "m": 4096, "n": 4096, "k": 4096}
    )
    assert json.loads(out) == api.json()


def test_counter_flags_and_compare(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(
        capsys,
        "classify",
        "--card",
        "NVIDIA H100 80GB HBM3",
        "--dram-active",
        "0.72",
        "--tensor-active",
        "0.18",
        "--gr-engine-active",
        "0.97",
        "--sm-clock-mhz",
        "915",
        "--compare",
        "h200,t4",
        "--json",
    )
    answer = json.loads(out)
    assert status == 0
    assert answer["clock_ratio"] == pytest.approx(0.5)  # 915 of the bf16 peak's 1830 MHz
    assert answer["regime"] == "memory_bound"
    assert [row["card"] for row in answer["compare"]] == ["h200"]
    assert answer["compare_skipped"][0]["card"] == "t4"


def test_partial_counter_flags_give_the_verdict_they_can(capsys: pytest.CaptureFixture[str]) -> None:
    # `dcgmi dmon -e 1001,1004` as flags: the tensor pipe near its wall, no DRAM reading
    status, out, _ = run_cli(
        capsys, "classify", "--card", "a100", "--gr-engine-active", "0.98", "--tensor-active", "0.9"
    )
    assert status == 0
    assert "verdict: compute-bound" in out and "no DRAM_ACTIVE reported" in out
    status, out, _ = run_cli(capsys, "classify", "--card", "a100", "--gr-engine-active", "0.9")
    assert status == 0
    assert "unknown" in out and "needs dram_active, tensor_active" in out
    status, out, _ = run_cli(
        capsys, "classify", "--card", "a100", "--dram-active", "0.2", "--fp64-active", "0.9", "--json"
    )
    answer = json.loads(out)
    assert (answer["regime"], answer["pipe"]) == ("compute_bound", "fp64")
    assert answer["achieved_flop_per_second"] == pytest.approx(0.9 * 9.7e12)


def test_decode_and_elements_flags(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(
        capsys,
        "classify",
        "--card",
        "h100",
        "--op",
        "decode",
        "--parameters",
        "7e9",
        "--batch",
        "8",
        "--json",
    )
    assert json.loads(out)["intensity_flop_per_byte"] == pytest.approx(8)
    _, out, _ = run_cli(
        capsys,
        "classify",
        "--card",
        "a100",
        "--op",
        "elementwise",
        "--elements",
        "1e6",
        "--dtype",
        "fp32",
        "--json",
    )
    assert json.loads(out)["bytes"] == 8e6


def test_threshold_flags_reach_the_counter_form(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["classify", "--card", "h100", "--dram-active", "0.4", "--tensor-active", "0.05", "--json"]
    assert json.loads(run_cli(capsys, *base)[1])["regime"] == "latency_bound"
    assert json.loads(run_cli(capsys, *base, "--theta", "0.5")[1])["regime"] == "memory_bound"


def test_flags_also_come_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIDGELINE_CLASSIFY_CARD", "h200")
    monkeypatch.setenv("RIDGELINE_CLASSIFY_FLOPS", "1e12")
    monkeypatch.setenv("RIDGELINE_CLASSIFY_BYTES", "1e9")
    monkeypatch.setenv("RIDGELINE_CLASSIFY_JSON", "yes")
    status, out, _ = run_cli(capsys, "classify")
    assert status == 0
    assert json.loads(out)["card"] == "h200"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--card", "h100", "--flops", "nan", "--bytes", "1"], ["--flops", "finite"]),
        (["--card", "h100", "--flops", "-3", "--bytes", "1"], ["--flops", "greater than 0"]),
        (["--card", "h1000", "--flops", "1", "--bytes", "1"], ["unknown card", "h100"]),
        (["--card", "t4", "--precision", "fp8", "--flops", "1", "--bytes", "1"], ["fp8", "fp16"]),
        (["--card", "h100"], ["--flops and --bytes"]),
        (["--flops", "1", "--bytes", "1"], ["--card"]),
        (
            ["--card", "h100", "--flops", "1", "--bytes", "1", "--dram-active", "0.5"],
            ["--flops", "--dram-active"],
        ),
        (["--card", "h100", "--op", "gemm", "--m", "2"], ["--n"]),
        (["--card", "h100", "--flops", "1", "--bytes", "1", "--compare", "h2000"], ["--compare", "h2000"]),
        (["--card", "h100", "--op", "elementwise", "--n", "5", "--elements", "5"], ["--elements"]),
    ],
)
def test_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], words: list[str]
) -> None:
    status, out, err = run_cli(capsys, "classify", *argv)
    assert status == 2
    assert out == ""
    assert err.startswith("ridgeline classify: error:")
    assert err.count("\n") == 1
    for word in words:
        assert word in err


def test_cards_table_lists_every_card(capsys: pytest.CaptureFixture[str], catalog: Catalog) -> None:
    status, out, _ = run_cli(capsys, "cards")
    assert status == 0
    lines = out.splitlines()
    assert {line.split()[0] for line in lines[2:-1]} == set(catalog.keys())
    h100 = next(line for line in lines if line.startswith("h100-sxm "))
    assert h100.split()[-4:] == ["989.5", "1979", "3.35", "295"]
    assert len({len(line) for line in lines[:-1]}) == 1, "a row is longer than the others: misaligned"


def test_cards_json_and_user_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "cards:\n  - key: lab-x1\n    name: Lab X1\n    vendor: other\n    peak_tflops: {bf16: 100}\n"
        "    bandwidth_tbps: 1.0\n    source: https://example.com/x1\n"
    )
    status, out, _ = run_cli(capsys, "cards", "--cards", str(path), "--json")
    assert status == 0
    entry = next(e for e in json.loads(out) if e["key"] == "lab-x1")
    assert entry["ridge_flop_per_byte"]["bf16"] == pytest.approx(100)
    status, out, _ = run_cli(
        capsys,
        "classify",
        "--cards",
        str(path),
        "--card",
        "lab-x1",
        "--flops",
        "1e12",
        "--bytes",
        "1e9",
        "--json",
    )
    assert json.loads(out)["regime"] == "compute_bound"


def test_bad_user_file_is_one_line_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "cards:\n  - key: x\n    name: X\n    peak_tflops: {bf16: 0}\n    bandwidth_tbps: 1\n"
        "    source: https://e.com\n"
    )
    status, _, err = run_cli(capsys, "cards", "--cards", str(path))
    assert status == 2
    assert str(path) in err and "peak_tflops.bf16" in err
    assert err.count("\n") == 1


def test_the_console_script_prints_no_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "classify", "--card", "nope", "--flops", "1", "--bytes", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "unknown card 'nope'" in result.stderr


def test_invalid_yaml_user_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("cards: [1\n")
    status, _, err = run_cli(capsys, "cards", "--cards", str(path))
    assert status == 2
    assert str(path) in err and "not valid YAML" in err
    assert err.count("\n") == 1


def test_counter_form_on_a_subnormal_custom_roof_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--peak-flops", "1e24", "--bandwidth", "5e-324", "--dram-active", "0.5", "--tensor-active", "0.5"]
    status, out, err = run_cli(capsys, "classify", *argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RIDGELINE_SERVE_PRECISION", "BF16"),
        ("RIDGELINE_PRECISION", "BF16"),  # serve's deprecated name, checked as well
        ("RIDGELINE_SERVE_SOURCE", "bogus"),
        ("RIDGELINE_CLASSIFY_OP", "conv"),
    ],
)
def test_environment_values_outside_a_flags_choices_are_refused_naming_the_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    # argparse checks `choices` only for values typed on the command line, never for defaults:
    # RIDGELINE_PRECISION=BF16 reached create_app and `serve` died with a traceback
    from exporter.cli import build_parser

    monkeypatch.setenv(variable, value)
    command = "classify" if variable.startswith("RIDGELINE_CLASSIFY_") else "serve"
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args([command])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert variable in err and repr(value) in err


def test_an_empty_environment_variable_counts_as_unset(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `RIDGELINE_X=` in an EnvironmentFile or a pod spec: the flag keeps its default, as
    # kingpin-based exporters treat it, rather than failing to parse "" as a number
    for name in ("DRAM_ACTIVE", "CARD", "PRECISION", "JSON"):
        variable = f"RIDGELINE_CLASSIFY_{name}"
        monkeypatch.setenv(variable, "")
    status, out, err = run_cli(capsys, "classify", "--card", "h100", "--flops", "1", "--bytes", "1")
    assert (status, err) == (0, "")
    assert "verdict: memory-bound" in out
