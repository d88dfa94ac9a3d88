"""Plots: ``plot_*(df, *, ax=None) -> Axes``, matplotlib only, no analysis inside.

Every name is also reachable through its module, e.g. ``plot.timeline``.
"""

from workshop.lazy import exports

__getattr__, __dir__, __all__ = exports(
    __name__,
    {
        "lr": [
            "plot_accuracy_curves",
            "plot_accuracy_vs_batch",
            "plot_lr_schedules",
            "plot_train_test_gap",
            "run_label",
        ],
        "mpi": [
            "plot_comm_vs_elapsed",
            "plot_message_sizes",
            "plot_routine_times",
        ],
        "parallelism": [
            "plot_demo_events",
            "plot_exchange_costs",
            "plot_loss",
            "plot_memory",
            "plot_ring_allreduce",
            "plot_step_breakdown",
        ],
        "scaling": [
            "plot_batch_size",
            "plot_comm_fit",
            "plot_efficiency",
            "plot_epoch_times",
            "plot_prediction",
            "plot_ratio_spread",
            "plot_speedup",
            "plot_sync",
        ],
        "timeline": [
            "phase_color",
            "plot_allreduce_overlap",
            "plot_breakdown",
            "plot_lateness_heatmap",
            "plot_negotiation_share",
            "plot_timeline_gantt",
            "plot_two_threads",
        ],
        "torch_trace": [
            "plot_torch_trace",
        ],
        "tuning": [
            "plot_autotune",
            "plot_autotune_progress",
            "plot_knob_effect",
            "plot_tuning",
        ],
    },
    modules=(
        "lr",
        "mpi",
        "parallelism",
        "scaling",
        "timeline",
        "torch_trace",
        "tuning",
    ),
)
