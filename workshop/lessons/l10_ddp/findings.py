"""The findings lesson 10 (notebooks/10-from-horovod-to-ddp.ipynb) states, in sentences with
their numbers computed from the recordings: the same model's Horovod run (lesson 08's fusion
sweep: timelines) and DDP run (data/ddp-lesson: torch.profiler traces per rank), DDP's buckets
against Horovod's fusion, the recorded ``workshop check`` of the lesson's DDP script.
"""

from __future__ import annotations

import json
import re
import warnings
from functools import cache
from pathlib import Path

import pandas as pd

from workshop.analysis import knob_effect, step_breakdown, trace_summary
from workshop.findings.diagnose import diagnose_run, diagnose_text
from workshop.lessons.l08_tuning.findings import fusion_comm, sweep_runs
from workshop.readers.runs import read_step_times
from workshop.readers.torch_trace import TorchTrace, read_torch_traces
from workshop.rules import first_unprofiled_step


def _path(run) -> str:
    return str(Path(getattr(run, "path", run)).resolve())


@cache
def _traces(path: str) -> tuple[TorchTrace, ...]:
    return tuple(read_torch_traces([Path(path) / "traces"]))


def traces(run) -> list[TorchTrace]:
    """The torch.profiler traces of a recording (its ``traces/`` folder), one per rank."""
    return list(_traces(_path(run)))


@cache
def _summary(path: str) -> dict:
    return trace_summary(list(_traces(path)))


def summary(run) -> dict:
    """:func:`workshop.analysis.trace_summary` of a recording's traces."""
    return _summary(_path(run))


def buckets_per_step(run) -> int:
    """Bucket allreduces per step (the same on every rank and step, else ValueError)."""
    counts = {c for rank in summary(run)["per_rank"].values() for c in rank["buckets_per_step"]}
    if len(counts) != 1:
        raise ValueError(f"{_path(run)}: bucket counts differ between steps or ranks: {counts}")
    return counts.pop()


def overlap_fraction(run) -> float:
    """The share of the allreduces' busy time that fell inside the backward pass, over every
    rank and profiled step (:func:`workshop.analysis.step_breakdown`'s ``overlap_us`` over
    ``comm_busy_us``)."""
    table = step_breakdown(traces(run))
    return float(table.overlap_us.sum() / table.comm_busy_us.sum())


def step_ms(run) -> float:
    """The median step over every rank's steps after the profiled ones (the run's step files,
    ``logs/rank.N.steps.csv``, from :func:`workshop.rules.first_unprofiled_step` of its
    ``--profile-steps`` on: steps the profiler did not slow), in ms."""
    path = Path(_path(run))
    config = json.loads((path / "run.json").read_text()).get("config") or {}
    steps = read_step_times(path)
    later = steps[steps["step"] >= first_unprofiled_step(config.get("profile_steps"))]
    if later.empty:
        raise ValueError(f"{path}: no step after the profiled ones in its step files")
    return float(later["step_s"].median() * 1e3)


@cache
def _rounds(path: str) -> pd.DataFrame:
    rows = []
    for folder in sorted(Path(path).glob("round-*")):
        row = {"round": int(folder.name.split("-")[1])}
        for setting in ("default", "cap0"):
            run = folder / setting
            row[f"{setting}_step_ms"] = step_ms(run)
            row[f"{setting}_buckets"] = buckets_per_step(run)
            row[f"{setting}_overlap"] = overlap_fraction(run)
            table = step_breakdown(traces(run))
            row[f"{setting}_busy_ms"] = float(table.comm_busy_us.median() / 1e3)
            row[f"{setting}_exposed_ms"] = float(table.exposed_comm_us.median() / 1e3)
        rows.append(row)
    if not rows:
        raise FileNotFoundError(f"{path}: no round-N folders (scripts/record_lesson10.py)")
    table = pd.DataFrame(rows).set_index("round")
    table["ratio"] = table.cap0_step_ms / table.default_step_ms
    return table


def bucket_rounds(buckets) -> pd.DataFrame:
    """Per round (index ``round``) of ``data/ddp-lesson/buckets``: ``<setting>_step_ms``
    (:func:`step_ms`), ``<setting>_buckets``, ``<setting>_overlap``, ``<setting>_busy_ms``
    (median per step of the time an allreduce ran) and ``<setting>_exposed_ms`` (of the part
    of it outside the backward pass) for ``default`` (DDP's 25 MiB) and ``cap0``
    (``bucket_cap_mb=0``), and ``ratio``: cap0's step over the default's in the same round (the
    two ran one after the other)."""
    return _rounds(_path(buckets))


def cap0_cost(buckets) -> float:
    """The median over the rounds of cap0's step time over the default's."""
    return float(bucket_rounds(buckets).ratio.median())


def horovod_fusion(fusion) -> pd.DataFrame:
    """Lesson 08's fusion sweep of the same model per threshold (MB, index): collective
    operations and bytes per step (its traced runs), and ``ratio``: the median throughput
    over the 128 MB default's (repeats)."""
    with warnings.catch_warnings():
        # a timeline cut while a tensor was in flight (lesson 08 says so): one open span
        warnings.filterwarnings("ignore", message=r".*spans have no 'E'")
        comm = fusion_comm(fusion)[["ops_per_step", "bytes_per_step", "tensors_per_step"]]
    effect = knob_effect(sweep_runs(fusion), "fusion_threshold_mb", "samples_per_s", 128)
    return comm.join(effect.set_index("fusion_threshold_mb")[["ratio", "runs"]])


def same_model(fusion, ddp) -> str:
    hvd, first = horovod_fusion(fusion).loc[128.0], summary(ddp)["per_rank"][0]
    return (
        f"Horovod reduced the model's **{hvd.tensors_per_step:.0f}** gradient tensors, "
        f"**{hvd.bytes_per_step:,.0f}** bytes per step, and DDP's trace shows "
        f"**{first['bytes_per_step']:,}** bytes per step: the same gradients. Horovod, with "
        "its 128 MiB fusion "
        f"buffer, needed **{hvd.ops_per_step:.2f}** allreduces per step on average: it fuses "
        "what every rank has ready in one cycle, and the gradients of one backward pass "
        "become ready over more than one 1 ms cycle. DDP, with its 25 MiB buckets, ran "
        f"**{buckets_per_step(ddp)}** allreduce per step: its buckets are fixed before "
        "training, and all of this model fits in one."
    )


def one_bucket(ddp) -> str:
    first = summary(ddp)["per_rank"][0]
    return (
        f"With one bucket, DDP starts its allreduce when the whole bucket is ready, at the end "
        f"of the backward pass: **{overlap_fraction(ddp):.0%}** of the communication ran "
        f"during the backward pass (rank 0: a {first['median_step_us'] / 1e3:.1f} ms step, "
        f"{first['median_backward_us'] / 1e3:.1f} ms of backward pass, the allreduce busy "
        f"{first['median_comm_busy_us'] / 1e3:.1f} ms, its end "
        f"{first['median_after_backward_us'] / 1e3:.1f} ms after the backward pass)."
    )


def buckets_table(buckets) -> str:
    table = bucket_rounds(buckets)
    lines = ["| round | step (ms) | buckets | allreduce busy (ms) | during backward | "
             "exposed (ms) | cap 0 / default |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for n, row in table.iterrows():
        lines.append(
            f"| {n} | {row.default_step_ms:.1f} / {row.cap0_step_ms:.1f} | "
            f"{row.default_buckets:.0f} / {row.cap0_buckets:.0f} | "
            f"{row.default_busy_ms:.1f} / {row.cap0_busy_ms:.1f} | "
            f"{row.default_overlap:.0%} / {row.cap0_overlap:.0%} | "
            f"{row.default_exposed_ms:.1f} / {row.cap0_exposed_ms:.1f} | {row.ratio:.2f} |"
        )
    lines.append("")
    lines.append(
        "Each cell: DDP's default buckets / `bucket_cap_mb=0`. Step: the median over both "
        "ranks of the steps after the profiled ones (the run's step files); busy and exposed: "
        "medians per profiled step (the traces); during backward: the share of the busy time, "
        "over all profiled steps."
    )
    return "\n".join(lines)


def buckets_cost(buckets, fusion) -> str:
    table, hvd = bucket_rounds(buckets), horovod_fusion(fusion).loc[0.0]
    same_side = "every round" if (table.ratio > 1).all() else "not every round"
    exposed_more = table.cap0_exposed_ms.median() > table.default_exposed_ms.median()
    return (
        f"`bucket_cap_mb=0` made the step **{cap0_cost(buckets):.2f}x** as long (median of "
        f"{len(table)} rounds, {table.ratio.min():.2f}x to {table.ratio.max():.2f}x; longer "
        f"in {same_side}), although up to {table.cap0_overlap.max():.0%} of its communication "
        f"now ran during the backward pass: its {table.cap0_buckets.iloc[0]:.0f} allreduces "
        f"kept Gloo busy {table.cap0_busy_ms.median():.1f} ms per step against "
        f"{table.default_busy_ms.median():.1f} ms for the default's one, and "
        f"{table.cap0_exposed_ms.median():.1f} ms of it ran outside the backward pass against "
        f"{table.default_exposed_ms.median():.1f} ms (medians over the rounds): "
        f"{'more' if exposed_more else 'less'} waiting for the allreduces after the backward "
        "pass. Horovod with fusion off "
        f"({hvd.ops_per_step:.0f} allreduces per step) reached {hvd.ratio:.2f}x the default's "
        f"throughput (lesson 08, median of {hvd.runs:.0f} runs each, not interleaved): a step "
        f"{1 / hvd.ratio:.2f}x as long."
    )


def _check(check, name: str) -> dict:
    path = Path(_path(check)) / f"{name}.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{path}: no recorded check (scripts/record_lesson10.py)") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc


def failed_practices(check, name: str = "mistake") -> list[str]:
    """The practices the recorded ``workshop check`` ``name`` (``mistake``, ``fixed``) FAILed."""
    checks = _check(check, name)["report"]["checks"]
    return [practice for practice, found in checks.items() if found["ok"] is False]


def check_report(check, name: str = "mistake") -> str:
    found = _check(check, name)
    return (
        f"`{' '.join(found['command'])}`, recorded {found['recorded_at'][:10]}:\n\n"
        "```text\n" + found["text"] + "\n```"
    )


def check_fixed(check) -> str:
    mistake, fixed = _check(check, "mistake"), _check(check, "fixed")
    ok = [p for p, f in fixed["report"]["checks"].items() if f["ok"]]
    failing = len(failed_practices(check, "fixed"))
    return (
        f"The fix is lesson 02's `ddp_torch.py`: its recorded check has "
        f"**{failing}** practice{'' if failing == 1 else 's'} failing, {len(ok)} of "
        f"{len(fixed['report']['checks'])} OK (exit code {fixed['report']['exit_code']}; the "
        f"script with the mistake: exit code {mistake['report']['exit_code']})."
    )


def _diagnosis(path: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a reader's note on a cut file is not the lesson's
        return diagnose_run(path)


@cache
def _straggler(path: str) -> dict:
    result = _diagnosis(path)
    top = result["findings"][0] if result["findings"] else {}
    if top.get("problem") != "straggler":
        raise ValueError(f"{path}: workshop diagnose names no straggler first: {top}")
    cost = next(c for c in result["costs"] if c["problem"] == "straggler")
    numbers = cost["numbers"]
    return top | {
        "step_ms": result["step_ms"],
        "compute_ms": numbers["compute_ms"],
        "others_compute_ms": numbers["others_compute_ms"],
    }


def straggler(run) -> tuple[int, float, float]:
    """``workshop diagnose``'s straggler on a run: (its rank, the time per step its fix would
    save in ms, that saving as a share of the step)."""
    top = _straggler(_path(run))
    return int(top["rank"]), float(top["saving_ms"]), float(top["share"])


def diagnosis(run) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = diagnose_text(_path(run))
    return f"`workshop diagnose {Path(_path(run)).name}` says:\n\n```text\n{text}\n```"


def straggler_answer(run) -> tuple[float, float, float]:
    """Exercise 10.5's answer from ``workshop diagnose``: (the straggler's median compute per
    step in ms, the time per step its fix would save in ms, that saving's share of the step)."""
    top = _straggler(_path(run))
    return float(top["compute_ms"]), float(top["saving_ms"]), float(top["share"])


def others_compute_ms(run) -> float:
    """The median compute per step of the ranks that wait for the straggler, ms."""
    return float(_straggler(_path(run))["others_compute_ms"])


def rank_branch(check) -> str:
    """The recorded check of programs/ddp_rank_branch.py (rank 1 skips a layer): which rank
    crashed and with what, which parameters got no gradient, which rank never finished a step."""
    found = _check(check, "rank-branch")
    report = found["report"]
    error = report["error"] or ""
    crashed = re.search(r"crashed on rank (\d+): (\w+): (.+?)\.", error)
    missing = re.search(r"Parameters which did not receive grad for rank (\d+): (.+)", error)
    stuck = sorted({int(r) for c in report["checks"].values()
                    for r in re.findall(r"no optimizer step was seen on rank (\d+)",
                                        c["evidence"])})  # fmt: skip
    if not crashed or not missing:
        raise ValueError(f"{check}: the rank-branch check did not crash with DDP's error")
    waited = ", ".join(f"rank {r}" for r in stuck) or "no rank"
    return (
        f"`{' '.join(found['command'])}` (recorded {found['recorded_at'][:10]}): exit code "
        f"{report['exit_code']}. Rank **{crashed[1]}** stopped with `{crashed[2]}: "
        f"{crashed[3]}.`; the parameters that got no gradient on rank {missing[1]}: "
        f"`{missing[2].strip()}`. The checker saw no optimizer step on **{waited}**: it never "
        "finished its first step, waiting in the allreduce of a bucket rank "
        f"{crashed[1]} never launched, until torchrun stopped it."
    )
