"""Does the straggler signal separate? Real trainings with and without busy processes beside
the ranks, interleaved, and the margin between the two for each straggler measure.

Each round runs five ``workshop run`` trainings (the capstone's job: PyTorch, MNIST subset,
2 ranks, Gloo, 3 epochs of 40 steps, a timeline with cycle marks) through the recording
harness (``workshop.launch.harness.record_run``), in an order that rotates per round:

- ``healthy-unpinned``: nothing injected, the ranks left to the scheduler;
- ``healthy-pinned``: rank r bound to core r;
- ``healthy-loaded``: the ranks left to the scheduler and one busy process on every core (a
  room's load: everybody slowed alike);
- ``straggler-rank0`` / ``straggler-rank1``: bound like ``healthy-pinned``, and one busy
  process (``--hogs``) on the core of rank 0 / rank 1.

Every busy process runs in a session of its own, as another user's program does (Linux's
autogroup scheduling gives each session its share of a core: one busy process beside a
pinned rank makes it about 1.4-1.6x slower, the realistic straggler of issue 49).

The response cache is on in odd rounds for ``healthy-unpinned``, ``healthy-loaded`` and
``straggler-rank0`` and off for the other two, the other way round in even rounds, so each
variant is recorded both ways. Each run starts through the recording path of data/
(``workshop.launch.quiet``: on a quiet machine; the CPU other work took during the run is
measured, ``foreign_cpu_s``, and a run disturbed by more than 0.05 cores is recorded again;
the busy processes are the run's own work).

Per run it computes every evidence number of ``workshop diagnose``
(``workshop.analysis.diagnose.evidence``); per straggler measure (``compute_ratio``: the
slowest rank's compute per step over the others'; ``cpu_wait_gap``: the share of its compute
the most-waiting rank waited for a CPU, beyond the others') it reports min / median / max per
variant and the **margin** (smallest straggler value / largest healthy one), and what
``workshop diagnose`` says of every run (against its calibration). Its healthy runs with default
settings calibrate ``workshop diagnose`` (tools/diagnose_calibration.py).

    python benchmarks/straggler_signal.py \
        [--repeats 5] [--hogs 1] [--out data/benchmarks/straggler-cpu-wait]

``--reanalyse`` records nothing: it computes the numbers of the runs already recorded in OUT
again with today's analysis (after a change to it) and rewrites ``result.json`` (its
``reanalysed`` list says when and at which commit); the runs and what was
measured while they ran (times, loads, attempts) stay as recorded.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from _recording import git_commit, print_spreads, spread, started_now, write_result

from workshop.launch.harness import RUN_SHAPE, record_run, stop_on_sigterm
from workshop.paths import data_dir

#: variant -> (rank -> core binding or None, the cores of the busy processes or None)
VARIANTS: dict[str, tuple[dict[int, int] | None, tuple[int, ...] | None]] = {
    "healthy-unpinned": (None, None),
    "healthy-pinned": ({0: 0, 1: 1}, None),
    "healthy-loaded": ({0: 0, 1: 1}, (0, 1)),
    "straggler-rank0": ({0: 0, 1: 1}, (0,)),
    "straggler-rank1": ({0: 0, 1: 1}, (1,)),
}
#: The variants with the cache on in odd rounds (the others: in even rounds).
CACHE_ON_ODD = ("healthy-unpinned", "healthy-loaded", "straggler-rank0")
#: The measures that name a straggler.
SIGNALS = ("compute_ratio", "cpu_wait_gap")


def cache_on(variant: str, round_: int) -> bool:
    """Whether ``variant`` keeps Horovod's response cache in round ``round_`` (1-based)."""
    return (variant in CACHE_ON_ODD) == (round_ % 2 == 1)


def plan(repeats: int) -> list[tuple[int, str]]:
    """(round, variant) in run order: every variant once per round, the order rotated by one
    each round.

    >>> plan(2)[4:7]
    [(1, 'straggler-rank1'), (2, 'healthy-pinned'), (2, 'healthy-loaded')]
    """
    names = list(VARIANTS)
    runs = []
    for r in range(1, repeats + 1):
        shift = (r - 1) % len(names)
        runs += [(r, v) for v in names[shift:] + names[:shift]]
    return runs


def command(variant: str, round_: int, out: Path, name: str) -> list[str]:
    """The ``workshop run`` command of one run."""
    cache = [] if cache_on(variant, round_) else ["--cache-capacity", "0"]
    return [
        "workshop", "run", *RUN_SHAPE, *cache, "--seed", str(42 + round_), "--mark-cycles",
        "--out", str(out), "--name", name,
    ]  # fmt: skip


def measure(run_dir: Path) -> dict:
    """Every evidence number of ``workshop diagnose`` on one run, and the rank each straggler
    measure names."""
    from workshop.analysis.diagnose import evidence
    from workshop.readers.runs import open_run

    run = open_run(run_dir)
    table = evidence(run.record, run.metrics, run.steps, run.timeline).set_index("measure")
    values = {m: (None if v != v else float(v)) for m, v in table["value"].items()}
    ranks = {m: (None if r != r else int(r)) for m, r in table.loc[list(SIGNALS), "rank"].items()}
    return {"values": values, "ranks": ranks}


def verdicts(runs: list[dict], out: Path) -> dict[str, dict]:
    """run name -> what ``workshop diagnose`` says of it (its costs against the shipped
    calibration, data/diagnose/calibration.json)."""
    from workshop.findings.diagnose import diagnose_run

    said = {}
    for run in runs:
        result = diagnose_run(out / "runs" / run["name"])
        top = result["findings"][0] if result["findings"] else None
        said[run["name"]] = {"finding": top and top["problem"], "rank": top and top.get("rank")}
    return said


def summarise(runs: list[dict], out: Path) -> dict:
    """Per straggler measure: the spread per variant and the margin; and what ``workshop
    diagnose`` said of the runs."""
    summary = {"foreign_cpu_s": spread([r["foreign_cpu_s"] for r in runs])}

    def values(name: str, prefix: str) -> list[float]:
        return [
            r["values"][name]
            for r in runs
            if r["variant"].startswith(prefix) and r["values"][name] is not None
        ]

    for name in SIGNALS:
        healthy, straggler = values(name, "healthy"), values(name, "straggler")
        if not healthy or not straggler:
            continue
        summary[name] = {
            "by_variant": {v: spread(values(name, v)) for v in VARIANTS if values(name, v)},
            "largest_healthy": max(healthy),
            "smallest_straggler": min(straggler),
            "margin": min(straggler) / max(healthy) if max(healthy) > 0 else None,
        }
    said = verdicts(runs, out)
    stragglers = [r for r in runs if r["variant"].startswith("straggler")]
    named = [
        said[r["name"]]["finding"] == "straggler"
        and said[r["name"]]["rank"] == VARIANTS[r["variant"]][1][0]
        for r in stragglers
    ]
    wrongly = [n for n, s in said.items() if n.split("-", 1)[1].startswith("healthy")
               and s["finding"] is not None]  # fmt: skip
    return summary | {
        "diagnose": said,
        "stragglers_named_with_their_rank": f"{sum(named)} of {len(named)}",
        "healthy_runs_with_a_finding": wrongly,
    }


def reanalyse(out: Path) -> int:
    """Recompute every run's numbers and the summary of ``out/result.json`` from its recorded
    runs; what was measured during the runs is kept."""
    path = out / "result.json"
    result = json.loads(path.read_text())
    runs = [{**run, **measure(out / "runs" / run["name"])} for run in result["runs"]]
    result |= {**summarise(runs, out), "runs": runs}
    when = started_now()[0]
    result.setdefault("reanalysed", []).append(
        {"at": when, "git_commit": git_commit(), "command": sys.argv}
    )
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    report(result)
    return 0


def report(summary: dict) -> None:
    """Print each straggler measure's spreads and margin, and the verdicts."""
    for name in SIGNALS:
        if name in summary:
            part = summary[name]
            print_spreads(part["by_variant"], f" ({name})")
            print(
                f"{name}: smallest straggler {part['smallest_straggler']:.3f}, largest healthy "
                f"{part['largest_healthy']:.3f}, margin {part['margin']:.2f}"
            )
    print(
        f"workshop diagnose named {summary['stragglers_named_with_their_rank']} stragglers "
        f"with their rank; healthy runs with a finding: {summary['healthy_runs_with_a_finding']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hogs", type=int, default=1, help="busy processes per busy core")
    parser.add_argument(
        "--duty", type=float, default=1.0, help="share of the time each busy process is busy"
    )
    parser.add_argument("--variants", nargs="*", choices=list(VARIANTS), help="only these")
    parser.add_argument(
        "--out", type=Path, default=data_dir() / "benchmarks" / "straggler-cpu-wait"
    )
    parser.add_argument(
        "--reanalyse",
        action="store_true",
        help="compute the numbers of the runs recorded in OUT again (no new runs)",
    )
    args = parser.parse_args(argv)
    if args.reanalyse:
        return reanalyse(args.out)
    stop_on_sigterm()
    if args.repeats < 5:
        print("note: fewer than 5 rounds; the project reports spreads over >= 5", flush=True)
    started, load = started_now()
    runs_dir = args.out / "runs"
    if runs_dir.exists():
        shutil.rmtree(runs_dir)
    runs_dir.mkdir(parents=True)
    runs = []
    for round_, variant in plan(args.repeats):
        if args.variants and variant not in args.variants:
            continue
        name = f"r{round_}-{variant}"
        rank_cores, hog_core = VARIANTS[variant]
        cmd = command(variant, round_, runs_dir, name)
        record = record_run(
            cmd,
            runs_dir / name,
            rank_cores=rank_cores,
            hog_core=hog_core,
            hogs=args.hogs,
            duty=args.duty,
            quiet=True,
            attempts=5,
        )
        runs.append(
            {
                "name": name,
                "round": round_,
                "variant": variant,
                "cache": cache_on(variant, round_),
                **record,
                **measure(runs_dir / name),
            }
        )
    summary = summarise(runs, args.out)
    report(summary)
    write_result(
        args.out,
        {"repeats": args.repeats, "hogs": args.hogs, "duty": args.duty, **summary, "runs": runs},
        started,
        load,
    )
    print("healthy runs recorded: python -m tools.diagnose_calibration --write recalibrates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
