"""The Slurm job script checks that srun offers PMIx before it launches (a site whose
MpiDefault is none starts each rank alone), and asks for it: srun --mpi=pmix."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest


def slurm_script(python: str) -> str:
    """The job script of tests/test_jobscript_golden.py's Slurm CPU case, for ``python``."""
    path = Path(__file__).with_name("test_jobscript_golden.py")
    spec = importlib.util.spec_from_file_location("_jobscript_golden_cases_pmix", path)
    golden = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(golden)
    argv = [*golden.CASES["slurm-torch-mnist-cpu-1x4"]]
    argv[argv.index("--python") + 1] = python
    from workshop.cli import build_parser
    from workshop.commands.jobscript import spec_from_args
    from workshop.launch.jobscript import render

    return render(spec_from_args(build_parser().parse_args(["jobscript", *argv])))


@pytest.mark.parametrize(
    ("plugins", "launched"),
    [
        ("MPI plugin types are...\n        none\n        pmi2\n        pmix\n", True),
        # near miss: a Slurm with PMI-2 only: Open MPI's ranks could not find each other
        ("MPI plugin types are...\n        none\n        pmi2\n", False),
    ],
    ids=["pmix", "no-pmix"],
)
def test_the_job_stops_before_srun_when_srun_offers_no_pmix(
    plugins: str, launched: bool, tmp_path: Path, fake_program
) -> None:
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir / "srun", f"printf '%s' '{plugins}'\n")
    python = fake_program(bin_dir / "python", f'echo "$@" > {tmp_path}/argv\n')
    (tmp_path / "job.sh").write_text(slurm_script(str(python)))
    result = subprocess.run(
        ["bash", str(tmp_path / "job.sh")], env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if launched:
        assert result.returncode == 0, result.stderr
        assert "--launcher srun --mpi=pmix " in (tmp_path / "argv").read_text()
    else:
        assert result.returncode == 1 and not (tmp_path / "argv").exists()
        assert result.stderr.startswith(
            "workshop job: this srun offers no PMIx (srun --mpi=list: MPI plugin types are..."
        )
        assert "change --mpi= in LAUNCHER" in result.stderr
