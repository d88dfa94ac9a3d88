"""``init``: hvd.init() ran on every rank."""

from __future__ import annotations

from workshop.check.evidence import Check, ranks_text


def check_init(ranks: list[dict], framework: str | None = None) -> Check:
    """``hvd.init()`` ran on every rank (of the expected framework, when one is given)."""
    n = len(ranks)
    inited = [r for r in ranks if r["init"]]
    if not inited:
        imported = sorted({f for r in ranks for f in r.get("horovod_imported", [])})
        also = f" (it imported horovod.{', horovod.'.join(imported)})" if imported else ""
        return Check(
            False,
            f"hvd.init() never ran on any of the {n} ranks{also}: each process "
            "trained alone, unaware of the others",
        )
    missing = [r["env_rank"] for r in ranks if not r["init"]]
    if missing:
        return Check(
            False, f"hvd.init() ran on {len(inited)} of {n} ranks; not on {ranks_text(missing)}"
        )
    frameworks = sorted({str(r["init"]["framework"]) for r in inited})
    sizes = sorted({r["init"]["size"] for r in inited})
    where = f"horovod.{'/'.join(frameworks)}, size {'/'.join(str(s) for s in sizes)}"
    if framework and frameworks != [framework]:
        return Check(
            False,
            f"hvd.init() ran on {n} of {n} ranks, but with {where}; expected horovod.{framework}",
        )
    if sizes != [n]:
        return Check(
            False,
            f"hvd.init() ran on {n} of {n} ranks but Horovod's size is "
            f"{'/'.join(str(s) for s in sizes)}, not {n}",
        )
    return Check(True, f"hvd.init() ran on {n} of {n} ranks ({where})")
