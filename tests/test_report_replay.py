"""`ridgeline report --replay`: the real inference over a trace, with the daemon's own totals.

The report drives the daemon's sampler over the streamed replay source; here a real
`ridgeline serve --replay FILE --speed max` plays the same trace to its end and its /metrics
counters are the answer the report's JSON must give — per group and for the fleet — for a
generated JSON Lines trace (regime changes, blank readings, a gap, two namespaces and a GPU that
changes pod) and for a `dcgmi dmon` capture. The command's user errors end in one line, exit 2.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import http_get, serve_process
from prometheus_client.parser import text_string_to_metric_families
from replay_lines import replay_line
from test_serve_cli import poll

from exporter.roofline import REGIMES
from exporter.sample import Attribution

ROOT = Path(__file__).resolve().parents[1]
H100 = "NVIDIA H100 80GB HBM3"


def make_trace(path: Path) -> Path:
    """4 GPUs for 400 s: regimes that change, blank readings, GPU 3 away for 40 s, the whole node
    away for 40 s, and GPU 0 moving from pod train-0 to pod serve-0 halfway."""
    rng = random.Random(7)
    pods = {
        1: Attribution("train", "train-1", "main"),
        2: Attribution("serve", "serve-2", "main"),
        3: None,
    }
    lines = []
    for i in range(400):
        ts = 1_800_000_000.0 + i
        for gpu in range(4):
            if (gpu == 3 and 200 <= i < 240) or 300 <= i < 340:
                continue  # GPU 3 away for 40 s; then the whole node for 40 s
            if gpu == 0:
                pod = (
                    Attribution("train", "train-0", "main")
                    if i < 200
                    else Attribution("serve", "serve-0", "main")
                )
            else:
                pod = pods[gpu]
            phase = (i // 50 + gpu) % 4
            dram, tensor = [(0.01, 0.0), (0.75, 0.1), (0.2, 0.8), (0.2, 0.15)][phase]
            values: dict[int, float | None] = {
                1005: min(1.0, dram + rng.uniform(0, 0.05)),
                1004: min(1.0, tensor + rng.uniform(0, 0.05)),
                1001: 0.01 if phase == 0 else 0.9,
                100: 1980.0,
            }
            if rng.random() < 0.02:
                values[1005] = None  # a blank reading
            lines.append(replay_line(ts, gpu, values, uuid=f"GPU-{gpu}", attribution=pod))
    path.write_text("\n".join(lines) + "\n")
    return path


def daemon_totals(*serve_args: str) -> dict[tuple[str, str], dict[str, float]]:
    """Play the trace to its end in a real `serve` and read its counters: (namespace, uuid) ->
    regime seconds, flop and bytes."""
    with serve_process(*serve_args, "--speed", "max") as (base, _):
        deadline = time.monotonic() + 60
        reason = poll(base, "/readyz", 503)
        while "end_of_replay" not in reason and time.monotonic() < deadline:
            time.sleep(0.1)
            reason = poll(base, "/readyz", 503)
        assert "end_of_replay" in reason
        text = http_get(base + "/metrics")[1]
    totals: dict[tuple[str, str], dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            key = (labels.get("namespace", ""), labels.get("uuid", ""))
            if sample.name == "ridgeline_regime_seconds_total":
                # a rare regime the GPU never was in has no series: 0 seconds (issue 24.9)
                totals.setdefault(key, dict.fromkeys(REGIMES, 0.0))[labels["regime"]] = sample.value
            elif sample.name in ("ridgeline_flop_total", "ridgeline_dram_bytes_total"):
                totals.setdefault(key, dict.fromkeys(REGIMES, 0.0))[sample.name] = sample.value
    return totals


def run_report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", "report", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_report_equals_the_daemons_totals_on_a_steady_trace(tmp_path: Path) -> None:
    """GPUs whose labels never change: the report's groups are exactly the daemon's counters."""
    trace = make_trace(tmp_path / "t.jsonl")
    steady = tmp_path / "steady.jsonl"
    steady.write_text(
        "".join(line + "\n" for line in trace.read_text().splitlines() if '"gpu":0,' not in line)
    )
    daemon = daemon_totals("--replay", str(steady))
    out = tmp_path / "r.json"
    done = run_report("--replay", str(steady), "--by", "namespace", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "replay finished" in done.stderr and "serving" not in done.stderr  # a report serves nothing
    document = json.loads(out.read_text())
    by_namespace: dict[str, dict[str, float]] = {}
    for (namespace, _uuid), values in daemon.items():
        into = by_namespace.setdefault(namespace, {})
        for key, value in values.items():
            into[key] = into.get(key, 0.0) + value
    groups = {g["labels"].get("namespace", ""): g for g in document["groups"]}
    assert set(groups) == set(by_namespace) == {"train", "serve", ""}
    for namespace, want in by_namespace.items():
        got = groups[namespace]
        for regime in REGIMES:
            assert got["gpu_seconds"][regime] == pytest.approx(want[regime], rel=1e-12, abs=1e-9), (
                namespace,
                regime,
            )
        assert got["flop"] == pytest.approx(want["ridgeline_flop_total"], rel=1e-12)
        assert got["dram_bytes"] == pytest.approx(want["ridgeline_dram_bytes_total"], rel=1e-12)
    assert groups["serve"]["idle_allocated_gpu_seconds"] == pytest.approx(
        groups["serve"]["gpu_seconds"]["idle"]
    )
    assert groups[""]["idle_allocated_gpu_seconds"] == 0.0  # GPU 3 has no pod
    gaps = document["gaps"]
    assert len(gaps) == 1 and gaps[0]["seconds"] == pytest.approx(41.0)  # the node's; not GPU 3's alone
    assert any("not integrated" in note for note in document["notes"])


@pytest.mark.slow
def test_a_gpu_that_changes_pod_splits_its_time_between_them(tmp_path: Path) -> None:
    trace = make_trace(tmp_path / "t.jsonl")
    daemon = daemon_totals("--replay", str(trace))
    out = tmp_path / "r.json"
    done = run_report("--replay", str(trace), "--by", "namespace,pod", "--json", str(out))
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    groups = {(g["labels"].get("namespace"), g["labels"].get("pod")): g for g in document["groups"]}
    first, second = groups[("train", "train-0")], groups[("serve", "serve-0")]
    # the daemon's counters for GPU 0 carry across the change; they now wear serve-0's labels
    whole = daemon[("serve", "GPU-0")]
    for regime in REGIMES:
        assert first["gpu_seconds"][regime] + second["gpu_seconds"][regime] == pytest.approx(whole[regime])
    # 200 samples each; not integrated: the first, blank readings (2 %), the node's gap
    assert first["gpu_seconds_total"] == pytest.approx(199.0, abs=8.0)
    assert second["gpu_seconds_total"] == pytest.approx(160.0, abs=8.0)
    assert document["fleet"]["gpu_seconds_total"] == pytest.approx(
        sum(sum(v[r] for r in REGIMES) for v in daemon.values())
    )


def test_a_recording_with_hpc_jobs_groups_by_them(tmp_path: Path) -> None:
    """A recording of a Slurm node carries each GPU's hpc_job; --by hpc_job reads it back."""
    lines = [
        replay_line(1_800_000_000.0 + i, gpu, {1005: 0.75, 1004: 0.1, 1001: 0.9}, hpc_job=job)
        for i in range(60)
        for gpu, job in ((0, "101"), (1, "202,203"))
    ]
    trace = tmp_path / "slurm.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    out = tmp_path / "r.json"
    done = run_report("--replay", str(trace), "--by", "hpc_job", "--json", str(out))
    assert done.returncode == 0, done.stderr
    groups = {g["labels"].get("hpc_job"): g for g in json.loads(out.read_text())["groups"]}
    # GPU 1, which two jobs share, has no hpc_job, as in /metrics (docs/deployment.md, Slurm)
    assert set(groups) == {"101", None}
    for group in groups.values():
        assert group["gpu_seconds"]["memory_bound"] == pytest.approx(59.0)


@pytest.mark.slow
def test_a_dmon_capture_gives_the_daemons_totals(tmp_path: Path) -> None:
    capture = ROOT / "tests" / "data" / "replay" / "dmon_sorted_2x.txt"
    args = ("--replay", str(capture), "--model", H100, "--interval", "1")
    daemon = daemon_totals(*args)
    out = tmp_path / "r.json"
    done = run_report(*args, "--by", "uuid", "--json", str(out), "--out", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    groups = {g["labels"]["uuid"]: g for g in json.loads(out.read_text())["groups"]}
    assert set(groups) == {uuid for _, uuid in daemon}
    for (_ns, uuid), want in daemon.items():
        assert groups[uuid]["gpu_seconds_total"] == pytest.approx(sum(want[r] for r in REGIMES))
        assert groups[uuid]["flop"] == pytest.approx(want.get("ridgeline_flop_total", 0.0))
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((), "--prometheus URL"),
        (("--replay", "demo", "--prometheus", "http://x"), "one of the two"),
        (("--replay", "demo"), "nothing to write"),
        (("--replay", "demo", "--json", "-", "--since", "1h"), "--since"),
        (("--replay", "demo", "--json", "-", "--by", "not-a-label"), "--by"),
        (("--replay", "/nonexistent.jsonl", "--json", "-"), "/nonexistent.jsonl"),
        (("--replay", "demo", "--out", "/nonexistent/dir/r.html"), "does not exist"),
        (("--prometheus", "http://127.0.0.1:1", "--json", "-"), "cannot reach"),
        (("--prometheus", "http://x", "--json", "-", "--match", "cluster=prod"), "--match"),
        (("--prometheus", "http://x", "--json", "-", "--since", "7x"), "duration"),
        (("--prometheus", "http://x", "--json", "-", "--start", "10", "--end", "5"), "empty"),
        (
            ("--prometheus", "http://x", "--json", "-", "--prometheus-password-file", "/nonexistent"),
            "/nonexistent",
        ),
    ],
)
def test_user_mistakes_end_in_one_line_and_exit_2(args: tuple[str, ...], needle: str) -> None:
    done = run_report(*args)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert needle in done.stderr and "Traceback" not in done.stderr
    assert lines[-1].startswith("ridgeline report: error:") or "usage:" in done.stderr


def multi_node_trace(path: Path, *, uuid: bool, node: bool) -> Path:
    """Two nodes of 4 GPUs for 120 s, every GPU busy; node b's GPUs 0-3 share node a's indexes.
    Node a's GPU 0 is held by pod train/a-0 (so the two nodes' time can be told by node too)."""
    lines = []
    for i in range(121):
        for name in ("a", "b"):
            for gpu in range(4):
                sample_values: dict[int, float | None] = {1005: 0.75, 1004: 0.1, 1001: 0.9}
                line = json.loads(
                    replay_line(
                        1_800_000_000.0 + i,
                        gpu,
                        sample_values,
                        uuid=f"GPU-{name}{gpu}",
                        attribution=Attribution("train", "a-0", "main") if (name, gpu) == ("a", 0) else None,
                    )
                )
                if not uuid:
                    del line["uuid"]
                if node:
                    line["node"] = f"node-{name}"
                lines.append(json.dumps(line))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("uuid", "node"), [(True, False), (False, True), (True, True)])
def test_a_multi_node_trace_counts_every_gpu_once(tmp_path: Path, uuid: bool, node: bool) -> None:
    """GPUs told apart by uuid, or by node without one: 8 GPUs for 120 s, nothing skipped."""
    trace = multi_node_trace(tmp_path / "t.jsonl", uuid=uuid, node=node)
    out = tmp_path / "r.json"
    by = "node" if node else "uuid"
    done = run_report("--replay", str(trace), "--by", by, "--json", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["fleet"]["gpu_seconds_total"] == pytest.approx(8 * 120, rel=0.01)
    assert not any("skipped" in note for note in report["notes"])
    groups = {g["labels"].get(by): g["gpu_seconds_total"] for g in report["groups"]}
    if node:
        assert groups == pytest.approx({"node-a": 4 * 120, "node-b": 4 * 120}, rel=0.01)
    else:
        assert len(groups) == 8


def test_a_trace_mostly_skipped_exits_non_zero_with_the_reason(tmp_path: Path) -> None:
    """Two nodes' lines with neither uuid nor node: half of them collide with the other node's
    GPU of the same index, and the report refuses to describe what is left."""
    trace = multi_node_trace(tmp_path / "t.jsonl", uuid=False, node=False)
    done = run_report("--replay", str(trace), "--json", str(tmp_path / "r.json"))
    assert done.returncode == 2, done.stderr
    assert "duplicate_entity" in done.stderr and "uuid or a node" in done.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_grouping_no_gpu_carries_is_refused_naming_the_labels_there(tmp_path: Path) -> None:
    """Issue 23.3: `--by` is checked against what the source has, on a replay as on Prometheus:
    one unnamed group is a mistyped label, not a report."""
    done = run_report("--replay", str(make_trace(tmp_path / "t.jsonl")), "--json", "-", "--by", "team")
    assert done.returncode == 2, done.stderr
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("ridgeline report: error:")]
    assert "--by team: no GPU in the trace carries it" in error
    assert "namespace" in error and "pod" in error and "uuid" in error


def test_the_default_grouping_on_a_trace_without_pods_is_a_note(tmp_path: Path) -> None:
    """A Slurm or bare-metal node's trace has no namespace: the default `--by` still reports, and
    says why its one group has no name."""
    lines = [
        replay_line(
            1_800_000_000.0 + i, gpu, {1005: 0.7, 1004: 0.1, 1001: 0.9, 100: 1980.0}, uuid=f"GPU-{gpu}"
        )
        for i in range(60)
        for gpu in range(2)
    ]
    trace = tmp_path / "bare.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    out = tmp_path / "r.json"
    done = run_report("--replay", str(trace), "--model", H100, "--json", str(out))
    assert done.returncode == 0, done.stderr
    notes = json.loads(out.read_text())["notes"]
    assert any("--by namespace: no GPU in the trace carries it" in note for note in notes), notes
