"""The package's shape (issue 21): imports run one way (no circle between modules or between
sub-packages, function-level imports included), no import from a floor to one above it, no
module over 500 lines (issue 47), and ``__init__``
files only hand names on."""

from __future__ import annotations

import ast
from pathlib import Path

import workshop

PACKAGE = Path(workshop.__file__).parent
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """module -> the workshop modules it imports anywhere (module level or in a function)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                if target.split(".")[0] == "workshop":
                    owner = _owner(target, modules)
                    if owner and owner != name:
                        graph[name].add(owner)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    def top(name: str) -> str:
        return ".".join(name.split(".")[:2])

    packages: dict[str, set[str]] = {}
    for name, targets in graph.items():
        packages.setdefault(top(name), set())
        packages[top(name)] |= {top(t) for t in targets if top(t) != top(name)}
    return packages


def test_the_circle_finder_finds_circles():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_modules_or_sub_packages():
    graph = import_graph()
    assert len(graph) > 100  # the scan saw the package
    assert "workshop.runspec" in graph["workshop.launch.run"]
    assert circles(graph) == []
    assert circles(_package_graph(graph)) == []


def test_no_module_over_500_lines():
    long = {
        str(path.relative_to(PACKAGE.parent)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def _hands_names_on(node: ast.stmt) -> bool:
    """An ``__init__`` statement that only hands names on: the docstring, an import,
    ``__all__`` / ``__version__``, a table of the names to hand on, or the module
    ``__getattr__`` / ``__dir__`` that imports them on first use (PEP 562), made by the one
    helper for it: ``__getattr__, __dir__, __all__ = exports(...)`` (workshop.lazy)."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
        made = [t for t in node.targets if isinstance(t, ast.Tuple)]
        return (
            getattr(node.value.func, "id", None) == "exports"
            and len(made) == 1
            and [getattr(e, "id", None) for e in made[0].elts][:2] == ["__getattr__", "__dir__"]
        )
    if isinstance(node, ast.Assign):
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        tables = (ast.Tuple, ast.List, ast.Dict, ast.DictComp, ast.Constant)
        return bool(names) and all(
            n in ("__all__", "__version__") or (n.isupper() and isinstance(node.value, tables))
            for n in names
        )
    return False


def test_init_files_only_hand_names_on():
    code = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("__init__.py"))
        for node in ast.parse(path.read_text()).body
        if not _hands_names_on(node)
    ]
    assert code == []
    # one style: the names handed on are listed in __all__ (no "noqa: F401" lists instead)
    for path in PACKAGE.rglob("__init__.py"):
        text = path.read_text()
        if "import" in text.replace("from __future__ import annotations", ""):
            assert "__all__ = " in text and "noqa: F401" not in text, path
    assert not _hands_names_on(ast.parse("def static_mode():\n    return True").body[0])


def test_nothing_binds_io_to_the_workshop_readers():
    # `from workshop import io` in a notebook shadowed the standard library's io
    import importlib.util
    import json

    assert importlib.util.find_spec("workshop.io") is None
    assert importlib.util.find_spec("workshop.readers") is not None
    notebooks = sorted((PACKAGE.parent / "notebooks").glob("*.ipynb"))
    assert notebooks
    for path in notebooks:
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            for line in source.splitlines():
                if line.startswith("from workshop import "):
                    names = {
                        n.strip() for n in line.removeprefix("from workshop import ").split(",")
                    }
                    assert "io" not in names, f"{path.name}: {line}"


#: The floors of the house (README, "Map of the code"): a module imports only from its own
#: floor or the ones below. Ground: run options, shared rules, units, frames, paths, the
#: facade, and the room's record format (workshop.room, which the room's reader reads).
FLOORS = {
    0: (
        "workshop",
        "paths",
        "rules",
        "runoption",
        "runspec",
        "units",
        "frames",
        "room",
        "kernel",
        "lazy",
    ),  # fmt: skip
    1: ("readers",),
    2: ("analysis",),
    3: ("findings", "plot"),
    4: ("widgets", "train", "cluster"),
    5: ("launch", "check"),
    6: ("lessons", "commands", "cli"),
}
FLOOR_OF = {name: floor for floor, names in FLOORS.items() for name in names}


def _floor(module: str) -> int:
    parts = module.split(".")
    return FLOOR_OF[parts[1] if len(parts) > 1 else parts[0]]


def test_no_import_from_a_floor_to_one_above_it():
    graph = import_graph()
    upward = sorted(
        f"{a} -> {b}" for a, targets in graph.items() for b in targets if _floor(b) > _floor(a)
    )
    assert upward == []
    # every module of the package has its floor (a new sub-package must be given one)
    assert all(_floor(m) >= 0 for m in graph)
    # near miss: an analysis importing a finding is upward
    assert _floor("workshop.findings.diagnose") > _floor("workshop.analysis.failure")


def _lines(paths) -> int:
    return sum(len(p.read_text().splitlines()) for p in paths)


def test_the_readmes_map_names_every_floor_with_its_line_count():
    # README, "Map of the code": each sub-package's Python lines within 10 % of what it says
    # (it is rounded by hand when the code moves), and the whole package's total
    import re

    readme = (PACKAGE.parent / "README.md").read_text()
    rows = dict(re.findall(r"^\| [^|]+ \| `workshop/(\w+)/` \| ([\d,]+) \|", readme, re.M))
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert sorted(rows) == packages  # every sub-package has its row
    for name, said in rows.items():
        actual = _lines((PACKAGE / name).rglob("*.py"))
        assert abs(actual - int(said.replace(",", ""))) <= 0.1 * actual, (name, said, actual)
    total = float(re.search(r"\(([\d.]+)k in all\)", readme)[1]) * 1000
    assert abs(_lines(PACKAGE.rglob("*.py")) - total) <= 0.1 * total
