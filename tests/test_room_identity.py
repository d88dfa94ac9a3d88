"""Who speaks for whom in the room (issue 50): with real Unix users (as root, as
test_room.py's group room), a learner cannot make a row appear as another's, nor stop
another's records (a squatted folder: the learner records in a folder of their own), nor keep
a squatted, renamed or planted entry counted; the instructor's view names each one.

The users and their group are made once for this module (useradd costs seconds) and removed at
its end; each test makes its own room folder under the group's base folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from unix_users import as_user, unix_users

from workshop import room
from workshop.analysis.room import room_table
from workshop.commands import room as room_command
from workshop.findings.room import room_notes, room_text
from workshop.lessons import engine as exercises
from workshop.readers.room import read_room

NONE_CAN = "none can remove or rename another's"
OK_RUN = Path(__file__).resolve().parents[1] / "data" / "runs" / "torch-mnist-gloo-np2"

# A learner's session: steps in order, in one process (one room session).
#   ["check", exercise, answer]  exercises.check with expected 42 (42 right, else wrong)
#   ["run", run_dir]             room.record_run, prints its result
#   ["signal", path] / ["wait", path]   to let the test act between two checks
LEARNER = """
import json, sys, time
from pathlib import Path
from workshop import room
from workshop.lessons import engine as exercises
for step in json.loads(sys.argv[1]):
    if step[0] == "check":
        exercises.check(step[1], step[2], expected=42, hints=("h",))
    elif step[0] == "run":
        print("run recorded:", room.record_run(step[1]))
    elif step[0] == "signal":
        Path(step[1]).touch()
    elif step[0] == "wait":
        deadline = time.monotonic() + 60
        while not Path(step[1]).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
"""

# What a learner can do by hand (any tool): write a record that looks like the learner side's.
FORGE = """
import json, sys
from pathlib import Path
from workshop import room
from workshop.commands import room as room_command
path, name = Path(sys.argv[1]), sys.argv[2]
path.parent.mkdir(mode=0o750, exist_ok=True)
entry = {"tries": 1, "wrong": 0, "right": True, "first_s": 1.0, "last_s": 2.0, "last_ok": True}
room.write_json(path, {"format": room.FORMAT, "learner": name, "session": "forged",
                       "exercises": {ex: entry for ex in ("05.1", "05.2", "05.3")}})
"""


@pytest.fixture(scope="module")
def people():
    """ana and ben (learners) and tess (instructor), all in one group; removed at the end."""
    with unix_users(3, group=True) as (users, group):
        yield dict(zip(["ana", "ben", "tess"], users, strict=True)), group


def learner(user: dict, folder: Path, steps: list, *, env=None, popen=False):
    environment = {"WORKSHOP_ROOM": str(folder), **(env or {})}
    args = ["-c", LEARNER, json.dumps(steps)]
    return as_user(user, args, cwd=user["home"], env=environment, popen=popen)


def forge(user: dict, path: Path, name: str):
    result = as_user(user, ["-c", FORGE, str(path), name], cwd=user["home"])
    assert result.returncode == 0, result.stderr
    return result


def new_room(group: dict, name: str) -> Path:
    """A room as `workshop room --init DIR --group G` makes it, as root (rwxrws--T)."""
    folder = group["base"] / name
    done, wrong = room_command.make_room(folder, group["name"])
    assert (done, wrong) == ([f"made {folder}"], [])
    assert (oct(stat.S_IMODE(folder.stat().st_mode)), folder.stat().st_gid) == (
        "0o3770",
        group["gid"],
    )
    return folder


def rows(folder: Path) -> dict:
    table = room_table(read_room(folder)).set_index("learner")
    return {
        name: (row["right"], row["stuck_on"], row["bad_files"], row["refused_files"])
        for name, row in table.iterrows()
    }


def refused(folder: Path) -> list[tuple]:
    return [tuple(r) for r in read_room(folder).refused.itertuples(index=False)]


def view_as(user: dict, folder: Path) -> str:
    seen = as_user(user, ["-m", "workshop.cli", "room", str(folder)])
    assert seen.returncode == 0, seen.stderr
    return seen.stdout


# -- attack 1: a forged name --------------------------------------------------------------------
def test_a_forged_name_is_recorded_as_the_account_that_wrote_it(people):
    (users, group), names = people, {k: v["name"] for k, v in people[0].items()}
    folder = new_room(group, "forged-name")
    forged = learner(users["ana"], folder, [["check", "05.1", 42], ["check", "05.2", 42]],
                     env={"JUPYTERHUB_USER": names["ben"]})  # fmt: skip
    assert forged.returncode == 0
    assert forged.stdout.splitlines() == ["[05.1] right: 42.", "[05.2] right: 42."]
    # the account wins, said once
    assert forged.stderr.splitlines() == [
        f"(room: recording as {names['ana']!r}, the Unix account this session runs as; "
        f"JUPYTERHUB_USER={names['ben']!r} does not name a learner in a room of Unix accounts)"
    ]
    assert sorted(p.name for p in folder.iterdir()) == [names["ana"]]  # no folder for ben
    honest = learner(users["ben"], folder, [["check", "05.1", 7]])
    assert honest.returncode == 0 and honest.stderr == ""
    # ana: 05.1 and 05.2 right (her forged tries count as hers); ben: 05.1 wrong once -> stuck
    assert rows(folder) == {names["ana"]: (2, "", 0, 0), names["ben"]: (0, "05.1", 0, 0)}
    assert refused(folder) == []
    text = view_as(users["tess"], folder)
    assert "identity: Unix accounts (the room is root's)" in text
    assert "not counted" not in text and "sticky" not in text


# -- attack 2: a squatted folder (and its guessable fallbacks) -------------------------------
def test_a_squatted_folder_is_refused_and_the_learner_records_in_a_folder_of_their_own(people):
    (users, group), names = people, {k: v["name"] for k, v in people[0].items()}
    ana, ben = names["ana"], names["ben"]
    folder = new_room(group, "squatted")
    squats = [ben, f"{ben}.1234", f"{ben}.{'1234' * 4}"]  # ROOM/ben and fallbacks ana guessed
    for squat in squats:
        forge(users["ana"], folder / squat / "session-forged.json", ben)
    forge(users["ana"], folder / f"{ana}.notes" / "session-forged.json", ana)  # her own
    owned_by_ana = f"owned by {ana}"
    squatted = sorted((ben, squat, "", ana, owned_by_ana) for squat in squats)
    # near miss: ana.notes, made by ana, is ana's (3 right); nothing ana made counts as ben's
    assert rows(folder) == {ana: (3, "", 0, 0)}
    assert sorted(refused(folder)) == squatted
    # ben works: told once where his records go, his lesson goes on; a second session of his
    # finds the same folder; once the instructor removes the squat, the first session keeps
    # its folder (its session file in one folder only) and a new one takes ROOM/ben again.
    run_dir = users["ben"]["home"] / "runs" / "r1"
    run_dir.mkdir(parents=True)
    shutil.copy(OK_RUN / "run.json", run_dir)
    signals = group["base"] / "signals"
    signals.mkdir(mode=0o777)
    signals.chmod(0o777)
    recorded, removed = signals / "recorded", signals / "removed"
    steps = [["check", "05.1", 1], ["check", "05.1", 42], ["run", str(run_dir)],
             ["signal", str(recorded)], ["wait", str(removed)], ["check", "05.2", 42],
             ["run", str(run_dir)]]  # fmt: skip
    session = learner(users["ben"], folder, steps, popen=True)
    deadline = time.monotonic() + 60
    while not recorded.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert recorded.exists()
    [own] = [path for path in folder.iterdir() if path.name not in [*squats, f"{ana}.notes"]]
    assert re.fullmatch(rf"{ben}\.[0-9a-f]{{16}}", own.name), own.name
    assert (own.stat().st_uid, oct(stat.S_IMODE(own.stat().st_mode))) == (
        users["ben"]["uid"], "0o2750",
    )  # fmt: skip
    written = [path for squat in squats for path in (folder / squat).iterdir()]
    assert {path.stat().st_uid for path in written} == {users["ana"]["uid"]}  # none of ben's
    # ben's row: his records only (05.1 wrong then right, the run), not the forged ones
    assert rows(folder) == {ana: (3, "", 0, 0), ben: (1, "", 0, 0)}
    assert sorted(refused(folder)) == squatted
    text = view_as(users["tess"], folder)
    for squat in squats:
        assert f"{folder}/{squat} is owned by {ana}: not counted as {ben}'s" in text
    assert "room" in text.splitlines()[0] and ": 2 learners, 0 stuck" in text.splitlines()[0]
    told = (
        f"(room: {folder}/{ben} is owned by {ana}, not {ben}'s own folder: your records go to "
        f"{own} instead, a folder only you can write, and count as {ben}'s. The instructor may "
        f"remove {folder}/{ben} (rm -r {folder}/{ben}))"
    )
    second = learner(users["ben"], folder, [["check", "06.1", 7]])
    assert second.returncode == 0 and second.stderr.splitlines() == [told]
    assert len(list(own.glob("session-*.json"))) == 2  # the second session found his folder
    shutil.rmtree(folder / ben)  # what the view told the instructor to do
    removed.touch()
    out, err = session.communicate(timeout=60)
    assert session.returncode == 0, err
    assert out.splitlines() == [
        "[05.1] not yet: you said 1. Hint: h",
        "[05.1] right: 42.",
        "run recorded: True",
        "[05.2] right: 42.",
        "run recorded: True",
    ]
    assert err.splitlines() == [told]  # once, for five records
    assert not (folder / ben).exists()  # the session kept its folder
    merged = read_room(folder).exercises
    mine = merged[merged["session"] != "forged"].set_index("exercise")
    assert mine.loc["05.1", ["tries", "wrong", "right"]].tolist() == [2, 1, True]  # once
    # a new session takes ROOM/ben, his now; his row is all his folders' records
    third = learner(users["ben"], folder, [["check", "05.3", 42]])
    assert third.returncode == 0 and third.stderr == ""
    assert (folder / ben).stat().st_uid == users["ben"]["uid"]
    assert len(list((folder / ben).glob("session-*.json"))) == 1
    table = room_table(read_room(folder)).set_index("learner")
    got = table.loc[ben, ["right", "furthest", "stuck_on", "last_run", "last_run_status"]]
    assert got.tolist() == [3, "06.1", "", "r1", "ok"]
    assert sorted(refused(folder)) == squatted[1:]
    assert read_room(folder).learners == sorted([ana, ben])


def test_a_learner_cannot_clear_another_learners_folder_in_a_room_made_by_init(people):
    (users, group), names = people, {k: v["name"] for k, v in people[0].items()}
    ana, ben = names["ana"], names["ben"]
    folder = new_room(group, "sticky")
    assert learner(users["ben"], folder, [["check", "05.1", 42]]).stderr == ""
    assert learner(users["ana"], folder, [["check", "05.1", 7]]).stderr == ""
    attack = """
import os, sys
room, ben, ana = sys.argv[1:]
for what, action in [("rename", lambda: os.rename(f"{room}/{ben}", f"{room}/gone")),
                     ("rmdir", lambda: os.rmdir(f"{room}/{ben}")),
                     ("rename own", lambda: os.rename(f"{room}/{ana}", f"{room}/{ana}-x")),
                     ("rename back", lambda: os.rename(f"{room}/{ana}-x", f"{room}/{ana}"))]:
    try:
        action()
        print(what, "done")
    except OSError as exc:
        print(what, exc.strerror)
"""
    tried = as_user(users["ana"], ["-c", attack, str(folder), ben, ana])
    # the sticky bit: ana cannot rename or remove ben's folder (near miss: her own, she can)
    assert tried.stdout.splitlines() == [
        "rename Operation not permitted",
        "rmdir Operation not permitted",
        "rename own done",
        "rename back done",
    ]
    assert rows(folder) == {ana: (0, "05.1", 0, 0), ben: (1, "", 0, 0)}
    assert read_room(folder).folder_problems == []


# -- attack 3: a folder renamed away and squatted, in a room made by hand without sticky -------
def test_in_a_room_without_sticky_a_renamed_folder_is_flagged_and_the_room_warned(people):
    (users, group), names = people, {k: v["name"] for k, v in people[0].items()}
    ana, ben = names["ana"], names["ben"]
    folder = group["base"] / "no-sticky"
    folder.mkdir()
    os.chown(folder, 0, group["gid"])
    folder.chmod(0o2770)  # what the instructor guide said before issue 50
    assert learner(users["ben"], folder, [["check", "05.1", 42]]).stderr == ""
    assert rows(folder) == {ben: (1, "", 0, 0)}
    as_user(users["ana"], ["-c", f"import os; os.rename({str(folder / ben)!r}, "
                                 f"{str(folder / 'gone')!r})"])  # fmt: skip
    forge(users["ana"], folder / ben / "session-forged.json", ben)
    assert rows(folder) == {}  # neither the forged folder nor ben's renamed one counts
    assert sorted(refused(folder)) == sorted(
        [(ben, ben, "", ana, f"owned by {ana}"), ("gone", "gone", "", ben, f"owned by {ben}")]
    )
    text = view_as(users["tess"], folder)
    assert f"{folder}/{ben} is owned by {ana}: not counted as {ben}'s" in text
    assert f"{folder}/gone is owned by {ben}: not counted as gone's" in text
    assert (
        f"{folder}: not sticky (chmod +t): a learner can remove or rename another learner's "
        f"folder (workshop room --init {folder}, run by its owner, adds what is missing)"
    ) in text
    # the instructor puts it right: ben's records count again, the room cannot be cleared now
    fixed = subprocess.run(
        [sys.executable, "-m", "workshop.cli", "room", "--init", str(folder)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.splitlines()[1:] == [
        "  added sticky",
        f"  each member of the group can add their own folder; {NONE_CAN}",
    ]
    shutil.rmtree(folder / ben)
    os.rename(folder / "gone", folder / ben)
    assert rows(folder) == {ben: (1, "", 0, 0)} and refused(folder) == []
    assert read_room(folder).folder_problems == []


# -- attack 4: files planted or renamed into another learner's folder -------------------------
def test_files_planted_or_renamed_into_a_learners_folder_are_not_counted(people):
    (users, group), names = people, {k: v["name"] for k, v in people[0].items()}
    ana, ben = names["ana"], names["ben"]
    folder = new_room(group, "planted")
    assert learner(users["ben"], folder, [["check", "05.1", 7]]).stderr == ""
    assert learner(users["ana"], folder, [["check", "05.1", 42]]).stderr == ""
    # a site whose umask or default ACL leaves learners' folders group-writable
    (folder / ben).chmod(0o2770)
    [own] = (folder / ana).glob("session-*.json")
    plant = f"""
import os
os.rename({str(own)!r}, {str(folder / ben / "session-moved.json")!r})
os.symlink({str(folder / ana)!r}, {str(folder / ben / "run-link.json")!r})
"""
    assert as_user(users["ana"], ["-c", plant]).returncode == 0
    forge(users["ana"], folder / ben / "session-planted.json", ben)
    # ben: only his own record counts (05.1 wrong once: stuck); ana's moved record left her row
    assert rows(folder) == {ana: (0, "", 0, 0), ben: (0, "05.1", 0, 3)}
    assert sorted(refused(folder)) == [
        (ben, ben, "run-link.json", ana, "a link"),
        (ben, ben, "session-moved.json", ana, f"owned by {ana}"),
        (ben, ben, "session-planted.json", ana, f"owned by {ana}"),
    ]
    text = view_as(users["tess"], folder)
    assert "3 not theirs (below)" in text
    planted = f"{folder}/{ben}/session-planted.json"
    assert f"{planted} is owned by {ana}: not counted in {ben}'s row" in text
    assert f"{folder}/{ben}/run-link.json is a link (made by {ana}): not counted" in text
    # ben's next check still goes in (his own folder), and the planted files stay out
    assert learner(users["ben"], folder, [["check", "05.1", 42]]).stderr == ""
    assert rows(folder)[ben] == (1, "", 0, 3)


# -- root, modes, and the room's own folder ----------------------------------------------------
def test_root_records_nothing_in_a_room_of_unix_accounts(tmp_path, monkeypatch, capsys):
    if os.geteuid() != 0:
        pytest.skip("root's refusal is tested as root")
    folder = tmp_path / "room"
    folder.mkdir()
    os.chown(folder, 4242, 4242)  # a room someone else made: this root session is no learner
    monkeypatch.setenv("WORKSHOP_ROOM", str(folder))
    monkeypatch.setenv("JUPYTERHUB_USER", "ana")
    monkeypatch.setattr(room, "_WARNED", set())
    exercises.reset()
    assert exercises.check("05.1", 42, expected=42, hints=("h",)).ok
    assert room.record_attempt("05.2", True) is False
    assert list(folder.iterdir()) == []
    assert capsys.readouterr().err.splitlines() == [
        f"(room: not recorded: {folder} is owned by uid 4242, a room of Unix accounts, where "
        "root is no learner: root records nothing there (run the lesson as the learner's "
        "account))"
    ]
    exercises.reset()


def test_a_single_account_room_names_learners_by_the_hub_variable(tmp_path, monkeypatch):
    folder = tmp_path / "room"
    folder.mkdir()
    assert room_notes(read_room(folder))[0] == (
        f"identity: no learner folder yet (the room is {room.account_name(os.geteuid())}'s)"
    )
    monkeypatch.setenv("WORKSHOP_ROOM", str(folder))
    monkeypatch.setattr(room, "_WARNED", set())
    for name in ("ana", "ben"):  # two containers of one account, the hub naming each
        monkeypatch.setenv("JUPYTERHUB_USER", name)
        assert room.learner_name() == name and room.record_attempt("05.1", True)
    (folder / "cai").symlink_to(folder / "ana")  # a link is never read as a learner
    found = read_room(folder)
    assert found.identity == room.SINGLE_ACCOUNT and found.learners == ["ana", "ben"]
    assert [tuple(r) for r in found.refused.itertuples(index=False)] == [
        ("cai", "cai", "", room.account_name(os.geteuid()), "a link")
    ]
    text = room_text(room_table(found), folder=str(folder), room=found)
    assert (
        f"identity: one account ({room.account_name(os.geteuid())}) writes every folder: each "
        "folder is named by the hub's variable (JUPYTERHUB_USER, set per container), which "
        "the file system cannot check"
    ) in text


def test_init_makes_and_checks_the_room_folder(people):
    (users, group), names = people, {k: v["name"] for k, v in people[0].items()}
    folder = group["base"] / "init" / "room"

    def init(*args, user=None):
        command = ["-m", "workshop.cli", "room", "--init", *map(str, args)]
        if user:
            return as_user(user, command)
        return subprocess.run([sys.executable, *command], capture_output=True, text=True)

    made = init(folder, "--group", group["name"])
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines() == [
        f"room {folder}: drwxrws--T, group {group['name']}",
        f"  made {folder}",
        f"  each member of the group can add their own folder; {NONE_CAN}",
    ]
    found = folder.stat()
    assert (oct(stat.S_IMODE(found.st_mode)), found.st_gid) == ("0o3770", group["gid"])
    again = init(folder, "--group", group["name"])
    assert again.returncode == 0 and len(again.stdout.splitlines()) == 2  # nothing to change
    # a folder the instructor made by hand: only its owner may fix it, others are told whom to ask
    mine = group["base"] / "tess-room"
    mine.mkdir()
    os.chown(mine, users["tess"]["uid"], group["gid"])
    mine.chmod(0o2777)
    told = init(mine, user=users["ana"])
    assert told.returncode == 1
    assert told.stderr.strip() == (
        f"it lacks sticky; others may write it: ask its owner {names['tess']} to run: "
        f"workshop room --init {mine}"
    )
    assert stat.S_IMODE(mine.stat().st_mode) == 0o2777  # unchanged
    fixed = init(mine, user=users["tess"])
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.splitlines()[1] == "  added sticky; removed write for others"
    assert stat.S_IMODE(mine.stat().st_mode) == 0o3775  # others keep read, lose write
    nogroup = init(mine, "--group", "no-such-group-x")
    assert (nogroup.returncode, nogroup.stderr.strip()) == (
        2, "workshop room --init: --group 'no-such-group-x': no such group on this machine"
    )  # fmt: skip
    alone = subprocess.run(
        [sys.executable, "-m", "workshop.cli", "room", str(mine), "--group", group["name"]],
        capture_output=True, text=True,
    )  # fmt: skip
    assert (alone.returncode, alone.stderr.strip()) == (
        2, "workshop room: --group goes with --init"
    )  # fmt: skip
