"""Batch-size and learning-rate findings in words (``workshop scaling report``): sentences with
their numbers, built from the tables of :mod:`workshop.analysis.lr`.
"""

from __future__ import annotations

import pandas as pd

from workshop.analysis.lr import accuracy_vs_batch, compare_lr_rules

__all__ = ["lr_findings"]


def lr_findings(runs: pd.DataFrame) -> list[str]:
    """State the batch-size / learning-rate findings of a sweep as sentences with numbers.

    Args:
        runs: runs DataFrame (see :func:`workshop.analysis.lr.accuracy_vs_batch` and
            :func:`workshop.analysis.lr.compare_lr_rules`).

    Returns:
        Lines of text; empty if the runs hold no batch or LR comparison.
    """
    lines: list[str] = []
    try:
        acc = accuracy_vs_batch(runs)
    except ValueError:
        acc = None
    if acc is not None and len(acc) >= 2:
        small, large = acc.iloc[0], acc.iloc[-1]
        worse = large["final_test_accuracy"] < small["final_test_accuracy"]
        change = "falls" if worse else "rises"
        lines.append(
            f"At a fixed learning rate, test accuracy {change} from "
            f"{small['final_test_accuracy']:.3f} at global batch "
            f"{int(small['global_batch_size'])} to {large['final_test_accuracy']:.3f} at "
            f"{int(large['global_batch_size'])} (same epochs, "
            f"{int(large['global_batch_size']) // int(small['global_batch_size'])}x fewer "
            "steps)."
        )
    try:
        rules = compare_lr_rules(runs)
    except ValueError:
        rules = None
    if rules is not None:
        batch = int(rules["global_batch_size"].iloc[0])
        for _, row in rules.iterrows():
            warm = f", {row['warmup_epochs']:g} warmup epochs" if row["warmup_epochs"] else ""
            lines.append(
                f"Global batch {batch}, LR rule {row['lr_scaling']}{warm} "
                f"(lr {row['lr_effective']:.3g}): final test accuracy "
                f"{row['final_test_accuracy']:.3f}."
            )
    return lines
