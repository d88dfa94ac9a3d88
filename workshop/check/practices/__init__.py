"""One module per practice ``workshop check`` judges, each a pure function from the ranks'
observations to a :class:`workshop.check.evidence.Check`; :func:`workshop.check.verdicts.judge`
runs them all."""
