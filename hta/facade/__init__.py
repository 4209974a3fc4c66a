"""Groups of ``TraceAnalysis`` methods, one module per family of analyses.

Each mixin expects ``self.t`` (the loaded job, a :class:`~hta.model.job.Job`) and
``self.rules``; the methods are thin: they call a function of :mod:`hta.analysis`,
optionally show the figure of :mod:`hta.plots`, and return the DataFrame.
"""
