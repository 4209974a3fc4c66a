"""Loading a job: one task per rank (decode, link, cache), the Arrow cache, the executors
that run per-rank work (local processes or a Dask cluster), and the distributed job whose
ranks stay where they were loaded."""
