"""HPC job attribution: dcgm-exporter's job-mapping directory becomes the `hpc_job` label.

The convention is dcgm-exporter's (`--hpc-job-mapping-dir`, env DCGM_HPC_JOB_MAPPING_DIR;
NVIDIA/dcgm-exporter internal/pkg/transformation/hpc.go): a directory holding one file per GPU,
named by the GPU's index (`0`, `1`, ...), each line of which is the id of a job using that GPU.
A Slurm prolog writes the files when a job starts and the epilog removes them when it ends
(docs/deployment.md has both scripts). One file may list several jobs (Slurm `shard` GRES, MPS,
oversubscription). dcgm-exporter then repeats every series once per job; Ridgeline keeps one
series per GPU whose `hpc_job` is the ids joined by commas ("412,415"), because repeated copies
of one GPU's counters double its FLOPs and GPU-seconds in every sum. The file of a GPU index
names all MIG instances of that GPU, as in dcgm-exporter.

The directory is read on a background thread every `refresh_seconds`, never on the scrape path
or in the sampler's round (a slow or hung filesystem must not stall sampling), and at bounded
cost: at most MAX_FILES entries, MAX_FILE_BYTES per file and MAX_JOBS_PER_GPU ids per GPU; ids
that are not printable job-id text are skipped. A missing or unreadable directory is one log
line (and another when it comes back), not a crash: the first prolog may create it.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from exporter.sample import join_hpc_jobs

log = logging.getLogger(__name__)

MAX_FILES = 256
"""Directory entries considered per refresh (a node has at most a few dozen GPUs)."""
MAX_FILE_BYTES = 4096
MAX_JOBS_PER_GPU = 16
JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}")
"""Slurm ids are digits, array tasks `1234_7`, heterogeneous components `1234+0`; other
schedulers use letters and dots. Anything else (spaces, quotes, control characters) is skipped."""

_EMPTY: Mapping[int, str] = MappingProxyType({})


def read_mapping(directory: Path) -> tuple[Mapping[int, str], list[str]]:
    """GPU index -> hpc_job label value, and a note for each entry that was skipped.

    Raises OSError when the directory itself cannot be listed.
    """
    jobs: dict[int, str] = {}
    skipped: list[str] = []
    with os.scandir(directory) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_FILES:
                skipped.append(f"more than {MAX_FILES} entries; the rest are ignored")
                break
            if not entry.name.isdigit() or not entry.is_file():
                continue  # dcgm-exporter's convention: only files named by a GPU index
            try:
                with open(entry.path, "rb") as handle:
                    raw = handle.read(MAX_FILE_BYTES + 1)
            except OSError as error:  # removed by the epilog between listing and reading
                skipped.append(f"{entry.name}: {error.strerror or error}")
                continue
            if len(raw) > MAX_FILE_BYTES:
                skipped.append(f"{entry.name}: longer than {MAX_FILE_BYTES} bytes; read its start only")
                raw = raw[:MAX_FILE_BYTES].rsplit(b"\n", 1)[0]
            ids: list[str] = []
            for line in raw.decode("utf-8", "replace").splitlines():
                job = line.strip()
                if not job or job in ids:
                    continue
                if JOB_ID.fullmatch(job) is None:
                    skipped.append(f"{entry.name}: {job[:40]!r} is not a job id")
                    continue
                if len(ids) == MAX_JOBS_PER_GPU:
                    skipped.append(f"{entry.name}: more than {MAX_JOBS_PER_GPU} jobs; the rest are ignored")
                    break
                ids.append(job)
            if ids:
                jobs[int(entry.name)] = join_hpc_jobs(ids) or ""
    return MappingProxyType(jobs), skipped


class HpcJobMap:
    """Keeps GPU index -> hpc_job fresh from a job-mapping directory; lookups read a snapshot."""

    def __init__(self, directory: str | Path, refresh_seconds: float = 5.0) -> None:
        if refresh_seconds <= 0:
            raise ValueError(f"refresh_seconds must be > 0, got {refresh_seconds}")
        self.directory = Path(directory)
        self.refresh_seconds = refresh_seconds
        self._jobs: Mapping[int, str] = _EMPTY
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None
        self._notes: frozenset[str] = frozenset()
        self._refreshed = False

    def lookup(self, gpu: int) -> str | None:
        """The job id(s) on this GPU index, comma-separated, or None."""
        return self._jobs.get(gpu)

    @property
    def jobs(self) -> Mapping[int, str]:
        return self._jobs

    def refresh_once(self) -> None:
        """Read the directory once and swap in the new map; logs, never raises."""
        try:
            jobs, notes = read_mapping(self.directory)
        except OSError as error:
            message = f"{error.strerror or error}"
            if message != self.last_error:
                log.warning(
                    "HPC job mapping directory %s unreadable (%s); hpc_job labels off until it is back",
                    self.directory,
                    message,
                )
            self.last_error = message
            self._jobs = _EMPTY
            return
        if self.last_error is not None or not self._refreshed:
            log.info("HPC job mapping from %s: %d GPU(s) with jobs", self.directory, len(jobs))
        self.last_error = None
        self._refreshed = True
        for note in sorted(set(notes) - self._notes):
            log.warning("HPC job mapping %s: %s", self.directory, note)
        self._notes = frozenset(notes)
        self._jobs = jobs

    def start(self) -> None:
        """Read once now (so the first samples carry their jobs), then on a daemon thread."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self.refresh_once()
        self._thread = threading.Thread(target=self._run, name="ridgeline-hpc-jobs", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.refresh_seconds + 1.0)
        self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.refresh_seconds):
            self.refresh_once()


def start_job_map(directory: str | None) -> HpcJobMap | None:
    """A running HpcJobMap for `serve --hpc-job-mapping-dir`, or None when the flag is unset.

    A directory that does not exist yet is not an error: the first job's prolog creates it.
    """
    if not directory:
        return None
    job_map = HpcJobMap(directory)
    job_map.start()
    return job_map
