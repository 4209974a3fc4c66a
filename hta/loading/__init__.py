"""Deprecated package: its modules moved to :mod:`hta.kineto` (the Kineto file format)
and :mod:`hta.job` (loading a job). Old imports keep working with a warning; see
:data:`hta._moved.MOVED`."""
