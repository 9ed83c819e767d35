"""The ``coworkenv`` command line."""

import sys


def _import_sqlite_utils_without_pandas() -> None:
    """Import sqlite-utils with pandas hidden: it imports pandas, when installed, only to map DataFrame
    column types, which no write of the store uses. In a command's process that costs 65 MB and half
    a second, and `coworkenv serve --stdio` is one process per episode. Pandas stays importable."""
    if "sqlite_utils" in sys.modules or "pandas" in sys.modules:
        return
    sys.modules["pandas"] = None  # type: ignore[assignment]  # `import pandas` raises ImportError
    try:
        import sqlite_utils
    finally:
        del sys.modules["pandas"]


_import_sqlite_utils_without_pandas()

from ._app import app  # noqa: E402

__all__ = ["app"]
