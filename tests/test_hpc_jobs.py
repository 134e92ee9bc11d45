"""The `hpc_job` label from dcgm-exporter's job-mapping directory (exporter/attribution/hpc.py):
real files in a temporary directory, the sampler and the exposition, a scraped dcgm-exporter page
that repeats series per job, the example Slurm prolog/epilog, and a real `serve` process."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import http_get, serve_process
from test_sampler import MODEL, ScriptedSource, make_sampler, reading
from test_source_scrape import PAGES as SCRAPE_DATA

from exporter import fields
from exporter.attribution.hpc import MAX_FILE_BYTES, MAX_JOBS_PER_GPU, HpcJobMap, read_mapping
from exporter.exposition import gpu_labels
from exporter.sample import Entity, Sample, join_hpc_jobs
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
    write(tmp_path, "README", "not a GPU index")
    (tmp_path / "7").mkdir()  # a directory named like a GPU is not a mapping file
    jobs, notes = read_mapping(tmp_path)
    assert dict(jobs) == {0: "4242", 1: "9,17"}
    assert notes == []


def test_job_ids_that_are_not_ids_are_skipped_and_said(tmp_path: Path) -> None:
    write(tmp_path, "0", "1234_7\n1234+0\nrm -rf /\n\x1b[31m\n")
    jobs, notes = read_mapping(tmp_path)
    assert jobs[0] == "1234+0,1234_7"
    assert [n for n in notes if "is not a job id" in n] == ["0: 'rm -rf /' is not a job id",
                                                              "0: '\\x1b[31m' is not a job id"]  # fmt: skip


def test_cost_is_bounded_per_file(tmp_path: Path) -> None:
    write(tmp_path, "0", "".join(f"{i}\n" for i in range(MAX_JOBS_PER_GPU + 5)))
    write(tmp_path, "1", "5\n" + "6" * (2 * MAX_FILE_BYTES))
    jobs, notes = read_mapping(tmp_path)
    assert jobs[0].split(",") == [str(i) for i in range(MAX_JOBS_PER_GPU)]
    assert jobs[1] == "5", "an oversized file is read up to its last whole line within the bound"
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
    assert any("1 GPU(s) with jobs" in r.getMessage() for r in caplog.records)


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


def test_sampler_labels_gpus_and_mig_instances_by_gpu_index(tmp_path: Path) -> None:
    write(tmp_path, "0", "500\n")
    job_map = HpcJobMap(tmp_path)
    job_map.refresh_once()
    gpu0 = Entity(0, "GPU-aaaa", MODEL)
    mig = Entity(1, "GPU-bbbb", MODEL, gpu_instance=3)
    from_page = Sample(0.0, Entity(2, "GPU-cccc", MODEL), {fields.DRAM_ACTIVE: 0.5}, hpc_job="900")
    sampler = make_sampler(ScriptedSource([]), job_mapper=job_map)
    write(tmp_path, "1", "600\n601\n")
    job_map.refresh_once()
    sampler.ingest([reading(0.0, gpu0), reading(0.0, mig), from_page])
    labels = {g.entity.gpu: gpu_labels(g) for g in sampler.snapshot.gpus}
    assert labels[0]["hpc_job"] == "500"
    assert labels[1]["hpc_job"] == "600,601" and labels[1]["gpu_instance"] == "3"
    assert labels[2]["hpc_job"] == "900", "a label the source already carries is kept"

    (tmp_path / "0").unlink()
    job_map.refresh_once()
    sampler.ingest([reading(1.0, gpu0), reading(1.0, mig), from_page])
    labels = {g.entity.gpu: gpu_labels(g) for g in sampler.snapshot.gpus}
    assert "hpc_job" not in labels[0], "the epilog removed the file: the label goes with it"


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
    environment = {"PATH": os.environ["PATH"], "RIDGELINE_HPC_JOB_MAPPING_DIR": str(directory), **env}
    return subprocess.run(["sh", str(SLURM / script)], env=environment, capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip


def test_prolog_writes_and_epilog_removes_the_mapping(tmp_path: Path) -> None:
    directory = tmp_path / "jobs"
    assert _slurm("prolog.sh", directory, SLURM_JOB_ID="101", SLURM_JOB_GPUS="0,2").returncode == 0
    assert _slurm("prolog.sh", directory, SLURM_JOB_ID="102", SLURM_JOB_GPUS="2").returncode == 0  # shard
    assert _slurm("prolog.sh", directory, SLURM_JOB_ID="103").returncode == 0  # no GPUs: nothing
    assert dict(read_mapping(directory)[0]) == {0: "101", 2: "101,102"}
    assert _slurm("epilog.sh", directory, SLURM_JOB_ID="101", SLURM_JOB_GPUS="0,2").returncode == 0
    assert dict(read_mapping(directory)[0]) == {2: "102"}
    assert not (directory / "0").exists(), "the last job's epilog removes the file"
    assert _slurm("epilog.sh", directory, SLURM_JOB_ID="102", SLURM_JOB_GPUS="2").returncode == 0
    assert [p.name for p in directory.iterdir() if p.name.isdigit()] == []


# -- a real serve ------------------------------------------------------------------------------


@pytest.mark.slow
def test_serve_exports_hpc_job_from_the_mapping_dir(tmp_path: Path) -> None:
    write(tmp_path, "0", "4242\n")
    write(tmp_path, "1", "17\n9\n")
    with serve_process("--replay", "demo", "--loop", "--hpc-job-mapping-dir", str(tmp_path)) as (base, _):
        deadline = time.monotonic() + 20
        while "ridgeline_regime{" not in (body := http_get(base + "/metrics")[1]):
            assert time.monotonic() < deadline, "no GPU series"
            time.sleep(0.1)
    regime = [line for line in body.splitlines() if line.startswith("ridgeline_regime{")]
    assert any('gpu="0"' in line and 'hpc_job="4242"' in line for line in regime)
    assert any('gpu="1"' in line and 'hpc_job="9,17"' in line for line in regime)
    assert not any('gpu="2"' in line and "hpc_job" in line for line in regime)


@pytest.mark.slow
def test_serve_with_a_missing_mapping_dir_says_so_and_serves(tmp_path: Path) -> None:
    missing = tmp_path / "not-yet"
    with serve_process("--replay", "demo", "--hpc-job-mapping-dir", str(missing)) as (base, process):
        assert http_get(base + "/metrics")[0] == 200
    output = process.stdout.read() if process.stdout else ""
    assert f"HPC job mapping directory {missing} unreadable" in output, output
    assert "Traceback" not in output
