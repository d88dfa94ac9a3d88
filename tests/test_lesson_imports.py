"""What checking a lesson's exercise imports (issue 56: ``wk.exercise("04.1")`` imported 97
modules, 19.3k lines, because the registry imported all nine lessons and six ``__init__``
files loaded everything). Measured in a fresh interpreter per lesson: the modules of the
workshop it loads and their lines, held to the lesson's own entries and what they use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workshop.lessons.registry import LESSON_MODULES

PROBE = """
import json, sys, warnings
warnings.simplefilter("ignore")
import workshop as wk
from workshop.lessons import registry
item = registry.entry({exercise!r})
wk.exercise({exercise!r}, None, *registry.recorded({exercise!r}))
mods = sorted(m for m in sys.modules if m.startswith("workshop"))
lines = sum(sum(1 for _ in open(sys.modules[m].__file__)) for m in mods
            if getattr(sys.modules[m], "__file__", None))
print(json.dumps({{"modules": mods, "lines": lines}}))
"""
#: Packages only live runs need (README, "Map of the code"): a replayed lesson loads none.
LIVE_ONLY = ("workshop.train", "workshop.cluster", "workshop.check", "workshop.launch.run")


def _imports(exercise: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(exercise=exercise)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("number", ["01", "04", "06", "09"])
def test_checking_an_exercise_imports_its_lesson_alone(number):
    from workshop.lessons import registry

    first = registry.lesson(number).EXERCISES[0].id
    found = _imports(first)
    entries = {f"workshop.lessons.{m}.exercises" for m in LESSON_MODULES.values()}
    loaded = entries & set(found["modules"])
    assert loaded == {f"workshop.lessons.{LESSON_MODULES[number]}.exercises"}, loaded
    assert not [m for m in found["modules"] if m.startswith(LIVE_ONLY)], found["modules"]
    print(f"{first}: {len(found['modules'])} modules, {found['lines']} lines")


def test_lesson_04s_check_loads_what_lesson_04_uses():
    # measured 2026-12-06: 44 modules, 7,543 lines (the timeline reader and its analyses, the
    # registry, the engine); before the lazy registry and __init__ files: 97, 19.3k
    found = _imports("04.1")
    assert len(found["modules"]) <= 50 and found["lines"] <= 9_000, (
        len(found["modules"]), found["lines"])  # fmt: skip
    assert "workshop.findings.diagnose" not in found["modules"]
    assert "workshop.plot" not in found["modules"]  # no matplotlib for a check
