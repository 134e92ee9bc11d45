"""Helpers the benchmark scripts share: loopback ports and stopping the servers they start."""

from __future__ import annotations

import signal
import socket
import subprocess
from typing import Any


def free_port() -> int:
    """A port the kernel says is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(process: subprocess.Popen[Any]) -> None:
    """SIGTERM a server started by a benchmark and reap it; SIGKILL if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
