"""Run a grid of real runs (``workshop sweep``) into one sweep directory, resumably.

The sweep directory holds one run directory per grid point and ``sweep.json``, the manifest::

    {"schema": 1, "created_at": ..., "updated_at": ..., "command": [...],
     "host": {"hostname": ..., "cores": 2}, "oversubscribe": false,
     "grid": {"np": [1, 2], "batch_size": [32, 256]}, "base": {<RunConfig fields>},
     "points": [{"name": "p00-np1-bs32", "config": {...}, "status": "ok" | "failed" |
                 "interrupted" | "pending", "run": "<run directory name>" | null,
                 "duration_s": 12.3, "error": null, "loadavg_1min": 1.9}, ...]}

``loadavg_1min`` is the machine's 1-minute load average when the point started: on a shared
machine, a load above the core count means other work competed with the run and its timings.

With ``rounds`` > 1 the whole grid runs that many times, round by round (``r2-p01-np2`` is
point 1 of round 2): a timing is then compared with the other points *of its round*, so that a
slow minute of the machine shifts a whole round rather than one setting. With ``record`` every
run goes through :func:`workshop.launch.quiet.recorded` (waits for a quiet machine, measures
the other work during the run, records a disturbed run again: the recording path for
``data/``); with ``compute_baseline`` each round also measures the raw compute of 1 and of
max(np) independent processes (:mod:`workshop.train.compute_probe`) into
``compute-baseline.jsonl``, the ceiling a speedup on this machine can reach.

Sweeping a different grid into the same folder adds its points (the earlier ones stay listed,
with their grid in ``history``), so one folder can hold e.g. a small-batch reference and a
large-batch LR grid. A point is finished when a run directory in the sweep folder has run.json
``status: ok`` and the same configuration; running the same sweep again skips it (so an
interrupted sweep resumes where it stopped, and failed points are retried in a new run
directory; the failed one stays).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from workshop.launch.run import RunConfig, RunError, RunInterrupted, run_one
from workshop.runspec import GRID_LABELS
from workshop.units import write_json_atomic


def _label(key: str, value) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{GRID_LABELS.get(key, key)}{text}"


def expand_grid(
    base: RunConfig, grid: dict[str, list], *, one_at_a_time: bool = False
) -> list[tuple[str, RunConfig]]:
    """Every combination of the grid values applied to ``base``, with a run name for each.

    Args:
        base: the configuration shared by all points.
        grid: RunConfig field -> list of values (keys of one value still vary nothing).
        one_at_a_time: instead of every combination, a baseline (each key's first value) and
            one point per other value of each key, the rest kept at the baseline: knobs
            compared one by one with the default (``p00-baseline``, ``p01-fusion0``, ...).

    Returns:
        ``[(name, config), ...]`` in grid order; names look like ``p03-np2-bs64-lrlinear-wu1``
        (only the keys that take several values appear).

    Raises:
        ValueError: for a key that is not a RunConfig field or an empty value list.
    """
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    for key, values in grid.items():
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ValueError(f"sweep grid: {key!r} is not a run option ({known})")
        if not values:
            raise ValueError(f"sweep grid: no values for {key!r}")
    keys = list(grid)
    if one_at_a_time:
        baseline = dataclasses.replace(base, **{k: values[0] for k, values in grid.items()})
        points = [("p00-baseline", baseline)]
        for key in keys:
            for value in grid[key][1:]:
                name = f"p{len(points):02d}-{_label(key, value)}"
                points.append((name, dataclasses.replace(baseline, **{key: value})))
        return points
    varying = [k for k in keys if len(grid[k]) > 1]
    points = []
    for index, combo in enumerate(itertools.product(*(grid[k] for k in keys))):
        values = dict(zip(keys, combo, strict=True))
        config = dataclasses.replace(base, **values)
        name = "-".join([f"p{index:02d}"] + [_label(k, values[k]) for k in varying])
        points.append((name, config))
    return points


def check_points(points: list[tuple[str, RunConfig]]) -> None:
    """Validate every point before anything runs, so a sweep does not fail half-way.

    Raises:
        ValueError: listing every point that cannot run and why (e.g. np above this machine's
            core count without ``oversubscribe``).
    """
    problems = []
    for name, config in points:
        try:
            config.validate()
        except ValueError as exc:
            problems.append(f"  {name}: {exc}")
    if problems:
        cores = os.cpu_count() or 1
        raise ValueError(
            f"{len(problems)} of {len(points)} sweep points cannot run on this machine "
            f"({cores} cores):\n" + "\n".join(problems)
        )


def _config_matches(recorded: dict, wanted: dict) -> bool:
    # A run recorded before an option existed ran with that option's default.
    defaults = dataclasses.asdict(RunConfig())
    return all(recorded.get(key, defaults.get(key)) == value for key, value in wanted.items())


def finished_runs(sweep_dir: Path) -> list[tuple[str, dict]]:
    """(run directory name, config) of every run in ``sweep_dir`` whose status is ok (a run
    kept although its recording was disturbed, ``recording.quiet`` false, is not finished)."""
    done = []
    for run_json in sorted(Path(sweep_dir).glob("*/run.json")):
        try:
            record = json.loads(run_json.read_text())
        except (OSError, json.JSONDecodeError):
            continue  # a broken run directory is simply not finished
        if record.get("status") == "ok" and (record.get("recording") or {}).get("quiet", True):
            done.append((run_json.parent.name, record.get("config", {})))
    return done


def _write_manifest(path: Path, manifest: dict) -> None:
    manifest["updated_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    write_json_atomic(path, manifest)


def run_sweep(
    sweep_dir: str | Path,
    base: RunConfig,
    grid: dict[str, list],
    *,
    command: list[str] | None = None,
    progress: bool = True,
    launcher: Callable[..., Path] = run_one,
    rounds: int = 1,
    record: bool = False,
    compute_baseline: bool = False,
    one_at_a_time: bool = False,
) -> pd.DataFrame:
    """Run every grid point not yet finished, into ``sweep_dir``; write ``sweep.json``.

    Points are validated first (nothing starts if one cannot run). A failed point is recorded
    and the sweep goes on; Ctrl-C stops after recording the interrupted point.

    Args:
        sweep_dir: the sweep directory (created if needed; an existing one is resumed).
        base: configuration shared by all points (``oversubscribe`` included).
        grid: RunConfig field -> values.
        command: the user-level command line to record (default ``sys.argv``).
        progress: show a tqdm progress bar.
        launcher: the function that runs one point (``workshop.launch.run.run_one``; tests
            pass a stand-in).
        rounds: how many times the grid runs, round by round (see the module).
        record: record on a quiet machine (:func:`workshop.launch.quiet.recorded`).
        compute_baseline: measure the raw compute of independent processes each round.
        one_at_a_time: each knob against the baseline alone (:func:`expand_grid`).

    Returns:
        The summary: one row per point with ``point``, the varying grid keys, ``status``
        (``ok``, ``skipped`` = finished earlier, ``failed``, ``interrupted``, ``pending``),
        ``run`` (directory name), ``duration_s``, ``final_test_accuracy``,
        ``samples_per_s`` (median over epochs >= 2), and ``round`` when ``rounds`` > 1.

    Raises:
        ValueError: if a point cannot run here (see :func:`check_points`).
        KeyboardInterrupt: re-raised after the manifest is written.
    """
    from workshop.kernel import progress_bar

    sweep_dir = Path(sweep_dir)
    if rounds < 1:
        raise ValueError(f"sweep: --rounds must be at least 1, not {rounds}")
    points = expand_grid(base, grid, one_at_a_time=one_at_a_time)
    check_points(points)
    if compute_baseline:
        _check_baseline_grid(grid)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = sweep_dir / "sweep.json"
    manifest, kept = _start_manifest(manifest_path, base, grid, points, command)
    manifest |= {"rounds": rounds, "record": record, "compute_baseline": compute_baseline,
                 "one_at_a_time": one_at_a_time}  # fmt: skip
    round_points = _rounds(points, rounds)
    entries = _point_entries(round_points, finished_runs(sweep_dir))
    manifest["points"] = kept + entries
    _write_manifest(manifest_path, manifest)

    todo = [(entry, config) for entry, (_, config, _) in zip(entries, round_points, strict=True)]
    todo = [(e, c) for e, c in todo if e["status"] == "pending"]
    baselines = _baselines_todo(sweep_dir, base, grid, rounds) if compute_baseline else {}
    probe = points[0][1]  # the network and per-worker batch every point shares (checked)
    total = len(todo) + sum(len(v) for v in baselines.values())
    bar = progress_bar(total=total, desc="sweep", unit="run", disable=not progress or not total)
    try:
        for round_ in range(1, rounds + 1):
            for entry, config in todo:
                if entry.get("round", 1) != round_:
                    continue
                bar.set_postfix_str(entry["name"])
                try:
                    _run_point(entry, config, sweep_dir, launcher, command, bar.write, record)
                finally:
                    _write_manifest(manifest_path, manifest)
                    bar.update(1)
            for procs in baselines.get(round_, []):
                bar.set_postfix_str(f"r{round_} compute x{procs}")
                _record_baseline(sweep_dir, probe, round_, procs, record, bar.write)
                bar.update(1)
    finally:
        bar.close()
    summary = summarize(sweep_dir, manifest)
    return summary.iloc[len(kept) :].reset_index(drop=True)


def _start_manifest(
    manifest_path: Path,
    base: RunConfig,
    grid: dict[str, list],
    points: list[tuple[str, RunConfig]],
    command: list[str] | None,
) -> tuple[dict, list[dict]]:
    """The manifest of this sweep, without its points yet, and the points to keep listed from
    an earlier sweep into the same folder (those of another grid: their runs stay there)."""
    manifest = {
        "schema": 1,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command or [Path(sys.argv[0]).name, *sys.argv[1:]],
        "host": {"hostname": socket.gethostname(), "cores": os.cpu_count()},
        "oversubscribe": base.oversubscribe,
        "grid": grid,
        "base": dataclasses.asdict(base),
        "points": [],
    }
    if not manifest_path.exists():
        return manifest, []
    previous = json.loads(manifest_path.read_text())
    manifest["created_at"] = previous.get("created_at", manifest["created_at"])
    manifest["history"] = previous.get("history", []) + [previous.get("command")]
    wanted_configs = [dataclasses.asdict(config) for _, config in points]
    kept = [p for p in previous.get("points", []) if p.get("config") not in wanted_configs]
    return manifest, kept


def _rounds(
    points: list[tuple[str, RunConfig]], rounds: int
) -> list[tuple[str, RunConfig, int | None]]:
    """``(name, config, round)`` of every round's points, round by round; with rounds > 1
    names get ``r<round>-``, else the round is None."""
    if rounds == 1:
        return [(name, config, None) for name, config in points]
    return [(f"r{r}-{name}", config, r) for r in range(1, rounds + 1) for name, config in points]


def _point_entries(
    points: list[tuple[str, RunConfig, int | None]], done: list[tuple[str, dict]]
) -> list[dict]:
    """One manifest entry per point: ``skipped`` when a finished run in ``done`` (see
    :func:`finished_runs`) has its configuration (each finished run stands for one point: the
    rounds of one configuration take the finished runs in name order), else ``pending``."""
    entries, used = [], set()
    for name, config, round_ in points:
        wanted = dataclasses.asdict(config)
        match = next(
            (run for run, recorded in done
             if run not in used and _config_matches(recorded, wanted)),
            None,
        )  # fmt: skip
        if match:
            used.add(match)
        entry = {
            "name": name,
            "config": wanted,
            "status": "skipped" if match else "pending",
            "run": match,
            "duration_s": None,
            "error": None,
        }
        if round_ is not None:
            entry["round"] = round_
        entries.append(entry)
    return entries


BASELINE_FILE = "compute-baseline.jsonl"


def _baselines_todo(
    sweep_dir: Path, base: RunConfig, grid: dict[str, list], rounds: int
) -> dict[int, list[int]]:
    """round -> process counts whose raw compute is still to measure (1 and max(np))."""
    from workshop.readers.sweep import read_compute_baseline

    counts = sorted({1, max(grid.get("np") or [base.np])})
    done = read_compute_baseline(sweep_dir)
    have = set(zip(done["round"], done["procs"], strict=True)) if len(done) else set()
    return {r: [n for n in counts if (r, n) not in have] for r in range(1, rounds + 1)}


def _check_baseline_grid(grid: dict[str, list]) -> None:
    """Raises ValueError when the grid varies the data set, the batch size or the framework
    (whose step would the compute baseline time?)."""
    for key in ("dataset", "batch_size", "framework"):
        if len(grid.get(key) or []) > 1:
            raise ValueError(f"sweep: --compute-baseline times one network and batch size; the "
                             f"grid varies {key} ({grid[key]}): sweep them apart")  # fmt: skip


def _record_baseline(
    sweep_dir: Path,
    base: RunConfig,
    round_: int,
    procs: int,
    record: bool,
    report: Callable[[str], None],
) -> None:
    """Measure the raw compute of ``procs`` independent processes (the sweep's network and
    per-worker batch) and append it to ``compute-baseline.jsonl``; recorded on a quiet machine
    like the runs when ``record`` (a disturbed measurement is taken again)."""
    from workshop.launch import quiet
    from workshop.train.compute_probe import measure

    def probe() -> dict:
        return measure(base.dataset, base.batch_size, procs)

    if record:
        result, recording = quiet.quietly(
            probe, label=lambda _: f"r{round_} compute x{procs}", report=report
        )
    else:
        with quiet.measured() as load:
            result = probe()
        recording = quiet.describe(load, quiet.max_foreign_cores(), disturbed_attempts=[])
    result = {"round": round_, **result, "recording": recording}
    with open(sweep_dir / BASELINE_FILE, "a") as handle:
        handle.write(json.dumps(result) + "\n")


def _run_point(
    entry: dict,
    config: RunConfig,
    sweep_dir: Path,
    launcher: Callable[..., Path],
    command: list[str] | None,
    report: Callable[[str], None],
    record: bool = False,
) -> None:
    """Run one point and record in its manifest ``entry`` how it ended. A failed run is
    reported and the sweep goes on; a stopped one (Ctrl-C, SIGTERM, SIGHUP) stops the sweep
    too, so the exception is raised again. With ``record``, on a quiet machine (a point whose
    every attempt was disturbed, or that found no quiet moment, is ``failed``)."""
    from workshop.launch import quiet

    # Other work on the machine skews timings: record the load each point started at.
    entry["loadavg_1min"] = round(os.getloadavg()[0], 2)
    start = time.perf_counter()

    def launch() -> Path:
        return launcher(config, out_dir=sweep_dir, name=entry["name"], quiet=True,
                        command=command)  # fmt: skip

    try:
        if record:
            # the setting: the point's name without its round and index (``fp16``, ``np2``)
            setting = entry["name"].split("-", 2 if "round" in entry else 1)[-1]
            extra = {"point": entry["name"], "setting": setting} | (
                {"round": entry["round"]} if "round" in entry else {}
            )
            run_dir = quiet.recorded(launch, extra=extra, report=report)
        else:
            run_dir = launch()
        entry["status"] = "ok"
        entry["run"] = Path(run_dir).name
        if record:  # the load the run started at, after its wait for a quiet machine
            recorded = json.loads((Path(run_dir) / "run.json").read_text())["recording"]
            entry["loadavg_1min"] = recorded["loadavg_before"][0]
    except (RunInterrupted, KeyboardInterrupt):
        entry["status"] = "interrupted"
        entry["run"] = _newest_run(sweep_dir, entry["name"])
        raise
    except (RunError, quiet.BusyMachine) as exc:
        entry["status"] = "failed"
        entry["error"] = str(exc)
        entry["run"] = _newest_run(sweep_dir, entry["name"])
        report(f"{entry['name']}: FAILED: {exc}")
    finally:
        entry["duration_s"] = round(time.perf_counter() - start, 3)


def _newest_run(sweep_dir: Path, name: str) -> str | None:
    candidates = sorted(
        (p for p in sweep_dir.glob(f"{name}*") if (p / "run.json").exists()),
        key=lambda p: p.stat().st_mtime,
    )
    return candidates[-1].name if candidates else None


def summarize(sweep_dir: str | Path, manifest: dict | None = None) -> pd.DataFrame:
    """The sweep's summary table (see :func:`run_sweep`), from its manifest and run folders.

    Raises:
        FileNotFoundError: if the folder has no sweep.json and no manifest is given.
    """
    from workshop.readers.runs import read_metrics, read_summary

    sweep_dir = Path(sweep_dir)
    if manifest is None:
        path = sweep_dir / "sweep.json"
        if not path.exists():
            raise FileNotFoundError(f"{path}: missing; is {sweep_dir} a sweep directory?")
        manifest = json.loads(path.read_text())
    varying = [k for k, v in manifest.get("grid", {}).items() if len(v) > 1]
    if manifest.get("one_at_a_time"):
        varying = []  # every point differs from the baseline in one knob: its name says which
    rows = []
    for entry in manifest["points"]:
        row = {"point": entry["name"]}
        if "round" in entry:
            row["round"] = entry["round"]
        row |= {k: entry["config"].get(k) for k in varying}
        row |= {"status": entry["status"], "run": entry["run"], "duration_s": entry["duration_s"]}
        accuracy = rate = float("nan")
        if entry["run"] and (sweep_dir / entry["run"]).is_dir():
            metrics = read_metrics(sweep_dir / entry["run"])
            summary = read_summary(sweep_dir / entry["run"]) or {}
            if len(metrics):
                steady = metrics.iloc[1:] if len(metrics) > 1 else metrics
                rate = float(pd.to_numeric(steady["samples_per_s"]).median())
                accuracy = float(metrics["test_accuracy"].iloc[-1])
            accuracy = summary.get("final_test_accuracy", accuracy)
            if row["duration_s"] is None:
                row["duration_s"] = summary.get("total_time_s")
        row |= {"final_test_accuracy": accuracy, "samples_per_s": rate}
        rows.append(row)
    return pd.DataFrame(rows)
