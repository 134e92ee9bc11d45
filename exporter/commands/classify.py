"""`ridgeline classify`: the three POST /classify forms as flags, answered in prose or as JSON.

The flags become the same body dict the HTTP API takes and go through the same validation
(exporter.classify.models) and service (exporter.classify.service), so `--json` prints
exactly what `POST /classify` answers. Heavy imports (pydantic, the catalog) wait until `run`,
so `ridgeline --help` stays quick.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from exporter.commands.options.errors import UserError
from exporter.commands.options.flags import add_flag
from exporter.commands.options.output import write_answer
from exporter.readings import READINGS
from exporter.roofline import PRECISIONS
from exporter.view.units import si_g

if TYPE_CHECKING:
    from exporter.classify.answers import Answer, CounterAnswer, KernelAnswer, OperationAnswer
    from exporter.classify.models import BodyError

FORM_FLAGS: tuple[tuple[str, str], ...] = (
    ("--flops", "kernel: FLOPs the kernel executes"),
    ("--bytes", "kernel: bytes it moves to and from DRAM"),
    ("--peak-flops", "custom card: dense peak in FLOP/s (instead of --card)"),
    ("--bandwidth", "custom card: memory bandwidth in bytes/s"),
    ("--m", "gemm: rows of A and C (1 for a gemv)"),
    ("--n", "gemm: columns of B and C; elementwise: element count"),
    ("--k", "gemm: reduction dimension"),
    ("--elements", "elementwise: element count (same as --n)"),
    ("--flops-per-element", "elementwise: FLOPs per element (default 1)"),
    ("--reads", "elementwise: input tensors read (default 1)"),
    ("--writes", "elementwise: output tensors written (default 1)"),
    ("--parameters", "decode: model parameters N"),
    ("--batch", "decode: sequences decoded together"),
)
COUNTER_FLAGS: tuple[tuple[str, str], ...] = tuple(
    (reading.flag, f"counters: {reading.help}")
    for reading in READINGS
    if reading.flag is not None and reading.help is not None
)
"""The counter form's flags: the readings table's (exporter/readings.py), in its order."""
NUMBER_FLAGS: tuple[tuple[str, str], ...] = FORM_FLAGS + COUNTER_FLAGS
"""Numeric flags; each maps to the body field of the same name with dashes as underscores."""

THRESHOLD_FLAGS: tuple[tuple[str, str], ...] = (
    ("--theta", "counters: how near a wall counts as at it (default 0.6)"),
    ("--dram-wall", "counters: practical DRAM_ACTIVE maximum (default 0.8)"),
    ("--tensor-wall", "counters: practical tensor-activity maximum (default 0.93)"),
    ("--fp-pipe-wall", "counters: practical FP-pipe maximum (default 1.0)"),
    ("--idle-gr-engine", "counters: GR_ENGINE_ACTIVE below this is idle (default 0.05)"),
    ("--idle-any", "counters: every activity below this is idle (default 0.02)"),
    ("--link-wall", "counters: practical link-load maximum (default 0.8)"),
)

PRECISION_CHOICES: tuple[str, ...] = PRECISIONS


def number(text: str) -> int | float:
    """A flag value as a number: integers stay integers (so --m 4096 is an int), 4e3 is a float."""
    stripped = text.strip()
    try:
        return int(stripped)
    except ValueError:
        pass
    try:
        return float(stripped)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "classify",
        help="place a kernel, an operation or a counter reading on a card's roofline",
        description="Kernel form: --flops F --bytes Q. Operation form: --op gemm --m --n --k, "
        "--op elementwise --n, --op decode --parameters --batch (with --dtype). Counter form: "
        "--dram-active d --tensor-active t [...]. Name the card with --card (key, alias or NVML "
        "name) or give --peak-flops and --bandwidth. Prints a verdict, or --json the API's answer.",
    )
    add_flag(parser, "--card", help="catalog key, alias or NVML name, e.g. h100-sxm")
    add_flag(parser, "--cards", help="extra card catalog YAML file (repeatable)", action="append", default=[])
    add_flag(
        parser, "--precision", help="precision whose peak applies (default bf16)", choices=PRECISION_CHOICES
    )
    add_flag(
        parser,
        "--op",
        help="operation form: gemm, elementwise or decode",
        choices=("gemm", "elementwise", "decode"),
    )
    add_flag(parser, "--dtype", help="operation form: element type in memory", choices=PRECISION_CHOICES)
    for flag, text in NUMBER_FLAGS + THRESHOLD_FLAGS:
        add_flag(parser, flag, help=text, type=number, default=None)
    add_flag(parser, "--compare", help='other cards for the same work: KEY,KEY,... or "all"')
    add_flag(parser, "--json", help="print the JSON answer POST /classify gives", action="store_true")
    parser.set_defaults(func=run)


def flag_name(field: str | None) -> str | None:
    """Body field -> the flag that sets it (thresholds.theta -> --theta, compare[2] -> --compare)."""
    if field is None or field.startswith("("):
        return None
    leaf = field.split("[", 1)[0].rsplit(".", 1)[-1]
    return "--" + leaf.replace("_", "-")


def body_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /classify body the flags describe (only the flags given)."""

    body: dict[str, Any] = {}
    for name in ("card", "precision", "op", "dtype"):
        value = getattr(args, name)
        if value is not None:
            body[name] = value
    for flag, _ in NUMBER_FLAGS:
        attr = flag[2:].replace("-", "_")
        value = getattr(args, attr)
        if value is not None and attr != "elements":
            body[attr] = value
    if args.elements is not None:
        if args.n is not None:
            raise UserError("give the element count once: --elements or --n")
        body["n"] = args.elements
    thresholds = {}
    for flag, _ in THRESHOLD_FLAGS:
        attr = flag[2:].replace("-", "_")
        if getattr(args, attr) is not None:
            thresholds[attr] = getattr(args, attr)
    if thresholds:
        body["thresholds"] = thresholds
    if args.compare:
        text = args.compare.strip()
        body["compare"] = (
            "all" if text == "all" else [item.strip() for item in text.split(",") if item.strip()]
        )
    return body


def run(args: argparse.Namespace) -> int:
    from exporter.catalog import load_catalog
    from exporter.classify.models import BodyError, parse_classify_body
    from exporter.classify.service import classify

    catalog = load_catalog(args.cards)
    body = body_from_args(args)
    try:
        answer = classify(catalog, parse_classify_body(body))
    except BodyError as exc:
        raise UserError(cli_message(exc)) from None
    write_answer(answer, as_json=args.json, text=render)
    return 0


def cli_message(exc: BodyError) -> str:
    """A BodyError in terms of flags: "--flops: Input should be a finite number"."""
    if exc.field is None and "none of the three forms" in exc.message:
        return (
            "say what to classify: --flops and --bytes (kernel), --op gemm|elementwise|decode with "
            "its sizes (operation), or counter ratios such as --dram-active, --tensor-active (counters)"
        )
    if exc.field == "card" and "required" in exc.message:
        return "name the card with --card KEY (see `ridgeline cards`), or give --peak-flops and --bandwidth"
    if "ambiguous" in exc.message:
        forms: dict[str, list[str]] = {}
        for item in exc.detail:
            forms.setdefault(
                item["message"].removeprefix("belongs to the ").removesuffix(" form"), []
            ).append(flag_name(item["field"]) or str(item["field"]))
        listed = " and ".join(f"{form} ({', '.join(flags)})" for form, flags in forms.items())
        return f"flags of two forms: {listed}; classify one form at a time"
    flag = flag_name(exc.field)
    first = exc.detail[0]["message"] if exc.detail else exc.message
    if flag and first == "Field required" and len(exc.detail) <= 1:  # pydantic's words for a body
        return f"{flag} is missing: the flags given need it too (`ridgeline classify --help` lists each form)"
    if flag and exc.message.endswith(first) and len(exc.detail) == 1 and "ambiguous" not in exc.message:
        return f"{flag}: {first}"
    return f"{flag + ': ' if flag else ''}{exc.message}"


# --- human rendering ---------------------------------------------------------------------------

REGIME_WORDS = {
    "memory_bound": "memory-bound",
    "compute_bound": "compute-bound",
    "balanced": "balanced on the ridge",
    "latency_bound": "latency-bound",
    "idle": "idle",
    "unknown": "unknown (the counters given cannot place it)",
    "interconnect_bound": "interconnect-bound",
}


def seconds(value: float) -> str:
    """Seconds in the unit an engineer would say: 11.9 ms, 4.04 µs, 2.5 s."""
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if value >= factor:
            return f"{value / factor:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def percent(ratio: float) -> str:
    """34 %, or 1.3 % where whole percents would round small figures away."""
    return f"{ratio:.0%}" if ratio >= 0.1 else f"{ratio:.1%}"


def tflops(value: float) -> str:
    return f"{value / 1e12:.4g} TFLOP/s"


def tbps(value: float) -> str:
    return f"{value / 1e12:.3g} TB/s"


def render(answer: Answer) -> str:
    """The answer as a short reply: the roof, the two times (or the counters), verdict, lever."""
    lines = [_roof_line(answer)]
    regime = REGIME_WORDS.get(answer["regime"], answer["regime"])
    if answer["form"] == "counters":
        lines += _counter_lines(answer, regime)
    else:
        lines += _work_lines(answer, regime)
    lines.append(f"lever: {answer['lever']}")
    if answer["form"] == "counters":
        lines.append(f"note: {answer['note']}")
    if answer.get("compare") or answer.get("compare_skipped"):
        lines.append("")
        lines.extend(render_compare(answer))
    return "\n".join(lines) + "\n"


def _roof_line(answer: Answer) -> str:
    """The card, precision (and where it came from), peak, bandwidth and ridge."""
    precision_note = {
        "default": " (default)",
        "default_substitute": " (default precision's stand-in on this card)",
        "tensor_pipes": " (from the busiest tensor pipe)",
    }.get(answer["precision_source"], "")
    return (
        f"{answer['card']} ({answer['card_name']}), {answer['precision']}{precision_note}: "
        f"peak {tflops(answer['peak_flop_per_second'])}, {tbps(answer['bandwidth_bytes_per_second'])}, "
        f"ridge {answer['ridge_flop_per_byte']:.3g} FLOP/byte"
    )


def _work_lines(answer: KernelAnswer | OperationAnswer, regime: str) -> list[str]:
    """A kernel's or operation's work, its two times and the verdict they give."""
    lines = []
    if answer["form"] == "operation":
        operation = answer["operation"]
        sizes = {k: v for k, v in operation.items() if k not in ("op", "dtype", "element_bytes")}
        shown = ", ".join(f"{k}={v:g}" for k, v in sizes.items())
        lines.append(f"{operation['op']} ({shown}) in {operation['dtype']}:")
    lines.append(
        f"work: {si_g(answer['flops'], 'FLOP')} over {si_g(answer['bytes'], 'B')} -> intensity "
        f"{answer['intensity_flop_per_byte']:.3g} FLOP/byte"
    )
    lines.append(
        f"memory time {seconds(answer['memory_time_seconds'])}, compute time "
        f"{seconds(answer['compute_time_seconds'])}: "
        f"no faster than {seconds(answer['floor_time_seconds'])}"
    )
    relation = {"memory_bound": "<", "compute_bound": ">"}.get(answer["regime"], "≈")
    lines.append(
        f"verdict: {regime} (intensity {answer['intensity_flop_per_byte']:.3g} {relation} ridge "
        f"{answer['ridge_flop_per_byte']:.3g}); attainable {tflops(answer['attainable_flop_per_second'])}"
        f" = {percent(answer['fraction_of_peak'])} of peak"
    )
    return lines


def _counter_lines(answer: CounterAnswer, regime: str) -> list[str]:
    """What the counters say was achieved, the intensity, caveats, links and the verdict."""
    lines = [_achieved_line(answer)]
    flops, bytes_ = answer["achieved_flop_per_second"], answer["achieved_bandwidth_bytes_per_second"]
    intensity, position = answer["intensity_flop_per_byte"], answer["position"]
    attainable = answer["attainable_flop_per_second"]
    if intensity is None or position is None or attainable is None:  # the three come together
        if flops is not None and bytes_ is not None:
            lines.append("intensity: undefined (DRAM_ACTIVE ≈ 0)")
    else:
        side = "memory" if position < 1 else "compute"
        lines.append(
            f"intensity {intensity:.3g} FLOP/byte, {position:.2f}x the ridge ({side} side); "
            f"attainable there {tflops(attainable)}"
        )
    if answer["gr_engine_contradicted"]:
        lines.append("GR_ENGINE_ACTIVE reads idle while other counters say work runs: set aside")
    loads = answer["link_utilization"]
    if loads:
        shown = ", ".join(f"{link} {percent(value)}" for link, value in loads.items())
        lines.append(f"links: {shown} of the per-direction bandwidth (busier direction)")
    efficiency = answer["roofline_efficiency"]
    tail = f", roofline efficiency {percent(efficiency)}" if efficiency is not None else ""
    missing = answer["missing"]
    tail += f"; needs {', '.join(missing)} to say more" if missing else ""
    lines.append(f"verdict: {regime}{tail}")
    return lines


def _achieved_line(answer: CounterAnswer) -> str:
    """The achieved FLOP/s (on which pipe, how sure, at what utilization) over the DRAM traffic."""
    flops, bytes_ = answer["achieved_flop_per_second"], answer["achieved_bandwidth_bytes_per_second"]
    pipe = f" on the {answer['pipe']} pipe" if answer["pipe"] not in (None, "tensor") else ""
    achieved = "no compute pipe reported" if flops is None else f"achieved {tflops(flops)}{pipe}"
    uncounted = ", ".join(answer["uncounted_pipes"])
    if flops is None and uncounted and answer["flop_utilization"] is not None:
        achieved = f"achieved FLOP/s unknown (the counted pipes read 0; not counted: {uncounted})"
    elif answer["flops_lower_bound"]:
        achieved += f" at least (not counted: {uncounted})"
    utilization = answer["flop_utilization"]
    if utilization is not None:
        k = answer["clock_ratio"]
        clock = "clock ratio unknown" if k is None else f"clock ratio {k:.2f}"
        achieved += f" (flop utilization {percent(utilization)}, {clock})"
    moved = "no DRAM_ACTIVE reported" if bytes_ is None else tbps(bytes_)
    return f"{achieved} over {moved}"


def render_compare(answer: Answer) -> list[str]:
    """A table of the same work on the other cards, fastest first."""
    rows = sorted(answer.get("compare", []), key=lambda row: row["floor_time_seconds"])
    header = f"{'card':<16} {'ridge':>8} {'verdict':<22} {'floor time':>11} {'speedup':>8}"
    label = "same work elsewhere" if answer["form"] != "counters" else "one second of this work elsewhere"
    lines = [f"{label} ({answer['precision']}):", header]
    for row in rows:
        verdict = REGIME_WORDS.get(row["regime"], row["regime"]) + (" *" if row["reverses"] else "")
        lines.append(
            f"{row['card']:<16} {row['ridge_flop_per_byte']:>8.3g} {verdict:<22} "
            f"{seconds(row['floor_time_seconds']):>11} {row['speedup']:>7.2f}x"
        )
    if any(row["reverses"] for row in rows):
        lines.append("* the verdict reverses on that card")
    for skipped in answer.get("compare_skipped", []):
        lines.append(f"skipped {skipped['card']}: {skipped['reason']}")
    return lines
