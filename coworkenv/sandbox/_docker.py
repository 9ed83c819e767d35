"""The Docker backend: one locked-down container per episode, its runner spoken to over a socket.

The container has no network, a read-only root filesystem, tmpfs for ``/workspace`` and ``/tmp``,
memory, pids and CPU limits, a non-root user and no capabilities. The runner is the container's
process 1 (a tool cannot kill it from inside); it lives as long as the episode (no ``docker exec``
per call). It connects once to a Unix socket the host listens on in the episode's directory,
mounted read-only into the container: requests and replies go straight between the two processes,
not through the engine (an attached stdin costs two more hops each way, the engine and its shim).
The host takes exactly one connection, from the sandbox's user, and closes the listener. When the
host goes away the socket closes and the runner exits with its container.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import struct
import uuid
from pathlib import Path

from pydantic import Field

from ._base import Limits, SandboxConfig, SandboxError, SandboxUnavailable
from ._client import CALL_FILE, MAX_MESSAGE, RUNNER, LineReader, LineWriter, RunnerSandbox
from ._image import IMAGE, SANDBOX_UID, docker_client, image_exists
from ._labels import DOCKER_LABEL, LABEL, OWNER_LABELS, CleanupReport, cleanup_directories, docker_labels, is_orphan, make_episode_dir
from ._runner import CALL_MODULE, STATE_FILE

SOCKET_DIR = "/run/coworkenv"  # in the container: the read-only mount of the host's socket directory
SOCKET_NAME = "runner.sock"
CONNECT_TIMEOUT_S = 60.0  # container start plus the runner's imports, on a loaded machine

_client = None  # one SDK client per process, made by the first check that succeeds


def shared_client():
    global _client
    if _client is None:
        client = docker_client()
        if not image_exists(client):
            raise SandboxUnavailable(
                f"the docker sandbox image {IMAGE} is not built — run `coworkenv sandbox build-image` "
                "(or use --sandbox bwrap)"
            )
        _client = client
    return _client


class DockerConfig(SandboxConfig):
    """The docker backend's options, beyond those every backend has."""

    image: str = Field(default=IMAGE, description="the image containers run (from `coworkenv sandbox build-image`)")
    uid: int = Field(default=SANDBOX_UID, ge=1, description="the non-root user tools run as; the host takes the "
                     "runner's connection from this user only")


class DockerSandbox(RunnerSandbox):
    """One container per episode (image built by ``coworkenv sandbox build-image``)."""

    name = "docker"
    config_type = DockerConfig

    def __init__(self, initial_state: Path, *, limits: Limits | None = None,
                 config: DockerConfig | None = None) -> None:
        self.config = config or DockerConfig()
        super().__init__(initial_state, limits=limits, config=self.config)
        self.container: str | None = None  # its id, once created
        self.container_name = f"{LABEL}{uuid.uuid4().hex[:12]}"
        self.episode_dir: Path | None = None  # on the host: the label and the socket directory
        self._listener: socket.socket | None = None
        self._transport_writer: asyncio.StreamWriter | None = None

    @staticmethod
    def check_available() -> str:
        version = shared_client().version().get("Version", "?")
        return f"docker engine {version}, image {IMAGE}"

    @classmethod
    def cleanup(cls, report: CleanupReport, *, root: Path, everything: bool = False) -> None:
        """Episode directories of docker sandboxes, then labeled containers (when the engine answers)."""
        cleanup_directories(root, cls.name, everything, report)
        try:
            client = docker_client()
        except SandboxUnavailable as exc:
            report.notes.append(f"docker skipped: {exc}")
            return
        import docker
        import docker.errors

        # One listing call (the SDK's containers.list fetches each one again, racing their removal).
        for container in client.api.containers(all=True, filters={"label": DOCKER_LABEL}):
            labels = container.get("Labels") or {}
            name = (container.get("Names") or [container["Id"][:12]])[0].lstrip("/")
            if everything or is_orphan(*(labels.get(k, "") for k in OWNER_LABELS)):
                try:
                    client.api.remove_container(container["Id"], force=True)
                    report.containers.append(name)
                except docker.errors.NotFound:
                    pass
                except docker.errors.APIError as exc:
                    if "already in progress" not in str(exc):
                        report.notes.append(f"could not remove container {name}: {exc}")
            else:
                report.kept += 1

    def _create(self) -> str:
        assert self.episode_dir is not None  # made by start() before the container
        limits = self.limits
        uid = self.config.uid
        api = shared_client().api
        host_config = api.create_host_config(
            network_mode="none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=limits.pids + 8,  # the runner and its worker on top of the tool's
            mem_limit=f"{limits.mem_mb + 128}m",
            memswap_limit=f"{limits.mem_mb + 128}m",
            nano_cpus=int(limits.cpus * 1e9),
            shm_size="1m",
            tmpfs={
                "/workspace": f"rw,nosuid,nodev,size={limits.workspace_mb}m,uid={uid},gid={uid},mode=0700",
                "/tmp": f"rw,nosuid,nodev,size={limits.workspace_mb}m,mode=1777",
            },
            binds={
                str(self.apps_dir.resolve()): {"bind": "/opt/coworkenv/lib/apps", "mode": "ro"},
                str(RUNNER): {"bind": "/opt/coworkenv/runner.py", "mode": "ro"},
                str(CALL_FILE): {"bind": f"/opt/coworkenv/lib/{CALL_MODULE}.py", "mode": "ro"},
                str(self.initial_state.resolve()): {"bind": f"/opt/coworkenv/initial/{STATE_FILE}", "mode": "ro"},
                str(self.episode_dir / "socket"): {"bind": SOCKET_DIR, "mode": "ro"},
            },
        )
        created = api.create_container(
            self.config.image,
            command=["python3", "-I", "-S", "/opt/coworkenv/runner.py", "--sandboxed"],
            name=self.container_name,
            labels=docker_labels(**{"coworkenv.backend": self.name}),
            user=f"{uid}:{uid}",
            working_dir="/workspace",
            environment={"COWORKENV_LIB": "/opt/coworkenv/lib",
                         "COWORKENV_SERVICE_ENV": json.dumps(self.config.service_env),
                         "COWORKENV_INITIAL_STATE": f"/opt/coworkenv/initial/{STATE_FILE}",
                         "COWORKENV_SOCKET": f"{SOCKET_DIR}/{SOCKET_NAME}",
                         "HOME": "/workspace"},
            network_disabled=True,
            host_config=host_config,
        )
        return created["Id"]

    def _listen(self) -> None:
        """The episode's directory with a socket only the sandbox's user can reach and use."""
        self.episode_dir = make_episode_dir(self.name, self.config.root, container=self.container_name)
        self.episode_dir.chmod(0o711)  # the sandbox's user may pass through, not list or read
        sockets = self.episode_dir / "socket"
        sockets.mkdir(mode=0o755)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        directory = os.open(sockets, os.O_RDONLY | os.O_DIRECTORY)
        try:  # through the directory's descriptor: a socket path may be at most 107 bytes long
            listener.bind(f"/proc/self/fd/{directory}/{SOCKET_NAME}")
        finally:
            os.close(directory)
        (sockets / SOCKET_NAME).chmod(0o666)  # who connected is checked on accept
        listener.listen(1)
        listener.setblocking(False)
        self._listener = listener

    async def start(self) -> None:
        if self.started:
            return
        self.started = True
        try:
            self._listen()
            self.container = await asyncio.to_thread(self._create)
            await asyncio.to_thread(shared_client().api.start, self.container)
            await self._open()
            await self._control({"op": "reset"})  # the initial state into the fresh tmpfs
        except BaseException:
            await self.close()
            raise
        self.used = False

    async def _connect(self) -> tuple[LineReader, LineWriter]:
        listener, self._listener = self._listener, None
        if listener is None:
            raise SandboxError("the docker sandbox's runner is gone")
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                while True:
                    conn, _ = await asyncio.get_running_loop().sock_accept(listener)
                    if _peer_uid(conn) == self.config.uid:
                        break
                    conn.close()  # not the sandbox's runner
        except TimeoutError:
            tail = await self._stderr_tail()
            raise SandboxError(f"the docker sandbox's runner did not connect{': ' + tail if tail else ''}") from None
        finally:
            listener.close()  # one runner, one connection
        reader, writer = await asyncio.open_connection(sock=conn, limit=MAX_MESSAGE)
        self._transport_writer = writer
        return reader, writer

    async def _stderr_tail(self) -> str:
        if self.container is None:
            return ""
        try:
            logs = await asyncio.to_thread(shared_client().api.logs, self.container, stdout=False,
                                           stderr=True, tail=5)
        except Exception:
            return ""
        return logs.decode(errors="replace").strip()

    async def _disconnect(self) -> None:
        writer, self._transport_writer = self._transport_writer, None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._reader = self._writer = None
        await self._disconnect()
        container, self.container = self.container, None
        try:
            if container is not None:
                await asyncio.to_thread(_remove, container)
        finally:
            self._remove_episode_dir()

    def abandon(self) -> None:
        self.closed = True
        container, self.container = self.container, None
        try:
            if container is not None:
                _remove(container)
        finally:
            self._remove_episode_dir()

    def _remove_episode_dir(self) -> None:
        if self.episode_dir is not None:
            shutil.rmtree(self.episode_dir, ignore_errors=True)
            self.episode_dir = None


def _peer_uid(conn: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (SO_PEERCRED: pid, uid, gid)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _remove(container: str) -> None:
    import docker
    import docker.errors

    try:
        shared_client().api.remove_container(container, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise SandboxError(f"could not remove container {container[:12]}: {exc}") from None
