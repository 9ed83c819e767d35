"""The Docker backend: one locked-down container per episode, its runner spoken to over an attached socket.

The container has no network, a read-only root filesystem, tmpfs for ``/workspace`` and ``/tmp``,
memory, pids and CPU limits, a non-root user and no capabilities. The runner is the container's
process 1 (a tool cannot kill it from inside); it lives as long as the episode and reads requests
from the container's stdin, which the host reaches through ``attach`` (no ``docker exec`` per call).
When the host goes away the attach closes, stdin ends and the runner exits with its container.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from pathlib import Path

from ._base import Limits, SandboxError, SandboxUnavailable
from ._client import MAX_MESSAGE, RUNNER, LineWriter, RunnerSandbox
from ._image import IMAGE, SANDBOX_UID, docker_client, image_exists
from ._labels import LABEL, docker_labels

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


class _FrameLines:
    """Lines of the runner's stdout out of Docker's multiplexed attach stream (8-byte frame headers)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.buffer = bytearray()

    async def readline(self) -> bytes:
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line = bytes(self.buffer[: end + 1])
                del self.buffer[: end + 1]
                return line
            if len(self.buffer) > MAX_MESSAGE:
                raise ValueError("runner reply longer than the largest message")
            try:
                header = await self.reader.readexactly(8)
                payload = await self.reader.readexactly(int.from_bytes(header[4:8], "big"))
            except asyncio.IncompleteReadError:
                return b""
            if header[0] == 1:  # stdout; stderr is not attached
                self.buffer += payload


class DockerSandbox(RunnerSandbox):
    """One container per episode (image built by ``coworkenv sandbox build-image``)."""

    name = "docker"

    def __init__(
        self,
        initial_state: Path,
        *,
        limits: Limits | None = None,
        apps_dir: Path | None = None,
        image: str = IMAGE,
    ) -> None:
        super().__init__(initial_state, limits=limits, apps_dir=apps_dir)
        self.image = image
        self.container: str | None = None  # its id, once created
        self.container_name = f"{LABEL}{uuid.uuid4().hex[:12]}"
        self._sock: socket.socket | None = None
        self._transport_writer: asyncio.StreamWriter | None = None

    @staticmethod
    def check_available() -> str:
        version = shared_client().version().get("Version", "?")
        return f"docker engine {version}, image {IMAGE}"

    def _create(self) -> str:
        limits = self.limits
        uid = SANDBOX_UID
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
                str(self.initial_state.resolve()): {"bind": "/opt/coworkenv/initial/state.db", "mode": "ro"},
            },
        )
        created = api.create_container(
            self.image,
            command=["python3", "-I", "-S", "/opt/coworkenv/runner.py", "--sandboxed"],
            name=self.container_name,
            labels=docker_labels(**{"coworkenv.backend": self.name}),
            stdin_open=True,  # with detach=False this also sets StdinOnce: the host's attach ending
            tty=False,        # closes the runner's stdin, and the runner exits
            user=f"{uid}:{uid}",
            working_dir="/workspace",
            environment={"COWORKENV_LIB": "/opt/coworkenv/lib",
                         "COWORKENV_INITIAL_STATE": "/opt/coworkenv/initial/state.db",
                         "HOME": "/workspace"},
            network_disabled=True,
            host_config=host_config,
        )
        return created["Id"]

    def _attach(self) -> socket.socket:
        assert self.container is not None
        api = shared_client().api
        io = api.attach_socket(self.container, params={"stdin": 1, "stdout": 1, "stream": 1})
        try:
            fd = io.fileno()
            sock = socket.socket(fileno=os.dup(fd))
        finally:
            io.close()
        api.start(self.container)
        return sock

    async def start(self) -> None:
        if self.started:
            return
        self.started = True
        try:
            self.container = await asyncio.to_thread(self._create)
            self._sock = await asyncio.to_thread(self._attach)
            await self._open()
            await self._control({"op": "reset"})  # the initial state into the fresh tmpfs
        except BaseException:
            await self.close()
            raise

    async def _connect(self) -> tuple[_FrameLines, LineWriter]:
        if self._sock is None:
            raise SandboxError("the docker sandbox's runner is gone")
        reader, writer = await asyncio.open_connection(sock=self._sock, limit=MAX_MESSAGE)
        self._transport_writer = writer
        return _FrameLines(reader), writer

    async def _stderr_tail(self) -> str:
        if self.container is None:
            return ""
        try:
            logs = await asyncio.to_thread(shared_client().api.logs, self.container, stdout=False,
                                           stderr=True, tail=5)
        except Exception:  # noqa: BLE001 - only a hint for the error message
            return ""
        return logs.decode(errors="replace").strip()

    async def _disconnect(self) -> None:
        writer, self._transport_writer = self._transport_writer, None
        self._sock = None
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
        if container is not None:
            await asyncio.to_thread(_remove, container)

    def abandon(self) -> None:
        self.closed = True
        container, self.container = self.container, None
        if container is not None:
            _remove(container)


def _remove(container: str) -> None:
    import docker

    try:
        shared_client().api.remove_container(container, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise SandboxError(f"could not remove container {container[:12]}: {exc}") from None
