"""``rank0_checkpoint``: files were saved by rank 0 only."""

from __future__ import annotations

from workshop.check.evidence import Check, plural


def check_rank0_checkpoint(ranks: list[dict]) -> Check:
    """Files were saved (torch.save / model.save / save_weights ...) by rank 0 only."""
    saves = {r["env_rank"]: r["saves"] for r in ranks}
    total = sum(len(s) for s in saves.values())
    if total == 0:
        return Check(
            None,
            "no rank saved a file with torch.save / model.save / save_weights "
            "/ tf.train.Checkpoint: nothing to judge",
        )
    others = {rank: s for rank, s in saves.items() if rank != 0 and s}
    if others:
        detail = "; ".join(
            f"rank {rank} saved {plural(len(s), 'file')} "
            f"({', '.join(sorted({x['path'] for x in s})[:3])})"
            for rank, s in others.items()
        )
        return Check(
            False,
            f"{detail}: save on rank 0 only (if hvd.rank() == 0: ...), the "
            "other ranks hold the same model and overwrite or duplicate its files",
        )
    paths = sorted({x["path"] for x in saves[0]})
    return Check(
        True,
        f"{plural(total, 'save')}, all by rank 0 ({', '.join(paths[:3])}"
        f"{', ...' if len(paths) > 3 else ''})",
    )
