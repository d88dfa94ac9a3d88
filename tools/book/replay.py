"""Step 1 of the book: the lessons executed as CI runs them, or taken from a folder."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from pathlib import Path

from tools.book.repository import BookError
from tools.notebook_run import execute


def replay(
    notebooks: list[Path],
    into: Path,
    *,
    jobs: int = 2,
    progress: Callable[[str], None] = print,
) -> dict[str, Path]:
    """Execute each notebook as CI runs it (``SOLUTIONS = True``, no answer given) into
    ``into``.

    Returns:
        notebook name -> the executed copy.
    """
    into.mkdir(parents=True, exist_ok=True)
    done: dict[str, Path] = {}

    def one(path: Path) -> Path:
        output = into / path.name
        run = execute(path, output, {"SOLUTIONS": True}, cwd=path.parent)
        progress(f"  replayed {path.name} in {run.seconds:.1f} s")
        return output

    progress(f"replaying {len(notebooks)} lessons ({jobs} at a time) into {into}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(one, path): path for path in notebooks}
        for future in concurrent.futures.as_completed(futures):
            path = futures[future]
            try:
                done[path.name] = future.result()
            except Exception as error:  # papermill names the cell; add the notebook
                raise BookError(f"{path}: the replay failed: {error}") from error
    return done


def executed_copies(folder: Path, notebooks: list[Path]) -> dict[str, Path]:
    """The executed notebooks already in ``folder`` (``--replays``), one per lesson.

    Raises:
        BookError: naming the lessons that have no executed copy there.
    """
    missing = [p.name for p in notebooks if not (folder / p.name).is_file()]
    if missing:
        raise BookError(f"{folder}: no executed copy of {', '.join(missing)}")
    return {p.name: folder / p.name for p in notebooks}
