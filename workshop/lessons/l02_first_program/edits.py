"""The changes that make lesson 02's serial scripts data-parallel: the scripts' paths, the
learner's skeleton, each marked change shown side by side, and the samples each rank gets.

What lesson 02 teaches with them: see :mod:`workshop.lessons`.
"""

from __future__ import annotations

import ast
import difflib
import html
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

__all__ = [
    "CHANGES",
    "Change",
    "EPOCH_LINE",
    "Hunk",
    "MARK",
    "SCRIPTS_DIR",
    "SERIAL_OF",
    "MINUTES_PER_TODO",
    "TODO",
    "change",
    "changes",
    "script_path",
    "shard_sizes",
    "source",
    "todos",
    "write_skeleton",
    "writing_minutes",
]


SCRIPTS_DIR = Path(__file__).resolve().parent / "programs"

#: The changes that make a serial script data-parallel, in teaching order: tag -> title.
CHANGES = {
    "init": "hvd.init(): join the other processes",
    "device": "one device per process: pin to hvd.local_rank(), share the CPU cores",
    "shard": "each rank its own shard of the data",
    "lr": "scale the learning rate with the number of workers, with warmup",
    "optimizer": "average the gradients: hvd.DistributedOptimizer / DistributedGradientTape",
    "broadcast": "start every rank from rank 0's parameters and optimizer state",
    "metrics": "average the metrics over the ranks: hvd.allreduce",
    "rank0": "print and checkpoint on rank 0 only",
    "resume": "resume from a checkpoint, every rank from the same state",
}
#: Which serial script each Horovod script (solution or skeleton) starts from.
SERIAL_OF = {
    "hvd_torch_solution.py": "serial_torch.py",
    "hvd_torch_skeleton.py": "serial_torch.py",
    "hvd_tf_loop_solution.py": "serial_tf.py",
    "hvd_tf_loop_skeleton.py": "serial_tf.py",
    "hvd_keras_fit_solution.py": "serial_keras.py",
    "ddp_torch.py": "serial_torch.py",
}
MARK = re.compile(r"#.*\[(?:hvd|ddp):(\w+)\]")
TODO = re.compile(r"#\s*TODO \[hvd:(\w+)\]")
#: What one TODO of the skeleton takes a newcomer to fill in, minutes (issue 59's walk-through:
#: 25-30 minutes for the 18 TODOs of hvd_torch_skeleton.py).
MINUTES_PER_TODO = 1.5


def writing_minutes(name: str = "hvd_torch_skeleton.py") -> int:
    """Minutes a newcomer needs to fill in the skeleton ``name``: its TODOs, each
    :data:`MINUTES_PER_TODO` (lesson 02 states it beside its time to learn)."""
    return round(len(todos(script_path(name))) * MINUTES_PER_TODO)


EPOCH_LINE = re.compile(
    r"epoch (?P<epoch>\d+): train loss (?P<train_loss>[\d.]+) \| test loss (?P<test_loss>[\d.]+) "
    r"accuracy (?P<accuracy>[\d.]+) \| (?P<steps>\d+) steps in (?P<train_s>[\d.]+) s, "
    r"(?P<samples_per_s>[\d.]+) samples/s, lr (?P<lr>[\d.e+-]+)"
)


def script_path(name: str) -> Path:
    """The shipped lesson script ``name`` (e.g. ``"hvd_torch_solution.py"``).

    Raises:
        FileNotFoundError: naming the script and the ones there are.
    """
    path = SCRIPTS_DIR / name
    if not path.is_file():
        there = ", ".join(sorted(p.name for p in SCRIPTS_DIR.glob("*.py")))
        raise FileNotFoundError(f"no lesson script {name!r} in {SCRIPTS_DIR}; there are: {there}")
    return path


def write_skeleton(name: str = "hvd_torch_skeleton.py", folder: str | os.PathLike = ".") -> Path:
    """Copy a lesson script into the learner's ``folder`` without ever overwriting their edits.

    If ``folder/name`` does not exist it is written. If it exists unchanged (identical to the
    shipped file), it is reused. If it exists with edits, it is left alone and the next free
    name ``stem-2.py``, ``stem-3.py``, ... is written instead. Either way a line says which.

    Args:
        name: a script of :data:`SCRIPTS_DIR`, usually a skeleton.
        folder: where the learner works (created if missing).

    Returns:
        The path of the learner's copy.
    """
    source = script_path(name)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    stem, suffix = target.stem, target.suffix
    number = 1
    while target.exists():
        if target.read_bytes() == source.read_bytes():
            print(f"{target} is already there, unchanged: open it and fill in the TODOs")
            return target
        number += 1
        target = folder / f"{stem}-{number}{suffix}"
    shutil.copyfile(source, target)
    if number > 1:
        print(f"{folder / name} has your edits, so it was left alone; a fresh copy is {target}")
    else:
        print(f"wrote {target}: open it and fill in the TODOs")
    return target


def todos(path: str | os.PathLike) -> pd.DataFrame:
    """The ``# TODO [hvd:<change>]`` markers left in a script.

    Returns:
        DataFrame ``line`` (1-based), ``change``, ``text``, in file order.
    """
    rows = [
        {"line": number, "change": found.group(1), "text": line.strip()}
        for number, line in enumerate(Path(path).read_text().splitlines(), 1)
        if (found := TODO.search(line))
    ]
    return pd.DataFrame(rows, columns=["line", "change", "text"])


@dataclass
class Hunk:
    """One contiguous edit: ``serial`` lines replaced by ``horovod`` lines (1-based starts)."""

    serial_start: int
    serial: list[str]
    horovod_start: int
    horovod: list[str]


@dataclass
class Change:
    """Every edit of one kind (a tag of :data:`CHANGES`) between a serial and a Horovod script.

    Displays itself as a side-by-side table in Jupyter; ``str()`` is a compact unified diff.
    """

    tag: str
    title: str
    serial_name: str
    horovod_name: str
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def added(self) -> int:
        return sum(len(h.horovod) for h in self.hunks)

    def __repr__(self) -> str:  # what a terminal (or papermill's text output) shows
        return str(self)

    def __str__(self) -> str:
        lines = [f"[{self.tag}] {self.title}"]
        for hunk in self.hunks:
            lines.append(
                f"@@ {self.serial_name}:{hunk.serial_start} "
                f"{self.horovod_name}:{hunk.horovod_start} @@"
            )
            lines += [f"- {line}" for line in hunk.serial]
            lines += [f"+ {line}" for line in hunk.horovod]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        # Code keeps its lines and indentation: a theme that wraps a table's text (the book's
        # does) would break `torch.cuda.set_device(hvd.local_rank())` across lines and start
        # the rest at column 0, so the cells never wrap and the table scrolls sideways.
        def cell(start: int, lines: list[str], kind: str) -> str:
            numbered = "\n".join(
                f"{start + i:4d}  {html.escape(line)}" for i, line in enumerate(lines)
            )
            color = {"serial": "#fbe9e7", "horovod": "#e8f5e9"}[kind] if lines else "#fafafa"
            return (
                f'<td style="vertical-align:top;background:{color};text-align:left;'
                f'white-space:pre">'
                f'<pre style="margin:0;background:none;white-space:pre;overflow-wrap:normal;'
                f'word-break:normal">{numbered}</pre></td>'
            )

        rows = "".join(
            f"<tr>{cell(h.serial_start, h.serial, 'serial')}"
            f"{cell(h.horovod_start, h.horovod, 'horovod')}</tr>"
            for h in self.hunks
        )
        return (
            f"<b>[{self.tag}] {html.escape(self.title)}</b>"
            f'<div style="overflow-x:auto"><table style="font-size:12px;width:max-content">'
            f'<tr><th style="text-align:left">'
            f'{self.serial_name} (serial)</th><th style="text-align:left">'
            f"{self.horovod_name} (Horovod)</th></tr>{rows}</table></div>"
        )


def _body(path: Path) -> tuple[list[str], int]:
    """The lines of a script after its module docstring, and the line number they start at."""
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text, filename=str(path))
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return lines[first.end_lineno :], first.end_lineno + 1
    return lines, 1


def _marker_above(lines: list[str], index: int) -> str | None:
    """The change marked above ``lines[index]`` in the same paragraph (no blank line between),
    e.g. the marker comment over a statement that spans several lines; None if there is none."""
    for line in reversed(lines[:index]):
        if not line.strip():
            return None
        if mark := MARK.search(line):
            return mark.group(1)
    return None


def _closest(line: str, candidates: list[list[str]]) -> int:
    """Index of the group of lines most like ``line`` (a replaced serial line goes with the
    change that rewrote it); the first group when none is alike."""

    def code(text: str) -> str:
        return text.split("#", 1)[0].strip()

    best, best_ratio = 0, 0.4
    for index, lines in enumerate(candidates):
        for other in lines:
            ratio = difflib.SequenceMatcher(None, code(line), code(other)).ratio()
            if ratio > best_ratio:
                best, best_ratio = index, ratio
    return best


def changes(
    horovod: str = "hvd_torch_solution.py", serial: str | None = None
) -> dict[str, Change]:
    """The edits between a serial lesson script and its Horovod version, grouped by change.

    Every changed line of the Horovod script must belong to a change marked
    ``# [hvd:<tag>]``: a marker holds for the lines after it in the same edit, until the next
    marker; an edit that starts without one belongs to the marker above it in the same
    paragraph (no blank line between). Module docstrings are not compared.

    Args:
        horovod: a shipped Horovod script (or a path to one).
        serial: the serial script it started from (default: from :data:`SERIAL_OF`).

    Returns:
        tag -> :class:`Change`, in :data:`CHANGES` order (only the tags the script uses).

    Raises:
        ValueError: an edit without a marker, or a marker that is not in :data:`CHANGES`,
            naming the file and line.
    """
    horovod_path = Path(horovod) if Path(horovod).is_file() else script_path(horovod)
    serial = serial or SERIAL_OF.get(horovod_path.name)
    if serial is None:
        raise ValueError(f"which serial script does {horovod_path.name} start from? pass serial=")
    serial_path = Path(serial) if Path(serial).is_file() else script_path(serial)
    old, old_first = _body(serial_path)
    new, new_first = _body(horovod_path)
    found: dict[str, Change] = {}
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        segments: list[tuple[str, int, list[str]]] = []
        for j in range(j1, j2):
            mark = MARK.search(new[j])
            if mark:
                tag = mark.group(1)
                if tag not in CHANGES:
                    raise ValueError(
                        f"{horovod_path}:{new_first + j}: unknown change "
                        f"[hvd:{tag}]; known: {', '.join(CHANGES)}"
                    )
                if not segments or segments[-1][0] != tag:
                    segments.append((tag, new_first + j, []))
            elif not segments:
                tag = _marker_above(new, j)
                if tag is None:
                    raise ValueError(
                        f"{horovod_path.name}:{new_first + j}: changed line without a "
                        f"# [hvd:<change>] marker (or [ddp:<change>]): {new[j].strip()!r}"
                    )
                segments.append((tag, new_first + j, []))
            segments[-1][2].append(new[j])
        if not segments:
            removed = old[i1].strip()
            raise ValueError(
                f"{serial_path.name}:{old_first + i1}: line removed in "
                f"{horovod_path.name} without a marker: {removed!r}"
            )
        owners = [_closest(line, [lines for _, _, lines in segments]) for line in old[i1:i2]]
        for index, (tag, start, lines) in enumerate(segments):
            serial_lines = [
                line for line, owner in zip(old[i1:i2], owners, strict=True) if owner == index
            ]
            change = found.setdefault(
                tag, Change(tag, CHANGES[tag], serial_path.name, horovod_path.name)
            )
            change.hunks.append(Hunk(old_first + i1, serial_lines, start, lines))
    return {tag: found[tag] for tag in CHANGES if tag in found}


def change(tag: str, horovod: str = "hvd_torch_solution.py") -> Change:
    """One change of :func:`changes` (e.g. ``"init"``), to display in a notebook.

    Raises:
        KeyError: naming the tag and the changes the script has.
    """
    found = changes(horovod)
    if tag not in found:
        raise KeyError(f"{horovod} has no change {tag!r}; it has {', '.join(found)}")
    return found[tag]


def source(name: str, function: str | None = None) -> str:
    """The text of a lesson script, or of one top-level function or class in it.

    Raises:
        KeyError: naming the function and the ones the script defines.
    """
    text = script_path(name).read_text()
    if function is None:
        return text
    tree = ast.parse(text)
    defined = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    for node in defined:
        if node.name == function:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "\n".join(text.splitlines()[start - 1 : node.end_lineno])
    names = ", ".join(node.name for node in defined)
    raise KeyError(f"{name} defines no {function!r}; it defines {names}")


def shard_sizes(n: int, np: int) -> pd.DataFrame:
    """How ``n`` samples are shared by ``np`` ranks, by PyTorch's ``DistributedSampler``
    itself (``drop_last=False``) and by ``tf.data.Dataset.shard`` (every np-th sample).

    Returns:
        DataFrame ``rank``, ``torch_samples`` (what the sampler gives this rank per epoch),
        ``tf_samples``; ``attrs["torch_duplicates"]`` is how many samples the sampler hands
        out twice (it pads every rank to the same count with samples from the start).
    """
    from torch.utils.data.distributed import DistributedSampler

    shares = [
        list(DistributedSampler(range(n), num_replicas=np, rank=rank, shuffle=False))
        for rank in range(np)
    ]
    table = pd.DataFrame(
        {
            "rank": range(np),
            "torch_samples": [len(share) for share in shares],
            "tf_samples": [len(range(rank, n, np)) for rank in range(np)],
        }
    )
    table.attrs["torch_duplicates"] = sum(map(len, shares)) - len(set().union(*shares))
    return table
