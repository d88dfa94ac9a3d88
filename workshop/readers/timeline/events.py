"""Event records as columns, the form both parsers produce and the DataFrames are built from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FIELDS = ("off", "ph", "name", "ts", "pid", "dtype", "shape")
DTYPES = (np.int64, np.uint8, np.int32, np.int64, np.int32, np.int32, np.int32)
SHORTEST_RECORD_BYTES = 31  # '{"ph": "E", "ts": 1, "pid": 1}' and its ','


@dataclass
class Events:
    """Columns of event records (``M`` records are kept apart)."""

    off: np.ndarray  # byte offset, int64
    ph: np.ndarray  # phase letter, uint8
    name: np.ndarray  # vocabulary code, int32 (-1: none)
    ts: np.ndarray  # int64
    pid: np.ndarray  # int32 (-1: none)
    dtype: np.ndarray  # vocabulary code, int32 (-1: none)
    shape: np.ndarray  # vocabulary code, int32 (-1: none)

    @staticmethod
    def empty() -> Events:
        return Events(*(np.zeros(0, dtype=t) for t in DTYPES))

    @staticmethod
    def from_rows(rows: list[tuple[int, int, int, int, int, int, int]]) -> Events:
        """Events from ``(off, ph, name, ts, pid, dtype, shape)`` tuples."""
        if not rows:
            return Events.empty()
        cols = zip(*rows, strict=True)
        return Events(*(np.asarray(c, dtype=t) for c, t in zip(cols, DTYPES, strict=True)))

    def take(self, idx: np.ndarray) -> Events:
        return Events(*(getattr(self, f)[idx] for f in FIELDS))


def concat(parts: list[Events]) -> Events:
    if not parts:
        return Events.empty()
    if len(parts) == 1:
        return parts[0]
    return Events(*(np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS))


class Store:
    """Event columns filled in place: allocated once for the most records the data can hold,
    so only the pages written count in memory and no chunk results are held twice."""

    def __init__(self, nbytes: int) -> None:
        capacity = nbytes // SHORTEST_RECORD_BYTES + 16
        self.cols = {f: np.empty(capacity, dtype=t) for f, t in zip(FIELDS, DTYPES, strict=True)}
        self.count = 0
        self.overflow: list[Events] = []

    def add(self, ev: Events) -> None:
        k = len(ev.off)
        if self.overflow or self.count + k > len(self.cols["off"]):
            self.overflow.append(ev)
            return
        for f in FIELDS:
            self.cols[f][self.count : self.count + k] = getattr(ev, f)
        self.count += k

    def events(self) -> Events:
        ev = Events(*(self.cols[f][: self.count] for f in FIELDS))
        return concat([ev, *self.overflow]) if self.overflow else ev

    def clear(self) -> None:
        """Empty the store, keeping its columns (what :meth:`events` gave views of is
        overwritten by the next :meth:`add`)."""
        self.count = 0
        self.overflow = []
