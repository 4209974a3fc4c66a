"""The Kineto trace file format: finding a job's files, inflating, splitting and
decoding them into typed columns (the native scanner, with a pure-Python fallback), and
re-reading raw events. The only layer that opens a trace's path or URL (through fsspec).
"""
