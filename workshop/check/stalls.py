"""Stalls: collectives that some ranks submitted and the others never will.

Every rank of ``workshop check`` rewrites ``rank.<N>.progress`` each second (see
:meth:`workshop.check.observe.Recorder.progress`): counters that move whenever the rank makes
progress (a step, a batch, a collective submitted or completed), and the Horovod collectives
it has submitted and not yet completed (``pending``: op, name, the script line that submitted
it, its age). :class:`StallWatch` reads them while the script runs: when no counter of any rank
has moved for ``stall_s`` seconds and every rank is waiting inside a collective, no rank can go
on: a stall. The check then stops the ranks and :func:`stall_message` says which collective
which ranks submitted and which did not, from which line, the likely cause and the fix.

Why not Horovod's own stall inspector (``HOROVOD_STALL_CHECK_TIME_SECONDS``): with the Gloo
controller that ``workshop check`` uses, Horovod 0.28.1 logged no stall warning here in 30 s
at a 2 s check time (a rank-0-only allreduce, response cache on and off), while the same script
under ``--mpi`` logged "Missing ranks: 1: [allreduce.x]" within 14 s. A rank that is only slow
(rank 0 evaluating while rank 1 waits in the next step's allreduce) is not a stall: it is not
waiting in a collective, and its progress moves again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workshop.check.evidence import ranks_text
from workshop.check.steps import unequal_steps

#: A run in which no rank made progress for this long while every rank waited in a
#: collective is stalled.
STALL_S = 20.0
#: A rank whose progress file has not been rewritten (its ``beat``) for this long is starved of
#: CPU (a loaded machine), not seen waiting: its counters prove nothing, the clock restarts.
STARVED_S = 5.0
#: How often a rank rewrites its progress: the ages it gives are at most this old.
PROGRESS_PERIOD_S = 1.0


@dataclass
class Stall:
    """A confirmed stall: each rank's collectives in flight, and how long no rank moved."""

    pending: dict[int, list[dict]]
    frozen_s: float

    @property
    def waited_s(self) -> float:
        """How long the oldest collective in flight had waited (since the stall began)."""
        return max(item.get("age_s", 0.0) for items in self.pending.values() for item in items)


def _keys(items: list[dict]) -> frozenset:
    """What a rank waits for: its collectives' names (op and line where one has none)."""
    return frozenset(item.get("name") or (item.get("op"), item.get("where")) for item in items)


@dataclass
class StallWatch:
    """Fed the ranks' progress (``{rank: {"counters": str, "pending": [...]}`` or None before
    a rank has written any) every second or so; :meth:`feed` returns a :class:`Stall` once
    nothing has moved for ``stall_s`` seconds while every rank waits in a collective and not
    all of them wait for the same ones (the same ones, for that long: a slow collective)."""

    stall_s: float = STALL_S
    last: tuple | None = None
    since: float = 0.0
    beats: dict = field(default_factory=dict)

    def feed(self, progress: dict[int, dict | None], now: float) -> Stall | None:
        counters = tuple(
            (rank, (found or {}).get("counters")) for rank, found in sorted(progress.items())
        )
        if self._starved(progress, now) or counters != self.last:
            self.last, self.since = counters, now
            return None
        if any(not found or not found.get("pending") for found in progress.values()):
            return None
        if now - self.since < self.stall_s:
            return None
        # Every rank's oldest collective must have waited the stall timeout too (give or take
        # the progress period): collectives submitted a moment ago are not a stall.
        youngest = min(max(i.get("age_s", 0.0) for i in found["pending"]) for found in
                       progress.values())  # fmt: skip
        if youngest < self.stall_s - PROGRESS_PERIOD_S:
            return None
        if len({_keys(found["pending"]) for found in progress.values()}) == 1:
            return None  # all wait for the same collectives: slow, not missing a rank
        return Stall(
            {rank: found["pending"] for rank, found in progress.items()}, now - self.since
        )

    def _starved(self, progress: dict[int, dict | None], now: float) -> bool:
        """True while a rank has not rewritten its progress for :data:`STARVED_S` (progress
        without a ``beat``, from an older runner, counts as fresh)."""
        starved = False
        for rank, found in progress.items():
            beat = (found or {}).get("beat")
            seen = self.beats.get(rank)
            if beat is None or seen is None or seen[0] != beat:
                self.beats[rank] = (beat, now)
            elif now - seen[1] > STARVED_S:
                starved = True
        return starved


def _names(items: list[dict]) -> str:
    names = [item.get("name") or "(no name)" for item in items]
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    if len(names) == 1:
        return f"'{shown}'"
    return f"of {len(names)} tensors ({shown})"


def stall_message(stall: Stall, observations: dict[int, dict], np: int, style: str) -> str:
    """Plain words for a stall: what each rank waited in, from which line, which ranks never
    submitted it, the likely cause and the fix."""
    named = {
        rank: {item.get("name") for item in items if item.get("name")}
        for rank, items in stall.pending.items()
    }
    lines = [
        f"the ranks stalled: for {stall.frozen_s:.0f} s no rank made progress, each waiting "
        f"in a {'' if style == 'ddp' else 'Horovod '}collective that another rank never "
        "submitted (the oldest had waited "
        f"{stall.waited_s:.0f} s)"
    ]
    for rank in sorted(stall.pending):
        groups: dict[tuple, list[dict]] = {}
        for item in stall.pending[rank]:
            key = (item.get("op"), item.get("where"), item.get("via"))
            groups.setdefault(key, []).append(item)
        for (op, where, via), items in groups.items():
            mine = {item.get("name") for item in items}
            never = sorted(r for r in stall.pending if r != rank and not mine & named[r])
            text = f"  rank {rank} waits in {op} {_names(items)}"
            text += f", submitted at {where}" if where else ""
            text += f" by {via}" if via else ""
            text += f"; never submitted by {ranks_text(never)}" if never else ""
            lines.append(text)
    lines.append("  " + _cause(stall, observations, np, style))
    return "\n".join(lines)


# Every collective must be called by every rank, in the same order, with the same name.
_RULE = (
    "a Horovod collective (allreduce, broadcast, allgather, ...) completes only when every "
    "rank has submitted it under the same name"
)


def _vias(items: list[dict]) -> frozenset:
    return frozenset(item.get("via") for item in items)


def _rank_only_callback(stall: Stall) -> str | None:
    """The cause when some ranks wait in a collective that a Keras callback submitted and the
    others in collectives of something else (the next step's gradients): a callback that only
    those ranks have."""
    callbacks = {
        rank: sorted(v[len("callback ") :] for v in _vias(items) if v and v.startswith("callback"))
        for rank, items in stall.pending.items()
    }
    having = sorted(rank for rank, found in callbacks.items() if found)
    others = sorted(rank for rank in callbacks if rank not in having)
    if not having or not others:
        return None
    names = sorted({name for rank in having for name in callbacks[rank]})
    elsewhere = sorted({v for r in others for v in _vias(stall.pending[r]) if v})
    theirs = f" (of {', '.join(elsewhere)}: the next step)" if elsewhere else ""
    return (
        f"Likely cause: a Keras callback that only {ranks_text(having)} "
        f"{'has' if len(having) == 1 else 'have'}: {ranks_text(having)} "
        f"{'waits' if len(having) == 1 else 'wait'} in the "
        f"collective of {', '.join(names)}, {ranks_text(others)} in other collectives{theirs}; "
        "the callback was added on some ranks only (callbacks.append(...) under `if "
        f"hvd.rank() == 0:`): {_RULE}. Fix: give every rank Horovod's callbacks "
        f"(callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0), "
        f"hvd.callbacks.{names[0]}(), ...] on every rank); only ModelCheckpoint, TensorBoard "
        "and printing belong under `if hvd.rank() == 0:`"
    )


def _names_differ_by_rank(stall: Stall) -> bool:
    """Every rank waits in collectives from one line, through the same path, each under a name
    of its own, and the names are the same once each rank's number is taken out of its own
    (``acc0`` on rank 0, ``acc1`` on rank 1)."""
    items = [item for found in stall.pending.values() for item in found]
    names = [item.get("name") for item in items]
    if len({item.get("where") for item in items}) != 1 or None in names:
        return False
    if len(set(names)) != len(names) or len({_vias(f) for f in stall.pending.values()}) != 1:
        return False
    unranked = {
        frozenset(item["name"].replace(str(rank), "{rank}") for item in found)
        for rank, found in stall.pending.items()
    }
    return len(unranked) == 1


def _cause(stall: Stall, observations: dict[int, dict], np: int, style: str) -> str:
    """The likely cause of a stall and its fix, from where each rank waited."""
    ranked = [observations[r] for r in sorted(observations)]
    if len(ranked) == np and unequal_steps(ranked):
        return (
            "Likely cause: the ranks make different numbers of steps per epoch (unequal "
            "shards), so one rank reached the next collective while another was still "
            f"training: {_RULE}. Fix: give every rank the same number of batches "
            "(DistributedSampler pads the shards; or drop_last=True; or trim the data to a "
            "multiple of hvd.size())"
        )
    if style == "ddp":
        return (
            "Likely cause: a collective inside a branch that only some ranks take (if "
            "dist.get_rank() == 0: ...), while the others went on into DDP's own collectives "
            "(its forward and backward): a torch.distributed collective completes only when "
            "every rank calls it, in the same order. Fix: call it on every rank and use its "
            "result on one: dist.all_reduce(loss) on every rank, then if dist.get_rank() == 0: "
            "print(loss.item() / dist.get_world_size())"
        )
    callback = _rank_only_callback(stall)
    if callback:
        return callback
    if _names_differ_by_rank(stall):
        return (
            "Likely cause: the ranks gave the same collective different names (a name built "
            f"from hvd.rank()?): {_RULE}. Fix: use one name on every rank, or no name"
        )
    result = "print(acc)" if style == "torch" else "print(acc.numpy())"
    return (
        "Likely cause: a collective inside a branch that only some ranks take (if hvd.rank() "
        f"== 0: ...), or collectives in a different order on different ranks: {_RULE}. Fix: "
        f"call it on every rank and use its result on one: acc = hvd.allreduce(acc, "
        f"name='test_acc') on every rank, then if hvd.rank() == 0: {result}"
    )
