"""The SQLite store: the single source of truth of a coworkenv project."""

from ._migrations import MIGRATIONS, apply_migrations
from ._store import Store, new_id

__all__ = ["MIGRATIONS", "Store", "apply_migrations", "new_id"]
