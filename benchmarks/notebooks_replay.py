"""Replay every notebook with papermill (recorded data, LIVE = False) and report wall time and
the peak memory of the kernel and its children (sum of PSS, with the RSS sum beside it; see
tools/notebook_run.py), per notebook and in total.

Targets (issue 6): all notebooks together under 3 minutes on a 2-core machine; each notebook
under 2 GiB (Binder's memory limit).

    python benchmarks/notebooks_replay.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 180
BINDER_BYTES = 2 * 2**30


def main() -> int:
    # The notebook runner is the checkout's tooling (tools/), not the installed package's; run as
    # `python benchmarks/notebooks_replay.py`, only benchmarks/ is on the path.
    sys.path.insert(0, str(REPO))
    from tools.notebook_run import execute

    notebooks = sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    total = 0.0
    worst = 0
    with tempfile.TemporaryDirectory() as tmp:
        for notebook in notebooks:
            run = execute(
                notebook,
                Path(tmp) / notebook.name,
                # as CI replays them: every worked solution runs and is checked
                {"RESULTS_PATH": str(Path(tmp) / f"{notebook.stem}.json"), "SOLUTIONS": True},
                memory=True,
            )
            total += run.seconds
            worst = max(worst, run.peak_memory_bytes)
            print(
                f"{notebook.name:45s} {run.seconds:6.1f} s  "
                f"peak {run.peak_memory_bytes / 2**20:6.0f} MiB PSS "
                f"({run.peak_rss_bytes / 2**20:6.0f} MiB RSS)",
                flush=True,
            )
    print(
        f"\ntotal replay time {total:.1f} s for {len(notebooks)} notebooks "
        f"(budget {BUDGET_S} s: {total / BUDGET_S:.0%} of it); "
        f"largest peak {worst / 2**20:.0f} MiB (Binder: {BINDER_BYTES / 2**20:.0f} MiB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
