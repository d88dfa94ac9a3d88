"""`workshop timeline report|summary|repair` on real recordings (data/timelines)."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

from workshop.analysis.timeline import timeline_summary
from workshop.cli import main
from workshop.paths import data_dir, data_path
from workshop.readers.timeline import TimelineWarning, read_timeline
from workshop.readers.timeline.summary import summarize_file

RUN = "tl-torch-gloo-np2-cycles"
REQUIRED = {"tensors", "ranks", "ops", "activities_us", "negotiation_us", "backend"}
REQUIRED |= {"span_us", "truncated", "events"}


def timeline_file(name: str = RUN) -> Path:
    return data_path("timelines", name, "timeline.json")


def test_summary_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", "summary", str(timeline_file()), "--json"]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out)  # exactly one JSON object
    assert REQUIRED <= set(summary)
    assert summary["backend"] == "Gloo"
    assert summary["ranks"] == 2 and summary["truncated"] is False
    assert summary["ops"]["ALLREDUCE"] > 0
    assert all(k.startswith("NEGOTIATE_") for k in summary["negotiation_us"])
    assert "GLOO_ALLREDUCE" in summary["activities_us"]
    assert summary["tensors"] == len(summary["tensor_names"])


def test_summary_of_a_run_directory_in_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", "summary", str(data_path("timelines", "tl-torch-mpi-np2"))]) == 0
    out = capsys.readouterr().out
    assert "backend: MPI" in out and "truncated: False" in out


def test_report_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", "report", str(timeline_file())]) == 0
    out = capsys.readouterr().out
    assert "Negotiation takes" in out and "Library: Gloo." in out
    assert "Stragglers" in out and "training steps found" in out


def test_truncated_file_reports_the_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = timeline_file("tl-torch-gloo-np2").read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) // 3])
    assert main(["timeline", "summary", str(cut), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["truncated"] is True
    assert "cut at byte" in captured.err


def test_repair_writes_closed_balanced_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = timeline_file("tl-torch-gloo-np2").read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) // 2 + 17])
    out = tmp_path / "repaired.json"
    assert main(["timeline", "repair", str(cut), "-o", str(out)]) == 0
    events = json.loads(out.read_text())
    balance: dict[int, int] = defaultdict(int)
    for e in events:
        if e["ph"] in ("B", "E"):
            balance[e["pid"]] += 1 if e["ph"] == "B" else -1
            assert balance[e["pid"]] >= 0
    assert set(balance.values()) == {0}
    assert "wrote" in capsys.readouterr().out
    # nothing is overwritten
    before = out.read_bytes()
    assert main(["timeline", "repair", str(cut), "-o", str(out)]) == 2
    assert out.read_bytes() == before
    assert "nothing was overwritten" in capsys.readouterr().err


def test_repair_window(tmp_path: Path) -> None:
    out = tmp_path / "window.json"
    whole = tmp_path / "whole.json"
    assert main(["timeline", "repair", str(timeline_file()), "-o", str(whole)]) == 0
    every = [e["ts"] for e in json.loads(whole.read_text()) if "ts" in e]
    # a 100 ms window in the middle of the timeline's own span
    start = (min(every) + max(every)) // 2
    end = start + 100_000
    inside = [t for t in every if start <= t <= end]
    assert 0 < len(inside) < len(every)
    args = ["timeline", "repair", str(timeline_file()), "-o", str(out)]
    assert main(args + ["--start-us", str(start), "--end-us", str(end)]) == 0
    ts = [e["ts"] for e in json.loads(out.read_text()) if "ts" in e]
    assert ts and start <= min(ts) and max(ts) <= end
    assert main(args[:-1] + [str(tmp_path / "w2.json"), "--start-us", "5", "--end-us", "1"]) == 2


def test_errors_exit_2_and_name_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["timeline", "report", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2, 3]")
    assert main(["timeline", "summary", str(bad), "--json"]) == 2
    assert "bad.json: byte 1:" in capsys.readouterr().err


RECORDINGS = sorted(p.name for p in (data_dir() / "timelines").iterdir() if p.is_dir())


def raised(read, path: Path) -> tuple[object, list[str]]:
    """What ``read(path)`` returns, and the warnings it raises."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TimelineWarning)
        result = read(path)
    return result, [str(w.message) for w in caught]


def summaries(path: Path) -> tuple[tuple[str, list[str]], tuple[str, list[str]]]:
    """(JSON text, warnings) of ``timeline_summary(read_timeline(path))`` and of
    ``workshop timeline summary``'s path: one count (``readers.timeline.summary.count_summary``)
    fed from a Timeline's DataFrames and from the file's columns."""
    out = []
    for summarize in (lambda p: timeline_summary(read_timeline(p)), summarize_file):
        summary, caught = raised(summarize, path)
        out.append((json.dumps(summary), caught))
    return out[0], out[1]


@pytest.mark.parametrize("name", RECORDINGS)
def test_summary_of_every_recording(name: str) -> None:
    """Plain JSON, with the warnings that reading the timeline raises."""
    assert len(RECORDINGS) >= 9
    path = data_path("timelines", name)
    summary, caught = raised(summarize_file, path)
    assert json.loads(json.dumps(summary))["events"] > 0
    assert caught == raised(read_timeline, path)[1] == summary["warnings"]


def record_starts(data: bytes) -> list[int]:
    return [m.start() + 1 for m in re.finditer(rb"[,\n]\{", data)]


def test_summary_of_damaged_files(tmp_path: Path) -> None:
    """Derived from a real recording: cut (truncated, unclosed spans), a window between two
    record boundaries (orphan E's), 40 overwritten bytes (a skipped range), gzip."""
    data = timeline_file("tl-torch-gloo-np2").read_bytes()
    starts = record_starts(data)
    lo, hi = starts[len(starts) // 2 + 7], starts[3 * len(starts) // 4 + 5]
    damaged = bytearray(data)
    damaged[len(data) // 2 : len(data) // 2 + 40] = b"#" * 40
    variants = {
        "cut.json": data[: len(data) // 3],
        "window.json": b"[\n" + data[lo : hi - 1].rstrip(b",\n") + b"]",
        "damaged.json": bytes(damaged),
        "timeline.json.gz": gzip.compress(data),
    }
    seen = defaultdict(int)
    for name, content in variants.items():
        path = tmp_path / name
        path.write_bytes(content)
        slow, fast = summaries(path)
        assert fast == slow, name
        for key in ("truncated", "unclosed", "orphan_ends", "skipped_bytes"):
            seen[key] += bool(json.loads(fast[0])[key])
    assert all(seen[k] for k in ("truncated", "unclosed", "orphan_ends", "skipped_bytes"))


def test_summary_breaks_ties_like_pandas(tmp_path: Path) -> None:
    """Constructed: two ops with one span each (a tie for the most frequent op, no ALLREDUCE:
    the backend comes from the tie rule), two activities with equal totals (ordered by name),
    and a B without a name (missing in the DataFrames, left out of every count)."""
    records = [
        '{"ph": "B", "name": "NEGOTIATE_BROADCAST", "ts": 1, "pid": 1}',
        '{"ph": "X", "name": "0", "ts": 2, "pid": 1, "dur": 0}',
        '{"ph": "E", "ts": 3, "pid": 1}',
        '{"ph": "B", "name": "BROADCAST", "ts": 4, "pid": 1}',
        '{"ph": "B", "name": "MPI_BCAST", "ts": 5, "pid": 1}',
        '{"ph": "E", "ts": 15, "pid": 1}',
        '{"ph": "E", "ts": 16, "pid": 1}',
        '{"ph": "B", "name": "ALLGATHER", "ts": 20, "pid": 2}',
        '{"ph": "B", "name": "GLOO_ALLGATHER", "ts": 21, "pid": 2}',
        '{"ph": "E", "ts": 31, "pid": 2}',
        '{"ph": "E", "ts": 32, "pid": 2}',
        '{"ph": "B", "ts": 40, "pid": 3}',
        '{"ph": "E", "ts": 41, "pid": 3}',
    ]
    path = tmp_path / "ties.json"
    path.write_text("[\n" + ",\n".join(records) + "]")
    slow, fast = summaries(path)
    assert fast == slow
    summary = json.loads(fast[0])
    assert summary["ops"] == {"BROADCAST": 1, "ALLGATHER": 1}
    assert list(summary["activities_us"]) == ["GLOO_ALLGATHER", "MPI_BCAST"]  # 10 us each
    assert summary["backend"] == "Gloo"  # the last of the most frequent ops


def test_summary_command_does_not_import_pandas() -> None:
    """The start-up that ``workshop timeline summary`` saves: pandas is never imported."""
    code = (
        "import sys; from workshop.cli import main; "
        f"main(['timeline', 'summary', '--json', {str(timeline_file())!r}]); "
        "print(sorted(m for m in ('pandas', 'workshop.analysis') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"
