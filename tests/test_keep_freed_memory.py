"""serve's malloc setting (exporter/web/server.py, keep_freed_memory): the buffers a new
snapshot's /metrics frees are reused by the next one instead of coming from fresh pages."""

from __future__ import annotations

import subprocess
import sys

import pytest

ROUNDS = """
import resource, sys
from exporter.web.server import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
faults = []
for _ in range(6):  # what an encode at 1,024 entities holds at once: a few 4.4 MB buffers
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    held = [bytes([i]) * 4_400_000 for i in range(4)]
    del held
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(max(faults[2:]))
"""


def _faults(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_buffers_are_reused_rather_than_faulted_in_again() -> None:
    default, kept = _faults("default"), _faults("keep")
    assert default > 1000  # 17.6 MB freed past glibc's trim threshold: given back, faulted in again
    assert kept < 100
