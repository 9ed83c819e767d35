"""The tool runner: a long-lived, stdlib-only process that runs inside the sandbox.

It reads one JSON request per line on stdin and writes one JSON reply per line on stdout (or, with
``COWORKENV_SOCKET`` set, on a Unix socket it connects to there). Tool
calls run in a worker process, never in the runner: the worker has CPU-time, memory and process
limits, and the runner enforces a wall-clock deadline and an output limit on each call, so a hung
or crashing tool is killed and reported as a tool error while the runner keeps serving. The apps
are imported once at start and the worker is forked from the runner ahead of time. A worker serves
the calls of its sandbox one after another until anything about it is off: a call that failed
other than with the tool's own error, a process or thread a tool left behind, new limits, a reset,
or ``CALLS_PER_WORKER`` calls. Then it is killed and a fresh one is forked after the reply went
out, off the call's path. So a call costs two pipe hand-overs, not a fork. A worker also keeps its
connection to the state file from call to call while only its own calls touched the file.

Requests:  {"id": 1, "op": "call", "app": "mail", "tool": "search_messages", "args": {...},
            "limits": {"cpu_s": 5, "mem_mb": 512, "wall_s": 10, "output_bytes": 1048576, "pids": 64}}
           {"id": 2, "op": "ping"}
           {"id": 3, "op": "read", "path": "state.db"}             -> {"data": base64}
           {"id": 3, "op": "read_changes", "path": "state.db"}     -> {"size": n, "block": 4096,
                "blocks": [[index, base64], ...], "base": sha256}   (the blocks that differ from the
                initial state, whose sha256 says which it is; {"data": base64} when there is none)
           {"id": 4, "op": "write", "path": "notes/a.txt", "data": base64}
           {"id": 5, "op": "reset"}      (workspace and scratch dirs back to the initial state; the
                initial state is read from COWORKENV_INITIAL_STATE at each reset, so a host that
                replaces that file gives the sandbox another workspace's state)
           {"id": 6, "op": "restore"}    (as reset, but the worker stays when nothing is off about it:
                it puts the initial state back into the file its connection holds, and nothing is
                forked; for episodes of one task played one after another, as calibration does)
           {"id": 7, "op": "keep"}       (keep a copy of the state file as it is now, outside the
                workspace and the scratch dirs, until the next keep or reset)
           {"id": 8, "op": "restore", "to": "kept"}  (as restore, but to the state kept last:
                -> {"kept": true}; when there is none or anything is off, a reset to the initial
                state -> {"kept": false})
Replies:   {"id": 1, "ok": true, "result": {...}, "changed": true, "changes": {...}}
           {"id": 1, "ok": false, "kind": "tool" | "timeout" | "limit" | "crash" | "path" | "missing", "error": "..."}

An app may run services beside its tools (its module's ``services(conn, directory)``, e.g. a
Claw-Eval task's mock HTTP servers): the runner starts them itself before the app's first call
since the last reset, waits until each answers its readiness URL, keeps them running from call to
call and stops them on reset. A service that does not start makes that call fail (kind ``service``).

With ``--sandboxed`` (only ever inside a pid namespace of its own) the runner also kills every
process of the sandbox that is not itself, its ancestors, its worker or a service after each call and
while a call runs with more processes than allowed: a tool cannot leave anything running behind.
Without it (the local backend, which isolates nothing) it cannot tell the host's processes from a
tool's: a worker with a child left is replaced, but a process a tool detached lives on; the scratch
dirs it empties on reset are only those the host names in ``COWORKENV_SCRATCH``.

A call that succeeded and changed rows of the state says which in ``changes``: its inserted,
updated and deleted rows (the first ``MAX_CHANGED_ROWS``, with each row's values before and after),
and how many of each per table. Temporary triggers of the worker's own connection record them, so
the state file itself never holds anything of it.

This file must not import anything outside the standard library: it runs under ``python3 -I -S``. A
call is applied to the state by ``apply_call`` of ``CALL_MODULE`` (``coworkenv.workspace.state``'s, the
same the host uses in-process), which the backends put beside the apps.
"""

import base64
import gc
import hashlib
import importlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time

CALL_MODULE = "_coworkenv_call"  # ``apply_call``'s module, in the apps' lib folder
STATE_FILE = "state.db"  # the workspace state, in the sandbox's workspace directory (the host reads it by this name)
DEFAULT_LIMITS = {"cpu_s": 5, "mem_mb": 512, "wall_s": 10, "output_bytes": 1 << 20, "pids": 64}
SCRATCH_DIRS = ("/tmp", "/dev/shm")  # writable outside the workspace; emptied on reset
SCRATCH_ENV = "COWORKENV_SCRATCH"  # unsandboxed (the local backend): the episode's own scratch dirs (os.pathsep-separated)
WATCH_EVERY_S = 0.05
PRELOAD_S = 5.0
CALLS_PER_WORKER = 1000  # then a fresh worker: whatever a long run of calls accumulated goes with it
MAX_CHANGED_ROWS = 50  # rows of a call's ``changes`` given in full; the counts cover all of them
CHANGES_TABLE = "temp._coworkenv_changes"
SERVICE_POLL_S = 0.05  # how often a starting service's readiness URL is tried
RESTORE_S = 5.0  # how long a restore waits for the worker to put the initial state back
READ_BLOCK = 4096  # ``read_changes`` sends a file's blocks of this size that differ from the initial state


class _PreloadTimeout(Exception):
    pass


def _preload_timeout(signum, frame):
    raise _PreloadTimeout()


class Worker:
    """The runner's side of a worker process: its pid, its two pipes, and what it has served."""

    def __init__(self, pid, req_w, rep_r):
        self.pid, self.req_w, self.rep_r = pid, req_w, rep_r
        self.limits: dict | None = None  # fixed by the first call: a worker never changes its hard limits
        self.calls = 0
        self.retire = False  # replace it after the current call


class Runner:
    def __init__(self, workspace, initial_state, sandboxed, scratch=()):
        self.workspace = os.path.realpath(workspace)
        self.initial_state = initial_state
        self.sandboxed = sandboxed
        # the dirs besides the workspace that are the episode's own, emptied on reset: the sandbox's
        # /tmp and /dev/shm; unsandboxed, only those the host names (the system's are everybody's)
        self.scratch = SCRATCH_DIRS if sandboxed else tuple(os.path.realpath(d) for d in scratch)
        self.keep = {os.getpid()}
        pid = os.getppid()
        while pid > 1:  # our ancestors (bwrap's init) are not the tool's
            self.keep.add(pid)
            pid = _parent_of(pid)
        self.keep.add(1)
        self.worker = None
        self.template = None  # the runner's own connection to the initial state, its triggers made (see reset)
        self.initial = None  # (the initial state file's identity, its bytes, their sha256): ``initial_content``
        # the initial state and the state file's mode as the start or the last reset left them (see restore)
        self.restored = self._restored_as(os.path.join(self.workspace, STATE_FILE)) if initial_state else None
        self.kept = None  # (path, bytes) of the state file as the last ``keep`` found it; None after a reset
        self.services = {}  # app -> the processes of its services started since the last reset
        self.service_failures = {}  # app -> why its services did not start (until the next reset)
        self.service_dir = None

    # ------------------------------------------------------------------ tool calls

    def spawn_worker(self):
        if self.worker is not None:
            return
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        template = self.template
        if template is not None and template.seen != _file_identity(STATE_FILE):
            template = None  # the state is no longer the initial state it was made on
        gc.freeze()  # the worker must not copy the runner's heap by collecting it
        pid = os.fork()
        if pid == 0:
            os.close(req_w)
            os.close(rep_r)
            _worker(req_r, rep_w, template)
        os.close(req_r)
        os.close(rep_w)
        self.worker = Worker(pid, req_w, rep_r)

    def drop_worker(self):
        """Kill the worker with whatever it started; return its wait status (None if unknown)."""
        worker, self.worker = self.worker, None
        if worker is None:
            return None
        _kill_group(worker.pid)
        os.close(worker.req_w)
        os.close(worker.rep_r)
        return _reap(worker.pid)

    def call(self, request, line):
        """Run a call in the worker: (the reply, and the worker's reply line when it can go out as
        it came, the id aside; else None). ``line`` is the request as it came, for the worker."""
        problem = self.start_services(request.get("app"))
        if problem is not None:
            return {"ok": False, "kind": "service", "error": problem}, None
        limits = dict(DEFAULT_LIMITS)
        limits.update(request.get("limits") or {})
        if self.worker is not None and self.worker.limits not in (None, limits):
            self.drop_worker()
        self.spawn_worker()
        worker = self.worker
        assert worker is not None  # spawn_worker made one
        worker.limits = limits
        worker.calls += 1
        try:
            _write_all(worker.req_w, line if line.endswith(b"\n") else line + b"\n")
        except OSError:
            pass  # the worker died; reported below
        deadline = time.monotonic() + float(limits["wall_s"])
        chunks, size, verdict = [], 0, None
        next_watch = time.monotonic() + WATCH_EVERY_S
        while True:
            now = time.monotonic()
            if now >= deadline:
                verdict = {"kind": "timeout", "error": f"tool exceeded its wall-clock limit of {limits['wall_s']}s"}
                break
            if self.sandboxed and now >= next_watch:
                next_watch = now + WATCH_EVERY_S
                if len(self.foreign_pids()) > int(limits["pids"]):
                    verdict = {"kind": "limit", "error": f"tool started more than {limits['pids']} processes"}
                    break
            timeout = min(deadline, next_watch) - now if self.sandboxed else deadline - now
            ready, _, _ = select.select([worker.rep_r], [], [], max(timeout, 0))
            if not ready:
                continue
            chunk = os.read(worker.rep_r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limits["output_bytes"]:
                verdict = {"kind": "limit", "error": f"tool output exceeded {limits['output_bytes']} bytes"}
                break
            if chunk.endswith(b"\n"):
                break  # a whole reply: one JSON line
        if verdict is not None:
            self.drop_worker()
            return {"ok": False, **verdict}, None
        data = b"".join(chunks)
        try:
            reply = json.loads(data) if data.count(b"\n") == 1 else None
        except ValueError:
            reply = None
        if isinstance(reply, dict) and "ok" in reply:
            if not reply["ok"] and reply.get("kind") != "tool":
                worker.retire = True  # a crash or a memory error may have left it in any state
            return reply, (data if data[:1] == b"{" and "id" not in reply else None)
        status = self.drop_worker()
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig in (signal.SIGXCPU, signal.SIGKILL):
                return {"ok": False, "kind": "timeout",
                        "error": f"tool exceeded its CPU-time limit of {limits['cpu_s']}s"}, None
            return {"ok": False, "kind": "crash",
                    "error": f"tool process died with signal {signal.Signals(sig).name}"}, None
        return {"ok": False, "kind": "crash", "error": "tool process ended without a result"}, None

    # ------------------------------------------------------------------ services

    def start_services(self, app):
        """Start ``app``'s services unless they run already: None, or why one did not start."""
        if not isinstance(app, str) or app in self.services:
            return self.service_failures.get(app) if isinstance(app, str) else None
        module = sys.modules.get("apps." + app)
        starter = getattr(module, "services", None)
        if starter is None:
            return None  # not an app with services (or not loaded: the worker reports that)
        self.services[app] = []
        if self.service_dir is None:
            self.service_dir = tempfile.mkdtemp(prefix="coworkenv-services-", dir=self.scratch[0] if self.scratch else None)
        directory = os.path.join(str(self.service_dir), app)
        os.makedirs(directory, exist_ok=True)
        try:
            conn = sqlite3.connect(f"file:{os.path.join(self.workspace, STATE_FILE)}?mode=ro", uri=True)
            try:
                specs = starter(conn, directory)
            finally:
                conn.close()
        except Exception as exc:
            problem = f"the services of {app} could not be prepared: {exc}"
        else:
            problem = next((p for p in map(lambda spec: self.start_service(app, spec), specs) if p is not None), None)
        if problem is not None:
            self.stop_services()
            self.services[app] = []
            self.service_failures[app] = problem
        return problem

    def start_service(self, app, spec):
        name = str(spec.get("name"))
        log_path = os.path.join(str(self.service_dir), f"{app}-{name}.log")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
        env.update({str(k): str(v) for k, v in (spec.get("env") or {}).items()})
        try:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen([str(a) for a in spec["argv"]], cwd=spec.get("cwd") or self.service_dir, env=env,
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        except (OSError, KeyError, TypeError, ValueError) as exc:
            return f"service {name} of {app} could not start: {exc}"
        self.services[app].append(proc)
        deadline = time.monotonic() + float(spec.get("timeout_s") or 10)
        url, method = spec.get("ready_url"), str(spec.get("ready_method") or "GET").upper()
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return f"service {name} of {app} exited (status {proc.returncode}): {_tail(log_path)}"
            if not url or _answers(url, method):
                return None
            time.sleep(SERVICE_POLL_S)
        return f"service {name} of {app} did not answer {url} within {spec.get('timeout_s') or 10}s: {_tail(log_path)}"

    def stop_services(self):
        for procs in self.services.values():
            for proc in procs:
                _kill_group(proc.pid)
                try:
                    proc.wait(timeout=2)
                except (subprocess.TimeoutExpired, ChildProcessError):
                    pass
        self.services = {}
        self.service_failures = {}
        if self.service_dir is not None:
            shutil.rmtree(self.service_dir, ignore_errors=True)
            self.service_dir = None

    def service_pids(self):
        return {proc.pid for procs in self.services.values() for proc in procs}

    def after_call(self, request, reply):
        """Off the critical path, once the reply went out: clean up, and have a worker ready."""
        worker = self.worker
        # Sandboxed, any process besides the runner's own and its worker is one a tool left.
        left = self.foreign_pids() if self.sandboxed else None
        if worker is not None and (worker.retire or worker.calls >= CALLS_PER_WORKER or left
                                   or _busy(worker.pid, children=not self.sandboxed)):
            self.drop_worker()  # whatever the tool started in its process group goes with it
        if left:
            self.sweep()
        _reap_any()
        self.spawn_worker()

    def preload(self, lib):
        """Import the apps before the first worker is forked, so that every call starts warm.

        An import that raises is skipped (the call's worker reports it); one that takes longer
        than ``PRELOAD_S`` is interrupted. Whatever an import does stays inside the sandbox.
        """
        try:
            names = sorted(os.listdir(os.path.join(lib, "apps")))
        except OSError:
            return
        previous = signal.signal(signal.SIGALRM, _preload_timeout)
        try:
            for name in names:
                if name.endswith(".py") and not name.startswith("_"):
                    signal.setitimer(signal.ITIMER_REAL, PRELOAD_S)
                    try:
                        importlib.import_module("apps." + name[:-3])
                    except BaseException:
                        pass
                    finally:
                        signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous)

    # ------------------------------------------------------------------ processes

    def foreign_pids(self):
        keep = set(self.keep)
        if self.worker is not None:
            keep.add(self.worker.pid)
        services = self.service_pids()
        pids = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in keep and not (services and _descends(int(name), services)):
                pids.append(int(name))
        return pids

    def sweep(self):
        """Kill every process of the sandbox that is not the runner's, and wait until they are gone."""
        killed = set()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            pids = self.foreign_pids()
            if not pids:
                break
            for pid in pids:
                if pid not in killed:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                    killed.add(pid)
            _reap_any()
            if all(pid in killed for pid in self.foreign_pids()):
                select.select([], [], [], 0.002)  # dying ones (zombies another init reaps) go in a moment

    # ------------------------------------------------------------------ files

    def resolve(self, path):
        if not isinstance(path, str) or not path or "\x00" in path:
            raise ValueError(f"invalid path {path!r}")
        candidate = os.path.realpath(os.path.join(self.workspace, path))
        if candidate != self.workspace and not candidate.startswith(self.workspace + os.sep):
            raise PermissionError(f"path {path!r} is outside the sandbox workspace")
        return candidate

    def read(self, request):
        with open(self.resolve(request.get("path")), "rb") as f:
            return {"data": base64.b64encode(f.read()).decode()}

    def read_changes(self, request):
        """A file as the blocks in which it differs from the initial state: what an episode's final
        state costs to read back is then what the episode changed, not the whole file."""
        with open(self.resolve(request.get("path")), "rb") as f:
            data = f.read()
        if not self.initial_state:
            return {"data": base64.b64encode(data).decode()}
        base, digest = self.initial_content()
        blocks, step = [], READ_BLOCK * 64
        for start in range(0, len(data), step):
            if data[start:start + step] == base[start:start + step]:
                continue
            for at in range(start, min(start + step, len(data)), READ_BLOCK):
                if data[at:at + READ_BLOCK] != base[at:at + READ_BLOCK]:
                    blocks.append([at // READ_BLOCK, base64.b64encode(data[at:at + READ_BLOCK]).decode()])
        return {"size": len(data), "block": READ_BLOCK, "blocks": blocks, "base": digest}

    def initial_content(self):
        """The initial state's bytes and their sha256, read once for as long as the file is the one
        they were read from (a ``retarget`` gives another)."""
        with open(self.initial_state, "rb") as f:
            st = os.fstat(f.fileno())
            identity = st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns
            if self.initial is None or self.initial[0] != identity:
                data = f.read()
                self.initial = identity, data, hashlib.sha256(data).hexdigest()
        return self.initial[1], self.initial[2]

    def write(self, request):
        target = self.resolve(request.get("path"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        target = self.resolve(request.get("path"))  # a directory on the way may have been a link
        with open(target, "wb") as f:
            f.write(base64.b64decode(request.get("data") or ""))
        return {"written": len(base64.b64decode(request.get("data") or ""))}

    def keep_state(self):
        """Keep a copy of the state file as it is now, for ``restore(to_kept=True)``: in a directory
        of the runner's own outside the workspace (the scratch dir's, which an empty leaves alone);
        the copy is checked against the bytes kept here when it is restored."""
        with open(os.path.join(self.workspace, STATE_FILE), "rb") as f:
            data = f.read()
        if self.kept is None:
            directory = tempfile.mkdtemp(prefix="coworkenv-kept-", dir=self.scratch[0] if self.scratch else None)
            path = os.path.join(directory, STATE_FILE)
        else:
            path = self.kept[0]
        self.kept = None  # until the copy is whole
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)  # the last one's, written over: see ``_write_over``
        try:
            _write_all(fd, data)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        self.kept = path, data
        return {"kept": len(data)}

    def drop_kept(self):
        if self.kept is not None:
            shutil.rmtree(os.path.dirname(self.kept[0]), ignore_errors=True)
            self.kept = None

    def reset(self):
        self.drop_kept()
        self.drop_worker()
        self.stop_services()
        if self.sandboxed:
            self.sweep()
        state = os.path.join(self.workspace, STATE_FILE)
        template = self.template
        # the connection is kept for the same initial state only (the one the last reset restored): a
        # sandbox given another one (``retarget``) may hold another schema, which its triggers were not made for
        keep = (bool(self.initial_state) and template is not None and _same_file(state, template.inode)
                and self.restored is not None and self.restored[0] == _initial_identity(self.initial_state))
        self._empty_dirs(keep=state if keep else None)
        if self.initial_state:
            try:
                if keep:  # in place: the same file, the initial bytes
                    _write_over(state, self.initial_state)
                else:
                    shutil.copyfile(self.initial_state, state)
                if keep and template is not None and stat.S_IMODE(os.stat(state).st_mode) != template.mode:
                    os.chmod(state, template.mode)  # as a new file would have it
            except OSError:
                if not keep:
                    raise
                keep = False  # a tool made it unwritable, say: a new file then
                os.unlink(state)
                shutil.copyfile(self.initial_state, state)
            self.prepare_template(kept=keep)
            self.restored = self._restored_as(state)
        self.spawn_worker()
        return {"reset": True}

    def restore(self, to_kept=False):
        """The initial state (``to_kept``: the state kept last, ``keep_state``) back in the workspace,
        in the same worker: the runner empties the workspace (but the state file) and the scratch
        dirs, and the worker copies the state into the state file in place, over the connection it
        keeps (its change triggers stay made; SQLite sees the file's change counter move and drops
        the pages it cached). Anything off (no worker, one to retire or running anything besides
        itself, a process a tool left, services, a state file not the one its connection holds, no
        state kept) makes it a full ``reset``, to the initial state."""
        worker = self.worker
        state = os.path.join(self.workspace, STATE_FILE)
        if (worker is None or worker.retire or worker.calls >= CALLS_PER_WORKER or not self.initial_state
                or (to_kept and self.kept is None)
                or self.services or self.service_failures or self.restored != self._restored_as(state)
                or _busy(worker.pid, children=not self.sandboxed) or (self.sandboxed and self.foreign_pids())):
            return {**self.reset(), "restored": False, "kept": False}
        if to_kept:
            assert self.kept is not None
            source, content = self.kept
        else:
            source, content = self.initial_state, self.initial_content()[0]
        self._empty_dirs(keep=state)
        # the nonce: a line a tool left in the reply pipe cannot pass for the worker's answer
        nonce = base64.b64encode(os.urandom(12)).decode()
        request = json.dumps({"op": "restore", "initial": source, "nonce": nonce}).encode() + b"\n"
        reply = None
        try:
            _write_all(worker.req_w, request)
            ready, _, _ = select.select([worker.rep_r], [], [], RESTORE_S)
            if ready:
                reply = json.loads(os.read(worker.rep_r, 1 << 16))
        except (OSError, ValueError):
            reply = None
        if not (isinstance(reply, dict) and reply.get("ok") and reply.get("nonce") == nonce
                and _holds(state, content)):
            return {**self.reset(), "restored": False, "kept": False}
        self.prepare_template(kept=True)  # on the file as it is again, for the next worker forked
        return {"reset": True, "restored": True, "kept": to_kept}

    def _empty_dirs(self, keep):
        """Empty the workspace (all but ``keep``) and the scratch dirs (all but the directory of the
        state kept, ``keep_state``)."""
        kept = os.path.dirname(self.kept[0]) if self.kept is not None else None
        _empty(self.workspace, keep=keep)
        for directory in self.scratch:
            _empty(directory, keep=kept)

    def _restored_as(self, state):
        """What ``restore`` needs to find as the last reset left it: the initial state (the same
        file), and the state file a plain file of one name with the same mode bits."""
        try:
            st = os.lstat(state)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None
        return _initial_identity(self.initial_state), stat.S_IMODE(st.st_mode)

    def prepare_template(self, kept):
        """Have the runner's own connection to the state file (just reset to the initial state) ready
        with its change triggers, for every worker forked while the file stays as it is now: a forked
        worker takes it over as its own, and does not compile the triggers again (~10 ms with many
        apps). The runner never uses the connection itself beyond this: it holds no lock and no
        transaction when a worker is forked, its temporary tables live in memory (each worker's copy
        its own), and its cached pages are of the initial state the file holds again after each reset
        (the file is rewritten in place, so the connection's file stays the state file)."""
        template = self.template
        if template is None or not kept:
            if template is not None:
                template.drop()
            template = self.template = _StateConnection()
            try:
                template.open().execute("PRAGMA temp_store = MEMORY")
                made = os.stat(STATE_FILE)
                template.inode, template.mode = made.st_ino, stat.S_IMODE(made.st_mode)
            except (sqlite3.Error, OSError):
                template.drop()
                self.template = None
                return
        ok = template.watch()
        template.release(ok)
        if not ok or template.seen is None:
            template.drop()
            self.template = None

    # ------------------------------------------------------------------ loop

    def serve(self, stdin, stdout):
        for line in stdin:
            if not line.strip():
                continue
            request, after, forward = {}, None, None
            try:
                request = json.loads(line)
                op = request.get("op")
            except ValueError as exc:
                op = None
                reply = {"ok": False, "kind": "crash", "error": f"runner got a malformed request: {exc}"}
            if not isinstance(request, dict):
                request, op = {}, None
                reply = {"ok": False, "kind": "crash", "error": "runner got a request that is not an object"}
            try:
                if op == "ping":
                    reply = {"ok": True, "result": {"pid": os.getpid()}}
                elif op == "call":
                    reply, forward = self.call(request, line)
                    after = self.after_call
                elif op in ("read", "write", "read_changes"):
                    reply = {"ok": True, "result": getattr(self, op)(request)}
                elif op == "reset":
                    reply = {"ok": True, "result": self.reset()}
                elif op == "restore":
                    reply = {"ok": True, "result": self.restore(to_kept=request.get("to") == "kept")}
                elif op == "keep":
                    reply = {"ok": True, "result": self.keep_state()}
                elif op is not None:
                    reply = {"ok": False, "kind": "crash", "error": f"runner got an unknown op {op!r}"}
            except PermissionError as exc:
                reply = {"ok": False, "kind": "path", "error": str(exc)}
            except FileNotFoundError as exc:
                reply = {"ok": False, "kind": "missing", "error": f"no such file in the workspace: {exc.filename}"}
            except (OSError, ValueError) as exc:
                reply = {"ok": False, "kind": "path", "error": f"{type(exc).__name__}: {exc}"}
            if forward is not None:  # the worker's reply line, checked above, with the id put in front
                out = b'{"id": ' + json.dumps(request.get("id")).encode() + b", " + forward[1:]
            else:
                reply["id"] = request.get("id")
                out = json.dumps(reply).encode() + b"\n"
            try:
                stdout.write(out)
                stdout.flush()
            except BrokenPipeError:
                return
            if after is not None:
                after(request, reply)


def _worker(req_r, rep_w, template=None):
    """The worker: waits for a request, runs it under its limits, replies; until its pipe closes.
    ``template``: the runner's connection to the state, taken over as the worker's own."""
    # The tool's own output goes nowhere: the runner's stdout is the reply stream (a printed
    # line would be read as the reply, forged or garbled), and nobody drains stderr.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    kept = _fds_of(STATE_FILE) if template is not None else set()  # the template's own file
    for fd in _open_fds():  # nor does it get the runner's connection to the host
        if fd > 2 and fd not in (req_r, rep_w) and fd not in kept:
            try:
                os.close(fd)
            except OSError:
                pass
    os.setsid()  # its own process group, so that the runner kills whatever it starts
    state = template if template is not None else _StateConnection()
    _warm_up(state)
    requests = os.fdopen(req_r, "rb")
    limited = False
    while True:
        line = requests.readline()
        if not line:
            os._exit(0)
        request = json.loads(line)  # the host's request as the runner got it
        if request.get("op") == "restore":  # from the runner itself (``Runner.restore``)
            try:
                _write_all(rep_w, _restore(state, request["initial"], request.get("nonce")) + b"\n")
            except OSError:
                os._exit(0)
            continue
        limits = dict(DEFAULT_LIMITS)
        limits.update(request.get("limits") or {})
        if not limited:  # hard limits, once: a tool cannot raise them again
            mem = int(limits["mem_mb"]) << 20
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            limited = True
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = max(1, int(limits["cpu_s"])) + int(usage.ru_utime + usage.ru_stime) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, resource.getrlimit(resource.RLIMIT_CPU)[1]))
        data = _run(request, state)
        try:
            _write_all(rep_w, data + b"\n")
        except OSError:
            os._exit(0)


def _restore(state, initial, nonce):
    """Put the bytes of ``initial`` into the state file in place (``_write_over``), keeping the
    worker's connection to it: only when the file is still as its last call left it, no transaction
    is open and the schema is the one its change triggers were made for (a dropped table takes its
    triggers with it)."""
    try:
        conn = state.conn
        if conn is None or state.seen is None or _file_identity(STATE_FILE) != state.seen or conn.in_transaction:
            return b'{"ok": false}'
        if state.watched != (conn, conn.execute("PRAGMA main.schema_version").fetchone()[0]):
            return b'{"ok": false}'
        _write_over(STATE_FILE, initial)
        state.seen = _file_identity(STATE_FILE)
        return json.dumps({"ok": True, "nonce": nonce}).encode()
    except Exception as exc:
        state.drop()
        return json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}).encode()


def _warm_up(state):
    """Go through what every call goes through once, before the first request: its page faults
    (copy-on-write after the fork), SQLite's start, and the state's connection with its change
    triggers (kept for the first call, unless the file changes before it) are then off that call's path."""
    try:
        json.loads(json.dumps({"ok": True, "result": {"key": ["value", 1, 2.5, None]}}))
        importlib.import_module("apps._base")
        importlib.import_module(CALL_MODULE)
        if os.path.exists(STATE_FILE):  # never creates it
            state.open()
            ok = state.watch()
            state.release(ok)
    except Exception:
        state.drop()


class _StateConnection:
    """The worker's connection to the state file, kept from one call to the next while nothing but
    its own calls touched the file (same file, size and times as after its last call), no
    transaction is left open and no write-ahead log holds data the file itself lacks (the host reads
    the file as it is). Otherwise the next call opens a fresh one, as the first call does."""

    def __init__(self):
        self.conn = None
        self.inode = self.mode = 0  # of the file it was opened on (the runner's template only)
        self.seen = None
        self.watched = None  # (connection, schema version) the change triggers were made for

    def open(self):
        if self.conn is not None and self.seen is not None and _file_identity(STATE_FILE) == self.seen:
            return self.conn
        self.drop()
        self.conn = sqlite3.connect(STATE_FILE)
        # an episode's state lives as long as its sandbox: a commit hands its pages to the kernel
        # without waiting for the disk (a tool killed halfway still leaves its journal to roll back)
        self.conn.execute("PRAGMA synchronous = OFF")
        return self.conn

    def release(self, ok):
        """After a call: roll back what a failed one left; keep the connection if all is as above."""
        conn = self.conn
        assert conn is not None  # release follows a connect
        try:
            if not ok:
                conn.rollback()
            keep = not conn.in_transaction and not os.path.exists(STATE_FILE + "-wal")
            conn.row_factory, conn.text_factory = None, str  # what a tool set goes with its call
        except sqlite3.Error:  # closed by the tool, say
            keep = False
        self.seen = _file_identity(STATE_FILE) if keep else None
        if self.seen is None:
            self.drop()

    def watch(self):
        """Have temporary triggers record every row the next call inserts, updates or deletes (in
        ``CHANGES_TABLE``, of this connection only); made again when the schema changed. Returns
        whether they are in place: a state whose SQLite lacks JSON support goes unwatched."""
        conn = self.conn
        assert conn is not None  # watch follows open
        try:
            version = conn.execute("PRAGMA main.schema_version").fetchone()[0]
            if self.watched != (conn, version):
                _make_triggers(conn)
                self.watched = (conn, version)
            elif conn.execute(f"SELECT EXISTS (SELECT 1 FROM {CHANGES_TABLE})").fetchone()[0]:
                conn.execute(f"DELETE FROM {CHANGES_TABLE}")  # left by a call that failed after committing
                conn.commit()
            return True
        except sqlite3.Error:
            self.watched = None
            try:
                conn.rollback()
            except sqlite3.Error:
                pass
            return False

    def drop(self):
        conn, self.conn, self.seen, self.watched = self.conn, None, None, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass


def _quoted(name):
    return '"' + name.replace('"', '""') + '"'


ROW_FUNCTION = "_coworkenv_row"  # the triggers' own SQL function: a changed row as JSON


def _make_triggers(conn):
    """(Re)make the temporary triggers that record each row change of every table of the state (a row
    an ``INSERT OR REPLACE`` overwrote is recorded as deleted: recursive triggers make it fire). A
    trigger hands the row's values to ``ROW_FUNCTION``, which writes them as JSON by column name (a
    BLOB as ``<n bytes>``): far shorter SQL to compile for every new worker connection than building
    the JSON in the trigger itself."""
    conn.execute("PRAGMA recursive_triggers = ON")
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {CHANGES_TABLE.split('.')[1]} "
                 "(seq INTEGER PRIMARY KEY, tbl TEXT, op TEXT, row_id INTEGER, old TEXT, new TEXT)")
    for (name,) in conn.execute("SELECT name FROM temp.sqlite_master WHERE type = 'trigger' "
                                "AND name LIKE '\\_coworkenv\\_%' ESCAPE '\\'").fetchall():
        conn.execute(f"DROP TRIGGER temp.{_quoted(name)}")
    conn.execute(f"DELETE FROM {CHANGES_TABLE}")
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM main.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")]
    columns_of = {}
    for i, table in enumerate(tables):
        columns_of[i] = [r[1] for r in conn.execute(f"PRAGMA main.table_info({_quoted(table)})")]
    conn.create_function(ROW_FUNCTION, -1, _row_json(columns_of))
    for i, table in enumerate(tables):
        if not columns_of[i]:
            continue

        def row(alias, i=i):
            return f"{ROW_FUNCTION}({i}, " + ", ".join(f"{alias}.{_quoted(c)}" for c in columns_of[i]) + ")"

        label = "'" + table.replace("'", "''") + "'"
        for op, event, old, new in (("insert", "INSERT", "NULL", row("NEW")),
                                    ("update", "UPDATE", row("OLD"), row("NEW")),
                                    ("delete", "DELETE", row("OLD"), "NULL")):
            alias = "OLD" if op == "delete" else "NEW"
            for row_id in (f"{alias}.rowid", "NULL"):  # a WITHOUT ROWID table has none
                try:
                    conn.execute(
                        f"CREATE TEMP TRIGGER {_quoted(f'_coworkenv_{i}_{op}')} AFTER {event} ON main.{_quoted(table)} "
                        f"BEGIN INSERT INTO {CHANGES_TABLE.split('.')[1]} (tbl, op, row_id, old, new) "
                        f"VALUES ({label}, '{op}', {row_id}, {old}, {new}); END")
                    break
                except sqlite3.OperationalError:
                    if row_id == "NULL":
                        raise
    conn.commit()


def _row_json(columns_of):
    def row(index, *values):
        return json.dumps({column: f"<{len(value)} bytes>" if isinstance(value, bytes) else value
                           for column, value in zip(columns_of[index], values, strict=True)})
    return row


def _changes(conn):
    """The rows the call just committed changed (see ``watch``), then forgotten; None when none."""
    conn.text_factory = str  # a tool may have set another
    cur = conn.cursor()
    cur.row_factory = None
    counts = {}
    for table, op, n in cur.execute(f"SELECT tbl, op, count(*) FROM {CHANGES_TABLE} GROUP BY tbl, op"):
        counts.setdefault(table, {})[op] = n
    if not counts:
        return None
    rows = [{"table": table, "op": op, "rowid": row_id, "old": json.loads(old) if old else None,
             "new": json.loads(new) if new else None}
            for table, op, row_id, old, new in cur.execute(
                f"SELECT tbl, op, row_id, old, new FROM {CHANGES_TABLE} ORDER BY seq LIMIT ?", (MAX_CHANGED_ROWS,))]
    cur.execute(f"DELETE FROM {CHANGES_TABLE}")
    conn.commit()
    total = sum(n for ops in counts.values() for n in ops.values())
    return {"rows": rows, "counts": counts, "truncated": total > len(rows)}


def _file_identity(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _initial_identity(path):
    """The initial state file as a reset finds it: replaced (another workspace's) when this changes.
    Without the change time, which another hard link to the same file would move."""
    identity = _file_identity(path)
    return identity[:4] if identity is not None else None


def _run(request, state):
    """One tool call against the workspace state, as the JSON of its reply."""
    try:
        module = importlib.import_module("apps." + str(request["app"]))
        tool_failure = importlib.import_module("apps._base").ToolFailure
        apply_call = importlib.import_module(CALL_MODULE).apply_call
    except Exception as exc:
        reply = {"ok": False, "kind": "crash", "error": f"cannot load app {request.get('app')!r}: {exc}"}
    else:
        before = _file_identity(STATE_FILE)
        try:
            conn, ok, changes = state.open(), False, None
            try:
                watched = state.watch()
                result = apply_call(conn, module, request["tool"], request.get("args") or {})
                changes = _changes(conn) if watched else None
                ok = True
            finally:
                state.release(ok)
            # whether the state file was written: the host need not read back a state no call changed
            reply = {"ok": True, "result": result, "changed": _file_identity(STATE_FILE) != before}
            if changes:
                reply["changes"] = changes
        except tool_failure as exc:
            reply = {"ok": False, "kind": "tool", "error": str(exc)}
        except MemoryError:
            reply = {"ok": False, "kind": "limit", "error": "tool exceeded its memory limit"}
        except Exception as exc:
            reply = {"ok": False, "kind": "crash", "error": f"{type(exc).__name__}: {exc}"}
    try:
        return json.dumps(reply).encode()
    except (TypeError, ValueError, MemoryError) as exc:
        return json.dumps({"ok": False, "kind": "crash", "error": f"result is not JSON: {exc}"}).encode()


def _open_fds():
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 256))


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_over(path, source):
    """Make the file at ``path`` hold exactly what the file at ``source`` holds, in place: written
    over from its start (in the kernel) and then cut to its length, so that it is not emptied
    first, its blocks given back and taken again (about half of a restore's time, for a state of
    ~840 KB, when copied over); its inode stays, with any connection to it."""
    with open(source, "rb") as src, open(path, "r+b") as dst:
        size, sent = os.fstat(src.fileno()).st_size, 0
        while sent < size:
            step = os.sendfile(dst.fileno(), src.fileno(), sent, size - sent)
            if not step:
                break
            sent += step
        os.ftruncate(dst.fileno(), sent)


def _parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _descends(pid, ancestors):
    """Whether ``pid`` is one of ``ancestors`` or a descendant of one."""
    for _ in range(64):
        if pid in ancestors:
            return True
        if pid <= 1:
            return False
        pid = _parent_of(pid)
    return False


def _answers(url, method):
    """Whether a service answers ``url`` (any status below 500), as Claw-Eval's health check asks."""
    import urllib.error  # only a runner whose apps have services needs it
    import urllib.request

    request = urllib.request.Request(url, data=b"" if method == "POST" else None, method=method,
                                     headers={"X-Health-Check": "1"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=1) as response:
            return response.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _tail(path, size=600):
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - size))
            return f.read().decode(errors="replace").strip() or "(no output)"
    except OSError:
        return "(no output)"


def _busy(pid, children=True):
    """Whether a worker runs anything besides its own thread: a thread or (``children``) a child a
    tool left. A task directory in /proc links its threads: two links of its own, one per thread."""
    try:
        links = os.stat(f"/proc/{pid}/task").st_nlink
        if links != 3 and (links > 3 or len(os.listdir(f"/proc/{pid}/task")) > 1):
            return True
        if children:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                return bool(f.read().strip())
        return False
    except OSError:
        return True


def _kill_group(pid):
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _reap(pid):
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


def _reap_any():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _holds(path, content):
    """Whether the file at ``path`` holds exactly the bytes ``content``."""
    try:
        with open(path, "rb") as f:
            return os.fstat(f.fileno()).st_size == len(content) and f.read() == content
    except OSError:
        return False


def _same_file(path, inode):
    """Whether ``path`` is a plain file (not a link) with that inode and no other name."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_ino == inode and st.st_nlink == 1


def _fds_of(path):
    """The open descriptors of this process on the file at ``path``."""
    try:
        st = os.stat(path)
    except OSError:
        return set()
    found = set()
    for fd in _open_fds():
        try:
            other = os.fstat(fd)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            found.add(fd)
    return found


def _empty(directory, keep=None):
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for name in entries:
        path = os.path.join(directory, name)
        if path == keep:
            continue
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass


def main(argv):
    lib = os.environ.get("COWORKENV_LIB", "/opt/coworkenv/lib")
    sys.path.insert(0, lib)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a dead worker's pipe is an error, not our death
    try:  # batch work (its workers and tools inherit it): a reply wakes the host without a tool being woken
        # first preempting the host process that hands out the calls (synthesis plays many episodes at once)
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or refused: the default policy then
        pass
    sandboxed = "--sandboxed" in argv
    scratch = [d for d in os.environ.get(SCRATCH_ENV, "").split(os.pathsep) if d]
    runner = Runner(os.getcwd(), os.environ.get("COWORKENV_INITIAL_STATE", ""), sandboxed, scratch)
    runner.preload(lib)
    if sandboxed:
        runner.sweep()  # nothing an import started outlives it
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    address = os.environ.get("COWORKENV_SOCKET")
    if address:  # the host listens there (docker); otherwise it speaks over stdin and stdout (bwrap)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(address)
        requests, replies = conn.makefile("rb"), conn.makefile("wb")
    runner.spawn_worker()
    try:
        runner.serve(requests, replies)
    finally:
        runner.drop_worker()
        runner.stop_services()
        runner.drop_kept()


if __name__ == "__main__":
    main(sys.argv[1:])
