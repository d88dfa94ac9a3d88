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

The stages, one module each:

* :mod:`.source`: the bytes to read (a memory map of a plain file, or of a gzip file
  decompressed into a temporary file).
* :mod:`.scanner`: the fast path. Record starts are found with numpy, and Horovod's fixed field
  layout is checked and decoded column-wise with 8-byte word gathers (:mod:`.words`); strings
  become small integer codes (:mod:`.vocab`), events become columns (:mod:`.events`).
* :mod:`.records`: the tolerant record-by-record JSON parser, for whatever does not follow that
  exact layout (another writer, a damaged range, the last record of a cut file), so every
  readable record is kept and every unreadable byte range is reported with its offset.
* :mod:`.read`: the entry points; the scanner's chunks, stitched together with the tolerant
  parser's records, in file order (:mod:`.stitch`), all at once or batch by batch.
* :mod:`.stream`: the streaming pass, for files of any size: batches paired into spans with
  only the open spans carried between them; :mod:`.summary` counts them
  (``workshop timeline summary``), :mod:`.slicing` writes a window of them
  (``workshop timeline slice`` and ``repair``), :mod:`.steps` finds the window of some steps.
* :mod:`.frames`: event columns -> the spans, ticks and cycles DataFrames.
* :mod:`.write`: a valid, closed copy for chrome://tracing and Perfetto.
"""

from workshop.readers.timeline.model import (
    DTYPE_BYTES,
    Timeline,
    TimelineFormatError,
    TimelineWarning,
)
from workshop.readers.timeline.read import parse_timeline, read_timeline
from workshop.readers.timeline.slicing import slice_file
from workshop.readers.timeline.steps import StepWindow, step_window
from workshop.readers.timeline.summary import summarize_file
from workshop.readers.timeline.write import write_timeline

__all__ = [
    "DTYPE_BYTES",
    "StepWindow",
    "Timeline",
    "TimelineFormatError",
    "TimelineWarning",
    "parse_timeline",
    "read_timeline",
    "slice_file",
    "step_window",
    "summarize_file",
    "write_timeline",
]
