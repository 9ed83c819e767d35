"""Generation in a process of its own, for ``synthesize`` runs of many tasks.

Generating a task (building its workspace's state, the program, hardening it) costs the process
that calibrates as much CPU as a fifth of the task's calibration, under the same interpreter lock
as its event loop. ``generate_apart`` runs ``generate`` in a child process (a fresh interpreter
running this module, not the caller's main module, so a script needs no ``__main__`` guard) that
builds the initial states into the episode host's state cache, where the host finds them, and hands
each task over as soon as it is made: the parent calibrates while the child generates, on another core. The tasks, their order and the
generation's counts are those ``generate`` makes in process.
"""

from __future__ import annotations

import functools
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..episodes import cached_initial_state
from ..workspace import Task, Workspace
from ._generate import Generation, generate
from ._probes import Probe

POLL_S = 0.1  # how often the receiving thread looks whether the run was stopped


class GenerationError(RuntimeError):
    """The generation process died before it said it was done."""


def _child(conn: Connection, n: int, seed: int, capabilities: tuple[str, ...], options: dict[str, Any],
           cache_dir: str, with_probes: bool) -> None:
    """In the child: generate, sending each task (with its workspace the first time it is named, and
    its probes ``with_probes``), then the counts and the workspaces no task came from; or the
    exception that stopped it."""
    sent: set[str] = set()
    found: dict[str, dict[str, Probe | None]] | None = {} if with_probes else None

    def made_one(task: Task, workspace: Workspace) -> None:
        probes = found.pop(task.id, None) if found is not None else None
        conn.send(("task", task, workspace.id if workspace.id in sent else workspace, probes))
        sent.add(workspace.id)

    try:
        made = generate(n, seed, capabilities, on_task=made_one, probes=found,
                        initial_state=functools.partial(cached_initial_state, Path(cache_dir)), **options)
        conn.send(("done", made.duplicates, made.passed, made.unmade,
                   [w if w.id not in sent else w.id for w in made.workspaces]))
    except BaseException as exc:  # whatever stopped it goes to the parent, which raises it
        try:
            conn.send(("error", exc))
        except Exception:  # not picklable: its text then
            conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))
    finally:
        conn.close()


def generate_apart(n: int, seed: int, capabilities: tuple[str, ...], options: dict[str, Any], cache_dir: Path,
                   on_task: Callable[[Task, Workspace], None], stop: threading.Event,
                   probes: dict[str, dict[str, Probe | None]] | None = None) -> Generation:
    """``generate(n, seed, capabilities, **options)`` in a child process, its initial states built in
    ``cache_dir``; ``on_task(task, workspace)`` hears of each task in this process as soon as the child
    made it (and each task's probes are in ``probes`` by then, when given: ``generate``'s option).
    Blocks (run it in a thread); ``stop`` set ends the child and returns what came so far.
    An exception that stopped generation in the child is raised here."""
    package_root = str(Path(__file__).resolve().parents[2])  # where this process found coworkenv
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    read_fd, write_fd = os.pipe()
    try:
        child = subprocess.Popen([sys.executable, "-c", f"from {__name__} import main; main({write_fd})"],
                                 stdin=subprocess.PIPE, pass_fds=(write_fd,), env=env)
    finally:
        os.close(write_fd)  # the child holds its own: its exit closes the pipe
    receive = Connection(read_fd, writable=False)
    assert child.stdin is not None
    try:
        child.stdin.write(pickle.dumps((n, seed, capabilities, options, str(cache_dir), probes is not None)))
        child.stdin.close()
    except OSError:
        pass  # it died at once: said below, when the pipe ends
    workspaces: dict[str, Workspace] = {}
    made = Generation([], [])
    try:
        while not stop.is_set():
            if not receive.poll(POLL_S):
                continue
            try:
                message = receive.recv()
            except EOFError:
                try:
                    code = child.wait(5)
                except subprocess.TimeoutExpired:
                    code = None
                raise GenerationError(f"the generation process ended (exit code {code}) before it "
                                      f"was done, after {len(made.tasks)} tasks") from None
            if message[0] == "task":
                _, task, workspace, found = message
                if isinstance(workspace, Workspace):
                    workspaces[workspace.id] = workspace
                if probes is not None and found is not None:
                    probes[task.id] = found
                made.tasks.append(task)
                on_task(task, workspaces[task.workspace_id])
            elif message[0] == "done":
                _, made.duplicates, made.passed, made.unmade, every = message
                made.workspaces = [w if isinstance(w, Workspace) else workspaces[w] for w in every]
                break
            else:
                raise message[1]
    finally:
        receive.close()
        try:
            child.wait(1 if not stop.is_set() else 0)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return made


def main(fd: int) -> None:
    """The child: the arguments come pickled on stdin, the messages go out on ``fd``."""
    args = pickle.load(sys.stdin.buffer)
    _child(Connection(fd, readable=False), *args)
