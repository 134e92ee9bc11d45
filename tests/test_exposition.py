"""Prometheus exposition over a snapshot: names, labels, absent series, promtool, OpenMetrics."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from exporter import fields, readings
from exporter.catalog import load_catalog
from exporter.collectors import RARE_REGIMES
from exporter.exposition import MetricsEndpoint
from exporter.inference import InferenceConfig
from exporter.roofline import REGIMES
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.state import Snapshot
from exporter.web.app import create_app
from exporter.web.live_routes import build_live_router

CATALOG = load_catalog()
H100 = "NVIDIA H100 80GB HBM3"
PLAIN = Entity(0, "GPU-plain", H100)
PODDED = Entity(1, "GPU-podded", H100)
MIG = Entity(2, "GPU-mig", "NVIDIA A100-SXM4-40GB", gpu_instance=3, profile="3g.20gb")
MIG_UNPROFILED = Entity(6, "GPU-mig-unprofiled", "NVIDIA A100-SXM4-40GB", gpu_instance=1)
BLANK = Entity(3, "GPU-blank", H100)
ALIEN = Entity(4, "GPU-alien", "NVIDIA Imaginary X1")
NO_DCP = Entity(5, "GPU-no-dcp", H100)
POD = Attribution("llm", "decode-0", "server")


def values(d: float | None, t: float | None, **extra: float) -> dict[int, float | None]:
    out: dict[int, float | None] = {fields.DRAM_ACTIVE: d, fields.PIPE_TENSOR_ACTIVE: t}
    out.update({int(k[1:]): v for k, v in extra.items()})
    return out


def batch(ts: float) -> list[Sample]:
    return [
        Sample(ts, PLAIN, values(0.7, 0.1, f1001=0.9, f203=90.0)),
        Sample(ts, PODDED, values(0.2, 0.85), POD),
        Sample(ts, MIG, values(0.1, 0.05)),
        Sample(ts, BLANK, values(None, 0.5, f1001=0.8)),
        Sample(ts, ALIEN, values(0.6, 0.2)),
        # a dcgm-exporter without the profiling metrics: device fields only
        Sample(ts, NO_DCP, {fields.SM_CLOCK: 1980.0, fields.GPU_UTIL: 97.0}),
    ]


def snapshot_after(batches: int = 3) -> Snapshot:
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())
    for i in range(batches):
        sampler.ingest(batch(1000.0 + i))
    return sampler.snapshot


def series(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found.setdefault(s.name, []).append((s.labels, s.value))
    return found


@pytest.fixture(scope="module")
def text() -> str:
    body, content_type = MetricsEndpoint(snapshot_after).render(None)
    assert content_type.startswith("text/plain")
    return body.decode()


def test_every_design_metric_is_exposed(text: str) -> None:
    names = set(series(text))
    for name in (
        "ridgeline_dram_active_ratio",
        "ridgeline_tensor_active_ratio",
        "ridgeline_flop_utilization_ratio",
        "ridgeline_arithmetic_intensity_flop_per_byte",
        "ridgeline_roofline_efficiency_ratio",
        "ridgeline_regime",
        "ridgeline_regime_seconds_total",
        "ridgeline_flop_total",
        "ridgeline_dram_bytes_total",
        "ridgeline_gpu_info",
        "ridgeline_card_ridge_flop_per_byte",
        "ridgeline_card_peak_flop_per_second",
        "ridgeline_card_peak_bandwidth_bytes_per_second",
        "ridgeline_source_up",
        "ridgeline_last_sample_timestamp_seconds",
        "ridgeline_samples_total",
        "ridgeline_build_info",
        "ridgeline_gr_engine_active_ratio",
        "ridgeline_gpu_utilization_ratio",
    ):
        assert name in names, name


def test_blank_dram_yields_no_dram_series_and_never_a_zero(text: str) -> None:
    found = series(text)
    for name in (
        "ridgeline_dram_active_ratio",
        "ridgeline_dram_bytes_total",
        "ridgeline_arithmetic_intensity_flop_per_byte",
        "ridgeline_roofline_efficiency_ratio",
    ):
        for labels, _ in found.get(name, []):
            if labels.get("uuid") == BLANK.uuid:
                pytest.fail(f"{name} has a series for the GPU with blank DRAM_ACTIVE: {labels}")
    # what the partial reading can say is there: its tensor ratio, FLOPs, and an unknown regime
    tensor = {labels["uuid"]: v for labels, v in found["ridgeline_tensor_active_ratio"]}
    assert tensor[BLANK.uuid] == pytest.approx(0.5)
    assert BLANK.uuid in {labels["uuid"] for labels, _ in found["ridgeline_flop_total"]}
    regime = {
        labels["regime"] for labels, v in found["ridgeline_regime"] if labels["uuid"] == BLANK.uuid and v
    }
    assert regime == {"unknown"}


def test_every_gpu_names_the_profiling_fields_it_lacks(text: str) -> None:
    listed: dict[str, list[str]] = {}
    for labels, value in series(text)["ridgeline_profiling_fields_missing"]:
        assert value == 1.0 and labels["uuid"] not in listed  # one series per GPU
        listed[labels["uuid"]] = labels["fields"].split(",")
    missing = {uuid: set(names) for uuid, names in listed.items()}
    assert all(len(missing[uuid]) == len(names) for uuid, names in listed.items())
    # 1001-1008, and the link fields 1009-1012: an H100 SXM has NVLink and PCIe figures
    profiling = {readings.field_name(fid) for fid in range(1001, 1013)}
    assert missing[NO_DCP.uuid] == profiling
    assert missing[BLANK.uuid] == profiling - {
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    }
    assert missing[PLAIN.uuid] == profiling - {
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    }


def test_a_gpu_without_profiling_counters_has_only_the_missing_fields_series(text: str) -> None:
    names = {
        name for name, rows in series(text).items() for labels, _ in rows if labels.get("uuid") == NO_DCP.uuid
    }
    assert names == {"ridgeline_profiling_fields_missing"}


def test_counters_are_born_at_zero_with_the_first_reading() -> None:
    body, _ = MetricsEndpoint(lambda: snapshot_after(1)).render(None)
    found = series(body.decode())
    seconds = [
        (labels, v) for labels, v in found["ridgeline_regime_seconds_total"] if labels["uuid"] == PLAIN.uuid
    ]
    # the rare regimes' counters are born with the first second spent in them, the others at 0
    assert sorted(labels["regime"] for labels, _ in seconds) == sorted(set(REGIMES) - set(RARE_REGIMES))
    assert all(v == 0.0 for _, v in seconds)
    for name in ("ridgeline_flop_total", "ridgeline_dram_bytes_total"):
        assert [v for labels, v in found[name] if labels["uuid"] == PLAIN.uuid] == [0.0], name
    assert not [labels for labels, _ in found["ridgeline_flop_total"] if labels["uuid"] == ALIEN.uuid]


def test_labels_pod_only_when_attributed_and_gpu_instance_only_for_mig(text: str) -> None:
    rows = {labels["uuid"]: labels for labels, _ in series(text)["ridgeline_dram_active_ratio"]}
    assert rows[PLAIN.uuid] == {"gpu": "0", "uuid": PLAIN.uuid, "model": H100, "card": "h100-sxm"}
    assert {k: rows[PODDED.uuid][k] for k in ("namespace", "pod", "container")} == {
        "namespace": "llm",
        "pod": "decode-0",
        "container": "server",
    }
    assert rows[MIG.uuid]["gpu_instance"] == "3"
    assert "gpu_instance" not in rows[PLAIN.uuid]


def test_unknown_model_is_labelled_unknown_and_has_no_roof_series(text: str) -> None:
    found = series(text)
    (alien,) = [labels for labels, _ in found["ridgeline_dram_active_ratio"] if labels["uuid"] == ALIEN.uuid]
    assert alien["card"] == "unknown"
    for name in ("ridgeline_flop_total", "ridgeline_arithmetic_intensity_flop_per_byte"):
        assert all(labels["uuid"] != ALIEN.uuid for labels, _ in found[name]), name
    (info,) = [labels for labels, _ in found["ridgeline_gpu_info"] if labels["uuid"] == ALIEN.uuid]
    assert "precision" not in info  # no roof: nothing to join
    assert all(labels["card"] != "unknown" for labels, _ in found["ridgeline_card_peak_flop_per_second"])
    regimes = {labels["regime"]: v for labels, v in found["ridgeline_regime"] if labels["uuid"] == ALIEN.uuid}
    assert sum(regimes.values()) == 1.0


def test_regime_state_set_has_exactly_one_active_regime(text: str) -> None:
    per_gpu: dict[str, float] = {}
    for labels, value in series(text)["ridgeline_regime"]:
        per_gpu[labels["uuid"]] = per_gpu.get(labels["uuid"], 0.0) + value
    assert per_gpu == {PLAIN.uuid: 1.0, PODDED.uuid: 1.0, MIG.uuid: 1.0, ALIEN.uuid: 1.0, BLANK.uuid: 1.0}


def test_source_health_series(text: str) -> None:
    found = series(text)
    assert found["ridgeline_source_up"] == [({"source": "scrape"}, 1.0)]
    assert found["ridgeline_samples_total"] == [({}, 3.0)]
    # the batches carry sample time 1000-1002; the gauge reports when the newest one arrived
    ((labels, arrived),) = found["ridgeline_last_sample_timestamp_seconds"]
    assert labels == {} and arrived > 1.7e9
    (info,) = found["ridgeline_build_info"]
    assert info[0]["source"] == "scrape" and info[0]["version"]


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian package prometheus) not installed"
)
def test_promtool_check_metrics_is_clean(text: str) -> None:
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr.decode() + result.stdout.decode()
    assert result.stdout.decode().strip() == "" and result.stderr.decode().strip() == ""


def test_a_new_snapshot_is_encoded_afresh() -> None:
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())
    endpoint = MetricsEndpoint(lambda: sampler.snapshot, process_metrics=False)
    sampler.ingest(batch(1000.0))
    first, _ = endpoint.render(None)
    assert endpoint.render(None)[0] == first
    sampler.ingest(batch(1001.0))
    second, _ = endpoint.render(None)
    assert b"ridgeline_samples_total 2.0" in second and b"ridgeline_samples_total 1.0" in first


def test_openmetrics_by_content_negotiation() -> None:
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())
    sampler.ingest(batch(1000.0))
    sampler.ingest(batch(1001.0))
    app = create_app(CATALOG, live_router=build_live_router(lambda: sampler.snapshot))
    with TestClient(app) as client:
        plain = client.get("/metrics")
        assert plain.status_code == 200
        assert plain.headers["content-type"].startswith("text/plain; version=0.0.4")
        om = client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        assert om.headers["content-type"].startswith("application/openmetrics-text")
        assert om.text.endswith("# EOF\n")
        assert om.text.count("# EOF") == 1
        assert "ridgeline_flop_total{" in om.text
        assert "process_resident_memory_bytes" in om.text


ODD = Entity(5, 'GPU-odd"\\quote', 'NVIDIA "Odd" \\ Model\nwith newline — ünïcode')


@pytest.mark.parametrize("openmetrics", [False, True])
def test_fast_encoder_writes_exactly_what_prometheus_client_writes(openmetrics: bool) -> None:
    from prometheus_client.exposition import generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    from exporter.exposition import SnapshotCollector, build_families, encode

    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())
    odd_pod = Attribution('ns"x', "pod\\y", "c\nz")
    for i in range(3):
        sampler.ingest([*batch(1000.0 + i), Sample(1000.0 + i, ODD, values(0.3, 0.3), odd_pod)])
    sampler._record_error("timeout", "slow")  # an errors series with a label, too
    sampler._publish()
    snapshot = sampler.snapshot
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snapshot, clock=lambda: 0.0))
    reference = generate_openmetrics(registry) if openmetrics else generate_latest(registry)
    assert encode(build_families(snapshot, clock=lambda: 0.0), openmetrics=openmetrics) == reference


def test_counters_keep_their_card_label_through_a_blank_hiccup() -> None:
    """A blank reading must not relabel a GPU's counters card="unknown": a label change starts a
    new series (and ends the old one) in Prometheus, so increase() and rate() break."""
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())
    for i in range(3):
        sampler.ingest([Sample(1000.0 + i, PLAIN, values(0.7, 0.1))])
    sampler.ingest([Sample(1003.0, PLAIN, values(None, 0.1))])  # a blank-value hiccup
    body, _ = MetricsEndpoint(lambda: sampler.snapshot).render(None)
    found = series(body.decode())
    (flop_labels,) = [labels for labels, _ in found["ridgeline_flop_total"]]
    assert flop_labels["card"] == "h100-sxm"
    assert {labels["card"] for labels, _ in found["ridgeline_regime_seconds_total"]} == {"h100-sxm"}


def test_card_constants_are_written_once_per_roof(text: str) -> None:
    """Two H100s (and an H100 with blank DRAM, which has no reading) share one series per constant;
    the MIG instance has its profile's slice of the A100, keyed by mig_profile; an instance whose
    profile nobody told has no roof. Each GPU names its roof in ridgeline_gpu_info."""
    found = series(text)
    peaks = {tuple(sorted(labels.items())): v for labels, v in found["ridgeline_card_peak_flop_per_second"]}
    h100, a100 = CATALOG.lookup("h100-sxm"), CATALOG.lookup("a100-sxm4-40gb")
    mig = a100.instance_roof("bf16", "3g.20gb")
    assert mig is not None
    assert peaks == {
        (("card", "h100-sxm"), ("precision", "bf16")): h100.peak_flop_per_second("bf16"),
        (
            ("card", "a100-sxm4-40gb"),
            ("mig_profile", "3g.20gb"),
            ("precision", "bf16"),
        ): mig.peak_flop_per_second,
    }
    ridges = {labels["card"]: v for labels, v in found["ridgeline_card_ridge_flop_per_byte"]}
    assert ridges["h100-sxm"] == pytest.approx(
        h100.peak_flop_per_second("bf16") / h100.bandwidth_bytes_per_second
    )
    assert ridges["a100-sxm4-40gb"] == pytest.approx(mig.ridge_flop_per_byte)
    bandwidth = {
        tuple(sorted(labels.items())): v
        for labels, v in found["ridgeline_card_peak_bandwidth_bytes_per_second"]
    }
    assert bandwidth == {
        (("card", "h100-sxm"),): h100.bandwidth_bytes_per_second,
        (("card", "a100-sxm4-40gb"), ("mig_profile", "3g.20gb")): mig.bandwidth_bytes_per_second,
    }
    info = {labels["uuid"]: labels for labels, _ in found["ridgeline_gpu_info"]}
    # every GPU with an estimate (BLANK's is partial: the unknown regime); NO_DCP has none
    assert set(info) == {PLAIN.uuid, PODDED.uuid, MIG.uuid, BLANK.uuid, ALIEN.uuid}
    assert info[PODDED.uuid]["precision"] == "bf16" and info[PODDED.uuid]["pod"] == "decode-0"
    assert info[MIG.uuid]["gpu_instance"] == "3" and info[MIG.uuid]["mig_profile"] == "3g.20gb"
    assert "mig_profile" not in info[PLAIN.uuid]
    # nothing per GPU repeats a card constant any more
    per_gpu = {name for name, rows in found.items() if any("uuid" in labels for labels, _ in rows)}
    assert not per_gpu & {"ridgeline_peak_flop_per_second", "ridgeline_ridge_flop_per_byte",
                          "ridgeline_peak_bandwidth_bytes_per_second"}  # fmt: skip


def test_a_mig_instance_of_unknown_profile_joins_no_roof() -> None:
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())
    for i in range(3):
        sampler.ingest([Sample(1000.0 + i, MIG_UNPROFILED, values(0.1, 0.05))])
    body, _ = MetricsEndpoint(lambda: sampler.snapshot, process_metrics=False).render(None)
    found = series(body.decode())
    ((info, _),) = found["ridgeline_gpu_info"]
    assert info["gpu_instance"] == "1" and "precision" not in info and "mig_profile" not in info
    assert not found.get("ridgeline_card_peak_flop_per_second")


def test_the_collectors_table_names_what_each_collector_writes() -> None:
    """exporter/collectors.py is what --help and the docs quote: each collector's families are
    exactly the ones build_families adds when it alone is switched on."""
    from exporter.collectors import COLLECTORS, GR_ENGINE_CONTRADICTED, PROFILING_FROZEN
    from exporter.exposition import build_families

    SPARSE = {GR_ENGINE_CONTRADICTED.name, PROFILING_FROZEN.name}

    snapshot = snapshot_after()
    health = {f.name for f in build_families(snapshot, collectors=())}
    assert health == {
        "ridgeline_source_up",
        "ridgeline_last_sample_timestamp_seconds",
        "ridgeline_last_data_advance_timestamp_seconds",
        "ridgeline_samples",
        "ridgeline_sample_errors",
        "ridgeline_build_info",
        "ridgeline_scrape_collector_success",
        "ridgeline_scrape_collector_duration_seconds",
    }
    for spec in COLLECTORS:
        if spec.name == "process":
            continue
        added = {f.name for f in build_families(snapshot, collectors=(spec.name,))} - health
        declared = {family.name for family in spec.families}
        # written only on GPUs where they hold, none of this snapshot's (tests/test_collectors.py)
        assert added <= declared and declared - added <= SPARSE, spec.name


def test_switched_off_collectors_leave_their_families_out_and_process_metrics_follow() -> None:
    provider = snapshot_after
    body, _ = MetricsEndpoint(provider, collectors={"totals", "card", "regime"}).render(None)
    found = series(body.decode())
    assert "ridgeline_dram_active_ratio" not in found and "ridgeline_gr_engine_active_ratio" not in found
    assert "ridgeline_regime_seconds_total" in found and "ridgeline_gpu_info" in found
    assert not [name for name in found if name.startswith("process_")]
    full, _ = MetricsEndpoint(provider).render(None)
    assert "process_resident_memory_bytes" in full.decode()


@pytest.mark.parametrize(
    ("argv", "env", "expected_off"),
    [
        ([], {}, set()),
        (["--no-collector.engine", "--no-collector.roofline"], {}, {"engine", "roofline"}),
        (["--collector.disable-defaults", "--collector.totals", "--collector.card"], {},
         {"activity", "roofline", "engine", "regime", "missing", "clocks", "workload", "process"}),
        ([], {"RIDGELINE_COLLECTOR_ACTIVITY": "false"}, {"activity"}),
        (["--collector.links"], {}, set()),
        (["--collector.activity"], {"RIDGELINE_COLLECTOR_ACTIVITY": "0"}, set()),  # the flag wins
    ],
)  # fmt: skip
def test_serve_collector_flags(
    argv: list[str], env: dict[str, str], expected_off: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from exporter.cli import build_parser
    from exporter.collectors import DEFAULT_COLLECTORS
    from exporter.commands.options.collectors import collector_choice

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = build_parser().parse_args(["serve", "--replay", "demo", *argv])
    assert DEFAULT_COLLECTORS - collector_choice(args) == expected_off
    assert ("links" in collector_choice(args)) == ("--collector.links" in argv)  # off by default


def test_a_bad_collector_variable_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from exporter.cli import build_parser

    monkeypatch.setenv("RIDGELINE_COLLECTOR_ENGINE", "sometimes")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--replay", "demo"])


def test_the_share_family_is_left_out_where_no_mig_instance_reports() -> None:
    """A whole GPU has no share series, so a node without MIG gets no HELP/TYPE header for it
    either; the node with an instance gets the family."""
    sampler = Sampler("scrape", SourceOptions(), CATALOG, InferenceConfig())
    for i in range(3):
        sampler.ingest([s for s in batch(1000.0 + i) if s.entity.gpu_instance is None])
    for openmetrics in (False, True):
        whole = MetricsEndpoint(lambda: sampler.snapshot).render(
            "application/openmetrics-text; version=1.0.0" if openmetrics else None
        )[0]
        assert b"ridgeline_gpu_share_ratio" not in whole
        assert b"# TYPE ridgeline_regime gauge" in whole
    mig = MetricsEndpoint(snapshot_after).render(None)[0].decode()
    assert "# TYPE ridgeline_gpu_share_ratio gauge" in mig
    assert [labels["gpu_instance"] for labels, _ in series(mig)["ridgeline_gpu_share_ratio"]] == ["3"]
