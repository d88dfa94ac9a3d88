"""Which communication library an op used, from the names of the activities Horovod records
inside it (``NCCL_ALLREDUCE``, ``GLOO_ALLREDUCE``, ``MPI_ALLREDUCE`` ...).

One rule, used by :func:`workshop.analysis.timeline.detect_backend` and by the summary read
without DataFrames (:mod:`.summary`); standard library only.
"""

from __future__ import annotations

LIBRARIES = {"NCCL": "NCCL", "MPI": "MPI", "GLOO": "Gloo", "CCL": "CCL", "DDL": "DDL"}
HIERARCHICAL_MARKS = {"MEMCPY_IN_HOST_BUFFER", "MEMCPY_OUT_HOST_BUFFER"}


def library_of(names: list[str], seen_gloo: bool) -> tuple[str, str]:
    """(library, note) of one op from the activity names inside it (see
    :func:`workshop.analysis.timeline.detect_backend`).

    >>> library_of(["GLOO_ALLREDUCE", "MEMCPY_IN_FUSION_BUFFER"], seen_gloo=True)
    ('Gloo', '')
    """
    libs = {LIBRARIES[n.split("_", 1)[0]] for n in names if n.split("_", 1)[0] in LIBRARIES}
    note = ""
    if "MPI_ALLTOALL" in names and "MPI" in libs:
        others = [n for n in names if n.startswith("MPI_") and n != "MPI_ALLTOALL"]
        if seen_gloo and not others:
            libs.discard("MPI")
            libs.add("Gloo")
            note = "MPI_ALLTOALL is what Gloo's alltoall writes (Gloo ops seen elsewhere)"
        elif not others:
            note = "MPI_ALLTOALL is written by both the MPI and the Gloo alltoall"
            libs.discard("MPI")
            libs.add("MPI or Gloo")
    if libs >= {"NCCL", "MPI"} and (HIERARCHICAL_MARKS & set(names)):
        return "NCCL+MPI (hierarchical)", note or (
            "HOROVOD_HIERARCHICAL_ALLREDUCE: NCCL within a node, MPI across"
        )
    if len(libs) == 1:
        return libs.pop(), note
    if libs:
        return "+".join(sorted(libs)), note
    return "unknown", note or "no library activity recorded inside this op"
