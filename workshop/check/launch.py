"""Run a learner's script under horovodrun (Horovod) or torchrun (PyTorch DDP) with the
observing runner, and judge it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workshop.check.failures import crash_report
from workshop.check.practices.broadcast import broadcast_before_crash
from workshop.check.practices.init import check_init
from workshop.check.report import Report
from workshop.check.stalls import STALL_S, Stall, StallWatch, stall_message
from workshop.check.verdicts import CHECK_NAMES, Check, judge, ranks_text, style_of, with_fix
from workshop.launch.horovodrun import (
    HorovodNotFound,
    horovodrun_command,
    horovodrun_program,
    rank_environment,
)
from workshop.launch.stopping import (
    end_on_parent_death,
    ignore_stop_signals,
    kill_marked,
    restore_handlers,
    signal_of,
    stop_on_signals,
    stop_tree,
)
from workshop.launch.torchrun import TAKES, script_launcher, torchrun_command
from workshop.runspec import FRAMEWORKS

OUTPUT_CHARS = 4000
BASE_GRACE_S = 15.0


class CheckError(RuntimeError):
    """The check could not start (no horovodrun, a bad argument); nothing was judged."""


def find_horovodrun() -> str:
    """horovodrun next to this Python (the same environment) first, then on PATH
    (:func:`workshop.launch.horovodrun.horovodrun_program`)."""
    try:
        return horovodrun_program()
    except HorovodNotFound as exc:
        raise CheckError(str(exc)) from None


def rank_command(
    horovodrun: str | None, np: int, out: Path, script: Path, args, probe: bool
) -> list:
    """The horovodrun command (torchrun's when ``horovodrun`` is None: a DDP script) that runs
    ``script`` under the observing runner on every rank."""
    # -P: the working directory must not shadow modules (the script's folder goes first).
    runner = [sys.executable, "-P", "-m", "workshop.check.runner", "--out", str(out)]
    if probe:
        runner.append("--probe")
    if horovodrun is None:
        return torchrun_command(np, [*runner, str(script), *args])
    return horovodrun_command(np, [*runner, str(script), *args], program=horovodrun)


def rank_env(np: int) -> dict[str, str]:
    """Environment of the ranks (:func:`workshop.launch.horovodrun.rank_environment`: tf-keras for
    Horovod, quiet TensorFlow), shared cores, and the runner importable."""
    from workshop.paths import REPO_DIR
    from workshop.train.common import threads_per_rank

    path = os.environ.get("PYTHONPATH", "")
    return rank_environment() | {
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS") or str(threads_per_rank(np, None)),
        # The runner must import even when the workshop package is not installed.
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_DIR), path) if p),
    }


def _stop(process: subprocess.Popen, marker: str) -> None:
    """Stop horovodrun and every rank it started (ranks sit in sessions of their own): SIGTERM
    first, so that each rank writes what it observed, then SIGKILL."""
    stop_tree(process, grace_s=3.0)
    kill_marked(marker)  # ranks that outlived their launcher


@dataclass
class _Launch:
    name: str
    np: int
    out: Path
    log: Path
    process: subprocess.Popen
    started: float
    reported: set = field(default_factory=set)
    exit_code: int | None = None
    stopped: bool = False

    def poll(self, say: Callable[[str], None]) -> bool:
        """Report ranks that finished; True once horovodrun has ended."""
        for rank in range(self.np):
            path = self.out / f"rank.{rank}.json"
            if rank not in self.reported and path.exists():
                self.reported.add(rank)
                if self.name == "main":
                    say(f"  rank {rank} finished after {time.monotonic() - self.started:.1f} s")
        if self.exit_code is None:
            self.exit_code = self.process.poll()
        return self.exit_code is not None

    def stop(self) -> None:
        if self.exit_code is None:
            _stop(self.process, str(self.out))
            self.exit_code = self.process.poll()
            self.stopped = True

    def observations(self) -> dict[int, dict]:
        found = {}
        for rank in range(self.np):
            path = self.out / f"rank.{rank}.json"
            if path.exists():
                found[rank] = json.loads(path.read_text())
        return found

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def progress(self) -> dict[int, dict | None]:
        """Each rank's ``rank.<N>.progress`` (None before it writes one)."""
        found = {}
        for rank in range(self.np):
            try:
                found[rank] = json.loads((self.out / f"rank.{rank}.progress").read_text())
            except (OSError, ValueError):
                found[rank] = None
        return found


def _start(
    name: str, np: int, workdir: Path, script: Path, args, cwd, env, horovodrun, probe: bool
) -> _Launch:
    out = workdir / name
    out.mkdir()
    log = workdir / f"{name}.log"
    with log.open("w") as handle:
        process = subprocess.Popen(
            rank_command(horovodrun, np, out, script, args, probe), cwd=cwd, env=env,
            stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=end_on_parent_death,
        )  # fmt: skip
    return _Launch(name, np, out, log, process, time.monotonic())


def _not_judged(reason: str) -> dict[str, Check]:
    fix = "make the script run to its first optimizer step (see the error above)"
    return {name: Check(None, f"not judged: {reason}", fix=fix) for name in CHECK_NAMES}


def _partial_verdicts(
    observations: dict[int, dict], np: int, base: dict | None, note: str, framework: str | None
) -> dict[str, Check]:
    """The verdicts of a run that crashed, from what every rank did before it ended: each
    marked partial. Not judged when a rank left no observations or no rank made a step."""
    missing = [rank for rank in range(np) if rank not in observations]
    if missing:
        return _not_judged(f"{ranks_text(missing)} left no observations")
    steps = max(len(obs.get("steps") or []) for obs in observations.values())
    if not steps:
        return _before_first_step(observations, framework)
    checks = judge(list(observations.values()), base, note, framework)
    return {name: check.as_partial() for name, check in checks.items()}


def _before_first_step(observations: dict[int, dict], framework: str | None) -> dict[str, Check]:
    """A crash before the first optimizer step: what ran is judged (``hvd.init()``, a broadcast
    of the parameters), each partial; the practices that need a step are not judged."""
    checks = _not_judged("the script crashed before its first optimizer step")
    ranks = [observations[rank] for rank in sorted(observations)]
    style = style_of(ranks, framework)
    init = check_init(ranks, framework)
    if init.ok is not False:
        checks["init"] = init.as_partial()
    broadcast = broadcast_before_crash(ranks)
    if broadcast is not None:
        checks["broadcast"] = with_fix(broadcast, "broadcast", style).as_partial()
    return checks


def _framework(observations: dict[int, dict]) -> str | None:
    for obs in observations.values():
        if obs.get("init") and obs["init"].get("framework"):
            return obs["init"]["framework"]
    for obs in observations.values():
        if obs.get("horovod_imported"):
            return obs["horovod_imported"][0]
    return None


def check_script(
    path,
    np: int = 2,
    framework: str | None = None,
    args=(),
    timeout_s: float = 300,
    *,
    cwd=None,
    base_run: bool = True,
    quiet: bool = False,
    stall_s: float = STALL_S,
) -> Report:
    """Run a learner's Horovod script on ``np`` CPU ranks and judge six practices.

    The script is an ordinary program (it does not import ``workshop``); it is run by
    ``horovodrun -np NP --gloo`` through :mod:`workshop.check.runner`, which watches Horovod,
    the optimizer, the model's inputs and file saves from outside. Meant for short runs: pass
    the script arguments that make it take a few steps (``args=("--steps", "20")``).

    Args:
        path: the script.
        np: ranks (>= 2: the practices are about what ranks share).
        framework: ``torch`` or ``tensorflow`` to require that framework's ``hvd.init()``;
            None accepts the one the script initialises.
        args: the script's own arguments.
        timeout_s: stop everything after this many seconds (exit code 2).
        cwd: working directory of the script (default: the current one); files it saves land
            there.
        base_run: also run the script alone (np=1, stopped at its first optimizer step) to see
            the learning rate it uses at np=1, the base of ``lr_scaled``.
        quiet: print no progress lines.
        stall_s: no rank making progress for this long while every rank waits in a Horovod
            collective is a stall (:mod:`workshop.check.stalls`): the ranks are stopped and the
            report says which collective, which ranks, the likely cause and the fix.

    SIGTERM, SIGHUP and SIGINT (Ctrl-C, a Jupyter interrupt; even when this process was
    started ignoring SIGINT) stop every rank within seconds and the report is still returned,
    marked ``interrupted``; a SIGKILL of this process kills horovodrun (``PR_SET_PDEATHSIG``),
    whose own watchers end its ranks.

    Returns:
        A :class:`Report`; ``report.exit_code`` is 0 (all hold), 1 (a practice is missing) or
        2 (the script crashed, stalled, did not finish in time, or the check was
        interrupted).

    Raises:
        FileNotFoundError: the script does not exist.
        ValueError: np < 2, an unknown framework or a timeout <= 0.
        CheckError: horovodrun is not installed.
    """
    script = Path(path)
    _check_arguments(script, np, framework, timeout_s)
    say = (lambda line: None) if quiet else (lambda line: print(line, flush=True))
    launcher = script_launcher(script)
    horovodrun = None if launcher == "ddp" else find_horovodrun()
    script = script.resolve()
    env = os.environ | rank_env(np)
    if launcher == "ddp":
        # INFO: DDP's unused-parameter error names the parameters. Not DETAIL: with torch
        # 2.14 and Gloo on a CPU, a correct 2-rank DDP script ends in SIGSEGV on both ranks
        # under it (plain torchrun too).
        env |= {"TORCH_DISTRIBUTED_DEBUG": env.get("TORCH_DISTRIBUTED_DEBUG") or "INFO"}
    elif launcher is None:
        say(f"workshop check: {script.name} uses neither Horovod nor torch.distributed; {TAKES}")
    how = "torchrun, Gloo" if launcher == "ddp" else "horovodrun --gloo"
    workdir = Path(tempfile.mkdtemp(prefix="workshop-check-"))
    start = time.monotonic()
    say(
        f"workshop check: running {script.name} on {np} ranks ({how}, CPU)"
        + (" and once alone for the base learning rate" if base_run else "")
        + "..."
    )
    launches: dict[str, _Launch] = {}
    previous = stop_on_signals(sigint_when_ignored=True)
    ended = _Ended()
    try:
        launches["main"] = _start("main", np, workdir, script, args, cwd, env, horovodrun, False)
        if base_run:
            launches["base"] = _start("base", 1, workdir, script, args, cwd, env, horovodrun, True)
        ended = _wait(launches, start + timeout_s, say, stall_s)
    except KeyboardInterrupt as stop:  # Ctrl-C, a Jupyter interrupt, SIGTERM, SIGHUP
        ignore_stop_signals(previous)  # the ranks must be stopped and the report made
        ended = _Ended(interrupted=signal.Signals(signal_of(stop)).name)
        say(f"{ended.interrupted}: stopping every rank...")
    try:
        ignore_stop_signals(previous)
        for launch in launches.values():
            launch.stop()
        if "main" not in launches:
            return Report(str(path), np, None, _not_judged("interrupted before the start"), 2,
                          time.monotonic() - start, f"interrupted by {ended.interrupted}",
                          interrupted=ended.interrupted)  # fmt: skip
        return _report(str(path), np, framework, launches, ended, timeout_s, start)
    finally:
        for launch in launches.values():
            launch.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        restore_handlers(previous)


@dataclass
class _Ended:
    """How the wait for the ranks ended: by itself, the timeout, a stall or a signal."""

    timed_out: bool = False
    stall: Stall | None = None
    interrupted: str | None = None


def _check_arguments(script: Path, np: int, framework: str | None, timeout_s: float) -> None:
    """Raise the errors :func:`check_script` documents for a bad argument."""
    if not script.is_file():
        raise FileNotFoundError(f"no script {str(script)!r} (from {Path.cwd()})")
    if np < 2:
        raise ValueError(f"np={np}: the checks compare ranks, use np >= 2")
    if framework not in (None, *FRAMEWORKS):
        raise ValueError(f"framework={framework!r} is not one of {', '.join(FRAMEWORKS)}")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s={timeout_s} must be > 0")


def _report(
    script: str,
    np: int,
    framework: str | None,
    launches: dict[str, _Launch],
    ended: _Ended,
    timeout_s: float,
    start: float,
) -> Report:
    """The :class:`Report` on the ended (or stopped) launches of :func:`check_script`: judged
    on partial evidence after a timeout, a stall, an interruption or a crash, else the
    verdicts of :func:`workshop.check.verdicts.judge`."""
    main = launches["main"]
    observations = main.observations()
    output = main.output()[-OUTPUT_CHARS:]
    seconds = time.monotonic() - start
    found = _framework(observations)
    base, note = _base_observation(launches.get("base"))

    def stopped(error: str, **marks) -> Report:
        checks = _partial_verdicts(observations, np, base, note, framework)
        return Report(script, np, found, checks, 2, seconds, error, output, **marks)

    if ended.interrupted:
        return stopped(
            f"interrupted by {ended.interrupted} after {seconds:.1f} s: every rank was stopped",
            interrupted=ended.interrupted,
        )
    if ended.stall is not None:
        style = style_of(list(observations.values()), framework)
        waited = max(
            (item["age_s"] for obs in observations.values() for item in obs.get("pending") or []),
            default=ended.stall.waited_s,
        )
        return stopped(
            stall_message(ended.stall, observations, np, style),
            stalled=True,
            stalled_for_s=waited,
        )
    if ended.timed_out:
        return stopped(_timeout_message(timeout_s, observations))
    style = style_of(list(observations.values()), framework)
    crash = crash_report(observations, np, main.output(), main.exit_code, style)
    if crash:
        error, traceback_text = crash
        return stopped(error, traceback=traceback_text)
    checks = judge(list(observations.values()), base, note, framework)
    exit_code = 1 if any(check.ok is False for check in checks.values()) else 0
    error = _hook_errors_message(observations)
    return Report(script, np, found, checks, exit_code, seconds, error, output)


def _timeout_message(timeout_s: float, observations: dict[int, dict]) -> str:
    error = (
        f"stopped after {timeout_s:g} s: the script did not finish; does it loop "
        "forever or wait on a rank that crashed? (workshop check is meant for "
        "short runs: pass arguments that make it take a few steps)"
    )
    finished = sorted(rank for rank, obs in observations.items() if obs["status"] != "stopped")
    if finished:
        error += f"; {ranks_text(finished)} had finished"
    return error


def _hook_errors_message(observations: dict[int, dict]) -> str | None:
    """What the runner's hooks could not observe (the first three), or None."""
    hook_errors = sorted({e for obs in observations.values() for e in obs["hook_errors"]})
    if not hook_errors:
        return None
    return "the checker could not observe everything: " + "; ".join(hook_errors[:3])


def _wait(launches: dict[str, _Launch], deadline: float, say, stall_s: float = STALL_S) -> _Ended:
    """Wait for every launch, watching the main run's ranks for a stall
    (:class:`workshop.check.stalls.StallWatch`). The np=1 base run stops at its first
    optimizer step: once the main run is over, it gets at most as long again as the main run
    took (at least BASE_GRACE_S), then it is stopped."""
    main = launches["main"]
    base = launches.get("base")
    base_deadline = None
    watch = StallWatch(stall_s=stall_s)
    read_at = 0.0
    while True:
        main_done = main.poll(say)
        base_done = base is None or base.poll(say)
        if main_done and (base_done or main.exit_code != 0):
            return _Ended()
        now = time.monotonic()
        if not main_done and now - read_at >= 1.0:
            read_at = now
            stall = watch.feed(main.progress(), now)
            if stall is not None:
                say(f"  stalled: no rank moved for {stall.frozen_s:.0f} s; stopping every rank")
                return _Ended(stall=stall)
        if main_done and base_deadline is None:
            base_deadline = min(deadline, now + max(BASE_GRACE_S, now - main.started))
        if now > (base_deadline or deadline):
            for launch in launches.values():
                launch.stop()
            return _Ended(timed_out=not main_done)
        time.sleep(0.1)


def _base_observation(base: _Launch | None) -> tuple[dict | None, str]:
    """The np=1 run's first step, and a note saying why it is missing when it is."""
    if base is None:
        return None, "the np=1 run was turned off"
    observed = base.observations().get(0)
    if base.stopped and not observed:
        return None, "the np=1 run was stopped before its first step"
    if not observed:
        return None, f"the np=1 run ended without reporting (exit code {base.exit_code})"
    if observed.get("status") == "error":
        return None, (
            f"the script crashed when run alone: {observed['error']['type']}: "
            f"{observed['error']['message']}"
        )
    if not observed.get("steps"):
        return None, "the np=1 run made no optimizer step"
    return observed, ""
