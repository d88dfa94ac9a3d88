"""How often lesson 02's DDP script aborts at exit, as shipped and with Python's own shutdown.

``ddp_torch.py`` ends with ``os._exit(0)`` after ``main()``: with DDP, PyTorch 2.14 keeps
Gloo's worker threads after ``destroy_process_group`` (DDP's reducer keeps the process group),
and a worker thread that frees a finished collective's tensor while Python shuts down needs
the GIL, is ended by Python and aborts the rank ("terminate called without an active
exception"; backtrace: ``ProcessGroupGloo::runLoop`` -> ``~AsyncBarrierWork`` ->
``~AsyncAllreduceWork`` -> ``TensorImpl::decref_pyobject`` -> ``take_gil`` ->
``pthread_exit``). The window is short, so it shows on a busy machine.

Runs both versions alternately (``shipped``: the script as it is; ``python-shutdown``: the same
script without the lines after ``main()``), each ``torchrun --standalone --nproc_per_node 2
... --epochs 3 --steps 20`` at ``nice`` NICE beside BUSY processes that only spin, and counts
the runs that passed (exit 0, three epoch lines), aborted, or failed otherwise.

    python benchmarks/ddp_exit.py [--runs 40] [--busy 2] [--nice 10] \
        [--out data/benchmarks/ddp-exit]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from _recording import started_now, write_result

from workshop.lessons import EPOCH_LINE, script_path, torchrun_command

ARGS = ("--epochs", "3", "--steps", "20")
ENDING = 'if __name__ == "__main__":\n    main()\n'


def versions(folder: Path) -> dict[str, Path]:
    """The shipped script, and a copy that ends after ``main()`` (Python's own shutdown)."""
    text = script_path("ddp_torch.py").read_text()
    if ENDING not in text:
        raise SystemExit(f"{script_path('ddp_torch.py')}: no {ENDING!r} block to cut after")
    plain = folder / "ddp_python_shutdown.py"
    plain.write_text(text[: text.index(ENDING) + len(ENDING)])
    return {"shipped": script_path("ddp_torch.py"), "python-shutdown": plain}


def outcome(script: Path, nice: int) -> str:
    """``passed``, ``aborted`` or ``failed`` for one 2-process run of ``script``."""
    command = ["nice", "-n", str(nice), *torchrun_command(script, 2, ARGS)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if "terminate called without an active exception" in done.stdout + done.stderr:
        return "aborted"
    epochs = len(EPOCH_LINE.findall(done.stdout))
    return "passed" if done.returncode == 0 and epochs == 3 else "failed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="runs of each version")
    parser.add_argument("--busy", type=int, default=2, help="spinning processes beside them")
    parser.add_argument("--nice", type=int, default=10, help="niceness of the torchrun runs")
    parser.add_argument("--out", type=Path, default=None, help="folder for result.json")
    args = parser.parse_args()
    started, load = started_now()
    spin = [sys.executable, "-c", "while True: pass"]
    busy = [subprocess.Popen(spin) for _ in range(args.busy)]
    counts: dict[str, dict[str, int]] = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            scripts = versions(Path(folder))
            names = list(scripts)
            for index in range(args.runs):
                order = names if index % 2 == 0 else names[::-1]
                for name in order:
                    kind = outcome(scripts[name], args.nice)
                    tally = counts.setdefault(name, {"passed": 0, "aborted": 0, "failed": 0})
                    tally[kind] += 1
                print(f"run {index + 1}/{args.runs}: {counts}", flush=True)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    for name, tally in counts.items():
        print(
            f"{name}: {tally['aborted']} aborted, {tally['failed']} failed otherwise, "
            f"{tally['passed']} passed of {args.runs}"
        )
    if args.out:
        record = {
            "what": __doc__.splitlines()[0],
            "command_per_run": f"nice -n {args.nice} torchrun --standalone --nproc_per_node 2 "
            f"SCRIPT {' '.join(ARGS)}",
            "busy_processes": args.busy,
            "runs_each": args.runs,
            "counts": counts,
        }
        write_result(args.out, record, started, load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
