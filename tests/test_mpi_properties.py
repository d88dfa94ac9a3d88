"""Property-based tests: truncated or corrupted profiles give warnings or MpiTraceError, never
another exception, and never a wrong number."""

from __future__ import annotations

import re
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workshop.analysis import mpi as analysis
from workshop.findings import mpi as findings
from workshop.paths import data_path
from workshop.readers.mpitrace import MpiTraceError, parse_mpitrace_bytes, read_mpitrace

SAMPLES = {
    "cpu": data_path("mpi", "seed001-thetagpu-cpu", "mpi_profile.thetagpu-cpu.0").read_bytes(),
    "gpu": data_path("mpi", "seed001-thetagpu-gpu", "mpi_profile.thetagpu-gpu.0").read_bytes(),
    "ours0": data_path("mpi", "mpiprof-exercise-np4", "mpi_profile.exercise2.0").read_bytes(),
    "ours3": data_path("mpi", "mpiprof-exercise-np4", "mpi_profile.exercise2.3").read_bytes(),
}
FULL = {name: parse_mpitrace_bytes(data, source=name) for name, data in SAMPLES.items()}
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read_and_explain(data: bytes) -> None:
    """What `workshop mpi report` does with a file: read it, summarise it, explain it."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mpi_profile.1.0"
        path.write_bytes(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prof = read_mpitrace(path)
        analysis.profile_summary(prof)
        findings.mpi_findings(prof)
        analysis.comm_fraction(prof)
        analysis.message_size_bins(prof)


def test_samples_are_complete():
    assert all(p.complete and not p.warnings for p in FULL.values())


@PROPERTY
@given(name=st.sampled_from(sorted(SAMPLES)), data=st.data())
def test_truncation_keeps_a_prefix_of_the_truth(name, data):
    raw = SAMPLES[name]
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)))
    try:
        part = parse_mpitrace_bytes(raw[:cut], source=name)
    except MpiTraceError as exc:
        # only when the header line itself is missing or cut
        assert cut <= raw.index(b"\n"), str(exc)
        return
    full = FULL[name]
    if part.complete:
        assert raw[cut:].strip() == b"", "a truncated file was reported complete"
        assert not part.warnings
    else:
        assert part.warnings, "an incomplete file without a warning"
    # whatever was read is exactly what the whole file says
    assert part.rank == full.rank and part.ntasks == full.ntasks
    assert part.routines == full.routines[: len(part.routines)]
    assert part.message_sizes == full.message_sizes[: len(part.message_sizes)]
    assert part.tasks == full.tasks[: len(part.tasks)]
    assert all(full.totals[k] == v for k, v in part.totals.items())
    assert all(full.summary[k] == v for k, v in part.summary.items())
    assert set(part.roles) <= set(full.roles)


@PROPERTY
@given(name=st.sampled_from(sorted(SAMPLES)), data=st.data())
def test_truncated_files_can_be_explained(name, data):
    raw = SAMPLES[name]
    cut = data.draw(st.integers(min_value=raw.index(b"\n") + 1, max_value=len(raw)))
    _read_and_explain(raw[:cut])


def _corrupt(raw: bytes, data: st.DataObject) -> bytes:
    kind = data.draw(st.sampled_from(["replace", "insert", "delete", "dup_line", "swap_lines"]))
    pos = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    if kind == "replace":
        byte = data.draw(st.binary(min_size=1, max_size=1))
        return raw[:pos] + byte + raw[pos + 1 :]
    if kind == "insert":
        junk = data.draw(
            st.one_of(st.binary(min_size=1, max_size=12), st.text(max_size=12).map(str.encode))
        )
        return raw[:pos] + junk + raw[pos:]
    if kind == "delete":
        length = data.draw(st.integers(min_value=1, max_value=40))
        return raw[:pos] + raw[pos + length :]
    lines = raw.split(b"\n")
    i = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    j = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    if kind == "dup_line":
        lines.insert(j, lines[i])
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


# An error names the file, the line (and byte, for bytes that are not UTF-8 text) and then, in
# words, what is wrong there, e.g. "mpi_profile.1.0: line 7: not a row of the routine table: ...".
ERROR_AT_A_LINE = r"line \d+(?: \(byte \d+\))?: (?P<what>\S+(?: \S+)+)"


@PROPERTY
@given(name=st.sampled_from(sorted(SAMPLES)), data=st.data())
def test_corruption_gives_an_error_naming_file_line_and_fault_or_a_result(name, data):
    corrupted = _corrupt(SAMPLES[name], data)
    try:
        parse_mpitrace_bytes(corrupted, source="corrupt")
    except MpiTraceError as exc:
        assert re.match(r"corrupt: " + ERROR_AT_A_LINE, str(exc)), str(exc)
        parsed = False
    else:
        parsed = True
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mpi_profile.1.0"
        path.write_bytes(corrupted)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prof = read_mpitrace(path)
        except MpiTraceError as exc:
            # the same verdict from the file as from its bytes, now naming the file
            assert not parsed, f"the bytes parse but the file does not: {exc}"
            match = re.match(re.escape(str(path)) + ": " + ERROR_AT_A_LINE, str(exc))
            assert match, str(exc)
            return
        assert parsed, "the file reads but its bytes do not"
        # a file that reads can be summarised and explained (no exception of any kind)
        analysis.profile_summary(prof)
        findings.mpi_findings(prof)
        analysis.comm_fraction(prof)
        analysis.message_size_bins(prof)


@PROPERTY
@given(data=st.binary(max_size=400))
def test_random_bytes_are_rejected_cleanly(data):
    with pytest.raises(MpiTraceError, match=r"^random: line \d+"):
        parse_mpitrace_bytes(data, source="random")
