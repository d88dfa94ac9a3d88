"""Temporary Unix users for tests of a shared install (issue 39): root only.

:func:`unix_users` creates users (and optionally one group they share) with homes under one
world-traversable folder, and removes users, group and folder on leaving, whatever happened.
This machine's .venv links to an interpreter under /root (mode 700), which no other user may
run, so the users get a world-readable Python of the same version (a venv of
/usr/bin/python3.X) over the same site-packages, as a shared install under /opt would be.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from workshop.paths import REPO_DIR


def skip_unless_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("creating Unix users needs root")
    if not shutil.which("useradd"):
        pytest.skip("useradd is not installed")


def shared_python(venv: Path) -> Path:
    """A venv of a Python every user may run, seeing this install's site-packages (the
    editable workshop included) and its horovodrun."""
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = Path("/usr/bin") / minor
    if not base.exists():
        pytest.skip(f"no {base} for a second user (this .venv's interpreter is not theirs)")
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
    shared = Path(sys.prefix) / "lib" / minor / "site-packages"
    (venv / "lib" / minor / "site-packages" / "workshop-shared.pth").write_text(
        f"import site; site.addsitedir({str(shared)!r})\n"
    )
    script = (Path(sys.prefix) / "bin" / "horovodrun").read_text().split("\n", 1)[1]
    horovodrun = venv / "bin" / "horovodrun"
    horovodrun.write_text(f"#!{venv / 'bin' / 'python'}\n{script}")
    horovodrun.chmod(0o755)
    return venv / "bin" / "python"


@contextlib.contextmanager
def unix_users(count: int, *, group: bool = False) -> Iterator[tuple[list[dict], dict | None]]:
    """``count`` new users, each a dict (name, uid, gid, home, python, groups), and the group
    they all belong to (name, gid, base: a folder for shared files) when ``group``."""
    skip_unless_root()
    import grp
    import pwd

    tag = uuid.uuid4().hex[:6]
    base = Path(tempfile.mkdtemp(prefix="workshop-users-", dir="/tmp"))
    base.chmod(0o755)
    created, shared = [], None
    try:
        python = shared_python(base / "venv")
        if group:
            subprocess.run(["groupadd", f"wsg{tag}"], check=True, capture_output=True)
            shared = {"name": f"wsg{tag}", "gid": grp.getgrnam(f"wsg{tag}").gr_gid, "base": base}
        users = []
        for n in range(count):
            name = f"wsl{tag}{n}"
            extra = ["--groups", shared["name"]] if shared else []
            command = ["useradd", "--home-dir", str(base / name), "--create-home", *extra]
            subprocess.run([*command, "--shell", "/bin/sh", name], check=True, capture_output=True)
            created.append(name)
            entry = pwd.getpwnam(name)
            users.append(
                {
                    "name": name,
                    "uid": entry.pw_uid,
                    "gid": entry.pw_gid,
                    "home": base / name,
                    "python": python,
                    "groups": [shared["gid"]] if shared else [],
                }
            )
        yield users, shared
    finally:
        for name in created:
            subprocess.run(["userdel", name], capture_output=True)
        if shared:
            subprocess.run(["groupdel", shared["name"]], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def as_user(user: dict, args, *, cwd=REPO_DIR, env=None, timeout=120, popen=False):
    """``python ARGS`` as ``user`` (its HOME, login name, groups; no other environment)."""
    environment = {
        "HOME": str(user["home"]),
        "USER": user["name"],
        "LOGNAME": user["name"],
        "PATH": f"{user['python'].parent}:/usr/local/bin:/usr/bin:/bin",
        **(env or {}),
    }
    options = dict(
        cwd=cwd,
        env=environment,
        user=user["uid"],
        group=user["gid"],
        extra_groups=user["groups"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if popen:
        return subprocess.Popen([str(user["python"]), *args], **options)
    return subprocess.run([str(user["python"]), *args], timeout=timeout, **options)
