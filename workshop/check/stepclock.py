"""Each training step's times of a learner's own script, measured from outside its code, for
``workshop run --script``: the same columns as the workshop's own training programs write
(``logs/rank.N.steps.csv``, :data:`workshop.rules.STEP_FILE_COLUMNS`), so ``workshop diagnose``
reads a run of any script like one of its own.

A step runs from the end of the previous optimizer step to the end of this one (the first from
the runner's start). Within it: ``data_s`` until the model's first forward pass (taking the
batch), ``wait_s`` from the optimizer step's start to the last collective it completed
(PyTorch's DistributedOptimizer waits for the gradients' allreduces there; for a DDP model,
from its last gradient's accumulation to ``backward()``'s return, where DDP's reducer waits
for the buckets' allreduces; NaN where no collective completes inside the step, e.g.
TensorFlow's tape reduces before it: then ``compute_s`` includes the wait), ``compute_s`` the
rest, and ``cpu_wait_s`` the training
thread's wait for a CPU outside that wait (:func:`workshop.rules.run_queue_wait_s`).
:func:`attach` has the recorder's hooks drive it, on the training thread; standard library
only, like the runner.
"""

from __future__ import annotations

import math
import time

from workshop.rules import STEP_FILE_COLUMNS, run_queue_wait_s


class StepClock:
    """The step times of one rank (the hooks call :meth:`batch_taken`, :meth:`waited` and
    :meth:`step_ended`; :meth:`csv` gives the file)."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self._start = time.perf_counter()
        self._cpu_wait = run_queue_wait_s()
        self._data_end: float | None = None
        self._wait = 0.0
        self._wait_seen = False

    def batch_taken(self) -> None:
        """The model's forward pass begins: the first one of a step ends its batch taking."""
        if self._data_end is None:
            self._data_end = time.perf_counter()

    def waited(self, seconds: float, cpu_wait_s: float | None = None) -> None:
        """Time spent waiting for the step's collectives, and the CPU wait meanwhile (left out
        of ``cpu_wait_s``: there the thread polls Horovod, not its own work)."""
        self._wait += seconds
        self._wait_seen = True
        if cpu_wait_s is not None and self._cpu_wait is not None:
            self._cpu_wait += cpu_wait_s

    def step_ended(self) -> None:
        """An optimizer step ended: its row, and the next step begins."""
        now, cpu_wait = time.perf_counter(), run_queue_wait_s()
        step_s = now - self._start
        data_s = (self._data_end - self._start) if self._data_end is not None else 0.0
        wait_s = self._wait if self._wait_seen else math.nan
        compute_s = step_s - data_s - (0.0 if math.isnan(wait_s) else wait_s)
        waited_cpu = cpu_wait - self._cpu_wait if None not in (cpu_wait, self._cpu_wait) else None
        self.rows.append((len(self.rows), data_s, compute_s, wait_s, step_s, waited_cpu))
        self._start, self._cpu_wait = now, cpu_wait
        self._data_end, self._wait, self._wait_seen = None, 0.0, False

    def csv(self) -> str:
        """``logs/rank.N.steps.csv``'s text (an unknown value is left empty or ``nan``)."""

        def cell(value) -> str:
            if value is None:
                return ""
            return "nan" if isinstance(value, float) and math.isnan(value) else f"{value:.7f}"

        lines = [",".join(STEP_FILE_COLUMNS)]
        lines += [f"{row[0]}," + ",".join(cell(v) for v in row[1:]) for row in self.rows]
        return "\n".join(lines) + "\n"


def attach(recorder) -> StepClock:
    """A StepClock driven by ``recorder``'s own hook calls (:class:`workshop.check.observe.
    Recorder`): ``batch`` (a forward pass begins), ``step_started`` and ``completed`` (the
    optimizer step's wait for its collectives) and ``step`` (the step ended). The observation
    itself is unchanged: each wrapped call still does what it did."""
    clock = StepClock()
    marks: dict[str, float | None] = {"started": None, "completed": None}
    cpu: dict[str, float | None] = {"started": None, "completed": None}
    batch, step_started = recorder.batch, recorder.step_started
    completed, step = recorder.completed, recorder.step

    def on_batch(*args, **kwargs):
        clock.batch_taken()
        return batch(*args, **kwargs)

    def on_step_started(*args, **kwargs):
        marks["started"], marks["completed"] = time.perf_counter(), None
        cpu["started"], cpu["completed"] = run_queue_wait_s(), None
        return step_started(*args, **kwargs)

    def on_completed(*args, **kwargs):
        if marks["started"] is not None:
            marks["completed"], cpu["completed"] = time.perf_counter(), run_queue_wait_s()
        return completed(*args, **kwargs)

    def on_step(*args, **kwargs):
        if None not in marks.values():
            during = cpu["completed"] - cpu["started"] if None not in cpu.values() else None
            clock.waited(marks["completed"] - marks["started"], during)
        marks["started"] = marks["completed"] = None
        result = step(*args, **kwargs)
        clock.step_ended()
        return result

    recorder.batch, recorder.step_started = on_batch, on_step_started
    recorder.completed, recorder.step = on_completed, on_step
    # DDP's allreduces end inside backward(), not in the optimizer step: the DDP hooks
    # (workshop.check.hooks_ddp) hand over the wait they measure there
    recorder.ddp_waited = clock.waited
    return clock
