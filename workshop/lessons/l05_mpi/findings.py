"""The findings lesson 05 (notebooks/05-mpi-profiling.ipynb) states, in sentences with their
numbers, from the analyses of :mod:`workshop.analysis.mpi`: each function takes the lesson's
runs (or profiles) and returns Markdown. The lesson shows them through ``wk.finding`` (the
registry, :mod:`workshop.lessons.l05_mpi.exercises`, says which give an answer away).
"""

from __future__ import annotations

from workshop.analysis.mpi import (
    comm_fraction,
    comm_vs_training,
    dominant_routine,
    load_imbalance,
    message_size_bins,
    negotiation_signature,
    routine_table,
)
from workshop.rules import CYCLE_TIME_DEFAULT_MS, NEGOTIATION_ALLREDUCE_BYTES

#: Horovod's cycle time when HOROVOD_CYCLE_TIME is not set, ms, and the size of the one
#: negotiation allreduce per cycle: their one home is workshop.rules (the glossary's too).
HOROVOD_DEFAULT_CYCLE_MS = CYCLE_TIME_DEFAULT_MS
ALLREDUCE = "MPI_Allreduce"
NEGOTIATION_BYTES = NEGOTIATION_ALLREDUCE_BYTES


def negotiations(profile) -> int:
    """Rank 0's 8-byte MPI_Allreduce calls: Horovod's negotiation, one per cycle."""
    bins = message_size_bins(profile, routine=ALLREDUCE)
    return int(bins.loc[bins.avg_bytes == NEGOTIATION_BYTES, "calls"].sum())


def rank0(profile, column: str) -> float:
    return float(comm_fraction(profile).set_index("rank").loc[0, column])


def cycle_ms(run) -> float:
    """The run's HOROVOD_CYCLE_TIME, ms (its run.json; Horovod's default when not set)."""
    return float(run.config.get("cycle_time_ms") or HOROVOD_DEFAULT_CYCLE_MS)


def _table(frame, columns: dict[str, str]) -> str:
    """A small frame as a Markdown table: column -> header."""
    rows = [" | ".join(columns.values()), " | ".join("---:" for _ in columns)]
    for _, row in frame.iterrows():
        rows.append(" | ".join(f"{row[c]:,}" if c != "bin_label" else row[c] for c in columns))
    return "\n".join(f"| {row} |" for row in rows)


def mpi_time(run) -> str:
    return (
        f"Rank 0 spent **{rank0(run, 'comm_s'):.3f} s** of {rank0(run, 'elapsed_s'):.3f} s "
        f"({rank0(run, 'comm_fraction'):.0%}) inside MPI calls."
    )


def slow_elapsed(slow) -> str:
    return (
        f"The {cycle_ms(slow):g} ms run: rank 0 ran **{rank0(slow, 'elapsed_s'):.3f} s** from "
        "MPI_Init to MPI_Finalize."
    )


def signature(run) -> str:
    sig = negotiation_signature(run)
    bins = message_size_bins(run, routine=ALLREDUCE)
    table = _table(bins, {"bin_label": "size", "calls": "calls", "avg_bytes": "avg. bytes"})
    return (
        f"The reader finds {negotiations(run):,} eight-byte calls on rank 0; "
        f"{sig['small_calls']:,} of its {sig['allreduce_calls']:,} MPI_Allreduce calls "
        f"({sig['small_call_share']:.1%}) carry <= 16 bytes.\n\n{table}"
    )


def cycles(run, slow) -> str:
    lines = []
    for one in (run, slow):
        calls, elapsed, ms = negotiations(one), rank0(one, "elapsed_s"), cycle_ms(one)
        lines.append(
            f"- cycle time {ms:g} ms: {calls:,} negotiation allreduces in {elapsed:.1f} s, one "
            f"every {1e3 * elapsed / calls:.2f} ms (at most {elapsed / ms * 1e3:,.0f} possible)"
        )
    return "\n".join(lines)


def training(run) -> str:
    vs = comm_vs_training(run, run.metrics)
    return (
        f"Training: {vs['steps']} steps in {vs['train_s']:.3f} s, {vs['step_ms']:.1f} ms per "
        f"step. Inside MPI: {vs['comm_s']:.3f} s, **{vs['comm_over_train']:.2f}x** the training "
        f"time: were it all lost by training, each step would have lost "
        f"{vs['comm_per_step_ms']:.0f} ms of its {vs['step_ms']:.1f} ms."
    )


def cpu_signature(cpu) -> str:
    top, sig = dominant_routine(cpu), negotiation_signature(cpu)
    return (
        f"- {top['routine']} takes **{top['time_share']:.1%}** of rank 0's MPI time "
        f"({top['calls']:,} calls, {top['avg_bytes']:,.0f} bytes on average).\n"
        f"- {sig['small_calls']:,} of its {sig['allreduce_calls']:,} {ALLREDUCE} calls "
        f"(**{sig['small_call_share']:.1%}**) carry <= {sig['threshold_bytes']:.0f} bytes; they "
        f"take {sig['small_time_share']:.1%} of the allreduce time."
    )


def cpu_ranks(cpu) -> str:
    shares, balance = comm_fraction(cpu).comm_fraction, load_imbalance(cpu)
    return (
        f"Inside MPI: {shares.min():.0%} to {shares.max():.0%} of each rank's elapsed time "
        f"(mean {shares.mean():.0%}); from {balance['min_comm_s']:.1f} s (task "
        f"{balance['min_task']}) to {balance['max_comm_s']:.1f} s (task {balance['max_task']})."
    )


def like_with_like(profile) -> dict[str, float]:
    """Rank 0's MPI time split by message size, and the ranks' median share of time in MPI."""
    sig = negotiation_signature(profile)
    return {
        "ranks": len(comm_fraction(profile)),
        "mpi_s": float(routine_table(profile).time_s.sum()),
        "negotiation_s": sig["small_time_s"],
        "negotiation_calls": sig["small_calls"],
        "gradient_s": sig["large_time_s"],
        "median_comm_fraction": float(comm_fraction(profile).comm_fraction.median()),
    }


def mpi_totals(cpu, gpu) -> str:
    c, g = like_with_like(cpu), like_with_like(gpu)
    return f"MPI time on rank 0: CPU run **{c['mpi_s']:.1f} s**, GPU run **{g['mpi_s']:.1f} s**."


def cpu_vs_gpu(cpu, gpu) -> str:
    c, g = like_with_like(cpu), like_with_like(gpu)
    each = {k: 1e3 * v["negotiation_s"] / v["negotiation_calls"] for k, v in (("c", c), ("g", g))}
    return (
        f"- Negotiation (<= 16-byte allreduces), rank 0: CPU {c['negotiation_s']:.2f} s in "
        f"{c['negotiation_calls']:,} calls ({each['c']:.2f} ms each), GPU "
        f"{g['negotiation_s']:.2f} s in {g['negotiation_calls']:,} calls ({each['g']:.2f} ms "
        f"each): GPU / CPU = **{g['negotiation_s'] / c['negotiation_s']:.2f}**.\n"
        f"- Gradients through MPI (> 16 bytes), rank 0: CPU {c['gradient_s']:.2f} s, GPU "
        f"{g['gradient_s']:.2f} s (NCCL's time is in no MPI profile).\n"
        f"- Time in MPI / elapsed, median over the ranks: CPU {c['median_comm_fraction']:.0%} "
        f"({c['ranks']} ranks), GPU {g['median_comm_fraction']:.0%} ({g['ranks']} ranks)."
    )


def summary(cpu, gpu) -> str:
    top, sig = dominant_routine(cpu), negotiation_signature(cpu)
    c, g = like_with_like(cpu), like_with_like(gpu)
    return (
        f"- The ALCF MPI-profiling tutorial, CPU: {top['routine']} takes "
        f"{top['time_share']:.1%} of rank 0's MPI time, and {sig['small_call_share']:.1%} of "
        "its calls carry <= 16 bytes: negotiation.\n"
        f"- Rank 0's negotiation time is {c['negotiation_s']:.1f} s on CPU and "
        f"{g['negotiation_s']:.1f} s on GPU; the CPU run's other {c['gradient_s']:.1f} s in MPI "
        "are gradients, which on GPU no MPI profile sees."
    )


def summary_answers(run, slow, gpu) -> str:
    vs = comm_vs_training(run, run.metrics)
    share = negotiation_signature(gpu)["small_call_share"]
    return (
        f"- Negotiation is one 8-byte allreduce per background cycle: {negotiations(slow):,} in "
        f"{rank0(slow, 'elapsed_s'):.1f} s at a {cycle_ms(slow):g} ms cycle time.\n"
        f"- Time inside MPI is not training time lost: our rank 0 was inside MPI for "
        f"{vs['comm_over_train']:.2f}x the whole training time ({vs['comm_per_step_ms']:.0f} ms "
        f"per {vs['step_ms']:.1f} ms step, were it all lost).\n"
        f"- On GPUs NCCL carries the gradients: {share:.0%} of the {ALLREDUCE} calls are small."
    )
