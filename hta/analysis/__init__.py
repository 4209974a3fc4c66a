"""Analyses: pure functions from a loaded trace to pandas DataFrames."""
