"""The bytes to read: a read-only memory map of a plain file, or of a gzip file decompressed
into a temporary file (bytes, for data held in memory)."""

from __future__ import annotations

import io
import mmap
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

GZIP_MAGIC = b"\x1f\x8b"
GZIP_WINDOW_BITS = 16 + 15  # zlib: expect a gzip header, the largest window
GZIP_IN_CHUNK = 1 << 20  # compressed bytes read at a time
GZIP_OUT_CHUNK = 1 << 24  # the most decompressed bytes held at a time


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
    """Map a plain file; or decompress a gzip one into an unnamed temporary file and map that
    (memory holds a chunk of it at a time, not the whole data).

    Returns:
        (source, problems, cut_at): ``cut_at`` is the decompressed length when the gzip stream
        is cut or damaged.
    """
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == GZIP_MAGIC:
        out = tempfile.TemporaryFile()  # noqa: SIM115 - closed by Source.close
        with open(path, "rb") as fh:
            size, problems, cut_at = gunzip_stream(fh.read, out.write)
        out.flush()
        if not size:
            out.close()
            return Source(b""), problems, cut_at
        return Source(mmap.mmap(out.fileno(), 0, access=mmap.ACCESS_READ), out), problems, cut_at
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
        out = bytearray()
        _, problems, cut_at = gunzip_stream(io.BytesIO(data).read, out.extend)
        return Source(bytes(out)), problems, cut_at
    return Source(bytes(data)), [], None


def gunzip_stream(
    read: Callable[[int], bytes], write: Callable[[bytes], Any]
) -> tuple[int, list[str], int | None]:
    """Decompress gzip data from ``read`` to ``write``, member after member, a chunk at a time,
    keeping what can be read from a cut or damaged stream.

    Returns:
        (decompressed bytes, problems, cut_at): ``cut_at`` is the decompressed length where
        the stream is cut or damaged (None: whole).
    """
    total = 0
    dec = None
    data = b""
    while True:
        if not data:
            data = read(GZIP_IN_CHUNK)
            if not data:
                break
        if dec is None or dec.eof:
            if dec is not None and not data.strip(b"\0"):
                data = b""  # padding after the last member
                continue
            dec = zlib.decompressobj(wbits=GZIP_WINDOW_BITS)
        try:
            while data and not dec.eof:
                out = dec.decompress(data, GZIP_OUT_CHUNK)
                total += len(out)
                write(out)
                data = dec.unconsumed_tail
            if dec.eof:
                data = dec.unused_data
        except zlib.error as exc:
            return total, [f"gzip data damaged after {total} decompressed bytes ({exc})"], total
    if dec is not None and not dec.eof:
        try:
            out = dec.flush()
        except zlib.error:
            out = b""
        total += len(out)
        write(out)
        return total, [f"gzip data cut after {total} decompressed bytes"], total
    return total, [], None
