"""The lessons' times and prerequisites, and the tracks built from them (issue 48): the core
track (00, 01, 02, 03, 04, 06, 09) fits in 4 hours and teaches every lesson's necessary
prerequisites before it; the instructor guide's tracks are generated from the lessons' headers
and add up."""

from __future__ import annotations

import re
from pathlib import Path

from tools.book.tracks import (
    BEGIN,
    CORE,
    CORE_LIMIT_MIN,
    END,
    GUIDE,
    OPTIONAL,
    TIME_TO_LEARN,
    TRACKS,
    Lesson,
    lesson_table,
    needed_lessons,
    track_minutes,
    track_problems,
    tracks_section,
    with_tracks,
)

REPO = Path(__file__).resolve().parents[1]


def _lesson(number: str, minutes: int, optional: int = 0, needs: tuple[str, ...] = ()):
    return Lesson(f"{number}-x.ipynb", f"Lesson {number}", minutes, optional, needs)


def _table(**changes) -> list[Lesson]:
    table = {n: _lesson(n, 30, 10) for n in sorted(CORE + OPTIONAL)}
    table["00"] = _lesson("00", 10)
    table.update(changes)
    return list(table.values())


def test_the_time_to_learn_is_read_in_both_forms():
    new = TIME_TO_LEARN.search("**Time to learn**: 35 minutes (core), +20 minutes optional.")
    assert (new[1], new[2]) == ("35", "20")
    old = TIME_TO_LEARN.search("- **Time to learn**: 25 minutes, with five exercises")
    assert (old[1], old[2]) == ("25", None)


def test_necessary_prerequisites_are_read_from_the_header():
    table_rows = (
        "| concept | importance |\n| --- | --- |\n"
        "| [03 · Launching Horovod runs](03-launching-runs.ipynb) | necessary |\n"
        "| Allreduce, backward pass (lesson 01) | necessary |\n"
        "| [05 · MPI profiling](05-mpi-profiling.ipynb) | helpful |\n"
    )
    assert needed_lessons(table_rows, "04") == ("01", "03")
    line = "**Prerequisites**: lesson 04, lesson 06; lesson 08 (helpful). Python basics."
    assert needed_lessons(line, "09") == ("04", "06")


def test_a_track_that_skips_a_prerequisite_or_runs_over_its_limit_is_named():
    assert track_problems(_table()) == []
    # issue 48: the old 3-hour track (00, 04, 08, 09) skipped 03 and 07, which 04 and 09 need
    needs = _table(**{"09": _lesson("09", 30, 0, ("04", "07"))})
    assert "core track: lesson 09 needs 07, not taught before" in track_problems(needs)
    long = _table(**{"06": _lesson("06", 120)})
    core = track_minutes(long, CORE, False)
    assert core > CORE_LIMIT_MIN
    assert f"core track: {core} minutes, more than {CORE_LIMIT_MIN}" in track_problems(long)


def test_the_guides_section_is_generated_and_adds_up():
    table = _table()
    section = tracks_section(table)
    assert section.startswith(BEGIN) and section.endswith(END)
    for track, (numbers, optional) in TRACKS.items():
        assert (
            f"| {track} | {', '.join(numbers)} | {track_minutes(table, numbers, optional)} min"
            in (section)
        )
    # core: 10 + 6 x 30 = 190 minutes; all, optional parts included: 10 + 10 x 40 = 410
    assert "| core | 00, 01, 02, 03, 04, 06, 09 | 190 min (3.2 h) |" in section
    assert (
        "| full (all lessons, everything) | 00, 01, 02, 03, 04, 05, 06, 07, 08, 09, 10 | 410 min"
        in (section)
    )
    guide = f"# Guide\n\nbefore\n\n{BEGIN}\nstale\n{END}\n\nafter\n"
    assert with_tracks(guide, table) == f"# Guide\n\nbefore\n\n{section}\n\nafter\n"


def _guide_tables(guide: str) -> tuple[dict[str, tuple[int, int, tuple[str, ...]]], dict]:
    """The guide's generated lesson rows (number -> core, optional, needs) and track rows
    (name -> lessons, minutes)."""
    section = guide[guide.index(BEGIN) : guide.index(END)]
    lessons = {}
    for number, minutes, optional, needs in re.findall(
        r"^\| (\d\d) · [^|]+ \| (\d+) min(?: \(\+(\d+) optional\))? \| ([^|]+) \|", section, re.M
    ):
        found = tuple(n.strip() for n in needs.split(",") if n.strip() != "-")
        lessons[number] = (int(minutes), int(optional or 0), found)
    tracks = {
        name: (tuple(numbers.split(", ")), int(minutes))
        for name, numbers, minutes in re.findall(
            r"^\| ([^|]+?) \| ((?:\d\d, )*\d\d) \| (\d+) min", section, re.M
        )
    }
    return lessons, tracks


def test_the_guides_tracks_teach_their_prerequisites_and_add_up():
    guide = GUIDE.read_text()
    assert "2-5 minutes" not in guide, "exercises' minutes come from the registry"
    assert "3-hour" not in guide and "00, 04, 08, 09" not in guide, "the old tracks"
    lessons, tracks = _guide_tables(guide)
    assert sorted(lessons) == sorted(CORE + OPTIONAL) and set(tracks) == set(TRACKS)
    for name, (numbers, minutes) in tracks.items():
        optional = TRACKS[name][1]
        assert minutes == sum(lessons[n][0] + (lessons[n][1] if optional else 0) for n in numbers)


def test_the_guides_tracks_teach_every_prerequisite_before_it():
    lessons, tracks = _guide_tables(GUIDE.read_text())
    for name, (numbers, _) in tracks.items():
        for n in numbers:
            missing = [need for need in lessons[n][2] if need not in numbers[: numbers.index(n)]]
            assert not missing, f"{name} track: lesson {n} needs {missing} before it"


def test_every_core_lesson_states_its_core_and_optional_time():
    for path in sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        text = path.read_text()
        if path.name[:2] not in CORE:  # an optional lesson: "N minutes" is all optional
            assert TIME_TO_LEARN.search(text), path.name
            continue
        assert re.search(
            r"Time to learn\*\*: \d+ minutes \(core\), \+\d+ minutes optional", text
        ), path.name


def test_the_core_track_fits_in_four_hours_and_respects_every_prerequisite():
    assert track_problems(lesson_table()) == []


def test_the_guide_states_the_lessons_times_as_they_are_now():
    assert tracks_section(lesson_table()) in GUIDE.read_text(), (
        "python -m tools.book.tracks --write"
    )
