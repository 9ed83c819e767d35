"""Looking at a store: a self-contained HTML report (``coworkenv report``) and a local web app
(``coworkenv view``)."""

from ._app import view_app
from ._report import render_report, write_report

__all__ = ["render_report", "view_app", "write_report"]
