"""What a read returns: :class:`Timeline`, and the error and warning types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only annotations: `workshop timeline summary` never loads pandas
    import pandas as pd

DTYPE_BYTES = {
    "uint8": 1,
    "int8": 1,
    "uint16": 2,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "bool": 1,
}
"""Bytes per element of the dtype names Horovod writes in an op's closing ``E`` record."""


class TimelineFormatError(ValueError):
    """The data is not a Horovod / Chrome trace timeline.

    Attributes:
        path: the file (or the ``source`` given to :func:`parse_timeline`).
        offset: byte offset of the problem in the (decompressed) data.
    """

    def __init__(self, path: str, offset: int, message: str) -> None:
        self.path = path
        self.offset = offset
        super().__init__(f"{path}: byte {offset}: {message}")


class TimelineWarning(UserWarning):
    """A timeline was read, but not whole: cut, damaged ranges skipped, or unbalanced."""


@dataclass
class Timeline:
    """A parsed Horovod timeline.

    Attributes:
        spans: one row per ``B``/``E`` pair (unclosed ones included), in file order of the
            ``B``: ``tensor`` (category), ``pid``, ``op`` (ALLREDUCE, BROADCAST ...; for an
            activity the op it belongs to), ``kind`` (``negotiate`` / ``op`` / ``activity``),
            ``name`` (NEGOTIATE_ALLREDUCE, ALLREDUCE, MEMCPY_IN_FUSION_BUFFER ...),
            ``start_us``, ``end_us``, ``dur_us`` (microseconds since Horovod's timeline start),
            ``depth`` (0 negotiation or op, 1 activity), ``closed`` (False: no ``E`` in the
            file; ``end_us`` is then the last timestamp of the file), ``dtype`` and ``shape``
            (op spans, from the closing ``E``), ``seq`` and ``end_seq`` (event index of the
            ``B`` and the ``E``; ``end_seq`` is -1 when unclosed).
        ticks: one row per rank readiness tick: ``tensor``, ``pid``, ``op``, ``negotiation``
            (0-based index of the tensor's negotiation; -1 before its first one), ``rank``,
            ``ts_us``, ``lateness_us`` (after the first tick of the same negotiation), ``seq``.
        cycles: one row per ``CYCLE_START`` mark: ``cycle`` (0-based), ``start_us``, ``end_us``
            (the next mark, or the last timestamp), ``dur_us``, ``seq``.
        tensors: ``pid``, ``tensor``, ``sort_index``.
        metadata: ``path``, ``bytes``, ``events`` (records read, metadata included), ``form``
            (``array`` / ``traceEvents``), ``closed_array`` (True for Horovod >= 0.20.1 files),
            ``truncated``, ``truncated_at`` (byte offset or None), ``skipped`` (list of
            ``(offset, length)`` ranges that could not be read), ``orphan_ends``, ``unclosed``,
            ``ignored_events`` (other phases), ``start_time_since_epoch_us``, ``first_ts_us``,
            ``last_ts_us``, ``warnings`` (list of str).
    """

    spans: pd.DataFrame
    ticks: pd.DataFrame
    cycles: pd.DataFrame
    tensors: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str | None:
        """The file read, if any."""
        return self.metadata.get("path")

    @property
    def truncated(self) -> bool:
        """True when the data ended inside a record (a killed or still running job)."""
        return bool(self.metadata.get("truncated"))

    @property
    def warnings(self) -> list[str]:
        """Every warning raised while reading."""
        return list(self.metadata.get("warnings", []))

    @property
    def span_us(self) -> int:
        """Microseconds between the first and the last timestamp (0 when empty)."""
        first, last = self.metadata.get("first_ts_us"), self.metadata.get("last_ts_us")
        return 0 if first is None or last is None else int(last - first)

    def __repr__(self) -> str:
        md = self.metadata
        state = ", truncated" if self.truncated else ""
        return (
            f"<Timeline {md.get('path') or ''}: {md.get('events', 0)} events, "
            f"{len(self.tensors)} tensors, {len(self.spans)} spans, {len(self.ticks)} ticks, "
            f"{len(self.cycles)} cycles, {self.span_us / 1e6:.3f} s{state}>"
        )
