"""Looking at a store: a self-contained HTML report (``coworkenv report``)."""

from ._report import render_report, write_report

__all__ = ["render_report", "write_report"]
