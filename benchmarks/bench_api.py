#!/usr/bin/env python3
"""Requests per second of `POST /classify` (kernel body) next to a bare FastAPI endpoint.

One uvicorn server (one worker, the settings `ridgeline serve` uses) serves the real app with an
extra `POST /bench/bare` route mounted only here, so both endpoints share the server, the
middleware and the event loop; only the handler differs. A load generator in another process
(`wrk` when installed, else a keep-alive asyncio client written below) drives each endpoint
for a fixed time with a fixed number of connections, alternating, several rounds. The best
round per endpoint (the least disturbed by whatever else the machine runs) gives the ratio,
printed beside the median of back-to-back pairs. Goal: ratio >= 0.8.

    .venv/bin/python benchmarks/bench_api.py [--seconds 5] [--connections 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _loopback import free_port

KERNEL_BODY = {"card": "h100-sxm", "precision": "bf16", "flops": 4e12, "bytes": 40e9}


def serve(port: int) -> None:
    """The server side: the real app plus the bare route, on one uvicorn worker."""
    import uvicorn

    from exporter.catalog import load_catalog
    from exporter.web.app import create_app

    app = create_app(load_catalog())

    @app.post("/bench/bare")
    async def bare() -> dict[str, bool]:
        return {"ok": True}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def wait_for(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"server on port {port} did not start")


def run_wrk(port: int, path: str, body: bytes, seconds: float, connections: int) -> float:
    """wrk with a Lua script that POSTs `body` as JSON; returns requests/s."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(
            'wrk.method = "POST"\n'
            f"wrk.body = {json.dumps(body.decode())}\n"
            'wrk.headers["Content-Type"] = "application/json"\n'
        )
    try:
        result = subprocess.run(
            [
                "wrk",
                "-t1",
                f"-c{connections}",
                f"-d{int(seconds)}s",
                "-s",
                script.name,
                f"http://127.0.0.1:{port}{path}",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        os.unlink(script.name)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", result.stdout)
    if non_2xx:
        raise SystemExit(f"{path}: {non_2xx.group(1)} non-2xx answers\n{result.stdout}")
    match = re.search(r"Requests/sec:\s+([\d.]+)", result.stdout)
    if not match:
        raise SystemExit(f"cannot read wrk output:\n{result.stdout}")
    return float(match.group(1))


async def _connection(port: int, request: bytes, stop_at: float, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = 0
    try:
        while time.monotonic() < stop_at:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"non-200 answer: {head[:80]!r}")
            length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))  # type: ignore[union-attr]
            await reader.readexactly(length)
            done += 1
    finally:
        writer.close()
        counts.append(done)


def run_python_client(port: int, path: str, body: bytes, seconds: float, connections: int) -> float:
    """Keep-alive HTTP/1.1 over raw sockets: cheap enough not to be the bottleneck on its own core."""
    request = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body

    async def main() -> float:
        counts: list[int] = []
        start = time.monotonic()
        stop_at = start + seconds
        await asyncio.gather(*(_connection(port, request, stop_at, counts) for _ in range(connections)))
        return sum(counts) / (time.monotonic() - start)

    return asyncio.run(main())


def client_main(args: argparse.Namespace) -> None:
    """Runs in its own process: drives one endpoint and prints requests/s."""
    body = json.dumps(KERNEL_BODY).encode()
    print(run_python_client(args.port, args.path, body, args.seconds, args.connections))


def drive(port: int, path: str, seconds: float, connections: int, tool: str) -> float:
    body = json.dumps(KERNEL_BODY).encode()
    if tool == "wrk":
        return run_wrk(port, path, body, seconds, connections)
    result = subprocess.run(
        [sys.executable, __file__, "--client", "--port", str(port), "--path", path,
         "--seconds", str(seconds), "--connections", str(connections)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return float(result.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--tool", choices=["auto", "wrk", "python"], default="auto")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--path", default="/classify", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port)
        return
    if args.client:
        client_main(args)
        return
    tool = args.tool
    if tool == "auto":
        tool = "wrk" if shutil.which("wrk") else "python"
    port = free_port()
    root = Path(__file__).resolve().parent.parent
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--port", str(port)], cwd=root)
    try:
        wait_for(port)
        drive(port, "/classify", 1, args.connections, tool)  # warm-up: imports, first-call caches
        drive(port, "/bench/bare", 1, args.connections, tool)
        classify_rates: list[float] = []
        bare_rates: list[float] = []
        for _ in range(args.rounds):
            classify_rates.append(drive(port, "/classify", args.seconds, args.connections, tool))
            bare_rates.append(drive(port, "/bench/bare", args.seconds, args.connections, tool))
    finally:
        server.terminate()
        server.wait(timeout=10)
    classify_rps = max(classify_rates)
    bare_rps = max(bare_rates)
    paired = [c / b for c, b in zip(classify_rates, bare_rates, strict=True)]
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(
        f"load: {tool}, {args.connections} keep-alive connections, "
        f"{args.rounds} x {args.seconds:g} s per endpoint"
    )
    print(f"POST /classify (kernel body): {classify_rps:8.0f} req/s best  (rounds: {_rates(classify_rates)})")
    print(f"POST /bench/bare:             {bare_rps:8.0f} req/s best  (rounds: {_rates(bare_rates)})")
    print(
        f"ratio classify / bare: {classify_rps / bare_rps:.2f} best-of, "
        f"{statistics.median(paired):.2f} median of back-to-back pairs  (goal >= 0.8)"
    )


def _rates(rates: list[float]) -> str:
    return ", ".join(f"{r:.0f}" for r in rates)


if __name__ == "__main__":
    main()
