"""Launch a real Horovod training run into a new run directory (see docs/run-directory.md).

On a laptop or Binder the ranks are started by ``horovodrun`` (Gloo or MPI controller). On a
cluster the batch system's MPI launcher starts them (``launcher="mpiexec -n 8 -ppn 4 ..."``), and
the run directory is the same, so the notebooks analyse cluster runs unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from workshop.cluster.hosts import ClusterLaunch, cluster_launch
from workshop.findings.failure import launcher_problem, lost_line
from workshop.launch.horovodrun import horovodrun_command, rank_environment
from workshop.launch.programs import find_program, program_path_env
from workshop.launch.quiet import ForeignLoad
from workshop.launch.record import (
    failure_message,
    failure_record,
    hosts_seen,
    provenance,
    rank_statuses,
    recorded_env,
    result_fields,
    write_json,
    write_rank_logs,
)
from workshop.launch.stopping import (
    end_on_parent_death,
    ignore_stop_signals,
    kill_marked,
    restore_handlers,
    signal_of,
    stop_on_signals,
    stop_process_group,
)
from workshop.launch.torchrun import ddp_settings, runs_ddp, torchrun_launch
from workshop.paths import runs_dir
from workshop.readers.exits import oom_kill_count
from workshop.readers.runs import launcher_identity
from workshop.rules import HOROVOD_ENV_FILE, HOROVOD_ENV_KEY
from workshop.runspec import (
    FRAMEWORK_PROGRAMS,
    RUN_SPEC,
    check_values,
    horovod_variables,
    horovodrun_flags,
    program_arguments,
)


class RunError(RuntimeError):
    """A run could not start or did not finish; the message names the run directory and log.

    ``exit_code`` is what ``workshop run`` exits with (also recorded in run.json).
    """

    exit_code = 1


class RunInterrupted(RunError):
    """A signal stopped the run (Ctrl-C's SIGINT, SIGTERM, SIGHUP): every rank was stopped,
    the files are kept and run.json says ``interrupted``. ``exit_code`` is 128 + the signal
    number, as a shell reports a process the signal ended (130, 143, 129)."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


class _RunConfigChecks:
    def validate(self) -> None:
        """Raise ``ValueError`` naming the first option that cannot work: a value outside its
        choices or bound (declared in :data:`workshop.runspec.RUN_SPEC`), then the checks
        that involve two options or this machine."""
        check_values(self)
        if (
            not self.launcher
            and self.fusion_threshold_mb is not None
            and self.fusion_threshold_mb != int(self.fusion_threshold_mb)
        ):
            raise ValueError(
                f"fusion_threshold_mb={self.fusion_threshold_mb:g}: horovodrun's "
                "--fusion-threshold-mb takes whole MB"
            )
        if self.backward_passes_per_step > 1 and self.framework != "torch":
            raise ValueError(
                "--backward-passes-per-step > 1 needs --framework torch: Horovod 0.28.1's "
                "DistributedGradientTape, which the TensorFlow program uses, has no "
                "backward_passes_per_step (only its legacy and Keras DistributedOptimizer do)"
            )
        if self.mpi_profile and self.controller != "mpi" and not self.launcher:
            raise ValueError("--mpi-profile needs --controller mpi (the profiler wraps MPI calls)")
        if self.mark_cycles and not self.timeline:
            raise ValueError("--mark-cycles marks cycles in the timeline: add --timeline")
        if self.profile_steps and not self.script:
            raise ValueError("--profile-steps profiles a script of yours: add --script FILE")
        cores = os.cpu_count() or 1
        if not self.launcher and self.np > cores and not self.oversubscribe:
            raise ValueError(
                f"np={self.np} needs {self.np} cores but this machine has {cores}: the ranks "
                "would share cores and every timing would mislead. Use np <= "
                f"{cores}, or --oversubscribe to run anyway (recorded in run.json)."
            )


RunConfig = dataclasses.make_dataclass(
    "RunConfig",
    [
        (option.field, option.annotation, dataclasses.field(default=option.default))
        for option in RUN_SPEC
    ],
    bases=(_RunConfigChecks,),
)
RunConfig.__module__ = __name__
RunConfig.__doc__ = """Everything that defines a run (recorded as ``config`` in run.json).

    One field per row of :data:`workshop.runspec.RUN_SPEC` (name, type and default come from
    there). ``batch_size`` is per worker and per backward pass; ``backward_passes_per_step``
    batches are accumulated per allreduce and optimizer step, so the global batch is
    ``batch_size x np x backward_passes_per_step``. ``lr`` is the learning rate that suits
    ``base_batch_size`` (default: the global batch of one worker), scaled for the global batch by
    ``lr_scaling`` (none/linear/sqrt) with ``warmup_epochs`` of gradual warmup.
    ``fusion_threshold_mb``, ``cycle_time_ms``, ``cache_capacity`` (None: Horovod's default)
    and ``autotune`` are Horovod's knobs (:data:`workshop.runspec.HOROVOD_SETTINGS`);
    ``compression`` is the gradients' allreduce compression (``hvd.Compression``).
    ``launcher`` replaces horovodrun on clusters. ``validate()`` raises ``ValueError`` naming
    the first option that cannot work.

    >>> RunConfig(np=4).np, RunConfig().batch_size
    (4, 32)
    """


def new_run_dir(config: RunConfig, out_dir: Path | None = None, name: str | None = None) -> Path:
    """Create a new, empty run directory; never reuses an existing one (adds -2, -3, ...)."""
    parent = Path(out_dir) if out_dir else runs_dir()
    parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    base = name or f"{stamp}-{config.framework}-{config.dataset}-{config.controller}-np{config.np}"
    for attempt in range(1, 1000):
        candidate = parent / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        (candidate / "logs").mkdir()
        return candidate
    raise RunError(f"could not create a new run directory under {parent} for {base!r}")


def train_args(config: RunConfig, run_dir: Path, data_mode: str) -> list[str]:
    """Arguments of the training program (one rank): the options that have a
    ``program_flag`` in :data:`workshop.runspec.RUN_SPEC`, in its order; for ``--script``, the
    learner's script under ``workshop check``'s runner (its observations in
    ``observations/``, its step times and status in ``logs/``), with the script's arguments."""
    if config.script:
        observations = run_dir / "observations"
        runner = [sys.executable, "-P", "-m", "workshop.check.runner", "--out", str(observations)]
        runner += ["--run-dir", str(run_dir)]
        runner += ["--profile-steps", str(config.profile_steps)] if config.profile_steps else []
        script = str(Path(config.script).resolve())
        return [*runner, script, *shlex.split(config.script_args or "")]
    program = FRAMEWORK_PROGRAMS[config.framework]
    run = [sys.executable, "-m", program, "--run-dir", str(run_dir)]
    return run + program_arguments(config, data_mode)


def launch_command(
    config: RunConfig, run_dir: Path, data_mode: str, cluster: ClusterLaunch | None = None
) -> tuple[list[str], dict]:
    """The command that starts all ranks, and the extra environment it needs.

    horovodrun gets Horovod's knobs as its flags and sets the ``HOROVOD_*`` variables for the
    ranks itself; a cluster's launcher (``config.launcher``) gets the variables. Inside an
    emulated cluster (``cluster``, see workshop.cluster.hosts) horovodrun gets its host list and
    network interface instead of ``localhost``.
    """
    from workshop.train.common import threads_per_rank

    threads = None
    if config.threads_per_rank or not config.launcher:
        # All horovodrun ranks share this host; on clusters each rank divides its own node's
        # cores by its local size (workshop.train.common.threads_per_rank).
        threads = config.threads_per_rank or threads_per_rank(config.np, None)
    env = rank_environment(threads=threads)
    rank_env = {}
    if config.mpi_profile:
        from workshop.launch.profiler import launch_env

        rank_env = launch_env(run_dir)
    program = train_args(config, run_dir, data_mode)
    if runs_ddp(config):  # a PyTorch DDP script: torchrun starts its ranks, here
        return torchrun_launch(config.np, program, run_dir), env
    if config.launcher:
        rank_env |= horovod_variables(config, run_dir)  # no horovodrun to turn flags into these
        launcher = shlex.split(config.launcher)
        if Path(launcher[0]).name == "mpirun":  # Open MPI: export each variable to the ranks
            for key in sorted(env | rank_env):
                launcher += ["-x", key]
        return launcher + program, env | rank_env

    flags = horovodrun_flags(config, run_dir)
    if rank_env:
        if config.controller != "mpi":
            env |= rank_env
        else:  # only the ranks, not horovodrun or mpirun, get these (e.g. LD_PRELOAD)
            exports = " ".join(f"-x {key}={value}" for key, value in sorted(rank_env.items()))
            flags = [*flags, f"--mpi-args={exports}"]
    command = horovodrun_command(
        config.np,
        program,
        controller=config.controller,
        hosts=cluster.hosts if cluster else None,
        # horovodrun refuses an interface without 127.0.0.1 when all its hosts are local
        # ("No interface is found for address 127.0.0.1."): one node needs none
        interface=cluster.interface if cluster and "," in cluster.hosts else None,
        flags=flags,
        program="horovodrun",  # found on the PATH the launch gives (program_path_env)
    )
    return command, env


def _horovod_env(run_dir: Path) -> dict:
    """run.json's ``horovod_env``: the Horovod settings rank 0's environment held
    (:func:`workshop.rules.write_horovod_env`), or nothing when no rank wrote them."""
    path = run_dir / "logs" / HOROVOD_ENV_FILE.format(rank=0)
    try:
        return {HOROVOD_ENV_KEY: json.loads(path.read_text())}
    except (OSError, ValueError):
        return {}


def _stop_leftovers(run_dir: Path) -> None:
    """Kill any rank still alive after the launcher ended (e.g. after Ctrl-C)."""
    kill_marked(str(run_dir))


def _tell(message: str) -> None:
    """Print to stderr, which may be gone (a closed terminal is what sends SIGHUP)."""
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


# Start-up chatter of TensorFlow's C++ runtime in horovodrun itself: kept in the log only.
LAUNCHER_NOISE = re.compile(r"absl::InitializeLog|cudart_stub\.cc|Could not find cuda drivers")


def _stream(process: subprocess.Popen, log_path: Path, quiet: bool) -> None:
    """Copy the launcher's output to logs/launcher.log; show rank 0's lines (the progress)."""
    prefix = re.compile(r"^\[(?:\d+,)?(\d+)\]<(stdout|stderr)>:")
    with log_path.open("w") as log:
        for line in process.stdout:
            log.write(line)
            log.flush()
            match = prefix.match(line)
            if quiet:
                continue
            if match is None:
                if not LAUNCHER_NOISE.search(line):
                    print(line, end="", flush=True)
            elif match.group(1) == "0" and match.group(2) == "stdout":
                print(line[match.end() :], end="", flush=True)


def run_one(
    config: RunConfig,
    *,
    out_dir: Path | None = None,
    name: str | None = None,
    quiet: bool = False,
    command: list[str] | None = None,
) -> Path:
    """Run ``config`` with real Horovod processes into a new run directory.

    Args:
        config: what to run.
        out_dir: parent of the run directory (default ``runs/`` of the repo).
        name: run directory name (default from the time and the config).
        quiet: print nothing while the run goes on.
        command: the user-level command line to record (default: ``sys.argv``).

    Returns:
        The run directory, whose run.json says ``status: ok``.

    Raises:
        ValueError: invalid configuration (nothing is created).
        RunError: the run failed or was interrupted; run.json records which, and the message
            names the failed ranks and their logs.
    """
    from workshop.train import data

    config.validate()
    ddp = runs_ddp(config)
    cluster = None if config.launcher or ddp else cluster_launch(config.np)
    if cluster and config.threads_per_rank is None:
        # The emulated nodes share this machine's cores: divide them by all ranks, not by the
        # ranks of one node (what each rank would do on a real node).
        from workshop.train.common import threads_per_rank

        config = dataclasses.replace(config, threads_per_rank=threads_per_rank(config.np, None))
    if not ddp:
        _require_horovodrun(config)
    # a script of the learner's takes its own data
    data_mode = "script" if config.script else data.prepare(config.dataset, config.data)
    run_dir = new_run_dir(config, out_dir, name)
    if config.script:
        (run_dir / "observations").mkdir()  # workshop check's runner writes rank.N.json there
    argv, extra_env = launch_command(config, run_dir, data_mode, cluster)
    # The environment's own programs first (horovodrun, and what it starts), activated or not.
    env = os.environ | {"PATH": program_path_env()} | extra_env
    record = _started_record(config, run_dir, argv, env, data_mode, command)
    record["engine"] = "ddp" if ddp else "horovod"  # what moved the gradients
    if cluster:
        record["cluster"] = cluster.record
    write_json(run_dir / "run.json", record)
    if not quiet:
        print(f"run directory: {run_dir}")
        print("$ " + shlex.join(argv), flush=True)

    start, started_wall = time.perf_counter(), time.time()
    oom_kills_before = oom_kill_count()
    found = None
    previous = stop_on_signals()
    try:
        with ForeignLoad() as other_work:
            launch_exit_code, stopped_by = _run_launcher(argv, env, run_dir, quiet, previous)
        ignore_stop_signals(previous)  # the outcome must reach run.json
        _stop_leftovers(run_dir)
        if cluster:
            from workshop.cluster.emulate import stop_job_daemons

            stop_job_daemons(cluster.record["nodes"], since=started_wall)
        if config.script:  # the ranks' output, tagged by horovodrun, into logs/rank.N.log
            write_rank_logs(run_dir, config.np)
        record |= _ended_fields(run_dir, config.np, start, launch_exit_code, stopped_by)
        # the cores other work kept busy meanwhile: a rank that waited for a CPU on a machine
        # nobody else used waited for its own run's threads (workshop diagnose's cpu_wait_gap)
        record["other_work_cores"] = round(other_work.foreign_cores, 3)
        record |= ddp_settings(run_dir) if ddp else _horovod_env(run_dir)
        record |= result_fields(run_dir, record["data"])
        if cluster:
            record["cluster"]["rank_hosts_seen"] = hosts_seen(run_dir, config.np)
        if record["status"] == "failed":
            found, record["failure"] = failure_record(run_dir, config.np, oom_kills_before)
            launcher_log = run_dir / "logs" / "launcher.log"
            if launcher_log.exists():
                record["launcher_problem"] = launcher_problem(
                    launcher_log.read_text(errors="replace")
                )
        write_json(run_dir / "run.json", record)
    finally:
        restore_handlers(previous)
    if stopped_by is not None:
        raise RunInterrupted(
            f"run interrupted ({signal.Signals(stopped_by).name}); its files are kept in "
            f"{run_dir} (run.json status: interrupted)",
            stopped_by,
        )
    if record["status"] != "ok":
        failure = record.get("failure") or {}
        message = failure_message(
            run_dir, launch_exit_code, found, config.framework,
            oom_kills=failure.get("oom_kills"), oom_in_log=failure.get("oom_in_log"),
        )  # fmt: skip
        if record.get("launcher_problem"):
            message += f"\n  {record['launcher_problem']}"
        if lost := lost_line(record):  # on a cluster: the node the failure started on
            message += f"\n  {lost}"
        raise RunError(message)
    return run_dir


def _require_horovodrun(config: RunConfig) -> None:
    """Fail before anything is created when no launcher can start the ranks."""
    if not config.launcher and not find_program("horovodrun"):
        raise RunError(
            f"horovodrun not found beside {sys.executable} nor on PATH: Horovod is not "
            "installed in this environment. Run `bash scripts/setup.sh` (it builds Horovod)."
        )


def _started_record(
    config: RunConfig,
    run_dir: Path,
    argv: list[str],
    env: dict[str, str],
    data_mode: str,
    command: list[str] | None,
) -> dict:
    """run.json as it stands while the run goes on (``status: running``)."""
    return {
        "schema": 1,
        "name": run_dir.name,
        "command": command or [Path(sys.argv[0]).name, *sys.argv[1:]],
        "launch_command": argv,
        "config": dataclasses.asdict(config),
        "env": recorded_env(env),
        **provenance(),
        "data": {"name": config.dataset, "mode": data_mode},
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "status": "running",
        "launcher": launcher_identity(),
    }


def _run_launcher(
    argv: list[str], env: dict[str, str], run_dir: Path, quiet: bool, previous: dict
) -> tuple[int | None, int | None]:
    """Start the launcher in its own process group and stream its output until it ends, or
    until a stop signal ends it and what it started.

    Returns:
        The launcher's exit code (None if it never started) and the signal that stopped the
        run (None if none did).
    """
    process = None
    try:
        process = subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=end_on_parent_death,
        )
        _stream(process, run_dir / "logs" / "launcher.log", quiet)
        return process.wait(), None
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP (Stopped)
        ignore_stop_signals(previous)
        stopped_by = signal_of(exc)
        _tell(f"\n{signal.Signals(stopped_by).name}: stopping every rank...")
        if process is None:
            return None, stopped_by
        return stop_process_group(process, stopped_by), stopped_by


def _ended_fields(
    run_dir: Path, np: int, start: float, launch_exit_code: int | None, stopped_by: int | None
) -> dict:
    """What run.json adds when the run has ended: its status and exit code, and each rank's."""
    statuses = rank_statuses(run_dir, np)
    failed = [rank for rank, state in statuses.items() if state == "failed"]
    if stopped_by is not None:
        status, exit_code = "interrupted", 128 + stopped_by
    elif launch_exit_code == 0 and not failed:
        status, exit_code = "ok", 0
    else:
        status, exit_code = "failed", RunError.exit_code
    return {
        "ended_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - start, 3),
        "status": status,
        "exit_code": exit_code,
        "launch_exit_code": launch_exit_code,
        "signal": signal.Signals(stopped_by).name if stopped_by is not None else None,
        "rank_status": statuses,
        "failed_ranks": failed,
    }
