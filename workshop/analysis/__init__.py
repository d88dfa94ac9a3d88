"""Pure analyses: DataFrame in, DataFrame out (no plotting here).

Every name is also reachable through its module, e.g. ``analysis.timeline``.
"""

from workshop.analysis import (  # noqa: F401
    benchmarks,
    cluster,
    commodel,
    lr,
    mpi,
    parallelism,
    scaling,
    timeline,
    tuning,
)
from workshop.analysis.benchmarks import paired_ratios  # noqa: F401
from workshop.analysis.commodel import (  # noqa: F401
    allreduce_ops,
    comm_model_vs_measurement,
    compare_prediction,
    fit_alpha_beta,
    predict_from_run,
    predict_scaling,
    ring_allreduce_time_s,
)
from workshop.analysis.lr import (  # noqa: F401
    accuracy_vs_batch,
    compare_lr_rules,
    lr_findings,
    lr_schedule,
    scaled_lr,
    time_to_accuracy,
    train_test_gap,
)
from workshop.analysis.mpi import (  # noqa: F401
    comm_fraction,
    comm_vs_training,
    compare_profiles,
    compare_summary,
    dominant_routine,
    load_imbalance,
    message_size_bins,
    negotiation_signature,
    profile_summary,
    routine_table,
)
from workshop.analysis.parallelism import (  # noqa: F401
    choose_parallelism,
    compare_runs,
    crossover_bytes,
    data_parallel_balance,
    exchange_costs,
    gpu_memory_bytes,
    layer_table,
    max_param_diff,
    mlp_layer_table,
    model_estimates,
    parallelism_table,
    parameter_server_s,
    pipeline_bubble_fraction,
    stage_utilisation,
    step_times,
    transformer_layer_table,
)
from workshop.analysis.scaling import (  # noqa: F401
    amdahl_fit,
    amdahl_speedup,
    batch_size_plateau,
    first_epoch_overhead,
    infer_throughput_per_worker,
    karp_flatt,
    linear_fit,
    plateau_findings,
    runs_from_epochs,
    scaling_findings,
    scaling_groups,
    speedup_table,
    sync_overhead,
    syncs_per_epoch,
)
from workshop.analysis.timeline import (  # noqa: F401
    allreduce_overlap,
    backend,
    breakdown,
    compare_overlap,
    compare_timelines,
    detect_backend,
    early_vs_steady,
    evolution,
    fusion_groups,
    gradient_tensors,
    lateness_matrix,
    negotiation_share,
    negotiation_waits,
    one_time_activities,
    overlap_by_step,
    step_starts,
    stragglers,
    timeline_summary,
)
from workshop.analysis.tuning import (  # noqa: F401
    autotune_summary,
    comm_table,
    gradient_spans,
    knob_effect,
    negotiation_table,
    tuning_table,
)
