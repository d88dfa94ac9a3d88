"""Plots: ``plot_*(df, *, ax=None) -> Axes``, matplotlib only, no analysis inside.

Every name is also reachable through its module, e.g. ``plot.timeline``.
"""

from workshop.plot import lr, mpi, parallelism, scaling, timeline, tuning
from workshop.plot.lr import (
    plot_accuracy_curves,
    plot_accuracy_vs_batch,
    plot_lr_schedules,
    plot_train_test_gap,
    run_label,
)
from workshop.plot.mpi import (
    plot_comm_vs_elapsed,
    plot_message_sizes,
    plot_routine_times,
)
from workshop.plot.parallelism import (
    plot_demo_events,
    plot_exchange_costs,
    plot_loss,
    plot_memory,
    plot_ring_allreduce,
    plot_step_breakdown,
)
from workshop.plot.scaling import (
    plot_batch_size,
    plot_comm_fit,
    plot_efficiency,
    plot_epoch_times,
    plot_prediction,
    plot_ratio_spread,
    plot_speedup,
    plot_sync,
)
from workshop.plot.timeline import (
    phase_color,
    plot_allreduce_overlap,
    plot_breakdown,
    plot_lateness_heatmap,
    plot_negotiation_share,
    plot_timeline_gantt,
    plot_two_threads,
)
from workshop.plot.tuning import (
    plot_autotune,
    plot_autotune_progress,
    plot_knob_effect,
    plot_tuning,
)

__all__ = [
    "lr",
    "mpi",
    "parallelism",
    "phase_color",
    "plot_accuracy_curves",
    "plot_accuracy_vs_batch",
    "plot_allreduce_overlap",
    "plot_autotune",
    "plot_autotune_progress",
    "plot_batch_size",
    "plot_breakdown",
    "plot_comm_fit",
    "plot_comm_vs_elapsed",
    "plot_demo_events",
    "plot_efficiency",
    "plot_epoch_times",
    "plot_exchange_costs",
    "plot_knob_effect",
    "plot_lateness_heatmap",
    "plot_loss",
    "plot_lr_schedules",
    "plot_memory",
    "plot_ring_allreduce",
    "plot_message_sizes",
    "plot_negotiation_share",
    "plot_two_threads",
    "plot_prediction",
    "plot_ratio_spread",
    "plot_routine_times",
    "plot_speedup",
    "plot_step_breakdown",
    "plot_sync",
    "plot_timeline_gantt",
    "plot_train_test_gap",
    "plot_tuning",
    "run_label",
    "scaling",
    "timeline",
    "tuning",
]
