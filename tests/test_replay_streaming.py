"""Replay files as they come from real tools and real mistakes, read from disk as they stream: RFC
4180 CSV, JSON Lines split on "\\n" only, old and new dmon layouts in unsorted order with MIG rows
and both trailers, the MIG profile from every input, DCGM 4.6/4.7 names, odd ids skipped with
file:line, nothing but an unreadable file stopping a replay, and flat memory for any file size
(a real process's peak RSS)."""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay_lines import play_all, read_samples, replay_line, replay_source, write_samples

from exporter.fields import DRAM_ACTIVE, GPU_UTIL, GR_ENGINE_ACTIVE, PIPE_TENSOR_ACTIVE, SM_CLOCK
from exporter.sample import Attribution, Entity, Sample
from exporter.sources.base import EndOfStream, MigProfileHint, SourceUnavailable
from exporter.sources.options import mig_profiles
from exporter.sources.replay_formats.lines import MAX_LINE_BYTES

DATA = Path(__file__).parent / "data" / "replay"
ROOT = Path(__file__).resolve().parent.parent
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"


def line(ts: float, gpu: int, fields: dict[str, object], **extra: object) -> str:
    record: dict[str, object] = {"ts": ts, "gpu": gpu, "uuid": f"GPU-{gpu}", "model": H100, "fields": fields}
    record.update(extra)
    return json.dumps(record, ensure_ascii=False)


# -- CSV as RFC 4180 -----------------------------------------------------------------------------


def test_csv_with_bom_quoted_newlines_and_doubled_quotes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(
        "\ufefftimestamp,gpu,model,pod,namespace,1005,1004\r\n"
        f'100,0,{H100},"decode\r\nreplica ""a""",llm,0.71,0.12\r\n'
        f'100,1,"{H100}","plain, with comma",llm,0.5,0.25\r\n'
        f"101,0,{H100},p,llm,oops,0.1\r\n"  # line 5: a bad value, named by its physical line
        f"101,1,{H100},p,llm,0.4,0.1\r\n".encode()
    )
    source = replay_source(path)
    with caplog.at_level(logging.WARNING, logger="exporter.sources.replay"):
        batches = play_all(source)
    assert source.format == "csv"
    first = {s.entity.gpu: s for s in batches[0]}
    assert first[0].attribution == Attribution(namespace="llm", pod='decode\r\nreplica "a"', container="")
    assert first[1].attribution is not None and first[1].attribution.pod == "plain, with comma"
    assert first[0].values == {DRAM_ACTIVE: 0.71, PIPE_TENSOR_ACTIVE: 0.12}
    assert [[s.entity.gpu for s in b] for b in batches] == [[0, 1], [1]]
    assert source.replay_stats.skipped_by_reason == {"bad_value": 1}
    assert "trace.csv:5:" in caplog.text


def test_csv_unterminated_quote_is_one_skip_and_names_its_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "cut.csv"
    """The quote never closes: its line is skipped with a message naming the quote and its line,
    and the lines after it are read (csv alone would read the rest of the file into one cell)."""
    path.write_text('ts,gpu,model,1005\n1,0,m,0.5\n2,"0,m,0.5\n3,0,m,0.5\n4,0,m,0.6\n')
    source = replay_source(path)
    with caplog.at_level(logging.WARNING, logger="exporter.sources.replay"):
        batches = play_all(source)
    assert [b[0].values for b in batches] == [{DRAM_ACTIVE: 0.5}, {DRAM_ACTIVE: 0.5}, {DRAM_ACTIVE: 0.6}]
    assert source.replay_stats.skipped_by_reason == {"unterminated_quote": 1}
    assert 'cut.csv:3: the quote (") at column 3 is never closed' in caplog.text


def test_csv_cell_over_the_field_limit_is_refused_not_held(tmp_path: Path) -> None:
    """A quoted cell of 160,000 characters over 80,000 lines (csv's limit is 131,072): its quote
    is refused as unterminated after 64 lines instead of growing without bound; what came before
    it plays, and its lines are read (and skipped) one by one."""
    path = tmp_path / "big.csv"
    path.write_text('ts,gpu,model,1005\n1,0,m,0.5\n2,0,"' + "x\n" * 80_000 + '",0.5\n')
    source = replay_source(path)
    batches = play_all(source)
    assert [b[0].values for b in batches] == [{DRAM_ACTIVE: 0.5}]
    assert source.replay_stats.skipped_by_reason["unterminated_quote"] >= 1


def test_csv_profile_column_and_4_6_and_4_7_names(tmp_path: Path) -> None:
    path = tmp_path / "mig.csv"
    path.write_text(
        "ts,gpu,gpu_instance,gpu_i_profile,model,DCGM_FI_DEV_GPU_UTIL_RATIO,1603,1005\n"
        f"1,0,1,3g.20gb,{A100},87,1410000000,0.5\n"
        f"1,0,2,,{A100},0.870000,1410000000,0.5\n"
        f"1,1,,,{A100},1,1410000000,0.5\n"
    )
    samples = {s.entity.key: s for b in play_all(replay_source(path)) for s in b}
    assert samples[(0, 1)].entity.profile == "3g.20gb"
    assert samples[(0, 2)].entity.profile is None
    assert samples[(0, 1)].values[GPU_UTIL] == 87.0  # written as an integer: field 203, percent
    assert samples[(0, 2)].values[GPU_UTIL] == pytest.approx(87.0)  # "%f": field 1613, a ratio
    assert samples[(1, None)].values[GPU_UTIL] == 1.0
    assert samples[(0, 1)].values[SM_CLOCK] == pytest.approx(1410.0)  # 1603 is hertz


# -- JSON Lines split on "\n" only -------------------------------------------------------------


def test_jsonl_line_separators_inside_strings_are_not_line_breaks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "sep.jsonl"
    lines = [
        line(1.0, 0, {"1005": 0.5}, pod="decode\u2028replica", namespace="llm"),  # 1
        line(1.0, 1, {"1005": 0.6}, container="server\u0085two", pod="p", namespace="llm"),  # 2
        '{"ts": 2.0, "gpu": 0, "model": "m", "fields": {"1005": 0.5}, broken',  # 3
        "{also broken \u2028 still one line}",  # 4
        line(3.0, 0, {"1005": 0.7}) + "\r",  # 5, CRLF
        "\x0c",  # 6: form feed alone is whitespace: a blank line
        line(4.0, 0, {"1005": 0.8}),  # 7
    ]
    path.write_bytes("\n".join(lines).encode() + b"\n")
    source = replay_source(path)
    with caplog.at_level(logging.WARNING, logger="exporter.sources.replay"):
        batches = play_all(source)
    assert [[s.values[DRAM_ACTIVE] for s in b] for b in batches] == [[0.5, 0.6], [0.7], [0.8]]
    pods = {s.entity.gpu: s.attribution for s in batches[0]}
    assert pods[0] is not None and pods[0].pod == "decode\u2028replica"
    assert pods[1] is not None and pods[1].container == "server\u0085two"
    assert source.replay_stats.skipped_by_reason == {"bad_json": 2}  # one per bad physical line
    assert source.replay_stats.lines_read == 6
    assert "sep.jsonl:3:" in caplog.text and "sep.jsonl:4:" in caplog.text
    assert "sep.jsonl:5:" not in caplog.text


def test_jsonl_invalid_utf8_and_a_too_long_line_are_single_skips(tmp_path: Path) -> None:
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(
        line(1.0, 0, {"1005": 0.5}).encode() + b"\n"
        + b'{"ts": 2.0, "gpu": 0, "model": "\xff\xfe", "fields": {"1005": 0.5}}\n'  # U+FFFD: a model
        + b'{"ts": 3.0, "gpu": 0, "pad": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}\n'
        + line(4.0, 0, {"1005": 0.9}).encode() + b"\n"
    )  # fmt: skip
    source = replay_source(path)
    batches = play_all(source)
    assert [b[0].timestamp for b in batches] == [1.0, 2.0, 4.0]
    assert source.replay_stats.skipped_by_reason == {"line_too_long": 1}


def test_jsonl_names_of_dcgm_4_6_and_4_7_and_the_profile_key(tmp_path: Path) -> None:
    path = tmp_path / "names.jsonl"
    path.write_text(
        line(1.0, 0, {"DCGM_FI_DEV_GPU_UTIL_RATIO": 87, "DCGM_FI_PROF_DRAM_UTIL_RATIO": 0.4}) + "\n"
        + line(1.0, 1, {"DCGM_FI_DEV_GPU_UTIL_RATIO": 0.87, "1613": 0.5}) + "\n"
        + line(1.0, 2, {"1613": 0.25, "DCGM_FI_DEV_SM_CLOCK_HERTZ": 1.98e9}) + "\n"
        + line(1.0, 3, {"DCGM_FI_DEV_GPU_UTIL_RATIO": 1}, gpu_instance=4, gpu_instance_profile="1g.10gb")
        + "\n"
    )  # fmt: skip
    samples = {s.entity.gpu: s for s in play_all(replay_source(path))[0]}
    assert samples[0].values == {GPU_UTIL: 87.0, DRAM_ACTIVE: 0.4}
    assert samples[1].values[GPU_UTIL] == pytest.approx(87.0)  # first spelling kept
    assert samples[2].values == {GPU_UTIL: 25.0, SM_CLOCK: pytest.approx(1980.0)}
    assert samples[3].values[GPU_UTIL] == 1.0  # a JSON integer: DCGM 4.6's field 203
    assert samples[3].entity.profile == "1g.10gb"


def test_a_file_of_only_overlong_lines_is_not_called_empty(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"{" + b" " * (MAX_LINE_BYTES + 1) + b"}\n")
    with pytest.raises(SourceUnavailable) as caught:
        replay_source(path).open()
    assert "empty" not in caught.value.message and "format" in caught.value.message


def test_the_recorder_line_writes_the_profile_back(tmp_path: Path) -> None:
    entity = Entity(gpu=0, uuid="GPU-a", model=A100, gpu_instance=2, profile="2g.10gb")
    written = [Sample(timestamp=1.0, entity=entity, values={DRAM_ACTIVE: 0.5})]
    path = write_samples(tmp_path / "t.jsonl", written)
    assert '"gpu_instance_profile":"2g.10gb"' in path.read_text()
    assert read_samples(path) == written
    plain = replay_line(1.0, 0, {DRAM_ACTIVE: 0.5})
    assert "gpu_instance_profile" not in plain  # a whole GPU writes no profile


def test_mig_profile_flag_fills_jsonl_instances_without_one(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        line(1.0, 0, {"1005": 0.5}, gpu_instance=1) + "\n"
        + line(1.0, 0, {"1005": 0.5}, gpu_instance=2, gpu_instance_profile="4g.20gb") + "\n"
    )  # fmt: skip
    hints = mig_profiles("1=3g.20gb,2=1g.5gb")
    samples = {s.entity.key: s for s in play_all(replay_source(path, mig_profiles=hints))[0]}
    assert samples[(0, 1)].entity.profile == "3g.20gb"
    assert samples[(0, 2)].entity.profile == "4g.20gb"  # the file wins


def test_jsonl_a_little_out_of_order_is_put_back_far_out_of_order_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    times = [*range(10, 200), 5, 195, 15]  # 5 and 15 are older than what has been played
    path.write_text("".join(line(float(t), 0, {"1005": 0.5}) + "\n" for t in times))
    source = replay_source(path)
    played = [b[0].timestamp for b in play_all(source)]
    assert played == sorted(played) and len(played) == 190
    assert source.replay_stats.skipped_by_reason == {"out_of_order": 2, "duplicate_entity": 1}


# -- dcgmi dmon, old and new -------------------------------------------------------------------


def test_dmon_3x_unsorted_order_with_mig_keeps_every_gpu_in_every_sample(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """GPUs printed 2, 0, 3, 1 (DCGM 2.4-3.3's unordered map): splitting where the index falls
    would make four samples of each and drop GPUs in and out; an entity repeating does not."""
    source = replay_source(DATA / "dmon_unsorted_mig_3x.txt", model=A100)
    with caplog.at_level(logging.WARNING, logger="exporter.sources.replay"):
        batches = play_all(source)
    assert len(batches) == 16
    expected_keys = {(0, None), (1, None), (2, None), (3, None), (1, 8), (1, 9)}
    for index, batch in enumerate(batches):
        by_key = {s.entity.key: s for s in batch}
        assert set(by_key) == expected_keys
        assert by_key[(2, None)].values[DRAM_ACTIVE] == pytest.approx(0.3 + index / 1000)
        assert by_key[(1, 9)].values[DRAM_ACTIVE] == pytest.approx(0.6 + index / 1000)
        assert by_key[(3, None)].values[PIPE_TENSOR_ACTIVE] is None
    assert [b[0].timestamp for b in batches] == [1_000_000.0 + i for i in range(16)]
    assert source.replay_stats.skipped_by_reason == {"compute_instance": 16}
    assert "dmon was stopped" not in caplog.text  # the trailer is not a row


def test_dmon_2x_layout_every_gpu_first_needs_the_flag_to_name_parents() -> None:
    """DCGM 2.x prints a map ordered by entity group: all GPUs, then all instances. Without a
    hint the instances are placed under the last GPU row; --mig-profile GPU:GI names them."""
    plain = play_all(replay_source(DATA / "dmon_sorted_2x.txt", model=A100))
    assert len(plain) == 5
    assert {s.entity.key for s in plain[0]} == {(0, None), (1, None), (1, 0), (1, 8), (1, 9)}
    hints = mig_profiles("0:0=7g.40gb,1:8=3g.20gb,1:9=4g.20gb")
    hinted = play_all(replay_source(DATA / "dmon_sorted_2x.txt", model=A100, mig_profiles=hints))
    profiles = {s.entity.key: s.entity.profile for s in hinted[0]}
    assert profiles == {
        (0, None): None,
        (1, None): None,
        (0, 0): "7g.40gb",
        (1, 8): "3g.20gb",
        (1, 9): "4g.20gb",
    }
    assert [len(b) for b in hinted] == [5] * 5
    assert {s.entity.key: s.values[DRAM_ACTIVE] for s in hinted[4]}[(0, 0)] == pytest.approx(0.304)


@pytest.mark.parametrize(
    "trailer",
    [
        "dmon was stopped due to receiving a signal.",  # DCGM 2.x-3.x (DeviceInfo, std::cout)
        "dmon was stopped do to receiving a signal",  # DCGM 3.x-4.x (DeviceMonitor, fmt)
        "dmon was stopped due to receiving a signal",
        "^C",
    ],
)
def test_dmon_trailers_of_every_generation_end_the_capture_quietly(tmp_path: Path, trailer: str) -> None:
    path = tmp_path / "cap.txt"
    rows = "GPU 1     0.1\nGPU 0     0.2\nGPU 1     0.3\nGPU 0     0.4\n"
    path.write_text(f"#Entity   DRAMA\nID\n{rows}\n{trailer}\n")
    source = replay_source(path, model=H100)
    batches = play_all(source)
    assert [[s.entity.gpu for s in b] for b in batches] == [[1, 0], [1, 0]]
    assert source.replay_stats.lines_skipped == 0


def test_dmon_mig_instance_keeps_the_parent_it_was_first_seen_under(tmp_path: Path) -> None:
    """GPU 1's own row is missing from the second sample; its instance must not move to GPU 3,
    the GPU row printed before it this time."""
    path = tmp_path / "mig.txt"
    path.write_text(
        "#Entity   DRAMA\nID\n"
        "GPU 3     0.1\nGPU-I 24  0.2\nGPU 1     0.3\nGPU-I 8   0.4\n"
        "GPU 3     0.1\nGPU-I 24  0.2\nGPU-I 8   0.5\n"
    )
    batches = play_all(replay_source(path, model=H100))
    assert [{s.entity.key for s in b} for b in batches] == [
        {(1, None), (1, 8), (3, None), (3, 24)},
        {(1, 8), (3, None), (3, 24)},
    ]
    assert {s.entity.key: s.values[DRAM_ACTIVE] for s in batches[1]}[(1, 8)] == 0.5


def test_dmon_odd_entity_ids_are_skipped_with_file_and_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "odd.txt"
    path.write_text(
        "#Entity   DRAMA\nID\nGPU 0     0.1\nGPU ²     0.2\nGPU-I ٣   0.3\nGPU 99999999 0.4\nGPU 1     0.5\n"
    )
    source = replay_source(path, model=H100)
    with caplog.at_level(logging.WARNING, logger="exporter.sources.replay"):
        batches = play_all(source)
    assert [[s.entity.gpu for s in b] for b in batches] == [[0, 1]]
    assert source.replay_stats.skipped_by_reason == {"bad_entity": 3}
    for number in (4, 5, 6):
        assert f"odd.txt:{number}:" in caplog.text


# -- streaming: memory, gzip, loops --------------------------------------------------------------


def test_gzip_of_several_members_plays_through(tmp_path: Path) -> None:
    first = "".join(line(float(t), 0, {"1005": 0.5}) + "\n" for t in range(5))
    second = "".join(line(float(t), 0, {"1005": 0.6}) + "\n" for t in range(5, 9))
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(first.encode()) + gzip.compress(second.encode()))
    assert len(play_all(replay_source(path))) == 9


def test_corrupt_gzip_from_the_start_is_unreadable_at_open(tmp_path: Path) -> None:
    path = tmp_path / "t.gz"
    path.write_bytes(b"\x1f\x8b" + b"\x00" * 64)
    with pytest.raises(SourceUnavailable) as caught:
        replay_source(path).open()
    assert caught.value.reason == "replay_unreadable"


def test_looping_reads_the_file_again_and_counts_skips_once(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(line(float(t), 0, {"1005": 0.5}) + "\n" for t in (0, 1, 2)) + "{bad\n")
    source = replay_source(path, loop=True)
    source.open()
    times = [source.read()[0].timestamp for _ in range(10)]
    assert times == [float(t) for t in range(10)]
    assert source.replay_stats.loops == 3
    assert source.records_skipped == 1
    assert source.period_seconds == 3.0


def test_a_line_without_a_model_mid_file_is_skipped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        line(1.0, 0, {"1005": 0.5}) + "\n"
        + json.dumps({"ts": 2.0, "gpu": 0}) + "\n"
        + line(3.0, 0, {}) + "\n"
    )  # fmt: skip
    source = replay_source(path)
    assert len(play_all(source)) == 2
    assert source.replay_stats.skipped_by_reason == {"no_model": 1}


PLAY_PROBE = """
import sys
from exporter.sources.base import EndOfStream, SourceOptions
from exporter.sources.replay import ReplaySettings, ReplaySource

def status_kib(key):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(key + ":"))

def play(path):
    source = ReplaySource(SourceOptions(), ReplaySettings(path=path, speed=None))
    source.open()
    samples = 0
    while True:
        try:
            samples += len(source.read())
        except EndOfStream:
            return samples

play(sys.argv[1])
before = status_kib("VmRSS")
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")  # reset the peak (VmHWM) to the current RSS
samples = play(sys.argv[2])
print(samples, status_kib("VmHWM") - before)
"""
"""Run as its own process: plays argv[1] (warm-up), then argv[2], and prints the samples played
and how far the second play raised peak RSS (KiB) above the RSS before it."""


def test_a_large_replay_costs_no_more_memory_than_a_small_one(tmp_path: Path) -> None:
    """Peak RSS of a real process playing a 16 MiB trace, above its RSS after a small one. Held
    whole (text, lines, samples) it would add well over 100 MiB; streamed, a few batches."""
    small = tmp_path / "small.jsonl"
    big = tmp_path / "big.jsonl"
    write_samples(small, _trace(10))
    with big.open("w", encoding="utf-8") as out:
        seconds = 0
        while out.tell() < 16 * 1024 * 1024:
            out.writelines(replay_line(float(seconds), gpu, _values(gpu, seconds)) + "\n" for gpu in range(8))
            seconds += 1
    result = subprocess.run(
        [sys.executable, "-c", PLAY_PROBE, str(small), str(big)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    samples, extra_kib = map(int, result.stdout.split())
    assert samples == seconds * 8
    assert extra_kib < 8 * 1024, f"playing a 16 MiB trace raised peak RSS by {extra_kib} KiB"


def _values(gpu: int, second: int) -> dict[int, float | None]:
    dram = (gpu + second) % 100 / 100
    return {GR_ENGINE_ACTIVE: 0.9, DRAM_ACTIVE: dram, PIPE_TENSOR_ACTIVE: 0.3, SM_CLOCK: 1980.0}


def _trace(seconds: int) -> list[Sample]:
    return [
        Sample(timestamp=float(t), entity=Entity(gpu=g, uuid=f"GPU-{g}", model=H100), values=_values(g, t))
        for t in range(seconds)
        for g in range(8)
    ]


# -- nothing but an unreadable file stops a replay ---------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fmt=st.sampled_from(["jsonl", "csv", "dmon"]),
    body=st.lists(
        st.one_of(
            st.text(max_size=80),
            st.sampled_from(
                [
                    "#Entity   DRAMA  GRACT",
                    "ID",
                    "GPU 0     0.5    N/A",
                    "GPU-I 3   1e999  0.2",
                    "ts,gpu,model,1005",
                    '1,0,m,"0.5',
                    line(1.0, 0, {"1005": 0.5}),
                    '{"ts": 1e400, "gpu": 0, "model": "m"}',
                    '{"ts": 1, "gpu": 1e400, "model": "m"}',
                ]
            ),
        ),
        max_size=30,
    ),
)
def test_no_input_crashes_a_replay(tmp_path: Path, fmt: str, body: list[str]) -> None:
    path = tmp_path / f"fuzz.{fmt}"
    path.write_text("\n".join(body) + "\n", encoding="utf-8", errors="surrogatepass")
    source = replay_source(path, format=fmt, model=H100)
    try:
        source.open()
    except SourceUnavailable:
        return  # a clear start-up error is an allowed outcome
    for _ in range(1000):
        try:
            source.read()
        except EndOfStream:
            break


def test_mig_profile_flag_parses_and_refuses_with_a_clear_line() -> None:
    assert mig_profiles("1=3g.40gb, 0:2=1g.10gb+me") == (
        MigProfileHint(gpu_instance=1, profile="3g.40gb"),
        MigProfileHint(gpu_instance=2, profile="1g.10gb+me", gpu=0),
    )
    for bad in ("", "3g.40gb", "x=3g", "1=", "1=3g 40gb", "²=3g.40gb", "0:1:2=3g"):
        with pytest.raises(Exception, match=r"\[GPU:\]GI=PROFILE"):
            mig_profiles(bad)
