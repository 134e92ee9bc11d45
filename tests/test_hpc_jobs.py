"""The `hpc_job` label from dcgm-exporter's job-mapping directory (exporter/attribution/hpc.py):
real files in a temporary directory (`<gpu>` and `<gpu>.<instance>`, and the odd entries a real
directory collects), the sampler and the exposition (one series per job, each GPU counted once),
a scraped dcgm-exporter page that repeats series per job, the example Slurm prolog/epilog, and a
real `serve` process."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import http_get, serve_process
from prometheus_client.parser import text_string_to_metric_families
from test_sampler import MODEL, ScriptedSource, make_sampler, reading
from test_source_scrape import PAGES as SCRAPE_DATA

from exporter import fields
from exporter.attribution.hpc import (
    MAX_FILE_BYTES,
    MAX_JOBS_PER_GPU,
    MAX_NOTES_LOGGED,
    HpcJobMap,
    read_mapping,
)
from exporter.exposition import MetricsEndpoint, gpu_labels
from exporter.sample import Entity, Sample, join_hpc_jobs
from exporter.sampling.enrichers import build_enrichers
from exporter.sources.scrape import parse_page

ROOT = Path(__file__).resolve().parent.parent
SLURM = ROOT / "deploy" / "slurm"


def write(directory: Path, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(text)


# -- reading the directory ---------------------------------------------------------------------


def test_one_file_per_gpu_index_each_line_a_job(tmp_path: Path) -> None:
    write(tmp_path, "0", "4242\n")
    write(tmp_path, "1", "17\n\n9\n17\n")  # blank lines and repeats are ignored
    write(tmp_path, "3", "")  # an epilog that truncates instead of removing: no job
    write(tmp_path, ".lock", "")  # the writers' own hidden files are not mentioned
    write(tmp_path, ".3.next", "5\n")
    jobs, notes = read_mapping(tmp_path)
    assert dict(jobs) == {(0, None): "4242", (1, None): "9,17"}
    assert notes == []


def test_mig_instances_have_their_own_files_as_in_dcgm_exporter(tmp_path: Path) -> None:
    """`<gpu>.<instance>` names a GPU instance (dcgm-exporter's hpc_test.go: `3.0`); an instance
    reads only its own file and the GPU its `<gpu>` file, so no job is stamped on every instance."""
    write(tmp_path, "3", "100\n")
    write(tmp_path, "3.0", "200\n")
    write(tmp_path, "3.10", "300\n301\n")
    job_map = HpcJobMap(tmp_path)
    job_map.refresh_once()
    assert dict(job_map.jobs) == {(3, None): "100", (3, 0): "200", (3, 10): "300,301"}
    assert job_map.lookup(3) == "100"
    assert job_map.lookup(3, 0) == "200"
    assert job_map.lookup(3, 1) is None, "an instance without a file has no job"


@pytest.mark.parametrize("name", ["1e5", "+3", "-2", "01", "1.02", "1.2.3", "3.", "²", "٣", "0x1", "README"])
def test_names_dcgm_exporter_would_not_match_are_skipped_with_a_note(tmp_path: Path, name: str) -> None:
    write(tmp_path, name, "7\n")
    jobs, notes = read_mapping(tmp_path)
    assert dict(jobs) == {}
    assert notes == [f"{name!a}: not named <gpu> or <gpu>.<instance>"]


def test_job_ids_that_are_not_ids_are_skipped_and_said_once_per_file(tmp_path: Path) -> None:
    write(tmp_path, "0", "1234_7\n1234+0\nrm -rf /\n\x1b[31m\n")
    (tmp_path / "1").write_bytes(b"\x00\xff\xfe junk\n" * 200 + b"55\n")  # binary junk
    jobs, notes = read_mapping(tmp_path)
    assert jobs[(0, None)] == "1234+0,1234_7"
    assert jobs[(1, None)] == "55"
    assert sorted(notes) == [
        "0: 2 line(s) not a job id, e.g. 'rm -rf /'",
        "1: 200 line(s) not a job id, e.g. '\\x00\\ufffd\\ufffd junk'",
    ]


def test_cost_is_bounded_per_file(tmp_path: Path) -> None:
    write(tmp_path, "0", "".join(f"{i}\n" for i in range(MAX_JOBS_PER_GPU + 5)))
    write(tmp_path, "1", "5\n" + "6" * (2 * MAX_FILE_BYTES))
    jobs, notes = read_mapping(tmp_path)
    assert jobs[(0, None)].split(",") == [str(i) for i in range(MAX_JOBS_PER_GPU)]
    assert jobs[(1, None)] == "5", "an oversized file is read up to its last whole line within the bound"
    assert any("more than 16 jobs" in n for n in notes) and any("longer than 4096 bytes" in n for n in notes)


def test_several_jobs_join_in_numeric_order() -> None:
    assert join_hpc_jobs(["10", "9", "array_2", "9"]) == "9,10,array_2"
    assert join_hpc_jobs([]) is None


# -- the watcher -------------------------------------------------------------------------------


def test_missing_directory_is_a_log_line_then_followed_when_it_appears(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "jobs"
    job_map = HpcJobMap(directory, refresh_seconds=60)
    with caplog.at_level(logging.INFO, logger="exporter.attribution.hpc"):
        job_map.refresh_once()
        job_map.refresh_once()  # the same problem is not logged twice
        assert job_map.lookup(0) is None and job_map.last_error is not None
        write(directory, "0", "77\n")
        job_map.refresh_once()
    assert job_map.lookup(0) == "77" and job_map.last_error is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(directory) in warnings[0] and "hpc_job labels off" in warnings[0]
    assert any("1 GPU(s) or instances with jobs" in r.getMessage() for r in caplog.records)


def test_odd_entries_are_one_log_line_each_while_they_last(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What a real directory collects: a file named `²` (str.isdigit says yes; int() says no, and
    used to crash `serve` at start-up), a directory, a FIFO (opening it must not hang), a link."""
    write(tmp_path, "0", "41\n")
    write(tmp_path, "²", "42\n")
    (tmp_path / "7").mkdir()
    os.mkfifo(tmp_path / "5")
    (tmp_path / "6").symlink_to(tmp_path / "0")
    job_map = HpcJobMap(tmp_path, refresh_seconds=60)
    with caplog.at_level(logging.WARNING, logger="exporter.attribution.hpc"):
        job_map.refresh_once()
        first = [r.getMessage() for r in caplog.records]
        job_map.refresh_once()
    assert dict(job_map.jobs) == {(0, None): "41"}
    assert len(first) == 4, first
    assert any("'\\xb2': not named <gpu>" in line for line in first)
    assert any(line.endswith("skipped 7: not a regular file") for line in first)
    assert any(line.endswith("skipped 5: not a regular file") for line in first)
    assert any(line.startswith(f"HPC job mapping {tmp_path}: skipped 6: ") for line in first), (
        "links are not followed"
    )
    assert len(caplog.records) == 4, "the same entries are not logged again"


def test_many_odd_entries_are_a_bounded_number_of_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for n in range(MAX_NOTES_LOGGED + 5):
        write(tmp_path, f"junk-{n}", "")
    with caplog.at_level(logging.WARNING, logger="exporter.attribution.hpc"):
        HpcJobMap(tmp_path).refresh_once()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == MAX_NOTES_LOGGED + 1
    assert lines[-1].endswith("skipped 5 more entries")


def test_an_unreadable_file_is_skipped_with_its_reason() -> None:
    """Permissions are read as the daemon's uid would: as root, in a child that runs as nobody."""
    directory = Path(tempfile.mkdtemp(prefix="ridgeline-hpc-"))
    try:
        directory.chmod(0o755)
        write(directory, "0", "11\n")
        write(directory, "1", "12\n")
        (directory / "1").chmod(0o000)
        # imported as root (the interpreter lives under /root), then read as nobody
        probe = (
            "import os, sys; from exporter.attribution.hpc import read_mapping; "
            "os.getuid() == 0 and os.setuid(65534); print(read_mapping(sys.argv[1]))"
        )
        child = subprocess.run(
            [sys.executable, "-c", probe, str(directory)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=ROOT,
        )
    finally:
        shutil.rmtree(directory)
    assert child.returncode == 0, child.stderr
    assert "{(0, None): '11'}" in child.stdout
    assert "['1: Permission denied']" in child.stdout


def test_unreadable_directory_drops_the_labels(tmp_path: Path) -> None:
    directory = tmp_path / "jobs"
    write(directory, "0", "77\n")
    job_map = HpcJobMap(directory, refresh_seconds=60)
    job_map.refresh_once()
    assert job_map.lookup(0) == "77"
    (directory / "0").unlink()
    directory.rmdir()
    directory.write_text("a file where the directory was")  # NotADirectoryError, even for root
    job_map.refresh_once()
    assert job_map.lookup(0) is None
    assert job_map.last_error is not None and "directory" in job_map.last_error.lower()


def test_watcher_thread_follows_prolog_and_epilog(tmp_path: Path) -> None:
    job_map = HpcJobMap(tmp_path, refresh_seconds=0.02)
    job_map.start()
    try:
        write(tmp_path, "2", "31337\n")
        _wait(lambda: job_map.lookup(2) == "31337")
        (tmp_path / "2").unlink()
        _wait(lambda: job_map.lookup(2) is None)
    finally:
        job_map.stop()


def _wait(condition: object, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the watcher did not pick up the change"
        time.sleep(0.01)


# -- sampler, exposition, scrape ---------------------------------------------------------------


def test_sampler_labels_gpus_and_mig_instances_from_their_own_files(tmp_path: Path) -> None:
    write(tmp_path, "0", "500\n")
    write(tmp_path, "1", "700\n")  # GPU 1's own file: not stamped on its instances
    write(tmp_path, "1.3", "600\n")
    job_map = HpcJobMap(tmp_path)
    job_map.refresh_once()
    gpu0 = Entity(0, "GPU-aaaa", MODEL)
    mig = Entity(1, "GPU-bbbb", MODEL, gpu_instance=3)
    other_mig = Entity(1, "GPU-bbbb", MODEL, gpu_instance=4)
    from_page = Sample(0.0, Entity(2, "GPU-cccc", MODEL), {fields.DRAM_ACTIVE: 0.5}, hpc_job="900")
    sampler = make_sampler(ScriptedSource([]), enrichers=build_enrichers(None, job_map))
    sampler.ingest([reading(0.0, gpu0), reading(0.0, mig), reading(0.0, other_mig), from_page])
    labels = {g.entity.key: gpu_labels(g) for g in sampler.snapshot.gpus}
    assert labels[(0, None)]["hpc_job"] == "500"
    assert labels[(1, 3)]["hpc_job"] == "600" and labels[(1, 3)]["gpu_instance"] == "3"
    assert "hpc_job" not in labels[(1, 4)], "an instance without its own file has no job"
    assert labels[(2, None)]["hpc_job"] == "900", "a label the source already carries is kept"

    (tmp_path / "0").unlink()
    job_map.refresh_once()
    sampler.ingest([reading(1.0, gpu0), reading(1.0, mig), from_page])
    labels = {g.entity.key: gpu_labels(g) for g in sampler.snapshot.gpus}
    assert "hpc_job" not in labels[(0, None)], "the epilog removed the file: the label goes with it"


def test_a_gpu_several_jobs_share_is_one_series_per_job_and_counted_once(tmp_path: Path) -> None:
    """dcgm-exporter repeats every series once per job, so a sum over them counts a shared GPU
    once per job. Ridgeline's readings stay one series per GPU (no hpc_job when shared) and
    ridgeline_hpc_job_info has the one series per job; scraped and parsed back here."""
    write(tmp_path, "0", "412\n415\n")
    write(tmp_path, "1", "9\n")
    job_map = HpcJobMap(tmp_path)
    job_map.refresh_once()
    sampler = make_sampler(ScriptedSource([]), enrichers=build_enrichers(None, job_map))
    gpus = [Entity(0, "GPU-aaaa", MODEL), Entity(1, "GPU-bbbb", MODEL), Entity(2, "GPU-cccc", MODEL)]
    sampler.ingest([reading(0.0, gpu) for gpu in gpus])
    sampler.ingest([reading(1.0, gpu) for gpu in gpus])
    body, _ = MetricsEndpoint(lambda: sampler.snapshot).render(None)
    found: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(sample.labels)
    info = sorted((labels["gpu"], labels["hpc_job"]) for labels in found["ridgeline_hpc_job_info"])
    assert info == [("0", "412"), ("0", "415"), ("1", "9")]
    assert all("uuid" in labels and "card" in labels for labels in found["ridgeline_hpc_job_info"])
    for name in ("ridgeline_regime", "ridgeline_regime_seconds_total", "ridgeline_gpu_info"):
        per_gpu = [
            labels["gpu"]
            for labels in found[name]
            if name != "ridgeline_regime_seconds_total" or labels["regime"] == "idle"
        ]
        assert sorted(per_gpu) == ["0", "1", "2"], f"{name}: each GPU once"
    shared = [labels for labels in found["ridgeline_gpu_info"] if labels["gpu"] == "0"]
    assert "hpc_job" not in shared[0], "no single job can be credited with a shared GPU's readings"
    assert [labels.get("hpc_job") for labels in found["ridgeline_gpu_info"] if labels["gpu"] == "1"] == ["9"]


def test_scraped_dcgm_exporter_repeating_series_per_job_becomes_one_gpu() -> None:
    page = (SCRAPE_DATA / "legacy-h100-no-pods.txt").read_text()
    lines = []
    for line in page.splitlines():
        if line.startswith("DCGM_FI_") and 'gpu="0"' in line:
            lines += [line.replace("{", '{hpc_job="815",'), line.replace("{", '{hpc_job="42",')]
        else:
            lines.append(line)
    samples = {s.entity.gpu: s for s in parse_page("\n".join(lines) + "\n", 1.0)}
    assert samples[0].hpc_job == "42,815"
    assert all(s.hpc_job is None for gpu, s in samples.items() if gpu != 0)
    plain = {s.entity.gpu: s for s in parse_page(page, 1.0)}
    assert samples[0].values == plain[0].values, "the repeated copies carry the same values"


# -- the example Slurm scripts -----------------------------------------------------------------


def _slurm(script: str, directory: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": os.environ["PATH"], "RIDGELINE_SERVE_HPC_JOB_MAPPING_DIR": str(directory), **env}
    return subprocess.run(["sh", str(SLURM / script)], env=environment, capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip


def test_prolog_writes_and_epilog_removes_the_mapping(tmp_path: Path) -> None:
    directory = tmp_path / "jobs"
    assert _slurm("prolog.sh", directory, SLURM_JOB_ID="101", SLURM_JOB_GPUS="0,2").returncode == 0
    assert _slurm("prolog.sh", directory, SLURM_JOB_ID="102", SLURM_JOB_GPUS="2").returncode == 0  # shard
    assert _slurm("prolog.sh", directory, SLURM_JOB_ID="103").returncode == 0  # no GPUs: nothing
    assert dict(read_mapping(directory)[0]) == {(0, None): "101", (2, None): "101,102"}
    assert _slurm("epilog.sh", directory, SLURM_JOB_ID="101", SLURM_JOB_GPUS="0,2").returncode == 0
    assert dict(read_mapping(directory)[0]) == {(2, None): "102"}
    assert not (directory / "0").exists(), "the last job's epilog removes the file"
    assert _slurm("epilog.sh", directory, SLURM_JOB_ID="102", SLURM_JOB_GPUS="2").returncode == 0
    assert [p.name for p in directory.iterdir() if not p.name.startswith(".")] == []


def test_the_scripts_still_read_serves_deprecated_variable(tmp_path: Path) -> None:
    """A slurmd environment set up before RIDGELINE_SERVE_* keeps writing where serve reads."""
    old = tmp_path / "old-name"
    done = _slurm("prolog.sh", tmp_path / "unused", SLURM_JOB_ID="5", SLURM_JOB_GPUS="1",
                  RIDGELINE_SERVE_HPC_JOB_MAPPING_DIR="", RIDGELINE_HPC_JOB_MAPPING_DIR=str(old))  # fmt: skip
    assert done.returncode == 0
    assert dict(read_mapping(old)[0]) == {(1, None): "5"}


def test_prolog_writes_mig_instance_files_and_dcgm_exporters_variable(tmp_path: Path) -> None:
    directory = tmp_path / "dcgm-jobs"
    environment = {"DCGM_HPC_JOB_MAPPING_DIR": str(directory), "RIDGELINE_SERVE_HPC_JOB_MAPPING_DIR": ""}
    done = _slurm(
        "prolog.sh",
        tmp_path / "unused",
        SLURM_JOB_ID="7",
        RIDGELINE_HPC_JOB_GPUS="0.1,0.2,x,1.",
        **environment,
    )
    assert done.returncode == 0
    assert dict(read_mapping(directory)[0]) == {(0, 1): "7", (0, 2): "7"}
    assert done.stderr.count("skipping GPU") == 2
    assert (
        _slurm(
            "epilog.sh",
            tmp_path / "unused",
            SLURM_JOB_ID="7",
            RIDGELINE_HPC_JOB_GPUS="0.1,0.2",
            **environment,
        ).returncode
        == 0
    )
    assert dict(read_mapping(directory)[0]) == {}


# -- a real serve ------------------------------------------------------------------------------


@pytest.mark.slow
def test_serve_exports_hpc_job_from_dcgm_exporters_variable(tmp_path: Path) -> None:
    """No flag: DCGM_HPC_JOB_MAPPING_DIR, as dcgm-exporter's DaemonSet sets it. Odd entries
    (the `²` that crashed start-up, a directory) are a log line each and serve carries on."""
    write(tmp_path, "0", "4242\n")
    write(tmp_path, "1", "17\n9\n")
    write(tmp_path, "²", "1\n")
    (tmp_path / "3").mkdir()
    env = {"DCGM_HPC_JOB_MAPPING_DIR": str(tmp_path)}
    with serve_process("--replay", "demo", "--loop", env=env) as (base, process):
        deadline = time.monotonic() + 20
        while "ridgeline_regime{" not in (body := http_get(base + "/metrics")[1]):
            assert time.monotonic() < deadline, "no GPU series"
            time.sleep(0.1)
    output = process.stdout.read() if process.stdout else ""
    regime = [line for line in body.splitlines() if line.startswith("ridgeline_regime{")]
    assert any('gpu="0"' in line and 'hpc_job="4242"' in line for line in regime)
    assert not any('gpu="1"' in line and "hpc_job" in line for line in regime), "shared: no single job"
    assert not any('gpu="2"' in line and "hpc_job" in line for line in regime)
    info = [line for line in body.splitlines() if line.startswith("ridgeline_hpc_job_info{")]
    assert sorted(re.search(r'hpc_job="([^"]*)"', line).group(1) for line in info) == ["17", "4242", "9"]
    # logfmt quotes the message, so its backslash is escaped: \xb2 is written \\xb2
    assert "skipped '\\\\xb2': not named <gpu> or <gpu>.<instance>" in output, output
    assert "skipped 3: not a regular file" in output, output
    assert "Traceback" not in output


@pytest.mark.slow
def test_serve_with_a_missing_mapping_dir_says_so_and_serves(tmp_path: Path) -> None:
    """The flag wins over dcgm-exporter's variable (here naming a directory that exists)."""
    missing = tmp_path / "not-yet"
    env = {"DCGM_HPC_JOB_MAPPING_DIR": str(tmp_path)}
    with serve_process("--replay", "demo", "--hpc-job-mapping-dir", str(missing), env=env) as (base, process):
        assert http_get(base + "/metrics")[0] == 200
    output = process.stdout.read() if process.stdout else ""
    assert f"HPC job mapping directory {missing} unreadable" in output, output
    assert "Traceback" not in output


# -- the documented per-job queries, in PromQL ---------------------------------------------------

FLOP_PER_MINUTE = {"0": 600, "1": 1200, "2": 60}
"""Synthetic counter slopes per GPU index (FLOP/s 10, 20, 1); the labels are the exposition's."""


def _series_text(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f'{name}="{value}"' for name, value in sorted(labels.items())) + "}"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_the_documented_per_job_queries_count_each_gpu_once_overall(tmp_path: Path) -> None:
    """docs/deployment.md's join, evaluated by promtool over the label sets /metrics writes for a
    GPU two jobs share: each job gets the whole shared GPU; the per-GPU sum counts it once."""
    write(tmp_path / "jobs", "0", "412\n415\n")
    write(tmp_path / "jobs", "1", "9\n")
    job_map = HpcJobMap(tmp_path / "jobs")
    job_map.refresh_once()
    sampler = make_sampler(ScriptedSource([]), enrichers=build_enrichers(None, job_map))
    gpus = [Entity(0, "GPU-aaaa", MODEL), Entity(1, "GPU-bbbb", MODEL), Entity(2, "GPU-cccc", MODEL)]
    sampler.ingest([reading(0.0, gpu) for gpu in gpus])
    body, _ = MetricsEndpoint(lambda: sampler.snapshot).render(None)
    target = {"cluster": "c", "job": "ridgeline", "instance": "node-1:10295"}
    inputs = []
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            labels = {**sample.labels, **target}
            if sample.name == "ridgeline_hpc_job_info":
                inputs.append({"series": "ridgeline_hpc_job_info" + _series_text(labels), "values": "1x10"})
            elif sample.name == "ridgeline_flop_total":
                slope = FLOP_PER_MINUTE[labels["gpu"]]
                inputs.append(
                    {"series": "ridgeline_flop_total" + _series_text(labels), "values": f"0+{slope}x10"}
                )
    flop_by_job = """sum by (cluster, hpc_job) (
      ridgeline_hpc_job_info
      * on (cluster, job, instance, uuid, gpu_instance) group_left
      rate(ridgeline_flop_total[5m])
    )"""
    tests = {
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [
                    {
                        "expr": flop_by_job,
                        "eval_time": "10m",
                        "exp_samples": [
                            {"labels": '{cluster="c", hpc_job="412"}', "value": 10},
                            {"labels": '{cluster="c", hpc_job="415"}', "value": 10},
                            {"labels": '{cluster="c", hpc_job="9"}', "value": 20},
                        ],
                    },
                    {
                        "expr": "count by (cluster, hpc_job) (ridgeline_hpc_job_info)",
                        "eval_time": "10m",
                        "exp_samples": [
                            {"labels": f'{{cluster="c", hpc_job="{job}"}}', "value": 1}
                            for job in ("412", "415", "9")
                        ],
                    },
                    {
                        "expr": "sum by (cluster) (rate(ridgeline_flop_total[5m]))",
                        "eval_time": "10m",
                        "exp_samples": [{"labels": '{cluster="c"}', "value": 31}],
                    },
                ],
            }
        ]
    }
    test_file = tmp_path / "per_job_test.yml"
    test_file.write_text(json.dumps(tests))  # YAML is a superset of JSON
    done = subprocess.run(
        ["promtool", "test", "rules", str(test_file)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_scraped_hpc_job_with_a_comma_is_no_job_not_two() -> None:
    """Ridgeline joins a GPU's jobs with commas (sample.join_hpc_jobs) and ridgeline_hpc_job_info
    splits them again, so a dcgm-exporter label hpc_job="12,34" would come out as jobs 12 and 34:
    it is no job id (the mapping directory's rule) and is left out; the readings are kept."""
    page = (SCRAPE_DATA / "legacy-h100-no-pods.txt").read_text()
    lines = []
    for line in page.splitlines():
        if line.startswith("DCGM_FI_") and 'gpu="0"' in line:
            lines += [line.replace("{", '{hpc_job="12,34",'), line.replace("{", '{hpc_job="56",')]
        else:
            lines.append(line)
    samples = {s.entity.gpu: s for s in parse_page("\n".join(lines) + "\n", 1.0)}
    assert samples[0].hpc_job == "56"
    plain = {s.entity.gpu: s for s in parse_page(page, 1.0)}
    assert samples[0].values == plain[0].values
