"""The benchmarks: scripts run from the repository (``python bench/rates.py``), each printing
and optionally writing (``--json``) the figures the docs quote with their command. A package so
benches and tests import shared pieces (data readers, harnesses) by name, ``bench.<module>``."""
