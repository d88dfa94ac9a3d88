"""Recorded real runs of lesson 02's scripts: what the notebook replays when ``LIVE = False``.

Each recording is one JSON file in ``data/lessons/first-program/`` with the exact command, the
number of processes, the output, the wall time and the provenance (versions, machine, date,
load average). Re-record them all (a few minutes on 2 cores)::

    flock /tmp/workshop-cpu.lock python -m workshop.lessons.l02_first_program.recording
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from workshop.lessons.l02_first_program import scripts
from workshop.paths import data_dir, data_path

FOLDER = ("lessons", "first-program")
STEPS = ("--epochs", "3", "--steps", "20")
#: name -> (launcher, script, processes, arguments); "{ckpt}" is a fresh temporary folder.
RUNS = {
    "serial_torch": ("python", "serial_torch.py", 1, STEPS),
    "hvd_torch_solution": ("horovodrun", "hvd_torch_solution.py", 2, STEPS),
    "hvd_torch_checkpoint": (
        "horovodrun",
        "hvd_torch_solution.py",
        2,
        ("--epochs", "2", "--steps", "20", "--checkpoint", "{ckpt}"),
    ),
    "hvd_torch_resume": (
        "horovodrun",
        "hvd_torch_solution.py",
        2,
        ("--epochs", "3", "--steps", "20", "--checkpoint", "{ckpt}", "--resume"),
    ),
    "hvd_tf_loop_solution": ("horovodrun", "hvd_tf_loop_solution.py", 2, STEPS),
    "hvd_keras_fit_solution": ("horovodrun", "hvd_keras_fit_solution.py", 2, STEPS),
    "ddp_torch": ("torchrun", "ddp_torch.py", 2, STEPS),
}


def _provenance() -> dict:
    from workshop.launch.record import provenance

    return provenance() | {
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "loadavg_1_5_15": list(os.getloadavg()),
    }


def run(name: str, ckpt: str | os.PathLike) -> scripts.Launch:
    """Run the recording ``name`` of :data:`RUNS` for real (checkpoints go to ``ckpt``)."""
    launcher, script, processes, args = RUNS[name]
    args = [a.replace("{ckpt}", str(ckpt)) for a in args]
    if launcher == "python":
        return scripts.python(script, args)
    if launcher == "torchrun":
        return scripts.torchrun(script, processes, args)
    return scripts.horovodrun(script, processes, args)


def record(out_dir: Path, names: list[str] | None = None) -> list[Path]:
    """Run and save the recordings (default: all of :data:`RUNS`, the two checks of
    :data:`workshop.scripts.CHECK_ARGS`, then the Keras probe)."""
    from workshop.lessons.l02_first_program import keras_probe

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as ckpt:
        for name in [n for n in RUNS if names is None or n in names]:
            done = run(name, ckpt)
            launcher, script, processes, args = RUNS[name]
            payload = {
                "name": name,
                "script": script,
                "launcher": launcher,
                "np": processes,
                "args": list(args),
                "command": done.command,
                "returncode": done.returncode,
                "seconds": round(done.seconds, 2),
                "output": done.output,
                **_provenance(),
            }
            path = out_dir / f"{name}.json"
            path.write_text(json.dumps(payload, indent=2) + "\n")
            print(f"{path}: {done.seconds:.1f} s", flush=True)
            written.append(path)
    for name in scripts.CHECK_ARGS:
        if names is None or name in names:
            report = scripts.run_check(name)
            script, args = scripts.CHECK_ARGS[name]
            # what scripts.run_check ran, as a command line
            command = ["workshop", "check", script, "-np", str(report.np), "--framework", "torch"]
            payload = {
                "name": name,
                "script": script,
                "args": list(args),
                "command": [*command, "--", *args],
                "np": report.np,
                "report": report.to_dict(),
                "text": report.text(),
                **_provenance(),
            }
            path = out_dir / f"{name}.json"
            path.write_text(json.dumps(payload, indent=2) + "\n")
            print(f"{path}: {report.seconds:.1f} s, exit code {report.exit_code}", flush=True)
            written.append(path)
    if names is None or "keras_pieces" in names:
        path = out_dir / "keras_pieces.json"
        payload = {
            "pieces": keras_probe.probe(),
            "horovod_keras_backend": keras_probe.horovod_keras_backend(),
            **_provenance(),
        }
        path.write_text(json.dumps(payload, indent=2) + "\n")
        written.append(path)
    return written


def recorded(name: str) -> dict:
    """The recording ``name`` (of :data:`RUNS`, ``check_skeleton``, ``check_solution`` or
    ``keras_pieces``).

    Raises:
        FileNotFoundError: naming the file (see :func:`workshop.paths.data_path`).
        ValueError: the file is not valid JSON, naming it.
    """
    path = data_path(*FOLDER, f"{name}.json")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names",
        nargs="*",
        help=f"some of {', '.join(RUNS)}, "
        "check_skeleton, check_solution, keras_pieces (default: all)",
    )
    parser.add_argument("--out", type=Path, default=data_dir().joinpath(*FOLDER))
    args = parser.parse_args(argv)
    record(args.out, args.names or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
