"""The bytes to read: a read-only memory map of a plain file, or decompressed gzip data."""

from __future__ import annotations

import mmap
import zlib
from pathlib import Path
from typing import Any

GZIP_MAGIC = b"\x1f\x8b"
GZIP_WINDOW_BITS = 16 + 15  # zlib: expect a gzip header, the largest window


class Source:
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


def open_file(path: Path) -> tuple[Source, list[str], int | None]:
    """Map a plain file, or decompress a gzip one.

    Returns:
        (source, problems, cut_at): ``cut_at`` is the decompressed length when the gzip stream
        is cut or damaged.
    """
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == GZIP_MAGIC:
        data, problems, cut_at = gunzip(path.read_bytes())
        return Source(data), problems, cut_at
    if path.stat().st_size == 0:
        return Source(b""), [], None
    fh = open(path, "rb")  # noqa: SIM115 - closed by Source.close
    try:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (ValueError, OSError):
        data = fh.read()
        fh.close()
        return Source(data), [], None
    return Source(mm, fh), [], None


def from_bytes(data: bytes) -> tuple[Source, list[str], int | None]:
    """Data held in memory, decompressed when it is gzip (returns as :func:`open_file`)."""
    if data[:2] == GZIP_MAGIC:
        out, problems, cut_at = gunzip(data)
        return Source(out), problems, cut_at
    return Source(bytes(data)), [], None


def gunzip(raw: bytes) -> tuple[bytes, list[str], int | None]:
    """Decompress gzip data, keeping what can be read from a cut or damaged stream."""
    out = bytearray()
    problems: list[str] = []
    pos = 0
    while pos < len(raw):
        dec = zlib.decompressobj(wbits=GZIP_WINDOW_BITS)
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
