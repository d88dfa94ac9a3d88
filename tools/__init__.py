"""Tooling of the repository's checkout, not part of the installed ``workshop`` package: the
book build (``tools.book``) and the notebook runner the tests, the book and the benchmarks use
(``tools.notebook_run``). Importable from the repository root (pytest's ``pythonpath``);
``workshop book`` finds it in the checkout the package is installed from."""
