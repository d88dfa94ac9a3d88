"""The threaded scan of a file of many chunks gives the same Timeline as a single-threaded one,
category order included: the vocabulary codes follow the file, not the order in which the scan
workers finish (before, a 200 MB file read twice could list the op categories in different
orders)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from workshop.paths import data_path
from workshop.readers.timeline import Timeline, TimelineWarning, parse_timeline, stitch

COPIES = 48  # ~0.3 MB each: the data spans several scan chunks (stitch.CHUNK, 4 MiB)


def renamed_copies() -> bytes:
    """A real recording's event records repeated ``COPIES`` times (derived data: copy k renames
    GLOO_ALLREDUCE to GLOO_ALLREDUCE_k, so each copy brings a name first seen in it)."""
    raw = data_path("timelines", "tl-torch-gloo-np2", "timeline.json").read_bytes()
    body = raw.rstrip()[:-1]  # without the closing ']'
    first_event = body.index(b'{"ph": ')
    events = body[first_event:]
    copies = [
        re.sub(rb'"GLOO_ALLREDUCE"', b'"GLOO_ALLREDUCE_%d"' % k, events) for k in range(COPIES)
    ]
    return body[:first_event] + b",\n".join(copies) + b"]"


def read(data: bytes) -> Timeline:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TimelineWarning)
        return parse_timeline(data, source="copies")


def assert_same_frame(a: pd.DataFrame, b: pd.DataFrame, what: str) -> None:
    """Column by column, categories in order and codes (assert_frame_equal takes seconds)."""
    assert list(a.columns) == list(b.columns), what
    for col in a.columns:
        x, y = a[col], b[col]
        if isinstance(x.dtype, pd.CategoricalDtype):
            assert list(x.cat.categories) == list(y.cat.categories), (what, col)
            x, y = x.cat.codes, y.cat.codes
        assert x.dtype == y.dtype and np.array_equal(x.to_numpy(), y.to_numpy()), (what, col)


def test_threaded_scan_equals_one_thread_and_keeps_file_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = renamed_copies()
    assert len(data) > 2 * stitch.CHUNK  # several chunks, so workers run at once
    monkeypatch.setattr(stitch, "THREADS", 2)
    monkeypatch.setattr(stitch.os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # cores are free
    assert stitch.scan_workers() == 2
    threaded = [read(data) for _ in range(3)]
    monkeypatch.setattr(stitch, "THREADS", 1)
    single = read(data)
    names = list(single.spans["name"].cat.categories)
    # the renamed activity appears copy after copy, so its categories are in copy order
    renamed = [n for n in names if n.startswith("GLOO_ALLREDUCE_")]
    assert renamed == [f"GLOO_ALLREDUCE_{k}" for k in range(COPIES)]
    for tl in threaded:
        for frame in ("spans", "ticks", "cycles", "tensors"):
            assert_same_frame(getattr(tl, frame), getattr(single, frame), frame)
        assert tl.metadata == single.metadata


def test_one_scan_worker_while_the_cores_are_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stitch, "THREADS", 2)
    monkeypatch.setattr(stitch.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(stitch.os, "getloadavg", lambda: (1.9, 0.0, 0.0))
    assert stitch.scan_workers() == 2
    monkeypatch.setattr(stitch.os, "getloadavg", lambda: (2.0, 0.0, 0.0))
    assert stitch.scan_workers() == 1
