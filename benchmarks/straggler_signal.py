"""Does the straggler signal separate? Real trainings with and without a busy process beside
one rank, interleaved, and the margin between the two.

Each round runs four ``workshop run`` trainings (the capstone's job: PyTorch, MNIST subset,
2 ranks, Gloo, 3 epochs of 40 steps, a timeline with cycle marks) through the recording
harness (``workshop.launch.harness.record_run``), in an order that rotates per round:

- ``healthy-unpinned``: nothing injected, the ranks left to the scheduler;
- ``healthy-pinned``: rank r bound to core r;
- ``straggler-rank0`` / ``straggler-rank1``: bound like that, and 3 busy processes (``HOGS``) on
  the core of rank 0 / rank 1.

The response cache is on in odd rounds for ``healthy-unpinned`` and ``straggler-rank0`` and
off for the other two, the other way round in even rounds, so each variant is recorded both
ways (with the cache off, the timeline has every rank's readiness ticks). Each run starts
through the recording path of data/ (``workshop.launch.quiet``: it starts on a quiet machine,
work on the other rank's core would hide a straggler; the CPU other work took during the run
is measured, ``foreign_cpu_s``, and a run disturbed by more than 0.05 cores is recorded again,
healthy and straggler runs alike).

Per run it computes every evidence number of ``workshop diagnose``
(``workshop.analysis.diagnose.evidence``) and reports, for the straggler's number
(``compute_ratio``: the slowest rank's median compute per step / the other's), min / median /
max per variant, whether every straggler run named the rank that had the busy process, and
the **margin**: the smallest straggler value divided by the largest healthy value (> 1:
separated). It also writes the healthy reference of ``workshop diagnose``
(``data/diagnose/healthy-reference.json``) from the healthy runs.

    python benchmarks/straggler_signal.py \
        [--repeats 5] [--out data/benchmarks/straggler-signal] [--reference PATH]

``--reanalyse`` records nothing: it computes the numbers of the runs already recorded in OUT
again with today's analysis (after a change to it) and rewrites ``result.json`` (its
``reanalysed`` list says when and at which commit) and the reference; the runs and what was
measured while they ran (times, loads, attempts) stay as recorded.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from _recording import git_commit, print_spreads, spread, started_now, write_result

from workshop.launch.harness import HOGS, RUN_SHAPE, record_run, stop_on_sigterm
from workshop.paths import data_dir

#: variant -> (rank -> core binding or None, the core of the busy process or None)
VARIANTS: dict[str, tuple[dict[int, int] | None, int | None]] = {
    "healthy-unpinned": (None, None),
    "healthy-pinned": ({0: 0, 1: 1}, None),
    "straggler-rank0": ({0: 0, 1: 1}, 0),
    "straggler-rank1": ({0: 0, 1: 1}, 1),
}
#: The variants with the cache on in odd rounds (the others: in even rounds).
CACHE_ON_ODD = ("healthy-unpinned", "straggler-rank0")


def cache_on(variant: str, round_: int) -> bool:
    """Whether ``variant`` keeps Horovod's response cache in round ``round_`` (1-based)."""
    return (variant in CACHE_ON_ODD) == (round_ % 2 == 1)


def plan(repeats: int) -> list[tuple[int, str]]:
    """(round, variant) in run order: every variant once per round, the order rotated by one
    each round.

    >>> plan(2)[:5]
    [(1, 'healthy-unpinned'), (1, 'healthy-pinned'), (1, 'straggler-rank0'), \
(1, 'straggler-rank1'), (2, 'healthy-pinned')]
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
    """Every evidence number of ``workshop diagnose`` on one run, and the straggler's rank."""
    from workshop.analysis.diagnose import evidence
    from workshop.readers.runs import read_run_files

    files = read_run_files(run_dir)
    table = evidence(files.record, files.metrics, files.steps, files.timeline)
    values = {r.measure: (None if r.value != r.value else r.value) for r in table.itertuples()}
    rank = table.set_index("measure").loc["compute_ratio", "rank"]
    return {"values": values, "straggler_rank": None if rank != rank else int(rank)}


def summarise(runs: list[dict]) -> dict:
    """Per variant the spread of ``compute_ratio``; the margin; whether the ranks were named."""
    by_variant = {}
    for variant in VARIANTS:
        values = [r["values"]["compute_ratio"] for r in runs if r["variant"] == variant]
        by_variant[variant] = spread(values)
    healthy = [r["values"]["compute_ratio"] for r in runs if r["variant"].startswith("healthy")]
    straggler = [r for r in runs if r["variant"].startswith("straggler")]
    smallest = min(r["values"]["compute_ratio"] for r in straggler)
    named = [r["straggler_rank"] == VARIANTS[r["variant"]][1] for r in straggler]
    return {
        "foreign_cpu_s": spread([r["foreign_cpu_s"] for r in runs]),
        "compute_ratio": by_variant,
        "largest_healthy": max(healthy),
        "smallest_straggler": smallest,
        "margin": smallest / max(healthy),
        "straggler_runs_naming_the_busy_rank": f"{sum(named)} of {len(named)}",
    }


def healthy_reference(runs: list[dict], result_dir: Path) -> dict:
    """The healthy reference of ``workshop diagnose``: every measure's spread over the healthy
    runs, cache on and off alike (with the cache off, a run whose negotiations are no slower
    than healthy runs' shows no effect of it: a note, not a finding)."""
    from workshop.analysis.diagnose import MEASURES

    healthy = [r for r in runs if r["variant"].startswith("healthy")]
    rows = []
    for name in MEASURES:
        values = [r["values"][name] for r in healthy if r["values"][name] is not None]
        row = {"measure": name, "runs": len(values)}
        if values:
            row |= {k: v for k, v in spread(values).items() if k != "values"}
        else:
            row |= {"min": None, "median": None, "max": None}
        rows.append(row)
    from workshop.launch.record import provenance

    where = result_dir.resolve()
    root = data_dir().resolve().parent
    return {
        **provenance(),
        "source": str(where.relative_to(root)) if where.is_relative_to(root) else str(where),
        "how": "the healthy runs (healthy-unpinned, healthy-pinned; response cache on and off) "
        "of benchmarks/straggler_signal.py",
        "measures": rows,
        "runs": [
            {"name": r["name"], "variant": r["variant"], "cache": r["cache"], **r["values"]}
            for r in healthy
        ],
    }


def write_reference(runs: list[dict], out: Path, path: Path, extra: dict) -> None:
    reference = healthy_reference(runs, out) | extra
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(reference, indent=2) + "\n")
    print(f"wrote {path}")


def reanalyse(out: Path, reference: Path) -> int:
    """Recompute every run's numbers and the summary of ``out/result.json`` from its recorded
    runs, and the healthy reference; what was measured during the runs is kept."""
    path = out / "result.json"
    result = json.loads(path.read_text())
    runs = [{**run, **measure(out / "runs" / run["name"])} for run in result["runs"]]
    result |= {**summarise(runs), "runs": runs}
    when = started_now()[0]
    result.setdefault("reanalysed", []).append(
        {"at": when, "git_commit": git_commit(), "command": sys.argv}
    )
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    print_spreads(result["compute_ratio"], "x (compute ratio)")
    print(f"margin {result['margin']:.2f}")
    extra = {
        "recorded_at": result["run"]["started_at"],
        "reanalysed_at": when,
    }
    write_reference(runs, out, reference, extra)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=data_dir() / "benchmarks" / "straggler-signal")
    parser.add_argument(
        "--reference", type=Path, default=data_dir() / "diagnose" / "healthy-reference.json"
    )
    parser.add_argument(
        "--reanalyse",
        action="store_true",
        help="compute the numbers of the runs recorded in OUT again (no new runs)",
    )
    args = parser.parse_args(argv)
    if args.reanalyse:
        return reanalyse(args.out, args.reference)
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
        name = f"r{round_}-{variant}"
        rank_cores, hog_core = VARIANTS[variant]
        cmd = command(variant, round_, runs_dir, name)
        record = record_run(
            cmd,
            runs_dir / name,
            rank_cores=rank_cores,
            hog_core=hog_core,
            hogs=HOGS,
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
    summary = summarise(runs)
    print_spreads(summary["compute_ratio"], "x (compute ratio)")
    print(
        f"margin: smallest straggler {summary['smallest_straggler']:.2f} / largest healthy "
        f"{summary['largest_healthy']:.2f} = {summary['margin']:.2f}; busy rank named in "
        f"{summary['straggler_runs_naming_the_busy_rank']} straggler runs"
    )
    write_result(
        args.out,
        {"repeats": args.repeats, **summary, "runs": runs},
        started,
        load,
    )
    write_reference(runs, args.out, args.reference, {"recorded_at": started})
    return 0


if __name__ == "__main__":
    sys.exit(main())
