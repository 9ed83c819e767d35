"""Which apps a workspace can have: the built-in ones (every module of ``coworkenv/workspace/apps``)
and apps of other packages, registered through the ``coworkenv.apps`` entry point group or
``register_app``.

An app from elsewhere is one Python file following the app contract (see
``coworkenv/workspace/apps/__init__.py``). It is loaded as a module of the apps package, on the
host and in the sandbox alike, so it may use the built-in helpers with ``from ._base import
ToolFailure, ...``. A package registers it with an entry point naming the module::

    [project.entry-points."coworkenv.apps"]
    weather = "mypackage.weather"

Sandboxes see the built-in apps' folder; when other apps are registered, ``apps_dir`` assembles a
folder with both for them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

from .._errors import CoworkenvError
from . import apps as _apps

ENTRY_POINT_GROUP = "coworkenv.apps"
BUILTIN_DIR = Path(_apps.__file__).parent
_REQUIRED = ("NAME", "DESCRIPTION", "SCHEMA", "TOOLS", "seed", "handle")
_external: dict[str, Path] = {}  # app name -> its file, for apps registered from elsewhere
_entry_points_loaded = False


class AppError(CoworkenvError, ValueError):
    """An app cannot be registered; the message names the file and what is wrong."""


def register_app(path: str | Path) -> ModuleType:
    """Load the app module at ``path`` into the apps package and register it; return the module."""
    path = Path(path).resolve()
    if not path.is_file() or path.suffix != ".py":
        raise AppError(f"{path}: an app is one Python file")
    name = path.stem
    if name.startswith("_"):
        raise AppError(f"{path}: an app's file name may not start with '_'")
    if name in _apps.ALL_APPS and _external.get(name) != path:
        raise AppError(f"{path}: an app named {name!r} is registered already")
    qualified = f"{_apps.__name__}.{name}"
    spec = importlib.util.spec_from_file_location(qualified, path)
    if spec is None or spec.loader is None:
        raise AppError(f"{path}: cannot be loaded as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[qualified]
        raise AppError(f"{path}: loading it failed: {type(exc).__name__}: {exc}") from None
    missing = [attr for attr in _REQUIRED if not hasattr(module, attr)]
    if missing:
        del sys.modules[qualified]
        raise AppError(f"{path}: an app module defines {', '.join(_REQUIRED)}; this one lacks {', '.join(missing)}")
    if module.NAME != name:
        del sys.modules[qualified]
        raise AppError(f"{path}: NAME is {module.NAME!r} but the file is {name}.py; they must match")
    _apps.ALL_APPS[name] = module
    _external[name] = path
    return module


def load_entry_points() -> list[str]:
    """Register the apps of installed packages' ``coworkenv.apps`` entry points (once); their names."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return []
    _entry_points_loaded = True
    names = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        spec = importlib.util.find_spec(entry.value)
        if spec is None or spec.origin is None:
            raise AppError(f"entry point {entry.name} = {entry.value}: no such module")
        names.append(register_app(spec.origin).NAME)
    return names


def registered_apps() -> dict[str, ModuleType]:
    """Every app a workspace can have: the built-in ones and the registered ones."""
    load_entry_points()
    return _apps.ALL_APPS


def apps_dir(cache: Path) -> Path:
    """The folder sandboxes load apps from: the built-in one, or (with apps from elsewhere) a folder
    under ``cache`` holding both, made once per set of files."""
    load_entry_points()
    if not _external:
        return BUILTIN_DIR
    digest = hashlib.sha256()
    for name, path in sorted(_external.items()):
        digest.update(name.encode() + path.read_bytes())
    target = cache / f"apps-{digest.hexdigest()[:12]}"
    if not (target / "__init__.py").exists():
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(BUILTIN_DIR, partial, ignore=shutil.ignore_patterns("__pycache__"))
        for name, path in _external.items():
            shutil.copyfile(path, partial / f"{name}.py")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    return target
