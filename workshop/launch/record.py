"""What run.json and a failed run's message say: the environment recorded (an allowlist,
secrets redacted), versions and host facts (:func:`provenance`), each rank's status, rank 0's
results, which rank started a failure (:func:`failure_record`, :func:`failure_message`), and
the atomic write of a JSON file. ``workshop run`` (:mod:`workshop.launch.run`) calls these;
recorders and benchmarks record their provenance with :func:`provenance`.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import subprocess
from importlib import metadata
from pathlib import Path

from workshop.analysis.failure import attribute
from workshop.findings.failure import failure_lines
from workshop.readers.exits import oom_in_log, oom_kill_count, rank_ends_in
from workshop.runspec import style_of_framework
from workshop.units import write_json_atomic

# run.json's "env": an allowlist of what changes how a run behaves (learners hand run.json in
# and commit it, so nothing else from their environment goes there), and never a secret.
ENV_RECORDED_PREFIXES = ("HOROVOD_", "OMPI_", "NCCL_", "GLOO_", "OMP_", "TF_CPP_", "WORKSHOP_")


ENV_RECORDED_NAMES = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "TF_USE_LEGACY_KERAS",
        "TF_NUM_INTRAOP_THREADS",
        "TF_NUM_INTEROP_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "LD_PRELOAD",
        "SAVE_ALL_TASKS",
        "COBALT_JOBID",
        "PBS_JOBID",
        "SLURM_JOB_ID",
    }
)


ENV_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|KEY|CREDENTIAL", re.IGNORECASE)


REDACTED = "<redacted>"


def recorded_env(env: dict[str, str]) -> dict[str, str]:
    """The environment variables run.json records (see docs/run-directory.md).

    Only the allowlisted ones (Horovod's, Open MPI's, NCCL's, Gloo's, thread counts, visible
    GPUs, TensorFlow's Keras and log switches, the workshop's, batch job ids); a name that
    looks like a secret (TOKEN, SECRET, PASSWORD, KEY, CREDENTIAL) is listed as ``<redacted>``.
    Terraform's ``TF_TOKEN_*`` / ``TF_VAR_*`` share TensorFlow's prefix and are not recorded.
    """
    recorded = {}
    for key, value in sorted(env.items()):
        if key in ENV_RECORDED_NAMES or key.startswith(ENV_RECORDED_PREFIXES):
            recorded[key] = REDACTED if ENV_SECRET.search(key) else value
    return recorded


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def provenance() -> dict:
    """Versions and host facts recorded in run.json."""
    from workshop.launch.profiler import mpi_version

    mpi = mpi_version() or None
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )
    gpus = []
    if shutil.which("nvidia-smi"):
        result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        gpus = [line for line in result.stdout.splitlines() if line.startswith("GPU")]
    import psutil

    return {
        "versions": {
            "python": platform.python_version(),
            "torch": _version("torch"),
            "tensorflow": _version("tensorflow-cpu") or _version("tensorflow"),
            "tf_keras": _version("tf-keras") or _version("tf_keras"),
            "horovod": _version("horovod"),
            "mpi": mpi,
            "workshop": _version("workshop"),
        },
        "host": {
            "hostname": socket.gethostname(),
            "cores": os.cpu_count(),
            "platform": platform.platform(),
            "cpu": cpu,
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "gpus": gpus,
        },
    }


def write_json(path: Path, payload: dict) -> None:
    """Write JSON atomically (a reader never sees half a file): :func:`workshop.units.
    write_json_atomic`, with anything JSON has no type for as its text."""
    write_json_atomic(path, payload, default=str)


def rank_statuses(run_dir: Path, np: int) -> dict[int, str]:
    statuses = {}
    for rank in range(np):
        path = run_dir / "logs" / f"rank.{rank}.status"
        statuses[rank] = path.read_text().strip() if path.exists() else "missing"
    return statuses


def failure_record(
    run_dir: Path, np: int, oom_kills_before: int | None
) -> tuple[dict | None, dict | None]:
    """Which rank started the failure and which failed as a consequence
    (:func:`workshop.analysis.failure.attribute` of the run's logs), and what run.json keeps
    of it (``failure``): the same, the ranks' errors without their tracebacks (those stay in
    the logs), with the out-of-memory kills the cgroup counted during the run and the
    launcher's words for one."""
    found = attribute(rank_ends_in(run_dir, np))
    if found is None:
        return None, None
    after = oom_kill_count()
    launcher_log = run_dir / "logs" / "launcher.log"
    text = launcher_log.read_text(errors="replace") if launcher_log.exists() else ""

    def brief(end: dict) -> dict:
        error = end.get("error")
        return end | {"error": {k: error[k] for k in ("type", "message")} if error else None}

    return found, {
        "cause": brief(found["cause"]),
        "also": [brief(e) for e in found["also"]],
        "consequences": [brief(e) for e in found["consequences"]],
        "oom_kills": after - oom_kills_before if None not in (after, oom_kills_before) else None,
        "oom_in_log": oom_in_log(text),
    }


def hosts_seen(run_dir: Path, np: int) -> dict[str, str | None]:
    """The hostname each rank reported (``logs/rank.N.host``, written inside a cluster)."""
    paths = {rank: run_dir / "logs" / f"rank.{rank}.host" for rank in range(np)}
    return {str(r): p.read_text().strip() if p.exists() else None for r, p in paths.items()}


def result_fields(run_dir: Path, data: dict) -> dict:
    """What run.json takes from rank 0's summary.json, when the run got that far."""
    summary_path = run_dir / "summary.json"
    if not summary_path.exists():
        return {}
    result = json.loads(summary_path.read_text())
    return {
        "result": result,
        "data": result.get("data", data),
        "device": result.get("device"),
        "devices": result.get("devices"),
    }


def failure_message(
    run_dir: Path,
    exit_code: int | None,
    found: dict | None,
    framework: str = "torch",
    oom_kills: int | None = None,
    oom_in_log: str | None = None,
) -> str:
    """The failed run in words, cause first (:func:`workshop.findings.failure.failure_lines`
    of :func:`workshop.analysis.failure.attribute`'s ``found``)."""
    lines = [f"run failed (launcher exit code {exit_code}); run directory {run_dir}"]
    logs = run_dir / "logs"
    if found is None:
        lines.append(f"  no rank reported a failure; see {logs / 'launcher.log'}")
        return "\n".join(lines)
    style = style_of_framework(framework)
    said = failure_lines(found, logs=logs, style=style, oom_kills=oom_kills, oom_in_log=oom_in_log)
    return "\n".join(lines + [f"  {line}" for line in said])


# horovodrun tags each line of a rank's output: "[1]<stderr>:..." (Gloo), "[1,1]<stderr>:..."
# (Open MPI's --tag-output: job, rank).
_TAGGED = re.compile(r"^\[(?:\d+,)?(?P<rank>\d+)\]<(?:stdout|stderr)>:(?P<text>.*)$")


def write_rank_logs(run_dir: Path, np: int = 0) -> dict[int, Path]:
    """Split the launcher's output (``logs/launcher.log``) into each rank's own log,
    ``logs/rank.N.log``, as the workshop's training programs write theirs (for ``--script``
    runs: a learner's script writes no log of its own). Untagged lines (the launcher's own)
    stay in the launcher's log only. Each of the ``np`` ranks gets a log, empty when it
    printed nothing.

    >>> import tempfile
    >>> run = Path(tempfile.mkdtemp()); (run / "logs").mkdir()
    >>> _ = (run / "logs" / "launcher.log").write_text(
    ...     "[0]<stdout>:epoch 1\\n[1,1]<stderr>:Traceback\\nProcess 1 exit with status 1.\\n")
    >>> {r: p.read_text() for r, p in write_rank_logs(run).items()}
    {0: 'epoch 1\\n', 1: 'Traceback\\n'}
    """
    logs = Path(run_dir) / "logs"
    source = logs / "launcher.log"
    lines: dict[int, list[str]] = {rank: [] for rank in range(np)}
    if source.exists():
        for line in source.read_text(errors="replace").splitlines():
            tagged = _TAGGED.match(line)
            if tagged:
                lines.setdefault(int(tagged["rank"]), []).append(tagged["text"])
    written = {}
    for rank, texts in sorted(lines.items()):
        path = logs / f"rank.{rank}.log"
        path.write_text("".join(f"{text}\n" for text in texts))
        written[rank] = path
    return written
