"""What horovodrun's build check costs each launch, and what fixes 8 and 9 of the build save.

Before it starts a rank, horovodrun asks an extension whether Gloo (or MPI) was built
(``horovod/common/util.py``: ``gloo_built`` tries the extensions in ``EXTENSIONS`` order, each
in a forked process, until one answers). Horovod 0.28.1 as released imports each extension
there, TensorFlow first, so every launch imports TensorFlow, even a PyTorch run's. The
workshop's build tries torch first (fix 8 in scripts/build_horovod.sh), and loads the
extension's library with ctypes instead of importing its framework (fix 9). All three give the
same answer here.

Measured in one run, interleaved (the variants' order rotates each round), on the installed
Horovod (which must have fix 9) with the variant set before horovodrun's code runs:

  as-released  TensorFlow first, each extension imported (Horovod 0.28.1 as released);
  fix-8        torch first, imported;
  fix-9        torch first, its library loaded (the workshop's build);

  check   the build check alone: ``gloo_built()``, wall seconds;
  launch  a whole 2-rank launch, ``horovodrun -np 2 --gloo python -c pass`` (rendezvous and
          two trivial ranks), wall seconds.

It prints min / median / max per variant and the per-round differences (as-released minus
fix-9, fix-8 minus fix-9) and, with ``--out DIR``, writes DIR/result.json with every round and
the provenance (command, UTC times, load average, git commit, versions, host).

    flock /tmp/workshop-cpu.lock python benchmarks/launch_check.py [--repeats 7] \
        [--out data/benchmarks/launch-check]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _recording import print_spreads, spread, started_now, write_result

from workshop.launch.horovodrun import horovodrun_command

#: name -> (EXTENSIONS order, how an extension answers: "import" it, or its "library")
VARIANTS = {
    "as-released": (["tensorflow", "torch", "mxnet"], "import"),
    "fix-8": (["torch", "tensorflow", "mxnet"], "import"),
    "fix-9": (["torch", "tensorflow", "mxnet"], "library"),
}
# Sets the variant of argv[1] in horovod.common.util: the order, and for "import" an
# _extension_library that imports the extension as 0.28.1 does.
SET_VARIANT = (
    "import importlib, json, sys; import horovod.common.util as util; "
    "order, how = json.loads(sys.argv.pop(1)); util.EXTENSIONS[:] = order; "
    "util._extension_library = (util._extension_library if how == 'library' else "
    "lambda name: importlib.import_module('.' + name, 'horovod')); "
)
# Runs horovodrun's own command line with that variant.
LAUNCHER = SET_VARIANT + "from horovod.runner.launch import run_commandline; run_commandline()"
CHECK = (
    SET_VARIANT + "import time; t = time.perf_counter(); built = util.gloo_built(); "
    "print(json.dumps({'built': built, 's': time.perf_counter() - t}))"
)


def check_s(variant: tuple) -> float:
    """Seconds of ``gloo_built()`` with ``variant`` (fails if it does not say True)."""
    out = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(variant)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = json.loads(out.strip().splitlines()[-1])
    if found["built"] is not True:
        raise SystemExit(f"gloo_built() said {found['built']!r} with {variant}")
    return found["s"]


def launch_s(variant: tuple) -> float:
    """Wall seconds of a 2-rank horovodrun launch of ``python -c pass`` with ``variant``."""
    # horovodrun's own command line, run by LAUNCHER instead of the horovodrun script
    flags = horovodrun_command(2, [sys.executable, "-c", "pass"], program="horovodrun")[1:]
    argv = [sys.executable, "-c", LAUNCHER, json.dumps(variant), *flags]
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True)
    took = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"launch with {variant} failed:\n{result.stdout}{result.stderr}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    started, load = started_now()
    rounds = []
    names = list(VARIANTS)
    for index in range(args.repeats):
        order = names[index % 3 :] + names[: index % 3]
        row = {"round": index, "order": order}
        for name in order:
            row[f"check_s[{name}]"] = check_s(VARIANTS[name])
            row[f"launch_s[{name}]"] = launch_s(VARIANTS[name])
        rounds.append(row)
        print(json.dumps(row), flush=True)
    summary = {}
    for what in ("check_s", "launch_s"):
        for name in VARIANTS:
            summary[f"{what}[{name}]"] = spread([r[f"{what}[{name}]"] for r in rounds])
        for before in ("as-released", "fix-8"):
            saved = [r[f"{what}[{before}]"] - r[f"{what}[fix-9]"] for r in rounds]
            summary[f"{what} saved per round ({before} - fix-9)"] = spread(saved)
    print_spreads(summary, "s")
    if args.out:
        record = {"what": __doc__.splitlines()[0], "rounds": rounds, "summary": summary}
        write_result(args.out, record, started, load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
