"""The tool runner: a long-lived, stdlib-only process that runs inside the sandbox.

It reads one JSON request per line on stdin and writes one JSON reply per line on stdout. Each
tool call runs in a forked child with CPU-time and memory limits and a wall-clock deadline, so a
hung or crashing tool is killed and reported as a tool error while the runner keeps serving.

Requests:  {"id": 1, "op": "call", "app": "mail", "tool": "search_messages", "args": {...},
            "limits": {"cpu_s": 5, "mem_mb": 512, "wall_s": 10, "output_bytes": 1048576}}
           {"id": 2, "op": "ping"}
Replies:   {"id": 1, "ok": true, "result": {...}}
           {"id": 1, "ok": false, "kind": "tool" | "timeout" | "limit" | "crash", "error": "..."}

This file must not import anything outside the standard library: it runs under ``python3 -I -S``.
"""

import importlib
import json
import os
import resource
import select
import signal
import sqlite3
import sys
import time

STATE_FILE = "state.db"
DEFAULT_LIMITS = {"cpu_s": 5, "mem_mb": 512, "wall_s": 10, "output_bytes": 1 << 20}


def _child(request, limits, write_fd):
    # The tool's own output goes nowhere: its stdout is the runner's reply stream (a printed
    # line would be read as the reply, forged or garbled), and nobody drains stderr.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    cpu = max(1, int(limits["cpu_s"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    mem = int(limits["mem_mb"]) << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    try:
        module = importlib.import_module("apps." + request["app"])
        tool_failure = importlib.import_module("apps._base").ToolFailure
    except Exception as exc:  # noqa: BLE001 - every failure becomes a reply
        reply = {"ok": False, "kind": "crash", "error": f"cannot load app {request.get('app')!r}: {exc}"}
    else:
        try:
            conn = sqlite3.connect(STATE_FILE)
            try:
                result = module.handle(conn, request["tool"], request.get("args") or {})
                conn.commit()
            finally:
                conn.close()
            reply = {"ok": True, "result": result}
        except tool_failure as exc:
            reply = {"ok": False, "kind": "tool", "error": str(exc)}
        except MemoryError:
            reply = {"ok": False, "kind": "limit", "error": "tool exceeded its memory limit"}
        except Exception as exc:  # noqa: BLE001 - every failure becomes a reply
            reply = {"ok": False, "kind": "crash", "error": f"{type(exc).__name__}: {exc}"}
    try:
        data = json.dumps(reply).encode()
    except (TypeError, ValueError) as exc:
        data = json.dumps({"ok": False, "kind": "crash", "error": f"result is not JSON: {exc}"}).encode()
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(write_fd, view):]
        except BrokenPipeError:
            break
    os._exit(0)


def _run_call(request):
    limits = dict(DEFAULT_LIMITS)
    limits.update(request.get("limits") or {})
    try:  # import in the runner so that every forked call starts warm
        importlib.import_module("apps." + request["app"])
    except Exception:  # noqa: BLE001 - the child reports the failure
        pass
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(request, limits, write_fd)
    os.close(write_fd)
    deadline = time.monotonic() + float(limits["wall_s"])
    chunks, size, verdict = [], 0, None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            verdict = {"kind": "timeout", "error": f"tool exceeded its wall-clock limit of {limits['wall_s']}s"}
            break
        ready, _, _ = select.select([read_fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limits["output_bytes"]:
            verdict = {"kind": "limit", "error": f"tool output exceeded {limits['output_bytes']} bytes"}
            break
    os.close(read_fd)
    if verdict is not None:
        _kill(pid)
    _, status = os.waitpid(pid, 0)
    if verdict is not None:
        return {"ok": False, **verdict}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU or sig == signal.SIGKILL:
            return {"ok": False, "kind": "timeout", "error": f"tool exceeded its CPU-time limit of {limits['cpu_s']}s"}
        return {"ok": False, "kind": "crash", "error": f"tool process died with signal {signal.Signals(sig).name}"}
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return {"ok": False, "kind": "crash", "error": "tool process ended without a result"}


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main():
    sys.path.insert(0, os.environ.get("COWORKENV_LIB", "/opt/coworkenv/lib"))
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            op = request.get("op")
        except ValueError as exc:
            request, op = {}, None
            reply = {"ok": False, "kind": "crash", "error": f"runner got a malformed request: {exc}"}
        if op == "ping":
            reply = {"ok": True, "result": {"pid": os.getpid()}}
        elif op == "call":
            reply = _run_call(request)
        elif op is not None:
            reply = {"ok": False, "kind": "crash", "error": f"runner got an unknown op {op!r}"}
        reply["id"] = request.get("id")
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
