"""``init``: hvd.init() ran on every rank."""

from __future__ import annotations

from workshop.check.evidence import Check, ranks_text
from workshop.launch.torchrun import TAKES


def check_init(ranks: list[dict], framework: str | None = None) -> Check:
    """``hvd.init()`` ran on every rank (of the expected framework, when one is given)."""
    n = len(ranks)
    inited = [r for r in ranks if r["init"]]
    imported = sorted({f for r in ranks for f in r.get("horovod_imported", [])})
    call = "init_process_group()" if "ddp" in imported else "hvd.init()"
    if not inited:
        also = f" (it imported horovod.{', horovod.'.join(imported)})" if imported else ""
        if "ddp" in imported:
            also = " (it uses torch.distributed)"
        takes = "" if imported else f"; {TAKES}"
        return Check(
            False,
            f"{call} never ran on any of the {n} ranks{also}: each process "
            f"trained alone, unaware of the others{takes}",
        )
    missing = [r["env_rank"] for r in ranks if not r["init"]]
    if missing:
        return Check(
            False, f"{call} ran on {len(inited)} of {n} ranks; not on {ranks_text(missing)}"
        )
    frameworks = sorted({str(r["init"]["framework"]) for r in inited})
    call = "init_process_group()" if frameworks == ["ddp"] else "hvd.init()"
    sizes = sorted({r["init"]["size"] for r in inited})
    group = "torch.distributed" if frameworks == ["ddp"] else f"horovod.{'/'.join(frameworks)}"
    where = f"{group}, size {'/'.join(str(s) for s in sizes)}"
    if framework and frameworks != [framework]:
        return Check(
            False,
            f"{call} ran on {n} of {n} ranks, but with {where}; expected horovod.{framework}",
        )
    if sizes != [n]:
        return Check(
            False,
            f"{call} ran on {n} of {n} ranks but the group's size is "
            f"{'/'.join(str(s) for s in sizes)}, not {n}",
        )
    return Check(True, f"{call} ran on {n} of {n} ranks ({where})")
