"""The replay source: every format parsed right, blanks kept blank, bad lines skipped and named,
start-up errors in one clear line, pacing by an injected clock, looping with monotonic time."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest
from replay_lines import play_all, read_samples, replay_source, write_samples
from source_kit import replay_options

from exporter.catalog import load_catalog
from exporter.fields import DRAM_ACTIVE, GR_ENGINE_ACTIVE, PIPE_TENSOR_ACTIVE, SM_ACTIVE, SM_CLOCK
from exporter.inference import InferenceConfig
from exporter.sample import Attribution, Entity, Sample
from exporter.sampler import FOLD_EVERY_SECONDS, PUBLISH_EVERY_SECONDS, Sampler
from exporter.sources import create_source
from exporter.sources.base import EndOfStream, SourceOptions, SourceUnavailable
from exporter.sources.replay import ReplaySettings, ReplaySource
from exporter.sources.replay_formats import detect_format

DATA = Path(__file__).parent / "data" / "replay"
H100 = "NVIDIA H100 80GB HBM3"


def jsonl_line(ts: float, gpu: int, fields: dict[str, object], **extra: object) -> str:
    line: dict[str, object] = {"ts": ts, "gpu": gpu, "uuid": f"GPU-{gpu}", "model": H100, "fields": fields}
    line.update(extra)
    return json.dumps(line)


# -- JSON Lines -------------------------------------------------------------------------------


def test_jsonl_fields_by_id_and_name_become_dcgm_ids(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text(
        jsonl_line(10.0, 0, {"1005": 0.71, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.12, "100": 1980})
        + "\n"
        + jsonl_line(10.0, 1, {"DRAMA": 0.2}, namespace="llm", pod="decode-7f9", container="server")
        + "\n"
    )
    batches = play_all(replay_source(path))
    assert len(batches) == 1
    first, second = sorted(batches[0], key=lambda s: s.entity.gpu)
    assert first.values == {DRAM_ACTIVE: 0.71, PIPE_TENSOR_ACTIVE: 0.12, SM_CLOCK: 1980.0}
    assert first.entity.model == H100 and first.entity.uuid == "GPU-0" and first.timestamp == 10.0
    assert first.attribution is None
    assert second.attribution is not None and second.attribution.pod == "decode-7f9"


def test_jsonl_null_and_blank_sentinel_stay_none_never_zero(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text(jsonl_line(1.0, 0, {"1005": None, "1004": 140737488355328.0, "1001": 0.0}) + "\n")
    (batch,) = play_all(replay_source(path))
    assert batch[0].values == {DRAM_ACTIVE: None, PIPE_TENSOR_ACTIVE: None, GR_ENGINE_ACTIVE: 0.0}


def test_jsonl_groups_lines_by_timestamp_into_batches(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    lines = [jsonl_line(float(t), gpu, {"1005": 0.5}) for t in range(3) for gpu in range(4)]
    path.write_text("\n".join(lines) + "\n")
    batches = play_all(replay_source(path))
    assert [len(b) for b in batches] == [4, 4, 4]
    assert [b[0].timestamp for b in batches] == [0.0, 1.0, 2.0]


def test_jsonl_written_gpu_by_gpu_is_regrouped_in_time_order(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    lines = [jsonl_line(float(t), gpu, {"1005": 0.5}) for gpu in range(2) for t in range(3)]
    path.write_text("\n".join(lines) + "\n")
    batches = play_all(replay_source(path))
    assert [sorted(s.entity.gpu for s in b) for b in batches] == [[0, 1]] * 3


def test_corrupt_jsonl_lines_are_skipped_counted_and_logged_with_file_and_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "replay.jsonl"
    good = jsonl_line(1.0, 0, {"1005": 0.5})
    lines = [
        good,  # 1
        "{not json",  # 2
        jsonl_line(1.0, -1, {"1005": 0.5}),  # 3 negative gpu
        jsonl_line(1.0, 2, {"1005": "lots"}),  # 4 non-numeric value
        jsonl_line(1.0, 3, {"1005": 0.5}, mystery=1),  # 5 unknown entity key
        '["a", "list"]',  # 6
        jsonl_line(1.0, 4, {"1005": 0.5}, gpu_instance="x"),  # 7 wrong type
        jsonl_line(2.0, 0, {"1005": 0.6, "NOT_A_FIELD": 1, "ALSO_NOT": 2}),  # 8 unknown names: ignored
        jsonl_line(3.0, 0, {"NOT_A_FIELD": 3}),  # 9
    ]
    path.write_text("\n".join(lines) + "\n")
    source = replay_source(path)
    with caplog.at_level(logging.WARNING, logger="exporter.sources.replay"):
        batches = play_all(source)
    assert [[s.values for s in b] for b in batches] == [[{DRAM_ACTIVE: 0.5}], [{DRAM_ACTIVE: 0.6}], [{}]]
    stats = source.replay_stats
    assert stats.lines_read == 9
    assert stats.lines_skipped == 6
    assert stats.skipped_by_reason == {
        "bad_json": 2,
        "bad_gpu": 1,
        "bad_value": 1,
        "unknown_key": 1,
        "bad_entity": 1,
    }
    text = caplog.text
    for number in (2, 3, 4, 5, 6, 7):
        assert f"replay.jsonl:{number}:" in text
    assert "replay.jsonl:1:" not in text and "replay.jsonl:8:" not in text
    assert text.count("'NOT_A_FIELD'") == 1  # one warning per unknown name


def test_jsonl_line_without_model_fails_at_open_unless_model_given(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text(json.dumps({"ts": 1.0, "gpu": 0, "fields": {"1005": 0.5}}) + "\n")
    with pytest.raises(SourceUnavailable, match="--model"):
        replay_source(path).open()
    (batch,) = play_all(replay_source(path, model="NVIDIA A100-SXM4-80GB"))
    assert batch[0].entity.model == "NVIDIA A100-SXM4-80GB"
    assert batch[0].entity.uuid == "GPU-replay-0"


def test_gzip_file_is_read_transparently_even_when_cut_short(tmp_path: Path) -> None:
    lines = "".join(jsonl_line(float(t), 0, {"1005": 0.5}) + "\n" for t in range(50))
    whole = tmp_path / "trace.jsonl.gz"
    whole.write_bytes(gzip.compress(lines.encode()))
    assert len(play_all(replay_source(whole))) == 50
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(lines.encode())[:-8])  # no gzip trailer, as after a crash
    assert len(play_all(replay_source(cut))) == 50


# -- CSV ----------------------------------------------------------------------------------


def test_csv_columns_by_id_and_name_with_blank_cells(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(
        "timestamp,gpu,uuid,model,namespace,pod,container,1005,DCGM_FI_PROF_PIPE_TENSOR_ACTIVE,SMACT,power\r\n"
        f"100.0,0,GPU-a,{H100},llm,p0,c,0.71,0.12,N/A,300\r\n"
        f"100.0,1,GPU-b,{H100},,,,,0.5,0.9,300\r\n"
        f"101.0,0,GPU-a,{H100},llm,p0,c,0.70,0.10,0.3,300\r\n"
    )
    batches = play_all(replay_source(path))
    assert [len(b) for b in batches] == [2, 1]
    gpu0, gpu1 = sorted(batches[0], key=lambda s: s.entity.gpu)
    assert gpu0.values == {DRAM_ACTIVE: 0.71, PIPE_TENSOR_ACTIVE: 0.12, SM_ACTIVE: None}
    assert gpu1.values == {DRAM_ACTIVE: None, PIPE_TENSOR_ACTIVE: 0.5, SM_ACTIVE: 0.9}
    assert gpu0.attribution is not None and gpu0.attribution.namespace == "llm"
    assert gpu1.attribution is None


def test_csv_bad_rows_are_skipped_and_the_rest_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("ts,gpu,1005\n1,0,0.5\n1,x,0.5\n1,1,abc\n1,2\n2,0,0.6\n")
    source = replay_source(path, model=H100)
    with caplog.at_level(logging.WARNING):
        batches = play_all(source)
    assert [[s.values[DRAM_ACTIVE] for s in b] for b in batches] == [[0.5], [0.6]]
    assert source.replay_stats.skipped_by_reason == {"bad_entity": 1, "bad_value": 1, "column_count": 1}
    assert "trace.csv:3:" in caplog.text and "trace.csv:4:" in caplog.text and "trace.csv:5:" in caplog.text


# -- dcgmi dmon ---------------------------------------------------------------------------


def test_dmon_capture_with_repeated_headers_mig_rows_blanks_trailer_and_crlf() -> None:
    source = replay_source(DATA / "dmon_mig_crlf.txt", model=H100, interval_seconds=0.5)
    batches = play_all(source)
    assert source.format == "dmon"
    assert len(batches) == 30  # 30 samples; headers and the trailer are not samples
    first = {(s.entity.gpu, s.entity.gpu_instance): s for s in batches[0]}
    assert set(first) == {(0, None), (0, 1), (1, None)}  # GPU-CI rows are not replayed
    gpu0 = first[(0, None)]
    assert gpu0.entity.uuid == "GPU-dmon-0" and gpu0.entity.model == H100
    assert gpu0.values[GR_ENGINE_ACTIVE] == 0.95 and gpu0.values[SM_CLOCK] == 1980.0
    assert first[(0, 1)].entity.uuid == "MIG-dmon-0-1"
    assert first[(0, 1)].values[1009] is None  # N/A
    blank = {s.entity.key: s for s in batches[3]}[(0, None)]
    assert blank.values[DRAM_ACTIVE] is None
    times = [b[0].timestamp for b in batches]
    assert times == [1_000_000.0 + 0.5 * i for i in range(30)]
    assert source.replay_stats.skipped_by_reason == {"compute_instance": 30}


def test_dmon_old_layout_right_aligned_with_tabs_and_comments(tmp_path: Path) -> None:
    text = (
        "# captured on node-17\n"
        "# Entity  SMACT  SMOCC  TENSO  DRAMA\n"
        "      Id\n"
        "    GPU 0  0.500  0.300  0.700\t0.200\n"
        "    GPU 1    N/A  0.000  0.000  0.000\n"
        "    GPU 0  0.510  0.300  0.710  0.210\n"
        "\n"
        "# Entity  SMACT  SMOCC  TENSO  DRAMA\n"
        "      Id\n"
        "    GPU 1  0.100  0.000  0.000  0.000\n"
        "\n"
        "dmon was stopped due to receiving a signal.\n"
    )
    path = tmp_path / "old.dmon"
    path.write_text(text)
    batches = play_all(replay_source(path, model=H100))
    # GPU 1 missing from the second sample; the header closes the second batch.
    assert [[s.entity.gpu for s in b] for b in batches] == [[0, 1], [0], [1]]
    assert batches[0][1].values[SM_ACTIVE] is None
    assert batches[0][0].values[DRAM_ACTIVE] == 0.2


def test_dmon_gpu_dropping_out_starts_a_new_batch_by_the_order_of_the_last_sample(tmp_path: Path) -> None:
    path = tmp_path / "drop.txt"
    path.write_text(
        "#Entity   DRAMA\nID\nGPU 0     0.1\nGPU 1     0.1\nGPU 1     0.2\nGPU 0     0.3\nGPU 1     0.3\n"
    )
    batches = play_all(replay_source(path, model=H100))
    assert [[(s.entity.gpu, s.values[DRAM_ACTIVE]) for s in b] for b in batches] == [
        [(0, 0.1), (1, 0.1)],
        [(1, 0.2)],
        [(0, 0.3), (1, 0.3)],
    ]


def test_dmon_field_id_columns_unit_suffixes_and_bad_rows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ids.txt"
    path.write_text(
        "#Entity   1005      GRACT     SMCLK\n"
        "ID\n"
        "GPU 0     0.5       0.9       1980MHz\n"
        "GPU 1     0.5       nope      1980\n"
        "GPU 2     0.5\n"
        "GPU 3     71%       0.9       1410\n"
    )
    source = replay_source(path, model=H100)
    with caplog.at_level(logging.WARNING):
        (batch,) = play_all(source)
    by_gpu = {s.entity.gpu: s.values for s in batch}
    assert by_gpu[0] == {DRAM_ACTIVE: 0.5, GR_ENGINE_ACTIVE: 0.9, SM_CLOCK: 1980.0}
    assert by_gpu[3][DRAM_ACTIVE] == pytest.approx(0.71)
    assert set(by_gpu) == {0, 3}
    assert source.replay_stats.skipped_by_reason == {"bad_value": 1, "column_count": 1}
    assert "ids.txt:4:" in caplog.text and "ids.txt:5:" in caplog.text


def test_dmon_needs_a_model() -> None:
    with pytest.raises(SourceUnavailable, match="--model") as info:
        replay_source(DATA / "dmon_mig_crlf.txt").open()
    assert "\n" not in str(info.value)


# -- detection and start-up errors ----------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('\n\n{"ts": 1, "gpu": 0, "model": "m", "fields": {"1005": 0.5}}\n', "jsonl"),
        ("#Entity   DRAMA\nID\nGPU 0     0.5\n", "dmon"),
        ("dcgmi dmon -e 1005,1004\nGPU 0  0.5  0.1\n", "dmon"),
        ("ts,gpu,model,1005\n1,0,m,0.5\n", "csv"),
    ],
)
def test_format_is_detected_from_content(content: str, expected: str) -> None:
    assert detect_format(content.splitlines()) == expected


def test_detected_format_is_the_one_played(tmp_path: Path) -> None:
    path = tmp_path / "no-extension"
    path.write_text("ts,gpu,model,1005\n1,0,m,0.5\n")
    source = replay_source(path)
    assert len(play_all(source)) == 1
    assert source.format == "csv"


def test_wrong_replay_format_fails_at_open_with_one_line() -> None:
    with pytest.raises(SourceUnavailable) as info:
        replay_source(DATA / "dmon_mig_crlf.txt", model=H100, format="csv").open()
    message = str(info.value)
    assert "looks like dmon" in message and "csv" in message and "\n" not in message


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "does not exist"),
        ("", "is empty"),
        ("\n  \n", "is empty"),
        ("{bad\n{worse\n", "no valid sample"),
        ("hello world\n", "cannot tell the format"),
    ],
)
def test_unplayable_files_fail_at_open_with_a_clear_line(
    tmp_path: Path, content: str | None, fragment: str
) -> None:
    path = tmp_path / "x.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SourceUnavailable, match=fragment) as info:
        replay_source(path, model=H100).open()
    assert "\n" not in str(info.value)


def test_missing_replay_option_and_bad_speed_fail_at_open() -> None:
    with pytest.raises(SourceUnavailable, match="--replay"):
        ReplaySource(SourceOptions(), ReplaySettings(path=None)).open()
    with pytest.raises(SourceUnavailable, match="--speed"):
        ReplaySource(SourceOptions(), ReplaySettings(path="demo", speed=0.0)).open()


def test_a_replay_at_speed_max_is_flat_out_and_the_sampler_publishes_at_its_pace() -> None:
    """The sampler learns --speed max from the source, not from any replay field of its own."""
    flat_out = ReplaySource(SourceOptions(), ReplaySettings(path="demo", speed=None))
    paced = ReplaySource(SourceOptions(), ReplaySettings(path="demo", speed=2.0))
    assert flat_out.flat_out and not paced.flat_out
    sampler = Sampler("replay", SourceOptions(interval_seconds=0.1), load_catalog(), InferenceConfig())
    assert sampler._publish_gap(flat_out) == PUBLISH_EVERY_SECONDS
    assert sampler._publish_gap(paced) == FOLD_EVERY_SECONDS


# -- pacing and looping --------------------------------------------------------------------


class FakeTime:
    """A clock that only moves when the source sleeps."""

    def __init__(self) -> None:
        self.now = 500.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def write_seconds(path: Path, times: list[float]) -> None:
    path.write_text("".join(jsonl_line(t, 0, {"1005": 0.5}) + "\n" for t in times))


@pytest.mark.parametrize("speed", [1.0, 4.0, 0.5])
def test_read_sleeps_until_each_batch_is_due_at_the_given_speed(tmp_path: Path, speed: float) -> None:
    path = tmp_path / "t.jsonl"
    write_seconds(path, [0.0, 1.0, 3.0, 3.5])
    fake = FakeTime()
    source = ReplaySource(
        SourceOptions(), ReplaySettings(path=str(path), speed=speed), clock=fake.clock, sleep=fake.sleep
    )
    source.open()
    for _ in range(4):
        source.read()
    assert fake.sleeps == pytest.approx([1.0 / speed, 2.0 / speed, 0.5 / speed])


def test_a_slow_consumer_is_not_made_to_wait_again(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_seconds(path, [0.0, 1.0, 2.0])
    fake = FakeTime()
    source = ReplaySource(
        SourceOptions(), ReplaySettings(path=str(path), speed=1.0), clock=fake.clock, sleep=fake.sleep
    )
    source.open()
    source.read()
    fake.now += 5.0  # the sampler was busy for 5 s
    source.read()
    source.read()
    assert fake.sleeps == []


def test_speed_max_never_sleeps(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_seconds(path, [0.0, 10.0, 20.0])
    fake = FakeTime()
    source = ReplaySource(
        SourceOptions(), ReplaySettings(path=str(path), speed=None), clock=fake.clock, sleep=fake.sleep
    )
    assert len(play_all(source)) == 3
    assert fake.sleeps == []


def test_loop_keeps_timestamps_monotonic_across_loops(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_seconds(path, [100.0, 101.0, 102.0])
    source = replay_source(path, loop=True)
    source.open()
    times = [source.read()[0].timestamp for _ in range(9)]
    assert times == [100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0]
    assert source.replay_stats.loops == 2


def test_without_loop_the_stream_ends(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_seconds(path, [1.0])
    source = replay_source(path)
    source.open()
    source.read()
    with pytest.raises(EndOfStream):
        source.read()


def test_close_wakes_a_waiting_read(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_seconds(path, [0.0, 3600.0])
    source = ReplaySource(SourceOptions(), ReplaySettings(path=str(path), speed=1.0))
    source.open()
    source.read()
    source.close()
    with pytest.raises(EndOfStream):
        source.read()


# -- the demo -------------------------------------------------------------------------------


def test_demo_plays_from_the_registry_with_eight_h100s() -> None:
    source = create_source("replay", replay_options(path="demo", speed=None))
    assert isinstance(source, ReplaySource)
    batches = play_all(source)
    assert 550 <= len(batches) <= 650
    gpus = {s.entity.gpu for b in batches for s in b}
    assert gpus == set(range(8))
    assert {s.entity.model for b in batches for s in b} == {H100}
    assert source.replay_stats.lines_skipped == 0
    sizes = [len(b) for b in batches]
    assert min(sizes) == 7 and max(sizes) == 8  # one GPU drops out for a while
    blanks = [s for b in batches for s in b if DRAM_ACTIVE in s.values and s.values[DRAM_ACTIVE] is None]
    assert 1 <= len(blanks) <= 10
    idle = [s.values[GR_ENGINE_ACTIVE] for b in batches for s in b if s.entity.gpu == 7]
    assert max(v for v in idle if v is not None) < 0.05
    times = [b[0].timestamp for b in batches]
    assert times == sorted(times) and times[1] - times[0] == 1.0


def test_dmon_rows_prefixed_with_their_time_are_batched_by_it(tmp_path: Path) -> None:
    path = tmp_path / "stamped.log"
    path.write_text(
        "2025-11-29T16:00:00Z #Entity   DRAMA\n"
        "#Entity   DRAMA\n"
        "ID\n"
        "1764432000.0 GPU 0     0.1\n"
        "1764432000.0 GPU 1     0.1\n"
        "2025-11-29T16:00:05Z GPU 0     0.2\n"
        "16:00:06 GPU 0     0.3\n"
    )
    batches = play_all(replay_source(path, model=H100))
    assert [b[0].timestamp for b in batches] == [1764432000.0, 1764432005.0, 1764432006.0]
    assert [len(b) for b in batches] == [2, 1, 1]


# -- JSON Lines: odd lines -----------------------------------------------------------------------


def _outcome(source: ReplaySource) -> tuple[object, ...]:
    batches = play_all(source)
    stats = source.replay_stats
    return (
        [[(s.timestamp, s.entity.gpu, dict(s.values)) for s in b] for b in batches],
        stats.lines_read,
        stats.skipped_by_reason,
    )


def test_jsonl_nan_and_infinity_literals_read_as_blanks_not_skips(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"ts": 1.0, "gpu": 0, "model": "m", "fields": {"1005": NaN, "1004": 0.25}}\n'
        '{"ts": 1.0, "gpu": 1, "model": "m", "fields": {"1005": Infinity, "100": -Infinity}}\n'
        '{"ts": 2.0, "gpu": 0, "model": "m", "fields": {"1005": 0.5, "1004": 0.5}}\n'
    )
    source = replay_source(path)
    batches = play_all(source)
    assert [[s.values for s in b] for b in batches] == [
        [{DRAM_ACTIVE: None, PIPE_TENSOR_ACTIVE: 0.25}, {DRAM_ACTIVE: None, SM_CLOCK: None}],
        [{DRAM_ACTIVE: 0.5, PIPE_TENSOR_ACTIVE: 0.5}],
    ]
    assert source.replay_stats.lines_skipped == 0


def test_jsonl_odd_values_and_entities_each_get_their_reason(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [
        jsonl_line(1.0, 0, {"1005": 0.5, "100": 1980, "1004": "0.25", "NOT_A_FIELD": 1}),
        jsonl_line(1.0, 1, {"1005": 1.02, "1004": None, "1001": 140737488355328.0}, namespace="a", pod="p"),
        jsonl_line(2.0, 0, {"1005": 0.5, "100": 1980, "1004": "0.25", "NOT_A_FIELD": 1}),
        jsonl_line(2.0, 1, {"1005": True}),  # bad value: skipped
        jsonl_line(2.0, 1.0, {"1005": 0.4}),  # type: ignore[arg-type]  # float gpu index: accepted
        jsonl_line(2.0, 2, {"1005": 0.3}, gpu_instance=True),  # bool instance: skipped
        '{"ts": 3.0, "gpu": 0, "model": "x", "fields": {"1005": NaN}, "DRAMA": 0.1}',
        jsonl_line(3.0, 0, {"1005": 0.5}, uuid=["not", "hashable"]),
        "{broken",
        jsonl_line(1.5, 0, {"1005": 0.5}),  # out of order: put back in order
        jsonl_line(1.0, 0, {"1005": 0.9}),  # duplicate of line 1
    ]
    path.write_text("\n".join(lines) + "\n")
    batches, lines_read, skipped = _outcome(replay_source(path))
    assert skipped == {"bad_value": 1, "bad_entity": 2, "bad_json": 1, "duplicate_entity": 1}
    assert lines_read == 11
    assert batches == [
        [(1.0, 0, {DRAM_ACTIVE: 0.9}),  # the later line for GPU 0 at 1.0 replaced the first
         (1.0, 1, {DRAM_ACTIVE: 1.0, PIPE_TENSOR_ACTIVE: None, GR_ENGINE_ACTIVE: None})],
        [(1.5, 0, {DRAM_ACTIVE: 0.5})],
        [(2.0, 0, {DRAM_ACTIVE: 0.5, SM_CLOCK: 1980.0, PIPE_TENSOR_ACTIVE: 0.25}),
         (2.0, 1, {DRAM_ACTIVE: 0.4})],
        [(3.0, 0, {DRAM_ACTIVE: 0.1})],  # NaN is blank: the top-level DRAMA fills it
    ]  # fmt: skip


def test_jsonl_samples_equal_the_lines_they_came_from(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [jsonl_line(float(t), 0, {"1005": 0.5, "1004": 0.25}) for t in range(3)]
    lines.append(jsonl_line(3.0, 0, {"1005": 0.5}, namespace="ns", pod="p", container="c"))
    path.write_text("\n".join(lines) + "\n")
    samples = [s for b in play_all(replay_source(path)) for s in b]
    assert len({id(s.entity) for s in samples}) == 1  # one shared identity for the sampler
    gpu0 = Entity(gpu=0, uuid="GPU-0", model=H100)
    assert samples == [
        *(
            Sample(timestamp=float(t), entity=gpu0, values={DRAM_ACTIVE: 0.5, PIPE_TENSOR_ACTIVE: 0.25})
            for t in range(3)
        ),
        Sample(
            timestamp=3.0,
            entity=gpu0,
            values={DRAM_ACTIVE: 0.5},
            attribution=Attribution(namespace="ns", pod="p", container="c"),
        ),
    ]
    assert all(type(s.timestamp) is float for s in samples)


def test_jsonl_duplicate_after_skipped_lines_names_the_right_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "dup.jsonl"
    lines = [
        jsonl_line(2.0, 0, {"1005": 0.5}),  # 1
        "not json",  # 2
        "",  # 3 blank
        jsonl_line(1.0, 0, {"1005": 0.5}),  # 4 out of order -> regroup
        jsonl_line(2.0, 0, {"1005": 0.7}),  # 5 duplicate of line 1
    ]
    path.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="exporter.sources.replay"):
        batches = play_all(replay_source(path))
    assert [[s.values[DRAM_ACTIVE] for s in b] for b in batches] == [[0.5], [0.7]]
    assert "dup.jsonl:5: second sample for GPU 0" in caplog.text
    assert "dup.jsonl:4:" not in caplog.text  # out of order by one step: put back, not skipped
    assert "dup.jsonl:2:" in caplog.text


def test_the_one_line_writer_round_trips_mig_pods_jobs_and_blanks(tmp_path: Path) -> None:
    pod = Attribution(namespace="llm", pod="decode-0", container="server")
    written = [
        Sample(
            timestamp=10.0,
            entity=Entity(gpu=0, uuid="MIG-a", model=H100, gpu_instance=3, profile="3g.40gb"),
            values={1005: 0.5, 1004: None, 100: 1980.0},
            attribution=pod,
        ),
        Sample(
            timestamp=10.0,
            entity=Entity(gpu=1, uuid="GPU-b", model=H100),
            values={1005: 0.25},
            hpc_job="9,17",
        ),
    ]
    assert read_samples(write_samples(tmp_path / "t.jsonl", written)) == written


def test_an_nvidia_smi_query_csv_is_refused_naming_nvidia_smi(tmp_path: Path) -> None:
    # `nvidia-smi --query-gpu=timestamp,index,name,utilization.gpu,clocks.sm,power.draw --format=csv`
    path = tmp_path / "smi.csv"
    path.write_text(
        "timestamp, index, name, utilization.gpu [%], clocks.current.sm [MHz], power.draw [W]\n"
        f"2026/12/01 21:00:00.000, 0, {H100}, 97 %, 1755 MHz, 690.12 W\n"
    )
    with pytest.raises(SourceUnavailable) as info:
        replay_source(path, model=H100).open()
    message = str(info.value)
    assert "nvidia-smi --query-gpu CSV" in message and "dcgmi dmon" in message and "\n" not in message
