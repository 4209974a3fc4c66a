"""The package version (a module of its own, so that every layer can read it without
importing the front door)."""

__version__ = "0.1.0"
