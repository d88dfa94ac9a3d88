"""Readers for plain-text training logs and result tables, as people post them.

Three formats, so learners can analyse their own cluster logs with the workshop's analyses:

* per-epoch lines printed by a training script (seed 000)::

      Epoch 1:  training 3.9464917182922363(s) - testing 0.2842288017272949(s)

* whitespace or tab separated result tables with a header line (seed 004)::

      GPUs  Init time(s)  Train time(s)  Total time(s)  Speedup (train)
      1     68            163            231            1.00

* Horovod's autotune log (``horovodrun --autotune --autotune-log-file FILE``), a CSV file with
  one line per tried parameter setting.

Column names are normalised to the workshop's units-in-names style (``np``, ``init_time_s``,
``train_time_s``, ``total_time_s``, ``examples_per_s``, ``speedup_reported`` ...).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from workshop.runspec import AUTOTUNE_NAMES

EPOCH_LINE = re.compile(
    r"Epoch\s+(?P<epoch>\d+)\s*:\s*training\s+(?P<train>[-+0-9.eE]+)\s*\(s\)"
    r"(?:\s*-\s*testing\s+(?P<test>[-+0-9.eE]+)\s*\(s\))?",
    re.IGNORECASE,
)
# "* 2 GPU", "2 GPUs", "np=2", "-np 2" or "...out.2" announce which run the next epoch lines
# belong to when several runs share one document.
NP_MARKERS = (
    re.compile(r"^\s*[*#-]*\s*(\d+)\s+(?:GPU|GPUs|workers?|ranks?|processes)\b", re.I),
    re.compile(r"\.out\.(\d+)\s*$"),
    re.compile(r"\bnp\s*=?\s*(\d+)\b", re.I),
)
FILE_NP = (re.compile(r"\.out\.(\d+)$"), re.compile(r"np(\d+)", re.I))

# Table headers (lower-cased, spaces squeezed) -> workshop column names.
TABLE_COLUMNS = {
    "gpus": "np",
    "gpu": "np",
    "np": "np",
    "workers": "np",
    "ranks": "np",
    "nodes": "nodes",
    "init time(s)": "init_time_s",
    "train time(s)": "train_time_s",
    "training time(s)": "train_time_s",
    "total time(s)": "total_time_s",
    "wall time(s)": "total_time_s",
    "epoch time(s)": "epoch_time_s",
    "examples/s": "examples_per_s",
    "images/s": "examples_per_s",
    "samples/s": "examples_per_s",
    "img/sec": "examples_per_s",
    "speedup": "speedup_reported",
    "speedup (train)": "speedup_reported",
    "speedup (total)": "speedup_reported",
    "efficiency": "efficiency_reported",
    "batch size": "batch_size",
    "accuracy": "accuracy",
}


def _file_np(path: Path) -> int | None:
    for pattern in FILE_NP:
        match = pattern.search(path.name)
        if match:
            return int(match.group(1))
    return None


def read_epoch_log(path: str | Path, np: int | None = None) -> pd.DataFrame:
    """Read per-epoch timing lines (``Epoch N: training X(s) - testing Y(s)``) from a text file.

    Lines that do not match are ignored, so a whole job output (or a README quoting several
    logs) can be given. When the epoch number restarts at 1 a new run begins; its worker count
    comes from the nearest preceding marker line (``* 2 GPU``, ``... .out.2``, ``np=2``), else
    from ``np``, else from the file name (``*.out.4``, ``*np4*``).

    Args:
        path: text file.
        np: worker count to use when the text does not say.

    Returns:
        DataFrame, one row per epoch line: ``np`` (workers, or <NA> if unknown), ``run``
        (0-based index of the run within the file), ``epoch`` (1-based), ``train_time_s``,
        ``test_time_s`` (NaN if the line has no testing part), ``epoch_time_s`` (train + test),
        ``line`` (1-based line number in the file).

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: naming the file if no epoch line is found, or the line of a malformed one.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    default_np = np if np is not None else _file_np(path)
    rows: list[dict] = []
    marker_np: int | None = None
    run_np: int | None = None
    run = -1
    last_epoch = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        match = EPOCH_LINE.search(line)
        if not match:
            if re.search(r"\bEpoch\s+\d+\s*:\s*training\b", line, re.I):
                raise ValueError(f"{path}:{lineno}: malformed epoch line: {line.strip()!r}")
            for pattern in NP_MARKERS:
                found = pattern.search(line)
                if found:
                    marker_np = int(found.group(1))
                    break
            continue
        epoch = int(match.group("epoch"))
        if last_epoch is None or epoch <= last_epoch:
            run += 1
            run_np = marker_np if marker_np is not None else default_np
            marker_np = None
        last_epoch = epoch
        train = float(match.group("train"))
        test = float(match.group("test")) if match.group("test") else float("nan")
        rows.append(
            {
                "np": run_np,
                "run": run,
                "epoch": epoch,
                "train_time_s": train,
                "test_time_s": test,
                "epoch_time_s": train + (0.0 if test != test else test),
                "line": lineno,
            }
        )
    if not rows:
        raise ValueError(
            f"{path}: no line like 'Epoch 1:  training 3.94(s) - testing 0.28(s)' found"
        )
    frame = pd.DataFrame(rows)
    frame["np"] = frame["np"].astype("Int64")
    return frame


def read_epoch_logs(paths: list[str | Path] | dict[int, str | Path]) -> pd.DataFrame:
    """Read several per-epoch logs (one per worker count) into one DataFrame.

    Args:
        paths: list of files (the worker count is read from the file or its name), or a dict
            ``{np: path}``.

    Returns:
        The columns of :func:`read_epoch_log` plus ``source`` (file name); ``run`` is
        renumbered to be unique across files.

    Raises:
        ValueError: if a file's worker count cannot be determined.
    """
    items = paths.items() if isinstance(paths, dict) else [(None, p) for p in paths]
    frames = []
    offset = 0
    for np_value, path in items:
        frame = read_epoch_log(path, np=np_value)
        if frame["np"].isna().any():
            raise ValueError(
                f"{path}: cannot tell the worker count; name the file like "
                "'train.out.4' or pass {np: path}"
            )
        frame["run"] += offset
        offset = int(frame["run"].max()) + 1
        frame["source"] = Path(path).name
        frames.append(frame)
    if not frames:
        raise ValueError("read_epoch_logs: no files given")
    return pd.concat(frames, ignore_index=True)


def find_logs(folder: str | Path) -> dict[str, list[Path]]:
    """The text logs in a folder (not its sub-folders), by format.

    A file holding an epoch line (``Epoch 1:  training 3.94(s) ...``) is an epoch log; else a
    file holding a result table with a worker-count column is a table; anything else (a
    README, notes, hidden files, binary files) is left out.

    Args:
        folder: a directory, e.g. a copy of a cluster job's output files.

    Returns:
        ``{"epoch_logs": [...], "tables": [...], "other": [...]}``, paths sorted by name.

    Raises:
        FileNotFoundError: if ``folder`` is not a directory.
        ValueError: naming file and line, for a malformed epoch line or table row.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such directory")
    found: dict[str, list[Path]] = {"epoch_logs": [], "tables": [], "other": []}
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        if path.name.startswith("."):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            found["other"].append(path)
            continue
        if EPOCH_LINE.search(text):
            found["epoch_logs"].append(path)
        elif any("np" in table for table in _parse_tables(text.splitlines(), str(path))):
            found["tables"].append(path)
        else:
            found["other"].append(path)
    return found


def _split_header(line: str) -> list[str]:
    """Split a table header into column titles.

    Tabs or runs of 2+ spaces separate titles when present. With single spaces, a word that
    starts with a lower-case letter or '(' belongs to the title before it
    (``Init time(s)``, ``Speedup (train)``).
    """
    stripped = line.strip()
    if "\t" in stripped:
        return [part.strip() for part in stripped.split("\t") if part.strip()]
    if re.search(r"\S {2,}\S", stripped):
        return [part.strip() for part in re.split(r" {2,}", stripped)]
    titles: list[str] = []
    for word in stripped.split():
        if titles and (word[0].islower() or word[0] == "("):
            titles[-1] += " " + word
        else:
            titles.append(word)
    return titles


def _is_number(token: str) -> bool:
    try:
        float(token.rstrip("%x"))
    except ValueError:
        return False
    return True


def normalise_column(title: str) -> str:
    """Map a table title to a workshop column name (``Init time(s)`` -> ``init_time_s``).

    Unknown titles become snake_case with ``(s)`` turned into ``_s``.
    """
    key = re.sub(r"\s+", " ", title.strip().lower())
    if key in TABLE_COLUMNS:
        return TABLE_COLUMNS[key]
    key = key.replace("(s)", " s").replace("/", " per ")
    return re.sub(r"[^a-z0-9]+", "_", key).strip("_")


def _parse_tables(lines: list[str], source: str) -> list[pd.DataFrame]:
    tables: list[pd.DataFrame] = []
    i = 0
    while i < len(lines):
        header = lines[i]
        body_start = i + 1
        rows: list[list[float]] = []
        j = body_start
        titles = _split_header(header) if header.strip() else []
        looks_like_header = titles and not all(_is_number(t) for t in header.split())
        while looks_like_header and j < len(lines):
            tokens = lines[j].split()
            if not tokens or not all(_is_number(t) for t in tokens):
                break
            if len(tokens) != len(titles):
                raise ValueError(
                    f"{source}:{j + 1}: table row has {len(tokens)} values but the header on "
                    f"line {i + 1} names {len(titles)} columns {titles}"
                )
            rows.append([float(t.rstrip("%x")) for t in tokens])
            j += 1
        if rows:
            frame = pd.DataFrame(rows, columns=[normalise_column(t) for t in titles])
            if "np" in frame:
                frame["np"] = frame["np"].astype(int)
            frame.attrs["source"] = source
            frame.attrs["line"] = i + 1
            frame.attrs["titles"] = titles
            tables.append(frame)
            i = j
        else:
            i += 1
    return tables


def read_tables(path: str | Path) -> list[pd.DataFrame]:
    """Find every result table in a text file (a header line followed by rows of numbers).

    Args:
        path: text file, e.g. a lab report or a ``.tsv``.

    Returns:
        One DataFrame per table, columns normalised by :func:`normalise_column` (``np``,
        ``init_time_s``, ``train_time_s``, ``total_time_s``, ``examples_per_s``,
        ``speedup_reported`` ...). ``frame.attrs`` holds ``source``, ``line`` (header line,
        1-based) and ``titles`` (the original column titles).

    Raises:
        ValueError: naming file and line if a row's value count differs from its header's.
    """
    path = Path(path)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return _parse_tables(lines, str(path))


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a file that holds one result table (see :func:`read_tables` for the columns).

    Raises:
        ValueError: if the file holds no table, or more than one.
    """
    tables = read_tables(path)
    if len(tables) != 1:
        found = ", ".join(f"line {t.attrs['line']}" for t in tables) or "none"
        raise ValueError(f"{path}: expected one table (header + numeric rows), found {found}")
    return tables[0]


def merge_tables(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Join tables that describe the same runs (same ``np`` values) into one row per ``np``.

    A ``speedup_reported`` column is renamed after what it measures: ``speedup_reported_train``
    next to ``train_time_s``, ``speedup_reported_throughput`` next to ``examples_per_s``, else
    ``speedup_reported_total``.

    Args:
        tables: DataFrames from :func:`read_tables`, each with an ``np`` column.

    Returns:
        One DataFrame indexed 0..n-1 with an ``np`` column and every measured column.

    Raises:
        ValueError: if a table has no ``np`` column.
    """
    merged: pd.DataFrame | None = None
    for table in tables:
        if "np" not in table:
            raise ValueError(
                f"{table.attrs.get('source', 'table')}:{table.attrs.get('line', '?')}: "
                "no worker-count column (GPUs / np / workers)"
            )
        table = table.copy()
        if "speedup_reported" in table:
            if "examples_per_s" in table:
                kind = "throughput"
            elif "train_time_s" in table:
                kind = "train"
            else:
                kind = "total"
            table = table.rename(columns={"speedup_reported": f"speedup_reported_{kind}"})
        merged = table if merged is None else merged.merge(table, on="np", how="outer")
    if merged is None:
        raise ValueError("merge_tables: no tables given")
    return merged.sort_values("np").reset_index(drop=True)


#: Horovod's autotune log names -> our columns: the parameters that are run options take the
#: option's name (:data:`workshop.runspec.AUTOTUNE_NAMES`; e.g. Horovod 0.28 logs the joint
#: (cycle time, fusion threshold) parameter's threshold in MB as ``tensor_fusion_threshold``).
AUTOTUNE_COLUMNS = {
    "hierarchical_allreduce": "hierarchical_allreduce",
    "hierarchical_allgather": "hierarchical_allgather",
    "cache_enabled": "cache_enabled",
    "torus_allreduce": "torus_allreduce",
    **AUTOTUNE_NAMES,
    "score": "score_bytes_per_us",
}


def read_autotune_log(path: str | Path) -> pd.DataFrame:
    """Read Horovod's autotune log (``--autotune-log-file``): one row per tried setting.

    Horovod's parameter manager (``horovod/common/parameter_manager.cc``, 0.28) scores each
    setting by the bytes it allreduced per microsecond (median over a few samples; higher is
    better) and, after warm-up samples that are not logged, tries settings chosen by Bayesian
    optimisation over (cycle time, fusion threshold). When tuning finishes it appends the best
    setting as one more line.

    Args:
        path: the CSV file Horovod wrote (header line, then one line per sample).

    Returns:
        DataFrame in file order: ``sample`` (0-based), the tuned knobs as logged
        (``hierarchical_allreduce``, ``hierarchical_allgather``, ``torus_allreduce``,
        ``cache_enabled`` as bool, ``cycle_time_ms``, ``fusion_threshold_mb``; other columns a
        Horovod version adds are kept, snake_cased), ``score_bytes_per_us``, ``best_so_far``
        (running maximum of the score) and ``final_best`` (True on a last line that repeats the
        best earlier setting and score: Horovod's "best parameters" line).

    Raises:
        ValueError: naming the file and line for an empty file, a missing ``score`` column or
            a row whose field count differs from the header's.
    """
    path = Path(path)
    lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    content = [(n, ln) for n, ln in enumerate(lines, start=1) if ln.strip()]
    if not content:
        raise ValueError(f"{path}: empty autotune log")
    header_line, header = content[0]
    titles = [t.strip() for t in header.split(",")]
    columns = [AUTOTUNE_COLUMNS.get(t.lower(), normalise_column(t)) for t in titles]
    if "score_bytes_per_us" not in columns:
        raise ValueError(
            f"{path}:{header_line}: autotune header has no 'score' column: {header.strip()!r}"
        )
    rows = []
    for lineno, line in content[1:]:
        fields = [f.strip() for f in line.split(",")]
        if fields and fields[-1] == "" and len(fields) == len(titles) + 1:
            fields = fields[:-1]
        if len(fields) != len(titles):
            raise ValueError(
                f"{path}:{lineno}: {len(fields)} fields, header on line {header_line} has "
                f"{len(titles)}"
            )
        try:
            rows.append([float(f) for f in fields])
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: non-numeric field ({exc})") from None
    frame = pd.DataFrame(rows, columns=columns)
    for flag in ("hierarchical_allreduce", "hierarchical_allgather", "torus_allreduce"):
        if flag in frame:
            frame[flag] = frame[flag].astype(bool)
    if "cache_enabled" in frame:
        frame["cache_enabled"] = frame["cache_enabled"].astype(bool)
    frame.insert(0, "sample", range(len(frame)))
    frame["best_so_far"] = frame["score_bytes_per_us"].cummax()
    frame["final_best"] = False
    if len(frame) >= 2:
        last, earlier = frame.iloc[-1], frame.iloc[:-1]
        best = earlier.loc[earlier["score_bytes_per_us"].idxmax()]
        knobs = [c for c in columns if c != "score_bytes_per_us"]
        if last["score_bytes_per_us"] == best["score_bytes_per_us"] and all(
            last[c] == best[c] for c in knobs
        ):
            frame.loc[frame.index[-1], "final_best"] = True
    return frame
