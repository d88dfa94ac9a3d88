"""Findings in words: the sentences that reports (``workshop timeline report``, ``workshop mpi
report``, ``workshop scaling report``, ``workshop diagnose``) and lessons print, built from the
DataFrames of :mod:`workshop.analysis` (which holds no prose of this kind)."""

from workshop.lazy import exports

__getattr__, __dir__, __all__ = exports(
    __name__,
    {
        "diagnose": [
            "diagnose_run",
            "diagnose_text",
        ],
        "lr": [
            "lr_findings",
        ],
        "mpi": [
            "mpi_findings",
        ],
        "scaling": [
            "plateau_findings",
            "scaling_findings",
        ],
        "timeline": [
            "timeline_findings",
        ],
        "torch_trace": [
            "torch_trace_findings",
        ],
    },
)
