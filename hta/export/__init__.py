"""Writers of traces augmented with analysis results (counters, critical paths)."""
