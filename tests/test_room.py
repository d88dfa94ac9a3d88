"""The room (issue 39, items 2-3): learners' sessions write under WORKSHOP_ROOM/<name>/, the
instructor's `workshop room DIR` reads one row per learner, whatever else lies in the folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from unix_users import as_user, unix_users

from workshop import room
from workshop.analysis.room import room_progress, room_table
from workshop.commands import room as room_command
from workshop.findings.room import room_text
from workshop.lessons import engine as exercises
from workshop.paths import data_path
from workshop.readers.room import read_room

OK_RUN = data_path("runs", "torch-mnist-gloo-np2")
KILLED_RUN = data_path("timelines", "tl-torch-gloo-np2-killed")


def workshop(*args, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "workshop.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


@pytest.fixture
def in_room(tmp_path, monkeypatch):
    """This process as learner "ana" in an empty room, with a fresh session and kernel."""
    folder = tmp_path / "room"
    folder.mkdir()
    monkeypatch.setenv("WORKSHOP_ROOM", str(folder))
    monkeypatch.setenv("JUPYTERHUB_USER", "ana")
    monkeypatch.setitem(room._SESSION, "id", "test-1")
    monkeypatch.setitem(room._SESSION, "exercises", {})
    monkeypatch.setattr(room, "_WARNED", set())
    exercises.reset()
    yield folder
    exercises.reset()


def test_checks_are_counted_in_the_learners_session_file(in_room, capsys):
    exercises.check("05.1", None, expected=42, hints=("h",))
    exercises.check("05.1", 40, expected=42, hints=("h",))
    verdict = exercises.check("05.1", 42, expected=42, hints=("h",))
    assert verdict.ok and "[05.1] right: 42." in capsys.readouterr().out  # behaviour unchanged
    record = json.loads((in_room / "ana" / "session-test-1.json").read_text())
    assert record["format"] == room.FORMAT and record["learner"] == "ana"
    entry = record["exercises"]["05.1"]
    # 3 checks, 2 with an answer (40 wrong, 42 right); the latest was right.
    assert (entry["tries"], entry["wrong"], entry["right"], entry["last_ok"]) == (2, 1, True, True)
    assert entry["first_s"] <= entry["last_s"]
    assert sorted(p.name for p in (in_room / "ana").iterdir()) == ["session-test-1.json"]


def test_without_the_setting_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKSHOP_ROOM", raising=False)
    monkeypatch.chdir(tmp_path)
    exercises.reset()
    assert exercises.check("05.1", 42, expected=42, hints=("h",)).ok
    assert room.record_attempt("05.1", True) is False
    assert list(tmp_path.iterdir()) == []


def test_a_room_that_cannot_be_written_never_breaks_the_lesson(in_room, capsys):
    shutil.rmtree(in_room)
    assert exercises.check("05.1", 40, expected=42, hints=("h",)).ok is False
    assert exercises.check("05.1", 42, expected=42, hints=("h",)).ok is True
    captured = capsys.readouterr()
    assert "[05.1] right: 42." in captured.out
    # said once, naming the setting and the folder
    assert captured.err.splitlines() == [
        f"(room: not recorded: WORKSHOP_ROOM={in_room}: no such folder (the instructor makes it))"
    ]


def test_a_name_that_cannot_be_a_folder_is_refused(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "../etc")
    with pytest.raises(ValueError, match=r"learner name '../etc' cannot name a folder"):
        room.learner_name()


def test_sizes_are_bounded(in_room, monkeypatch):
    folder = in_room / "ana"
    for session in range(room.MAX_SESSIONS + 2):
        monkeypatch.setitem(room._SESSION, "id", f"s{session:02d}")
        monkeypatch.setitem(room._SESSION, "exercises", {})
        assert room.record_attempt("05.1", False, now=1000.0 + session)
        os.utime(folder / f"session-s{session:02d}.json", (1000 + session, 1000 + session))
    # 22 sessions written, the 2 oldest removed
    names = sorted(p.name for p in folder.glob("session-*.json"))
    assert names == [f"session-s{n:02d}.json" for n in range(2, room.MAX_SESSIONS + 2)]
    for n in range(room.MAX_EXERCISES - 1):  # 05.1 is the session's first
        assert room.record_attempt(f"90.{n}", False)
    assert room.record_attempt("99.1", False) is False  # the 201st exercise of a session
    assert (folder / "session-s21.json").stat().st_size < room.MAX_FILE_BYTES
    with pytest.raises(ValueError, match=r"over 65536"):
        room.write_json(folder / "session-big.json", {"text": "x" * room.MAX_FILE_BYTES})
    assert not list(folder.glob(".*.tmp"))  # the refused write left nothing behind


def test_runs_are_recorded_from_run_json(in_room):
    assert room.record_run(OK_RUN) and room.record_run(KILLED_RUN)
    runs = read_room(in_room).runs.set_index("name")
    assert runs.loc["torch-mnist-gloo-np2", ["status", "np", "exit_code"]].tolist() == [
        "ok",
        2,
        0,
    ]
    assert runs.loc["tl-torch-gloo-np2-killed", ["status", "exit_code"]].tolist() == [
        "failed",
        -9,
    ]


def _garbage_room(folder: Path) -> None:
    good = folder / "good"
    good.mkdir()
    room.write_json(
        good / "session-a.json",
        {
            "format": room.FORMAT,
            "learner": "good",
            "session": "a",
            "exercises": {
                "05.1": {"tries": 1, "wrong": 0, "right": True, "first_s": 10.0,
                         "last_s": 10.0, "last_ok": True},
                "05.2": {"tries": 2, "wrong": 2, "right": False, "first_s": 20.0,
                         "last_s": 30.0, "last_ok": False},
            },
        },
    )  # fmt: skip
    bad = folder / "mess"
    bad.mkdir()
    (bad / "session-1.json").write_text('{"format": "workshop-room/1", "exerc')  # cut short
    (bad / "session-2.json").write_text("[1, 2]")
    (bad / "session-3.json").write_text(
        json.dumps({"format": room.FORMAT, "exercises": {"05.1": {"tries": "many"}}})
    )
    (bad / "session-4.json").write_bytes(b"\xff\xfe\x00garbage")
    (bad / "session-5.json").write_text("x" * (2 * room.MAX_FILE_BYTES + 1))
    (bad / "run-old.json").write_text(json.dumps({"format": "workshop-room/0", "run": {}}))
    (bad / "notes.txt").write_text("hello")
    partial = bad / ".session-6.json.abc.tmp"
    partial.write_text('{"form')
    os.utime(partial, (time.time() - 600, time.time() - 600))
    (bad / ".session-7.json.def.tmp").write_text("{")  # young: a write in flight, not reported
    (folder / "stray").write_text("a file where a learner folder should be")


def test_garbage_is_reported_on_its_row_never_a_crash(tmp_path):
    _garbage_room(tmp_path)
    table = room_table(read_room(tmp_path)).set_index("learner")
    assert list(table.index) == ["good", "mess", "stray"]
    # good: 05.1 right, 05.2 wrong twice and checked last (30 s) -> stuck on 05.2
    assert table.loc["good", ["right", "furthest", "stuck_on", "current_wrong"]].tolist() == [
        1,
        "05.2",
        "05.2",
        2,
    ]
    assert table.loc["good", "bad_files"] == 0
    problems = table.loc["mess", "problems"]
    for expected in [
        "session-1.json: not JSON (Unterminated string starting at: line 1, column 31)",
        "session-2.json: a JSON list, not an object",
        "session-3.json: exercise '05.1': bad entry (ValueError",
        "session-4.json: not text (bytes that are not UTF-8)",
        f"session-5.json: {2 * room.MAX_FILE_BYTES + 1} bytes, over the",
        "run-old.json: format 'workshop-room/0', this workshop reads 'workshop-room/1'",
        "notes.txt: not a room record",
        ".session-6.json.abc.tmp: a partial write left behind",
    ]:
        assert expected in problems
    assert ".session-7" not in problems
    assert table.loc["mess", "bad_files"] == 8 and table.loc["mess", "right"] == 0
    assert table.loc["stray", "problems"].startswith("not a folder")
    result = workshop("room", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "mess     0      -         -" in result.stdout
    assert "8 unreadable (below)" in result.stdout


def test_command_json_watch_and_a_missing_folder(tmp_path):
    _garbage_room(tmp_path)
    rows = json.loads(workshop("room", str(tmp_path), "--json").stdout)
    assert [(r["learner"], r["right"], r["stuck_on"]) for r in rows] == [
        ("good", 1, "05.2"),
        ("mess", 0, ""),
        ("stray", 0, ""),
    ]
    watched = workshop("room", str(tmp_path), "--watch", "--interval", "0.1", "--times", "2")
    assert watched.returncode == 0 and watched.stdout.count(": 3 learners, 1 stuck") == 2
    missing = workshop("room", str(tmp_path / "nowhere"))
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f"workshop room: room {tmp_path / 'nowhere'}: not a folder (give the learners' "
        "WORKSHOP_ROOM)"
    )


CHECK_REPORTS = Path(__file__).parent / "check_reports"

# --- the room under load: learners writing at once ------------------------------------------

LEARNER = """
import json, sys, time
from pathlib import Path
from workshop import room
from workshop.lessons import engine as exercises
plan, go = json.loads(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    time.sleep(0.002)
for exercise, answers in plan["checks"]:
    for answer in answers:
        exercises.check(exercise, answer, expected=42, hints=("h",))
for run in plan["runs"]:
    assert room.record_run(run), run
for report in plan.get("reports", []):
    time.sleep(0.01)  # a check takes seconds; its file is named by the millisecond
    assert room.record_check(json.loads(Path(report).read_text())), report
"""

# Each learner's plan: (exercise, answers in order); 42 is right. Expected rows, by hand:
# ana: 05.1 wrong then right, 05.2 right, 06.1 wrong 25 times -> 2 right, stuck on 06.1 (25)
# ben: 05.1 unanswered then right -> 1 right, current 05.1 right
# cai: 05.1 wrong once -> 0 right, stuck on 05.1 (1); last run ok
# dee: 05.1..05.3 right -> 3 right, furthest 05.3; runs ok then killed: last run failed
# cai, dee: real `workshop check --json` reports (tests/check_reports/): cai's misses the
#      broadcast, dee's last one is the correct script's (its first missed the broadcast),
#      eli's crashed
# eli: two kernels at once, 07.1 wrong twice in one and 07.2 right in the other -> 1 right,
#      furthest 07.2, 07.1's 2 wrong answers kept
PLANS = {
    "ana": [{"checks": [["05.1", [1, 42]], ["05.2", [42]], ["06.1", [1] * 25]]}],
    "ben": [{"checks": [["05.1", [None, 42]]]}],
    "cai": [{"checks": [["05.1", [7]]], "runs": ["ok"], "reports": ["torch_no_broadcast"]}],
    "dee": [
        {"checks": [["05.1", [42]], ["05.2", [42]], ["05.3", [42]]], "runs": ["ok", "killed"],
         "reports": ["torch_no_broadcast", "torch_correct"]}
    ],
    "eli": [
        {"checks": [["07.1", [1, 2]]]},
        {"checks": [["07.2", [42]]], "reports": ["torch_crash"]},
    ],
}  # fmt: skip


def _runs_for(learner: str, plan: dict, home: Path) -> list[str]:
    runs = []
    for n, kind in enumerate(plan.get("runs", [])):
        run_dir = home / "runs" / f"{learner}-{n}-{kind}"
        run_dir.mkdir(parents=True)
        shutil.copy((OK_RUN if kind == "ok" else KILLED_RUN) / "run.json", run_dir)
        runs.append(str(run_dir))
    return runs


def test_learners_writing_at_once_lose_nothing(tmp_path):
    folder = tmp_path / "room"
    folder.mkdir()
    go = tmp_path / "go"
    sessions = []
    for learner, plans in PLANS.items():
        home = tmp_path / "home" / learner
        home.mkdir(parents=True)
        for plan in plans:
            reports = [str(CHECK_REPORTS / f"{r}.json") for r in plan.get("reports", [])]
            plan = {**plan, "runs": _runs_for(learner, plan, home), "reports": reports}
            env = {**os.environ, "HOME": str(home), "WORKSHOP_ROOM": str(folder)}
            env.update(JUPYTERHUB_USER=learner)
            env.pop("WORKSHOP_EXERCISES_STRICT", None)
            sessions.append(
                subprocess.Popen(
                    [sys.executable, "-c", LEARNER, json.dumps(plan), str(go)],
                    env=env,
                    cwd=home,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
    # The instructor reads the room all along: never a half-written file.
    seen_problems, reads = [], []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            if folder.exists():
                found = read_room(folder)
                reads.append(len(found.exercises))
                seen_problems.extend(found.problems["problem"])

    watcher = threading.Thread(target=watch)
    time.sleep(1.5)  # every session imported and waiting
    watcher.start()
    go.touch()  # all start at once
    results = [session.communicate(timeout=120) for session in sessions]
    stop.set()
    watcher.join()
    assert [s.returncode for s in sessions] == [0] * len(sessions), results
    assert all(err == "" for _, err in results), results
    assert seen_problems == [] and len(reads) > 3
    table = room_table(read_room(folder)).set_index("learner")
    print(room_text(table.reset_index(), folder=str(folder)))
    got = table[["right", "furthest", "stuck_on", "current_wrong", "last_run_status"]]
    assert got.loc[["ana", "ben", "cai", "dee"]].to_dict("index") == {
        "ana": dict(right=2, furthest="06.1", stuck_on="06.1", current_wrong=25,
                    last_run_status=""),
        "ben": dict(right=1, furthest="05.1", stuck_on="", current_wrong=0, last_run_status=""),
        "cai": dict(right=0, furthest="05.1", stuck_on="05.1", current_wrong=1,
                    last_run_status="ok"),
        "dee": dict(right=3, furthest="05.3", stuck_on="", current_wrong=0,
                    last_run_status="failed"),
    }  # fmt: skip
    assert table.loc["dee", "last_run"] == "dee-1-killed"
    checks = table[["last_check", "last_check_missing", "last_check_verdict"]]
    scripts = "tests/check_scripts/"
    assert checks.to_dict("index") == {
        "ana": dict(last_check="", last_check_missing="", last_check_verdict=""),
        "ben": dict(last_check="", last_check_missing="", last_check_verdict=""),
        "cai": dict(last_check=f"{scripts}torch_no_broadcast.py", last_check_missing="broadcast",
                    last_check_verdict=""),
        "dee": dict(last_check=f"{scripts}torch_correct.py", last_check_missing="",
                    last_check_verdict=""),
        "eli": dict(last_check=f"{scripts}torch_crash.py", last_check_missing="",
                    last_check_verdict="crashed"),
    }  # fmt: skip
    assert len(list((folder / "dee").glob("check-*.json"))) == 2
    assert table.loc["eli", ["right", "furthest"]].tolist() == [1, "07.2"]
    assert len(list((folder / "eli").glob("session-*.json"))) == 2  # one file per kernel
    progress = room_progress(read_room(folder)).set_index("exercise")
    # 05.1: right by ana, ben, dee; cai trying; wrong answers: ana 1 + cai 1
    assert progress.loc["05.1"].tolist() == [3, 1, 2]
    assert progress.loc["06.1"].tolist() == [0, 1, 25]
    assert list(progress.index) == ["05.1", "05.2", "05.3", "06.1", "07.1", "07.2"]


@pytest.mark.live
def test_workshop_run_records_its_status_in_the_room(tmp_path, horovod_ready, cpu_lock):
    folder = tmp_path / "room"
    folder.mkdir()
    env = {"WORKSHOP_ROOM": str(folder), "JUPYTERHUB_USER": "fay"}
    run = ("run", "-np", "1", "--epochs", "1", "--steps-per-epoch", "5", "--quiet")
    result = workshop(*run, "--out", str(tmp_path / "runs"), "--name", "r1", env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    table = room_table(read_room(folder)).set_index("learner")
    fay = table.loc["fay"]
    assert (fay["last_run"], fay["last_run_status"], fay["bad_files"]) == ("r1", "ok", 0)


def test_real_unix_users_in_a_group_room(tmp_path):
    """4 learners and an instructor as Unix users sharing a group, the room made as the guide
    says (workshop room --init DIR --group G): the learners write at once, the instructor (in
    the group) sees the table, a user outside the group cannot list the room."""
    with unix_users(6, group=True) as (users, group):
        *learners, instructor, outsider = users
        outsider["groups"] = []
        folder = group["base"] / "room"
        assert room_command.make_room(folder, group["name"])[1] == []
        assert (folder.stat().st_gid, oct(folder.stat().st_mode & 0o7777)) == (
            group["gid"],
            "0o3770",
        )
        sources = group["base"] / "recorded"
        go = group["base"] / "go"
        names = dict(zip(["ana", "ben", "cai", "dee"], learners, strict=True))
        sessions = []
        for plan_name, user in names.items():
            plan = {**PLANS[plan_name][0]}
            plan["runs"] = _runs_for(user["name"], plan, sources)
            reports = [CHECK_REPORTS / f"{r}.json" for r in plan.get("reports", [])]
            plan["reports"] = [str(shutil.copy(r, sources)) for r in reports]
            script = ["-c", LEARNER, json.dumps(plan), str(go)]
            env = {"WORKSHOP_ROOM": str(folder)}
            sessions.append(as_user(user, script, cwd=user["home"], env=env, popen=True))
        time.sleep(2)  # every session imported and waiting
        go.touch()
        results = [session.communicate(timeout=120) for session in sessions]
        assert [s.returncode for s in sessions] == [0] * 4, results
        assert all(err == "" for _, err in results), results
        mine = folder / names["ana"]["name"]
        assert (mine.stat().st_gid, oct(mine.stat().st_mode & 0o7777)) == (group["gid"], "0o2750")
        record = next(mine.glob("session-*.json")).stat()
        assert (record.st_uid, record.st_gid) == (names["ana"]["uid"], group["gid"])
        seen = as_user(instructor, ["-m", "workshop.cli", "room", str(folder), "--json"])
        assert seen.returncode == 0, seen.stderr
        rows = {row["learner"]: row for row in json.loads(seen.stdout)}
        got = {
            plan_name: (rows[user["name"]]["right"], rows[user["name"]]["stuck_on"],
                        rows[user["name"]]["last_run_status"], rows[user["name"]]["bad_files"])
            for plan_name, user in names.items()
        }  # fmt: skip
        # as derived above PLANS
        assert got == {
            "ana": (2, "06.1", "", 0),
            "ben": (1, "", "", 0),
            "cai": (0, "05.1", "ok", 0),
            "dee": (3, "", "failed", 0),
        }
        text = as_user(instructor, ["-m", "workshop.cli", "room", str(folder)]).stdout
        print(text)
        # each folder is its learner's own: nothing refused, no warning about the folder
        assert text.splitlines()[-1] == (
            "identity: Unix accounts (the room is root's): a folder and its records count only "
            "for the account that owns them"
        )
        denied = as_user(outsider, ["-m", "workshop.cli", "room", str(folder)])
        assert denied.returncode == 1
        assert denied.stderr.strip() == (
            f"workshop room: room {folder}: cannot list it (Permission denied): the instructor "
            "needs read access"
        )


def test_progress_plot_stacks_right_and_trying(tmp_path):
    _garbage_room(tmp_path)
    import matplotlib.pyplot as plt

    from workshop.plot.room import plot_room_progress

    progress = room_progress(read_room(tmp_path))
    ax = plot_room_progress(progress)
    heights = [patch.get_height() for patch in ax.patches]
    # good: 05.1 right (1 right, 0 trying), 05.2 wrong twice (0 right, 1 trying)
    assert heights == [1, 0, 0, 1]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["05.1", "05.2"]
    plt.close(ax.figure)
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['trying'\]"):
        plot_room_progress(progress.drop(columns="trying"))


# -- workshop check reports in the room -------------------------------------------------------
CHECK_SCRIPTS = Path(__file__).parent / "check_scripts"


@pytest.mark.live
def test_workshop_check_reports_its_missing_practice_in_the_room(
    tmp_path, horovod_ready, cpu_lock
):
    folder = tmp_path / "room"
    folder.mkdir()
    env = {"WORKSHOP_ROOM": str(folder), "JUPYTERHUB_USER": "gus"}
    script = CHECK_SCRIPTS / "torch_no_broadcast.py"
    result = workshop("check", str(script), "--no-base-run", "--json", env=env, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    [record_path] = (folder / "gus").glob("check-*.json")
    record = json.loads(record_path.read_text())
    assert record["format"] == room.FORMAT and record["learner"] == "gus"
    assert record["check"] == json.loads(result.stdout)  # the --json report, nothing cut here
    row = room_table(read_room(folder)).set_index("learner").loc["gus"]
    assert (row["last_check"], row["last_check_missing"], row["last_check_verdict"]) == (
        str(script),
        "broadcast",
        "",
    )
    assert row["bad_files"] == 0
    text = workshop("room", str(folder)).stdout
    print(text)
    assert "missing broadcast" in text.splitlines()[2]


def _check_report(**fields) -> dict:
    checks = {name: {"ok": True, "evidence": "seen"} for name in ("init", "broadcast")}
    return {"checks": checks, "exit_code": 0, "script": "train.py", "np": 2,
            "framework": "torch", "seconds": 3.0, "error": None, "stalled": False,
            "stalled_for_s": None, "interrupted": None, "traceback": None, **fields}  # fmt: skip


def test_check_records_are_bounded_and_bad_ones_reported_on_the_row(in_room, monkeypatch):
    folder = in_room / "ana"
    for n in range(room.MAX_CHECKS + 2):
        assert room.record_check(_check_report(), now=1000.0 + n)
        os.utime(folder / f"check-{(1000 + n) * 1000}-{os.getpid()}.json", (1000 + n,) * 2)
    assert len(list(folder.glob("check-*.json"))) == room.MAX_CHECKS  # the 2 oldest removed
    stalled = _check_report(
        exit_code=2,
        stalled=True,
        error="stalled for 20 s: rank 0 waits in allreduce.loss, rank 1 never submitted it\nfix",
        traceback="x" * 100_000,
    )
    stalled["checks"]["broadcast"] = {"ok": False, "evidence": "e" * 5000, "partial": True}
    assert room.record_check(stalled, now=2000.0)
    kept = json.loads((folder / f"check-2000000-{os.getpid()}.json").read_text())["check"]
    assert len(kept["traceback"]) == room.MAX_TRACEBACK + 3
    assert len(kept["checks"]["broadcast"]["evidence"]) == room.MAX_CHECK_TEXT
    (folder / "check-1.json").write_text('{"format": "workshop-room/1", "che')  # cut short
    (folder / "check-2.json").write_text(json.dumps({"format": "workshop-room/2", "check": {}}))
    (folder / "check-3.json").write_text(json.dumps({"format": room.FORMAT, "check": {"x": 1}}))
    row = room_table(read_room(in_room)).set_index("learner").loc["ana"]
    assert (row["last_check_missing"], row["last_check_verdict"]) == ("broadcast", "stalled")
    assert row["last_check_error"].startswith("stalled for 20 s: rank 0 waits")
    assert row["bad_files"] == 3
    for expected in [
        "check-1.json: not JSON",
        "check-2.json: format 'workshop-room/2', this workshop reads 'workshop-room/1'",
        "check-3.json: a check without 'checks' and an exit code 0, 1 or 2",
    ]:
        assert expected in row["problems"]
    text = room_text(room_table(read_room(in_room)), folder=str(in_room))
    assert "STALLED: stalled for 20 s" in text and "3 unreadable (below)" in text


# -- the instructor's view in a notebook ------------------------------------------------------
def test_room_widget_shows_the_cli_table_and_refreshes_itself(tmp_path, monkeypatch):
    import ipywidgets

    from workshop.widgets import room_view

    _garbage_room(tmp_path)
    panel = room_view(tmp_path, every_s=0.05, live=False, static=False)
    try:
        assert isinstance(panel, ipywidgets.VBox)
        (toggle, seen), table, chart = panel.children[0].children, *panel.children[1:]
        assert toggle.value is False and "every 0.05 s" in seen.value
        rows = table.value.split("<tr")[2:]  # after the heading's row
        assert [row.split("<td>")[1].split("</td>")[0] for row in rows] == [
            "good",
            "mess",
            "stray",
        ]
        assert "background" in rows[0]  # good is stuck on 05.2
        assert "session-2.json: a JSON list, not an object" in rows[1]
        assert bytes(chart.value).startswith(b"\x89PNG")  # the progress chart of plot/room.py
        # under the table, the room's notes: one account (this test's) wrote every folder
        assert "<p>identity: one account (" in table.value.split("</table>")[1]
        # A learner's check arrives: the live panel shows it without a call.
        monkeypatch.setenv("WORKSHOP_ROOM", str(tmp_path))
        monkeypatch.setenv("JUPYTERHUB_USER", "ivy")
        report = _check_report(exit_code=1)
        report["checks"]["broadcast"] = {"ok": False, "evidence": "differ"}
        assert room.record_check(report)
        toggle.value = True
        deadline = time.monotonic() + 10
        while "ivy" not in table.value and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "<td>ivy</td>" in table.value and "<td>broadcast</td>" in table.value
        toggle.value = False
        deadline = time.monotonic() + 10  # a refresh under way (read, chart) ends first
        while [t for t in threading.enumerate() if t.name == "room-view"]:
            assert time.monotonic() < deadline, "the refreshing thread did not stop"
            time.sleep(0.02)
    finally:
        panel.stop()
    with pytest.raises(FileNotFoundError, match="not a folder"):
        room_view(tmp_path / "nowhere", static=False)


def test_room_widget_static_prints_the_cli_table(tmp_path, capsys, monkeypatch):
    import matplotlib.pyplot as plt

    from workshop.widgets import room as room_widget

    _garbage_room(tmp_path)
    monkeypatch.setattr(room_widget.plt, "show", lambda: plt.close("all"))
    assert room_widget.room_view(tmp_path, static=True) is None
    out = capsys.readouterr().out
    assert out.startswith(f"room {tmp_path}: 3 learners, 1 stuck")
    assert "\nidentity: one account (" in out  # room_notes under the table, as the command
