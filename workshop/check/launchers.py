"""Which launcher starts a checked script's ranks: horovodrun for a Horovod script, torchrun
for a ``torch.distributed`` (DDP) one. The same runner (:mod:`workshop.check.runner`) runs
under both, so the observations and the verdicts are the same whatever launched the ranks.

The choice is made before the run, from the script's imports and names (nothing else can tell
it then); everything judged after it comes from what the ranks did.
"""

from __future__ import annotations

import ast
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
