"""The job overview shared by ``hta summary`` and the HTML report, and the report itself.

* :mod:`hta.report.overview`: per-rank and job-wide figures gathered from the analyses;
* :mod:`hta.report.builder`: ``build_report`` / ``write_report``, one self-contained HTML
  file with every analysis's figures and tables.
"""
