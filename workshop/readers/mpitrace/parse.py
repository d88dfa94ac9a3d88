"""The text of mpitrace's ``mpi_profile.JOBID.RANK`` files, parsed into a :class:`ProfileFile`
(the grammar: regular expressions per line kind, and a line-by-line parser).

The file format and what the reader keeps: see :mod:`workshop.readers.mpitrace`.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path

from workshop.readers.mpitrace.records import MpiTraceError, MpiTraceWarning, ProfileFile, _Handler

__all__ = ["FILE_NAME", "parse_mpitrace", "parse_mpitrace_bytes", "read_mpitrace_file"]


FILE_NAME = re.compile(r"^mpi_profile\.(?P<jobid>.+)\.(?P<rank>\d+)$")

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_SEP = re.compile(r"^\s*[-=]{8,}\s*$")
_DATA_FOR = re.compile(r"^\s*Data for MPI rank (\d+) of (\d+)\s*:?\s*$")
_TIMES = re.compile(r"^\s*Times (and statistics )?from MPI_Init\(\) to MPI_Finalize\(\)\.?\s*$")
_ROUTINE_HDR = re.compile(r"^\s*MPI Routine\s+#calls\s+avg\.?\s*bytes\s+time\(sec\)\s*$")
_ROUTINE_ROW = re.compile(rf"^\s*(MPI_\w+)\s+(\d+)\s+({_NUM})\s+({_NUM})\s*$")
_SIZE_HDR = re.compile(r"^\s*(MPI_\w+)\s+#calls\s+avg\.?\s*bytes\s+time\(sec\)\s*$")
_SIZE_ROW = re.compile(rf"^\s+(\d+)\s+({_NUM})\s+({_NUM})\s*$")
_ROLE = re.compile(
    r"^\s*MPI task (\d+) of (\d+) had the (minimum|median|maximum) communication time\.?\s*$"
)
_ASSIGN = re.compile(rf"^\s*([A-Za-z][A-Za-z /()-]*?)\s*=\s*({_NUM})\s*([A-Za-z]*)\.?\s*$")
_LARGEST = re.compile(
    rf"^\s*Rank (\d+) reported the largest (memory utilization|elapsed time)\s*:\s*({_NUM})"
    r"\s*([A-Za-z]*)\.?\s*$"
)
_SIZES_TITLE = re.compile(r"^\s*Message size distributions?\s*:?\s*$")
_SUMMARY_TITLE = re.compile(r"^\s*(Communication )?[Ss]ummary for all tasks\s*:?\s*$")
_EXTREME = re.compile(
    rf"^\s*(minimum|median|maximum)\s+communication time\s*=\s*({_NUM})\s*\w*\s+"
    r"for task\s+(\d+)\s*$"
)
_TASKS_TITLE = re.compile(r"^\s*MPI timing summary for all (ranks|tasks)\s*:?\s*$")
_TASK_HDR = re.compile(r"^\s*taskid\s+\S")
_UNKNOWN_TITLE = re.compile(r"^\s*[A-Za-z][^=]*:\s*$")

_TOTAL_KEYS = {
    "total communication time": "comm_s",
    "total elapsed time": "elapsed_s",
    "user cpu time": "user_s",
    "system time": "system_s",
    "max resident set size": "mem_mb",
}
_MEM_FACTORS = {  # to MiB
    "": 1.0,
    "mb": 1.0,
    "mbytes": 1.0,
    "mib": 1.0,
    "kb": 1 / 1024,
    "kbytes": 1 / 1024,
    "kib": 1 / 1024,
    "gb": 1024.0,
    "gbytes": 1024.0,
    "gib": 1024.0,
}
_TASK_COLUMNS = {
    "taskid": "taskid",
    "hostname": "host",
    "host": "host",
    "cpu": "cpu",
    "comm(s)": "comm_s",
    "elapsed(s)": "elapsed_s",
    "user(s)": "user_s",
    "system(s)": "system_s",
    "switches": "switches",
}

# Columns every mpitrace task table has; without them its time findings are unknown.
_TASK_TIME_COLUMNS = ("comm(s)", "elapsed(s)")


class _Parser:
    """Line-by-line state machine over one file's text.

    :meth:`line` sends each line to a small handler: blank lines, the first line and rules
    (``-----``) first; then section titles and one-line facts (:attr:`anywhere`), which mean the
    same in any section; then the row reader of the table the parser is in (:attr:`table_rows`);
    then ``name = value`` lines and titles of sections this reader does not know
    (:attr:`between_tables`).
    """

    def __init__(self, text: str, source: str, jobid: str) -> None:
        self.source = source
        self.jobid = jobid
        self.text = text
        self.section = "start"
        self.prof: ProfileFile | None = None
        self.size_routine: str | None = None
        self.task_header: list[str] | None = None
        self.seen: set[str] = set()
        self.closed: set[str] = set()
        self.routine_names: set[str] = set()
        self.routine_seps = 0
        self._task_mem_factor = 1.0
        # tried in this order; the first pattern that matches takes the line
        self.anywhere: list[tuple[re.Pattern[str], _Handler]] = [
            (_DATA_FOR, self.second_header),
            (_TIMES, self.times_title),
            (_ROUTINE_HDR, self.routine_table_title),
            (_SIZES_TITLE, self.sizes_title),
            (_SUMMARY_TITLE, self.summary_title),
            (_TASKS_TITLE, self.tasks_title),
            (_ROLE, self.role),
            (_LARGEST, self.largest),
            (_EXTREME, self.extreme),
        ]
        self.table_rows: dict[str, Callable[[int, str], None]] = {
            "routines": self.routine_row,
            "sizes": self.size_line,
            "tasks": self.task_line,
        }
        self.between_tables: list[tuple[re.Pattern[str], _Handler]] = [
            (_ASSIGN, self.assignment),
            (_UNKNOWN_TITLE, self.unknown_title),
        ]

    def fail(self, lineno: int, what: str, line: str) -> MpiTraceError:
        shown = line if len(line) <= 80 else line[:77] + "..."
        return MpiTraceError(f"{self.source}: line {lineno}: {what}: {shown!r}")

    def warn(self, message: str) -> None:
        assert self.prof is not None
        self.prof.warnings.append(message)

    def run(self) -> ProfileFile:
        lines = self.text.split("\n")
        cut_line = None
        if lines and lines[-1] == "":
            lines.pop()
        elif lines:
            cut_line = len(lines)
            lines.pop()  # no newline at the end: the last line may be cut short
        for lineno, raw in enumerate(lines, start=1):
            self.line(lineno, raw.rstrip("\r"))
        if self.prof is None:
            if cut_line is not None and cut_line == 1:
                raise MpiTraceError(
                    f"{self.source}: line 1: file ends inside the first line; not an mpitrace "
                    "profile (expected 'Data for MPI rank R of N:')"
                )
            raise MpiTraceError(
                f"{self.source}: line 1: empty file, not an mpitrace profile "
                "(expected 'Data for MPI rank R of N:')"
            )
        if cut_line is not None:
            self.warn(f"line {cut_line} is cut short (no newline at the end of the file): ignored")
            self.prof.complete = False
        self.finish()
        return self.prof

    def line(self, lineno: int, line: str) -> None:
        bad = next((ch for ch in line if (ord(ch) < 32 and ch != "\t") or ord(ch) == 127), None)
        if bad is not None:
            raise self.fail(lineno, f"control character {bad!r} in text", line)
        if not line.strip():
            self.blank_line()
        elif self.prof is None:
            self.first_line(lineno, line)
        elif _SEP.match(line):
            self.rule()
        elif not self.dispatch(self.anywhere, lineno, line):
            table_row = self.table_rows.get(self.section)
            if table_row is not None:
                table_row(lineno, line)
            elif not self.dispatch(self.between_tables, lineno, line):
                self.stray_line(lineno, line)

    @staticmethod
    def dispatch(table: list[tuple[re.Pattern[str], _Handler]], lineno: int, line: str) -> bool:
        """Give the line to the handler of the first pattern that matches; False if none."""
        for pattern, handler in table:
            if match := pattern.match(line):
                handler(lineno, line, match)
                return True
        return False

    # -- lines that are not section content --

    def blank_line(self) -> None:
        # a blank line ends the task table, once its header is read
        if self.section == "tasks" and self.task_header is not None and self.prof:
            self.section = "after_tasks"

    def first_line(self, lineno: int, line: str) -> None:
        match = _DATA_FOR.match(line)
        if match is None:
            raise self.fail(
                lineno, "not an mpitrace profile (expected 'Data for MPI rank R of N:')", line
            )
        rank, ntasks = int(match[1]), int(match[2])
        if ntasks < 1 or rank >= ntasks:
            raise self.fail(lineno, f"rank {rank} of {ntasks} is impossible", line)
        self.prof = ProfileFile(path=self.source, jobid=self.jobid, rank=rank, ntasks=ntasks)
        self.section = "header"

    def rule(self) -> None:
        if self.section == "routines":
            # the first line under the header is a rule too; the next one ends the table
            if "routine_rows" in self.seen or self.routine_seps >= 1:
                self.closed.add("routines")
                self.section = "after_routines"
            self.routine_seps += 1
        elif self.section == "sizes" and "sizes_started" in self.seen:
            self.closed.add("sizes")
            self.section = "after_sizes"
        elif self.section == "sizes":
            self.seen.add("sizes_started")  # the line under the title, if any

    def stray_line(self, lineno: int, line: str) -> None:
        if self.section != "unknown":  # lines of a skipped section are skipped with it
            raise self.fail(lineno, f"unrecognised line ({self.section.replace('_', ' ')})", line)

    # -- section titles and one-line facts, valid anywhere after the header --

    def second_header(self, lineno: int, line: str, match: re.Match[str]) -> None:
        raise self.fail(lineno, "a second 'Data for MPI rank' header (files joined?)", line)

    def times_title(self, lineno: int, line: str, match: re.Match[str]) -> None:
        assert self.prof is not None
        self.prof.layout = "alcf" if match[1] else "current"

    def routine_table_title(self, lineno: int, line: str, match: re.Match[str]) -> None:
        if "routines" in self.seen:
            raise self.fail(lineno, "a second routine table", line)
        self.enter("routines")

    def sizes_title(self, lineno: int, line: str, match: re.Match[str]) -> None:
        self.enter("sizes")

    def summary_title(self, lineno: int, line: str, match: re.Match[str]) -> None:
        self.enter("summary")

    def tasks_title(self, lineno: int, line: str, match: re.Match[str]) -> None:
        self.enter("tasks")
        self.task_header = None

    def enter(self, section: str) -> None:
        self.seen.add(section)
        self.section = section

    def role(self, lineno: int, line: str, match: re.Match[str]) -> None:
        prof = self.prof
        assert prof is not None
        task, of, role = int(match[1]), int(match[2]), match[3]
        if task != prof.rank or of != prof.ntasks:
            raise self.fail(
                lineno,
                f"names task {task} of {of} in the file of rank {prof.rank} of {prof.ntasks}",
                line,
            )
        if role not in prof.roles:
            prof.roles.append(role)

    def largest(self, lineno: int, line: str, match: re.Match[str]) -> None:
        assert self.prof is not None
        rank, what, value, unit = int(match[1]), match[2], float(match[3]), match[4]
        if what.startswith("memory"):
            self.prof.summary["largest_mem_rank"] = rank
            self.prof.summary["largest_mem_mb"] = value * self.mem_factor(lineno, unit, line)
        else:
            self.prof.summary["largest_elapsed_rank"] = rank
            self.prof.summary["largest_elapsed_s"] = value

    def extreme(self, lineno: int, line: str, match: re.Match[str]) -> None:
        assert self.prof is not None
        role, value, task = match[1], float(match[2]), int(match[3])
        self.prof.summary[f"{role}_comm_s"] = value
        self.prof.summary[f"{role}_task"] = task

    # -- rows of the tables --

    def routine_row(self, lineno: int, line: str) -> None:
        assert self.prof is not None
        match = _ROUTINE_ROW.match(line)
        if match is None:
            raise self.fail(lineno, "not a row of the routine table", line)
        name = match[1]
        if name in self.routine_names:
            raise self.fail(lineno, f"{name} listed twice in the routine table", line)
        self.routine_names.add(name)
        self.seen.add("routine_rows")
        self.prof.routines.append((name, int(match[2]), float(match[3]), float(match[4])))

    def size_line(self, lineno: int, line: str) -> None:
        assert self.prof is not None
        self.seen.add("sizes_started")
        if match := _SIZE_HDR.match(line):
            self.size_routine = match[1]
        elif match := _SIZE_ROW.match(line):
            if self.size_routine is None:
                raise self.fail(lineno, "message-size row before any routine name", line)
            self.prof.message_sizes.append(
                (self.size_routine, int(match[1]), float(match[2]), float(match[3]))
            )
        else:
            raise self.fail(lineno, "not a row of the message size distributions", line)

    def task_line(self, lineno: int, line: str) -> None:
        if self.task_header is None:
            self.task_header = self.task_table_header(lineno, line)
        else:
            self.task_row(lineno, line, self.task_header)

    def task_table_header(self, lineno: int, line: str) -> list[str]:
        if not _TASK_HDR.match(line):
            raise self.fail(lineno, "expected the task table header ('taskid ...')", line)
        header = []
        for token in line.split():
            low = token.lower()
            if low in _TASK_COLUMNS:
                header.append(_TASK_COLUMNS[low])
            elif match := re.fullmatch(r"size\((\w+)\)", low):
                self._task_mem_factor = self.mem_factor(lineno, match[1], line)
                header.append("mem_mb")
            else:
                header.append(re.sub(r"\W+", "_", low).strip("_"))
        missing = [name for name in _TASK_TIME_COLUMNS if _TASK_COLUMNS[name] not in header]
        if missing:  # e.g. a header cut or mangled: its columns' values are unknown, not 0
            self.warn(
                f"line {lineno}: the task table has no {' or '.join(missing)} column: "
                "those values are unknown (NaN)"
            )
        return header

    def task_row(self, lineno: int, line: str, header: list[str]) -> None:
        assert self.prof is not None
        tokens = line.split()
        if len(tokens) != len(header):
            raise self.fail(
                lineno, f"task table row has {len(tokens)} fields, the header {len(header)}", line
            )
        row: dict[str, object] = {}
        try:
            for name, token in zip(header, tokens, strict=True):
                if name == "host":
                    row[name] = token
                elif name in ("taskid", "cpu"):
                    row[name] = int(token)
                elif name == "switches":
                    row[name] = int(float(token))
                elif name == "mem_mb":
                    row[name] = float(token) * self._task_mem_factor
                else:
                    row[name] = float(token)
        except ValueError:
            raise self.fail(
                lineno, "task table row with a field that is not a number", line
            ) from None
        if not 0 <= int(row.get("taskid", -1)) < self.prof.ntasks:  # type: ignore[arg-type]
            raise self.fail(lineno, f"task id outside 0..{self.prof.ntasks - 1}", line)
        self.prof.tasks.append(row)

    # -- lines between the tables --

    def assignment(self, lineno: int, line: str, match: re.Match[str]) -> None:
        assert self.prof is not None
        key = " ".join(match[1].split()).lower()
        value, unit = float(match[2]), match[3]
        if key in _TOTAL_KEYS:
            column = _TOTAL_KEYS[key]
            factor = self.mem_factor(lineno, unit, line) if column == "mem_mb" else 1.0
            self.prof.totals[column] = value * factor
        else:
            self.prof.extra[key] = value

    def unknown_title(self, lineno: int, line: str, match: re.Match[str]) -> None:
        self.warn(f"line {lineno}: skipped a section this reader does not know: {line.strip()!r}")
        self.section = "unknown"

    def mem_factor(self, lineno: int, unit: str, line: str) -> float:
        factor = _MEM_FACTORS.get(unit.lower())
        if factor is None:
            raise self.fail(lineno, f"unknown memory unit {unit!r}", line)
        return factor

    def finish(self) -> None:
        prof = self.prof
        assert prof is not None
        missing = []
        if "routines" not in self.seen:
            missing.append("the routine table")
        elif "routines" not in self.closed:
            missing.append("the end of the routine table")
        if "elapsed_s" not in prof.totals:
            missing.append("the totals (communication and elapsed time)")
        if "sizes" not in self.seen:
            missing.append("the message size distributions")
        elif "sizes" not in self.closed:
            missing.append("the end of the message size distributions")
        wants_tasks = prof.rank == 0 or "summary" in self.seen or "tasks" in self.seen
        if wants_tasks and len(prof.tasks) < prof.ntasks:
            missing.append(
                f"the all-task table ({len(prof.tasks)} of {prof.ntasks} rows)"
                if prof.tasks
                else "the all-task summary"
            )
        if missing:
            prof.complete = False
            self.warn("file stops early; missing " + ", ".join(missing))
        if prof.layout == "unknown" and "routines" in self.seen:
            self.warn("no 'Times ... from MPI_Init() to MPI_Finalize().' line; layout unknown")


def parse_mpitrace(text: str, *, source: str = "<text>", jobid: str = "") -> ProfileFile:
    """Parse the text of one profile file.

    Args:
        text: the file's content.
        source: name used in error messages and warnings (the path).
        jobid: job id to record (taken from the file name by :func:`read_mpitrace_file`).

    Returns:
        The :class:`ProfileFile`. Its ``warnings`` say what is missing when it stops early;
        they are not issued as Python warnings here.

    Raises:
        MpiTraceError: not an mpitrace profile, or a line that fits no section (the message
            names ``source`` and the line).
    """
    return _Parser(text, source, jobid).run()


def _jobid_and_rank(path: Path) -> tuple[str, int | None]:
    match = FILE_NAME.match(path.name)
    if match is None:
        return path.name, None
    return match["jobid"], int(match["rank"])


def parse_mpitrace_bytes(data: bytes, *, source: str = "<bytes>", jobid: str = "") -> ProfileFile:
    """Parse the bytes of one profile file (UTF-8 text).

    Args:
        data: the file's content.
        source: name used in error messages and warnings (the path).
        jobid: job id to record.

    Returns:
        The :class:`ProfileFile` (warnings in its ``warnings``, not issued).

    Raises:
        MpiTraceError: not UTF-8 text (names the line and byte offset), or as
            :func:`parse_mpitrace`.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = data.count(b"\n", 0, exc.start) + 1
        raise MpiTraceError(
            f"{source}: line {lineno} (byte {exc.start}): not UTF-8 text; not an mpitrace profile"
        ) from None
    return parse_mpitrace(text, source=source, jobid=jobid)


def read_mpitrace_file(path: str | Path) -> ProfileFile:
    """Read one ``mpi_profile.<jobid>.<rank>`` file.

    Args:
        path: the file.

    Returns:
        The :class:`ProfileFile`; its warnings are also issued as :class:`MpiTraceWarning`.

    Raises:
        FileNotFoundError: no such file.
        MpiTraceError: as :func:`parse_mpitrace_bytes`.
    """
    path = Path(path)
    jobid, name_rank = _jobid_and_rank(path)
    prof = parse_mpitrace_bytes(path.read_bytes(), source=str(path), jobid=jobid)
    if name_rank is not None and name_rank != prof.rank:
        prof.warnings.append(f"the file name says rank {name_rank}, the file rank {prof.rank}")
    for message in prof.warnings:
        warnings.warn(f"{path}: {message}", MpiTraceWarning, stacklevel=2)
    return prof
