"""The PromQL the Prometheus input sends: pure text building, so each expression is tested alone.

Every quantity is a counter's increase over one window of `step` seconds (raw counters, or the
recorded `:rate5m` series times 300 s), and a stretch of windows is summed inside Prometheus by
one outer subquery, so one instant query answers one number per group however long the range
(docs/report.md, "How the numbers are read").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from exporter.report.series import (
    RATE_WINDOW_SECONDS,
    RAW_CLOCK_LOST,
    RAW_DRAM_BYTES,
    RAW_FLOP,
    RAW_REGIME_SECONDS,
    RecordedLevel,
)

QUANTITIES = ("regime", "flop", "dram_bytes", "idle_allocated", "cards")
"""regime: GPU-seconds by regime; flop, dram_bytes: estimated totals; idle_allocated: idle
GPU-seconds of GPUs held by a pod or an HPC job; cards: GPU-seconds by card."""

DIALECTS = ("promql", "metricsql")
"""The query languages the input speaks: PromQL (Prometheus, Thanos, Mimir) and MetricsQL
(VictoriaMetrics), told apart by DIALECT_PROBE."""
DIALECT_PROBE = f"increase_prometheus({RAW_FLOP}[1m])"
"""A MetricsQL-only function: answered by VictoriaMetrics, refused by PromQL servers."""

_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_MATCHER = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$')


class PromQLInputError(ValueError):
    """A label name or matcher the user gave that is not valid PromQL."""


@dataclass(frozen=True, slots=True)
class Matcher:
    label: str
    op: str
    value: str
    """As written between the quotes (escapes kept)."""

    def text(self) -> str:
        return f'{self.label}{self.op}"{self.value}"'


def parse_matcher(text: str) -> Matcher:
    """`cluster="prod"`, `namespace=~"team-.*"`: one label matcher, as PromQL writes it."""
    found = _MATCHER.match(text)
    if found is None:
        raise PromQLInputError(f'{text!r} is not a label matcher like cluster="prod" or namespace=~"ml-.*"')
    label, op, value = found.groups()
    if label == "__name__":
        raise PromQLInputError(f"{text!r}: the report chooses the metric names itself")
    return Matcher(label=label, op=op, value=value)


def check_label(name: str) -> str:
    if not _LABEL.match(name) or name.startswith("__"):
        raise PromQLInputError(f"{name!r} is not a label name (letters, digits and _, not starting with __)")
    return name


def duration(seconds: float) -> str:
    """Seconds as a PromQL duration: whole seconds ("3600s"), which both PromQL and MetricsQL read."""
    whole = round(seconds)
    if whole < 1 or abs(whole - seconds) > 1e-9:
        raise ValueError(f"query windows are whole seconds, not {seconds!r}")
    return f"{whole}s"


def open_range(seconds: float) -> str:
    """A subquery range that holds exactly seconds ÷ step points whichever way the server bounds
    ranges: Prometheus before 3.0 includes both ends ([t − d, t]: one point too many), 3.0 and
    VictoriaMetrics only the right one. One millisecond short leaves out the left end either way."""
    return f"{round(seconds * 1000) - 1}ms"


def _selector(matchers: Sequence[Matcher], *extra: str) -> str:
    parts = [*extra, *(m.text() for m in matchers)]
    return "{" + ",".join(parts) + "}" if parts else ""


def _by(labels: Sequence[str]) -> str:
    return ", ".join(dict.fromkeys(labels))


def window_expr(
    quantity: str,
    by: Sequence[str],
    step: float,
    *,
    level: RecordedLevel | None,
    matchers: Sequence[Matcher] = (),
    lookback: float | None = None,
    dialect: str = "promql",
    sample_interval: float | None = None,
) -> str:
    """One window's increase of `quantity`, summed by `by`: raw counters when level is None,
    else the level's recorded series (which must keep every label in `by` and the matchers).

    lookback: for recorded series, how old a reading may be (about 1.5 evaluation intervals):
    without it a series that ended is read once more from the server's 5-minute lookback, which
    Prometheus stops with a staleness marker but a backfilled block has none.

    dialect "metricsql" (VictoriaMetrics): raw windows use increase_prometheus over the window
    plus one sample interval (less 1 ms), so that each window starts at the previous window's
    last sample. MetricsQL's own increase() starts from the last sample before the window however
    old it is, and a GPU's counters carry across label changes (docs/design.md, "The daemon's
    inference"): a label set that comes back after a gap would be credited with the whole gap."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}")
    window = duration(step)
    function = "increase"
    if dialect == "metricsql":
        function = "increase_prometheus"
        window = f"{round((step + (sample_interval or 0.0)) * 1000) - 1}ms"
    if quantity == "regime":
        keys = _by([*by, "regime"])
    elif quantity == "cards":
        keys = _by([*by, "card"])
    elif quantity == "clock_lost":
        if level is not None:
            raise ValueError("the GPU-seconds lost to a reduced clock are read from the raw counter only")
        keys = _by([*by, "cause"])
    elif quantity in ("flop", "dram_bytes", "idle_allocated"):
        keys = _by(by)
    else:
        raise ValueError(f"unknown quantity {quantity!r}")
    if level is None:
        if quantity == "idle_allocated":
            # held by a pod, or (without a pod) by an HPC job; the two selectors are disjoint
            held_by_pod = _selector(matchers, 'regime="idle"', 'pod!=""')
            held_by_job = _selector(matchers, 'regime="idle"', 'pod=""', 'hpc_job!=""')
            inner = (
                f"{function}({RAW_REGIME_SECONDS}{held_by_pod}[{window}])"
                f" or {function}({RAW_REGIME_SECONDS}{held_by_job}[{window}])"
            )
        else:
            metric = {
                "regime": RAW_REGIME_SECONDS,
                "cards": RAW_REGIME_SECONDS,
                "flop": RAW_FLOP,
                "clock_lost": RAW_CLOCK_LOST,
            }.get(quantity, RAW_DRAM_BYTES)
            inner = f"{function}({metric}{_selector(matchers)}[{window}])"
        return f"sum by ({keys}) ({inner})"
    if quantity == "idle_allocated" and not level.allocated_only and level.idle_allocated is None:
        raise ValueError(f"the {level.name} level does not tell allocated GPUs from the others")
    metric = {
        "regime": level.regime_seconds,
        "idle_allocated": level.idle_allocated or level.regime_seconds,
        "flop": level.flop,
        "dram_bytes": level.dram_bytes,
        "cards": level.gpus,
    }[quantity]
    extra = ('regime="idle"',) if quantity == "idle_allocated" and level.idle_allocated is None else ()
    rate = duration(RATE_WINDOW_SECONDS)
    reading = f"{metric}{_selector(matchers, *extra)}"
    if lookback is not None:
        reading = f"last_over_time({reading}[{round(lookback * 1000)}ms])"
    return f"sum by ({keys}) (sum_over_time({reading}[{open_range(step)}:{rate}])) * {RATE_WINDOW_SECONDS}"


def stretch_total(expr: str, length: float, step: float) -> str:
    """The sum of `expr` over every window of a stretch `length` long, evaluated at its end."""
    return f"sum_over_time(({expr})[{open_range(length)}:{duration(step)}])"


def coverage_expr(level: RecordedLevel, step: float, matchers: Sequence[Matcher] = ()) -> str:
    """How many of the level's regime series have a sample in each window (absent: none)."""
    return f"count(last_over_time({level.regime_seconds}{_selector(matchers)}[{duration(step)}]))"


def evaluation_count_expr(level: RecordedLevel, window: float) -> str:
    """The median number of readings one of the level's series has in `window`: the rules'
    evaluation interval is window ÷ that."""
    return f"quantile(0.5, count_over_time({level.regime_seconds}[{duration(window)}]))"


def sample_count_expr(window: float, matchers: Sequence[Matcher] = ()) -> str:
    """The median number of samples one GPU's idle-seconds counter has in `window`: the scrape
    interval is window ÷ that."""
    selector = _selector(matchers, 'regime="idle"')
    return f"quantile(0.5, count_over_time({RAW_REGIME_SECONDS}{selector}[{duration(window)}]))"


def raw_series(matchers: Sequence[Matcher] = ()) -> str:
    """The raw regime-seconds counters the matchers select (a series selector)."""
    return f"{RAW_REGIME_SECONDS}{_selector(matchers)}"
