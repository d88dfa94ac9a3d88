"""The fast path: records in Horovod's exact layout, checked and decoded column-wise.

Horovod writes every event record with the same field order and spacing
(``horovod/common/timeline.cc``)::

    {"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 1234, "pid": 5}
    {"ph": "E", "ts": 1240, "pid": 5}
    {"ph": "E", "ts": 1290, "pid": 5, "args": {"dtype": "float32", "shape": "[64, 10]"}}
    {"ph": "X", "name": "1", "ts": 1236, "pid": 5, "dur": 0}
    {"ph": "i", "name": "CYCLE_START", "ts": 1200, "s": "g"}

so a record is read by testing fixed byte strings at offsets that follow from the lengths of
the strings and numbers before them, for all records of a chunk at once (:mod:`.words`). A
record that deviates anywhere is left out here; the gap it leaves goes to the tolerant parser.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workshop.readers.timeline.events import Events
from workshop.readers.timeline.vocab import HashedStrings, Vocab, hash_strings
from workshop.readers.timeline.words import Words, decimals, low_bytes, quoted_strings

BATCH = 1 << 17  # record candidates per vectorised batch


class Literal:
    """A fixed byte string of the layout, tested at many offsets 8 bytes at a time."""

    def __init__(self, text: bytes) -> None:
        self.text = text
        if len(text) >= 8:  # whole words; the last one overlaps the one before it
            offsets = sorted({*range(0, len(text) - 7, 8), len(text) - 8})
            self.parts = [
                (k, np.uint64(int.from_bytes(text[k : k + 8], "little")), None) for k in offsets
            ]
        else:
            word = np.uint64(int.from_bytes(text, "little"))
            self.parts = [(0, word, low_bytes(len(text)))]

    def __len__(self) -> int:
        return len(self.text)

    def at(self, words: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """True where the data at ``pos`` starts with this string: the XOR of each word with
        the text's, OR-ed together, is zero (a view from offset k gathers without ``pos + k``)."""
        diff = None
        for k, word, mask in self.parts:
            w = words[k:][pos] if k else words[pos]
            w ^= word
            if mask is not None:
                w &= mask
            diff = w if diff is None else np.bitwise_or(diff, w, out=diff)
        return diff == 0

    def starts(self, w: np.ndarray) -> np.ndarray:
        """True where the gathered words ``w`` start with this string (of <= 8 bytes)."""
        ((_, word, mask),) = self.parts
        return (w if mask is None else w & mask) == word


EVENT_START = Literal(b'{"ph": "')  # then the phase letter
META_START = Literal(b'{"name":')  # an 'M' record (read by the tolerant parser)
E_TS = Literal(b'", "ts": ')  # after 'E': E records have no name
NAME = Literal(b'", "name": "')  # after the other phase letters
TS = Literal(b', "ts": ')  # after the name's closing quote
PID = Literal(b', "pid": ')
INSTANT_SCOPE = Literal(b', "s": "')  # then the scope letter
INSTANT_END = Literal(b'"}')
DUR = Literal(b', "dur": ')
ARGS_DTYPE = Literal(b', "args": {"dtype": "')
SHAPE = Literal(b'", "shape": "')  # from the dtype's closing quote
ARGS_END = Literal(b'"}}')  # from the shape's closing quote
# the cycle marks of HOROVOD_TIMELINE_MARK_CYCLES=1, often most of the records, are tested as
# one string from their phase letter 'i' to their timestamp (4 words) instead of being decoded
# field by field
CYCLE_MARK_NAME = b"CYCLE_START"
CYCLE_MARK = Literal(b'", "name": "' + CYCLE_MARK_NAME + b'", "ts": ')  # after the 'i'
CYCLE_MARK_NAME_AT = len(b'", "name": "')
TS_WORDS = 2  # timestamps up to 15 digits
SMALL_INT_WORDS = 1  # pids and durations up to 7 digits
LONGEST_RECORD_CHECKED = 384  # no test reads further than this from a record's start


STRING_FIELDS = ("dtype", "shape", "name")  # in the order their codes are given


@dataclass
class Found:
    """What a worker found in a chunk. The events' string columns hold batch-local codes
    into ``strings`` until :func:`give_codes` replaces them."""

    meta: np.ndarray  # offsets of metadata record candidates
    events: list[Events]  # per batch, in Horovod's layout
    ends: list[np.ndarray]  # their end offsets
    strings: list[dict[str, HashedStrings]]  # per batch and string field


def find_records(sc: Words, lo: int, hi: int) -> Found:
    """The records that start in ``buf[lo:hi]`` (a worker's part of the scan: numpy releases
    the GIL, so several run at once). ``hi`` is at least ``LONGEST_RECORD_CHECKED`` bytes before
    the end of the data."""
    cand = np.flatnonzero(sc.bytes[lo:hi] == ord("{")) + lo
    words = sc.words[cand]
    found = Found(cand[META_START.starts(words)], [], [], [])
    starts = cand[EVENT_START.starts(words)]
    del cand, words
    for i in range(0, len(starts), BATCH):
        r = _records(sc, starts[i : i + BATCH])
        ev, end = r.events()
        found.events.append(ev)
        found.ends.append(end)
        found.strings.append(r.strings)
    return found


def give_codes(found: Found, vocab: Vocab) -> tuple[list[Events], list[np.ndarray]]:
    """Replace the batch-local string codes with the vocabulary's (in the reading thread, in
    file order). A string that collides with an earlier batch's (never seen) drops its record:
    the tolerant parser reads it."""
    events, ends = [], []
    for ev, end, strings in zip(found.events, found.ends, found.strings, strict=True):
        lost = np.zeros(len(ev.off), dtype=bool)
        for field in STRING_FIELDS:
            if field not in strings:
                continue
            col = getattr(ev, field)
            has = np.flatnonzero(col >= 0)
            col[has] = vocab.codes_of(strings[field])[col[has]]
            lost[has] |= col[has] < 0
        if lost.any():
            keep = np.flatnonzero(~lost)
            ev, end = ev.take(keep), end[keep]
        events.append(ev)
        ends.append(end)
    return events, ends


class _Batch:
    """Records being decoded: their starts, the fields decoded so far, and which still follow
    the layout (``ok``)."""

    def __init__(self, sc: Words, start: np.ndarray) -> None:
        n = len(start)
        self.sc = sc
        self.strings: dict[str, HashedStrings] = {}
        self.W, self.B = sc.words, sc.bytes
        self.start = start
        self.ph = self.B[start + len(EVENT_START)]
        self.ok = np.ones(n, dtype=bool)
        self.ts = np.zeros(n, dtype=np.int64)
        self.pid = np.full(n, -1, dtype=np.int32)
        self.name = np.full(n, -1, dtype=np.int32)
        self.dtype = np.full(n, -1, dtype=np.int32)
        self.shape = np.full(n, -1, dtype=np.int32)
        self.end = np.zeros(n, dtype=np.int64)

    def encode(
        self, field: str, start: np.ndarray, length: np.ndarray, words: list[np.ndarray]
    ) -> np.ndarray:
        """Batch-local codes of the strings of ``field`` at ``start`` (-1: a collision)."""
        codes, self.strings[field] = hash_strings(self.sc, start, length, words)
        return codes

    def encode_one(self, field: str, start: int, length: int) -> int:
        """Batch-local code of the string at ``start`` (after :meth:`encode` of ``field``)."""
        at = np.array([start], dtype=np.int64)
        _, words = quoted_strings(self.W, at)
        _, one = hash_strings(self.sc, at, np.array([length], dtype=np.int64), words)
        known = self.strings[field]
        self.strings[field] = HashedStrings(
            known.find + one.find, np.concatenate([known.check, one.check]), known.raw + one.raw
        )
        return len(known.find)

    def events(self) -> tuple[Events, np.ndarray]:
        """The records still ``ok``, and their end offsets."""
        ev = Events(self.start, self.ph, self.name, self.ts, self.pid, self.dtype, self.shape)
        keep = np.flatnonzero(self.ok)
        if len(keep) == len(self.ok):
            return ev, self.end
        return ev.take(keep), self.end[keep]


def _records(sc: Words, start: np.ndarray) -> _Batch:
    """Decode the records starting at ``start`` (each begins with ``EVENT_START``); those that
    follow Horovod's layout exactly are left ``ok``."""
    r = _Batch(sc, start)
    after_phase = start + len(EVENT_START) + 1
    is_e = r.ph == ord("E")
    is_instant = r.ph == ord("i")
    ts_at = np.empty(len(start), dtype=np.int64)
    ie = np.flatnonzero(is_e)
    r.ok[ie] = E_TS.at(r.W, after_phase[ie])
    ts_at[ie] = after_phase[ie] + len(E_TS)
    instants = np.flatnonzero(is_instant)
    marks = instants[CYCLE_MARK.at(r.W, after_phase[instants])]
    ts_at[marks] = after_phase[marks] + len(CYCLE_MARK)
    is_named = ~is_e
    is_named[marks] = False
    named = np.flatnonzero(is_named)
    name_at, name_len, name_words = _name(r, named, after_phase[named])
    ts_at[named] = name_at + np.maximum(name_len, 0) + 1 + len(TS)
    r.ts, ndigits = decimals(r.W, ts_at, TS_WORDS)
    r.ok &= ndigits > 0
    after_ts = ts_at + ndigits
    _instant_tail(r, np.flatnonzero(is_instant), after_ts)
    _pid_tail(r, np.flatnonzero(~is_instant), after_ts)
    good = np.flatnonzero(r.ok[named])
    r.name[named[good]] = r.encode(
        "name", name_at[good], name_len[good], [x[good] for x in name_words]
    )
    if len(marks):
        name_at = int(after_phase[marks[0]]) + CYCLE_MARK_NAME_AT
        r.name[marks] = r.encode_one("name", name_at, len(CYCLE_MARK_NAME))
    # a hash collision (never seen, possible in principle) sends the record to the slow path
    r.ok &= is_e | (r.name >= 0)
    return r


def _name(
    r: _Batch, rows: np.ndarray, after_phase: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The name of named records and the ', "ts": ' after it: (start, length, words)."""
    at = after_phase + len(NAME)
    length, words = quoted_strings(r.W, at)
    ok = NAME.at(r.W, after_phase) & (length >= 0)
    ok &= TS.at(r.W, at + np.maximum(length, 0) + 1)
    r.ok[rows] &= ok
    return at, length, words


def _instant_tail(r: _Batch, rows: np.ndarray, after_ts: np.ndarray) -> None:
    """', "s": "g"}' after the timestamp of an instant."""
    at = after_ts[rows]
    r.ok[rows] &= INSTANT_SCOPE.at(r.W, at) & INSTANT_END.at(r.W, at + len(INSTANT_SCOPE) + 1)
    r.end[rows] = at + len(INSTANT_SCOPE) + 1 + len(INSTANT_END)


def _pid_tail(r: _Batch, rows: np.ndarray, after_ts: np.ndarray) -> None:
    """', "pid": N' then '}', ', "dur": N}' (ticks) or ', "args": {...}}' (an op's end)."""
    at = after_ts[rows]
    ok = PID.at(r.W, at)
    pid, ndigits = decimals(r.W, at + len(PID), SMALL_INT_WORDS)
    ok &= ndigits > 0
    r.pid[rows] = pid
    after_pid = at + len(PID) + ndigits
    r.end[rows] = after_pid + 1
    more = np.flatnonzero(r.B[after_pid] != ord("}"))
    if len(more):
        ok[more] &= _dur_or_args(r, rows[more], after_pid[more])
    r.ok[rows] &= ok


def _dur_or_args(r: _Batch, rows: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Decode ', "dur": N}' or ', "args": {"dtype": "D", "shape": "S"}}' at ``at``; True
    where one of them is there."""
    is_dur = DUR.at(r.W, at)
    ok = is_dur.copy()
    idur = np.flatnonzero(is_dur)
    dur_at = at[idur] + len(DUR)
    _, ndigits = decimals(r.W, dur_at, SMALL_INT_WORDS)
    ok[idur] &= (ndigits > 0) & (r.B[dur_at + ndigits] == ord("}"))
    r.end[rows[idur]] = dur_at + ndigits + 1

    ia = np.flatnonzero(~is_dur & ARGS_DTYPE.at(r.W, at))
    dtype_at = at[ia] + len(ARGS_DTYPE)
    dtype_len, dtype_words = quoted_strings(r.W, dtype_at)
    dtype_end = dtype_at + np.maximum(dtype_len, 0)
    shape_at = dtype_end + len(SHAPE)
    shape_len, shape_words = quoted_strings(r.W, shape_at)
    shape_end = shape_at + np.maximum(shape_len, 0)
    args_ok = (dtype_len >= 0) & SHAPE.at(r.W, dtype_end) & (shape_len >= 0)
    args_ok &= ARGS_END.at(r.W, shape_end)
    r.end[rows[ia]] = shape_end + len(ARGS_END)
    g = np.flatnonzero(args_ok)
    if len(g):
        target = rows[ia[g]]
        r.dtype[target] = r.encode("dtype", dtype_at[g], dtype_len[g], [x[g] for x in dtype_words])
        r.shape[target] = r.encode("shape", shape_at[g], shape_len[g], [x[g] for x in shape_words])
        # a hash collision (never seen) sends the record to the slow path
        args_ok[g] &= (r.dtype[target] >= 0) & (r.shape[target] >= 0)
    ok[ia] = args_ok
    return ok
