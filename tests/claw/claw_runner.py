"""Play a scripted agent through Claw-Eval's own runner and grade it as Claw-Eval does (for the
opt-in parity test in test_claw_eval_checkout.py; run with a checkout's ``src`` on the path).

stdin: {"task_dir": DIR, "replies": [reply, ...], "modalities": ["text", ...]} where a reply is a
string (the final text) or {"content": TEXT, "tool_calls": [{"name", "arguments"}]}, as coworkenv's
scripted provider reads them, and the modalities are what the model takes (Claw-Eval's
``input_modalities``; default text only). stdout (last line): {"completion", "safety", "robustness",
"score"}.
"""

import inspect
import json
import sys
import tempfile
from pathlib import Path


def main() -> None:
    request = json.load(sys.stdin)
    from claw_eval.config import ModelConfig
    from claw_eval.graders.registry import get_grader
    from claw_eval.models.content import TextBlock, ToolUseBlock
    from claw_eval.models.message import Message
    from claw_eval.models.scoring import compute_task_score
    from claw_eval.models.task import TaskDefinition
    from claw_eval.models.trace import TokenUsage
    from claw_eval.runner.loop import run_task
    from claw_eval.runner.services import ServiceManager
    from claw_eval.trace.reader import load_trace

    class Scripted:
        model_id = "scripted"

        def __init__(self, replies):
            self.replies = list(replies)

        def chat(self, messages, tools=None):
            reply = self.replies.pop(0) if self.replies else "done"
            if isinstance(reply, str):
                blocks = [TextBlock(text=reply)]
            else:
                blocks = ([TextBlock(text=reply["content"])] if reply.get("content") else []) + [
                    ToolUseBlock(id=f"toolu_{len(self.replies)}_{n}", name=c["name"], input=c.get("arguments", {}))
                    for n, c in enumerate(reply.get("tool_calls", []))]
            return Message(role="assistant", content=blocks), TokenUsage()

    task_dir = Path(request["task_dir"])
    task = TaskDefinition.from_yaml(task_dir / "task.yaml")
    with ServiceManager(task.services) as services, tempfile.TemporaryDirectory() as traces:
        services.reset_all()
        model = ModelConfig(input_modalities=request.get("modalities", ["text"]))
        trace = run_task(task, Scripted(request["replies"]), traces, model_cfg=model)
        _start, messages, dispatches, media, _end, audit = load_trace(trace)
    grader = get_grader(task.task_id, tasks_dir="tasks", task_dir=task_dir)
    kwargs = {"audit_data": audit, "judge": None}
    if "media_events" in inspect.signature(grader.grade).parameters:
        kwargs["media_events"] = media
    scores = grader.grade(messages, dispatches, task, **kwargs)
    print(json.dumps({"completion": scores.completion, "safety": scores.safety, "robustness": scores.robustness,
                      "score": compute_task_score(scores)}))


if __name__ == "__main__":
    main()
