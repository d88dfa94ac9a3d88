"""The book's weight: how many lines of code a reader sees on each lesson's page (code cells
the book shows open: not left out, not a worked solution, not collapsed; the parameters cell
without the lines only the tests set), and how many of those are exercise machinery or
``print(f"...")`` (issue 48: at most 800 visible lines in all, at most 20 % of them machinery).

    python -m tools.book.weight            # the table, per lesson and in all
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.book.prepare import _collapsed, _tags, _without_test_parameters, left_out
from tools.book.repository import lessons

# A line that is an exercise's plumbing, not teaching: the learner's answer variable, the
# check, the reveal of an answer-giving result.
MACHINERY = re.compile(r"\banswer_\d|\bwk\.exercise\(|\bexercises\.|\breveal\(")
PRINT_F = re.compile(r"\bprint\(\s*f[\"']")
UNANSWERED = "no answer yet"
MAX_LINES = 800
MAX_SHARE = 0.20


@dataclass(frozen=True)
class Weight:
    """One lesson's visible code: ``lines`` (non-blank), of them ``machinery`` and ``prints``
    lines, and ``unanswered``: "no answer yet" lines in its visible code or outputs."""

    lesson: str
    lines: int
    machinery: int
    prints: int
    unanswered: int

    @property
    def share(self) -> float:
        """Machinery and ``print(f`` lines over all visible lines (0 for no code)."""
        return (self.machinery + self.prints) / self.lines if self.lines else 0.0


def _statements(source: str) -> list[str]:
    """``source`` cut into its top-level statements (a call over several lines is one), each
    with the comment lines before it; the lines one by one where it does not parse."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return source.splitlines()
    lines = source.splitlines()
    starts = [node.lineno - 1 for node in body]
    if not starts:
        return lines
    starts[0] = 0
    return ["\n".join(lines[a:b]) for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]


def visible_code(notebook) -> list[str]:
    """The top-level statements a reader of the book sees open on the lesson's page."""
    statements = []
    for cell in notebook.cells:
        if cell.cell_type != "code" or left_out(cell) or _collapsed(cell):
            continue
        tags = _tags(cell)
        if "solution" in tags or "hide-cell" in tags or "remove-cell" in tags:
            continue
        source = _without_test_parameters(cell.source) if "parameters" in tags else cell.source
        statements += _statements(source)
    return statements


def _count(statements: list[str], pattern: re.Pattern | None = None) -> int:
    """The non-blank lines of the statements; with ``pattern``, those of a simple statement
    (a call over several lines) that it finds, and the lines it finds in a compound one (a
    loop that prints counts its print lines)."""
    found = 0
    for statement in statements:
        lines = [line for line in statement.splitlines() if line.strip()]
        if pattern is None:
            found += len(lines)
        elif pattern.search(statement):
            compound = any(re.match(r"\s*(for|if|while|with|def|try)\b.*:\s*$", x) for x in lines)
            found += sum(bool(pattern.search(x)) for x in lines) if compound else len(lines)
    return found


def weigh(notebook, lesson: str) -> Weight:
    """The :class:`Weight` of one lesson (committed or executed notebook)."""
    statements = visible_code(notebook)
    outputs = " ".join(
        str(output.get("text", ""))
        for cell in notebook.cells
        if cell.cell_type == "code" and not left_out(cell)
        for output in cell.get("outputs", [])
    )
    return Weight(
        lesson,
        _count(statements),
        _count(statements, MACHINERY),
        _count([s for s in statements if not MACHINERY.search(s)], PRINT_F),
        sum(UNANSWERED in s for s in statements) + outputs.count(UNANSWERED),
    )


def book_weight(notebooks: list[Path] | None = None) -> list[Weight]:
    """The :class:`Weight` of every lesson (default: the committed lessons, in order)."""
    import nbformat

    return [
        weigh(nbformat.read(path, as_version=4), path.name[:2]) for path in notebooks or lessons()
    ]


def table(weights: list[Weight]) -> str:
    """The weights as a plain-text table with a total row."""
    rows = [f"{'lesson':<8}{'lines':>7}{'machinery':>11}{'print(f':>9}{'share':>8}"]
    total = Weight(
        "all",
        sum(w.lines for w in weights),
        sum(w.machinery for w in weights),
        sum(w.prints for w in weights),
        sum(w.unanswered for w in weights),
    )
    for w in [*weights, total]:
        rows.append(f"{w.lesson:<8}{w.lines:>7}{w.machinery:>11}{w.prints:>9}{w.share:>8.0%}")
    rows.append(
        f"limits: {MAX_LINES} lines in all, {MAX_SHARE:.0%} machinery and print(f; "
        f"'{UNANSWERED}' lines: {total.unanswered}"
    )
    return "\n".join(rows)


def main() -> int:
    print(table(book_weight()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
