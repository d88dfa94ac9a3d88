"""What one rank of a checked script did, recorded from outside the script's code.

A :class:`Recorder` lives in each rank process started by :mod:`workshop.check.runner`. The
framework hooks (:mod:`workshop.check.hooks_torch`, :mod:`workshop.check.hooks_tf`) call it;
at the end it writes ``rank.<N>.json`` into the output folder. That file is the contract with
:mod:`workshop.check.verdicts`:

- ``env_rank``, ``env_size``: the rank and size horovodrun gave this process;
- ``init``: ``None`` when Horovod was never initialised, else ``{"calls", "framework", "rank",
  "size"}`` (framework: ``torch`` or ``tensorflow``, from the Horovod library that was started);
- ``horovod_imported``: the Horovod framework modules the script imported;
- ``steps``: one entry per optimizer step, in order: ``lr`` (one value per parameter group),
  ``grads`` (``[hash, norm]`` of each applied gradient), ``local`` and ``applied`` (PyTorch:
  :func:`workshop.check.hooks_torch.projection` of each parameter's own gradient, as backward
  left it before any reduction, and of the gradient the step applied; None where a parameter
  had none), ``allreduces`` and ``broadcasts``
  (tensors reduced / broadcast by Horovod so far), and for the first two steps only
  ``params`` (``[hash, norm]`` of each parameter right before the step) and ``covered`` (how
  many of those parameters hold a value that came out of a Horovod broadcast: rank 0's);
- ``steps_started``: optimizer steps begun (a step waiting in Horovod when the rank ended is
  begun but not in ``steps``);
- ``object_broadcasts``: calls of ``hvd.broadcast_object`` made by the script itself (a Python
  object, e.g. the resume epoch: not the parameters);
- ``apis``: how the script trains, where it tells (``keras_fit``: tf-keras ``Model.fit``);
- ``pending``: the Horovod collectives submitted and not completed when the rank ended, each
  ``{"op", "name", "where", "via", "age_s"}``: ``where`` is the line of the script that
  submitted it (``path:line: code``), ``via`` what in the libraries submitted it on that line's
  behalf (``callback MetricAverageCallback``, ``hvd.DistributedOptimizer``; None: the script
  itself);
- ``final_params``: ``[hash, norm]`` of each parameter at the end (after the last step);
- ``samples``: one hash per training sample fed to the model (rows of the model's input);
- ``batches``: the number of samples of each training batch, in order (they add up to
  ``len(samples)``);
- ``epoch_marks``: ``len(samples)`` at each call of a sampler's ``set_epoch`` (PyTorch's
  ``DistributedSampler``): where a new epoch begins;
- ``saves``: ``{"path", "how"}`` of every checkpoint or model file written;
- ``data_sizes``: the sizes of the data sources the script built or iterated (a torch
  ``Dataset`` behind a ``DataLoader``, tf.data's ``from_tensor_slices``, the arrays given to
  Keras' ``fit``), at most :data:`MAX_DATA_SIZES`: the base of the chance level in ``sharded``;
- ``samplers``: one ``{"shuffle", "num_replicas", "rank", "epoch"}`` per pass over a
  ``DistributedSampler`` (its ``__iter__``);
- ``joins``: one entry per call of ``hvd.join()`` (uneven data: a rank that ran out of batches
  answers the other ranks' allreduces with zeros until every rank has joined), in order:
  ``{"steps", "started", "samples", "epoch", "where", "time", "last_rank", "waited_s"}``: the
  optimizer steps made and begun and the samples fed before the call, the epoch of the last
  ``DistributedSampler`` pass (None without one), the script's line, when it was called, and
  once it returned, what it returned (the last rank to join) and how long it waited (None
  while it never returned);
- ``status`` (``ok``, ``error``, ``exit``), ``exit_code``, ``error`` (``{"type", "message",
  "traceback", "time"}``), ``left`` (``{"time"}`` when the script ended, and ``"frame"``,
  ``[file, line, code]`` of the script's ``sys.exit``) and ``seconds`` (from the process
  start to the end of the script);
- ``clips``: each call of ``torch.nn.utils.clip_grad_norm_`` / ``clip_grad_value_``:
  ``{"how", "where", "step", "reducing"}`` (the step it came before, and how many gradient
  reductions were still in flight: a clip of gradients Horovod is reducing in the background);
- ``grad_writes``: in-place changes of a gradient after its reduction, before the step:
  ``{"how", "where", "step"}`` (:mod:`workshop.check.gradwrites`);
- ``reduce_ops``: the reduction of each allreduce the script caused, ``{op: {"count",
  "where", "via"}}`` (``Average``, ``Sum``, ...; the first line that submitted one);
- ``ddp``: PyTorch DDP models built (``{"where", "find_unused_parameters", "params"}``), and
  ``dist_calls``: the first :data:`MAX_RECORDS` ``torch.distributed`` collectives the script
  called itself, in order: ``{"op", "shape", "where"}`` (the shape of its first tensor);
- ``hook_errors``: observations that failed (the script itself was not disturbed).
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from pathlib import Path

from workshop.units import write_json_atomic

# Parameters are kept for the first steps only: step 1 (before any update) and step 2 (after
# the first update, when TensorFlow's usual pattern has just broadcast them).
PARAM_STEPS = 2
DIGEST_BYTES = 8
MAX_DATA_SIZES = 20
MAX_RECORDS = 50
# Collectives that reduce gradients (a sparse gradient is allgathered).
_REDUCING = ("allreduce", "grouped_allreduce", "allgather", "DDP gradients")


def digest(data: bytes | memoryview) -> str:
    """Short content hash (hex) of raw bytes."""
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).hexdigest()


def array_fingerprint(array) -> list:
    """``[hash, norm]`` of a numpy array: its bytes, shape and dtype, and its L2 norm."""
    import numpy as np

    array = np.ascontiguousarray(array)
    head = f"{array.dtype.str}{array.shape}".encode()
    norm = float(np.linalg.norm(array.astype(np.float64).ravel())) if array.size else 0.0
    return [digest(head + array.tobytes()), norm]


def row_digests(array) -> list[str]:
    """One hash per sample: the rows (first axis) of a batch array."""
    import numpy as np

    array = np.ascontiguousarray(array)
    if array.ndim == 0:
        return []
    flat = array.reshape(array.shape[0], -1)
    return [digest(row.tobytes()) for row in flat]


# Horovod's files that submit collectives for the script: the gradient wrappers.
_WRAPPERS = {
    "torch/optimizer.py": "hvd.DistributedOptimizer",
    "_keras/__init__.py": "hvd.DistributedOptimizer",
    "tensorflow/gradient_aggregation.py": "hvd.DistributedOptimizer",
    "tensorflow/gradient_aggregation_eager.py": "hvd.DistributedOptimizer",
    "tensorflow/__init__.py": "hvd.DistributedGradientTape",
}


def _horovod_file(path: str) -> str:
    """``torch/optimizer.py`` for ``.../horovod/torch/optimizer.py``, else ``""``."""
    _, found, rest = path.replace("\\", "/").rpartition("/horovod/")
    return rest if found else ""


def source_line(path: str, line: int) -> str:
    """``NAME:LINE: code`` of a line of a source file (the code when it can be read)."""
    import linecache

    code = linecache.getline(path, line).strip()
    return f"{os.path.basename(path)}:{line}" + (f": {code}" if code else "")


class Recorder:
    """The observations of one rank; thread-safe, written once at the end."""

    def __init__(self, out_dir: Path, env_rank: int, env_size: int | None, probe: bool = False):
        self.out_dir = Path(out_dir)
        self.env_rank = env_rank
        self.env_size = env_size
        self.probe = probe
        self.started = time.time()
        self.lock = threading.RLock()
        self.init: dict | None = None
        self.horovod_imported: list[str] = []
        self.steps: list[dict] = []
        self.final_params: list | None = None
        self.samples: list[str] = []
        self.batches: list[int] = []
        self.epoch_marks: list[int] = []
        self.saves: list[dict] = []
        self.data_sizes: list[int] = []
        self.samplers: list[dict] = []
        self.joins: list[dict] = []
        self.allreduces = 0
        self.broadcasts = 0
        self.steps_started = 0
        # Fingerprint hashes of tensors that came out of a broadcast (rank 0's values), and
        # broadcast outputs to fingerprint at the next recorded step (PyTorch: in place).
        self.broadcast_values: set[str] = set()
        self.broadcast_outputs: list = []
        self.object_broadcasts = 0
        self.apis: list[str] = []
        # This step's gradients as backward left them (parameter id -> projection); not
        # recorded in a timed run (workshop run --script), where they would cost step time.
        self.local: dict[int, list] = {}
        self.local_gradients = not probe
        self.clips: list[dict] = []
        self.grad_writes: list[dict] = []
        self.grad_watch = None  # workshop.check.gradwrites.GradWrites, for PyTorch
        self.reduce_ops: dict[str, dict] = {}
        self.ddp: list[dict] = []
        # under workshop run --script: the step clock's wait for DDP's allreduces, which the
        # DDP hooks measure inside backward() (workshop.check.stepclock.attach sets it)
        self.ddp_waited = None
        self.dist_calls: list[dict] = []
        # Collectives submitted and not yet completed: key -> {"op", "name", "where", "at"}.
        self.in_flight: dict = {}
        self.collectives_done = 0
        # The learner's script (its frames name the line that submitted a collective).
        self.script: str | None = None
        self.hook_errors: list[str] = []
        # > 0 while Horovod's own helpers step the optimizer (not a training step).
        self.muted = 0
        self.written = False
        self.beats = 0
        # Called at the end to read the parameters of the last optimizer seen.
        self.final_params_reader = None

    def safely(self, where: str, function, *args):
        """Run a recording function; a failure is noted, never raised into the script."""
        try:
            return function(*args)
        except Exception as error:
            with self.lock:
                if len(self.hook_errors) < 20:
                    self.hook_errors.append(f"{where}: {type(error).__name__}: {error}")
            return None

    # -- events reported by the hooks -------------------------------------------------------
    def horovod_init(self, framework: str | None, rank: int, size: int) -> None:
        with self.lock:
            calls = (self.init or {}).get("calls", 0) + 1
            self.init = {"calls": calls, "framework": framework, "rank": rank, "size": size}

    def imported(self, framework: str) -> None:
        with self.lock:
            if framework not in self.horovod_imported:
                self.horovod_imported.append(framework)

    def allreduced(self, tensors: int) -> None:
        with self.lock:
            self.allreduces += tensors

    def broadcasted(self, tensors: int) -> None:
        with self.lock:
            self.broadcasts += tensors

    def wants_params(self) -> bool:
        """True while the next step's parameters are still to be recorded."""
        return len(self.steps) < PARAM_STEPS

    def broadcast_value(self, fingerprint_hash: str) -> None:
        """A tensor with this content came out of a Horovod broadcast (rank 0's value)."""
        with self.lock:
            if self.wants_params():
                self.broadcast_values.add(fingerprint_hash)

    def used(self, api: str) -> None:
        with self.lock:
            if api not in self.apis:
                self.apis.append(api)

    def step_started(self) -> None:
        with self.lock:
            self.steps_started += 1

    def submitted(
        self,
        key,
        op: str,
        name: str | None,
        where: tuple[str, int] | None,
        via: str | None = None,
    ) -> None:
        """A collective was handed to Horovod (``key``: PyTorch's handle, or an object of the
        TensorFlow hook's) by the script's line ``where`` (:meth:`where`), through ``via``
        (:meth:`via`)."""
        with self.lock:
            self.in_flight[key] = {
                "op": op, "name": name, "where": where, "via": via, "at": time.time(),
            }  # fmt: skip

    def where(self) -> tuple[str, int] | None:
        """(path, line) of the innermost frame of the learner's script on this thread (the
        line that called into a hook), or None."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.script:
                return frame.f_code.co_filename, frame.f_lineno
            frame = frame.f_back
        return None

    def via(self) -> str | None:
        """What submitted the collective the calling hook is in, between the script's line and
        Horovod: the outermost Keras callback on the stack (``callback CLASS``), else Horovod's
        gradient wrapper (``hvd.DistributedOptimizer``, ``hvd.DistributedGradientTape``), else
        None (the script called Horovod itself)."""
        frame, found = sys._getframe(1), None
        while frame is not None and frame.f_code.co_filename != self.script:
            me = frame.f_locals.get("self")
            if me is not None and any(c.__name__ == "Callback" for c in type(me).__mro__):
                found = f"callback {type(me).__name__}"
            elif found is None or not found.startswith("callback"):
                found = _WRAPPERS.get(_horovod_file(frame.f_code.co_filename), found)
            frame = frame.f_back
        return found

    def completed(self, key) -> None:
        with self.lock:
            self.in_flight.pop(key, None)
            self.collectives_done += 1

    def progress(self) -> dict:
        """What this rank has done so far: ``counters`` (one line that changes whenever the
        rank makes progress: a step, a batch, a collective submitted or completed) and
        ``pending`` (the collectives it waits for, as in ``rank.<N>.json``), and ``beat``, how
        many times the rank has written its progress: it moves every second while the rank gets
        CPU time, stalled or not."""
        with self.lock:
            counters = (
                f"{self.steps_started} {len(self.steps)} {len(self.samples)} "
                f"{self.allreduces} {self.broadcasts} {self.collectives_done}"
            )
            return {"counters": counters, "pending": self._pending(), "beat": self.beats}

    def write_progress(self) -> None:
        """``rank.<N>.progress``: :meth:`progress` as JSON, rewritten atomically (the check
        reads it to tell a stall, where nothing moves, from a slow rank)."""
        self.beats += 1
        write_json_atomic(
            self.out_dir / f"rank.{self.env_rank}.progress", self.progress(), indent=None
        )

    def step(
        self,
        lr: list[float],
        grads: list[list],
        params: list[list] | None,
        local: list | None = None,
        applied: list | None = None,
    ) -> None:
        """One optimizer step: its learning rates, applied gradients (and their projections,
        beside those of the ranks' own gradients) and (early) parameters."""
        with self.lock:
            entry = {
                "lr": [float(value) for value in lr],
                "grads": grads,
                "allreduces": self.allreduces,
                "broadcasts": self.broadcasts,
            }
            if local is not None:
                entry["local"], entry["applied"] = local, applied
            if params is not None and len(self.steps) < PARAM_STEPS:
                entry["params"] = params
                entry["covered"] = sum(1 for p in params if p[0] in self.broadcast_values)
            self.steps.append(entry)
            if self.probe:
                # The np=1 run only needs the learning rate of the first step.
                self.write("ok", 0)
                os._exit(0)

    def reducing(self) -> int:
        """Gradient reductions in flight now."""
        with self.lock:
            return sum(1 for c in self.in_flight.values() if c["op"] in _REDUCING)

    def clipped(self, how: str, where: tuple[str, int] | None) -> None:
        """The script clipped gradients; ``reducing``: reductions in flight at that moment."""
        with self.lock:
            reducing = self.reducing()
            if len(self.clips) < MAX_RECORDS:
                self.clips.append({
                    "how": how, "where": source_line(*where) if where else None,
                    "step": len(self.steps) + 1, "reducing": reducing,
                })  # fmt: skip

    def reduced_with(self, op: str, where: tuple[str, int] | None, via: str | None) -> None:
        """An allreduce with reduction ``op`` was submitted from the script's line ``where``."""
        with self.lock:
            seen = self.reduce_ops.setdefault(
                op, {"count": 0, "where": source_line(*where) if where else None, "via": via}
            )
            seen["count"] += 1

    def batch(self, digests: list[str]) -> None:
        with self.lock:
            self.samples.extend(digests)
            self.batches.append(len(digests))

    def new_epoch(self) -> None:
        """A sampler's ``set_epoch`` was called: the next sample starts an epoch."""
        with self.lock:
            self.epoch_marks.append(len(self.samples))

    def saved(self, path: str, how: str) -> None:
        with self.lock:
            self.saves.append({"path": path, "how": how})

    def data_source(self, size: int) -> None:
        """A data source of ``size`` samples was built or iterated."""
        with self.lock:
            if size > 0 and len(self.data_sizes) < MAX_DATA_SIZES:
                self.data_sizes.append(int(size))

    def sampler_pass(self, shuffle: bool, num_replicas: int, rank: int, epoch: int) -> None:
        """A pass over a DistributedSampler began."""
        with self.lock:
            self.samplers.append(
                {
                    "shuffle": bool(shuffle),
                    "num_replicas": int(num_replicas),
                    "rank": int(rank),
                    "epoch": int(epoch),
                }  # fmt: skip
            )

    def join_called(self, where: tuple[str, int] | None) -> dict:
        """``hvd.join()`` was called on the script's line ``where``: its entry in ``joins``
        (:meth:`join_returned` completes it)."""
        with self.lock:
            entry = {
                "steps": len(self.steps),
                "started": self.steps_started,
                "samples": len(self.samples),
                "epoch": self.samplers[-1]["epoch"] if self.samplers else None,
                "where": source_line(*where) if where else None,
                "time": time.time(),
                "last_rank": None,
                "waited_s": None,
            }
            self.joins.append(entry)
            return entry

    def join_returned(self, entry: dict, last_rank) -> None:
        """The ``hvd.join()`` of ``entry`` returned ``last_rank`` (every rank had joined)."""
        with self.lock:
            entry["last_rank"] = int(last_rank)
            entry["waited_s"] = round(time.time() - entry["time"], 3)

    # -- the result file --------------------------------------------------------------------
    def to_dict(
        self, status: str, exit_code: int, error: dict | None = None, left: dict | None = None
    ) -> dict:
        return {
            "schema": 1,
            "env_rank": self.env_rank,
            "env_size": self.env_size,
            "probe": self.probe,
            "init": self.init,
            "horovod_imported": self.horovod_imported,
            "steps": self.steps,
            "final_params": self.final_params,
            "samples": self.samples,
            "batches": self.batches,
            "epoch_marks": self.epoch_marks,
            "saves": self.saves,
            "data_sizes": self.data_sizes,
            "samplers": self.samplers,
            "joins": self.joins,
            "allreduces": self.allreduces,
            "broadcasts": self.broadcasts,
            "steps_started": self.steps_started,
            "object_broadcasts": self.object_broadcasts,
            "apis": self.apis,
            "clips": self.clips,
            "grad_writes": self.grad_writes,
            "reduce_ops": self.reduce_ops,
            "ddp": self.ddp,
            "dist_calls": self.dist_calls,
            "pending": self._pending(),
            "status": status,
            "exit_code": exit_code,
            "error": error,
            "left": left or {},
            "hook_errors": self.hook_errors,
            "seconds": round(time.time() - self.started, 3),
        }

    def _pending(self) -> list[dict]:
        """The collectives still in flight, oldest first, with their age in seconds."""
        now = time.time()
        return [
            {
                "op": c["op"],
                "name": c["name"] if isinstance(c["name"], str) else None,
                "where": source_line(*c["where"]) if c["where"] else None,
                "via": c.get("via"),
                "age_s": round(now - c["at"], 1),
            }
            for c in sorted(self.in_flight.values(), key=lambda c: c["at"])
        ]

    def write(
        self, status: str, exit_code: int, error: dict | None = None, left: dict | None = None
    ) -> Path:
        """Write ``rank.<N>.json`` atomically (the parent treats its appearance as 'done')."""
        with self.lock:
            if self.final_params_reader is not None and self.final_params is None:
                try:
                    self.final_params = self.final_params_reader()
                except Exception as error:  # a freed model must not hide the result
                    self.hook_errors.append(f"final parameters: {error}")
            payload = self.to_dict(status, exit_code, error, left)
            path = self.out_dir / f"rank.{self.env_rank}.json"
            write_json_atomic(path, payload, indent=None)
            self.written = True
            return path
