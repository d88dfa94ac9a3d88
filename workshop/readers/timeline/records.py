"""The tolerant parser: records one by one with ``json``, for whatever the fast scanner did not
take (another writer's layout, a damaged range, the last record of a cut file), and the state
of one read that both parsers add to."""

from __future__ import annotations

import json
import re
from typing import Any

from workshop.readers.timeline.source import Source
from workshop.readers.timeline.vocab import Vocab

META_HEAD = re.compile(
    rb'\{"name": "(process_name|process_sort_index)", "ph": "M", "pid": (\d+), "args": \{'
)
META_HEAD_BYTES = 120  # longer than any META_HEAD match
META_NAME = re.compile(rb'"name": "(.*)"\Z', re.S)
META_INT = re.compile(rb'"(sort_index|start_time_since_epoch_in_micros)": ?(-?\d+)\Z')
RECORD_START = re.compile(r'[,\[\n]\s*(\{)\s*"')
EVENT_PHASES = ("B", "E", "X", "i", "I")  # the others are counted and ignored
MAX_TS = 2**62  # larger timestamps are not Horovod's (and would overflow the arithmetic)
MAX_PID = 2**31
EPOCH_KEY = "start_time_since_epoch_in_micros"  # in pid 0's process_name record


class Reader:
    """State of one read: the collected records, warnings and damage."""

    def __init__(self, source: str, src: Source) -> None:
        self.source = source
        self.src = src
        self.buf = src.data
        self.n = len(src.data)
        self.vocab = Vocab()
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
        head = META_HEAD.match(bytes(self.buf[start : start + META_HEAD_BYTES]))
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
        pid = pid if type(pid) is int and 0 <= pid < MAX_PID else -1
        args = obj.get("args") if isinstance(obj.get("args"), dict) else {}
        self.records += 1
        self.last_is_meta = ph == "M"
        if ph == "M":
            self.take_json_meta(obj.get("name"), pid, args)
            return True
        ts = obj.get("ts")
        if isinstance(ts, float) and ts.is_integer() and abs(ts) < MAX_TS:
            ts = int(ts)
        if ph not in EVENT_PHASES or type(ts) is not int or abs(ts) >= MAX_TS:
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

    def take_json_meta(self, kind: Any, pid: int, args: dict) -> None:
        """A metadata record in a layout ``meta_extent`` does not know."""
        if kind == "process_name" and isinstance(args.get("name"), str):
            self.tensor_names[pid] = args["name"]
        elif kind == "process_name" and type(args.get(EPOCH_KEY)) is int:
            self.start_epoch_us = args[EPOCH_KEY]
        elif kind == "process_sort_index" and type(args.get("sort_index")) is int:
            self.sort_index[pid] = args["sort_index"]

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
            pos = skip_separators(text, pos)
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
            nxt = next_record_start(text, pos + 1)
            if nxt is None and tail and c == "{" and status == "bad":
                self.truncated_at = lo + pos
                return
            if self.records == 0 and self.not_a_trace is None:
                what = "not a trace event" if status == "not_event" else f"found {c!r}"
                self.not_a_trace = (lo + pos, f"expected a trace event object, {what}")
            stop = hi if nxt is None else lo + nxt
            what = (
                "a JSON object that is not a trace event"
                if status == "not_event"
                else ("unreadable data")
            )
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
            if self.take_json(lo + pos, obj if self.ascii else fix_latin1(obj)):
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


def fix_latin1(obj: Any) -> Any:
    """Undo the latin-1 decoding of UTF-8 text inside decoded strings."""
    if isinstance(obj, str):
        try:
            return obj.encode("latin-1").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            return obj
    if isinstance(obj, dict):
        return {fix_latin1(k): fix_latin1(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [fix_latin1(v) for v in obj]
    return obj


def skip_separators(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t\r\n,":
        pos += 1
    return pos


def next_record_start(text: str, pos: int) -> int | None:
    """Offset of the next '{' that follows a separator and opens an object with a key."""
    m = RECORD_START.search(text, max(pos - 1, 0))
    while m and m.start(1) < pos:
        m = RECORD_START.search(text, m.start(1))
    return m.start(1) if m else None
