"""The launcher's decisions, without starting processes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workshop.launch.horovodrun import rank_environment
from workshop.launch.record import recorded_env
from workshop.launch.run import RunConfig, launch_command, new_run_dir
from workshop.runspec import horovod_variables


def test_invalid_options_are_named():
    with pytest.raises(ValueError, match="framework='jax'"):
        RunConfig(framework="jax").validate()
    with pytest.raises(ValueError, match="--mpi-profile needs --controller mpi"):
        RunConfig(mpi_profile=True).validate()
    too_many = (os.cpu_count() or 1) + 1  # one rank more than this machine has cores
    with pytest.raises(ValueError, match=f"np={too_many} needs {too_many} cores"):
        RunConfig(np=too_many).validate()
    RunConfig(np=too_many, oversubscribe=True).validate()
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        RunConfig(batch_size=0).validate()


def test_run_directories_are_never_reused(tmp_path):
    config = RunConfig()
    first = new_run_dir(config, tmp_path, name="demo")
    (first / "run.json").write_text("{}")
    second = new_run_dir(config, tmp_path, name="demo")
    third = new_run_dir(config, tmp_path, name="demo")
    assert [p.name for p in (first, second, third)] == ["demo", "demo-2", "demo-3"]
    assert (first / "run.json").read_text() == "{}"
    assert (second / "logs").is_dir()


def test_horovodrun_command_mirrors_the_options(tmp_path):
    config = RunConfig(
        np=2,
        controller="mpi",
        timeline=True,
        mark_cycles=True,
        fusion_threshold_mb=0,
        cycle_time_ms=5,
        steps_per_epoch=7,
    )
    argv, env = launch_command(config, tmp_path, "subset")
    assert argv[:6] == ["horovodrun", "-np", "2", "-H", "localhost:2", "--mpi"]
    assert argv[argv.index("--timeline-filename") + 1] == str(tmp_path / "timeline.json")
    assert "--timeline-mark-cycles" in argv
    assert argv[argv.index("--fusion-threshold-mb") + 1] == "0"
    assert argv[argv.index("--cycle-time-ms") + 1] == "5"
    assert argv[argv.index("-m") + 1] == "workshop.train.torch_train"
    assert argv[argv.index("--steps-per-epoch") + 1] == "7"
    assert env["TF_USE_LEGACY_KERAS"] == "1"


def test_cluster_launcher_gets_horovod_knobs_as_environment(tmp_path):
    config = RunConfig(
        np=8,
        timeline=True,
        fusion_threshold_mb=64,
        launcher="mpirun -hostfile nodes -n 8 -npernode 8",
    )
    argv, env = launch_command(config, tmp_path, "full")
    assert argv[:7] == ["mpirun", "-hostfile", "nodes", "-n", "8", "-npernode", "8"]
    assert "horovodrun" not in argv
    assert env["HOROVOD_TIMELINE"] == str(tmp_path / "timeline.json")
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(64 * 1024 * 1024)
    exported = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"]
    assert "HOROVOD_TIMELINE" in exported and "HOROVOD_FUSION_THRESHOLD" in exported


def test_autotune_logs_into_the_run_directory(tmp_path):
    env = horovod_variables(RunConfig(autotune=True), Path(tmp_path))
    assert env["HOROVOD_AUTOTUNE_LOG"] == str(tmp_path / "autotune.csv")


def test_run_json_records_the_run_knobs_but_never_a_secret():
    env = {
        "HOROVOD_FUSION_THRESHOLD": "0",
        "HOROVOD_TIMELINE": "/r/timeline.json",
        "OMPI_MCA_btl": "self,tcp",
        "NCCL_DEBUG": "INFO",
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "TF_USE_LEGACY_KERAS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "SLURM_JOB_ID": "4242",
        "PBS_JOBID": "17.polaris",
        "COBALT_JOBID": "9",
        # Terraform's credentials (TF_ is also TensorFlow's prefix), and other secrets
        "TF_TOKEN_app_terraform_io": "tok-123",
        "TF_VAR_db_password": "hunter2",
        "HOROVOD_SECRET_KEY": "abc",
        "NCCL_API_KEY": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "OMPI_MCA_credential_file": "/home/me/.cred",
        "GITHUB_TOKEN": "ghp_x",
        "HOME": "/home/me",
        "PATH": "/usr/bin",
    }
    recorded = recorded_env(env)
    for name in (
        "HOROVOD_FUSION_THRESHOLD",
        "HOROVOD_TIMELINE",
        "OMPI_MCA_btl",
        "NCCL_DEBUG",
        "OMP_NUM_THREADS",
        "CUDA_VISIBLE_DEVICES",
        "TF_USE_LEGACY_KERAS",
        "TF_CPP_MIN_LOG_LEVEL",
        "SLURM_JOB_ID",
        "PBS_JOBID",
        "COBALT_JOBID",
    ):
        assert recorded[name] == env[name], name
    secrets = ("tok-123", "hunter2", "abc", "ghp_x", "/home/me/.cred")
    assert not any(value in recorded.values() for value in secrets), recorded
    for name in (
        "TF_TOKEN_app_terraform_io",
        "TF_VAR_db_password",
        "GITHUB_TOKEN",
        "HOME",
        "PATH",
        "AWS_SECRET_ACCESS_KEY",
    ):
        assert name not in recorded
    # a secret-looking name under a recorded prefix is listed, so the reader knows it was set
    assert recorded["HOROVOD_SECRET_KEY"] == recorded["NCCL_API_KEY"] == "<redacted>"
    assert recorded["OMPI_MCA_credential_file"] == "<redacted>"


def test_a_signal_the_launcher_was_started_ignoring_stays_ignored():
    # `nohup workshop run ... &`: the closed terminal's SIGHUP must not stop the run
    import signal

    from workshop.launch import stopping

    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    old_term = signal.getsignal(signal.SIGTERM)
    try:
        previous = stopping.stop_on_signals()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is stopping._raise_stopped
        stopping.restore_handlers(previous)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is old_term
    finally:
        signal.signal(signal.SIGHUP, old)
        signal.signal(signal.SIGTERM, old_term)


def test_the_installed_horovodrun_checks_the_torch_extension_first(horovod_ready):
    # build fix 8: the build check no longer imports TensorFlow on every launch
    from horovod.common.util import EXTENSIONS

    assert EXTENSIONS[:2] == ["torch", "tensorflow"]


def test_the_installed_horovodrun_asks_the_extensions_library_not_its_framework(horovod_ready):
    # build fix 9: the built-with checks load torch's extension library (no torch import) and
    # answer what the imported extensions answer; TensorFlow's library does not load alone, so
    # it is asked through the imported extension, as before
    code = """if True:
        import json, sys
        import horovod.common.util as util
        lib = util._extension_library("torch")
        library = [lib.gloo_built(), lib.mpi_built(), bool(lib.nccl_built())]
        imported = sorted({"torch", "tensorflow"} & set(sys.modules))
        checks = [util.gloo_built(), util.mpi_built(), bool(util.nccl_built())]
        tf_ext = util._extension_library("tensorflow")
        import horovod.torch as ht, horovod.tensorflow as htf
        answers = [[e.gloo_built(), e.mpi_built(), bool(e.nccl_built())] for e in (ht, tf_ext)]
        print(json.dumps([library, imported, checks, answers, tf_ext is htf]))
    """
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=os.environ | rank_environment(),
    )
    assert done.returncode == 0, done.stderr
    library, imported, checks, answers, tf_imported = json.loads(done.stdout.splitlines()[-1])
    assert imported == []
    assert library == checks == answers[0] == answers[1] == [True, True, False]
    assert tf_imported is True
