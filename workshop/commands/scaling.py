"""``workshop scaling report PATH...``: scaling findings, with numbers, from runs or logs.

PATH can be a sweep directory, a folder of run directories or one run directory (``workshop
run`` / ``workshop sweep`` output); per-epoch text logs like seed 000's (``Epoch 1:  training
3.94(s) - testing 0.28(s)``, several files, a folder of them, or one document holding several
runs); or result tables like seed 004's (several tables about the same runs are merged by worker
count; a folder of them too).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

from workshop.analysis import scaling, tuning
from workshop.findings.lr import lr_findings
from workshop.findings.scaling import plateau_findings, scaling_findings
from workshop.units import json_safe


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "scaling",
        help="speedup, efficiency and batch-size/LR findings from runs, sweeps or logs",
        description="Scaling analyses: speedup and efficiency three ways (wall time, training "
        "time, throughput), first-epoch overhead, Amdahl and linear fits, batch-size plateau, "
        "LR rules.",
    )
    sub = parser.add_subparsers(dest="scaling_command", metavar="SUBCOMMAND")
    report = sub.add_parser(
        "report",
        help="print the findings with numbers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    report.add_argument(
        "--json",
        action="store_true",
        help="print JSON: speedup and efficiency per np for each metric (wall, train, "
        "throughput) and first_epoch_overhead_s per np",
    )
    report.set_defaults(func=main)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _per_np(frame: pd.DataFrame, column: str) -> dict[str, float | None]:
    out = {}
    for n, value in zip(frame["np"], frame[column], strict=True):
        value = float(value)
        out[str(int(n))] = None if math.isnan(value) else round(value, 6)
    return out


def _load(paths: list[Path]) -> dict:
    """Read the inputs into {kind, runs?, epochs?, table}. Raises ValueError/FileNotFoundError."""
    from workshop.readers import logs

    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file or directory")
    if len(paths) == 1 and paths[0].is_dir():
        folder = paths[0]
        if (folder / "run.json").exists() or any(folder.glob("*/run.json")):
            from workshop.readers.sweep import read_sweep

            runs, epochs = read_sweep(folder)
            return {"kind": "runs", "runs": runs, "epochs": epochs}
        paths = _folder_logs(folder)
    if any(p.is_dir() for p in paths):
        raise ValueError("give one run/sweep directory, or one or more text files, not both")
    tables = [t for p in paths for t in logs.read_tables(p) if "np" in t]
    if tables:
        return {"kind": "table", "table": logs.merge_tables(tables)}
    epochs = logs.read_epoch_logs(paths)
    return {"kind": "epoch-log", "epochs": epochs}


def _folder_logs(folder: Path) -> list[Path]:
    """The epoch logs, or the result tables, of a folder without run directories."""
    from workshop.readers import logs

    found = logs.find_logs(folder)
    if found["epoch_logs"] and found["tables"]:
        names = ", ".join(p.name for p in found["epoch_logs"] + found["tables"])
        raise ValueError(
            f"{folder}: holds both epoch logs and result tables ({names}); they describe "
            "different runs: give the files of one kind"
        )
    files = found["epoch_logs"] or found["tables"]
    if not files:
        raise ValueError(
            f"{folder}: no run directories, epoch logs or result tables inside (epoch logs have "
            "lines like 'Epoch 1:  training 3.94(s) - testing 0.28(s)')"
        )
    return files


def _scaling_block(runs: pd.DataFrame, epochs: pd.DataFrame | None) -> dict:
    table = scaling.speedup_table(runs)
    overhead = None
    if epochs is not None and len(epochs) and "np" in epochs:
        overhead = scaling.first_epoch_overhead(epochs)
    return {"table": table, "overhead": overhead}


def build_report(paths: list[Path]) -> dict:
    """Analyse the inputs; returns the blocks the text and JSON outputs print.

    Raises:
        ValueError, FileNotFoundError: for unreadable inputs (naming file and line).
    """
    data = _load(paths)
    report: dict = {"source": [str(p) for p in paths], "kind": data["kind"], "groups": []}
    if data["kind"] == "table":
        block = _scaling_block(data["table"], None)
        block["key"] = {}
        report["groups"].append(block)
        return report
    if data["kind"] == "epoch-log":
        epochs = data["epochs"]
        block = _scaling_block(scaling.runs_from_epochs(epochs), epochs)
        block["key"] = {}
        block["wall_label"] = "train + test time of all epochs (the logs hold no init time)"
        report["groups"].append(block)
        return report
    runs, epochs = data["runs"], data["epochs"]
    report["runs"] = runs
    for key, group in scaling.scaling_groups(runs):
        group_epochs = epochs[epochs["run"].isin(group["run"])] if len(epochs) else None
        block = _scaling_block(group, group_epochs)
        block["key"] = key
        if {"steps", "steady_epoch_time_s"} <= set(group) and group["np"].min() == 1:
            block["sync"] = scaling.sync_overhead(group)
        report["groups"].append(block)
    if not report["groups"] and len(epochs):
        report["overhead_only"] = scaling.first_epoch_overhead(epochs)
    one_worker = runs[(runs["np"] == 1) & (runs["lr_scaling"].isin(["none"]))]
    if one_worker["batch_size"].nunique() >= 2:
        report["plateau"] = scaling.batch_size_plateau(one_worker)
    if runs[["fusion_threshold_mb", "cycle_time_ms"]].notna().any(axis=None):
        tuned = runs[runs["np"] > 1].dropna(subset=["samples_per_s"])
        if len(tuned[["fusion_threshold_mb", "cycle_time_ms"]].drop_duplicates()) > 1:
            report["tuning"] = tuning.tuning_table(tuned)
    report["lr"] = lr_findings(runs)
    comm = _comm_model(runs)
    if comm:
        report["comm"] = comm
    return report


def _comm_model(runs: pd.DataFrame) -> dict | None:
    """The ring-allreduce model of the runs' timelines (analysis.commodel does the work)."""
    import warnings

    from workshop.analysis import commodel
    from workshop.readers.timeline import read_timeline

    spans = {}
    for row in runs.itertuples():
        path = Path(row.path) / "timeline.json"
        if row.np >= 2 and path.exists():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # unclosed spans at the end are expected
                spans[row.run] = read_timeline(path).spans
    model = commodel.comm_model_vs_measurement(runs, spans)
    if model is None:
        return None
    if "error" in model:
        return {"error": model["error"]}
    out = {key: model[key] for key in ("fit", "timelines", "prediction_error") if key in model}
    if "prediction_error" not in model:
        out |= {"run": model["run"], "inputs": model["inputs"]}
        if model["comparison"] is not None:
            out["comparison"] = model["comparison"]
        else:
            out["prediction"] = model["prediction"]
    return out


def _describe_key(key: dict) -> str:
    shown = {k: v for k, v in key.items() if v not in (None, False)}
    return ", ".join(f"{k}={v}" for k, v in shown.items()) or "all runs"


def print_text(report: dict) -> None:
    fmt = {"float_format": lambda v: f"{v:.3f}", "index": False}
    print(f"scaling report: {' '.join(report['source'])} ({report['kind']})")
    if "runs" in report:
        runs = report["runs"]
        cores = runs["cores"].dropna()
        machine = f"{int(cores.iloc[0])} cores" if len(cores) else "unknown cores"
        nps = ", ".join(str(int(n)) for n in sorted(runs["np"].unique()))
        print(f"{len(runs)} finished runs, np {nps}, machine {machine}")
        if runs.get("oversubscribe", pd.Series(dtype=bool)).fillna(False).any():
            print("NOTE: some runs were oversubscribed (more ranks than cores).")
    if not report["groups"]:
        print("\nNo runs that differ only in the worker count: no speedup to compute.")
        if "overhead_only" in report:
            print(report["overhead_only"].to_string(**fmt))
    for block in report["groups"]:
        print(f"\n== speedup and efficiency ({_describe_key(block['key'])})")
        cols = ["np"] + [
            f"{kind}_{m}" for m in scaling.METRICS for kind in ("speedup", "efficiency")
        ]
        reported = [c for c in block["table"] if c.startswith("speedup_reported")]
        print(block["table"][cols + reported].to_string(**fmt))
        if block["overhead"] is not None:
            print("\nfirst epoch vs steady state:")
            print(block["overhead"].to_string(**fmt))
        if "sync" in block:
            print("\nsynchronisation cost estimated from step times (vs np=1):")
            print(block["sync"].to_string(**fmt))
        print()
        labels = {"wall_label": block["wall_label"]} if "wall_label" in block else {}
        for line in scaling_findings(block["table"], block["overhead"], **labels):
            print(f"- {line}")
    if "plateau" in report:
        p = report["plateau"]
        print("\n== time per epoch vs batch size (one worker, fixed LR)")
        print(p["table"].to_string(**fmt))
        for line in plateau_findings(p):
            print(f"- {line}")
    if "tuning" in report:
        print("\n== Horovod tuning knobs (np > 1)")
        print(report["tuning"].to_string(**fmt))
    if "comm" in report:
        _print_comm(report["comm"], fmt)
    if report.get("lr"):
        print("\n== batch size and learning rate")
        for line in report["lr"]:
            print(f"- {line}")


def _print_comm(comm: dict, fmt: dict) -> None:
    print("\n== ring-allreduce model t = 2(N-1) alpha + 2(N-1)/N bytes/B, fitted to timelines")
    if "error" in comm:
        print(f"- no fit: {comm['error']}")
        return
    fit = comm["fit"]
    print(
        f"- alpha = {fit['alpha_us']:.1f} us, B = {fit['bandwidth_bytes_per_s'] / 1e6:.0f} MB/s "
        f"(fastest 10% per message size, {fit['ops']} sizes from {comm['timelines']} "
        f"timelines, {fit['bytes_min']:.0f}-{fit['bytes_max']:.0f} bytes, R^2 {fit['r2']:.2f})"
    )
    if "prediction_error" in comm:
        print(f"- no prediction: {comm['prediction_error']}")
        return
    inputs = comm["inputs"]
    print(
        f"- from run {comm['run']}: {inputs['bytes_per_step'] / 1e3:.0f} kB in "
        f"{inputs['allreduces_per_step']:.1f} allreduces per step; modelled communication "
        f"{inputs['comm_time_s'] * 1e3:.2f} ms, compute {inputs['compute_time_s'] * 1e3:.2f} ms "
        "per step"
    )
    if "unexplained_s" in inputs:
        print(
            f"- but one worker alone needs {inputs['np1_step_time_s'] * 1e3:.2f} ms per step: "
            f"{inputs['unexplained_s'] * 1e3:.2f} ms per step at np={inputs['np_run']} are "
            "neither compute nor modelled transfer (waiting for the other rank, negotiation, "
            "ranks competing for cores); the model cannot predict what it does not contain"
        )
    table = comm.get("comparison", comm.get("prediction"))
    print(table.to_string(**fmt))


def json_report(report: dict) -> dict:
    """The machine-readable report: per-np speedup / efficiency per metric, first-epoch
    overhead per np, for the primary group (most worker counts); every group under
    ``groups``."""
    groups = []
    for block in report["groups"]:
        table = block["table"]
        entry = {
            "key": json_safe(block["key"]),
            "np": [int(n) for n in table["np"]],
            "speedup": {m: _per_np(table, f"speedup_{m}") for m in scaling.METRICS},
            "efficiency": {m: _per_np(table, f"efficiency_{m}") for m in scaling.METRICS},
            "first_epoch_overhead_s": (
                _per_np(block["overhead"], "first_epoch_overhead_s")
                if block["overhead"] is not None
                else {}
            ),
        }
        reported = [c for c in table if c.startswith("speedup_reported")]
        if reported:
            entry["speedup_reported"] = {c: _per_np(table, c) for c in reported}
        if len(table) >= 2:
            m = next(
                (
                    m
                    for m in ("throughput", "train", "wall")
                    if table[f"speedup_{m}"].notna().all()
                ),
                None,
            )
            if m:
                entry["amdahl"] = {"metric": m} | scaling.amdahl_fit(
                    table["np"], table[f"speedup_{m}"]
                )
                entry["linear"] = {"metric": m} | scaling.linear_fit(
                    table["np"], table[f"speedup_{m}"]
                )
        groups.append(entry)
    out: dict = {"source": report["source"], "kind": report["kind"]}
    primary = groups[0] if groups else {}
    for key in ("np", "speedup", "efficiency", "first_epoch_overhead_s"):
        out[key] = primary.get(key, {} if key != "np" else [])
    out["groups"] = groups
    if "plateau" in report:
        out["batch_size_plateau"] = {k: v for k, v in report["plateau"].items() if k != "table"}
    if report.get("lr"):
        out["lr_findings"] = report["lr"]
    if "comm" in report:
        comm = {k: v for k, v in report["comm"].items() if k not in ("comparison", "prediction")}
        table = report["comm"].get("comparison", report["comm"].get("prediction"))
        if table is not None:
            comm["table"] = table.to_dict(orient="records")
        out["comm_model"] = comm
    return json_safe(out)


def main(args: argparse.Namespace) -> int:
    try:
        report = build_report(args.paths)
    except (ValueError, FileNotFoundError) as exc:
        print(f"workshop scaling report: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(json_report(report), indent=2))
    else:
        print_text(report)
    return 0
