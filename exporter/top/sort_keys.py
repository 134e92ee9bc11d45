"""`ridgeline top --sort` choices, apart from the table code: building the CLI's parser (every
`ridgeline` command does) reads them, and should not pay for importing the table and the chart."""

from __future__ import annotations

SORT_KEYS: dict[str, str] = {
    "node": "node, then GPU index",
    "gpu": "GPU index, then node",
    "regime": "regime (memory, compute, interconnect, latency, idle, unknown)",
    "pod": "pod name",
    "dram": "DRAM active, highest first",
    "tensor": "tensor active, highest first",
    "flop": "FLOP utilisation, highest first",
    "intensity": "intensity over the ridge, highest first",
    "efficiency": "roofline efficiency, lowest first",
}
"""`--sort` choices and what each means; `s` in the interactive view cycles through them."""

HIGH_FIRST = frozenset({"dram", "tensor", "flop", "intensity"})
"""Keys whose values run from highest down, unreversed."""
