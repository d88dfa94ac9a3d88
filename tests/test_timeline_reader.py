"""The timeline reader against real recordings (data/timelines, made with `workshop run
--timeline`), checked record by record against an independent json.load-based reference.

Edge cases the recordings do not contain are derived from a real recording by a stated
transformation (gzip, the {"traceEvents": ...} wrapper, the old never-closed layout, a cut at a
record boundary, a renamed tensor) or, where marked "constructed", are small literal strings."""

from __future__ import annotations

import gzip
import json
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from workshop.paths import data_path
from workshop.readers.timeline import (
    Timeline,
    TimelineFormatError,
    TimelineWarning,
    parse_timeline,
    read_timeline,
    write_timeline,
)

pytestmark = pytest.mark.filterwarnings("ignore::workshop.readers.timeline.TimelineWarning")

SAMPLES = [
    "tl-torch-gloo-np2",
    "tl-torch-gloo-np2-cycles",
    "tl-torch-mpi-np2",
    "tl-tf-gloo-np2",
    "tl-tf-mpi-np2-cycles",
    "tl-torch-gloo-np2-fusion0",
    "tl-torch-gloo-np2-cycle5ms",
    "tl-torch-gloo-np2-nocache",
]
KILLED = "tl-torch-gloo-np2-killed"


def sample(name: str) -> Path:
    return data_path("timelines", name, "timeline.json")


def raw(name: str) -> bytes:
    return sample(name).read_bytes()


def quiet_parse(data: bytes, source: str = "<test>") -> Timeline:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TimelineWarning)
        return parse_timeline(data, source=source)


def reference(events: list[dict]) -> dict:
    """Spans, ticks and cycles by a plain per-pid stack over json.load's list."""
    names = {}
    stacks: dict[int, list] = defaultdict(list)
    negotiations: dict[int, int] = defaultdict(lambda: -1)
    spans, ticks, cycles, orphans = [], [], [], 0
    for seq, e in enumerate(x for x in events if x["ph"] != "M"):
        ph = e["ph"]
        if ph == "B":
            if e["name"].startswith("NEGOTIATE_"):
                negotiations[e["pid"]] += 1
            stacks[e["pid"]].append((e["name"], e["ts"], len(stacks[e["pid"]]), seq))
        elif ph == "E":
            if not stacks[e["pid"]]:
                orphans += 1
                continue
            name, ts, depth, bseq = stacks[e["pid"]].pop()
            args = e.get("args", {})
            top = depth == 0 and not name.startswith("NEGOTIATE_")
            spans.append(
                (
                    bseq,
                    e["pid"],
                    name,
                    ts,
                    e["ts"],
                    depth,
                    args.get("dtype") if top else None,
                    args.get("shape") if top else None,
                )
            )
        elif ph == "X":
            ticks.append((seq, e["pid"], negotiations[e["pid"]], int(e["name"]), e["ts"]))
        elif ph == "i":
            cycles.append(e["ts"])
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name" and "name" in e["args"]:
            names[e["pid"]] = e["args"]["name"]
    unclosed = sum(len(s) for s in stacks.values())
    return {
        "spans": sorted(spans),
        "ticks": ticks,
        "cycles": cycles,
        "names": names,
        "orphans": orphans,
        "unclosed": unclosed,
        "records": len(events),
    }


def spans_tuples(tl: Timeline) -> list[tuple]:
    sp = tl.spans[tl.spans["closed"]]
    return sorted(
        zip(
            sp["seq"].tolist(),
            sp["pid"].tolist(),
            sp["name"].astype(str).tolist(),
            sp["start_us"].tolist(),
            sp["end_us"].tolist(),
            sp["depth"].tolist(),
            [None if not isinstance(x, str) else x for x in sp["dtype"].astype(object)],
            [None if not isinstance(x, str) else x for x in sp["shape"].astype(object)],
            strict=True,
        )
    )


@pytest.fixture(scope="module", params=SAMPLES)
def recording(request: pytest.FixtureRequest) -> tuple[str, Timeline, dict]:
    name = request.param
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TimelineWarning)
        tl = read_timeline(sample(name))
    # At shutdown Horovod's writer thread stops before its queue is drained, so even a
    # finished run can end with a few open spans; nothing else may be reported.
    for w in caught:
        assert "have no 'E'" in str(w.message), w.message
    assert tl.metadata["unclosed"] <= 4
    return name, tl, reference(json.loads(raw(name)))


def test_recording_matches_json_reference(recording: tuple[str, Timeline, dict]) -> None:
    name, tl, ref = recording
    assert tl.metadata["events"] == ref["records"]
    assert spans_tuples(tl) == ref["spans"]
    assert tl.metadata["orphan_ends"] == ref["orphans"] == 0
    assert tl.metadata["unclosed"] == ref["unclosed"]
    got_ticks = list(
        zip(
            tl.ticks["seq"],
            tl.ticks["pid"],
            tl.ticks["negotiation"],
            tl.ticks["rank"],
            tl.ticks["ts_us"],
            strict=True,
        )
    )
    assert got_ticks == ref["ticks"]
    assert tl.cycles["start_us"].tolist() == sorted(ref["cycles"])
    assert (
        dict(zip(tl.tensors["pid"], tl.tensors["tensor"].astype(str), strict=True))
        == (ref["names"])
    )
    assert not tl.truncated and tl.metadata["closed_array"]  # Horovod 0.28 closes the array


def test_recording_columns_and_units(recording: tuple[str, Timeline, dict]) -> None:
    _, tl, _ = recording
    sp = tl.spans
    assert list(sp.columns) == [
        "tensor",
        "pid",
        "op",
        "kind",
        "name",
        "start_us",
        "end_us",
        "dur_us",
        "depth",
        "closed",
        "dtype",
        "shape",
        "seq",
        "end_seq",
    ]
    assert (sp["dur_us"] == sp["end_us"] - sp["start_us"]).all()
    assert (sp["dur_us"] >= 0).all()
    assert set(sp["kind"].astype(str)) <= {"negotiate", "op", "activity"}
    neg = sp[sp["kind"] == "negotiate"]
    assert neg["name"].astype(str).str.startswith("NEGOTIATE_").all()
    assert (neg["op"].astype(str) == neg["name"].astype(str).str[len("NEGOTIATE_") :]).all()
    ops = sp[sp["kind"] == "op"]
    assert (ops["op"].astype(str) == ops["name"].astype(str)).all()
    # an activity lies inside an op of the same tensor
    act = sp[sp["kind"] == "activity"]
    assert (act["depth"] == 1).all() and act["op"].notna().all()
    # ticks: lateness is measured from the first tick of the same negotiation
    tk = tl.ticks
    first = tk.groupby(["pid", "negotiation"])["ts_us"].transform("min")
    assert (tk["lateness_us"] == tk["ts_us"] - first).all()
    assert set(tk["rank"]) == {0, 1}


def test_run_directory_and_gzip_and_trace_events_forms(tmp_path: Path) -> None:
    name = "tl-torch-gloo-np2"
    base = read_timeline(sample(name))
    via_dir = read_timeline(data_path("timelines", name))
    assert spans_tuples(via_dir) == spans_tuples(base)
    # derived from the recording: gzip-compressed
    gz = tmp_path / "timeline.json.gz"
    gz.write_bytes(gzip.compress(raw(name)))
    assert spans_tuples(read_timeline(gz)) == spans_tuples(base)
    # derived: the {"traceEvents": [...]} object form with another key after it
    wrapped = b'{"traceEvents": ' + raw(name) + b', "displayTimeUnit": "ms"}'
    tl = parse_timeline(wrapped)
    assert tl.metadata["form"] == "traceEvents"
    assert spans_tuples(tl) == spans_tuples(base)
    assert tl.metadata["events"] == base.metadata["events"]


def old_generation(data: bytes) -> bytes:
    """Horovod <= 0.20.0 layout: every record ends in '},' + newline and the array is never
    closed (derived from a 0.28 recording by moving separators only)."""
    body = data.rstrip()
    assert body.endswith(b"]")
    body = body[:-1].replace(b"},{", b"},\n{")
    return body + b",\n"


def test_old_generation_unclosed_array_reads_the_same() -> None:
    name = "tl-torch-gloo-np2-cycles"
    base = read_timeline(sample(name))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TimelineWarning)
        tl = parse_timeline(old_generation(raw(name)))
    assert not any("cut" in str(w.message) for w in caught)  # the old layout is no cut
    assert not tl.metadata["closed_array"] and not tl.truncated
    assert spans_tuples(tl) == spans_tuples(base)
    assert tl.metadata["events"] == base.metadata["events"]
    assert len(tl.cycles) == len(base.cycles) > 0


def record_starts(data: bytes) -> list[int]:
    return [i + 1 for i in range(len(data) - 1) if data[i : i + 2] in (b",{", b"\n{")]


def test_orphan_ends_and_unclosed_spans_from_a_cut_at_record_boundaries() -> None:
    """Derived like hvd.start_timeline/stop_timeline in mid-run: keep only the records between
    two record boundaries of a real recording."""
    name = "tl-torch-gloo-np2"
    data = raw(name)
    starts = record_starts(data)
    lo, hi = starts[len(starts) // 2 + 7], starts[3 * len(starts) // 4 + 5]
    piece = b"[\n" + data[lo : hi - 1].rstrip(b",\n") + b"]"
    ref = reference(json.loads(piece))
    assert ref["orphans"] > 0 and ref["unclosed"] > 0  # the cut really produced both
    with pytest.warns(TimelineWarning) as caught:
        tl = parse_timeline(piece)
    text = " ".join(str(w.message) for w in caught)
    assert "close nothing" in text and "have no 'E'" in text
    assert tl.metadata["orphan_ends"] == ref["orphans"]
    assert tl.metadata["unclosed"] == ref["unclosed"]
    assert spans_tuples(tl) == ref["spans"]
    open_spans = tl.spans[~tl.spans["closed"]]
    assert (open_spans["end_us"] == tl.metadata["last_ts_us"]).all()
    assert (open_spans["end_seq"] == -1).all()
    assert not tl.truncated


def test_unescaped_tensor_names_are_read_exactly() -> None:
    """Derived: Horovod writes tensor names without JSON escaping; rename one tensor of a real
    recording to a name with a quote, a backslash and a fake record inside."""
    name = "tl-torch-gloo-np2"
    weird = 'allreduce.0.wé"ird\\{"ph": "B", "name": "X"}],'
    data = raw(name).replace(b'"allreduce.0.weight"', b'"' + weird.encode() + b'"')
    with pytest.raises(json.JSONDecodeError):
        json.loads(data)  # the renamed file is what Horovod would write: not valid JSON
    base = read_timeline(sample(name))
    tl = quiet_parse(data)
    assert not tl.metadata["skipped"] and not tl.truncated
    assert weird in set(tl.tensors["tensor"].astype(str))
    assert spans_tuples(tl) == spans_tuples(base)
    renamed = tl.spans[tl.spans["tensor"].astype(str) == weird]
    assert len(renamed) == (base.spans["tensor"].astype(str) == "allreduce.0.weight").sum() > 0


def test_truncated_recording_keeps_prefix_and_warns_with_offset() -> None:
    name = "tl-torch-gloo-np2"
    data = raw(name)
    base = read_timeline(sample(name))
    cut = len(data) * 2 // 3
    with pytest.warns(TimelineWarning, match=r"cut at byte \d+"):
        tl = parse_timeline(data[:cut])
    assert tl.truncated and 0 < tl.metadata["truncated_at"] <= cut
    assert set(spans_tuples(tl)) <= set(spans_tuples(base))
    assert len(tl.spans) < len(base.spans)
    # ending right after a record, before Horovod's ']' or ',', is a cut too
    end = data.rindex(b"}") + 1
    tl = quiet_parse(data[:end])
    assert tl.truncated and tl.metadata["events"] == base.metadata["events"]


def test_killed_run_timeline_reads_with_warnings() -> None:
    """The recording of a run killed with SIGKILL, kept exactly as left on disk."""
    path = sample(KILLED)
    run = json.loads((path.parent / "run.json").read_text())
    assert run["status"] != "ok"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TimelineWarning)
        tl = read_timeline(path)
    assert len(tl.spans) > 0
    # a killed writer leaves a cut record, or at least spans that never closed
    assert tl.truncated or tl.metadata["unclosed"] > 0
    assert caught, "a killed run's timeline must not read silently"
    data = path.read_bytes()
    if tl.truncated:
        ref_data = data[: tl.metadata["truncated_at"]].rstrip(b",\n") + b"]"
        ref = reference(json.loads(ref_data))
        assert spans_tuples(tl) == ref["spans"]


@pytest.mark.parametrize(
    "data", [b"", b"   \n", b"[", b"[\n", b"[]", b"[\n]\n"], ids=lambda d: repr(d)
)
def test_empty_inputs_give_empty_timeline_and_warning(data: bytes) -> None:
    """Constructed: an empty file, a file with only the opening bracket."""
    with pytest.warns(TimelineWarning, match="no events"):
        tl = parse_timeline(data)
    assert tl.spans.empty and tl.ticks.empty and tl.cycles.empty and tl.tensors.empty
    assert tl.span_us == 0


@pytest.mark.parametrize(
    ("data", "offset"),
    [
        (b'{"a": 1}', 0),
        (b"hello world", 0),
        (b"  \x89PNG\r\n\x1a\n", 2),
        (b"[1, 2, 3]", 1),
        (b'[{"a": 1}, {"b": 2}]', 1),
        (b'[\n  "x", "y"]', 4),
    ],
)
def test_not_a_timeline_raises_with_offset(data: bytes, offset: int) -> None:
    """Constructed: JSON and non-JSON data that are not trace events."""
    with pytest.raises(TimelineFormatError) as info:
        parse_timeline(data, source="thing.json")
    assert info.value.offset == offset
    assert str(info.value).startswith(f"thing.json: byte {offset}:")


def test_read_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no timeline file"):
        read_timeline(tmp_path / "missing.json")
    with pytest.raises(FileNotFoundError, match="has no timeline.json"):
        read_timeline(tmp_path)
    bad = tmp_path / "notes.json"
    bad.write_text('{"notes": "not a trace"}')
    with pytest.raises(TimelineFormatError, match=str(bad)):
        read_timeline(bad)


def test_damaged_range_is_skipped_and_reported() -> None:
    """Derived: overwrite 40 bytes in the middle of a real recording."""
    name = "tl-torch-gloo-np2"
    data = bytearray(raw(name))
    mid = len(data) // 2
    data[mid : mid + 40] = b"#" * 40
    base = read_timeline(sample(name))
    with pytest.warns(TimelineWarning, match=r"skipped \d+ bytes at byte \d+"):
        tl = parse_timeline(bytes(data))
    assert tl.metadata["skipped"]
    off, length = tl.metadata["skipped"][0]
    assert off <= mid + 40 and off + length >= mid
    assert base.metadata["events"] - 3 <= tl.metadata["events"] < base.metadata["events"]
    assert not tl.truncated


def test_repair_writes_valid_balanced_json(tmp_path: Path) -> None:
    name = "tl-torch-gloo-np2"
    data = raw(name)
    tl = quiet_parse(data[: len(data) // 2])  # a cut file with open spans
    assert tl.truncated and tl.metadata["unclosed"] > 0
    out = tmp_path / "repaired.json"
    counts = write_timeline(tl, out)
    events = json.loads(out.read_text())  # valid, closed JSON
    assert counts["events"] == len(events)
    balance: dict[int, int] = defaultdict(int)
    for e in events:
        assert "pid" in e or e["ph"] == "i"
        if e["ph"] in "BE":
            balance[e["pid"]] += 1 if e["ph"] == "B" else -1
            assert balance[e["pid"]] >= 0, "an E before its B"
    assert set(balance.values()) == {0}
    again = read_timeline(out)
    assert again.metadata["unclosed"] == 0 and again.metadata["orphan_ends"] == 0
    assert len(again.spans) == len(tl.spans)
    assert again.spans["start_us"].tolist() == tl.spans["start_us"].tolist()
    with pytest.raises(FileExistsError):
        write_timeline(tl, out)


def test_repair_window_clips_spans(tmp_path: Path) -> None:
    tl = read_timeline(sample("tl-torch-gloo-np2-cycles"))
    ops = tl.spans[tl.spans["kind"] == "op"]
    lo = int(ops["start_us"].iloc[len(ops) // 2]) + 1  # inside an op: its B gets clipped
    hi = lo + 50_000
    out = tmp_path / "window.json"
    write_timeline(tl, out, start_us=lo, end_us=hi)
    events = json.loads(out.read_text())
    ts = [e["ts"] for e in events if "ts" in e]
    assert min(ts) >= lo and max(ts) <= hi
    w = read_timeline(out)
    assert w.metadata["unclosed"] == 0 and w.metadata["orphan_ends"] == 0
    inside = tl.spans[(tl.spans["end_us"] >= lo) & (tl.spans["start_us"] <= hi)]
    assert len(w.spans) == len(inside)
    assert np.array_equal(
        np.sort(w.spans["dur_us"].to_numpy()),
        np.sort((inside["end_us"].clip(upper=hi) - inside["start_us"].clip(lower=lo)).to_numpy()),
    )
    with pytest.raises(ValueError, match="empty window"):
        write_timeline(tl, tmp_path / "x.json", start_us=10, end_us=5)


def test_multi_line_and_single_line_layouts() -> None:
    """Derived: the recording re-serialised one key per line (json.dumps indent=2, as other
    tools write), and the recording with every newline removed (one long line)."""
    name = "tl-torch-gloo-np2"
    base = read_timeline(sample(name))
    pretty = json.dumps(json.loads(raw(name)), indent=2).encode()
    tl = quiet_parse(pretty)
    assert spans_tuples(tl) == spans_tuples(base)
    assert tl.metadata["events"] == base.metadata["events"] and not tl.metadata["skipped"]
    one_line = raw(name).replace(b"\n", b"")
    tl = quiet_parse(one_line)
    assert spans_tuples(tl) == spans_tuples(base)
    assert tl.ticks["ts_us"].tolist() == base.ticks["ts_us"].tolist()


def test_non_ascii_names_in_the_tolerant_path() -> None:
    """Derived: a tensor renamed to a non-ASCII name, re-serialised with indent and raw UTF-8
    (json.dumps ensure_ascii=False), which the record-by-record parser reads."""
    data = raw("tl-torch-gloo-np2").replace(b"allreduce.0.weight", "allreduce.0.wé".encode())
    pretty = json.dumps(json.loads(data), indent=1, ensure_ascii=False).encode()
    tl = quiet_parse(pretty)
    assert "allreduce.0.wé" in set(tl.tensors["tensor"].astype(str))
    assert not tl.metadata["skipped"]


@pytest.mark.parametrize("size,distinct", [(1, 1), (1000, 5), (50, 50), (131072, 3000)])
def test_string_codes_factorize_like_pandas(size: int, distinct: int) -> None:
    """The scanner's factorize (numpy only) against pandas.factorize on random 64-bit hashes;
    3000 distinct values in 4096 slots share slots, which takes the sorting branch."""
    import pandas as pd

    from workshop.readers.timeline.vocab import factorize

    rng = np.random.default_rng(size)
    values = rng.integers(0, 2**63, distinct, dtype=np.uint64)[rng.integers(0, distinct, size)]
    codes, uniques = factorize(values)
    want_codes, want_uniques = pd.factorize(values)
    assert codes.tolist() == want_codes.tolist()
    assert uniques.tolist() == want_uniques.tolist()
