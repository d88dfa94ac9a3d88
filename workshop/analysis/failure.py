"""Which rank started a failed Horovod job, and which ranks failed only as a consequence.

One rule for ``workshop run``, ``workshop check`` and ``workshop diagnose``: each reads how its
ranks ended (:mod:`workshop.readers.exits`) and asks :func:`attribute`. The cause, in this
order of preference:

1. a rank whose node the launcher reported lost (ssh gave up on it, Open MPI lost its daemon
   there: the node or its link went down), the first reported: what the other ranks did
   after that, even an end that looks like a kill from outside, follows from the lost node;
2. a rank that raised an error of its own, was killed from outside (a signal that the
   launcher did not send), left with a status of its own (``sys.exit(N)``), or failed without
   a traceback and without a word of a lost peer: the first of them to end;
3. a rank that ended without a trace;
4. a rank that finished while the others still waited on it (``sys.exit(0)``, a ``return``,
   an early stop only it decided), when the others then failed;
5. Horovod refusing a collective the ranks submitted differently ("Mismatched ..."): the
   script's own mistake, on every rank;
6. else the first rank that failed.

Everything else that failed is a consequence: Horovod's "has been shut down", a lost peer
(Gloo's "Connection reset by peer", MPI's errors), a timeout waiting for a peer, the
launcher's SIGTERM after the first failure.
"""

from __future__ import annotations

import math

__all__ = ["attribute"]


def _order(end: dict) -> tuple[float, float, int]:
    """When a rank ended, as well as it is known: its own time, else its place in the
    launcher's reports, else never (then by rank)."""
    time, order = end.get("time"), end.get("order")
    return (
        time if time is not None else math.inf,
        order if order is not None else math.inf,
        end["rank"],
    )


def _own_failure(end: dict) -> bool:
    """A failure of the rank's own: an error that is not a lost peer's or Horovod's refusal,
    a signal from outside, an exit status of its own, or a failure without a traceback and
    without a word of a lost peer (a log that ends in "Killed")."""
    state = end["state"]
    return (
        state in ("killed", "exited")
        or (state == "raised" and end["kind"] == "own")
        or (state == "failed" and not end.get("peer_words"))
    )


def attribute(ends: dict[int, dict]) -> dict | None:
    """The rank that started the failure, the others that failed on their own, and the
    consequences.

    Args:
        ends: how each rank ended (:func:`workshop.readers.exits.rank_ends` or
            :func:`~workshop.readers.exits.ends_from_observations`).

    Returns:
        None when no rank failed, else ``{"cause": end, "also": [end, ...], "consequences":
        [end, ...]}``: ``cause`` with ``how`` added (``lost``, ``raised``, ``killed``,
        ``exited``, ``vanished``, ``left first``, ``collective``, ``failed``), ``also`` the
        other ranks whose failure is of the same tier (another error of its own, the same
        mismatch on another rank, another rank of a lost node), ``consequences`` the rest of
        the failed ranks, each in rank order.

    >>> ends = {0: {"rank": 0, "state": "raised", "kind": "peer", "time": 2.0, "order": None},
    ...         1: {"rank": 1, "state": "raised", "kind": "own", "time": 1.0, "order": None}}
    >>> found = attribute(ends)
    >>> found["cause"]["rank"], found["cause"]["how"], [e["rank"] for e in found["consequences"]]
    (1, 'raised', [0])
    """
    failed = [e for e in ends.values() if e["state"] != "ok"]
    if not failed:
        return None
    finished = [e for e in ends.values() if e["state"] == "ok"]
    tiers = (
        ([e for e in failed if e["state"] == "lost"], None),
        ([e for e in failed if _own_failure(e)], None),
        ([e for e in failed if e["state"] == "vanished"], None),
        (finished, "left first"),
        ([e for e in failed if e["kind"] == "collective"], "collective"),
        (failed, None),
    )
    tier, how = next((tier, how) for tier, how in tiers if tier)
    tier = sorted(tier, key=_order)
    cause = tier[0] | {"how": how or tier[0]["state"]}
    if how == "left first":  # the rank that finished first; the others that finished are fine
        tier = tier[:1]
    also = sorted(tier[1:], key=lambda e: e["rank"])
    named = {cause["rank"], *(e["rank"] for e in also)}
    consequences = sorted((e for e in failed if e["rank"] not in named), key=lambda e: e["rank"])
    return {"cause": cause, "also": also, "consequences": consequences}
