"""HPC job attribution: dcgm-exporter's job-mapping directory becomes the `hpc_job` label.

The directory (one file per GPU index or `<gpu>.<instance>`, one job id a line) is read on a
background thread every `refresh_seconds`, never on the scrape path or in the sampler's round,
and at bounded cost (MAX_FILES, MAX_FILE_BYTES, MAX_JOBS_PER_GPU). Several jobs on one GPU are
kept, joined by commas (sample.join_hpc_jobs). The layout, shared GPUs and what is skipped:
docs/deployment.md, "Slurm and other HPC schedulers".
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from exporter.attribution.refresh import RefreshThread
from exporter.sample import JOB_ID, join_hpc_jobs

log = logging.getLogger(__name__)

MAX_FILES = 256
"""Directory entries considered per refresh (a node has at most a few dozen GPUs and instances)."""
MAX_FILE_BYTES = 4096
MAX_JOBS_PER_GPU = 16
MAX_NOTES_LOGGED = 8
"""New notes logged per refresh; the rest are counted in one more line."""

FILE_NAME = re.compile(r"(0|[1-9][0-9]{0,3})(?:\.(0|[1-9][0-9]{0,3}))?", re.ASCII)
"""`<gpu>` or `<gpu>.<instance>` in ASCII digits without leading zeros: the names dcgm-exporter
matches against its `gpu` and `GPU_I_ID` labels (`²` is a digit to str.isdigit, not here)."""

MappingKey = tuple[int, int | None]
"""(GPU index, GPU-instance id for a `<gpu>.<instance>` file or None for a `<gpu>` file)."""

_EMPTY: Mapping[MappingKey, str] = MappingProxyType({})


def read_mapping(directory: Path) -> tuple[Mapping[MappingKey, str], list[str]]:
    """(GPU index, instance) -> hpc_job label value, and a note for each entry that was skipped.

    Raises OSError when the directory itself cannot be listed.
    """
    jobs: dict[MappingKey, str] = {}
    skipped: list[str] = []
    with os.scandir(directory) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_FILES:
                skipped.append(f"more than {MAX_FILES} entries; the rest are ignored")
                break
            name = entry.name
            if name.startswith("."):
                continue  # the writers' lock and temporary files
            match = FILE_NAME.fullmatch(name)
            if match is None:
                skipped.append(f"{name!a}: not named <gpu> or <gpu>.<instance>")
                continue
            ids = _read_jobs(entry.path, name, skipped)
            if ids:
                instance = match.group(2)
                jobs[(int(match.group(1)), None if instance is None else int(instance))] = (
                    join_hpc_jobs(ids) or ""
                )
    return MappingProxyType(jobs), skipped


def _read_jobs(path: str, name: str, skipped: list[str]) -> list[str]:
    """The job ids one mapping file lists, noting in `skipped` what it could not use."""
    try:
        # O_NONBLOCK: a FIFO put in the directory must not hang the refresh on open; O_NOFOLLOW:
        # the writers make plain files, and a link could point the log's excerpt at any file
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as error:  # unreadable, or removed by the epilog between listing and reading
        skipped.append(f"{name}: {error.strerror or error}")
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            skipped.append(f"{name}: not a regular file")
            return []
        raw = _read_at_most(fd, MAX_FILE_BYTES + 1)
    except OSError as error:
        skipped.append(f"{name}: {error.strerror or error}")
        return []
    finally:
        os.close(fd)
    if len(raw) > MAX_FILE_BYTES:
        skipped.append(f"{name}: longer than {MAX_FILE_BYTES} bytes; read its start only")
        raw = raw[:MAX_FILE_BYTES].rsplit(b"\n", 1)[0]
    ids: list[str] = []
    bad: list[str] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        job = line.strip()
        if not job or job in ids:
            continue
        if JOB_ID.fullmatch(job) is None:
            bad.append(job)
            continue
        if len(ids) == MAX_JOBS_PER_GPU:
            skipped.append(f"{name}: more than {MAX_JOBS_PER_GPU} jobs; the rest are ignored")
            break
        ids.append(job)
    if bad:  # one note per file, however much binary junk it holds
        skipped.append(f"{name}: {len(bad)} line(s) not a job id, e.g. {bad[0][:40]!a}")
    return ids


def _read_at_most(fd: int, limit: int) -> bytes:
    """Up to `limit` bytes: one os.read may return fewer than asked before the end."""
    chunks: list[bytes] = []
    size = 0
    while size < limit and (chunk := os.read(fd, limit - size)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


class HpcJobMap:
    """Keeps (GPU index, instance) -> hpc_job fresh from a job-mapping directory; lookups read a
    snapshot."""

    def __init__(self, directory: str | Path, refresh_seconds: float = 5.0) -> None:
        if refresh_seconds <= 0:
            raise ValueError(f"refresh_seconds must be > 0, got {refresh_seconds}")
        self.directory = Path(directory)
        self.refresh_seconds = refresh_seconds
        self._jobs: Mapping[MappingKey, str] = _EMPTY
        self._refresher = RefreshThread("ridgeline-hpc-jobs", refresh_seconds, self.refresh_once)
        self.last_error: str | None = None
        self._notes: frozenset[str] = frozenset()
        self._refreshed = False

    def lookup(self, gpu: int, gpu_instance: int | None = None) -> str | None:
        """The job id(s) on this GPU index (or its MIG instance), comma-separated, or None."""
        return self._jobs.get((gpu, gpu_instance))

    @property
    def jobs(self) -> Mapping[MappingKey, str]:
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
            log.info("HPC job mapping from %s: %d GPU(s) or instances with jobs", self.directory, len(jobs))
        self.last_error = None
        self._refreshed = True
        new = sorted(set(notes) - self._notes)
        for note in new[:MAX_NOTES_LOGGED]:
            log.warning("HPC job mapping %s: skipped %s", self.directory, note)
        if len(new) > MAX_NOTES_LOGGED:
            more = len(new) - MAX_NOTES_LOGGED
            log.warning("HPC job mapping %s: skipped %d more entries", self.directory, more)
        self._notes = frozenset(notes)
        self._jobs = jobs

    def start(self) -> None:
        """Read once now (so the first samples carry their jobs), then on a daemon thread."""
        self._refresher.start()

    def stop(self) -> None:
        self._refresher.stop(join_seconds=self.refresh_seconds + 1.0)


def start_job_map(directory: str | None) -> HpcJobMap | None:
    """A running HpcJobMap for `serve --hpc-job-mapping-dir`, or None when the flag is unset.

    A directory that does not exist yet is not an error: the first job's prolog creates it.
    """
    if not directory:
        return None
    job_map = HpcJobMap(directory)
    job_map.start()
    return job_map
