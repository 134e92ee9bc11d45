"""A pytest plugin that writes each test's CPU time (this process, its reaped children and the
serves forked for it, tests/forked_serve.py) and wall time, for finding where a run's CPU-seconds
go (docs/testing.md, "The quick run").

    PYTHONPATH=tests CPU_PER_TEST_OUT=/tmp/cpu ./scripts/test --quick -p cpu_per_test

Each process (each xdist worker) writes OUT.<worker>: "cpu-seconds wall-seconds nodeid" lines,
costliest first. A child's CPU counts once it is reaped, so a module-scoped server's lands on the
test whose teardown stops it; the sum over a run is exact.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator

import pytest
from forked_serve import zygote_cpu_seconds

_rows: list[tuple[float, float, str]] = []


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    forked = zygote_cpu_seconds()  # the serves forked for this worker (tests/forked_serve.py)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + forked


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    _rows.append((_cpu_seconds() - cpu, time.monotonic() - wall, item.nodeid))


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("CPU_PER_TEST_OUT")
    if not out or not _rows:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"{out}.{worker}", "w", encoding="utf-8") as handle:
        handle.writelines(
            f"{cpu:8.2f} {wall:8.2f} {nodeid}\n" for cpu, wall, nodeid in sorted(_rows, reverse=True)
        )
