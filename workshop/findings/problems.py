"""The problems ``workshop diagnose`` knows, in words: each one's title (:data:`TITLES`), fix
(:data:`PROBLEM_FIXES`) and how to record the evidence its cost needs (:data:`MISSING_HOW`).
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


#: The fix of each problem ``workshop diagnose`` knows.
PROBLEM_FIXES = {
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


#: How to get the evidence a problem's cost needs, after ``needs ...`` in a note.
MISSING_HOW = {
    "straggler": " (workshop run writes them; for your own script: workshop run --script)",
    "input_pipeline": " (workshop run writes them; for your own script: workshop run --script)",
    "small_batch": " (workshop run writes them; for your own script: workshop run --script)",
    "long_cycle_time": " (workshop run records both: --timeline --mark-cycles)",
    "fusion_off": " (workshop run --timeline)",
    "cache_off": " (workshop run --timeline with --cache-capacity 0 records the ticks)",
}
