"""HTA's ``hta.analyzers`` modules, as thin adapters over this package's analyses.

The analyses themselves are methods of :class:`hta.trace_analysis.TraceAnalysis`; these
modules keep the names HTA's notebooks import (``docs/coming_from_hta.md``).
"""
