"""Benchmark: ``workshop timeline summary`` and ``workshop timeline slice`` on a timeline of
gigabytes, against ``json.load`` + ``pandas.DataFrame`` and against the summary before the
streaming pass, all in the same run.

The file (2 GiB by default) is built in a temporary folder (deleted afterwards) by repeating
the event records of a real recording (``--sample``, data/timelines/...) with their timestamps
shifted past the copy before, in Horovod's own layout (so its steps are the recording's steps
over and over), and read once beforehand so every run finds it in the page cache.

Each measurement is a process of its own, timed from start to exit, with its CPU time and its
own peak RSS (``wait4``):

* ``summary``: ``workshop timeline summary --json FILE`` (this tree);
* ``before``: the same command from the tree of ``--before`` (the commit before the streaming
  pass, extracted with ``git archive``), whose memory grows with the file;
* ``slice``: ``workshop timeline slice FILE --steps A:B -o NEW`` for 3 steps in the middle of
  the file: one pass to find the steps, one to write them (it stops after the window);
* ``baseline``: ``pandas.DataFrame(json.load(f))`` (no B/E pairing, so it does less than the
  summary), on a smaller file built the same way (``--baseline-mb``, 256 MiB by default):
  on the large file it would need about 7x the file in memory (``data/benchmarks/
  timeline-reader``: 7.25x). Its throughput (MB/s) is what the others are compared with.

The four run interleaved, ``--repeat`` rounds in a rotating order, each round under the
machine-wide CPU lock (``--lock``) that the live tests take; the machine is shared, so the
1-minute load average before each run is recorded with it, and ratios are taken within a
round. ``--out DIR`` writes every run, min / median / max of each measure and the provenance
(``_recording.write_result``) to ``DIR/result.json``.

    python benchmarks/timeline_reader.py [--size-mb 2048] [--baseline-mb 256] [--repeat 5] \\
        [--out data/benchmarks/timeline-reader/streaming]
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _recording import flock_held, spread, started_now, write_result  # noqa: E402

from workshop.paths import data_path  # noqa: E402

META_RECORD = re.compile(rb'\{"name": "process_(?:name|sort_index)", "ph": "M"[^\n]*\},\n')
TS = re.compile(rb'("ts": )(\d+)')
MODES = ("summary", "before", "slice", "baseline")
BEFORE = "b22f53d"  # the last commit before the streaming summary
SLICE_STEPS = 3
MIB = 1 << 20
TARGET_RSS_BYTES = 256 * 10**6  # issue 60: the summary's peak on a 2 GB timeline

BASELINE = r"""
import json, sys, time
import pandas
t0 = time.perf_counter()
with open(sys.argv[1]) as fh:
    df = pandas.DataFrame(json.load(fh))
print(json.dumps({"inner_s": time.perf_counter() - t0, "events": len(df)}))
"""


def build(source: Path, target: Path, size: int) -> tuple[int, int]:
    """Write ``target``, at least ``size`` bytes: ``source``, then copies of its events with
    their timestamps shifted past the copy before. Returns (bytes, copies of the events)."""
    body = source.read_bytes().rstrip()
    if not body.endswith(b"]"):
        raise SystemExit(f"{source}: expected a closed Horovod >= 0.20.1 timeline")
    body = body[:-1]
    parts = TS.split(META_RECORD.sub(b"", body[body.index(b"\n") + 1 :]))
    stamps = [int(x) for x in parts[2::3]]
    texts = parts[0::3]  # between timestamps
    period = max(stamps) - min(stamps) + 1000
    copies = 0
    with open(target, "wb") as out:
        written = out.write(body)
        while written < size:
            copies += 1
            chunk = [b","]
            for text, ts in zip(texts, stamps, strict=False):
                chunk += [text, b'"ts": ', b"%d" % (ts + copies * period)]
            chunk.append(texts[-1])
            written += out.write(b"".join(chunk))
        written += out.write(b"]")
    return written, copies + 1


def command(mode: str, files: dict[str, Path], steps: tuple[int, int], out: Path) -> list[str]:
    """The process of ``mode`` (the workshop's from the tree on its PYTHONPATH)."""
    if mode == "baseline":
        return [sys.executable, "-c", BASELINE, str(files["baseline"])]
    cli = [sys.executable, "-m", "workshop.cli", "timeline"]
    if mode == "slice":
        a, b = steps
        return [*cli, "slice", str(files["large"]), "--steps", f"{a}:{b}", "-o", str(out)]
    return [*cli, "summary", "--json", str(files["large"])]


def run_child(cmd: list[str], tree: Path, cwd: Path) -> dict:
    """One measurement process: wall time from start to exit, its own CPU time and peak RSS
    (``wait4``), what it printed, and the load average just before it."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if code != 0:
            raise SystemExit(f"{cmd} failed ({code}):\n{err.read().decode()[-3000:]}")
        printed = out.read().decode()
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_bytes": usage.ru_maxrss * 1024,
        "load1_before": load,
        "printed": printed[-400:],
    }


def measure(args: argparse.Namespace, files: dict[str, Path], trees: dict[str, Path], tmp: Path):
    """Every mode, ``args.repeat`` rounds in a rotating order; returns runs by mode and the
    slice's steps."""
    from workshop.readers.timeline.steps import step_window

    steps = step_window(files["large"], 0, 1).steps
    first = steps // 2
    window = (first, first + SLICE_STEPS)
    modes = [m for m in MODES if not (m == "before" and args.skip_before)]
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for rnd in range(args.repeat):
        order = modes[rnd % len(modes) :] + modes[: rnd % len(modes)]
        with flock_held(args.lock):
            for mode in order:
                out = tmp / f"slice-{rnd}.json"
                tree = trees["before"] if mode == "before" else REPO
                r = run_child(command(mode, files, window, out), tree, tmp)
                if mode == "slice":
                    events = json.loads(out.read_text())  # a viewer's first step
                    r["slice_bytes"], r["slice_records"] = out.stat().st_size, len(events)
                    out.unlink()
                runs[mode].append(r)
                rss, load = r["peak_rss_bytes"] / 1e6, r["load1_before"]
                print(
                    f"  round {rnd + 1} {mode:8s} {r['wall_s']:6.2f} s wall, {r['cpu_s']:6.2f} s "
                    f"CPU, peak RSS {rss:7.1f} MB, load {load:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
    return runs, {"steps_in_file": steps, "sliced": list(window)}


def summarize(runs: dict[str, list[dict]], sizes: dict[str, int]) -> dict:
    """min / median / max of wall, CPU, MB/s and peak RSS per mode, and the ratios against the
    baseline's MB/s in the same round."""
    out: dict = {}
    for mode, rs in runs.items():
        size = sizes["baseline" if mode == "baseline" else "large"]
        out[mode] = {
            "wall_s": spread([r["wall_s"] for r in rs]),
            "cpu_s": spread([r["cpu_s"] for r in rs]),
            "mb_s": spread([size / 1e6 / r["wall_s"] for r in rs]),
            "peak_rss_mb": spread([r["peak_rss_bytes"] / 1e6 for r in rs]),
            "peak_rss_x_file": spread([r["peak_rss_bytes"] / size for r in rs]),
        }
    base = [sizes["baseline"] / r["wall_s"] for r in runs["baseline"]]
    for mode in runs:
        if mode != "baseline":
            rates = [sizes["large"] / r["wall_s"] for r in runs[mode]]
            out[mode]["x_baseline_mb_s"] = spread(
                [a / b for a, b in zip(rates, base, strict=True)]
            )
    if "before" in runs:
        out["summary"]["x_before_wall"] = spread(
            [
                b["wall_s"] / s["wall_s"]
                for b, s in zip(runs["before"], runs["summary"], strict=True)
            ]
        )
    return out


def report(stats: dict, sizes: dict[str, int]) -> None:
    print(
        f"file {sizes['large'] / 1e9:.2f} GB (baseline's {sizes['baseline'] / 1e6:.0f} MB); "
        "min / median / max over the rounds"
    )
    for mode, s in stats.items():
        line = " / ".join(f"{x:.2f}" for x in (s["wall_s"]["min"], s["wall_s"]["median"],
                                              s["wall_s"]["max"]))  # fmt: skip
        rss = " / ".join(f"{s['peak_rss_mb'][k]:.0f}" for k in ("min", "median", "max"))
        rate = " / ".join(f"{s['mb_s'][k]:.0f}" for k in ("min", "median", "max"))
        print(f"{mode:9s} wall {line} s   {rate} MB/s   peak RSS {rss} MB")
        if "x_baseline_mb_s" in s:
            x = s["x_baseline_mb_s"]
            print(f"{'':9s} MB/s over the baseline's in the same round: {x['min']:.1f} / "
                  f"{x['median']:.1f} / {x['max']:.1f}x")  # fmt: skip
    if "x_before_wall" in stats["summary"]:
        x = stats["summary"]["x_before_wall"]
        print(f"summary: before / now, wall, same round: {x['min']:.2f} / {x['median']:.2f} / "
              f"{x['max']:.2f}x")  # fmt: skip
    top = stats["summary"]["peak_rss_mb"]["max"] * 1e6
    print(f"summary peak RSS <= {TARGET_RSS_BYTES / 1e6:.0f} MB: {top <= TARGET_RSS_BYTES}")


def before_tree(commit: str, tmp: Path) -> Path:
    """The package as of ``commit``, extracted under ``tmp``."""
    tree = tmp / f"before-{commit}"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", commit, "workshop"], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", default="tl-torch-gloo-np2-cycles", help="recording to repeat")
    parser.add_argument("--size-mb", type=float, default=2048, help="the large file (MiB)")
    parser.add_argument("--baseline-mb", type=float, default=256, help="json.load's file (MiB)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--before", default=BEFORE, help="commit of the summary before")
    parser.add_argument("--skip-before", action="store_true")
    parser.add_argument("--lock", type=Path, default=Path("/tmp/workshop-cpu.lock"))
    parser.add_argument("--out", type=Path, help="write result.json (every run) here")
    args = parser.parse_args(argv)
    started, load = started_now()
    source = data_path("timelines", args.sample, "timeline.json")
    tmp = Path(tempfile.mkdtemp(prefix="timeline-bench-"))
    try:
        files = {"large": tmp / "large.json", "baseline": tmp / "baseline.json"}
        sizes, copies = {}, {}
        for key, mb in (("large", args.size_mb), ("baseline", args.baseline_mb)):
            print(f"building {mb:.0f} MiB from {source} ...", file=sys.stderr, flush=True)
            sizes[key], copies[key] = build(source, files[key], int(mb * MIB))
            with open(files[key], "rb") as fh:  # into the page cache for every run
                while fh.read(1 << 24):
                    pass
        trees = {} if args.skip_before else {"before": before_tree(args.before, tmp)}
        runs, window = measure(args, files, trees, tmp)
        stats = summarize(runs, sizes)
        report(stats, sizes)
        if args.out:
            record = {
                "what": "workshop timeline summary / slice (this tree) and summary (before) on "
                "the large file; json.load + pandas on the baseline file; each a process",
                "files": {
                    key: {
                        "bytes": sizes[key],
                        "built_from": f"data/timelines/{args.sample}/timeline.json",
                        "copies_of_its_events": copies[key],
                    }
                    for key in files
                },
                "slice": window,
                "before_commit": None if args.skip_before else args.before,
                "repeat": args.repeat,
                "order": "rotating per round: " + ", ".join(runs),
                "runs": runs,
                "min_median_max": stats,
            }
            write_result(args.out, record, started, load)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
