"""The problems ``workshop diagnose`` knows, in words: each one's title (:data:`TITLES`) and
fix (:data:`FIXES`), what a number between the healthy range and a finding says
(:data:`BETWEEN`), which found problem explains another's number (:data:`EXPLAINS`,
:data:`WHY`), where a setting's number points when the setting is not there
(:data:`ELSEWHERE`), and which numbers oversubscription distorts (:data:`DISTORTED`).
"""

#: Each problem in a few words, for "most likely: ...".
TITLES = {
    "crashed": "the run did not finish",
    "oversubscribed": "more threads than cores: the ranks share cores",
    "straggler": "a straggler",
    "lr_not_scaled": "the learning rate is not scaled to the global batch",
    "fusion_off": "tensor fusion is off",
    "long_cycle_time": "Horovod's background cycle time is too long",
    "cache_off": "the response cache is off and negotiation is slow",
    "small_batch": "communication-bound steps (too little compute per allreduce)",
    "input_pipeline": "a slow input pipeline",
}


#: The fix of each problem.
FIXES = {
    "crashed": "read the failed rank's log (logs/rank.N.log) for its error; an interrupted run "
    "was stopped from outside (Ctrl-C, a walltime, a closed terminal): run it again",
    "oversubscribed": "run at most one thread per core: fewer ranks per host (-np, or spread "
    "them over more nodes), or fewer threads per rank (--threads-per-rank, OMP_NUM_THREADS); "
    "mpirun refuses more ranks than slots unless told --oversubscribe. Then measure again: "
    "the numbers of this run time the sharing of cores as much as Horovod",
    "straggler": "give every rank a core (or GPU) of its own: move the competing work off the "
    "slow rank's core (mpirun --bind-to core, fewer processes per node), or find why that "
    "rank computes slower",
    "lr_not_scaled": "scale the learning rate with the global batch (--lr-scaling linear, "
    "with warmup for large batches)",
    "fusion_off": "set the fusion threshold back to Horovod's default "
    "(HOROVOD_FUSION_THRESHOLD, 128 MB: --fusion-threshold-mb 128)",
    "long_cycle_time": "set the cycle time back to Horovod's default "
    "(HOROVOD_CYCLE_TIME=1, in ms: --cycle-time-ms 1)",
    "cache_off": "leave the response cache on (Horovod's default; drop --cache-capacity 0 / "
    "HOROVOD_CACHE_CAPACITY=0)",
    "small_batch": "give each allreduce more compute: a larger batch per worker, or "
    "--backward-passes-per-step N (accumulate gradients), or fewer ranks per node",
    "input_pipeline": "load the data in background workers and prefetch the next batch",
}


#: The problems whose numbers an oversubscribed run distorts: a rank that waits for a core
#: computes slower (a straggler), its allreduces wait for the others (communication-bound),
#: and Horovod's background thread starts its cycles late.
DISTORTED = ("straggler", "small_batch", "long_cycle_time", "cache_off", "input_pipeline")


#: What a number between the healthy range and a finding's threshold says. Seen for the
#: straggler on fresh runs of benchmarks/straggler_signal.py with one busy process beside a
#: rank (recorded 2026-11-26 on a busy machine, in git history): three of twelve straggler runs
#: gave 1.19-1.43, and three of twelve healthy runs, all unpinned, 1.32-1.39 (the scheduler
#: left one rank slower), where those healthy runs reached 1.16 and a finding started at 1.45:
#: there a mild straggler and a healthy run overlap. (With three busy processes on a quiet
#: machine, data/benchmarks/straggler-signal/, no fresh run fell between. Since 2026-11-27 the
#: CPU-wait gap names such mild stragglers where other work ran: straggler-cpu-wait/.)
BETWEEN = {
    "straggler": "a rank sharing its core with other work can look like this, and so can a "
    "healthy run on a busy machine; record the run again on a quiet machine, or compare with "
    "a healthy run of your own (--baseline).",
}


BETWEEN_DEFAULT = (
    "healthy runs vary more than the few recorded ones show; record the run again, or compare "
    "with a healthy run of your own (--baseline)."
)


#: The numbers a found problem moves too, and why. A straggler: the other ranks' negotiations
#: wait for it, and its busy core slows Horovod's background thread (the straggler benchmark's
#: cache-off runs negotiate up to 18 % of a step, and cycle 2-7 ms apart at a 1 ms cycle
#: time). A long cycle time: every allreduce waits for the next cycle, so negotiations last
#: long and even the least-waiting rank waits much of each step (capstone case 4).
EXPLAINS = {
    "straggler": ("cache_off", "long_cycle_time"),
    "long_cycle_time": ("cache_off", "small_batch"),
}


WHY = {
    "straggler": "the other ranks wait for it, its busy core slows Horovod's background thread",
    "long_cycle_time": "every allreduce waits for the next background cycle",
}


#: Where a setting's number points when the setting is not there.
ELSEWHERE = {
    "fusion_off": "the gradients become ready in different background cycles (a slow or "
    "uneven backward pass), not because fusion is off",
    "long_cycle_time": "the background thread is slowed down (busy cores: see the straggler's "
    "number and the machine's load), not by the cycle time",
    "cache_off": "the negotiations wait for a rank that is late (see the straggler's number), "
    "not for the coordinator",
}
