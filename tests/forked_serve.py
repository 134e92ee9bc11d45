"""`ridgeline serve` processes forked from one that has already imported what serve imports.

A serve started and stopped cost about 1 CPU-second, four fifths of it the interpreter importing
FastAPI, pydantic, uvicorn and the package; the quick run starts dozens (docs/testing.md, "The
quick run, this session"). Here one process per test worker, the *zygote*, imports them once and
forks a child per serve: the child is a real process of its own (its pid, its signals, its
stdout and stderr, its exit status, its interpreter's normal shutdown), which runs `main(argv)` as
`python -m exporter` would, in the caller's environment and directory, with nothing run yet but
imports. What it does not repeat is the import, which tests/test_cli_startup.py and every test
that starts `python -m exporter` itself still cover.

`conftest.serve_process` uses it unless the test needs the interpreter's own start (a PYTHON*
variable, a preexec_fn) or PYTEST_RIDGELINE_FORK=0 asks for plain processes everywhere.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

FORK_VARIABLE = "PYTEST_RIDGELINE_FORK"
"""0 starts every serve as `python -m exporter` (to compare, or to rule the zygote out)."""

PRELOAD = (
    "exporter.cli",
    "exporter.catalog",
    "exporter.sources",
    "exporter.sampler",
    "exporter.view.trails",
    "exporter.web.answers",
    "exporter.web.app",
    "exporter.web.live_routes",
    "exporter.web.server",
    "exporter.web.view_routes",
)
"""What `serve` imports on every start (exporter/commands/serve.py, `run`); nothing it imports
only for some flags (the web config, the kubelet's gRPC), so a child loads those as serve would."""

ZYGOTE = textwrap.dedent(
    """
    import importlib, json, os, select, socket, sys

    for name in sys.argv[2].split(","):
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(sys.argv[1])
    listener.listen(64)
    print("ready", flush=True)
    waiting = {}  # child pid -> the connection that asked for it
    child = None
    while child is None:
        ready = select.select([listener, sys.stdin], [], [], 0.05)[0]
        if sys.stdin in ready and not sys.stdin.buffer.read1(1):
            break  # the test worker is gone
        if listener in ready:
            conn = listener.accept()[0]
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 1)
            request = json.loads(message)
            pid = os.fork()
            if pid == 0:
                child = (request, fds[0])
                listener.close()
                conn.close()
                for other in waiting.values():
                    other.close()
                break
            os.close(fds[0])
            conn.sendall(str(pid).encode())
            waiting[pid] = conn
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = waiting.pop(pid)
            conn.sendall(str(os.waitstatus_to_exitcode(status)).encode())
            conn.close()
    if child is not None:  # the serve: as `python -m exporter ARGV` from here on
        request, out = child
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(null)
        os.close(out)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [sys.executable, *request["argv"]]
        from exporter.cli import main

        sys.exit(main(request["argv"]))  # the interpreter's own exit: threads joined, atexit run
    """
)


class Zygote:
    """One zygote process and the socket it forks serves on; started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._directory = tempfile.TemporaryDirectory(prefix="ridgeline-zygote-")
        self.path = str(Path(self._directory.name) / "fork.sock")
        atexit.register(self.close)

    def ensure(self) -> None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                return
            Path(self.path).unlink(missing_ok=True)
            process = subprocess.Popen(
                [sys.executable, "-c", ZYGOTE, self.path, ",".join(PRELOAD)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            assert process.stdout is not None
            if process.stdout.readline() != b"ready\n":
                raise RuntimeError(f"the serve zygote did not start (status {process.wait()})")
            self._process = process

    def close(self) -> None:
        if self._process is not None and self._process.stdin is not None:
            self._process.stdin.close()  # it ends on EOF
            self._process.wait(timeout=10)
        self._directory.cleanup()

    def cpu_seconds(self) -> float:
        """The zygote's CPU time and its reaped serves' (0 before it starts): a forked serve is
        not this process's child, so RUSAGE_CHILDREN counts it only once the zygote has ended."""
        if self._process is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return sum(int(field) for field in fields[11:15]) / os.sysconf("SC_CLK_TCK")


_ZYGOTE = Zygote()


def zygote_cpu_seconds() -> float:
    return _ZYGOTE.cpu_seconds()


class ForkedProcess:
    """A serve forked by the zygote, with the part of subprocess.Popen the tests use: pid,
    returncode, stdout (text), poll, wait, send_signal, terminate, kill."""

    def __init__(self, argv: list[str], env: dict[str, str], output: int | None = None) -> None:
        """`output`: a descriptor for its stdout and stderr; by default a pipe, read as `stdout`."""
        _ZYGOTE.ensure()
        self.args = argv
        self.returncode: int | None = None
        read, write = os.pipe() if output is None else (-1, output)
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._conn.connect(_ZYGOTE.path)
        request = {"argv": argv, "env": env, "cwd": os.getcwd()}
        socket.send_fds(self._conn, [json.dumps(request).encode()], [write])
        self.stdout = None
        if output is None:
            os.close(write)
            self.stdout = open(read, encoding="utf-8", errors="replace")  # noqa: SIM115 (Popen's too)
        self.pid = int(self._conn.recv(64))

    def poll(self) -> int | None:
        return self._wait(0.0)

    def wait(self, timeout: float | None = None) -> int:
        status = self._wait(timeout)
        if status is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return status

    def communicate(self, timeout: float | None = None) -> tuple[str, None]:
        """Its output to the end and its exit (within `timeout`), as Popen's: read while it
        runs, so that a full pipe cannot hold it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        chunks = []
        if self.stdout is not None:
            fd = self.stdout.fileno()
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not select.select([fd], [], [], left)[0]:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return b"".join(chunks).decode("utf-8", errors="replace"), None

    def _wait(self, timeout: float | None) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], timeout)[0]:
            answer = self._conn.recv(64)
            if not answer:
                raise RuntimeError(f"the serve zygote went away before serve {self.pid} ended")
            self.returncode = int(answer)
            self._conn.close()
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # not reaped yet, so the pid is still this child's
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def forkable(env: dict[str, str] | None, preexec_fn: Any) -> bool:
    """Whether a serve with this environment and preexec_fn can be forked rather than started:
    not when the interpreter's own start would read them."""
    if preexec_fn is not None or os.environ.get(FORK_VARIABLE) == "0":
        return False
    return not any(name.startswith("PYTHON") for name in env or {})
