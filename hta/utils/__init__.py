"""HTA's ``hta.utils`` helpers that notebooks import."""
