"""The launcher's decisions, without starting processes."""

from pathlib import Path

import pytest

from workshop.launch.run import RunConfig, horovod_env, launch_command, new_run_dir


def test_invalid_options_are_named():
    with pytest.raises(ValueError, match="framework='jax'"):
        RunConfig(framework="jax").validate()
    with pytest.raises(ValueError, match="--mpi-profile needs --controller mpi"):
        RunConfig(mpi_profile=True).validate()
    with pytest.raises(ValueError, match="np=64 needs 64 cores"):
        RunConfig(np=64).validate()
    RunConfig(np=64, oversubscribe=True).validate()
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
    config = RunConfig(np=2, controller="mpi", timeline=True, mark_cycles=True,
                       fusion_threshold_mb=0, cycle_time_ms=5, steps_per_epoch=7)
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
    config = RunConfig(np=8, timeline=True, fusion_threshold_mb=64,
                       launcher="mpirun -hostfile nodes -n 8 -npernode 8")
    argv, env = launch_command(config, tmp_path, "full")
    assert argv[:7] == ["mpirun", "-hostfile", "nodes", "-n", "8", "-npernode", "8"]
    assert "horovodrun" not in argv
    assert env["HOROVOD_TIMELINE"] == str(tmp_path / "timeline.json")
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(64 * 1024 * 1024)
    exported = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-x"]
    assert "HOROVOD_TIMELINE" in exported and "HOROVOD_FUSION_THRESHOLD" in exported


def test_autotune_logs_into_the_run_directory(tmp_path):
    env = horovod_env(RunConfig(autotune=True), Path(tmp_path))
    assert env["HOROVOD_AUTOTUNE_LOG"] == str(tmp_path / "autotune.csv")
