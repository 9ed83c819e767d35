"""The ``coworkenv`` command line."""

from ._app import app

__all__ = ["app"]
