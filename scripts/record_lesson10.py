"""Record data/ddp-lesson/: lesson 10's DDP runs of lesson 02's model (issue 58).

``buckets/round-N/{default,cap0}/``: one torchrun run each of
workshop/lessons/l10_ddp/programs/ddp_profiled.py (2 CPU ranks, Gloo, the MNIST CNN, batch 32
per rank; 5 profiled steps after 4 skipped and 1 warm-up), with DDP's default bucket size and
with ``bucket_cap_mb=0``, in ROUNDS rounds whose order alternates (default first in odd
rounds), so that the load of the moment hits both alike; ``traces/rank<R>.json.gz`` and
``recording.json`` (command, np, versions, host, start time, load average before and after,
the quiet record). ``check/{mistake,fixed}.json``: ``workshop check`` on the lesson's DDP
script with its mistake (programs/ddp_torch_mistake.py) and on the fix (lesson 02's
ddp_torch.py). Each through the recording path (``workshop.launch.quiet.quietly``: it waits
for a quiet machine, measures the CPU other work took during the run, and records again when
that was over the threshold).

    python scripts/record_lesson10.py            # everything missing
    python scripts/record_lesson10.py check      # only the checks (or: buckets)

Stop everything else first (tests, builds, notebooks). A folder or file that exists is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from workshop.launch.quiet import quietly  # noqa: E402
from workshop.launch.record import provenance  # noqa: E402
from workshop.lessons.l10_ddp import record  # noqa: E402

OUT = REPO / "data" / "ddp-lesson"
ROUNDS = 3
FIXED = REPO / "workshop" / "lessons" / "l02_first_program" / "programs" / "ddp_torch.py"


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _record_buckets(out: Path) -> None:
    for n in range(1, ROUNDS + 1):
        names = list(record.BUCKETS) if n % 2 else list(record.BUCKETS)[::-1]
        for name in names:
            target = out / "buckets" / f"round-{n}" / name
            if target.exists():
                print(f"{target} exists, kept (remove it to record it again)")
                continue

            def make(target=target, name=name) -> dict:
                shutil.rmtree(target, ignore_errors=True)
                return record.record_traces(target, record.BUCKETS[name])

            run, quiet = quietly(
                make, label=lambda _, t=target: str(t.relative_to(out)), report=print,
                discard=lambda _, t=target: shutil.rmtree(t, ignore_errors=True),
            )  # fmt: skip
            document = {**run, "round": n, "np": record.NP, "backend": "gloo", **provenance(),
                        "loadavg_after": _loadavg(), "recording": quiet}  # fmt: skip
            (target / "recording.json").write_text(json.dumps(document, indent=2) + "\n")
            print(f"recorded {target}: quiet {quiet['quiet']}, other work "
                  f"{quiet['foreign_cores']} cores")  # fmt: skip


def _record_checks(out: Path) -> None:
    for name, script in (("mistake", record.MISTAKE), ("fixed", FIXED)):
        target = out / "check" / f"{name}.json"
        if target.exists():
            print(f"{target} exists, kept (remove it to record it again)")
            continue
        started = datetime.now(UTC).isoformat(timespec="seconds")
        found, quiet = quietly(lambda s=script: record.record_check(s), label=lambda _, n=name: n,
                               report=print)  # fmt: skip
        document = {**found, "np": record.NP, "recorded_at": started, **provenance(),
                    "loadavg_after": _loadavg(), "recording": quiet}  # fmt: skip
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(document, indent=2) + "\n")
        print(f"recorded {target}: exit code {found['report']['exit_code']}, quiet "
              f"{quiet['quiet']}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", help="buckets, check (default: both)")
    args = parser.parse_args()
    unknown = sorted(set(args.parts) - {"buckets", "check"})
    if unknown:
        parser.error(f"unknown part(s) {unknown}: buckets, check")
    parts = args.parts or ["buckets", "check"]
    if "buckets" in parts:
        _record_buckets(OUT)
    if "check" in parts:
        _record_checks(OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
