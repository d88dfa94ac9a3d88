"""What each rank of ``workshop check`` runs: the learner's script, observed from outside.

    python -m workshop.check.runner --out DIR [--probe] SCRIPT [ARGS...]

Installs post-import hooks (so nothing is imported that the script does not import itself),
then runs SCRIPT as ``__main__`` with ``sys.argv = [SCRIPT, *ARGS]`` and the script's folder
first on ``sys.path``, like ``python SCRIPT ARGS``. When the script ends, for any reason, it
writes ``DIR/rank.<N>.json`` (see :mod:`workshop.check.observe`). ``--probe`` stops the script
at its first optimizer step (the np=1 run that shows the base learning rate).

When another rank crashes, horovodrun stops this one with SIGTERM, often while it waits inside
a Horovod collective (native code, where a Python signal handler would not run): SIGTERM is
blocked in every thread of the script and taken by a watcher thread that writes this rank's
observations (status ``stopped``) and ends the process, so the ranks' steps before the crash
can still be judged.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.util
import os
import runpy
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from workshop.check.observe import Recorder


class _HookedLoader(importlib.abc.Loader):
    """Runs the real loader, then a hook on the fresh module."""

    def __init__(self, loader, hook: Callable):
        self.loader = loader
        self.hook = hook

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.hook(module)

    def __getattr__(self, name):
        return getattr(self.loader, name)


class AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``hooks[name](module)`` right after module ``name`` is first imported."""

    def __init__(self, hooks: dict[str, Callable]):
        self.hooks = dict(hooks)
        self.searching: set[str] = set()

    def find_spec(self, name, path=None, target=None):
        if name not in self.hooks or name in self.searching:
            return None
        self.searching.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.searching.discard(name)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _HookedLoader(spec.loader, self.hooks.pop(name))
        return spec

    def install(self) -> None:
        """Hook modules imported from now on; run the hooks of those already imported."""
        for name in list(self.hooks):
            if name in sys.modules:
                self.hooks.pop(name)(sys.modules[name])
        sys.meta_path.insert(0, self)


def observation_hooks(recorder: Recorder) -> dict[str, Callable]:
    """Module name -> hook; each hook imports only what the script has already imported."""

    def basics(module):
        original = module.HorovodBasics.init

        def init(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            library = getattr(self.MPI_LIB_CTYPES, "_name", "") or ""
            framework = next(
                (name for name in ("torch", "tensorflow", "mxnet")
                 if f"{os.sep}horovod{os.sep}{name}{os.sep}" in library),
                None,
            )  # fmt: skip
            recorder.horovod_init(framework, self.rank(), self.size())
            return result

        module.HorovodBasics.init = init

    def torch(module):
        from workshop.check.hooks_torch import install_torch

        install_torch(recorder, module)

    def horovod_torch_ops(module):
        from workshop.check.hooks_torch import install_horovod_torch_ops

        install_horovod_torch_ops(recorder, module)

    def horovod_torch_functions(module):
        from workshop.check.hooks_torch import install_horovod_torch_functions

        install_horovod_torch_functions(recorder, module)

    def tensorflow(module):
        from workshop.check.hooks_tf import install_tensorflow

        install_tensorflow(recorder, module)

    def horovod_tf_ops(module):
        from workshop.check.hooks_tf import install_horovod_tf_ops

        install_horovod_tf_ops(recorder, module)

    def keras_model(module):
        from workshop.check.hooks_tf import install_keras_model

        install_keras_model(recorder, module)

    def keras_optimizers(module):
        from workshop.check.hooks_tf import install_keras_optimizers

        install_keras_optimizers(recorder, module)

    def guarded(name, hook):
        return lambda module: recorder.safely(f"hooking {name}", hook, module)

    hooks = {
        "horovod.common.basics": basics,
        "torch": torch,
        "horovod.torch.mpi_ops": horovod_torch_ops,
        "horovod.torch.functions": horovod_torch_functions,
        "tensorflow": tensorflow,
        "horovod.tensorflow.mpi_ops": horovod_tf_ops,
        "tf_keras.src.engine.training": keras_model,
        "tf_keras.src.optimizers.legacy.optimizer_v2": keras_optimizers,
        "tf_keras.src.optimizers.optimizer": keras_optimizers,
    }
    return {name: guarded(name, hook) for name, hook in hooks.items()}


def _script_traceback(error: BaseException, script: Path) -> str:
    """The traceback from the script's first frame on (the runner's frames are noise)."""
    tb = error.__traceback__
    while tb is not None and Path(tb.tb_frame.f_code.co_filename).resolve() != script:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb or error.__traceback__))


def _exit_frame(stop: SystemExit, script: Path) -> list | None:
    """[file, line, code] of the script's line that raised SystemExit (``sys.exit``,
    ``exit()``), or None when no frame of the script is in its traceback."""
    frames = [
        f for f in traceback.extract_tb(stop.__traceback__) if Path(f.filename).resolve() == script
    ]
    if not frames:
        return None
    last = frames[-1]
    return [last.filename, last.lineno, (last.line or "").strip()]


def _env_int(*names: str) -> int | None:
    for name in names:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


STOPPED_EXIT_CODE = 128 + signal.SIGTERM


def _write_when_stopped(recorder: Recorder) -> None:
    """Block SIGTERM in this thread (and so in every thread the script starts) and let a
    watcher thread take it: write the observations, then end the process."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def watch() -> None:
        signal.sigwait({signal.SIGTERM})
        if not recorder.written:
            recorder.write("stopped", STOPPED_EXIT_CODE)
        os._exit(STOPPED_EXIT_CODE)

    threading.Thread(target=watch, name="workshop-check-sigterm", daemon=True).start()


PROGRESS_PERIOD_S = 1.0


def _write_progress(recorder: Recorder) -> None:
    """A daemon thread that rewrites ``rank.<N>.progress`` every second (see
    :meth:`Recorder.write_progress`)."""

    def loop() -> None:
        while not recorder.written:
            recorder.safely("progress", recorder.write_progress)
            time.sleep(PROGRESS_PERIOD_S)

    threading.Thread(target=loop, name="workshop-check-progress", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workshop.check.runner")
    parser.add_argument("--out", type=Path, required=True, help="folder for rank.<N>.json")
    parser.add_argument("--probe", action="store_true", help="stop at the first step")
    parser.add_argument(
        "--run-dir", type=Path, default=None,
        help="also write this rank's step times and status into the run directory's logs/ "
        "(workshop run --script)",
    )  # fmt: skip
    parser.add_argument(
        "--profile-steps", type=int, default=0,
        help="with --run-dir: a torch.profiler trace of this many steps in traces/ "
        "(workshop.check.profiled)",
    )  # fmt: skip
    parser.add_argument("script", type=Path)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    script = options.script.resolve()
    # horovodrun, mpirun, or torchrun (RANK, WORLD_SIZE)
    rank = _env_int("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK") or 0
    size = _env_int("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE")
    recorder = Recorder(options.out, rank, size, probe=options.probe)
    recorder.script = str(script)
    clock = None
    if options.run_dir:
        from workshop.check.stepclock import attach
        from workshop.rules import write_horovod_env

        recorder.local_gradients = False  # timed steps: no projections inside them
        clock = attach(recorder)
        (options.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        if not os.environ.get("TORCHELASTIC_RUN_ID"):  # not torchrun's (DDP's) rank
            # the Horovod settings of this rank's environment, which workshop diagnose reads
            write_horovod_env(options.run_dir / "logs", rank)
    AfterImport(observation_hooks(recorder)).install()
    profiler = None
    if options.run_dir and options.profile_steps:  # imports torch: after the hooks' install
        from workshop.check import profiled

        traces = options.run_dir / "traces"
        profiler = profiled.start(recorder, options.profile_steps, traces, rank)
    _write_when_stopped(recorder)
    if not options.probe:
        _write_progress(recorder)

    sys.argv = [str(options.script), *options.args]
    # Like `python SCRIPT`: the script's folder first. The launcher starts the runner with
    # `python -P`, so no current directory sits in sys.path[0] to replace.
    if sys.flags.safe_path:
        sys.path.insert(0, str(script.parent))
    else:
        sys.path[0] = str(script.parent)
    ended = _ending(recorder, options, rank, clock, profiler)
    real_exit = os._exit

    def exit_now(code: int) -> None:
        # A DDP script may end with os._exit (no Python shutdown while a collective's tensor
        # is freed): the observations are written first, then the process ends as asked.
        if not recorder.written:
            ended("ok" if code == 0 else "exit", code, None, {})
        real_exit(code)

    os._exit = exit_now
    status, exit_code, error, left = "ok", 0, None, {}
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as stop:
        code = stop.code
        exit_code = code if isinstance(code, int) else (0 if code is None else 1)
        status = "ok" if exit_code == 0 else "exit"
        left = {"frame": _exit_frame(stop, script)}
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
    except BaseException as crash:  # the script's own failure, reported to the parent
        status, exit_code = "error", 1
        error = {
            "type": type(crash).__name__,
            "message": str(crash),
            "traceback": _script_traceback(crash, script),
            "time": time.time(),
            "script": str(script),
        }
        sys.stderr.write(error["traceback"])
    os._exit = real_exit
    return ended(status, exit_code, error, left)


def _ending(recorder: Recorder, options: argparse.Namespace, rank: int, clock, profiler):
    """What the runner does when the script has ended (returned, raised, or called
    ``os._exit``): end the profiler, write the observations, and under ``--run-dir`` the step
    times and the status, as the workshop's own training programs write them."""

    def ended(status: str, exit_code: int, error: dict | None, left: dict) -> int:
        # When and where the script ended: a rank that leaves before the others is the cause
        # of their "Horovod has been shut down" (workshop.analysis.failure).
        left["time"] = time.time()
        if profiler is not None:
            # a schedule cut short by the script's end still writes what it recorded (torch's
            # profile.stop hands a recording trace to on_trace_ready)
            recorder.safely("profiler", profiler.stop)
        recorder.write(status, exit_code, error, left)
        if clock is not None:
            logs = options.run_dir / "logs"
            (logs / f"rank.{rank}.steps.csv").write_text(clock.csv())
            state = "ok" if exit_code == 0 else "failed"
            (logs / f"rank.{rank}.status").write_text(state + "\n")
        return exit_code

    return ended


if __name__ == "__main__":
    sys.exit(main())
