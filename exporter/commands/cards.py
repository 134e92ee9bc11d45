"""`ridgeline cards`: the card catalog as a table (or `--json`, the same entries as GET /cards)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from exporter.commands.options.flags import add_flag
from exporter.commands.options.output import write_answer

if TYPE_CHECKING:
    from exporter.classify.answers import CardSummary


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cards",
        help="list the card catalog: peaks, bandwidth, ridge",
        description="Lists every card Ridgeline knows: dense bf16/fp16 and fp8 peaks, memory "
        "bandwidth and the bf16/fp16 ridge. --cards FILE adds or overrides entries.",
    )
    add_flag(parser, "--cards", help="extra card catalog YAML file (repeatable)", action="append", default=[])
    add_flag(parser, "--json", help="print the entries as GET /cards gives them", action="store_true")
    parser.set_defaults(func=run)


def _tensor_precision(peaks: dict[str, float]) -> str | None:
    """bf16 where the card has it, else fp16 (V100 and T4 predate bf16)."""
    for precision in ("bf16", "fp16"):
        if precision in peaks:
            return precision
    return None


def table(entries: list[CardSummary]) -> str:
    """key, name, bf16/fp16 peak, fp8 peak (TFLOP/s), bandwidth (TB/s), ridge (FLOP/byte); the
    key and name columns as wide as their longest entry, so every row lines up."""
    rows = []
    for entry in entries:
        peaks = entry["peak_flop_per_second"]
        tensor = _tensor_precision(peaks)
        half = f"{peaks[tensor] / 1e12:g}" + ("" if tensor == "bf16" else "*") if tensor else "–"
        fp8 = f"{peaks['fp8'] / 1e12:g}" if "fp8" in peaks else "–"
        ridge = f"{entry['ridge_flop_per_byte'][tensor]:.0f}" if tensor else "–"
        name = entry["name"] + (" (ref.)" if entry["reference_only"] else "")
        rows.append((entry["key"], name, half, fp8, f"{entry['bandwidth_bytes_per_second'] / 1e12:g}", ridge))
    k = max([16, *(len(r[0]) for r in rows)])
    n = max([4, *(len(r[1]) for r in rows)])
    lines = [
        f"{'key':<{k}} {'name':<{n}} {'bf16/fp16':>11} {'fp8':>9} {'TB/s':>7} {'ridge':>7}",
        f"{'':<{k}} {'':<{n}} {'TFLOP/s':>11} {'TFLOP/s':>9} {'':>7} {'FLOP/B':>7}",
    ]
    lines += [f"{a:<{k}} {b:<{n}} {c:>11} {d:>9} {e:>7} {f:>7}" for a, b, c, d, e, f in rows]
    lines.append("* fp16 (the card has no bf16); (ref.) reference only: no DCGM counters")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from exporter.catalog import load_catalog
    from exporter.classify.service import card_summary

    entries = [card_summary(card) for card in load_catalog(args.cards)]
    write_answer(entries, as_json=args.json, text=table)
    return 0
