"""What ``workshop check`` found (:class:`Report`): the verdict on each practice, the outcome and
its exit code, as the text a learner reads and the ``--json`` document."""

from __future__ import annotations

from dataclasses import dataclass, field

from workshop.check.verdicts import Check


@dataclass
class Report:
    """What ``workshop check`` found.

    Attributes:
        script: the script checked.
        np: number of ranks.
        framework: the Horovod framework the script initialised (``ddp``: a PyTorch DDP
            script's ``init_process_group``; None when it did not).
        checks: practice name -> :class:`Check` (``ok`` True/False/None, ``evidence``), in
            the order of :data:`workshop.check.verdicts.CHECK_NAMES`.
        exit_code: 0 every check holds (warnings allowed), 1 one failed, 2 the script crashed,
            stalled, was stopped by the timeout or the check was interrupted (the checks are
            then still judged from the steps that ran, each marked ``partial``).
        seconds: wall time of the whole check.
        error: why the script was not judged to its end (crash with rank and traceback,
            stall, timeout, interruption), or None.
        output: the tail of the ranks' combined output (horovodrun's ``[rank]<stream>`` lines).
        stalled: the ranks stalled in a collective that not every rank submitted.
        stalled_for_s: how long the oldest collective in flight had waited when the check
            stopped the stalled ranks (from the stall's start to the report), or None.
        interrupted: the signal that stopped the check (``SIGINT``, ``SIGTERM``, ``SIGHUP``), or
            None.
        traceback: the full traceback of the rank that crashed first ("" when none did);
            ``error`` shows it with the library and checker frames folded.
    """

    script: str
    np: int
    framework: str | None
    checks: dict[str, Check]
    exit_code: int
    seconds: float
    error: str | None = None
    output: str = field(default="", repr=False)
    stalled: bool = False
    interrupted: str | None = None
    stalled_for_s: float | None = None
    traceback: str = field(default="", repr=False)

    def to_dict(self) -> dict:
        """The ``workshop check --json`` document."""
        return {
            "checks": {name: check.to_dict() for name, check in self.checks.items()},
            "exit_code": self.exit_code,
            "script": self.script,
            "np": self.np,
            "framework": self.framework,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "stalled": self.stalled,
            "stalled_for_s": self.stalled_for_s,
            "interrupted": self.interrupted,
            "traceback": self.traceback or None,
        }

    def text(self, verbose: bool = False) -> str:
        """One line per practice (OK / FAIL / WARN, name, evidence), then the outcome;
        ``verbose`` adds the crashed rank's full traceback."""
        framework = f"horovod.{self.framework}" if self.framework else "Horovod not seen"
        if self.framework == "ddp":
            framework = "torch.distributed DDP, torchrun"
        lines = [f"workshop check {self.script} (np={self.np}, {framework}): {self.seconds:.1f} s"]
        if self.error:
            lines.append(self.error)
        width = max(len(name) for name in self.checks)
        for name, check in self.checks.items():
            partial = "(partial) " if check.partial else ""
            lines.append(f"  {check.label:<4}  {name:<{width}}  {partial}{check.evidence}")
            if check.fix:
                lines.append(f"  {'':<4}  {'':<{width}}  fix: {check.fix}")
        failed = [name for name, check in self.checks.items() if check.ok is False]
        outcome = {
            0: "every practice holds"
            + (" (see the warnings)" if any(c.ok is None for c in self.checks.values()) else ""),
            1: f"{len(failed)} of {len(self.checks)} practices missing: {', '.join(failed)}",
            2: ("the check was interrupted: " if self.interrupted else "")
            + "the script did not run to the end: "
            + (
                "the verdicts above come from what ran before it stopped (partial)"
                if any(c.partial for c in self.checks.values())
                else "not judged"
            ),
        }[self.exit_code]
        lines.append(f"exit code {self.exit_code}: {outcome}")
        if verbose and self.traceback:
            lines += ["", "full traceback of the rank that crashed first:"]
            lines.append(self.traceback.rstrip())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        """In IPython / Jupyter, a report shown as a cell's value prints as its table."""
        printer.text(self.text())
