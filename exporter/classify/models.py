"""Request bodies of `POST /classify` (and `ridgeline classify`): three forms told apart by field.

pydantic only — no FastAPI here — so the CLI validates its flags with exactly the models and
messages the HTTP API uses. `parse_classify_body` decides the form from the fields a body
carries (docs/design.md, "HTTP API"): `flops`/`bytes` make a kernel, `op` and its dimensions an
operation, `dram_active`/`tensor_active` and the DCGM-named ratios a counter reading. A body
with fields of two forms is refused rather than guessed at.

Every number is strict (no strings, no booleans) and finite, and bounded so that no derived
quantity can overflow a float: the limits are documented in docs/api.md.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from exporter.readings import ACTIVITY_FIELDS
from exporter.roofline import Precision, has_activity

MAX_FLOPS = 1e30
"""Largest FLOP count (given or derived) a body may describe: far above any real job, far below
float overflow, so every time and ratio derived from it stays finite."""
MAX_BYTES = 1e30
"""Largest byte count (given or derived) a body may describe."""
MAX_PEAK_FLOP_PER_SECOND = 1e24
"""Largest custom-card peak (1 YFLOP/s; the biggest card today is ~1e16)."""
MAX_BANDWIDTH_BYTES_PER_SECOND = 1e21
"""Largest custom-card bandwidth (1 ZB/s; the biggest card today is ~1e13)."""
MAX_DIMENSION = 2**40
"""Largest gemm dimension or elementwise count: m*n*k stays below 1e37 before the FLOP limit."""
MAX_PARAMETERS = 1e16
MAX_BATCH = 2**30
MAX_CLOCK_MHZ = 1e5
MAX_LINK_BYTES_PER_SECOND = 1e18
MAX_COMPARE = 256


def _integral(value: Any) -> Any:
    """Accept 4096.0 for an integer field (JSON writers do that), never True or "4096"."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


Ratio = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Flops = Annotated[float, Field(gt=0, le=MAX_FLOPS, allow_inf_nan=False)]
Bytes = Annotated[float, Field(gt=0, le=MAX_BYTES, allow_inf_nan=False)]
Dimension = Annotated[int, BeforeValidator(_integral), Field(gt=0, le=MAX_DIMENSION)]
CardName = Annotated[str, Field(min_length=1, max_length=200)]
ThresholdValue = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
LinkRate = Annotated[float, Field(ge=0, le=MAX_LINK_BYTES_PER_SECOND, allow_inf_nan=False)]


class StrictBody(BaseModel):
    """Strict numbers, no unknown fields: a typo is an error, not a silently ignored field."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class BodyCommon(StrictBody):
    """Fields every form shares: which card (by name, or a custom roof) and what to compare with."""

    card: CardName | None = Field(
        default=None,
        description="Catalog key, alias or NVML name, e.g. `h100-sxm` or `NVIDIA H100 80GB HBM3`.",
    )
    peak_flops: Annotated[float, Field(gt=0, le=MAX_PEAK_FLOP_PER_SECOND, allow_inf_nan=False)] | None = (
        Field(default=None, description="Custom card: dense peak in FLOP/s (use instead of `card`).")
    )
    bandwidth: (
        Annotated[float, Field(gt=0, le=MAX_BANDWIDTH_BYTES_PER_SECOND, allow_inf_nan=False)] | None
    ) = Field(default=None, description="Custom card: memory bandwidth in bytes/s (with `peak_flops`).")
    precision: Precision | None = Field(
        default=None, description="Precision whose peak applies; default: the server's (bf16)."
    )
    compare: Literal["all"] | Annotated[list[CardName], Field(max_length=MAX_COMPARE)] | None = Field(
        default=None, description='Other cards to place the same work on: a list of keys, or "all".'
    )


class KernelBody(BodyCommon):
    """Kernel form: F FLOPs over Q bytes of DRAM traffic."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"card": "h100-sxm", "precision": "bf16", "flops": 4e12, "bytes": 40e9}]
        }
    )

    flops: Flops = Field(description="FLOPs the kernel executes (> 0, ≤ 1e30).")
    bytes: Bytes = Field(description="Bytes it moves to and from DRAM (> 0, ≤ 1e30).")


class OperationBody(BodyCommon):
    """Operation form: a gemm, an elementwise pass or an LLM decode step; F and Q are derived."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"card": "h100-sxm", "op": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"},
                {"card": "a100", "op": "elementwise", "n": 268435456, "dtype": "fp32"},
                {"card": "h100-sxm", "op": "decode", "parameters": 70e9, "batch": 8, "dtype": "bf16"},
            ]
        }
    )

    op: Literal["gemm", "elementwise", "decode"] = Field(description="Which operation.")
    dtype: Precision | None = Field(
        default=None,
        description="Element type in memory (sets bytes per element; also the precision unless "
        "`precision` says otherwise, e.g. int8 weights with bf16 math).",
    )
    m: Dimension | None = Field(default=None, description="gemm: rows of A and C (1 for a gemv).")
    n: Dimension | None = Field(
        default=None, description="gemm: columns of B and C; elementwise: element count."
    )
    k: Dimension | None = Field(default=None, description="gemm: the reduction dimension.")
    flops_per_element: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] = Field(
        default=1.0, description="elementwise: FLOPs per element (default 1)."
    )
    reads: Annotated[int, BeforeValidator(_integral), Field(ge=0, le=64)] = Field(
        default=1, description="elementwise: input tensors read (default 1)."
    )
    writes: Annotated[int, BeforeValidator(_integral), Field(ge=0, le=64)] = Field(
        default=1, description="elementwise: output tensors written (default 1)."
    )
    parameters: Annotated[float, Field(gt=0, le=MAX_PARAMETERS, allow_inf_nan=False)] | None = Field(
        default=None, description="decode: model parameters N."
    )
    batch: Annotated[int, BeforeValidator(_integral), Field(gt=0, le=MAX_BATCH)] | None = Field(
        default=None, description="decode: sequences decoded together (tokens per weight read)."
    )


class ThresholdsBody(StrictBody):
    """Overrides of the counter-form thresholds; each in (0, 1]."""

    theta: ThresholdValue | None = None
    dram_wall: ThresholdValue | None = None
    tensor_wall: ThresholdValue | None = None
    fp_pipe_wall: ThresholdValue | None = None
    idle_gr_engine: ThresholdValue | None = None
    idle_any: ThresholdValue | None = None
    link_wall: ThresholdValue | None = None


class CounterBody(BodyCommon):
    """Counter form: one interval's DCGM profiling ratios, named after the DCGM fields.

    Any subset with at least one activity field (readings.ACTIVITY_FIELDS) is a reading: the
    verdict says what those fields can say (docs/model.md, "Partial readings").
    """

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "card": "NVIDIA H100 80GB HBM3",
                    "dram_active": 0.72,
                    "tensor_active": 0.18,
                    "gr_engine_active": 0.97,
                    "sm_clock_mhz": 1980,
                }
            ]
        }
    )

    dram_active: Ratio | None = Field(default=None, description="DCGM_FI_PROF_DRAM_ACTIVE (1005), in [0, 1].")
    tensor_active: Ratio | None = Field(
        default=None, description="DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (1004), in [0, 1]."
    )
    gr_engine_active: Ratio | None = Field(default=None, description="GR_ENGINE_ACTIVE (1001).")
    sm_active: Ratio | None = Field(default=None, description="SM_ACTIVE (1002).")
    sm_occupancy: Ratio | None = Field(default=None, description="SM_OCCUPANCY (1003).")
    fp64_active: Ratio | None = Field(default=None, description="PIPE_FP64_ACTIVE (1006).")
    fp32_active: Ratio | None = Field(default=None, description="PIPE_FP32_ACTIVE (1007).")
    fp16_active: Ratio | None = Field(default=None, description="PIPE_FP16_ACTIVE (1008).")
    imma_active: Ratio | None = Field(default=None, description="PIPE_TENSOR_IMMA_ACTIVE (1013).")
    hmma_active: Ratio | None = Field(default=None, description="PIPE_TENSOR_HMMA_ACTIVE (1014).")
    dfma_active: Ratio | None = Field(default=None, description="PIPE_TENSOR_DFMA_ACTIVE (1015).")
    sm_clock_mhz: Annotated[float, Field(gt=0, le=MAX_CLOCK_MHZ, allow_inf_nan=False)] | None = Field(
        default=None,
        description=(
            "SM clock (field 100), MHz; scales achieved FLOP/s by min(1, clock / the clock each peak is "
            "quoted at)."
        ),
    )
    pcie_tx_bytes_per_second: LinkRate | None = None
    pcie_rx_bytes_per_second: LinkRate | None = None
    nvlink_tx_bytes_per_second: LinkRate | None = None
    nvlink_rx_bytes_per_second: LinkRate | None = None
    clock_event_reasons: Annotated[int, Field(ge=0, le=0xFFFFFFFF)] | None = Field(
        default=None,
        description="DCGM_FI_DEV_CLOCKS_EVENT_REASONS (field 112): NVML's clocks-event reason bitmask.",
    )
    power_usage_watts: Annotated[float, Field(ge=0, le=1e5, allow_inf_nan=False)] | None = Field(
        default=None, description="DCGM_FI_DEV_POWER_USAGE (field 155), W."
    )
    power_limit_watts: Annotated[float, Field(gt=0, le=1e5, allow_inf_nan=False)] | None = Field(
        default=None, description="DCGM_FI_DEV_POWER_MGMT_LIMIT (field 160), W."
    )
    thresholds: ThresholdsBody | None = Field(
        default=None, description="Overrides of θ, the walls and the idle floors for this request."
    )


ClassifyBody = KernelBody | OperationBody | CounterBody

COMMON_FIELDS = frozenset(BodyCommon.model_fields)
FORM_FIELDS: dict[str, frozenset[str]] = {
    "kernel": frozenset(KernelBody.model_fields) - COMMON_FIELDS,
    "operation": frozenset(OperationBody.model_fields) - COMMON_FIELDS - {"dtype"},
    "counters": frozenset(CounterBody.model_fields) - COMMON_FIELDS,
}
"""The fields that identify each form (`dtype` is shared by intent, so it identifies none)."""
FORM_MODELS: dict[str, type[KernelBody | OperationBody | CounterBody]] = {
    "kernel": KernelBody,
    "operation": OperationBody,
    "counters": CounterBody,
}


class BodyError(ValueError):
    """A body that is not a valid classify request. `status` is the HTTP status it maps to.

    `field` names the first offending field (dotted path), `detail` lists every problem as
    {"field", "message"} so a client can show them all at once.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        status: int = 422,
        detail: list[dict[str, Any]] | None = None,
        suggestions: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status
        self.detail: list[dict[str, Any]] = (
            detail if detail is not None else [{"field": field, "message": message}]
        )
        self.suggestions = suggestions


def _dotted(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def _rule(err: Any) -> str:
    """pydantic's message, plus the bound it broke where it has one, minus its input echo."""
    message = str(err["msg"])
    if err["type"] == "extra_forbidden":
        return "unknown field for this body form"
    ctx = err.get("ctx", {})
    if err["type"] in ("literal_error", "union_tag_invalid") and "expected" in ctx:
        return f"must be one of {ctx['expected']}"
    for kind, key, words in BOUND_RULES:
        if err["type"] == kind and isinstance(ctx.get(key), int | float):
            return f"must be {words} {ctx[key]:g}"
    return message


BOUND_RULES = (
    ("greater_than", "gt", "greater than"),
    ("greater_than_equal", "ge", "at least"),
    ("less_than", "lt", "less than"),
    ("less_than_equal", "le", "at most"),
)
"""pydantic's bound errors, reworded with the bound in short form (1e+30, not thirty zeros)."""


def errors_from_validation(exc: ValidationError, form: str) -> BodyError:
    """Turn a pydantic error into a BodyError naming every field and rule."""
    detail: list[dict[str, Any]] = []
    for err in exc.errors(include_url=False, include_input=False):
        # union branches add their type as a location step ("list[constrained-str]"): drop those
        loc = tuple(
            p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("literal")))
        )
        field = _dotted(loc) or "(body)"
        message = _rule(err)
        if loc and loc[0] == "compare":
            message = f'must be "all" or a list of at most {MAX_COMPARE} card names'
        entry = {"field": field, "message": message}
        if entry not in detail:
            detail.append(entry)
    if any(d["field"] != "compare" and d["field"].startswith("compare") for d in detail):
        detail = [d for d in detail if d["field"] != "compare"]
    first = detail[0]
    more = f" (and {len(detail) - 1} more)" if len(detail) > 1 else ""
    return BodyError(
        f"{form} body: {first['field']}: {first['message']}{more}", field=first["field"], detail=detail
    )


def body_form(raw: dict[str, Any]) -> str:
    """Which form a body is, from its fields; BodyError when it is none or several."""
    present = {form: sorted(set(raw) & fields) for form, fields in FORM_FIELDS.items()}
    forms = [form for form, fields in present.items() if fields]
    if len(forms) > 1:
        parts = "; ".join(f"{form} ({', '.join(present[form])})" for form in forms)
        return_field = present[forms[1]][0]
        raise BodyError(
            f"ambiguous body: it has fields of two forms — {parts}; send one form per request",
            field=return_field,
            detail=[
                {"field": f, "message": f"belongs to the {form} form"}
                for form in forms
                for f in present[form]
            ],
        )
    if not forms:
        raise BodyError(
            "body is none of the three forms: send flops+bytes (kernel), op (+ m/n/k, n, or "
            "parameters/batch) (operation), or DCGM ratios such as dram_active, tensor_active "
            "(counters)",
            field=None,
        )
    return forms[0]


def parse_classify_body(raw: Any) -> KernelBody | OperationBody | CounterBody:
    """Validate a decoded JSON value as one classify body (the form chosen by its fields)."""
    if not isinstance(raw, dict):
        raise BodyError(f"body must be a JSON object, got {type(raw).__name__}", field="(body)")
    form = body_form(raw)
    try:
        body = FORM_MODELS[form].model_validate(raw)
    except ValidationError as exc:
        raise errors_from_validation(exc, form) from None
    _check_card_fields(body)
    if isinstance(body, OperationBody):
        _check_operation_fields(body, raw)
    if isinstance(body, CounterBody) and not has_activity(body):
        raise BodyError(
            "a counters body needs at least one activity field: " + ", ".join(ACTIVITY_FIELDS),
            field="(body)",
        )
    return body


def _check_card_fields(body: BodyCommon) -> None:
    custom = [f for f in ("peak_flops", "bandwidth") if getattr(body, f) is not None]
    if body.card is not None and custom:
        raise BodyError(
            f"give either card or a custom roof (peak_flops + bandwidth), not both; got card and {custom[0]}",
            field=custom[0],
        )
    if body.card is None and len(custom) == 1:
        missing = "bandwidth" if custom == ["peak_flops"] else "peak_flops"
        raise BodyError(
            f"a custom card needs both peak_flops and bandwidth; {missing} is missing", field=missing
        )
    if body.card is None and not custom:
        raise BodyError(
            "card is required (a catalog key or NVML name), or peak_flops + bandwidth", field="card"
        )


OPERATION_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gemm": (("m", "n", "k"), ("flops_per_element", "reads", "writes", "parameters", "batch")),
    "elementwise": (("n",), ("m", "k", "parameters", "batch")),
    "decode": (("parameters", "batch"), ("m", "n", "k", "flops_per_element", "reads", "writes")),
}
"""Per op: the fields it requires, and the fields of other ops it refuses."""


def _check_operation_fields(body: OperationBody, raw: dict[str, Any]) -> None:
    required, foreign = OPERATION_FIELDS[body.op]
    for name in required:
        if getattr(body, name) is None:
            raise BodyError(f"op {body.op!r} requires {', '.join(required)}; {name} is missing", field=name)
    for name in foreign:
        if name in raw:
            raise BodyError(f"{name} does not apply to op {body.op!r}", field=name)
    if body.op == "elementwise" and body.reads + body.writes == 0:
        raise BodyError("elementwise needs reads + writes ≥ 1", field="reads")
