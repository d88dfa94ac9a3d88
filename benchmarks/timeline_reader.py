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
  timed both inside the process after its imports and as the whole process;
* ``startup``: the same summary command on the smallest recording in data/timelines (a few
  hundred kB): what the command costs before the file size matters (interpreter, imports,
  thread pool, output).

The four run interleaved, ``--repeat`` rounds in a rotating order; this machine is shared and
noisy, so the medians count, min and max show the spread, and the summary / baseline ratio is
also given per round (both measured within seconds of each other). ``--out DIR`` writes every
run, the spreads and the provenance to ``DIR/result.json``.

    flock /tmp/workshop-cpu.lock python benchmarks/timeline_reader.py [--size-mb 200] \
        [--repeat 5] [--out data/benchmarks/timeline-reader]

Targets (issue 12): ``summary`` >= 150 MB/s end to end and >= 8x the whole-process baseline,
peak RSS <= 2x the file; the reader alone >= 250 MB/s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
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
MODES = ("reader", "summary", "baseline", "startup")
MEASURED_CODE = (  # git status of these goes into the result's provenance
    "workshop/__init__.py",
    "workshop/cli.py",
    "workshop/commands/timeline.py",
    "workshop/readers",
    "benchmarks/timeline_reader.py",
)
TARGET_SUMMARY_MB_S = 150
TARGET_SUMMARY_X_BASELINE = 8
TARGET_READER_MB_S = 250
TARGET_RSS_X_FILE = 2

INNER = r"""
import json, sys, time
mode, path = sys.argv[1], sys.argv[2]
if mode == "reader":
    import warnings
    from workshop.readers.timeline import read_timeline
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
    if mode in ("summary", "startup"):
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
        if mode == "startup":  # a tiny file: the fixed cost, not a rate
            print(
                f"{'startup (process)':18s} {fmt(walls):>24s} {'(fixed cost)':>26s} "
                f"{statistics.median(r['cpu_s'] for r in rs):6.2f} {rss / 1e9:5.2f} GB"
            )
            continue
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
    rss_x = [r["maxrss_kb"] * 1024 / size for r in runs["summary"]]
    print(f"summary peak RSS / file size per round: {fmt(rss_x, 'x', 2)}")
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


def targets(m: dict[str, float]) -> dict[str, dict]:
    """Each target of issue 12: the value measured (medians) and whether it is met."""
    out = {
        "summary_mb_s": {"target": f">= {TARGET_SUMMARY_MB_S}", "value": m["summary_mb_s"]},
        "reader_mb_s": {"target": f">= {TARGET_READER_MB_S}", "value": m["reader_mb_s"]},
        "summary_rss_x": {"target": f"<= {TARGET_RSS_X_FILE}", "value": m["summary_rss_x"]},
    }
    out["summary_mb_s"]["met"] = m["summary_mb_s"] >= TARGET_SUMMARY_MB_S
    out["reader_mb_s"]["met"] = m["reader_mb_s"] >= TARGET_READER_MB_S
    out["summary_rss_x"]["met"] = m["summary_rss_x"] <= TARGET_RSS_X_FILE
    if "x_baseline" in m:
        out["summary_x_baseline"] = {
            "target": f">= {TARGET_SUMMARY_X_BASELINE}",
            "value": m["x_baseline"],
            "met": m["x_baseline"] >= TARGET_SUMMARY_X_BASELINE,
        }
    return out


def results(runs: dict[str, list[dict]], size: int, medians: dict[str, float]) -> dict:
    """Every run, min / median / max of each measure, the per-round ratios and the targets."""
    mb = size / 1e6
    spreads: dict[str, dict] = {}
    for mode, rs in runs.items():
        walls = [r["wall_s"] for r in rs]
        one = {
            "wall_s": spread(walls),
            "cpu_s": spread([r["cpu_s"] for r in rs]),
            "peak_rss_bytes": spread([r["maxrss_kb"] * 1024 for r in rs]),
        }
        if mode != "startup":
            one["mb_s"] = spread([mb / w for w in walls])
            one["peak_rss_x_file"] = spread([r["maxrss_kb"] * 1024 / size for r in rs])
        if rs[0]["inner_s"] is not None:
            one["inner_s"] = spread([r["inner_s"] for r in rs])
            one["inner_mb_s"] = spread([mb / r["inner_s"] for r in rs])
        spreads[mode] = one
    out: dict = {"runs": runs, "min_median_max": spreads, "targets": targets(medians)}
    if "baseline" in runs:
        paired = [
            b["wall_s"] / s["wall_s"]
            for b, s in zip(runs["baseline"], runs["summary"], strict=True)
        ]
        out["summary_over_baseline"] = {
            "of_medians": medians["x_baseline"],
            "per_round": paired,
            "per_round_min_median_max": spread(paired),
        }
    return out


def git_commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", *MEASURED_CODE],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (with uncommitted changes to the code measured)" if dirty else "")


def versions() -> dict[str, str]:
    code = "import numpy, pandas; print(numpy.__version__, pandas.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    numpy_v, pandas_v = (out.stdout.split() + ["?", "?"])[:2]
    return {"python": platform.python_version(), "numpy": numpy_v, "pandas": pandas_v}


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
    parser.add_argument(
        "--startup-sample", default="tl-torch-gloo-np2-fusion0", help="small recording"
    )
    parser.add_argument("--out", type=Path, help="write result.json (every run) here")
    args = parser.parse_args(argv)
    started, load_before = datetime.datetime.now(datetime.UTC), os.getloadavg()
    small = data_path("timelines", args.startup_sample, "timeline.json")
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
                r = run_child(mode, small if mode == "startup" else path)
                runs[mode].append(r)
                print(
                    f"  round {rnd + 1} {mode:8s} {r['wall_s']:6.2f} s wall, "
                    f"{r['cpu_s']:6.2f} s CPU, peak RSS {r['maxrss_kb'] / 1e6:.2f} GB",
                    file=sys.stderr,
                    flush=True,
                )
        medians = report(runs, size)
        check_targets(medians)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            record = {
                "command": "flock /tmp/workshop-cpu.lock python benchmarks/timeline_reader.py "
                + " ".join(sys.argv[1:] if argv is None else argv),
                "started_at": started.isoformat(timespec="seconds"),
                "finished_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "loadavg_before": list(load_before),
                "loadavg_after": list(os.getloadavg()),
                "file": {"bytes": size, "from": what, "built": not args.file},
                "startup_file": {"bytes": small.stat().st_size, "from": args.startup_sample},
                "repeat": args.repeat,
                "order": "rotating per round: " + ", ".join(modes),
                **results(runs, size, medians),
                "git_commit": git_commit(),
                "versions": versions(),
                "host": {"name": platform.node(), "cpus": os.cpu_count()},
            }
            (args.out / "result.json").write_text(json.dumps(record, indent=1) + "\n")
            print(f"wrote {args.out / 'result.json'}", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
