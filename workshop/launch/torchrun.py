"""Which launcher starts a script's ranks, and ``workshop run --script`` for a PyTorch DDP
script.

horovodrun starts a Horovod script's ranks, torchrun a ``torch.distributed`` (DDP) one; the
choice is made before the run, from the script's imports and names (nothing else can tell it
then: :func:`script_launcher`), for ``workshop check`` and ``workshop run --script`` alike.
Everything judged after it comes from what the ranks did.

A DDP script under ``workshop run --script`` has its ranks started by torchrun, into the
same run directory as any run (see docs/run-directory.md), so ``workshop diagnose`` and the
trace tools read it like a Horovod run.

The ranks run under ``workshop check``'s runner (:mod:`workshop.check.runner`), as a Horovod
script's do under horovodrun: each writes its step times, status and observations. torchrun
(torch 2.14, ``torch/distributed/run.py``) tags each line a rank prints with the
``--log-line-prefix-template`` given here, which is horovodrun's tag (``[RANK]<stdout>:``), so
the launcher's log splits into ``logs/rank.N.log`` the same way (``--tee 3`` prints both
streams of every rank; torchrun's own copies go to ``logs/torchrun/``).

DDP's knobs are evidence: the runner records what each ``DistributedDataParallel(...)`` was
built with (:func:`ddp_settings` reads them into run.json's ``ddp_settings``).
"""

from __future__ import annotations

import ast
import json
import sys
import threading
from pathlib import Path

#: What ``workshop check`` takes, for a script that is neither.
TAKES = (
    "workshop check takes a Horovod script (import horovod.torch / horovod.tensorflow as hvd; "
    "hvd.init()), run under horovodrun, or a PyTorch DDP script "
    "(torch.distributed.init_process_group(...), DistributedDataParallel(model)), run under "
    "torchrun"
)

_DDP_NAMES = {"init_process_group", "DistributedDataParallel"}
#: Two checks started from two threads (tests/test_check_stall_load.py) parsed their scripts at
#: once, and Python 3.11.7 raised "SystemError: AST constructor recursion depth mismatch".
_PARSING = threading.Lock()


def script_launcher(script: Path) -> str | None:
    """``horovod`` when the script imports Horovod, ``ddp`` when it imports
    ``torch.distributed`` / ``torch.nn.parallel`` or names ``init_process_group`` or
    ``DistributedDataParallel``, else None (a script that cannot be parsed: None, and Python
    itself will say why when it runs).

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.py"
    >>> _ = path.write_text("import torch.distributed as dist\\ndist.init_process_group('gloo')")
    >>> script_launcher(path)
    'ddp'
    """
    try:
        with _PARSING:  # CPython 3.11's ast.parse is not safe in two threads at once
            tree = ast.parse(script.read_text(errors="replace"), filename=str(script))
    except SyntaxError:
        return None
    modules, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
    if any(m == "horovod" or m.startswith("horovod.") for m in modules):
        return "horovod"
    ddp_modules = ("torch.distributed", "torch.nn.parallel")
    if any(m.startswith(ddp_modules) for m in modules) or names & _DDP_NAMES:
        return "ddp"
    return None


def torchrun_command(np: int, argv: list[str]) -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc-per-node NP --no-python ARGV``:
    torchrun (torch 2.14, ``torch/distributed/run.py``) with a local rendezvous on a free port,
    starting ``argv`` (the runner, an executable line: ``--no-python``) on each rank with
    ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` set."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc-per-node={np}", "--no-python", *argv,
    ]  # fmt: skip


#: The tag torchrun puts before each line a rank prints: horovodrun's, which
#: :func:`workshop.launch.record.write_rank_logs` and the progress stream read.
LINE_PREFIX = "[${rank}]<stdout>:"

#: run.json's ``ddp_settings``: DDP's knobs as the script's first DDP model was built with
#: them (torch 2.14, ``torch/nn/parallel/distributed.py``'s ``__init__`` arguments).
DDP_KNOBS = ("bucket_cap_mb", "gradient_as_bucket_view", "find_unused_parameters", "static_graph")


def runs_ddp(config) -> bool:
    """The run's ``--script`` is a PyTorch DDP script (:func:`workshop.check.launchers.
    script_launcher`: it imports ``torch.distributed`` or names ``init_process_group`` /
    ``DistributedDataParallel``, and not Horovod)."""
    return bool(config.script) and script_launcher(Path(config.script)) == "ddp"


def torchrun_launch(np: int, program: list[str], run_dir: Path) -> list[str]:
    """The torchrun command that starts ``program`` (the runner's command line) on ``np``
    local ranks, each line of theirs tagged with its rank.

    >>> argv = torchrun_launch(2, ["python", "-m", "workshop.check.runner"], Path("/r"))
    >>> argv[argv.index("--tee") + 1], argv[argv.index("--log-dir") + 1]
    ('3', '/r/logs/torchrun')
    """
    tagging = ["--tee", "3", "--log-line-prefix-template", LINE_PREFIX]
    tagging += ["--log-dir", str(run_dir / "logs" / "torchrun")]
    command = torchrun_command(np, program)
    at = command.index("--no-python")
    return command[:at] + tagging + command[at:]


def ddp_settings(run_dir: Path) -> dict:
    """run.json's ``ddp_settings``: each rank's DDP knobs (the first DDP model it built), from
    ``observations/rank.N.json``; ``{}`` when no rank built one (or wrote no observations).

    Returns:
        ``{"ddp_settings": {knob: value, ..., "models": n, "ranks_differ": [knob, ...]}}``,
        rank 0's values (or the lowest rank that built a model); ``ranks_differ`` names a knob
        whose value is not the same on every rank (DDP requires the same buckets everywhere).
    """
    per_rank: dict[int, dict] = {}
    for path in sorted((Path(run_dir) / "observations").glob("rank.*.json")):
        try:
            observed = json.loads(path.read_text())
            rank = int(path.name.split(".")[1])
        except (OSError, ValueError, IndexError):
            continue
        models = observed.get("ddp") or []
        if models:
            per_rank[rank] = {knob: models[0].get(knob) for knob in DDP_KNOBS}
            per_rank[rank]["models"] = len(models)
    if not per_rank:
        return {}
    first = per_rank[min(per_rank)]
    differ = [k for k in DDP_KNOBS if len({repr(s.get(k)) for s in per_rank.values()}) > 1]
    return {"ddp_settings": first | {"ranks_differ": differ}}
