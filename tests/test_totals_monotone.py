"""Every `_total` the daemon exports only grows, across any sequence of source failures and
reopens: a hypothesis property over random sequences of good pages (with skipped series), cut
bodies, pages that are not Prometheus text and pages stamped NaN, read by the real scrape source
from a loopback upstream (tests/upstream.py). `corrupt_line` went backwards on every reopen: each
new source counted its skips from 0 and the sampler took its count as the total."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from source_kit import scrape_options
from upstream import PAGE, stamped, upstream, url_of

from exporter.catalog import load_catalog
from exporter.exposition import build_families
from exporter.inference import InferenceConfig
from exporter.sampler import Sampler
from exporter.state import Snapshot

BAD_SERIES = b'DCGM_FI_PROF_DRAM_ACTIVE{gpu="\xc2\xb2",UUID="GPU-odd"} 0.5\n'
"""A series with gpu="²": skipped as bad_gpu_label, the rest of the page read."""

Step = tuple[str, int]
STEPS = st.one_of(
    st.tuples(st.just("good"), st.integers(min_value=0, max_value=3)),
    st.tuples(st.sampled_from(["cut", "garbage", "nan"]), st.just(0)),
)


def page_for(step: Step) -> bytes:
    kind, bad = step
    if kind == "garbage":
        return b"<html><body>502 Bad Gateway</body></html>\n"
    if kind == "nan":
        return stamped("NaN")
    return BAD_SERIES * bad + PAGE


def totals(snapshot: Snapshot) -> dict[str, float]:
    """Every counter sample in the exposition, by sample name and labels."""
    found: dict[str, float] = {}
    for family in build_families(snapshot):
        if family.type != "counter":
            continue
        for row in family.rows:
            key = row.sample + "{" + ",".join(f"{k}={v}" for k, v in sorted(row.labels.items()))
            key += ",".join(f"{k}={v}" for k, v in row.extra) + "}"
            found[key] = row.value
    return found


def test_every_total_only_grows_across_random_reopen_sequences() -> None:
    current: list[Step] = [("good", 0)]
    with upstream(lambda: page_for(current[0])) as server:

        @settings(max_examples=40, deadline=None)
        @given(st.lists(STEPS, min_size=1, max_size=12))
        def check(steps: list[Step]) -> None:
            options = scrape_options(url=url_of(server), interval_seconds=1.0)
            sampler = Sampler("scrape", options, load_catalog(), InferenceConfig())
            seen: dict[str, float] = {}
            expected = {"corrupt_line": 0, "connection": 0, "parse_error": 0, "timestamp_not_finite": 0}
            for step in steps:
                current[0] = step
                server.cut_at = PAGE.index(b"0.712663") + 3 if step[0] == "cut" else None
                sampler.run_once()
                kind, bad = step
                expected["corrupt_line"] += bad
                if kind != "good":
                    expected[
                        {"cut": "connection", "garbage": "parse_error", "nan": "timestamp_not_finite"}[kind]
                    ] += 1
                now = totals(sampler.snapshot)
                for key, value in seen.items():
                    if key in now:
                        assert now[key] >= value, f"{key} went from {value} to {now[key]} after {steps}"
                    else:
                        assert "ridgeline_sample" not in key, f"{key} vanished after {steps}"
                seen.update(now)
                errors = dict(sampler.snapshot.source.errors_total)
                assert errors == {k: v for k, v in expected.items() if v}, steps

        check()
