#!/usr/bin/env python3
"""Peak RSS of `ridgeline serve` reading hostile-sized inputs: a 64 MiB dcgm-exporter page and a
1 GB replay file, each beside a small one, against the DaemonSet's 192 Mi memory limit.

Runs `ridgeline serve` as a real process on loopback and reads its VmHWM (peak resident set) from
/proc once it has done the work: for the scrape, --scrape-count scrapes of the page (served by a
loopback HTTP server in this process); for the replay, the whole file at --speed max (until
/readyz reports the end of the replay). Prints one line per run.

    .venv/bin/python benchmarks/bench_inputs_memory.py [--page-mib 64] [--replay-gib 1.0]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from _loopback import free_port, stop

ROOT = Path(__file__).resolve().parent.parent
H100 = "NVIDIA H100 80GB HBM3"
LIMIT_MIB = 192


def page(mebibytes: float, gpus: int = 8) -> bytes:
    """A valid dcgm-exporter page of about `mebibytes` MiB: each GPU's roofline fields, then
    DCGM and other families Ridgeline does not read, until the size is reached."""
    labels = [
        f'gpu="{gpu}",UUID="GPU-{gpu:08d}",pci_bus_id="00000000:{gpu:02X}:00.0",device="nvidia{gpu}",'
        f'modelName="{H100}",Hostname="node",DCGM_FI_DRIVER_VERSION="570.124.06"'
        for gpu in range(gpus)
    ]
    head = "".join(
        f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{label}}} 0.9\nDCGM_FI_PROF_DRAM_ACTIVE{{{label}}} 0.5\n"
        f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{label}}} 0.25\nDCGM_FI_DEV_SM_CLOCK{{{label}}} 1980\n"
        for label in labels
    ).encode()
    block = "".join(
        f"# HELP DCGM_FI_DEV_PAD_{n} Padding.\n# TYPE DCGM_FI_DEV_PAD_{n} gauge\n"
        + "".join(f"DCGM_FI_DEV_PAD_{n}{{{label}}} {n}\n" for label in labels)
        + f'go_memstats_pad{{n="{n}"}} 1\n'
        for n in range(100)
    ).encode()
    return head + block * max(0, int(mebibytes * 1024 * 1024) // len(block))


def write_trace(path: Path, gibibytes: float) -> int:
    """An 8-GPU JSON Lines trace of about `gibibytes` GiB (one line per GPU per second); returns
    the number of samples written."""
    target = int(gibibytes * 1024**3)
    template = (
        '{{"ts":{ts}.0,"gpu":{gpu},"uuid":"GPU-{gpu:08d}","model":"' + H100 + '","gpu_instance":null,'
        '"fields":{{"100":1980.0,"203":{util}.0,"1001":0.9{d},"1002":0.8{d},"1004":0.3{d},'
        '"1005":0.5{d},"1011":1234567.0,"1012":7654321.0}},"namespace":"llm","pod":"decode-{gpu}",'
        '"container":"server"}}\n'
    )
    samples = 0
    with path.open("w", encoding="utf-8") as out:
        second = 0
        while out.tell() < target:
            out.writelines(
                template.format(ts=1764432000 + second, gpu=gpu, util=(second + gpu) % 100, d=second % 10)
                for gpu in range(8)
            )
            samples += 8
            second += 1
    return samples


class _Pages(ThreadingHTTPServer):
    daemon_threads = True
    body: bytes


class _Handler(BaseHTTPRequestHandler):
    server: _Pages

    def do_GET(self) -> None:
        body = self.server.body
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _peak_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    assert match is not None
    return int(match.group(1)) / 1024


def _samples_total(metrics: str) -> float:
    match = re.search(r"^ridgeline_samples_total(?:\{[^}]*\})? (\S+)", metrics, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _serve(args: list[str], done: Callable[[str, str], bool], wait_s: float) -> tuple[float, float, str]:
    """Start serve and poll until done(/metrics text, /readyz text); (peak MiB, seconds, readyz)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", "serve", "--listen", f"127.0.0.1:{port}", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started = time.monotonic()
    try:
        while True:
            if process.poll() is not None:
                raise SystemExit(f"serve exited with {process.returncode}: {' '.join(args)}")
            try:
                _, metrics = _get(base + "/metrics")
                _, ready = _get(base + "/readyz")
            except OSError:
                metrics = ready = ""
            if done(metrics, ready):
                return _peak_mib(process.pid), time.monotonic() - started, ready.strip()
            if time.monotonic() - started > wait_s:
                raise SystemExit(f"gave up after {wait_s:.0f} s: {ready.strip()}")
            time.sleep(0.2)
    finally:
        stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(description="peak RSS of serve for large inputs")
    parser.add_argument("--page-mib", type=float, default=64.0)
    parser.add_argument("--scrape-count", type=int, default=5, help="scrapes of the page before measuring")
    parser.add_argument("--replay-gib", type=float, default=1.0)
    args = parser.parse_args()

    server = _Pages(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    count = args.scrape_count
    for label, size in (("scrape, 8-GPU page", 0.0), (f"scrape, {args.page_mib:g} MiB page", args.page_mib)):
        server.body = page(size)
        peak, seconds, ready = _serve(
            ["--source", "scrape", "--scrape-url", url, "--interval", "1"],
            lambda metrics, _ready: _samples_total(metrics) >= count,
            wait_s=120,
        )
        print(
            f"{label:34s} {len(server.body) / 2**20:8.1f} MiB  peak RSS {peak:6.1f} MiB"
            f"  ({peak / LIMIT_MIB:4.0%} of {LIMIT_MIB} Mi; {count} scrapes in {seconds:.0f} s; {ready})"
        )
    server.shutdown()

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "big.jsonl"
        started = time.monotonic()
        samples = write_trace(trace, args.replay_gib)
        size_gib = trace.stat().st_size / 1024**3
        took = time.monotonic() - started
        print(f"(wrote a {size_gib:.2f} GiB trace of {samples:,} samples in {took:.0f} s)")
        runs = (("replay, demo trace", "demo"), (f"replay, {size_gib:.2f} GiB JSON Lines", str(trace)))
        for label, target in runs:
            peak, seconds, _ = _serve(
                ["--replay", target, "--speed", "max"],
                lambda _metrics, ready: "end_of_replay" in ready,
                wait_s=3600,
            )
            print(
                f"{label:34s} {'':12s} peak RSS {peak:6.1f} MiB  ({peak / LIMIT_MIB:4.0%} of {LIMIT_MIB} Mi;"
                f" played in {seconds:.0f} s)"
            )


if __name__ == "__main__":
    main()
