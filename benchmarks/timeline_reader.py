"""Benchmark: the timeline reader, and ``workshop timeline summary`` end to end, against
``json.load`` + ``pandas.DataFrame``.

The file (>= 200 MB by default) is built in a temporary folder (deleted afterwards) by
repeating the event records of a real recording (data/timelines/...) with shifted timestamps,
in Horovod's own layout, and read once beforehand so every run finds it in the page cache.
Each measurement is a process of its own (so its peak RSS, from ``wait4``, is its own):

* ``reader``: ``read_timeline(FILE)``, timed inside the process after its imports;
* ``summary``: the whole command ``workshop timeline summary --json FILE``, from process start
  to exit (interpreter start-up, imports, reading, analysis, JSON output);
* ``baseline``: ``pandas.DataFrame(json.load(f))`` (a DataFrame of raw events, no B/E pairing),
  timed both inside the process after its imports and as the whole process.

The three run interleaved, ``--repeat`` rounds in a rotating order; this machine is shared and
noisy, so the medians count, min and max show the spread, and the summary / baseline ratio is
also given per round (both measured within seconds of each other).

    flock /tmp/workshop-cpu.lock python benchmarks/timeline_reader.py [--size-mb 200] [--repeat 5]

Targets (issue 12): ``summary`` >= 150 MB/s end to end and >= 8x the whole-process baseline,
peak RSS <= 2x the file; the reader alone >= 250 MB/s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workshop.paths import data_path  # noqa: E402

META_RECORD = re.compile(rb'\{"name": "process_(?:name|sort_index)", "ph": "M"[^\n]*\},\n')
TS = re.compile(rb'("ts": )(\d+)')
MODES = ("reader", "summary", "baseline")
TARGET_SUMMARY_MB_S = 150
TARGET_SUMMARY_X_BASELINE = 8
TARGET_READER_MB_S = 250
TARGET_RSS_X_FILE = 2

INNER = r"""
import json, sys, time
mode, path = sys.argv[1], sys.argv[2]
if mode == "reader":
    import warnings
    from workshop.io.timeline import read_timeline
else:
    import pandas
t0 = time.perf_counter()
if mode == "reader":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl = read_timeline(path)
    what = f"{len(tl.spans)} spans, {len(tl.ticks)} ticks, {len(tl.cycles)} cycles"
    events = tl.metadata["events"]
else:
    with open(path) as fh:
        df = pandas.DataFrame(json.load(fh))
    what = f"{len(df)} event rows (no B/E pairing)"
    events = len(df)
print(json.dumps({"inner_s": time.perf_counter() - t0, "what": what, "events": events}))
"""


def build(source: Path, target: Path, size: int) -> int:
    """Write ``target`` >= ``size`` bytes: ``source`` then copies of its events, shifted."""
    raw = source.read_bytes()
    body = raw.rstrip()
    if not body.endswith(b"]"):
        raise SystemExit(f"{source}: expected a closed Horovod >= 0.20.1 timeline")
    body = body[:-1]
    events = META_RECORD.sub(b"", body[body.index(b"\n") + 1 :])
    parts = TS.split(events)
    stamps = [int(x) for x in parts[2::3]]
    period = max(stamps) - min(stamps) + 1000
    texts = parts[0::3]  # between timestamps
    written = 0
    copies = 0
    with open(target, "wb") as out:
        out.write(body)
        written += len(body)
        while written < size:
            copies += 1
            shift = copies * period
            chunk = bytearray(b",")
            for i, ts in enumerate(stamps):
                chunk += texts[i]
                chunk += b'"ts": '
                chunk += str(ts + shift).encode()
            chunk += texts[-1]
            out.write(chunk)
            written += len(chunk)
        out.write(b"]")
        written += 1
    return written


def command(mode: str, path: Path) -> list[str]:
    if mode == "summary":
        script = Path(sys.executable).with_name("workshop")
        prefix = [str(script)] if script.exists() else [sys.executable, "-m", "workshop.cli"]
        return [*prefix, "timeline", "summary", "--json", str(path)]
    return [sys.executable, "-c", INNER, mode, str(path)]


def run_child(mode: str, path: Path) -> dict:
    """Run one measurement process: wall time from start to exit, its own CPU time and peak
    RSS (``wait4``), and what it printed."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(command(mode, path), stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{mode} failed ({proc.returncode}):\n{err.read().decode()[-3000:]}")
        printed = json.loads(out.read())
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "maxrss_kb": usage.ru_maxrss,
        "inner_s": printed.get("inner_s"),
        "events": printed.get("events"),
        "what": printed.get("what", ""),
    }


def spread(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def fmt(values: list[float], unit: str = "s", digits: int = 2) -> str:
    lo, mid, hi = spread(values)
    return f"{mid:.{digits}f} {unit} ({lo:.{digits}f}-{hi:.{digits}f})"


def report(runs: dict[str, list[dict]], size: int) -> dict[str, float]:
    """Print the table and the targets; return the medians that the targets check."""
    mb = size / 1e6
    print(
        f"{'':18s} {'median wall (min-max)':>24s} {'MB/s at median (range)':>26s} "
        f"{'CPU s':>6s} {'peak RSS':>16s}"
    )
    for mode, rs in runs.items():
        walls = [r["wall_s"] for r in rs]
        rates = [mb / w for w in walls]
        rss = max(r["maxrss_kb"] for r in rs) * 1024
        print(
            f"{mode + ' (process)':18s} {fmt(walls):>24s} {fmt(rates, 'MB/s', 0):>26s} "
            f"{statistics.median(r['cpu_s'] for r in rs):6.2f} "
            f"{rss / 1e9:5.2f} GB = {rss / size:.2f}x"
        )
        if rs[0]["inner_s"] is not None:
            inner = [r["inner_s"] for r in rs]
            rates = [mb / w for w in inner]
            print(f"{mode + ' (inside)':18s} {fmt(inner):>24s} {fmt(rates, 'MB/s', 0):>26s}")
        print(f"{'':19s}-> {rs[0]['what'] or str(rs[0]['events']) + ' events'}")
    med = {m: statistics.median(r["wall_s"] for r in rs) for m, rs in runs.items()}
    reader_inner = statistics.median(r["inner_s"] for r in runs["reader"])
    out = {
        "summary_mb_s": mb / med["summary"],
        "reader_mb_s": mb / reader_inner,
        "summary_rss_x": max(r["maxrss_kb"] for r in runs["summary"]) * 1024 / size,
    }
    if "baseline" in runs:
        base_inner = statistics.median(r["inner_s"] for r in runs["baseline"])
        paired = [
            b["wall_s"] / s["wall_s"]
            for b, s in zip(runs["baseline"], runs["summary"], strict=True)
        ]
        out["x_baseline"] = med["baseline"] / med["summary"]
        print(
            f"summary vs baseline (both whole processes): {out['x_baseline']:.1f}x the "
            f"medians; per round {fmt(paired, 'x', 1)}; against the baseline's time inside "
            f"its process (after imports): {base_inner / med['summary']:.1f}x"
        )
        print(f"reader (inside) vs baseline (inside): {base_inner / reader_inner:.1f}x")
        lo, _, hi = spread(paired)
        if lo < TARGET_SUMMARY_X_BASELINE <= hi:
            print(
                f"  note: the per-round ratios straddle the {TARGET_SUMMARY_X_BASELINE}x target: "
                "the spread is larger than the margin"
            )
    return out


def check_targets(m: dict[str, float]) -> None:
    def yes(ok: bool) -> str:
        return "yes" if ok else "NO"

    line = (
        f"targets: summary >= {TARGET_SUMMARY_MB_S} MB/s: "
        f"{yes(m['summary_mb_s'] >= TARGET_SUMMARY_MB_S)} ({m['summary_mb_s']:.0f}); "
        f"reader >= {TARGET_READER_MB_S} MB/s: {yes(m['reader_mb_s'] >= TARGET_READER_MB_S)} "
        f"({m['reader_mb_s']:.0f}); summary peak RSS <= {TARGET_RSS_X_FILE}x file: "
        f"{yes(m['summary_rss_x'] <= TARGET_RSS_X_FILE)} ({m['summary_rss_x']:.2f}x)"
    )
    if "x_baseline" in m:
        line += (
            f"; summary >= {TARGET_SUMMARY_X_BASELINE}x baseline: "
            f"{yes(m['x_baseline'] >= TARGET_SUMMARY_X_BASELINE)} ({m['x_baseline']:.1f}x)"
        )
    print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sample",
        default="tl-torch-gloo-np2-cycles",
        help="recording in data/timelines to repeat",
    )
    parser.add_argument("--size-mb", type=float, default=200, help="file size to build (MiB)")
    parser.add_argument("--file", type=Path, help="measure this timeline instead of building one")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="timeline-bench-"))
    try:
        if args.file:
            path, size, what = args.file, args.file.stat().st_size, str(args.file)
        else:
            source = data_path("timelines", args.sample, "timeline.json")
            path = tmp / "timeline.json"
            print(f"building {args.size_mb:.0f} MiB from {source} ...", file=sys.stderr)
            size, what = build(source, path, int(args.size_mb * 1024 * 1024)), args.sample
        with open(path, "rb") as fh:  # into the page cache for every run
            while fh.read(1 << 24):
                pass
        print(f"file: {size / 1e6:.1f} MB ({size} bytes), from {what}; {args.repeat} rounds")
        modes = [m for m in MODES if not (args.skip_baseline and m == "baseline")]
        runs: dict[str, list[dict]] = {m: [] for m in modes}
        for rnd in range(max(1, args.repeat)):
            order = modes[rnd % len(modes) :] + modes[: rnd % len(modes)]
            for mode in order:
                r = run_child(mode, path)
                runs[mode].append(r)
                print(
                    f"  round {rnd + 1} {mode:8s} {r['wall_s']:6.2f} s wall, "
                    f"{r['cpu_s']:6.2f} s CPU, peak RSS {r['maxrss_kb'] / 1e6:.2f} GB",
                    file=sys.stderr,
                    flush=True,
                )
        check_targets(report(runs, size))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
