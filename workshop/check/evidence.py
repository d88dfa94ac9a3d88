"""A practice's verdict (:class:`Check`) and the small helpers every verdict's evidence uses.

The practices' verdicts are in :mod:`workshop.check.practices`, one module each; their fixes in
:mod:`workshop.check.fixes`; step and epoch counting in :mod:`workshop.check.steps`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

CHECK_NAMES = ("init", "broadcast", "averaged", "sharded", "rank0_checkpoint", "lr_scaled")


@dataclass(frozen=True)
class Check:
    """One practice's verdict: ``ok`` True / False / None (warning), the evidence, whether it
    was judged on partial evidence (steps before a crash), and the fix: the line of code that
    makes the practice hold (every FAIL and WARN has one; see :func:`judge`)."""

    ok: bool | None
    evidence: str
    partial: bool = False
    fix: str = ""

    @property
    def label(self) -> str:
        return {True: "OK", False: "FAIL", None: "WARN"}[self.ok]

    def as_partial(self) -> Check:
        """The same verdict, marked as judged on partial evidence (the script crashed)."""
        return replace(self, partial=True)

    def to_dict(self) -> dict:
        """``{"ok", "evidence"}``, ``"fix"`` for a FAIL or WARN, and ``"partial": true`` for a
        verdict on partial evidence."""
        found = {"ok": self.ok, "evidence": self.evidence}
        if self.fix:
            found["fix"] = self.fix
        return found | {"partial": True} if self.partial else found


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def ranks_text(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def differing(per_rank: list[list]) -> tuple[int, int]:
    """(tensors whose hash is not the same on every rank, tensors compared)."""
    count = min(len(tensors) for tensors in per_rank)
    differ = sum(1 for i in range(count) if len({tensors[i][0] for tensors in per_rank}) > 1)
    return differ + max(len(t) for t in per_rank) - count, max(len(t) for t in per_rank)


def no_steps(ranks: list[dict]) -> Check | None:
    missing = [r["env_rank"] for r in ranks if not r["steps"]]
    if missing:
        return Check(
            None,
            f"no optimizer step was seen on {ranks_text(missing)}: nothing to "
            "compare (the checker watches torch.optim optimizers and tf-keras "
            "optimizers' apply_gradients)",
        )
    return None
