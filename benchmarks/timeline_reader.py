"""Benchmark: the timeline reader against ``json.load`` + ``pandas.DataFrame`` on a >= 1 GB file.

The file is built in a temporary folder (deleted afterwards) by repeating the event records of a
real recording (data/timelines/...) with shifted timestamps, in Horovod's own layout. Each side
runs in its own subprocess so that peak RSS (``ru_maxrss``) is measured separately; the file is
read once beforehand so both find it in the page cache.

    flock /tmp/workshop-cpu.lock python benchmarks/timeline_reader.py [--size-mb 1024]

Targets (issue 3): >= 100 MB/s end to end into the spans DataFrame, >= 5x the baseline, peak
RSS <= 2x the file size.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
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

MEASURE = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
import numpy, pandas
if mode == "reader":
    import warnings
    from workshop.io.timeline import read_timeline
def vm_rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
before_kb = vm_rss_kb()
t0 = time.perf_counter()
c0 = time.process_time()
if mode == "reader":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tl = read_timeline(path)
    rows = len(tl.spans)
    what = f"{len(tl.spans)} spans, {len(tl.ticks)} ticks, {len(tl.cycles)} cycles"
else:
    with open(path) as fh:
        events = json.load(fh)
    df = pandas.DataFrame(events)
    rows = len(df)
    what = f"{len(df)} event rows (no B/E pairing)"
wall = time.perf_counter() - t0
cpu = time.process_time() - c0
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "rows": rows, "what": what,
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "rss_after_imports_kb": before_kb}))
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
            if copies % 100 == 0:
                print(f"  building: {written / 1e9:.2f} GB", file=sys.stderr, flush=True)
        out.write(b"]")
        written += 1
    return written


def measure(mode: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, mode, str(path)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", default="tl-torch-gloo-np2-cycles",
                        help="recording in data/timelines to repeat")  # fmt: skip
    parser.add_argument("--size-mb", type=float, default=1024, help="file size to build")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument(
        "--repeat", type=int, default=2,
        help="runs per side; the best counts (this VM backs fresh memory slowly on first "
        "touch, which would otherwise penalise whichever side runs first)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    source = data_path("timelines", args.sample, "timeline.json")
    tmp = Path(tempfile.mkdtemp(prefix="timeline-bench-"))
    try:
        path = tmp / "timeline.json"
        print(f"building {args.size_mb:.0f} MB from {source} in {tmp} ...", file=sys.stderr)
        size = build(source, path, int(args.size_mb * 1024 * 1024))
        with open(path, "rb") as fh:  # into the page cache for both sides
            while fh.read(1 << 24):
                pass
        mb = size / 1e6
        print(f"file: {size / 1e9:.3f} GB ({size} bytes), from {args.sample}")
        results = {}
        modes = ["reader"] + ([] if args.skip_baseline else ["baseline"])
        for mode in modes:
            print(f"running {mode} ...", file=sys.stderr, flush=True)
            t = time.perf_counter()
            runs = [measure(mode, path) for _ in range(max(1, args.repeat))]
            for i, run in enumerate(runs):
                print(
                    f"  {mode} run {i + 1}: {run['wall_s']:.2f} s wall, {run['cpu_s']:.2f} s CPU, "
                    f"peak RSS {run['maxrss_kb'] / 1e6:.2f} GB",
                    file=sys.stderr,
                )
            r = min(runs, key=lambda x: x["wall_s"])
            r["mb_s"] = mb / r["wall_s"]
            r["rss_x"] = r["maxrss_kb"] * 1024 / size
            results[mode] = r
            print(
                f"{mode:9s} {r['wall_s']:7.2f} s wall ({r['cpu_s']:.2f} s CPU)  "
                f"{r['mb_s']:7.1f} MB/s  peak RSS {r['maxrss_kb'] / 1e6:5.2f} GB = "
                f"{r['rss_x']:.2f}x file (after imports {r['rss_after_imports_kb'] / 1e3:.0f} MB)"
                f"  -> {r['what']}  [best of {len(runs)}; {time.perf_counter() - t:.0f} s in all]"
            )
        if "baseline" in results:
            ratio = results["reader"]["mb_s"] / results["baseline"]["mb_s"]
            print(f"reader / baseline throughput: {ratio:.1f}x")
        r = results["reader"]
        print(
            f"targets: >= 100 MB/s: {'yes' if r['mb_s'] >= 100 else 'NO'}; "
            f"RSS <= 2x file: {'yes' if r['rss_x'] <= 2 else 'NO'}"
            + (
                f"; >= 5x baseline: {'yes' if ratio >= 5 else 'NO'}"
                if "baseline" in results
                else ""
            )
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
