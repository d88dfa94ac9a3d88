"""The capstone's recorder (workshop.lessons.l09_diagnose.record): the runs of a case and their
command lines. The recorded cases themselves: tests/test_capstone.py."""

from __future__ import annotations

from workshop.lessons.l09_diagnose import capstone
from workshop.lessons.l09_diagnose import record as capstone_record


def test_plan_alternates_and_commands_add_the_case_options(tmp_path):
    runs = capstone_record.plan(3)
    assert runs[:2] == [("broken", "broken", 42, True), ("fixed", "fixed", 42, True)]
    assert [r[1] for r in runs[2:]] == [
        "repeats/broken-1", "repeats/fixed-1", "repeats/fixed-2", "repeats/broken-2",
        "repeats/broken-3", "repeats/fixed-3",
    ]  # fmt: skip
    spec = capstone.CASES["case-4"]
    command = capstone_record.run_command(spec, "broken", tmp_path, "broken", 42, True)
    assert command[:2] == ["workshop", "run"] and "--mark-cycles" in command
    assert command[command.index("--cycle-time-ms") + 1] == "50"
    repeat = capstone_record.run_command(spec, "fixed", tmp_path, "repeats/fixed-1", 43, False)
    assert "--no-timeline" in repeat and repeat[repeat.index("--cycle-time-ms") + 1] == "1"
