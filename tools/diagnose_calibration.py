"""The noise of ``workshop diagnose``'s estimators, from the healthy runs recorded in data/.

    python -m tools.diagnose_calibration            # print the table, write nothing
    python -m tools.diagnose_calibration --write    # (re)write data/diagnose/calibration.json

Every run folder under the candidate folders below is read; a run is a calibration run only
when its own record shows none of the problems the diagnosis names
(``workshop.analysis.diagnose.verdict.calibration_problems``); the others are listed with the
reason they were left out. For each healthy run every timed estimator's saving is computed as
``workshop diagnose`` computes it, and the straggler's a second time without the ranks' CPU
wait (the estimate a run recorded before ``cpu_wait_s`` existed gets). The noise of an
estimator is the spread of its savings over those runs, as shares of their step. Nothing here
decides a verdict; ``workshop diagnose`` reads the file and ``tests/test_diagnose_verdicts.py``
recomputes it, so a re-recording that would move it fails a test until it is written again.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import pandas as pd

from workshop.analysis.diagnose.costs import step_ms
from workshop.analysis.diagnose.judge import evidence
from workshop.analysis.diagnose.verdict import calibrate, calibration_problems, costs
from workshop.launch.record import write_json
from workshop.paths import data_path
from workshop.readers.runs import read_run, read_run_files

#: Where recorded runs are looked for, under data/.
CANDIDATES = (
    "benchmarks/straggler-cpu-wait/runs",
    "benchmarks/straggler-signal/runs",
    "benchmarks/straggler-signal-quiet/runs",
    "runs",
    "scripts",
    "timelines",
    "diagnose/cases",
)
OUT = ("diagnose", "calibration.json")


def _folders() -> list[Path]:
    out = []
    for name in CANDIDATES:
        root = data_path(*name.split("/"))
        out += sorted(p for p in root.iterdir() if (p / "run.json").is_file() or p.is_dir())
    return [p for p in out if p.is_dir()]


def _relative(path: Path) -> str:
    return str(path.relative_to(data_path().parent))


def blind_costs(files) -> list:
    """The estimates a run gets with less evidence, for their noise: the straggler's without
    the ranks' CPU wait (a run recorded before ``cpu_wait_s``), and fusion's and the cycle's
    from the timeline alone (a cluster job's folder: no run.json, so no settings)."""
    blind = files.steps.drop(columns=["cpu_wait_s"], errors="ignore")
    out = [c for c in costs(files.record, files.metrics, blind, None) if c.problem == "straggler"]
    alone = costs({}, files.metrics, files.steps, files.timeline)
    return out + [c for c in alone if c.problem in ("fusion_off", "long_cycle_time")]


def collect() -> dict:
    """The calibration: ``runs`` (each healthy run's savings), ``excluded`` (folder, why),
    ``noise`` (:func:`workshop.analysis.diagnose.verdict.calibrate`)."""
    runs, excluded, table = [], [], {}
    for folder in _folders():
        if not (folder / "run.json").is_file():
            excluded.append({"folder": _relative(folder), "why": ["no run.json"]})
            continue
        why = calibration_problems(read_run(folder))  # run.json alone decides
        if why:
            excluded.append({"folder": _relative(folder), "why": why})
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            files = read_run_files(folder)
        step = step_ms(files.steps)
        found = costs(files.record, files.metrics, files.steps, files.timeline)
        found += blind_costs(files)
        table[_relative(folder)] = (step, found)
        runs.append(
            {
                "folder": _relative(folder),
                "script": bool((files.record.get("config") or {}).get("script")),
                "step_ms": round(step, 4),
                "evidence": {
                    row.measure: (None if row.value != row.value else round(row.value, 6))
                    for row in evidence(
                        files.record, files.metrics, files.steps, files.timeline
                    ).itertuples()
                },
                "savings": [
                    {
                        "problem": c.problem,
                        "estimator": c.estimator,
                        "share": round(c.saving_ms / step, 6),
                    }
                    for c in found
                    if c.measured and c.saving_ms == c.saving_ms
                ],
            }
        )
    noise = calibrate(table)
    return {
        "how": "python -m tools.diagnose_calibration --write (tools/diagnose_calibration.py)",
        "rule": "a run calibrates only when calibration_problems(run.json) is empty",
        "noise": noise.round(6).to_dict("records"),
        "runs": runs,
        "excluded": excluded,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", action="store_true", help="write data/diagnose/calibration.json"
    )
    args = parser.parse_args(argv)
    result = collect()
    print(pd.DataFrame(result["noise"]).to_string(index=False))
    print(f"{len(result['runs'])} healthy runs, {len(result['excluded'])} left out")
    if args.write:
        path = data_path(OUT[0]) / OUT[1]
        write_json(path, result)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
