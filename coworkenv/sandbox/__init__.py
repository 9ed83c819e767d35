"""Sandboxes in which the tools of a workspace execute, one per episode."""

from ._app_image import build_app_image
from ._backends import BACKENDS, BackendName, cleanup, create_sandbox
from ._base import FileChanges, Limits, Sandbox, SandboxConfig, SandboxError, SandboxUnavailable, ToolOutcome
from ._bwrap import BwrapConfig, BwrapSandbox
from ._docker import DockerConfig, DockerSandbox
from ._image import IMAGE, BuildResult, build_image, docker_client, image_exists
from ._labels import CleanupReport, is_orphan, make_episode_dir, owner
from ._local import LocalConfig, LocalSandbox
from ._pool import PoolSettings, SandboxPool
from ._runner import STATE_FILE
from ._trial import trial

__all__ = [
    "BACKENDS",
    "BackendName",
    "BuildResult",
    "BwrapConfig",
    "BwrapSandbox",
    "CleanupReport",
    "DockerConfig",
    "DockerSandbox",
    "FileChanges",
    "IMAGE",
    "Limits",
    "LocalConfig",
    "LocalSandbox",
    "PoolSettings",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxPool",
    "SandboxUnavailable",
    "STATE_FILE",
    "ToolOutcome",
    "build_app_image",
    "build_image",
    "cleanup",
    "create_sandbox",
    "docker_client",
    "image_exists",
    "is_orphan",
    "make_episode_dir",
    "owner",
    "trial",
]
