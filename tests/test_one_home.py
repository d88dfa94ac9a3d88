"""One home per rule (issue 56, item 3), read from the package's own source: which rank failed
first is decided only by ``analysis/failure``; the lines the launchers print when a rank ends
or a node is lost are matched only by ``readers/exits``' one table; JSON is written atomically
only by ``units.write_json_atomic``. Each scan is checked against its near miss: a module that
broke the rule, built here as text, is found."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import workshop
from workshop.readers.exits import launcher_reports

PACKAGE = Path(workshop.__file__).parent


def _sources() -> dict[str, str]:
    return {
        path.relative_to(PACKAGE).as_posix(): path.read_text()
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of a module and its classes and functions."""
    bodies = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef | ast.FunctionDef))]
    return {
        id(body.body[0].value)
        for body in bodies
        if body.body
        and isinstance(body.body[0], ast.Expr)
        and isinstance(body.body[0].value, ast.Constant)
    }


def _strings(source: str) -> list[str]:
    """The string constants of a module's code (its docstrings and comments are prose)."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
    ]


# A fragment of each line a launcher prints when a rank ends or a node is lost, and that line.
LAUNCHER_LINES = {
    "exit with status code": "Process 1 exit with status code 137.",
    "Exit code:": "Process name: 1\nExit code: 137",
    "with PID": "process rank 1 with PID 42 on node nodeb exited on signal 9 (Killed).",
    "srun: error": "srun: error: nodeb: task 1: Killed",
    "Remote daemon": "  Remote daemon: [[1889,0],1] on node nodeb",
    "not responding": "Timeout, server nodeb not responding.",
}


def _holding_launcher_words(sources: dict[str, str]) -> set[str]:
    return {
        name
        for name, source in sources.items()
        if any(word in text for text in _strings(source) for word in LAUNCHER_LINES)
    }


def test_only_readers_exits_knows_the_launchers_lines():
    assert _holding_launcher_words(_sources()) == {"readers/exits.py"}
    # and its one table reads each of those lines (a word kept there but matched nowhere
    # would be a table in name only)
    for line in LAUNCHER_LINES.values():
        assert launcher_reports(line), line
    # near miss: a second table elsewhere is found (cluster/hosts had one before issue 56)
    second = 'import re\nTIMEOUT = re.compile(r"Timeout, server (\\S+) not responding")\n'
    assert _holding_launcher_words({"cluster/hosts.py": second}) == {"cluster/hosts.py"}
    prose = '"""ssh prints "Timeout, server nodeb not responding"."""\n# Remote daemon\n'
    assert _holding_launcher_words({"cluster/emulate.py": prose}) == set()


def _reading_keys(source: str, keys: tuple[str, ...]) -> bool:
    """Whether a module reads one of ``keys`` from a dict: ``x["key"]`` or ``x.get("key")``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if node.slice.value in keys:
                return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in keys
        ):
            return True
    return False


_FIRST_FAILURE_NAMES = re.compile(r"first_fail|failed_first|left_first|cluster_failure")


def _first_failure_functions(source: str) -> set[str]:
    """The functions whose name says they find the rank that failed first."""
    return {
        node.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef) and _FIRST_FAILURE_NAMES.search(node.name)
    }


def test_only_analysis_failure_orders_the_failed_ranks():
    # A rank's end says when it ended: its own "time" and its place among the launcher's
    # reports, "order". Only the rule reads the place; run.json's old second answer,
    # "first_failure", is read only to say an old record's line (findings/failure.lost_line).
    sources = _sources()
    assert {n for n, s in sources.items() if _reading_keys(s, ("order",))} == {
        "analysis/failure.py"
    }
    assert {n for n, s in sources.items() if _reading_keys(s, ("first_failure",))} == {
        "findings/failure.py"
    }
    # and no function but attribute finds the first failure (before issue 56: cluster/hosts'
    # first_failure, launch/run's _cluster_failure, check/failures' _left_first)
    assert {n: f for n, s in sources.items() if (f := _first_failure_functions(s))} == {}
    # near misses: a rule of its own is found, by what it reads or by its name
    by_order = "def first_failure(ends):\n    return min(ends, key=lambda e: e['order'])\n"
    assert _reading_keys(by_order, ("order",))
    assert _first_failure_functions(by_order) == {"first_failure"}
    assert not _reading_keys("record = {'order': 1}\n", ("order",))


def _atomic_json_writers(source: str) -> set[str]:
    """The functions of a module that dump JSON and rename a file over another:
    ``json.dump(s)`` and ``os.replace`` / ``os.rename`` or a path's ``.replace(target)``
    (``str.replace`` takes two arguments)."""
    found = set()
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef):
            continue
        calls = [
            n
            for n in ast.walk(function)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        ]
        on_os = [c for c in calls if isinstance(c.func.value, ast.Name)]
        dumps = any(c.func.value.id == "json" and c.func.attr in ("dump", "dumps") for c in on_os)
        renames = any(
            c.func.attr in ("replace", "rename")
            and (len(c.args) == 1 or getattr(c.func.value, "id", None) == "os")
            for c in calls
        )
        if dumps and renames:
            found.add(function.name)
    return found


def test_no_module_but_units_writes_json_atomically_by_hand():
    writers = {n: w for n, s in _sources().items() if (w := _atomic_json_writers(s))}
    assert writers == {"units.py": {"write_json_atomic"}}
    # near miss: observe.py's write before issue 56
    by_hand = (
        "def write(path, payload):\n"
        "    tmp = path.with_suffix('.tmp')\n"
        "    tmp.write_text(json.dumps(payload) + '\\n')\n"
        "    tmp.replace(path)\n"
    )
    assert _atomic_json_writers(by_hand) == {"write"}
