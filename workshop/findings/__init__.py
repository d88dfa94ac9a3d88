"""Findings in words: the sentences that reports (``workshop timeline report``, ``workshop mpi
report``, ``workshop scaling report``, ``workshop diagnose``) and lessons print, built from the
DataFrames of :mod:`workshop.analysis` (which holds no prose of this kind)."""

from workshop.findings import lr_lesson, scaling_lesson  # lessons 07 and 06 (wk.findings.*)
from workshop.findings.diagnose import diagnose_run, diagnose_text
from workshop.findings.lr import lr_findings
from workshop.findings.mpi import mpi_findings
from workshop.findings.scaling import plateau_findings, scaling_findings
from workshop.findings.timeline import timeline_findings

__all__ = [
    "diagnose_run",
    "diagnose_text",
    "lr_findings",
    "lr_lesson",
    "mpi_findings",
    "plateau_findings",
    "scaling_findings",
    "scaling_lesson",
    "timeline_findings",
]
