"""The streaming summary (``workshop timeline summary``): batch by batch, the same numbers as
the whole file read at once, and a peak memory that does not grow with the file."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

from workshop.analysis.timeline import timeline_summary
from workshop.paths import data_dir, data_path
from workshop.readers.timeline import TimelineWarning, read_timeline, stitch
from workshop.readers.timeline.read import event_batches
from workshop.readers.timeline.source import open_file
from workshop.readers.timeline.summary import summarize_file

RECORDINGS = sorted(p.name for p in (data_dir() / "timelines").iterdir() if p.is_dir())
SMALL_CHUNK = 1 << 14  # scan chunks of 16 KiB: a 300 kB recording is read in ~20 batches
TS = re.compile(rb'("ts": )(\d+)')
META_RECORD = re.compile(rb'\{"name": "process_(?:name|sort_index)", "ph": "M"[^\n]*\},\n')
REPO = Path(__file__).resolve().parents[1]


def raised(read, path: Path) -> tuple[str, list[str]]:
    """``read(path)`` as JSON text, and the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TimelineWarning)
        result = read(path)
    return json.dumps(result), [str(w.message) for w in caught]


def damaged_variants(tmp_path: Path) -> list[Path]:
    """A real recording cut in the middle of a record inside an op, a window between two record
    boundaries (orphan E's at its start, unclosed spans at its end), 40 overwritten bytes; and
    the layouts of other writers: Horovod before 0.20.1 (one record a line, ending in '},', the
    array never closed), one key a line (json.dumps indent=2: the tolerant parser's), one line;
    gzip, whole and cut (decompressed a chunk at a time into a temporary file)."""
    data = data_path("timelines", "tl-torch-gloo-np2", "timeline.json").read_bytes()
    starts = [m.start() + 1 for m in re.finditer(rb"[,\n]\{", data)]
    lo, hi = starts[len(starts) // 2 + 7], starts[3 * len(starts) // 4 + 5]
    damaged = bytearray(data)
    damaged[len(data) // 2 : len(data) // 2 + 40] = b"#" * 40
    inside_an_op = data.index(b'"name": "GLOO_ALLREDUCE"', len(data) // 3) + 40
    variants = {
        "cut.json": data[:inside_an_op],
        "window.json": b"[\n" + data[lo : hi - 1].rstrip(b",\n") + b"]",
        "damaged.json": bytes(damaged),
        "old-layout.json": data.rstrip()[:-1].replace(b"},{", b"},\n{") + b",\n",
        "pretty.json": json.dumps(json.loads(data), indent=2).encode(),
        "one-line.json": data.replace(b"\n", b""),
        "timeline.json.gz": gzip.compress(data),
        "cut.json.gz": gzip.compress(data)[: len(gzip.compress(data)) * 2 // 3],
    }
    for name, content in variants.items():
        (tmp_path / name).write_bytes(content)
    return [tmp_path / name for name in variants]


VARIANTS = ["cut.json", "window.json", "damaged.json", "old-layout.json", "pretty.json"]
VARIANTS += ["timeline.json.gz", "cut.json.gz"]


@pytest.mark.parametrize("name", [*RECORDINGS, *VARIANTS, "one-line.json"])
def test_batches_add_up_to_the_whole_file(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spans open across batch ends (an op and the activity inside it), orphans and unclosed
    spans, and the warnings: the same as one Timeline of the whole file."""
    paths = {p.name: p for p in damaged_variants(tmp_path)}
    path = paths.get(name) or data_path("timelines", name, "timeline.json")
    monkeypatch.setattr(stitch, "CHUNK", SMALL_CHUNK)
    src, problems, cut_at = open_file(path)
    _, batches = event_batches(src, str(path), problems, cut_at, False, batch_bytes=SMALL_CHUNK)
    assert sum(1 for _ in batches) >= 4  # the near miss, one batch, would not test the carry
    src.close()
    whole = raised(lambda p: timeline_summary(read_timeline(p)), path)
    streamed = raised(lambda p: summarize_file(p, batch_bytes=SMALL_CHUNK), path)
    assert streamed == whole
    summary = json.loads(streamed[0])
    if name in ("cut.json", "window.json"):
        assert summary["unclosed"] > 0
    if name == "cut.json.gz":
        assert summary["truncated"] and "gzip data cut" in summary["warnings"][0]
    if name == "window.json":
        assert summary["orphan_ends"] > 0


def replicated(source: Path, target: Path, size: int) -> int:
    """Write ``target``, at least ``size`` bytes: a real recording, then copies of its event
    records with their timestamps shifted past the copy before (Horovod's layout)."""
    body = source.read_bytes().rstrip()[:-1]  # without the closing ']'
    head, events = body[: body.index(b"\n") + 1], body[body.index(b"\n") + 1 :]
    parts = TS.split(META_RECORD.sub(b"", events))
    stamps = [int(x) for x in parts[2::3]]
    period = max(stamps) - min(stamps) + 1000
    written = 0
    with open(target, "wb") as out:
        written += out.write(head + events)
        copy = 0
        while written < size:
            copy += 1
            chunk = [b","]
            for text, ts in zip(parts[0::3], stamps, strict=False):
                chunk += [text, b'"ts": ', b"%d" % (ts + copy * period)]
            chunk.append(parts[-1])
            written += out.write(b"".join(chunk))
        written += out.write(b"]")
    return written


def peak_rss_mb(path: Path) -> float:
    """Peak RSS (MB) of a process that runs ``workshop timeline summary --json`` on ``path``
    (``wait4``: that process's own)."""
    cmd = [sys.executable, "-m", "workshop.cli", "timeline", "summary", "--json", str(path)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        assert proc.returncode == 0, err.read().decode()[-2000:]
        assert json.loads(out.read())["cycles"] > 0
    return usage.ru_maxrss / 1024


def test_summary_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    """A file four times larger (30 -> 120 MiB, built from a real recording) costs the streaming
    summary no more memory. Reading the whole file at once, as before, held its event columns
    (33 bytes a record, 0.55x this file) and more: +150 MB here (peak RSS 1.2-1.3x the file,
    data/benchmarks/timeline-reader), far above the bound."""
    source = data_path("timelines", "tl-torch-gloo-np2-cycles", "timeline.json")
    small = replicated(source, tmp_path / "small.json", 30 << 20)
    large = replicated(source, tmp_path / "large.json", 120 << 20)
    grown_mb = (large - small) / 1e6
    rss_small = peak_rss_mb(tmp_path / "small.json")
    rss_large = peak_rss_mb(tmp_path / "large.json")
    assert rss_large - rss_small < 0.15 * grown_mb, (rss_small, rss_large)
