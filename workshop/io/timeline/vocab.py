"""Strings (names, dtypes, shapes) coded as small integers, shared by all readers of one file."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd

from workshop.io.timeline.words import Words

# Odd 64-bit multipliers (golden ratio, xxHash primes) and xor-shifts mix each string's words
# into two independent hashes.
HASH_MULTIPLIERS = (
    np.uint64(0x9E3779B97F4A7C15),
    np.uint64(0xC2B2AE3D27D4EB4F),
    np.uint64(0x165667B19E3779F9),
    np.uint64(0x27D4EB2F165667C5),
)
FIND_HASH_SHIFT = np.uint64(29)
CHECK_HASH_SHIFT = np.uint64(31)


class Vocab:
    """Strings (names, dtypes, shapes) coded as small integers."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.by_string: dict[str, int] = {}
        self.by_hash: dict[int, int] = {}
        self.check: list[np.uint64] = []  # per code: second hash of its fast form
        self.lock = threading.Lock()

    def code_of(self, s: str) -> int:
        """Code of ``s`` (the tolerant parser runs while scan workers encode)."""
        with self.lock:
            return self._code_of(s)

    def _code_of(self, s: str) -> int:
        """Code of ``s``; the caller holds ``lock``."""
        code = self.by_string.get(s)
        if code is None:
            code = len(self.strings)
            self.strings.append(s)
            self.by_string[s] = code
            self.check.append(np.uint64(0))
        return code

    def encode(
        self, sc: Words, start: np.ndarray, length: np.ndarray, masked: list[np.ndarray]
    ) -> np.ndarray:
        """Codes of ``buf[start:start+length]`` (strings as masked words).

        Two independent 64-bit hashes of the words: the first finds the code, the second
        confirms it; a mismatch (a collision, never seen) returns -1 for the slow path.
        """
        if not len(start):
            return np.zeros(0, dtype=np.int32)
        h1 = length.astype(np.uint64) * HASH_MULTIPLIERS[0]
        h2 = length.astype(np.uint64) * HASH_MULTIPLIERS[1] + np.uint64(1)
        for k, w in enumerate(masked):
            h1 = (h1 ^ w) * HASH_MULTIPLIERS[(k + 2) % 4]
            h1 ^= h1 >> FIND_HASH_SHIFT
            h2 = (h2 + w) * HASH_MULTIPLIERS[(k + 3) % 4]
            h2 ^= h2 >> CHECK_HASH_SHIFT
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
                    code = self._code_of(raw.decode("utf-8", "replace"))
                    self.by_hash[hv] = code
                    self.check[code] = h2[i]
                codes[u] = code
            check = np.array(self.check, dtype=np.uint64)
        out = codes[inverse]
        same = check[out] == h2
        return np.where(same, out, -1).astype(np.int32)
