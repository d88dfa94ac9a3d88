"""Findings in words: the sentences that reports and lessons print, built from the DataFrames
of :mod:`workshop.analysis` (which holds no prose of this kind)."""

from workshop.findings.timeline import timeline_findings

__all__ = ["timeline_findings"]
