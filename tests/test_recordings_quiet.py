"""Every performance recording in data/ was made on a quiet machine (issue 37): a finished run
directory holds workshop.launch.quiet's ``recording`` record within the threshold, unless its
folder is on data/quiet-pending.json (recorded before the gate; the list may only shrink)."""

from __future__ import annotations

import json
import shutil

from workshop.paths import data_dir
from workshop.readers.recordings import PENDING_FILE, quiet_problems


def test_performance_recordings_in_data_were_made_on_a_quiet_machine():
    assert quiet_problems() == []


def _record(foreign, limit=0.05, quiet=True):
    return {"schema": 1, "max_foreign_cores": limit, "foreign_cores": foreign, "quiet": quiet}


def _run(folder, recording=None, status="ok"):
    folder.mkdir(parents=True)
    record = {"status": status} | ({"recording": recording} if recording else {})
    (folder / "run.json").write_text(json.dumps(record))


def test_the_rule_rejects_its_near_misses(tmp_path):
    _run(tmp_path / "sweeps" / "quiet" / "p00", _record(0.05))  # at the threshold: fine
    _run(tmp_path / "sweeps" / "failed" / "p00", status="failed")  # no timing evidence: fine
    _run(tmp_path / "sweeps" / "busy" / "p00", _record(0.06))  # just above
    _run(tmp_path / "sweeps" / "loose" / "p00", _record(0.2, limit=0.5))  # its own looser rule
    _run(tmp_path / "sweeps" / "none" / "p00")  # no record at all
    (tmp_path / "sweeps" / "quiet" / "compute-baseline.jsonl").write_text(
        json.dumps({"round": 1, "recording": _record(0.3, quiet=False)}) + "\n"
    )
    problems = "\n".join(quiet_problems(tmp_path))
    assert "sweeps/busy/p00: disturbed: other work took 0.06 cores (threshold 0.05)" in problems
    assert "sweeps/loose/p00: 'recording' lacks foreign_cores or has a threshold above" in problems
    assert "sweeps/none/p00: no 'recording' record" in problems
    assert "sweeps/quiet/compute-baseline.jsonl:1: disturbed" in problems
    assert "sweeps/quiet/p00" not in problems and "failed" not in problems
    assert len(problems.splitlines()) == 4


def test_the_pending_list_covers_only_folders_still_unrecorded(tmp_path):
    _run(tmp_path / "sweeps" / "old" / "p00")
    _run(tmp_path / "sweeps" / "redone" / "p00", _record(0.01))
    (tmp_path / PENDING_FILE).write_text(json.dumps({"folders": ["sweeps/old", "sweeps/redone"]}))
    assert quiet_problems(tmp_path) == [
        f"{PENDING_FILE}: sweeps/redone holds no run without the record any more (or does not "
        "exist): take it off the list"
    ]


def test_the_shipped_pending_list_is_the_recordings_without_a_record(tmp_path):
    # copying data/ without the list shows every folder the list excuses, and nothing else
    shutil.copytree(data_dir(), tmp_path / "data", ignore=shutil.ignore_patterns("*.json.gz"))
    (tmp_path / "data" / PENDING_FILE).unlink()
    pending = json.loads((data_dir() / PENDING_FILE).read_text())["folders"]
    unexcused = {line.split(":")[0] for line in quiet_problems(tmp_path / "data")}
    assert {"/".join(p.split("/")[:2]) for p in unexcused} == set(pending)


def test_every_data_readme_over_run_directories_states_its_quiet_condition():
    root = data_dir()
    missing = set()
    for run_json in root.rglob("run.json"):
        folder = run_json.parent
        readmes = [p / "README.md" for p in [folder, *folder.parents] if p != root.parent]
        readmes = [r for r in readmes if r.exists() and root in r.parents]
        # the folder's own README, or one above it up to data/<kind>/, states the condition
        if not any("Quiet-machine condition" in r.read_text() for r in readmes):
            missing.add(str(folder.relative_to(root)))
    assert not missing, f"no README states a 'Quiet-machine condition' for: {sorted(missing)}"
