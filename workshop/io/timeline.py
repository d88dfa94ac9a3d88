"""Read Horovod timelines (``HOROVOD_TIMELINE``) into DataFrames, and write repaired copies.

A Horovod timeline is a JSON array of Chrome trace events written by rank 0 only
(``horovod/common/timeline.cc``). Facts the reader is built on:

* Each tensor is a trace "process" (``pid``): two ``M`` records (``process_name`` with the tensor
  name, written **without JSON escaping**, and ``process_sort_index``). ``pid`` 0 carries
  ``start_time_since_epoch_in_micros``.
* Negotiation is a ``B``/``E`` pair named ``NEGOTIATE_<OP>``; each rank's readiness is an ``X``
  record with ``dur`` 0 whose name is the rank number (a "tick"). A response-cache hit is a
  ``B``/``E`` pair without ticks.
* Processing is a ``B`` named by the op (``ALLREDUCE``, ``BROADCAST`` ...) with activity
  ``B``/``E`` pairs nested inside (``MEMCPY_IN_FUSION_BUFFER``, ``GLOO_ALLREDUCE`` ...); the op's
  closing ``E`` may carry ``args`` ``dtype`` and ``shape``. ``E`` records have no name, and no
  record has a ``tid``.
* ``HOROVOD_TIMELINE_MARK_CYCLES=1`` adds ``{"ph": "i", "name": "CYCLE_START", "s": "g"}``.
* Up to Horovod 0.20.0 the array is never closed (records end in ``},``); since 0.20.1 the
  writer re-closes it after every record (``}]``). Most records sit on one long line.
* A killed job can leave a partial last record; ``hvd.start_timeline`` can leave orphan ``E``
  records at the start and unclosed ``B`` records at the end.

The fast path scans the buffer with numpy: record starts, Horovod's fixed field layout checked
and decoded column-wise with 8-byte word gathers, so a 1 GB file reads in seconds. Whatever does
not follow that exact layout (another writer, a damaged range, the last record of a cut file)
goes to a tolerant record-by-record JSON parser, so every readable record is kept and every
unreadable byte range is reported with its offset.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import threading
import warnings
import zlib
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "DTYPE_BYTES",
    "Timeline",
    "TimelineFormatError",
    "TimelineWarning",
    "parse_timeline",
    "read_timeline",
    "write_timeline",
]

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


# ---------------------------------------------------------------------------------------------
# Loading bytes


class _Source:
    """The data to read: a read-only mmap of a plain file, or bytes."""

    def __init__(self, data: Any, fh: Any = None) -> None:
        self.data = data
        self.fh = fh

    def release(self, upto: int) -> None:
        """Let the kernel drop mapped pages before ``upto`` (keeps peak memory near the data
        still needed, not the whole file)."""
        if isinstance(self.data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            upto -= upto % mmap.PAGESIZE
            if upto > 0:
                self.data.madvise(mmap.MADV_DONTNEED, 0, upto)

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            try:
                self.data.close()
            except BufferError:  # a numpy view is still alive; unmapped when collected
                pass
        if self.fh is not None:
            self.fh.close()


def _open(path: Path) -> tuple[_Source, list[str], int | None]:
    """Map a plain file, or decompress a gzip one.

    Returns:
        (source, problems, cut_at): ``cut_at`` is the decompressed length when the gzip stream
        is cut or damaged.
    """
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        data, problems, cut_at = _gunzip(path.read_bytes())
        return _Source(data), problems, cut_at
    if path.stat().st_size == 0:
        return _Source(b""), [], None
    fh = open(path, "rb")  # noqa: SIM115 - closed by _Source.close
    try:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (ValueError, OSError):
        data = fh.read()
        fh.close()
        return _Source(data), [], None
    return _Source(mm, fh), [], None


def _gunzip(raw: bytes) -> tuple[bytes, list[str], int | None]:
    """Decompress gzip data, keeping what can be read from a cut or damaged stream."""
    out = bytearray()
    problems: list[str] = []
    pos = 0
    while pos < len(raw):
        dec = zlib.decompressobj(wbits=31)
        try:
            out += dec.decompress(raw[pos:])
            out += dec.flush()
        except zlib.error as exc:
            problems.append(f"gzip data damaged after {len(out)} decompressed bytes ({exc})")
            return bytes(out), problems, len(out)
        if not dec.eof:
            problems.append(f"gzip data cut after {len(out)} decompressed bytes")
            return bytes(out), problems, len(out)
        rest = dec.unused_data
        pos = len(raw) - len(rest)
        if not rest.strip(b"\0"):
            break
    return bytes(out), problems, None


# ---------------------------------------------------------------------------------------------
# The fast scanner: Horovod's exact record layout, decoded column-wise


def _k(s: bytes) -> np.uint64:
    """Little-endian integer of up to 8 bytes, to compare with gathered 8-byte words."""
    return np.uint64(int.from_bytes(s, "little"))


K_PH = _k(b'{"ph": "')
K_META = _k(b'{"name":')
K_NAME7, K_NAME5 = _k(b'", "nam'), _k(b'e": "')  # '", "name": "' after the phase letter
K_TS_E7, K_TS_E2 = _k(b'", "ts"'), _k(b": ")  # '", "ts": ' after the 'E'
K_TS = _k(b', "ts": ')
K_PID = _k(b', "pid":')  # then ' '
K_DUR = _k(b', "dur":')  # then ' '
K_ARGS1, K_ARGS2 = _k(b', "args"'), _k(b": {")
K_DTYPE1, K_DTYPE2 = _k(b'"dtype":'), _k(b' "')
K_SHAPE1, K_SHAPE2 = _k(b'", "shap'), _k(b'e": "')  # '", "shape": "' from the dtype's quote
K_S = _k(b', "s": "')
K_ARGS_END = _k(b'"}}')
MASK = {k: np.uint64((1 << (8 * k)) - 1) for k in range(1, 8)}
ONES = np.uint64(0x0101010101010101)
HIGHS = np.uint64(0x8080808080808080)
QUOTES = np.uint64(0x2222222222222222)
ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
HASH_MULT = [
    np.uint64(0x9E3779B97F4A7C15),
    np.uint64(0xC2B2AE3D27D4EB4F),
    np.uint64(0x165667B19E3779F9),
    np.uint64(0x27D4EB2F165667C5),
]
STR_WORDS = 4  # names, dtypes and shapes up to 32 bytes take the fast path
FAST_MARGIN = 384  # records starting this close to the end go to the slow path
BATCH = 1 << 17  # record candidates per vectorised batch
CHUNK = 1 << 22  # bytes per scan task (cache-sized)
THREADS = min(2, os.cpu_count() or 1)  # scan workers

META_HEAD = re.compile(
    rb'\{"name": "(process_name|process_sort_index)", "ph": "M", "pid": (\d+), "args": \{'
)
META_NAME = re.compile(rb'"name": "(.*)"\Z', re.S)
META_INT = re.compile(rb'"(sort_index|start_time_since_epoch_in_micros)": ?(-?\d+)\Z')


class _Words:
    """Gather bytes and 8-byte little-endian words at arbitrary offsets of a buffer."""

    def __init__(self, buf: Any, n: int) -> None:
        self.n = n
        if n >= 8:
            self.bytes = np.frombuffer(buf, dtype=np.uint8, count=n)
            self.words = np.ndarray(shape=(n - 7,), dtype="<u8", buffer=buf, strides=(1,))
        else:
            padded = bytes(buf[:n]) + b"\0" * 8
            self.bytes = np.frombuffer(padded, dtype=np.uint8, count=n)
            self.words = np.ndarray(shape=(n + 1,), dtype="<u8", buffer=padded, strides=(1,))

    def w(self, pos: np.ndarray) -> np.ndarray:
        """Words at ``pos`` (clipped into the buffer; callers check bounds)."""
        return self.words[np.clip(pos, 0, len(self.words) - 1)]

    def b(self, pos: np.ndarray) -> np.ndarray:
        """Bytes at ``pos`` (clipped into the buffer; 0 for an empty buffer)."""
        if self.n == 0:
            return np.zeros(len(pos), dtype=np.uint8)
        return self.bytes[np.clip(pos, 0, self.n - 1)]


def _quote_at(words: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Length of the string at ``start`` up to its closing '"' (-1 if none within 32 bytes),
    and its 4 words with the bytes from the quote on set to 0 (a key for the vocabulary)."""
    n = len(start)
    length = np.full(n, -1, dtype=np.int64)
    masked = [np.zeros(n, dtype=np.uint64) for _ in range(STR_WORDS)]
    todo = np.arange(n)
    for k in range(STR_WORDS):
        if not len(todo):
            break
        w = words[start[todo] + 8 * k]
        x = w ^ QUOTES
        t = (x - ONES) & ~x & HIGHS  # the high bit of the first zero byte is exact
        hit = t != 0
        masked[k][todo] = w
        if hit.any():
            nbytes = _first_flagged_byte(t[hit])
            rows = todo[hit]
            length[rows] = 8 * k + nbytes
            masked[k][rows] = w[hit] & ((np.uint64(1) << (nbytes * 8).astype(np.uint64)) - ONES_1)
        todo = todo[~hit]
    return length, masked


ONES_1 = np.uint64(1)
SWAR_MASKS = (
    (np.uint64(0x0F0F0F0F0F0F0F0F), np.uint64(2561), np.uint64(8)),
    (np.uint64(0x00FF00FF00FF00FF), np.uint64(6553601), np.uint64(16)),
    (np.uint64(0x0000FFFF0000FFFF), np.uint64(42949672960001), np.uint64(32)),
)
POW10 = np.array([10**k for k in range(19)], dtype=np.int64)


def _swar8(w: np.ndarray, nd: np.ndarray) -> np.ndarray:
    """Value of the first ``nd`` (<= 8) ASCII digits of each little-endian word."""
    v = w << ((8 - np.minimum(nd, 8)) * 8).astype(np.uint64)  # digits to the high bytes
    v = np.where(nd >= 8, w, v)
    for mask, mult, shift in SWAR_MASKS:
        v = ((v & mask) * mult) >> shift
    return v.astype(np.int64)


def _first_flagged_byte(t: np.ndarray) -> np.ndarray:
    """Index of the lowest byte whose high bit is set in each word of ``t`` (only high bits
    set), 8 when none: the isolated lowest bit, 2**(8k+7), times 0x0001020304050607 puts k in
    the top byte."""
    low = (t & (~t + ONES_1)) >> SEVEN
    k = ((low * BYTE_INDEX) >> FIFTY_SIX).astype(np.int64)
    return np.where(t == 0, 8, k)


SEVEN, FIFTY_SIX = np.uint64(7), np.uint64(56)
BYTE_INDEX = np.uint64(0x0001020304050607)


def _digit_count(w: np.ndarray) -> np.ndarray:
    """Number of leading ASCII digits in each little-endian word (8 if all are digits)."""
    x = w ^ ASCII_ZEROS  # digits become bytes 0..9
    t = (((x & LOW7) + SEVENTY_SIX) | x) & HIGHS  # high bit set where the byte is no digit
    return _first_flagged_byte(t)


ASCII_ZEROS = np.uint64(0x3030303030303030)
LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
SEVENTY_SIX = np.uint64(0x7676767676767676)


def _digits(words: np.ndarray, pos: np.ndarray, nwords: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode unsigned decimal integers at ``pos`` (at most ``8 * nwords - 1`` digits).

    Returns:
        (value int64, number of digits; 0 = invalid).
    """
    w0 = words[pos]
    nd = _digit_count(w0)
    value = _swar8(w0, nd)
    if nwords == 1:
        return value, np.where(nd >= 8, 0, nd)
    long = np.flatnonzero(nd >= 8)
    if len(long):
        w1 = words[pos[long] + 8]
        rest = _digit_count(w1)
        value[long] = value[long] * POW10[rest] + _swar8(w1, rest)
        nd[long] = np.where(rest >= 8, 0, 8 + rest)
    return value, nd


class _Vocab:
    """Strings (names, dtypes, shapes) coded as small integers."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.by_string: dict[str, int] = {}
        self.by_hash: dict[int, int] = {}
        self.check: list[np.uint64] = []  # per code: second hash of its fast form
        self.lock = threading.Lock()

    def code_of(self, s: str) -> int:
        """Code of ``s`` (callers hold ``lock`` when workers may run)."""
        code = self.by_string.get(s)
        if code is None:
            code = len(self.strings)
            self.strings.append(s)
            self.by_string[s] = code
            self.check.append(np.uint64(0))
        return code

    def encode(self, sc: _Words, start: np.ndarray, length: np.ndarray,
               masked: list[np.ndarray]) -> np.ndarray:  # fmt: skip
        """Codes of ``buf[start:start+length]`` (strings as masked words).

        Two independent 64-bit hashes of the words: the first finds the code, the second
        confirms it; a mismatch (a collision, never seen) returns -1 for the slow path.
        """
        if not len(start):
            return np.zeros(0, dtype=np.int32)
        h1 = length.astype(np.uint64) * HASH_MULT[0]
        h2 = length.astype(np.uint64) * HASH_MULT[1] + ONES_1
        for k, w in enumerate(masked):
            h1 = (h1 ^ w) * HASH_MULT[(k + 2) % 4]
            h1 ^= h1 >> np.uint64(29)
            h2 = (h2 + w) * HASH_MULT[(k + 3) % 4]
            h2 ^= h2 >> np.uint64(31)
        inverse, uniques = pd.factorize(h1)
        some = np.empty(len(uniques), dtype=np.int64)
        some[inverse] = np.arange(len(h1))  # any occurrence will do: all are checked below
        codes = np.empty(len(uniques), dtype=np.int64)
        with self.lock:  # scan workers share the vocabulary
            for u, hv in enumerate(uniques.tolist()):
                code = self.by_hash.get(hv)
                if code is None:
                    i = int(some[u])
                    raw = bytes(sc.bytes[start[i] : start[i] + length[i]])
                    code = self.code_of(raw.decode("utf-8", "replace"))
                    self.by_hash[hv] = code
                    self.check[code] = h2[i]
                codes[u] = code
            check = np.array(self.check, dtype=np.uint64)
        out = codes[inverse]
        same = check[out] == h2
        return np.where(same, out, -1).astype(np.int32)


@dataclass
class _Events:
    """Columns of event records (``M`` records are kept apart)."""

    off: np.ndarray  # byte offset, int64
    ph: np.ndarray  # phase letter, uint8
    name: np.ndarray  # vocabulary code, int32 (-1: none)
    ts: np.ndarray  # int64
    pid: np.ndarray  # int32 (-1: none)
    dtype: np.ndarray  # vocabulary code, int32 (-1: none)
    shape: np.ndarray  # vocabulary code, int32 (-1: none)

    @staticmethod
    def empty() -> _Events:
        i64, i32 = np.zeros(0, np.int64), np.zeros(0, np.int32)
        return _Events(i64, np.zeros(0, np.uint8), i32, i64, i32, i32, i32)

    def take(self, idx: np.ndarray) -> _Events:
        return _Events(*(getattr(self, f)[idx] for f in _EVENT_FIELDS))


_EVENT_FIELDS = ("off", "ph", "name", "ts", "pid", "dtype", "shape")


class _Store:
    """Event columns filled in place: allocated once for the most records the data can hold
    (the shortest Horovod record takes 31 bytes), so only the pages written count in memory and
    no chunk results are held twice."""

    def __init__(self, nbytes: int) -> None:
        cap = nbytes // 31 + 16
        self.cols = {
            f: np.empty(cap, dtype=t) for f, t in zip(_EVENT_FIELDS, _EVENT_DTYPES, strict=True)
        }
        self.count = 0
        self.overflow: list[_Events] = []

    def add(self, ev: _Events) -> None:
        k = len(ev.off)
        if self.overflow or self.count + k > len(self.cols["off"]):
            self.overflow.append(ev)
            return
        for f in _EVENT_FIELDS:
            self.cols[f][self.count : self.count + k] = getattr(ev, f)
        self.count += k

    def events(self) -> _Events:
        ev = _Events(*(self.cols[f][: self.count] for f in _EVENT_FIELDS))
        return _concat([ev, *self.overflow]) if self.overflow else ev


_EVENT_DTYPES = (np.int64, np.uint8, np.int32, np.int64, np.int32, np.int32, np.int32)


def _concat(parts: list[_Events]) -> _Events:
    if not parts:
        return _Events.empty()
    if len(parts) == 1:
        return parts[0]
    return _Events(*(np.concatenate([getattr(p, f) for p in parts]) for f in _EVENT_FIELDS))


def _scan_batch(sc: _Words, s: np.ndarray, vocab: _Vocab) -> tuple[_Events, np.ndarray]:
    """Parse records starting at ``s`` (each begins with '{"ph": "').

    Every offset read lies within ``FAST_MARGIN`` bytes of a start, so no bounds checks.

    Returns:
        (events, end offsets) of the records that follow Horovod's layout exactly.
    """
    W, B = sc.words, sc.bytes
    n = len(s)
    w8 = W[s + 8]  # 'B", "nam' or 'E", "ts"'
    w16 = W[s + 16]  # 'e": "NAM' or ': 12345'
    ph = (w8 & MASK[1]).astype(np.uint8)
    tail7 = w8 >> np.uint64(8)
    ok = np.ones(n, dtype=bool)
    pid = np.full(n, -1, dtype=np.int32)
    name = np.full(n, -1, dtype=np.int32)
    dtype = np.full(n, -1, dtype=np.int32)
    shape = np.full(n, -1, dtype=np.int32)
    has_args = np.zeros(n, dtype=bool)
    end = np.zeros(n, dtype=np.int64)
    tpos = np.empty(n, dtype=np.int64)
    # 'E' records: '{"ph": "E", "ts": ' ; the others: '{"ph": "B", "name": "NAME", "ts": '
    is_e = ph == ord("E")
    ie = np.flatnonzero(is_e)
    ok[ie] = (tail7[ie] == K_TS_E7) & ((w16[ie] & MASK[2]) == K_TS_E2)
    tpos[ie] = s[ie] + 18
    inm = np.flatnonzero(~is_e)
    ns = s[inm] + 21
    okn = (tail7[inm] == K_NAME7) & ((w16[inm] & MASK[5]) == K_NAME5)
    del w8, w16, tail7
    nlen, nwords = _quote_at(W, ns)
    okn &= nlen >= 0
    after = ns + np.maximum(nlen, 0) + 1
    okn &= W[after] == K_TS
    tpos[inm] = after + 8
    ok[inm] &= okn
    ts, nts = _digits(W, tpos, 2)
    ok &= nts > 0
    r = tpos + nts
    # instants: ', "s": "g"}'
    im = np.flatnonzero(ph == ord("i"))
    rm = r[im]
    ok[im] &= (W[rm] == K_S) & (B[rm + 9] == ord('"')) & (B[rm + 10] == ord("}"))
    end[im] = rm + 11
    # everything else: ', "pid": N' then '}', ', "dur": N}' (ticks) or ', "args": {...}}'
    ip = np.flatnonzero(ph != ord("i"))
    rp = r[ip]
    okp = (W[rp] == K_PID) & (B[rp + 8] == ord(" "))
    value, npid = _digits(W, rp + 9, 1)
    okp &= npid > 0
    pid[ip] = value
    r2 = rp + 9 + npid
    end[ip] = r2 + 1
    more = np.flatnonzero(B[r2] != ord("}"))
    if len(more):
        q, rows = r2[more], ip[more]
        wq = W[q]
        dur = (wq == K_DUR) & (B[q + 8] == ord(" "))
        args = (wq == K_ARGS1) & ((W[q + 8] & MASK[3]) == K_ARGS2)
        okm = dur | args
        idur = np.flatnonzero(dur)
        qd = q[idur] + 9
        _, ndur = _digits(W, qd, 1)
        okm[idur] &= (ndur > 0) & (B[qd + ndur] == ord("}"))
        end[rows[idur]] = qd + ndur + 1
        ia = np.flatnonzero(args)
        a0 = q[ia] + 11
        oka = (W[a0] == K_DTYPE1) & ((W[a0 + 8] & MASK[2]) == K_DTYPE2)
        dlen, dwords = _quote_at(W, a0 + 10)
        oka &= dlen >= 0
        dq = a0 + 10 + np.maximum(dlen, 0)
        oka &= (W[dq] == K_SHAPE1) & ((W[dq + 8] & MASK[5]) == K_SHAPE2)
        slen, swords = _quote_at(W, dq + 13)
        oka &= slen >= 0
        sq = dq + 13 + np.maximum(slen, 0)
        oka &= (W[sq] & MASK[3]) == K_ARGS_END
        end[rows[ia]] = sq + 3
        okm[ia] &= oka
        okp[more] &= okm
        g = np.flatnonzero(oka)
        if len(g):
            target = rows[ia[g]]
            has_args[target] = True
            dtype[target] = vocab.encode(sc, a0[g] + 10, dlen[g], [x[g] for x in dwords])
            shape[target] = vocab.encode(sc, dq[g] + 13, slen[g], [x[g] for x in swords])
    ok[ip] &= okp
    g = np.flatnonzero(ok[inm])
    name[inm[g]] = vocab.encode(sc, ns[g], nlen[g], [x[g] for x in nwords])
    # a hash collision (never seen, possible in principle) sends the record to the slow path
    ok &= is_e | (name >= 0)
    ok &= ~has_args | ((dtype >= 0) & (shape >= 0))
    keep = np.flatnonzero(ok)
    if len(keep) == n:
        return _Events(s, ph, name, ts, pid, dtype, shape), end
    return _Events(s, ph, name, ts, pid, dtype, shape).take(keep), end[keep]


# ---------------------------------------------------------------------------------------------
# The tolerant parser, for everything the fast scanner did not take


class _Reader:
    """State of one read: the collected records, warnings and damage."""

    def __init__(self, source: str, src: _Source) -> None:
        self.source = source
        self.src = src
        self.buf = src.data
        self.n = len(src.data)
        self.vocab = _Vocab()
        self.slow: list[tuple[int, int, int, int, int, int, int]] = []
        self.warnings: list[str] = []
        self.skipped: list[tuple[int, int]] = []
        self.tensor_names: dict[int, str] = {}
        self.sort_index: dict[int, int] = {}
        self.start_epoch_us: int | None = None
        self.ignored = 0
        self.records = 0
        self.truncated_at: int | None = None
        self.closing: int | None = None
        self.form = "array"
        self.not_a_trace: tuple[int, str] | None = None
        self.ascii = True
        self.last_is_meta = False  # the last record read was an 'M' record
        self.decoder = json.JSONDecoder()

    def warn(self, msg: str) -> None:
        self.warnings.append(f"{self.source}: {msg}")

    # -- metadata records ---------------------------------------------------------------------

    def meta_extent(self, start: int) -> tuple[int, tuple] | None:
        """End and content of the Horovod ``M`` record at ``start``, or None."""
        head = META_HEAD.match(bytes(self.buf[start : start + 120]))
        if not head:
            return None
        kind, pid = head.group(1), int(head.group(2))
        body = start + head.end()
        if self.buf[body : body + 9] == b'"name": "':
            # tensor names are not escaped: the record ends at '"}},' + newline
            stop = self.buf.find(b'"}},\n', body)
            stop = self.buf.find(b'"}}', body) if stop < 0 else stop
            end = stop + 3
        else:
            end = self.buf.find(b"}}", body) + 2
        if end < 2:
            return None
        parsed = self.meta_fields(kind, pid, bytes(self.buf[body : end - 2]))
        return None if parsed is None else (end, parsed)

    @staticmethod
    def meta_fields(kind: bytes, pid: int, args: bytes) -> tuple | None:
        if kind == b"process_name":
            m = META_NAME.match(args)
            if m:
                return ("name", pid, m.group(1).decode("utf-8", "replace"))
        m = META_INT.match(args)
        if m and (kind == b"process_sort_index") == (m.group(1) == b"sort_index"):
            return (m.group(1).decode(), pid, int(m.group(2)))
        return None

    def take_meta(self, parsed: tuple) -> None:
        self.last_is_meta = True
        kind, pid, value = parsed
        if kind == "name":
            self.tensor_names[pid] = value
        elif kind == "sort_index":
            self.sort_index[pid] = value
        else:
            self.start_epoch_us = value
        self.records += 1

    # -- generic JSON records -----------------------------------------------------------------

    def take_json(self, off: int, obj: Any) -> bool:
        """Take one decoded JSON object; False if it is not a trace event."""
        if not isinstance(obj, dict) or not isinstance(obj.get("ph"), str) or not obj["ph"]:
            return False
        ph = obj["ph"]
        pid = obj.get("pid", -1)
        pid = pid if type(pid) is int and 0 <= pid < 2**31 else -1
        args = obj.get("args") if isinstance(obj.get("args"), dict) else {}
        self.records += 1
        self.last_is_meta = ph == "M"
        if ph == "M":
            if obj.get("name") == "process_name" and isinstance(args.get("name"), str):
                self.tensor_names[pid] = args["name"]
            elif obj.get("name") == "process_name" and type(
                args.get("start_time_since_epoch_in_micros")
            ) is int:  # fmt: skip
                self.start_epoch_us = args["start_time_since_epoch_in_micros"]
            elif obj.get("name") == "process_sort_index" and type(args.get("sort_index")) is int:
                self.sort_index[pid] = args["sort_index"]
            return True
        ts = obj.get("ts")
        if isinstance(ts, float) and ts.is_integer() and abs(ts) < 2**62:
            ts = int(ts)
        if ph not in ("B", "E", "X", "i", "I") or type(ts) is not int or abs(ts) >= 2**62:
            self.ignored += 1
            return True
        name = obj.get("name")
        code = self.vocab.code_of(name) if isinstance(name, str) else -1
        dtype = shape = -1
        if ph == "E" and isinstance(args.get("dtype"), str):
            dtype = self.vocab.code_of(args["dtype"])
            shape = self.vocab.code_of(str(args.get("shape", "")))
        letter = ord("i") if ph == "I" else ord(ph)
        self.slow.append((off, letter, code, ts, pid, dtype, shape))
        return True

    def parse_region(self, lo: int, hi: int, *, tail: bool) -> None:
        """Read records one by one in ``buf[lo:hi]``.

        Args:
            tail: the region runs to the end of the data: a ']' closes the array, and an
                unreadable '{...' there is a cut last record.
        """
        text = bytes(self.buf[lo:hi]).decode("latin-1")  # 1 char per byte: offsets stay exact
        self.ascii = text.isascii()
        pos = 0
        while True:
            pos = _skip_separators(text, pos)
            if pos >= len(text):
                return
            c = text[pos]
            if c == "]" and tail:
                self.closing = lo + pos
                rest = text[pos + 1 :].strip()
                if rest and self.form == "array":
                    self.junk(lo + pos + 1, hi, "data after the closing ']'")
                return
            status, end = self.one_record(text, pos, lo)
            if status == "ok":
                pos = end
                continue
            nxt = _next_record_start(text, pos + 1)
            if nxt is None and tail and c == "{" and status == "bad":
                self.truncated_at = lo + pos
                return
            if self.records == 0 and self.not_a_trace is None:
                what = "not a trace event" if status == "not_event" else f"found {c!r}"
                self.not_a_trace = (lo + pos, f"expected a trace event object, {what}")
            stop = hi if nxt is None else lo + nxt
            what = "a JSON object that is not a trace event" if status == "not_event" else (
                "unreadable data"
            )  # fmt: skip
            self.junk(lo + pos, stop, what)
            if nxt is None:
                return
            pos = nxt

    def one_record(self, text: str, pos: int, lo: int) -> tuple[str, int]:
        """Decode the record at ``text[pos]``: ('ok', end), ('not_event', end) or ('bad', 0)."""
        if text[pos] != "{":
            return "bad", 0
        try:
            obj, end = self.decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            obj, end = None, -1
        if end >= 0:
            if self.take_json(lo + pos, obj if self.ascii else _fix_latin1(obj)):
                return "ok", end
            return "not_event", end
        found = self.meta_extent(lo + pos)  # an M record with an unescaped tensor name
        if found and found[0] <= lo + len(text):
            self.take_meta(found[1])
            return "ok", found[0] - lo
        return "bad", 0

    def junk(self, lo: int, hi: int, what: str) -> None:
        self.skipped.append((lo, hi - lo))
        self.warn(f"skipped {hi - lo} bytes at byte {lo}: {what}")


def _fix_latin1(obj: Any) -> Any:
    """Undo the latin-1 decoding of UTF-8 text inside decoded strings."""
    if isinstance(obj, str):
        try:
            return obj.encode("latin-1").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            return obj
    if isinstance(obj, dict):
        return {_fix_latin1(k): _fix_latin1(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_fix_latin1(v) for v in obj]
    return obj


def _skip_separators(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t\r\n,":
        pos += 1
    return pos


RECORD_START = re.compile(r'[,\[\n]\s*(\{)\s*"')


def _next_record_start(text: str, pos: int) -> int | None:
    """Offset of the next '{' that follows a separator and opens an object with a key."""
    m = RECORD_START.search(text, max(pos - 1, 0))
    while m and m.start(1) < pos:
        m = RECORD_START.search(text, m.start(1))
    return m.start(1) if m else None


# ---------------------------------------------------------------------------------------------
# Reading


def read_timeline(path: str | os.PathLike[str], *, progress: bool = False) -> Timeline:
    """Read a Horovod timeline file.

    Args:
        path: ``timeline.json`` (plain or gzip-compressed; a JSON array or the
            ``{"traceEvents": [...]}`` form), or a run directory that holds one.
        progress: show a progress bar (for files of hundreds of MB).

    Returns:
        A :class:`Timeline`. A cut file keeps its valid prefix and unreadable byte ranges are
        skipped; both raise a :class:`TimelineWarning` naming the byte offset.

    Raises:
        FileNotFoundError: no such file, or a run directory without ``timeline.json``.
        TimelineFormatError: the data is not a trace-event timeline (names file and offset).
    """
    p = Path(path)
    if p.is_dir():
        if not (p / "timeline.json").exists():
            raise FileNotFoundError(f"{p}: run directory has no timeline.json (use --timeline)")
        p = p / "timeline.json"
    if not p.exists():
        raise FileNotFoundError(f"no timeline file {p}")
    src, problems, cut_at = _open(p)
    try:
        return _parse(src, str(p), problems, cut_at, progress)
    finally:
        src.close()


def parse_timeline(data: bytes | str, *, source: str = "<bytes>") -> Timeline:
    """Parse timeline data held in memory.

    Args:
        data: the file contents (plain or gzip bytes, or str).
        source: the name used in warnings and errors.

    Returns:
        A :class:`Timeline` (see :func:`read_timeline`).

    Raises:
        TimelineFormatError: the data is not a trace-event timeline.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    problems: list[str] = []
    cut_at = None
    if data[:2] == b"\x1f\x8b":
        data, problems, cut_at = _gunzip(data)
    return _parse(_Source(bytes(data)), source, problems, cut_at, False)


BODY_START = re.compile(rb'\s*(?:\[|\{\s*"traceEvents"\s*:\s*\[)')
TRACE_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


def _parse(
    src: _Source, source: str, problems: list[str], cut_at: int | None, progress: bool
) -> Timeline:
    rd = _Reader(source, src)
    for msg in problems:
        rd.warn(msg)
    n = rd.n
    bom = 3 if bytes(rd.buf[:3]) == b"\xef\xbb\xbf" else 0
    head = bytes(rd.buf[bom : bom + 4096])
    compact = b"".join(head.split())
    if not compact or (n < 4096 and b'{"traceEvents":['.startswith(compact)):
        if compact or cut_at is not None:
            rd.truncated_at = cut_at if cut_at is not None else n
        rd.warn("empty file: no events")
        return _finish(rd, _Events.empty())
    m = BODY_START.match(head)
    if m:
        body_lo = bom + m.end()
        if not m.group(0).strip().startswith(b"["):
            rd.form = "traceEvents"
    elif head.lstrip().startswith(b"{"):
        km = TRACE_EVENTS_KEY.search(bytes(rd.buf[: min(n, 1 << 20)]))
        if not km:
            raise TimelineFormatError(
                source, bom + len(head) - len(head.lstrip()),
                'a JSON object without a "traceEvents" array: not a Chrome trace timeline',
            )  # fmt: skip
        body_lo = km.end()
        rd.form = "traceEvents"
    else:
        off = bom + len(head) - len(head.lstrip())
        raise TimelineFormatError(
            source, off, f"expected '[' or '{{\"traceEvents\": [', found {head.lstrip()[:20]!r}"
        )
    events = _scan(rd, body_lo, progress)
    if rd.records == 0 and rd.not_a_trace is not None:
        raise TimelineFormatError(source, *rd.not_a_trace)
    if cut_at is not None and rd.closing is None:
        rd.truncated_at = rd.truncated_at if rd.truncated_at is not None else cut_at
    if rd.records == 0 and not rd.skipped:
        rd.warn("no events in the file")
    return _finish(rd, events)


def _fast_chunk(
    sc: _Words, lo: int, hi: int, vocab: _Vocab
) -> tuple[np.ndarray, list[_Events], list[np.ndarray]]:
    """Worker part of the scan of ``buf[lo:hi]``: record candidates and the fast parse.

    Returns:
        (offsets of '{"name":' metadata candidates, events, their end offsets).
    """
    cand = np.flatnonzero(sc.bytes[lo:hi] == ord("{")) + lo
    words = sc.words[cand]
    meta = cand[words == K_META]
    ev_cand = cand[words == K_PH]
    del cand, words
    evs, ends = [], []
    for i in range(0, len(ev_cand), BATCH):
        e, end = _scan_batch(sc, ev_cand[i : i + BATCH], vocab)
        evs.append(e)
        ends.append(end)
    return meta, evs, ends


def _scan(rd: _Reader, body_lo: int, progress: bool) -> _Events:
    """Find every record after ``body_lo``: the fast scanner on chunks (in worker threads; numpy
    releases the GIL), then, in order, metadata records, overlaps and gaps."""
    n = rd.n
    sc = _Words(rd.buf, n)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n - body_lo, unit="B", unit_scale=True, desc="reading timeline")
    store = _Store(n - body_lo)
    prev_end = body_lo  # end of the last record taken
    fast_hi = max(n - FAST_MARGIN, body_lo)
    bounds = [(lo, min(fast_hi, lo + CHUNK)) for lo in range(body_lo, fast_hi, CHUNK)]
    workers = min(THREADS, len(bounds))
    pool = ThreadPoolExecutor(workers) if workers > 1 else None
    try:
        pending: deque = deque()
        for i, (lo, hi) in enumerate(bounds):
            while len(pending) < 2 * workers and len(pending) + i < len(bounds):
                clo, chi = bounds[i + len(pending)]
                if pool is None:
                    pending.append(_Done(_fast_chunk(sc, clo, chi, rd.vocab)))
                else:
                    pending.append(pool.submit(_fast_chunk, sc, clo, chi, rd.vocab))
            meta_cand, evs, ends = pending.popleft().result()
            metas = []
            for start in meta_cand[meta_cand >= prev_end].tolist():
                if metas and start < metas[-1][1]:
                    continue
                found = rd.meta_extent(start)
                if found:
                    metas.append((start, found[0], found[1]))
            if metas or (evs and len(evs[0].off) and evs[0].off[0] < prev_end):
                evs, ends = _drop_inside(evs, ends, metas, prev_end)
            prev_end = _tile(rd, sc, evs, ends, metas, prev_end, store)
            rd.src.release(min(prev_end, hi) - (1 << 16))
            if bar is not None:
                bar.update(hi - lo)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    if bar is not None:
        bar.update(n - body_lo - bar.n)
        bar.close()
    _tail(rd, prev_end)
    if rd.slow:
        cols = list(zip(*rd.slow, strict=True))
        store.add(
            _Events(*(np.asarray(c, dtype=t) for c, t in zip(cols, _EVENT_DTYPES, strict=True)))
        )
    events = store.events()
    del store
    if len(events.off) > 1 and rd.slow and (np.diff(events.off) < 0).any():
        events = events.take(np.argsort(events.off, kind="stable"))
    return events


class _Done:
    """A finished result with the interface of a Future (the single-thread path)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        return self.value


def _drop_inside(
    evs: list[_Events], ends: list[np.ndarray], metas: list, prev_end: int
) -> tuple[list[_Events], list[np.ndarray]]:
    """Drop event candidates inside a metadata record (a tensor name may hold '{"ph": "') or
    inside the previous chunk's last record."""
    mo = np.array([m[0] for m in metas], dtype=np.int64)
    me = np.array([m[1] for m in metas], dtype=np.int64)
    out_e, out_end = [], []
    for e, end in zip(evs, ends, strict=True):
        keep = e.off >= prev_end
        if len(mo):
            j = np.searchsorted(mo, e.off, side="right") - 1
            keep &= ~((j >= 0) & (e.off < me[np.maximum(j, 0)]))
        if keep.all():
            out_e.append(e)
            out_end.append(end)
        else:
            idx = np.flatnonzero(keep)
            out_e.append(e.take(idx))
            out_end.append(end[idx])
    return out_e, out_end


def _tile(rd: _Reader, sc: _Words, evs: list[_Events], ev_ends: list[np.ndarray], metas: list,
          prev_end: int, store: _Store) -> int:  # fmt: skip
    """Order a chunk's records, drop overlapping ones, and read the gaps that are not plain
    separators with the tolerant parser. Returns the end of the last record taken."""
    m_off = np.array([m[0] for m in metas], dtype=np.int64)
    m_end = np.array([m[1] for m in metas], dtype=np.int64)
    off = np.concatenate([e.off for e in evs] + [m_off])
    ends = np.concatenate(ev_ends + [m_end])
    if metas:
        order = np.argsort(off, kind="stable")
        off, ends = off[order], ends[order]
    else:  # fast records come in offset order
        order = np.arange(len(off))
    while len(off) > 1:  # a record that runs into the next one is not what it seems
        bad = np.flatnonzero(ends[:-1] > off[1:])
        if not len(bad):
            break
        keep = np.ones(len(off), dtype=bool)
        keep[bad] = False
        off, ends, order = off[keep], ends[keep], order[keep]
    if not len(off):
        return prev_end
    nfast = sum(len(e.off) for e in evs)
    is_fast = order < nfast
    taken = order[is_fast]
    if len(taken) == nfast:
        for e in evs:
            store.add(e)
    else:
        store.add(_concat(evs).take(np.sort(taken)))
    for i in order[~is_fast].tolist():
        rd.take_meta(metas[i - nfast][2])
    rd.records += int(is_fast.sum())

    g_lo = np.concatenate([[prev_end], ends[:-1]])
    g_hi = off
    glen = g_hi - g_lo
    c0, c1 = sc.bytes[g_lo], sc.bytes[np.minimum(g_lo + 1, sc.n - 1)]
    simple = (
        (glen == 0)
        | ((glen == 1) & (c0 == ord(",")))
        | ((glen == 2) & (c0 == ord(",")) & (c1 == ord("\n")))
    )
    for i in np.flatnonzero(~simple).tolist():
        a, b = int(g_lo[i]), int(g_hi[i])
        gap = bytes(rd.buf[a:b])
        if gap.strip(b" \t\r\n") == b"" or (
            gap.count(b",") == 1 and gap.replace(b",", b"").strip() == b""
        ):
            continue
        rd.parse_region(a, b, tail=False)
    rd.last_is_meta = bool(order[-1] >= nfast)  # gaps lie before the chunk's last record
    return int(ends[-1])


def _tail(rd: _Reader, lo: int) -> None:
    """What follows the last fast record: ']' (closed array), ',' (an open array: Horovod
    <= 0.20.0), more records in another layout, or a cut last record."""
    n = rd.n
    s = bytes(rd.buf[lo:n]).strip()
    if s not in (b"", b","):
        rd.parse_region(lo, n, tail=True)
    if rd.closing is not None or rd.truncated_at is not None or not rd.records:
        return
    last = bytes(rd.buf[max(lo, n - 64) : n])
    if rd.last_is_meta:
        # Horovod writes a tensor's 'M' records right before its first event: never last
        rd.truncated_at = n
    elif last.rstrip().endswith(b"}"):
        rd.truncated_at = n  # Horovod writes '}]' or '},' after a record: cut in between
    elif last.rstrip().endswith(b","):
        # Horovod <= 0.20.0 ends every record in '},' + newline and never closes the array;
        # later versions join event records with '},{' and close the array after each one, so
        # an open array from them is a cut file
        if not last.endswith(b"\n") or rd.buf.find(b"},{", max(0, n - (1 << 20)), n) >= 0:
            rd.truncated_at = n


# ---------------------------------------------------------------------------------------------
# From events to DataFrames


def _finish(rd: _Reader, ev: _Events) -> Timeline:
    vocab = np.array(rd.vocab.strings + [""], dtype=object)  # code -1 reads ""
    md: dict[str, Any] = {
        "path": rd.source,
        "bytes": rd.n,
        "events": rd.records,
        "form": rd.form,
        "closed_array": rd.closing is not None,
        "truncated": rd.truncated_at is not None,
        "truncated_at": rd.truncated_at,
        "skipped": list(rd.skipped),
        "ignored_events": rd.ignored,
        "start_time_since_epoch_us": rd.start_epoch_us,
        "first_ts_us": int(ev.ts.min()) if len(ev.ts) else None,
        "last_ts_us": int(ev.ts.max()) if len(ev.ts) else None,
    }
    if rd.truncated_at is not None:
        rd.warn(
            f"data cut at byte {rd.truncated_at} (partial last record, a killed or running "
            f"job): kept the {len(ev.ts)} events before it (and the metadata records)"
        )
    last_ts = md["last_ts_us"] or 0
    ev.off = np.zeros(0, np.int64)  # not needed any more

    used = np.unique(ev.pid[ev.pid >= 0]).tolist()
    pids = sorted(set(rd.tensor_names) | set(used))
    names = [rd.tensor_names.get(p, f"pid {p}") for p in pids]
    categories = list(dict.fromkeys(names))
    tensor_dtype = pd.CategoricalDtype(categories)
    cat_index = {s: i for i, s in enumerate(categories)}
    pid_arr = np.array(pids, dtype=np.int64)
    pid_code = np.array([cat_index[s] for s in names], dtype=np.int64)

    def tensor_of(pid: np.ndarray) -> pd.Categorical:
        if not len(pid_arr):
            return pd.Categorical.from_codes(np.full(len(pid), -1), dtype=tensor_dtype)
        j = np.clip(np.searchsorted(pid_arr, pid), 0, len(pid_arr) - 1)
        codes = np.where((pid >= 0) & (pid_arr[j] == pid), pid_code[j], -1)
        return pd.Categorical.from_codes(codes, dtype=tensor_dtype)

    tensors = pd.DataFrame(
        {
            "pid": np.array(pids, dtype=np.int64),
            "tensor": pd.Categorical(names, dtype=tensor_dtype),
            "sort_index": np.array([rd.sort_index.get(p, p) for p in pids], dtype=np.int64),
        }
    )
    spans, n_orphan, n_unclosed = _spans(ev, vocab, tensor_of, last_ts)
    ticks = _ticks(ev, vocab, tensor_of)
    cycles = _cycles(ev, vocab, last_ts)
    md["orphan_ends"] = n_orphan
    md["unclosed"] = n_unclosed
    if n_orphan:
        rd.warn(
            f"{n_orphan} 'E' records close nothing (the timeline started while tensors were in "
            "flight, e.g. hvd.start_timeline): dropped"
        )
    if n_unclosed:
        rd.warn(
            f"{n_unclosed} spans have no 'E' (the timeline stopped while tensors were in "
            "flight): they run to the last timestamp, closed=False"
        )
    md["warnings"] = list(rd.warnings)
    for msg in rd.warnings:
        warnings.warn(msg, TimelineWarning, stacklevel=4)
    return Timeline(spans=spans, ticks=ticks, cycles=cycles, tensors=tensors, metadata=md)


def _run_starts(key: np.ndarray) -> np.ndarray:
    """True at the first element of each run of equal values."""
    first = np.ones(len(key), dtype=bool)
    if len(key) > 1:
        first[1:] = key[1:] != key[:-1]
    return first


def _by_pid(pid: np.ndarray) -> np.ndarray:
    """Stable order by pid."""
    return _stable_order(_dense_rank(pid) if len(pid) and pid.max() >= 65536 else pid)


def _stable_order(key: np.ndarray) -> np.ndarray:
    """Stable argsort of non-negative integer keys (a radix sort when they fit 16 bits)."""
    if len(key) and key.min() >= 0 and key.max() < 65536:
        return np.argsort(key.astype(np.uint16), kind="stable")
    return np.argsort(key, kind="stable")


def _dense_rank(values: np.ndarray) -> np.ndarray:
    """0, 1, 2 ... in the order of the distinct values (keeps sort keys small)."""
    if not len(values) or (values.min() >= 0 and values.max() < 65536):
        return values
    return np.unique(values, return_inverse=True)[1].reshape(-1)


def _ffill_in_runs(values: np.ndarray, has: np.ndarray, run_first: np.ndarray) -> np.ndarray:
    """Forward-fill ``values`` where ``has`` within runs; -1 before the first value of a run."""
    carrier = np.where(has, values, -1)
    idx = np.where(has | run_first, np.arange(len(values)), 0)
    return carrier[np.maximum.accumulate(idx)] if len(idx) else carrier


def _spans(ev: _Events, vocab: np.ndarray, tensor_of: Callable[[np.ndarray], pd.Categorical],
           last_ts: int) -> tuple[pd.DataFrame, int, int]:  # fmt: skip
    """Pair ``B`` and ``E`` records per pid with stack semantics, vectorised."""
    be = np.flatnonzero(((ev.ph == ord("B")) | (ev.ph == ord("E"))) & (ev.pid >= 0))
    order = be[_by_pid(ev.pid[be])]  # event indices by pid, then file order
    del be
    pid = ev.pid[order]
    is_b = ev.ph[order] == ord("B")
    first = _run_starts(pid)
    grp = np.cumsum(first, dtype=np.int64) - 1
    delta = np.where(is_b, 1, -1).astype(np.int64)
    level = np.cumsum(delta)
    level -= (level - delta)[first][grp]  # stack level after each event, within its pid
    del delta
    # the running minimum per pid (offset so earlier pids never win) finds orphan E's:
    # an E that takes the level to a new low below 0 closes nothing
    big = np.int64(len(level) + 2)
    floor = np.minimum(np.minimum.accumulate(level - grp * big) + grp * big, 0)
    del grp
    prev_floor = np.empty_like(floor)
    prev_floor[1:] = floor[:-1]
    prev_floor[first] = 0
    orphan = ~is_b & (level < prev_floor)
    del prev_floor
    depth = level - floor - is_b  # depth of a B, or of the B an E closes
    del level, floor
    n_orphan = int(orphan.sum())
    if n_orphan:
        keep = ~orphan
        order, pid, is_b, depth = order[keep], pid[keep], is_b[keep], depth[keep]
    # within one (pid, depth), B's and E's alternate in file order: pair neighbours
    dmax = int(depth.max(initial=0)) + 1
    key = _dense_rank(pid).astype(np.int64) * dmax + depth
    pord = _stable_order(key)
    kb = is_b[pord]
    closes = np.zeros(len(pord), dtype=bool)
    if len(pord) > 1:
        ks = key[pord]
        closes[:-1] = ~kb[1:] & (ks[1:] == ks[:-1])
        del ks
    del key
    bpos = np.flatnonzero(kb & closes)
    partner = np.full(len(order), -1, dtype=np.int64)
    partner[pord[bpos]] = pord[bpos + 1]  # the E that closes each B (pid-ordered positions)
    del pord, kb, closes, bpos
    bi = np.flatnonzero(is_b)  # B's in (pid, file) order
    ei = partner[bi]
    del partner
    closed = ei >= 0
    n_unclosed = int((~closed).sum())
    b_ev = order[bi]
    e_ev = np.where(closed, order[np.maximum(ei, 0)], -1)
    spid = pid[bi]
    sdepth = depth[bi]
    del order, pid, depth, is_b, ei, bi
    sname = ev.name[b_ev].astype(np.int64)
    start = ev.ts[b_ev]
    end = np.where(closed, ev.ts[np.maximum(e_ev, 0)], last_ts)
    if n_unclosed:
        end = np.maximum(end, start)

    name_neg = np.array([s.startswith("NEGOTIATE_") for s in vocab], dtype=bool)
    is_neg = name_neg[sname] & (sdepth == 0)
    top = (sdepth == 0) & ~is_neg
    parent = _ffill_in_runs(sname, top, _run_starts(spid))  # activity -> its op's name
    op_name = np.array(
        [s[len("NEGOTIATE_") :] if s.startswith("NEGOTIATE_") else s for s in vocab],
        dtype=object,
    )
    op_code = np.where(sdepth == 0, sname, parent)
    op_col = _categorical(op_code, op_name)
    dtype = np.where(closed & top, ev.dtype[np.maximum(e_ev, 0)], -1)
    shape = np.where(closed & top, ev.shape[np.maximum(e_ev, 0)], -1)

    # file order of the B's: a scatter over event indices instead of a sort
    slot = np.full(len(ev.ph), -1, dtype=np.int64)
    slot[b_ev] = np.arange(len(b_ev))
    fo = slot[slot >= 0]
    del slot
    spans = pd.DataFrame(
        {
            "tensor": tensor_of(spid[fo]),
            "pid": spid[fo],
            "op": op_col[fo],
            "kind": pd.Categorical.from_codes(
                np.where(sdepth > 0, 2, np.where(is_neg, 0, 1))[fo],
                dtype=pd.CategoricalDtype(["negotiate", "op", "activity"]),
            ),
            "name": _categorical(sname, vocab)[fo],
            "start_us": start[fo],
            "end_us": end[fo],
            "dur_us": (end - start)[fo],
            "depth": sdepth[fo].astype(np.int8),
            "closed": closed[fo],
            "dtype": _categorical(dtype, vocab)[fo],
            "shape": _categorical(shape, vocab)[fo],
            "seq": b_ev[fo],
            "end_seq": e_ev[fo],
        },
        copy=False,
    )
    return spans, n_orphan, n_unclosed


def _categorical(codes: np.ndarray, strings: np.ndarray) -> pd.Categorical:
    """Categorical of ``strings[codes]`` (-1 -> missing) holding only the strings used."""
    codes = np.asarray(codes, dtype=np.int64)
    used = np.unique(codes[codes >= 0])
    cats = list(dict.fromkeys(strings[used].tolist()))
    index = {s: i for i, s in enumerate(cats)}
    remap = np.full(len(strings), -1, dtype=np.int64)
    remap[used] = [index[s] for s in strings[used].tolist()]
    return pd.Categorical.from_codes(
        np.where(codes >= 0, remap[codes], -1), dtype=pd.CategoricalDtype(cats)
    )


def _ticks(ev: _Events, vocab: np.ndarray,
           tensor_of: Callable[[np.ndarray], pd.Categorical]) -> pd.DataFrame:  # fmt: skip
    """Rank readiness ticks: ``X`` records whose name is a rank number."""
    rank_of = np.array(
        [int(s) if s.isascii() and s.isdigit() and len(s) < 10 else -1 for s in vocab],
        dtype=np.int64,
    )
    name_neg = np.array([s.startswith("NEGOTIATE_") for s in vocab], dtype=bool)
    neg_b = (ev.ph == ord("B")) & name_neg[ev.name] & (ev.pid >= 0)
    tick = (ev.ph == ord("X")) & (rank_of[ev.name] >= 0) & (ev.pid >= 0)
    sel = np.flatnonzero(tick | neg_b)
    sel = sel[_by_pid(ev.pid[sel])]
    pid = ev.pid[sel]
    neg = neg_b[sel]
    first = _run_starts(pid)
    c = np.cumsum(neg)
    negotiation = c - (c - neg)[first][np.cumsum(first) - 1] - 1
    neg_name = _ffill_in_runs(ev.name[sel].astype(np.int64), neg, first)
    t = np.flatnonzero(~neg)
    sel, pid, negotiation, neg_name = sel[t], pid[t], negotiation[t], neg_name[t]
    ts = ev.ts[sel]
    # lateness after the first tick of the same negotiation: (pid, negotiation) runs are
    # contiguous in this (pid, file) order
    run = _run_starts(pid) | _run_starts(negotiation)
    run_id = np.cumsum(run) - 1
    lateness = ts - np.minimum.reduceat(ts, np.flatnonzero(run))[run_id] if len(ts) else ts
    fo = np.argsort(sel, kind="stable")  # file order
    sel, pid, negotiation, neg_name = sel[fo], pid[fo], negotiation[fo], neg_name[fo]
    ts, lateness = ts[fo], lateness[fo]
    suffix = np.array(
        [s[len("NEGOTIATE_") :] if s.startswith("NEGOTIATE_") else "" for s in vocab],
        dtype=object,
    )
    ticks = pd.DataFrame(
        {
            "tensor": tensor_of(pid),
            "pid": pid,
            "op": _categorical(np.where(neg_name >= 0, neg_name, -1), suffix),
            "negotiation": negotiation.astype(np.int64),
            "rank": rank_of[ev.name[sel]],
            "ts_us": ts,
            "lateness_us": lateness,
            "seq": sel,
        },
        copy=False,
    )
    return ticks


def _cycles(ev: _Events, vocab: np.ndarray, last_ts: int) -> pd.DataFrame:
    """``CYCLE_START`` marks (``HOROVOD_TIMELINE_MARK_CYCLES=1``)."""
    is_cycle = np.array([s == "CYCLE_START" for s in vocab], dtype=bool)
    sel = np.flatnonzero((ev.ph == ord("i")) & is_cycle[ev.name])
    start = ev.ts[sel]
    if len(start) > 1 and (start[1:] < start[:-1]).any():
        order = np.argsort(start, kind="stable")
        sel, start = sel[order], start[order]
    end = np.append(start[1:], max(last_ts, int(start[-1]))) if len(start) else start
    return pd.DataFrame(
        {
            "cycle": np.arange(len(start), dtype=np.int64),
            "start_us": start,
            "end_us": end,
            "dur_us": end - start,
            "seq": sel,
        },
        copy=False,
    )


# ---------------------------------------------------------------------------------------------
# Writing a repaired timeline


def write_timeline(
    timeline: Timeline,
    path: str | os.PathLike[str],
    *,
    start_us: int | None = None,
    end_us: int | None = None,
) -> dict[str, int]:
    """Write a valid, closed timeline JSON that chrome://tracing and Perfetto load.

    The layout is Horovod's own (one record per line, names JSON-escaped), so the result also
    reads back with :func:`read_timeline` at full speed. Every span gets a ``B`` and an ``E``:
    unclosed spans are closed at their ``end_us`` and orphan ``E`` records are left out; spans
    that cross the window's edges are clipped to it.

    Args:
        timeline: what :func:`read_timeline` returned.
        path: the output file; it must not exist (nothing is overwritten).
        start_us, end_us: keep only this window (timeline microseconds, inclusive).

    Returns:
        Counts written: ``events``, ``spans``, ``ticks``, ``cycles``, ``tensors``.

    Raises:
        FileExistsError: ``path`` exists.
        ValueError: an empty window (``end_us`` < ``start_us``).
    """
    out = Path(path)
    if out.exists():
        raise FileExistsError(f"{out} exists: choose a new output file (nothing is overwritten)")
    lo = -(2**62) if start_us is None else int(start_us)
    hi = 2**62 if end_us is None else int(end_us)
    if hi < lo:
        raise ValueError(f"empty window: end_us {end_us} < start_us {start_us}")
    sp = timeline.spans
    sp = sp[(sp["end_us"] >= lo) & (sp["start_us"] <= hi)]
    tk = timeline.ticks
    tk = tk[(tk["ts_us"] >= lo) & (tk["ts_us"] <= hi)]
    cy = timeline.cycles
    cy = cy[(cy["start_us"] >= lo) & (cy["start_us"] <= hi)]

    # Sort key (group, order): group 0 = B's clipped at the window start (outer first),
    # 1 = everything in file order, 2 = E's clipped at the window end or unclosed (inner first).
    records: list[tuple[int, int, str]] = []
    seq = sp["seq"].to_numpy()
    e_seq = sp["end_seq"].to_numpy()
    start = sp["start_us"].to_numpy()
    end = sp["end_us"].to_numpy()
    names = sp["name"].astype(object).to_numpy()
    dtypes = sp["dtype"].astype(object).to_numpy()
    shapes = sp["shape"].astype(object).to_numpy()
    for i, p in enumerate(sp["pid"].tolist()):
        b_ts, e_ts = max(int(start[i]), lo), min(int(end[i]), hi)
        b_key = (0, int(seq[i])) if start[i] < lo else (1, int(seq[i]))
        e_key = (1, int(e_seq[i])) if e_seq[i] >= 0 and end[i] <= hi else (2, -int(seq[i]))
        name = json.dumps(str(names[i]) if isinstance(names[i], str) else "")
        records.append((*b_key, f'{{"ph": "B", "name": {name}, "ts": {b_ts}, "pid": {p}}}'))
        args = ""
        if isinstance(dtypes[i], str):
            shape = json.dumps(str(shapes[i]) if isinstance(shapes[i], str) else "")
            args = f', "args": {{"dtype": {json.dumps(dtypes[i])}, "shape": {shape}}}'
        records.append((*e_key, f'{{"ph": "E", "ts": {e_ts}, "pid": {p}{args}}}'))
    for ts, s, p, rank in zip(tk["ts_us"], tk["seq"], tk["pid"], tk["rank"], strict=True):
        records.append(
            (1, int(s),
             f'{{"ph": "X", "name": "{int(rank)}", "ts": {int(ts)}, "pid": {int(p)}, "dur": 0}}')
        )  # fmt: skip
    for ts, s in zip(cy["start_us"], cy["seq"], strict=True):
        records.append(
            (1, int(s), f'{{"ph": "i", "name": "CYCLE_START", "ts": {int(ts)}, "s": "g"}}')
        )
    records.sort(key=lambda r: (r[0], r[1]))

    used = set(sp["pid"].tolist()) | set(tk["pid"].tolist())
    tensors = timeline.tensors[timeline.tensors["pid"].isin(used)]
    meta = []
    epoch = timeline.metadata.get("start_time_since_epoch_us")
    if epoch is not None:
        meta.append(
            '{"name": "process_name", "ph": "M", "pid": 0, '
            f'"args": {{"start_time_since_epoch_in_micros": {int(epoch)}}}}}'
        )
        meta.append(
            '{"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}'
        )
    for p, name, idx in zip(tensors["pid"], tensors["tensor"], tensors["sort_index"], strict=True):
        meta.append(
            f'{{"name": "process_name", "ph": "M", "pid": {int(p)}, '
            f'"args": {{"name": {json.dumps(str(name))}}}}}'
        )
        meta.append(
            f'{{"name": "process_sort_index", "ph": "M", "pid": {int(p)}, '
            f'"args": {{"sort_index": {int(idx)}}}}}'
        )
    tmp = out.with_name(out.name + ".partial")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("[\n")
        fh.write(",\n".join(meta + [r[2] for r in records]))
        fh.write("\n]\n")
    os.replace(tmp, out)
    return {
        "events": len(meta) + len(records),
        "spans": len(sp),
        "ticks": len(tk),
        "cycles": len(cy),
        "tensors": len(tensors),
    }
