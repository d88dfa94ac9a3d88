"""``workshop run --script ... --profile-steps N``: one torch.profiler Chrome trace per rank of
a learner's PyTorch script, for N optimizer steps after one skipped and one warm-up step
(``torch.profiler.schedule(wait=1, warmup=1, active=N, repeat=1)``: the first step builds
DDP's buckets and pays one-time costs, the second warms the profiler up), CPU activity with
the ops' input shapes (the trace tools read a collective's bytes from them:
:mod:`workshop.readers.torch_trace`).

The runner starts the profiler before the script runs and steps it after each optimizer step
(the recorder's ``step`` hook); the trace is written when the N steps end, or when the script
ends first (whatever was recorded by then), as ``traces/rank<N>.json.gz``. Open one in
https://ui.perfetto.dev ("Open trace file": it runs in the browser, nothing is uploaded).
Profiling is not free: each profiled step runs slower (every op is recorded), and the step that
ends the profiled ones also writes the trace, so read the step times of a profiled run
outside those steps.
"""

from __future__ import annotations

from pathlib import Path

from workshop.rules import PROFILE_SKIPPED_STEPS as SKIPPED
from workshop.rules import PROFILE_WARMUP_STEPS as WARMUP


def trace_path(traces: Path, rank: int) -> Path:
    """Where rank ``rank``'s trace goes: gzipped as torch's ``export_chrome_trace`` writes a
    ``.gz`` path (a trace of a few steps of a small CNN is 0.8 MB of JSON, 66 kB gzipped);
    the trace tools and Perfetto read it as it is."""
    return Path(traces) / f"rank{rank}.json.gz"


def start(recorder, steps: int, traces: Path, rank: int):
    """Start torch.profiler for ``steps`` optimizer steps (after :data:`SKIPPED` and
    :data:`WARMUP`), stepped by ``recorder``'s ``step`` hook; returns the profiler, which
    the runner stops when the script ends."""
    import torch

    Path(traces).mkdir(parents=True, exist_ok=True)
    out = trace_path(traces, rank)

    def write(prof) -> None:
        prof.export_chrome_trace(str(out))

    schedule = torch.profiler.schedule(wait=SKIPPED, warmup=WARMUP, active=steps, repeat=1)
    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=schedule,
        on_trace_ready=write,
        record_shapes=True,
    )
    prof.start()
    step = recorder.step

    def on_step(*args, **kwargs):
        result = step(*args, **kwargs)
        recorder.safely("profiler", prof.step)
        return result

    recorder.step = on_step
    return prof
