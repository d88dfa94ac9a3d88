"""``workshop timeline slice`` (and ``repair``, the same streaming writer) on real recordings:
the slice is a valid timeline (``json.load`` and the workshop's reader), it holds exactly what
overlaps the window, and its numbers are those of the whole file over the same window."""

from __future__ import annotations

import json
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_timeline_stream import VARIANTS, damaged_variants

from workshop.analysis.timeline import step_starts
from workshop.cli import main
from workshop.paths import data_dir, data_path
from workshop.readers.timeline import (
    Timeline,
    TimelineWarning,
    read_timeline,
    stitch,
    write_timeline,
)
from workshop.readers.timeline.slicing import slice_file
from workshop.readers.timeline.steps import step_window
from workshop.readers.timeline.summary import summarize_file

RECORDINGS = sorted(p.name for p in (data_dir() / "timelines").iterdir() if p.is_dir())
SMALL_CHUNK = 1 << 14  # 16 KiB scan chunks and batches: ~20 batches a recording
SPAN_COLUMNS = ["tensor", "pid", "op", "kind", "name", "start_us", "end_us", "dur_us"]
SPAN_COLUMNS += ["depth", "closed", "dtype", "shape"]  # all but the event indices
TICK_COLUMNS = ["tensor", "pid", "op", "negotiation", "rank", "ts_us", "lateness_us"]


def read(path: Path) -> Timeline:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TimelineWarning)
        return read_timeline(path)


def table(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    out = frame[columns].reset_index(drop=True)
    return out.astype({c: str for c in columns if isinstance(out[c].dtype, pd.CategoricalDtype)})


def windows(tl: Timeline) -> list[tuple[int | None, int | None]]:
    """The whole file, a middle third, the second half, the first quarter."""
    first, last = tl.metadata["first_ts_us"], tl.metadata["last_ts_us"]
    third, half = first + (last - first) // 3, first + (last - first) // 2
    return [(None, None), (third, half), (half, None), (None, first + (last - first) // 4)]


@pytest.mark.parametrize("name", RECORDINGS)
def test_slice_is_the_whole_timelines_window(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The streaming slice, in batches of 16 KiB, holds the spans, ticks, cycles and tensors
    that :func:`write_timeline` writes from the whole Timeline for the same window (the
    reference; the killed recording's unclosed spans included)."""
    monkeypatch.setattr(stitch, "CHUNK", SMALL_CHUNK)
    path = data_path("timelines", name, "timeline.json")
    whole = read(path)
    for k, (lo, hi) in enumerate(windows(whole)):
        ref, out = tmp_path / f"ref{k}.json", tmp_path / f"out{k}.json"
        write_timeline(whole, ref, start_us=lo, end_us=hi)
        counts = slice_file(path, out, start_us=lo, end_us=hi, batch_bytes=SMALL_CHUNK)
        a, b = read(ref), read(out)
        assert len(b.spans) == counts["spans"] and len(b.cycles) == counts["cycles"]
        assert k > 0 or len(b.spans) == len(whole.spans) > 0  # the first: the whole file
        pd.testing.assert_frame_equal(table(b.spans, SPAN_COLUMNS), table(a.spans, SPAN_COLUMNS))
        pd.testing.assert_frame_equal(table(b.ticks, TICK_COLUMNS), table(a.ticks, TICK_COLUMNS))
        assert b.cycles["start_us"].tolist() == a.cycles["start_us"].tolist()
        pd.testing.assert_frame_equal(b.tensors, a.tensors)
        assert (
            b.metadata["start_time_since_epoch_us"] == whole.metadata["start_time_since_epoch_us"]
        )
        assert not b.warnings and not b.truncated  # closed, balanced, nothing orphaned


@pytest.mark.parametrize("name", [*VARIANTS, "one-line.json"])
def test_slice_of_other_layouts_and_damaged_files(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Horovod's layout before 0.20.1, one key a line, one line, and cut, windowed and damaged
    copies of a recording: the same as write_timeline's window of the whole Timeline."""
    monkeypatch.setattr(stitch, "CHUNK", SMALL_CHUNK)
    path = {p.name: p for p in damaged_variants(tmp_path)}[name]
    whole = read(path)
    for k, (lo, hi) in enumerate(windows(whole)[:2]):
        ref, out = tmp_path / f"ref{k}.json", tmp_path / f"out{k}.json"
        write_timeline(whole, ref, start_us=lo, end_us=hi)
        slice_file(path, out, start_us=lo, end_us=hi, batch_bytes=SMALL_CHUNK)
        a, b = read(ref), read(out)
        pd.testing.assert_frame_equal(table(b.spans, SPAN_COLUMNS), table(a.spans, SPAN_COLUMNS))
        pd.testing.assert_frame_equal(table(b.ticks, TICK_COLUMNS), table(a.ticks, TICK_COLUMNS))
        assert b.cycles["start_us"].tolist() == a.cycles["start_us"].tolist()
        assert balanced(json.loads(out.read_text()))


def balanced(events: list[dict]) -> bool:
    """Every E closes a B of its pid, and none is left open."""
    depth: dict[int, int] = defaultdict(int)
    for e in events:
        if e["ph"] in ("B", "E"):
            depth[e["pid"]] += 1 if e["ph"] == "B" else -1
            if depth[e["pid"]] < 0:
                return False
    return set(depth.values()) <= {0}


@pytest.mark.parametrize("name", ["tl-torch-gloo-np2-cycles", "tl-torch-gloo-np2-nocache"])
def test_slice_of_steps_loads_and_counts_what_the_whole_file_holds(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--steps 20:23``: json.load reads it, B and E balance, and its summary's numbers are
    those of the whole file's spans, ticks and cycles counted over the same window here with
    pandas (spans clipped to its edges)."""
    monkeypatch.chdir(tmp_path)
    path = data_path("timelines", name)
    assert main(["timeline", "slice", str(path), "--steps", "20:23", "-o", "s.json"]) == 0
    whole = read(path)
    steps = step_starts(whole.spans)
    lo, hi = int(steps.start_us[20]), int(steps.start_us[23]) - 1
    events = json.loads((tmp_path / "s.json").read_text())
    assert balanced(events)
    assert all(lo <= e["ts"] <= hi for e in events if "ts" in e)
    assert len(step_starts(read(tmp_path / "s.json").spans)) == 3

    sp = whole.spans
    sp = sp[(sp["end_us"] >= lo) & (sp["start_us"] <= hi)]
    clipped = sp["end_us"].clip(upper=hi) - sp["start_us"].clip(lower=lo)
    kind = sp["kind"].astype(str)
    name_of = sp["name"].astype(str)
    act = clipped[kind == "activity"].groupby(name_of[kind == "activity"]).sum()
    neg = clipped[kind == "negotiate"].groupby(name_of[kind == "negotiate"]).sum()
    ops = sp[kind == "op"]["op"].astype(str).value_counts()
    ticks = whole.ticks[whole.ticks["ts_us"].between(lo, hi)]
    cycles = whole.cycles[whole.cycles["start_us"].between(lo, hi)]

    got = summarize_file(tmp_path / "s.json")
    assert got["activities_us"] == {k: int(v) for k, v in act.items()}
    assert got["negotiation_us"] == {k: int(v) for k, v in neg.items()}
    assert got["ops"] == {k: int(v) for k, v in ops.items()}
    assert got["ranks"] == ticks["rank"].nunique() and got["cycles"] == len(cycles)
    assert got["tensors"] == pd.concat([sp["tensor"], ticks["tensor"]]).astype(str).nunique()
    assert got["span_us"] <= hi - lo and not got["warnings"]
    if name.endswith("nocache"):
        assert len(ticks) > 0  # the cache off: ticks in every step


@pytest.mark.parametrize("name", RECORDINGS)
def test_step_window_is_step_starts(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The streaming pass finds the steps of ``analysis.step_starts`` (one rule, two readers):
    first, middle and last steps, in 16 KiB batches."""
    monkeypatch.setattr(stitch, "CHUNK", SMALL_CHUNK)
    path = data_path("timelines", name, "timeline.json")
    steps = step_starts(read(path).spans)
    n = len(steps)
    for a, b in [(0, 1), (3, 7), (n - 2, n), (0, n)]:
        w = step_window(path, a, b, batch_bytes=SMALL_CHUNK)
        hi = int(steps.start_us[b]) - 1 if b < n else int(steps.end_us[n - 1])
        assert (w.start_us, w.end_us, w.steps) == (int(steps.start_us[a]), hi, n), (a, b)


def test_a_cut_file_slices_with_its_open_spans_closed(tmp_path: Path) -> None:
    """A recording cut inside an op (a killed job): the slice to its end closes the spans left
    open at the last timestamp, and reads back without a warning."""
    data = data_path("timelines", "tl-torch-gloo-np2", "timeline.json").read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: data.index(b'"name": "GLOO_ALLREDUCE"', len(data) // 2) + 40])
    whole = read(cut)
    assert whole.truncated and whole.metadata["unclosed"] > 0
    half = (whole.metadata["first_ts_us"] + whole.metadata["last_ts_us"]) // 2
    counts = slice_file(cut, tmp_path / "end.json", start_us=half)
    assert any("cut at byte" in w for w in counts["warnings"])
    events = json.loads((tmp_path / "end.json").read_text())
    assert balanced(events)
    tail = read(tmp_path / "end.json")
    assert not tail.warnings and tail.spans["closed"].all()
    assert tail.spans["end_us"].max() == whole.metadata["last_ts_us"]


def test_slice_never_overwrites_and_names_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(data_path("timelines", "tl-torch-gloo-np2"))
    out = tmp_path / "s.json"
    out.write_text("mine")
    assert main(["timeline", "slice", path, "--steps", "1:2", "-o", str(out)]) == 2
    assert out.read_text() == "mine" and "nothing was overwritten" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]  # no partial file left
    new = str(tmp_path / "new.json")
    assert main(["timeline", "slice", path, "--steps", "1-2", "-o", new]) == 2
    assert "--steps expects A:B" in capsys.readouterr().err
    assert main(["timeline", "slice", path, "--steps", "58:61", "-o", new]) == 2
    assert "timeline.json: 60 training steps (0 to 59" in capsys.readouterr().err
    assert main(["timeline", "slice", path, "--window-us", "9:5", "-o", new]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2, 3]")
    assert main(["timeline", "slice", str(bad), "--window-us", "0:5", "-o", new]) == 2
    assert "bad.json: byte 1:" in capsys.readouterr().err
    assert not (tmp_path / "new.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "s.json"]


def test_slice_stops_after_the_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slice of steps 20 to 22 of a file of many batches stops reading after the window,
    and writes the spans a pass to the end writes (the reference, from the whole Timeline)."""
    monkeypatch.setattr(stitch, "CHUNK", SMALL_CHUNK)
    raw = data_path("timelines", "tl-torch-gloo-np2-cycles", "timeline.json")
    whole = read(raw)
    steps = step_starts(whole.spans)
    lo, hi = int(steps.start_us[20]), int(steps.start_us[23]) - 1
    counts = slice_file(raw, tmp_path / "a.json", start_us=lo, end_us=hi, batch_bytes=SMALL_CHUNK)
    assert counts["stopped_early"]
    write_timeline(whole, tmp_path / "b.json", start_us=lo, end_us=hi)
    a, b = read(tmp_path / "a.json"), read(tmp_path / "b.json")
    np.testing.assert_array_equal(a.spans["end_us"], b.spans["end_us"])
    assert len(a.spans) == len(b.spans) > 0
