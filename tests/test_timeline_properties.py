"""Property-based tests: real recordings cut or damaged at random points. The reader must only
ever return a (possibly partial) Timeline, with a warning when something was lost, or raise
TimelineFormatError; never any other exception. What it does return must be true: every closed
span of a cut file is a span of the whole file."""

from __future__ import annotations

import gzip
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workshop.paths import data_path
from workshop.readers.timeline import (
    Timeline,
    TimelineFormatError,
    TimelineWarning,
    parse_timeline,
)

SMALL = "tl-torch-gloo-np2"  # ~300 KB: keeps each example fast
CYCLES = "tl-torch-gloo-np2-cycles"

_cache: dict[str, tuple[bytes, Timeline, set]] = {}


def recording(name: str) -> tuple[bytes, Timeline, set]:
    if name not in _cache:
        data = data_path("timelines", name, "timeline.json").read_bytes()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TimelineWarning)
            full = parse_timeline(data)
        _cache[name] = (data, full, closed_spans(full))
    return _cache[name]


def closed_spans(tl: Timeline) -> set:
    sp = tl.spans[tl.spans["closed"]]
    return set(
        zip(
            sp["pid"],
            sp["name"].astype(str),
            sp["start_us"],
            sp["end_us"],
            sp["depth"],
            strict=True,
        )
    )


def read_or_format_error(data: bytes) -> tuple[Timeline | None, list[str]]:
    """Parse; any exception other than TimelineFormatError fails the test."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TimelineWarning)
        try:
            tl = parse_timeline(data, source="cut.json")
        except TimelineFormatError as exc:
            assert exc.path == "cut.json" and 0 <= exc.offset <= len(data)
            return None, []
    return tl, [str(w.message) for w in caught]


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.data())
@pytest.mark.parametrize("name", [SMALL, CYCLES])
def test_cut_anywhere_keeps_a_true_prefix(name: str, data: st.DataObject) -> None:
    raw, full, spans = recording(name)
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)), label="cut")
    tl, messages = read_or_format_error(raw[:cut])
    assert tl is not None, "a prefix of a timeline is still a timeline"
    assert closed_spans(tl) <= spans
    assert len(tl.spans) <= len(full.spans)
    assert tl.metadata["events"] <= full.metadata["events"]
    if cut < len(raw.rstrip()):
        # something was lost: a cut record, spans left open, or nothing read at all
        assert messages, "a cut file must not read silently"
    if tl.truncated:
        assert 0 <= tl.metadata["truncated_at"] <= cut
        assert any(f"cut at byte {tl.metadata['truncated_at']}" in m for m in messages)


@FAST
@given(st.data())
def test_cut_gzip_stream_keeps_a_true_prefix(data: st.DataObject) -> None:
    raw, _, spans = recording(SMALL)
    packed = gzip.compress(raw)
    cut = data.draw(st.integers(min_value=2, max_value=len(packed)), label="cut")
    tl, messages = read_or_format_error(packed[:cut])
    assert tl is not None
    assert closed_spans(tl) <= spans
    if cut < len(packed):
        assert messages


@FAST
@given(st.data())
def test_damaged_bytes_give_timeline_or_format_error(data: st.DataObject) -> None:
    raw, full, _ = recording(SMALL)
    damaged = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 6), label="n")):
        pos = data.draw(st.integers(0, len(damaged) - 1), label="pos")
        action = data.draw(st.sampled_from(["replace", "insert", "delete"]), label="action")
        chunk = data.draw(st.binary(min_size=1, max_size=12), label="bytes")
        if action == "replace":
            damaged[pos : pos + len(chunk)] = chunk
        elif action == "insert":
            damaged[pos:pos] = chunk
        else:
            del damaged[pos : pos + len(chunk)]
    tl, _ = read_or_format_error(bytes(damaged))
    if tl is not None:
        assert tl.metadata["events"] <= full.metadata["events"] + 12
        assert (tl.spans["dur_us"] >= 0).all()
        assert (tl.spans["end_us"] >= tl.spans["start_us"]).all()


@FAST
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(blob: bytes) -> None:
    read_or_format_error(blob)
    read_or_format_error(b"[" + blob)
    read_or_format_error(b'[\n{"ph": "B", "name": "ALLREDUCE", "ts": 1, "pid": 1},' + blob)


def test_an_end_stamped_before_its_begin_is_named_not_a_negative_duration() -> None:
    # The example hypothesis found on the quiet recording: one digit deleted from an 'E'
    # timestamp (1611872 -> 161872) put that end before its begin.
    raw, full, _ = recording(SMALL)
    at = raw.index(b'{"ph": "E", "ts": ') + len(b'{"ph": "E", "ts": ')
    damaged = raw[:at] + raw[at + 1 :]
    tl, messages = read_or_format_error(damaged)
    assert tl is not None and (tl.spans["dur_us"] >= 0).all()
    assert tl.metadata["backwards"] == 1 and full.metadata["backwards"] == 0
    assert any("1 spans end before they begin" in m for m in messages)
