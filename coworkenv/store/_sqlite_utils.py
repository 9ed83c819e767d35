"""sqlite-utils, imported with pandas and numpy hidden: it imports them, when installed, only to map
DataFrame and numpy column types, which no write of the store uses. Every process that opens a store
would pay half a second and 65 MB for them (a command, `coworkenv serve --stdio` for each episode,
synthesis's generation process). Both stay importable; imported first by the package."""

import importlib
import sys


def _import_without_pandas() -> None:
    if "sqlite_utils" in sys.modules:
        return
    hidden = [name for name in ("pandas", "numpy") if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # `import pandas` raises ImportError
    try:
        importlib.import_module("sqlite_utils")
    finally:
        for name in hidden:
            del sys.modules[name]


_import_without_pandas()
