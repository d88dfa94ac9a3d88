"""Byte arithmetic on 8-byte words, for many offsets at once (numpy, "SIMD within a register").

The scanner reads the 8 bytes at any offset as one little-endian ``uint64`` (a strided view of
the buffer, so gathering the words at a million offsets is one indexing operation) and tests
all 8 bytes of each word together:

* a byte ``b`` is zero when ``(b - 1) & ~b`` has its high bit set; the lowest flagged byte is
  exact (a borrow may flag bytes above it, so only the first one counts);
* XOR with a byte repeated 8 times turns "equals that byte" into "is zero";
* for ASCII, ``(b & 0x7f) + 0x76`` carries into the high bit exactly when ``b & 0x7f > 9``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def repeated(byte: int) -> np.uint64:
    """A word whose 8 bytes all equal ``byte``."""
    return np.uint64(int.from_bytes(bytes([byte]) * 8, "little"))


EVERY_BYTE_ONE = repeated(0x01)
EVERY_HIGH_BIT = repeated(0x80)
EVERY_LOW_7_BITS = repeated(0x7F)
EVERY_BYTE_QUOTE = repeated(ord('"'))
EVERY_BYTE_ZERO_DIGIT = repeated(ord("0"))
EVERY_BYTE_CARRY_ABOVE_9 = repeated(0x80 - 10)  # adding it sets the high bit of bytes > 9

# Decimal digits to a number, pairwise: 8 one-digit bytes -> 4 two-digit 16-bit lanes -> 2
# four-digit 32-bit lanes -> one eight-digit value (mask, multiplier, shift of each step).
DIGIT_COMBINE_STEPS = (
    (repeated(0x0F), np.uint64(10 * 2**8 + 1), np.uint64(8)),
    (np.uint64(0x00FF00FF00FF00FF), np.uint64(100 * 2**16 + 1), np.uint64(16)),
    (np.uint64(0x0000FFFF0000FFFF), np.uint64(10_000 * 2**32 + 1), np.uint64(32)),
)
POWERS_OF_TEN = np.array([10**k for k in range(19)], dtype=np.int64)
MAX_STRING_WORDS = 4  # names, dtypes and shapes up to 32 bytes are decoded here


class Words:
    """The bytes of a buffer, and the 8-byte little-endian word starting at each offset."""

    def __init__(self, buf: Any, n: int) -> None:
        self.n = n
        if n >= 8:
            self.bytes = np.frombuffer(buf, dtype=np.uint8, count=n)
            self.words = np.ndarray(shape=(n - 7,), dtype="<u8", buffer=buf, strides=(1,))
        else:
            padded = bytes(buf[:n]) + b"\0" * 8
            self.bytes = np.frombuffer(padded, dtype=np.uint8, count=n)
            self.words = np.ndarray(shape=(n + 1,), dtype="<u8", buffer=padded, strides=(1,))


def low_bytes(count: int) -> np.uint64:
    """A mask of the first ``count`` (0 to 8) bytes of a word."""
    return np.uint64((1 << (8 * count)) - 1)


def first_flagged_byte(t: np.ndarray) -> np.ndarray:
    """Index of the lowest byte whose high bit is set in each word of ``t`` (only high bits
    set), 8 when none: the trailing zero bits, counted as the set bits of
    ``(t & -t) - 1`` (64 when ``t`` is 0), divided by 8."""
    below_lowest = (t & np.negative(t)) - np.uint64(1)
    return (np.bitwise_count(below_lowest) >> np.uint8(3)).astype(np.int64)


def quoted_strings(words: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The strings at ``start``, up to their closing '"'.

    Returns:
        (length, masked): the length (-1 if no quote within ``MAX_STRING_WORDS`` words), and
        the string's words with the bytes from the quote on set to 0 (a key for the
        vocabulary).
    """
    n = len(start)
    length = np.full(n, -1, dtype=np.int64)
    masked = [np.zeros(n, dtype=np.uint64) for _ in range(MAX_STRING_WORDS)]
    todo = np.arange(n)
    for k in range(MAX_STRING_WORDS):
        if not len(todo):
            break
        w = words[8 * k :][start[todo]]  # a view from 8k: no offset array
        x = w ^ EVERY_BYTE_QUOTE
        t = (x - EVERY_BYTE_ONE) & ~x & EVERY_HIGH_BIT
        hit = t != 0
        masked[k][todo] = w
        if hit.any():
            nbytes = first_flagged_byte(t[hit])
            rows = todo[hit]
            length[rows] = 8 * k + nbytes
            below_quote = (np.uint64(1) << (nbytes * 8).astype(np.uint64)) - np.uint64(1)
            masked[k][rows] = w[hit] & below_quote
        todo = todo[~hit]
    return length, masked


def _digit_count(w: np.ndarray) -> np.ndarray:
    """Number of leading ASCII digits in each word (8 if all are digits)."""
    x = w ^ EVERY_BYTE_ZERO_DIGIT  # digits become bytes 0..9
    not_digit = (((x & EVERY_LOW_7_BITS) + EVERY_BYTE_CARRY_ABOVE_9) | x) & EVERY_HIGH_BIT
    return first_flagged_byte(not_digit)


def _digits_value(w: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Value of the first ``count`` (<= 8) ASCII digits of each word."""
    v = w << ((8 - np.minimum(count, 8)) * 8).astype(np.uint64)  # digits to the high bytes
    for mask, multiplier, shift in DIGIT_COMBINE_STEPS:
        v = ((v & mask) * multiplier) >> shift
    return v.astype(np.int64)


def decimals(words: np.ndarray, pos: np.ndarray, nwords: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode unsigned decimal integers at ``pos`` (at most ``8 * nwords - 1`` digits; 1 or 2
    words).

    Returns:
        (value int64, number of digits; 0 = invalid).
    """
    w0 = words[pos]
    count = _digit_count(w0)
    value = _digits_value(w0, count)
    if nwords == 1:
        return value, np.where(count >= 8, 0, count)
    long = np.flatnonzero(count >= 8)
    if len(long):
        w1 = words[8:][pos[long]]
        rest = _digit_count(w1)
        value[long] = value[long] * POWERS_OF_TEN[rest] + _digits_value(w1, rest)
        count[long] = np.where(rest >= 8, 0, 8 + rest)
    return value, count
