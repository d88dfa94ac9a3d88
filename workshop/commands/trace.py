"""``workshop trace``: read a DDP run's torch.profiler traces (one per rank) like a timeline.

    workshop trace report TRACE [TRACE ...]           where a step goes, in words, with numbers
    workshop trace summary TRACE [TRACE ...] [--json] the key numbers, per rank
    workshop trace summary TRACE ... --steps          one line per rank and step

TRACE is a Chrome trace that ``torch.profiler`` wrote (``prof.export_chrome_trace(path)``, or
``tensorboard_trace_handler``'s ``*.pt.trace.json[.gz]``), or a folder of them.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

PERFETTO = (
    "To look at a trace: open https://ui.perfetto.dev, click 'Open trace file' and pick the "
    "file (Perfetto runs in the browser: the file is not uploaded); each thread is a row, the "
    "ProfilerStep#N spans mark the steps, the gloo:all_reduce bars on the pt_gloo_runloop "
    "threads are the buckets' allreduces (with NCCL: the nccl kernels on the GPU's stream). "
    "chrome://tracing opens it too."
)
RECORDING = (
    "Record one trace per rank with torch.profiler.profile(schedule=torch.profiler.schedule("
    "wait=1, warmup=1, active=3), on_trace_ready=..., record_shapes=True) and prof.step() "
    "after each training step (tests/check_scripts/ddp_profiled.py is an example)."
)


def register(subparsers: Any) -> None:
    """Add ``workshop trace`` and its sub-commands."""
    parser = subparsers.add_parser(
        "trace",
        help="analyse torch.profiler traces of a DDP run (report, summary)",
        description="Read torch.profiler Chrome traces, one per rank, like a Horovod "
        "timeline: compute against communication, the communication hidden under the "
        f"backward pass, buckets, and which rank the others wait for. {RECORDING} {PERFETTO}",
    )
    sub = parser.add_subparsers(dest="trace_command", metavar="ACTION")
    sub.required = True
    traces_help = "trace files (one per rank) or a folder of them"

    report = sub.add_parser(
        "report", help="where a step goes, in words, with numbers", description=PERFETTO
    )
    report.add_argument("traces", nargs="+", metavar="TRACE", help=traces_help)
    report.set_defaults(func=_report)

    summary = sub.add_parser("summary", help="the key numbers", description=PERFETTO)
    summary.add_argument("traces", nargs="+", metavar="TRACE", help=traces_help)
    how = summary.add_mutually_exclusive_group()
    how.add_argument("--json", action="store_true", help="print one JSON object")
    how.add_argument("--steps", action="store_true", help="one line per rank and step")
    summary.set_defaults(func=_summary)


def _read(paths: list[str]) -> list | None:
    """The traces, ordered by rank; None after a message on stderr."""
    from workshop.readers.torch_trace import TorchTraceError, read_torch_traces

    try:
        return read_torch_traces(paths)
    except (FileNotFoundError, TorchTraceError, PermissionError, IsADirectoryError) as exc:
        print(f"workshop trace: {exc}", file=sys.stderr)
        return None


def _report(args: argparse.Namespace) -> int:
    from workshop.analysis.torch_trace import trace_summary
    from workshop.findings.torch_trace import torch_trace_findings

    traces = _read(args.traces)
    if traces is None:
        return 2
    print("\n".join(torch_trace_findings(trace_summary(traces))))
    return 0


def _summary(args: argparse.Namespace) -> int:
    from workshop.analysis.torch_trace import step_breakdown, trace_summary

    traces = _read(args.traces)
    if traces is None:
        return 2
    if args.steps:
        table = step_breakdown(traces)
        print(table.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
        return 0
    summary = trace_summary(traces)
    if args.json:
        print(json.dumps(summary))
        return 0
    for key, value in summary.items():
        if key == "per_rank":
            for rank, numbers in value.items():
                print(f"rank {rank}:")
                for k, v in numbers.items():
                    print(f"  {k}: {v}")
        else:
            print(f"{key}: {value}")
    return 0
