"""HTA's ``hta.configs`` names: the parser configuration and ``HtaConfig``."""
