"""HTA's ``hta.common`` modules, as thin adapters over this package's model.

Notebooks written for Holistic Trace Analysis import :mod:`hta.common.trace`,
:mod:`hta.common.trace_filter` and others; the names they use resolve here. Each adapter
loads and analyses with this package (``hta.trace_analysis``); nothing is computed twice.
``docs/coming_from_hta.md`` lists every name and what it maps to.
"""
