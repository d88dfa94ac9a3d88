"""Readers: files -> pandas DataFrames."""

from workshop.io.recordings import list_recordings
from workshop.io.runs import read_metrics, read_run, read_summary

__all__ = ["list_recordings", "read_metrics", "read_run", "read_summary"]
