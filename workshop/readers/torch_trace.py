"""torch.profiler Chrome traces (``prof.export_chrome_trace(path)``, or
``torch.profiler.tensorboard_trace_handler``'s ``*.pt.trace.json[.gz]``) -> DataFrames.

The format, as torch 2.14.1's profiler (Kineto) writes it: one JSON object with
``traceEvents`` (Chrome trace events: ``ph: "X"`` complete events with ``ts``/``dur`` in
microseconds, ``pid``/``tid``, ``cat``, ``args``), ``distributedInfo`` (``backend``, ``rank``,
``world_size``) when ``torch.distributed`` is initialised, and ``baseTimeNanoseconds``
(``ts`` counts from it). What DDP leaves in it, per training step (the profiler's
``ProfilerStep#N`` annotation, one per ``prof.step()``):

- the backward pass: ``autograd::engine::evaluate_function: ...`` events (on CPU, on the
  thread that called ``backward()``);
- per gradient bucket, once its gradients are ready (torch/csrc/distributed/c10d/reducer.cpp:
  ``Reducer::mark_variable_ready`` -> ``mark_bucket_ready`` -> ``all_reduce_bucket`` ->
  ``run_allreduce_hook``, the process group's ``allreduce``): ``c10d::allreduce_`` on the
  backward's thread, which only hands the bucket to the process group, and then the collective
  itself: with Gloo a ``gloo:all_reduce`` event on one of the process group's worker threads
  (``pt_gloo_runloop``; ProcessGroupGloo.cpp, ``AsyncAllreduceWork``'s profiling title), its
  ``Input Dims`` the bucket's element count when the profile records shapes; with NCCL a
  ``nccl:all_reduce`` annotation, ``record_param_comms`` (its ``In msg nelems`` and ``dtype``)
  and, with CUDA activity, the GPU's ``ncclDevKernel_AllReduce...`` kernel;
- after the backward pass, ``finalize_backward`` (queued on the autograd engine) waits for
  every bucket, with no event of its own, then ``torch.distributed.ddp.reducer::
  copy_bucket_to_grad`` per parameter.

On a GPU run the training thread's ops are the CPU side only (kernels are not counted as
compute here), and when the trace holds NCCL kernels they, not the CPU's ``nccl:*``
annotations, are the collectives' work.

The NCCL names come from torch's source, not from a trace recorded here (the machine has no
GPU); the Gloo ones from traces recorded with tests/check_scripts/ddp_profiled.py. The
standard ``json`` module reads the whole file. Measured on the shared 2-core VM (load 2-3): a
3-step trace of that script, 0.28 MB per rank (756 events, ~370 bytes each), is loaded by
``json`` in 3 ms and read into the tables in 26 ms; a 100-step one, 9.3 MB (24,715 events),
in 0.35 s and 1.3 s (:func:`~workshop.analysis.torch_trace.step_breakdown` 0.3 s more), at
188 MB peak RSS for the whole process. The Python loop over the events takes the time: a
100 MB trace would take some 15 s and 2 GB: profile a few steps, not an epoch.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
#: Bytes per element of the dtype names the profiler writes (``Input type`` of a shape record,
#: ``dtype`` of ``record_param_comms``).
DTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::half": 2,
    "c10::bfloat16": 2,
    "half": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "int": 4,
    "long int": 8,
    "long": 8,
    "int64": 8,
    "int32": 4,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
}
TRACE_SUFFIXES = (".json", ".json.gz")

OPS_COLUMNS = ["name", "category", "thread", "thread_name", "start_us", "dur_us", "end_us", "step"]
COMMS_COLUMNS = [
    "name",
    "collective",
    "kind",
    "thread",
    "start_us",
    "dur_us",
    "end_us",
    "step",
    "elements",
    "bytes",
]


class TorchTraceError(ValueError):
    """The file is not a torch.profiler trace this reader can use; the message names the file
    and what is wrong."""

    def __init__(self, path: str | Path, message: str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: {message}")


class NotATraceError(TorchTraceError):
    """JSON, but not a Chrome trace: no ``traceEvents`` list."""


@dataclass(frozen=True)
class TorchTrace:
    """One rank's torch.profiler trace, read.

    Attributes:
        path: the file.
        rank, world_size, backend: from the trace's ``distributedInfo`` (None when the process
            had no process group).
        host: ``host_name``.
        base_time_ns: ``baseTimeNanoseconds``: every ``*_us`` time below counts from it.
        steps: one row per ``ProfilerStep#N``: ``step`` (N), ``start_us``, ``dur_us``,
            ``end_us``, ``thread`` (the training loop's thread, the "main" thread).
        ops: every CPU event of the trace (``cpu_op``, ``user_annotation``,
            ``python_function`` ...; ``ProfilerStep#N`` and the collectives' work events
            excluded): ``name``, ``category`` (the event's ``cat``), ``thread`` (tid),
            ``thread_name``, ``start_us``, ``dur_us``, ``end_us``, ``step`` (the N of the
            ``ProfilerStep#N`` whose span holds the start; <NA> outside every step).
        comms: the communication events: ``name``, ``collective`` (``all_reduce``,
            ``broadcast``...), ``kind`` (``work``: the collective itself, ``gloo:*`` on a
            Gloo worker thread, a NCCL GPU kernel or, without GPU activity, ``nccl:*``;
            ``call``: ``c10d::*`` and ``record_param_comms``, where the training thread
            hands it over), ``thread``, ``start_us``, ``dur_us``, ``end_us``, ``step``,
            ``elements`` (the tensor's element count; <NA> when the trace has no shapes),
            ``bytes`` (elements x the dtype's size; <NA> when unknown).
        backward: one row per step with autograd events: ``step``, ``start_us`` (first
            ``autograd::engine::evaluate_function`` start), ``end_us`` (last one's end),
            ``dur_us`` (the span, idle gaps inside it included), ``events``.
    """

    path: Path
    rank: int | None
    world_size: int | None
    backend: str | None
    host: str | None
    base_time_ns: int
    steps: pd.DataFrame
    ops: pd.DataFrame
    comms: pd.DataFrame
    backward: pd.DataFrame


def read_torch_trace(path: str | Path) -> TorchTrace:
    """Read one torch.profiler Chrome trace (``.json`` or ``.json.gz``).

    Raises:
        FileNotFoundError: no such file.
        TorchTraceError: not JSON, no ``traceEvents`` list, or no ``ProfilerStep#N`` event
            (the profile was recorded without a schedule and ``prof.step()``), named with the
            file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such trace file")
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except json.JSONDecodeError as exc:
        raise TorchTraceError(path, f"not JSON (line {exc.lineno}, column {exc.colno}: "
                              f"{exc.msg})") from None  # fmt: skip
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
        raise TorchTraceError(path, f"not a JSON text file ({exc})") from None
    return parse_torch_trace(data, path)


def parse_torch_trace(data: Any, source: str | Path = "<trace>") -> TorchTrace:
    """:func:`read_torch_trace` on the already-loaded JSON object ``data`` (``source`` names
    it in errors)."""
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise NotATraceError(
            source,
            "no 'traceEvents' list: not a Chrome trace (torch.profiler's export_chrome_trace "
            "writes one)",
        )
    thread_names = _thread_names(data["traceEvents"])
    spans = [
        e
        for e in data["traceEvents"]
        if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and "dur" in e
    ]
    steps = _steps(spans)
    if steps.empty:
        raise TorchTraceError(
            source,
            "no ProfilerStep#N event: record with a schedule and call prof.step() once per "
            "training step (torch.profiler.schedule(wait=1, warmup=1, active=3))",
        )
    info = data.get("distributedInfo") or {}
    gpu_nccl = any(_comm_kind(str(e.get("name", "")), str(e.get("cat", ""))) == "work"
                   for e in spans if e.get("cat") == "kernel")  # fmt: skip
    comm_rows, op_rows, backward = [], [], {}
    for e in spans:
        name, cat = str(e.get("name", "")), str(e.get("cat", ""))
        if STEP_NAME.match(name) or cat in ("Trace", "gpu_user_annotation"):
            continue
        start, dur = float(e["ts"]), float(e["dur"])
        step = _step_of(steps, start)
        kind = _comm_kind(name, cat)
        if kind == "work" and gpu_nccl and cat != "kernel":
            kind = "call"  # the kernel is the work; the CPU's nccl:* only launched it
        if kind is not None:
            elements, nbytes = _size(e.get("args") or {})
            comm_rows.append(
                [name, _collective(name, e), kind, e.get("tid"), start, dur, start + dur, step,
                 elements, nbytes]
            )  # fmt: skip
            if kind == "work":
                continue
        if cat in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver"):
            continue  # GPU activity and CUDA API calls: not CPU ops
        tid = e.get("tid")
        op_rows.append([name, cat, tid, thread_names.get(tid, ""), start, dur, start + dur, step])
        if name.startswith(BACKWARD_PREFIX) and step is not pd.NA:
            first, last, n = backward.get(step, (math.inf, -math.inf, 0))
            backward[step] = (min(first, start), max(last, start + dur), n + 1)
    ops = pd.DataFrame(op_rows, columns=OPS_COLUMNS).astype({"step": "Int64"})
    comms = pd.DataFrame(comm_rows, columns=COMMS_COLUMNS).astype(
        {"step": "Int64", "elements": "Int64", "bytes": "Int64"}
    )
    rows = [(s, a, b - a, b, n) for s, (a, b, n) in sorted(backward.items())]
    backward_df = pd.DataFrame(rows, columns=["step", "start_us", "dur_us", "end_us", "events"])
    return TorchTrace(
        path=Path(source),
        rank=_int_or_none(info.get("rank")),
        world_size=_int_or_none(info.get("world_size")),
        backend=info.get("backend"),
        host=data.get("host_name"),
        base_time_ns=int(data.get("baseTimeNanoseconds") or 0),
        steps=steps,
        ops=ops,
        comms=comms,
        backward=backward_df.astype({"step": "int64", "events": "int64"}),
    )


def trace_files(paths: list[str | Path]) -> list[tuple[Path, bool]]:
    """The files named by ``paths``, each with whether it was named itself (True) or found in
    a folder (False: a folder's ``*.json`` / ``*.json.gz`` files, sorted). Raises
    FileNotFoundError for a path that does not exist or a folder without such files."""
    found: list[tuple[Path, bool]] = []
    for p in map(Path, paths):
        if p.is_dir():
            inside = sorted(q for q in p.iterdir() if q.name.endswith(TRACE_SUFFIXES))
            if not inside:
                raise FileNotFoundError(f"{p}: no *.json or *.json.gz trace in this folder")
            found.extend((q, False) for q in inside)
        elif p.is_file():
            found.append((p, True))
        else:
            raise FileNotFoundError(f"{p}: no such trace file or folder")
    return found


def read_torch_traces(paths: list[str | Path]) -> list[TorchTrace]:
    """Read one trace per rank (files, or folders of them; see :func:`trace_files`), ordered by
    rank. A trace without ``distributedInfo`` takes its place in the order given. In a folder,
    a JSON file that is not a Chrome trace (no ``traceEvents``: a run's ``recording.json``) is
    passed over; a file named itself, or one that is not JSON, is an error.

    Raises:
        TorchTraceError: two traces of the same rank (named), a folder with no trace, or any
            trace's own error.
    """
    traces = []
    for path, named in trace_files(paths):
        try:
            traces.append(read_torch_trace(path))
        except NotATraceError:
            if named:
                raise
    if not traces:
        raise TorchTraceError(", ".join(map(str, paths)), "no torch.profiler trace here")
    seen: dict[int, Path] = {}
    for t in traces:
        if t.rank is not None and t.rank in seen:
            raise TorchTraceError(t.path, f"rank {t.rank} again (also in {seen[t.rank]}): "
                                  "give one trace per rank")  # fmt: skip
        if t.rank is not None:
            seen[t.rank] = t.path
    return sorted(traces, key=lambda t: (t.rank is None, t.rank or 0))


def _thread_names(events: list[Any]) -> dict[Any, str]:
    names: dict[Any, str] = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "thread_name":
            label = str((e.get("args") or {}).get("name", ""))
            # Kineto writes some worker threads twice; keep the specific name, not "(python)"
            if e.get("tid") not in names or not label.endswith("(python)"):
                names[e.get("tid")] = label
    return names


def _steps(spans: list[dict]) -> pd.DataFrame:
    rows = []
    for e in spans:
        match = STEP_NAME.match(str(e.get("name", "")))
        if match:
            start, dur = float(e["ts"]), float(e["dur"])
            rows.append((int(match[1]), start, dur, start + dur, e.get("tid")))
    df = pd.DataFrame(rows, columns=["step", "start_us", "dur_us", "end_us", "thread"])
    return df.sort_values("start_us", ignore_index=True)


def _step_of(steps: pd.DataFrame, start_us: float) -> Any:
    i = steps["start_us"].searchsorted(start_us, side="right") - 1
    if i >= 0 and start_us < steps["end_us"].iat[i]:
        return int(steps["step"].iat[i])
    return pd.NA


def _comm_kind(name: str, cat: str) -> str | None:
    if cat == "kernel":
        return "work" if name.lower().startswith(("nccldevkernel", "ncclkernel")) else None
    if name.startswith(("gloo:", "nccl:")):
        return "work"
    if name.startswith("c10d::") or name == "record_param_comms":
        return "call"
    return None


def _collective(name: str, event: dict) -> str:
    """The collective's name, one spelling for all: ``gloo:all_reduce``, ``nccl:all_reduce``,
    ``c10d::allreduce_``, ``record_param_comms`` with ``Collective name: allreduce`` and a
    NCCL kernel ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` are all ``all_reduce``."""
    args = event.get("args") or {}
    raw = str(args.get("Collective name") or name)
    kernel = re.match(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", raw)
    raw = kernel[1] if kernel else raw.split("::")[-1].split(":")[-1]
    word = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", raw).lower().strip("_")
    return {"allreduce": "all_reduce", "allgather": "all_gather"}.get(word, word)


def _size(args: dict) -> tuple[Any, Any]:
    """(elements, bytes) of a collective's tensor, from ``In msg nelems``/``dtype``
    (record_param_comms) or the first input's ``Input Dims``/``Input type``."""
    if "In msg nelems" in args:
        elements = _int_or_none(args.get("In msg nelems"))
        dtype = str(args.get("dtype", "")).lower()
    else:
        dims, types = args.get("Input Dims") or [], args.get("Input type") or []
        shape = dims[0] if dims else None
        while isinstance(shape, list) and shape and isinstance(shape[0], list):
            shape = shape[0]  # a TensorList: c10d::allreduce_'s one bucket tensor
        if not isinstance(shape, list) or not shape:
            return pd.NA, pd.NA
        elements = math.prod(int(d) for d in shape)
        dtype = str(types[0]).lower() if types else ""
    if elements is None:
        return pd.NA, pd.NA
    size = DTYPE_BYTES.get(dtype)
    return elements, (elements * size if size else pd.NA)


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
