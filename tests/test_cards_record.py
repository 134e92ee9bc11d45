"""A card is a spec validated at load (CardSpec, pydantic) made into a frozen record (Card) whose
roofs and ridges per precision are computed once; the daemon's per-card cache is keyed by the
record's identity (its figures), never by id()."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from exporter import inference
from exporter.catalog import Card, CardSpec, UnknownPrecision, from_tera, load_catalog
from exporter.inference import InferenceConfig, card_profile
from exporter.roofline import Roof


def test_every_cards_roofs_and_ridges_are_its_figures_computed_at_load() -> None:
    for card in load_catalog():
        assert card.precisions and set(card.roofs) == set(card.precisions) == set(card.ridges)
        for precision, value in card.peak_tflops.items():
            roof = Roof(from_tera(value), from_tera(card.bandwidth_tbps))
            assert card.roof(precision) == roof and card.roofs[precision] is card.roof(precision)
            assert card.ridges[precision] == roof.ridge_flop_per_byte
        assert card.spec.key == card.key and isinstance(card.spec, CardSpec)


def test_a_card_record_is_frozen_and_refuses_a_precision_it_lacks() -> None:
    card = load_catalog().lookup("t4")
    with pytest.raises(dataclasses.FrozenInstanceError):
        card.bandwidth_tbps = 1.0  # type: ignore[misc]
    with pytest.raises(UnknownPrecision, match="'t4' has no 'fp64_tensor' peak"):
        card.roof("fp64_tensor")


def test_an_override_with_the_same_key_never_shares_the_builtins_profile(tmp_path: Path) -> None:
    built_in = load_catalog().lookup("h100-sxm")
    assert isinstance(built_in, Card)
    path = tmp_path / "cards.yaml"
    path.write_text(
        "cards:\n  - key: h100-sxm\n    name: slower h100\n    peak_tflops: {bf16: 100}\n"
        "    bandwidth_tbps: 1\n    source: https://e.com\n"
    )
    override = load_catalog([path]).lookup("h100-sxm")
    config = InferenceConfig()
    first = card_profile(built_in, config, instance=False, mig_profile=None)
    second = card_profile(override, config, instance=False, mig_profile=None)
    assert first.roof == built_in.roof("bf16") and second.roof == override.roof("bf16")
    assert first.roof != second.roof
    # an equal record (the same figures loaded again) shares the cached profile
    again = load_catalog().lookup("h100-sxm")
    assert again is not built_in and again.identity == built_in.identity
    assert card_profile(again, config, instance=False, mig_profile=None) is first
    assert all(isinstance(key[0], str | None) for key in inference._profiles)
