"""The card catalog, precision and inference flags of `serve`, which `report --replay` shares."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from exporter.commands.options.flags import add_flag
from exporter.option_specs import non_negative_seconds, unit_ratio

if TYPE_CHECKING:
    from exporter.inference import InferenceConfig


def add_inference_flags(parser: argparse.ArgumentParser) -> None:
    """The card catalog, the roofs' precision and the inference settings: `serve`'s, which
    `report --replay` runs the same inference with."""
    from exporter.roofline import PRECISIONS, Thresholds

    add_flag(parser, "--cards", action="append", default=[], metavar="FILE", help="extra card catalog file")
    add_flag(
        parser,
        "--precision",
        choices=PRECISIONS,
        help="precision of the roof (default: the dominant tensor pipe when reported, else bf16)",
    )
    add_flag(
        parser,
        "--smoothing-seconds",
        type=non_negative_seconds,
        default=10.0,
        metavar="S",
        help="time constant of the exponential smoothing (0: none)",
    )
    add_flag(
        parser,
        "--dwell-seconds",
        type=non_negative_seconds,
        default=5.0,
        metavar="S",
        help="how long a new regime must hold before the exported regime switches",
    )
    defaults = Thresholds()
    add_flag(
        parser, "--theta", type=unit_ratio, default=defaults.theta, help="how near a wall counts as at it"
    )
    add_flag(
        parser, "--dram-wall", type=unit_ratio, default=defaults.dram_wall, help="practical max DRAM_ACTIVE"
    )
    add_flag(
        parser,
        "--tensor-wall",
        type=unit_ratio,
        default=defaults.tensor_wall,
        help="practical max tensor activity",
    )


def inference_config(args: argparse.Namespace) -> InferenceConfig:
    """The InferenceConfig the inference flags describe."""
    from exporter.inference import InferenceConfig
    from exporter.roofline import Thresholds

    thresholds = Thresholds(theta=args.theta, dram_wall=args.dram_wall, tensor_wall=args.tensor_wall)
    return InferenceConfig(
        precision=args.precision,
        smoothing_seconds=args.smoothing_seconds,
        dwell_seconds=args.dwell_seconds,
        thresholds=thresholds,
        expected_interval_seconds=args.interval,
    )
