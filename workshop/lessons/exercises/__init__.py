"""The lessons' exercises and findings, one registry (:mod:`.registry` says how to add one);
``wk.exercise`` and ``wk.finding`` are :func:`.registry.exercise` and :func:`.registry.finding`.
The checking engine is :mod:`.engine` (``wk.exercises``). Names are imported on first use
(:mod:`workshop.lazy`), and the registry imports a lesson's entries only when one of its ids
is asked for.
"""

from workshop.lazy import exports

__getattr__, __dir__, __all__ = exports(
    __name__,
    {
        "entries": ["Exercise", "Finding", "Slip"],
        "registry": [
            "FINDINGS",
            "LESSONS",
            "LESSON_MODULES",
            "REGISTRY",
            "Prose",
            "entry",
            "exercise",
            "expected",
            "finding",
            "lesson",
            "recorded",
            "slips",
            "tolerances_of",
        ],
    },
)
