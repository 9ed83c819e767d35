"""The workspace spec, the built-in apps and the state they keep."""

from ._spec import (
    CAPABILITIES,
    App,
    Check,
    ReferenceStep,
    SpecError,
    Task,
    ToolSpec,
    Workspace,
    load_bundle,
    load_task,
    load_workspace,
    save_bundle,
    save_task,
    save_workspace,
)
from ._state import APPS_DIR, STATE_FILE, app_module, build_workspace, dump_state, load_state, write_initial_state

__all__ = [
    "APPS_DIR",
    "CAPABILITIES",
    "STATE_FILE",
    "App",
    "Check",
    "ReferenceStep",
    "SpecError",
    "Task",
    "ToolSpec",
    "Workspace",
    "app_module",
    "build_workspace",
    "dump_state",
    "load_bundle",
    "load_state",
    "load_task",
    "load_workspace",
    "save_bundle",
    "save_task",
    "save_workspace",
    "write_initial_state",
]
