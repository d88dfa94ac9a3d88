"""Strings (names, dtypes, shapes) coded as small integers.

Scan workers only hash the strings of their chunk (:func:`hash_strings`, no shared state); the
reading thread gives the codes, chunk by chunk in file order (:meth:`Vocab.codes_of`), so the
codes, and the category order of every DataFrame column built from them, do not depend on
which worker finished first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workshop.readers.timeline.words import Words

# Odd 64-bit multipliers (golden ratio, xxHash primes) and xor-shifts mix each string's words
# into two independent hashes: the first finds the code, the second confirms it.
HASH_MULTIPLIERS = (
    np.uint64(0x9E3779B97F4A7C15),
    np.uint64(0xC2B2AE3D27D4EB4F),
    np.uint64(0x165667B19E3779F9),
    np.uint64(0x27D4EB2F165667C5),
)
FIND_HASH_SHIFT = np.uint64(29)
CHECK_HASH_SHIFT = np.uint64(31)
SLOT_BITS = 12  # a batch's distinct strings are found in a table of 2**12 slots (top hash bits)


@dataclass
class HashedStrings:
    """The distinct strings of a batch, in order of first occurrence: their two hashes and
    their bytes."""

    find: list[int]
    check: np.ndarray  # uint64
    raw: list[bytes]


def hash_strings(
    sc: Words, start: np.ndarray, length: np.ndarray, masked: list[np.ndarray]
) -> tuple[np.ndarray, HashedStrings]:
    """Batch-local codes of the strings ``buf[start:start+length]`` (given as masked words,
    see :func:`~.words.quoted_strings`), and the distinct strings they index.

    Two strings with the same first hash but different second hashes (a collision, never
    seen) get the local code -1: those records go to the tolerant parser.
    """
    if not len(start):
        return np.zeros(0, dtype=np.int32), HashedStrings([], np.zeros(0, np.uint64), [])
    h1 = length.astype(np.uint64) * HASH_MULTIPLIERS[0]
    h2 = length.astype(np.uint64) * HASH_MULTIPLIERS[1] + np.uint64(1)
    for k, w in enumerate(masked):
        h1 = (h1 ^ w) * HASH_MULTIPLIERS[(k + 2) % 4]
        h1 ^= h1 >> FIND_HASH_SHIFT
        h2 = (h2 + w) * HASH_MULTIPLIERS[(k + 3) % 4]
        h2 ^= h2 >> CHECK_HASH_SHIFT
    local, uniques = factorize(h1)
    some = np.empty(len(uniques), dtype=np.int64)
    some[local] = np.arange(len(h1))  # any occurrence will do: all are checked against it
    raw = [bytes(sc.bytes[start[i] : start[i] + length[i]]) for i in some.tolist()]
    check = h2[some]
    local = np.where(check[local] == h2, local, -1).astype(np.int32)
    return local, HashedStrings(uniques.tolist(), check, raw)


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes of well-mixed 64-bit hashes, and their distinct values in order of first
    occurrence (as ``pandas.factorize``, without importing pandas): one slot per value from
    its top bits, a sort only when two distinct values share a slot.

    >>> codes, uniques = factorize(np.array([7 << 60, 3 << 60, 7 << 60], dtype=np.uint64))
    >>> codes.tolist(), (uniques >> np.uint64(60)).tolist()
    ([0, 1, 0], [7, 3])
    """
    n = len(values)
    slot = (values >> np.uint64(64 - SLOT_BITS)).astype(np.intp)
    first = np.full(1 << SLOT_BITS, n, dtype=np.intp)
    np.minimum.at(first, slot, np.arange(n))  # first occurrence of each slot's value
    if (values[first[slot]] == values).all():
        firsts = np.sort(first[first < n])
        code = np.empty(1 << SLOT_BITS, dtype=np.intp)
        code[slot[firsts]] = np.arange(len(firsts))
        return code[slot], values[firsts]
    uniques, where, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(where)
    rank = np.empty(len(order), dtype=np.intp)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)], uniques[order]


class Vocab:
    """The codes of one read (used by the reading thread only)."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.by_string: dict[str, int] = {}
        self.by_hash: dict[int, int] = {}
        self.check: list[int] = []  # per code: second hash of its fast form (0: none yet)

    def code_of(self, s: str) -> int:
        """Code of ``s``."""
        code = self.by_string.get(s)
        if code is None:
            code = len(self.strings)
            self.strings.append(s)
            self.by_string[s] = code
            self.check.append(0)
        return code

    def codes_of(self, hashed: HashedStrings) -> np.ndarray:
        """Codes of the strings of :func:`hash_strings` (-1: a collision with a string of an
        earlier batch)."""
        codes = np.empty(len(hashed.find), dtype=np.int32)
        for u, (h1, h2, raw) in enumerate(
            zip(hashed.find, hashed.check.tolist(), hashed.raw, strict=True)
        ):
            code = self.by_hash.get(h1)
            if code is None:
                code = self.code_of(raw.decode("utf-8", "replace"))
                self.by_hash[h1] = code
                self.check[code] = h2
            codes[u] = code if self.check[code] == h2 else -1
        return codes
