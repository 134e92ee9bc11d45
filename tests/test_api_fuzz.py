"""Throw seeded, mutated bodies at POST /classify: only 2xx/4xx may come back, and it keeps serving."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import running_server

from exporter.catalog import Catalog
from exporter.web.app import create_app

pytestmark = pytest.mark.slow

SEED = 20261129
ROUNDS = 400

VALID_BODIES: list[dict[str, Any]] = [
    {"card": "h100-sxm", "precision": "bf16", "flops": 4e12, "bytes": 40e9},
    {"peak_flops": 1e15, "bandwidth": 2e12, "flops": 1e12, "bytes": 1e10, "compare": ["h200"]},
    {"card": "a100", "op": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"},
    {"card": "l4", "op": "elementwise", "n": 1 << 20, "dtype": "fp8", "reads": 2},
    {"card": "h200", "op": "decode", "parameters": 7e9, "batch": 8, "compare": "all"},
    {
        "card": "NVIDIA H100 80GB HBM3",
        "dram_active": 0.7,
        "tensor_active": 0.2,
        "gr_engine_active": 0.9,
        "sm_active": 0.8,
        "hmma_active": 0.2,
        "sm_clock_mhz": 1500,
        "nvlink_tx_bytes_per_second": 1e9,
        "thresholds": {"theta": 0.5},
        "compare": ["b200", "t4"],
    },
]

STRANGE_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    -0.0,
    1e-320,
    1e308,
    -1e308,
    2**63,
    2**64 + 1,
    10**400,
    "",
    "1e12",
    "NaN",
    "h100",
    "🚀" * 50,
    "\u0000",
    "\ud7ff\ue000",
    [],
    [1, 2],
    {},
    {"a": {"b": {"c": []}}},
    "all",
    0.5,
    4096,
    1.5,
    "x" * 5000,
]
RAW_LITERALS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" + "0" * 600, "0x10", "01", "+1", ".5"]
FOREIGN_FIELDS = [
    "flops",
    "bytes",
    "op",
    "m",
    "dram_active",
    "tensor_active",
    "thresholds",
    "ünïcödé",
    "__proto__",
]


def mutate(rng: random.Random, body: dict[str, Any]) -> tuple[bytes, str]:
    """One mutation of a valid body; returns raw bytes and the content type to send."""
    body = json.loads(json.dumps(body))
    choice = rng.randrange(10)
    content_type = "application/json"
    if choice == 0 and body:
        del body[rng.choice(list(body))]
    elif choice == 1 and body:
        body[rng.choice(list(body))] = rng.choice(STRANGE_VALUES)
    elif choice == 2:
        body[rng.choice(FOREIGN_FIELDS)] = rng.choice(STRANGE_VALUES)
    elif choice == 3 and body:
        key = rng.choice(list(body))
        text = json.dumps(body)
        placeholder = json.dumps(body[key])
        return text.replace(
            f'"{key}": {placeholder}', f'"{key}": {rng.choice(RAW_LITERALS)}', 1
        ).encode(), content_type
    elif choice == 4 and body:
        depth = rng.choice([10, 100, 500, 3000, 20000])
        nested = (
            "[" * depth + "1" + "]" * depth if rng.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth
        )
        key = rng.choice(list(body))
        text = json.dumps(body)
        return text.replace(
            f'"{key}": {json.dumps(body[key])}', f'"{key}": {nested}', 1
        ).encode(), content_type
    elif choice == 5:
        text = json.dumps(body)
        return text[: rng.randrange(len(text))].encode(), content_type
    elif choice == 6:
        return json.dumps(rng.choice([[body], "body", 42, None, [body] * 3])).encode(), content_type
    elif choice == 7:
        text = json.dumps(body)
        return (text[:-1] + ', "card": "h200", "card": 5}').encode(), content_type
    elif choice == 8:
        raw = bytearray(json.dumps(body).encode())
        for _ in range(rng.randrange(1, 5)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw), rng.choice([content_type, "text/plain", "application/problem+json"])
    else:
        for _ in range(rng.randrange(1, 4)):
            try:
                mutated = json.loads(mutate(rng, body)[0])
            except (ValueError, RecursionError):
                continue  # that mutation broke the JSON itself; keep the body as it was
            if isinstance(mutated, dict):
                body = mutated
        if body:
            body[rng.choice(list(body))] = rng.choice(STRANGE_VALUES)
    return json.dumps(body).encode(), content_type


@pytest.fixture(scope="module")
def base_url(catalog: Catalog) -> Iterator[str]:
    with running_server(create_app(catalog)) as url:
        yield url


def test_mutated_bodies_never_get_a_5xx(base_url: str) -> None:
    rng = random.Random(SEED)
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=base_url, timeout=10) as http:
        for round_ in range(ROUNDS):
            content, content_type = mutate(rng, rng.choice(VALID_BODIES))
            r = http.post("/classify", content=content, headers={"content-type": content_type})
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            assert r.status_code < 500, f"round {round_}: {content[:300]!r} -> {r.status_code} {r.text[:300]}"
            body = r.json()
            if r.status_code >= 400:
                assert body["error"], body
        # it still answers, correctly
        assert http.get("/healthz").status_code == 200
        assert http.post("/classify", json=VALID_BODIES[0]).json()["regime"] == "memory_bound"
    # the fuzzer reached both the happy path and the refusals
    assert any(200 <= s < 300 for s in statuses)
    assert sum(n for s, n in statuses.items() if 400 <= s < 500) > ROUNDS // 2


def test_every_valid_seed_body_is_accepted(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=10) as http:
        for body in VALID_BODIES:
            assert http.post("/classify", json=body).status_code == 200, body
