"""Score one Claw-Eval trace with its task's own grader (run by ``coworkenv.workspace.checks._claw`` as a script).

It runs with a Claw-Eval checkout's ``src`` first on ``sys.path`` and the checkout as its working
directory, so ``grader.py`` and its peers import that checkout's ``claw_eval``. The request comes as
JSON on stdin (``trace``, ``task_dir``, ``tasks_dir``, ``judge``); the scores go out as the last line
of stdout. Optional arguments are given only to graders that take them, as Claw-Eval's own CLI does.
"""

import inspect
import json
import sys
from pathlib import Path


def main() -> None:
    request = json.load(sys.stdin)
    from claw_eval.graders.registry import get_grader  # pyright: ignore[reportMissingImports]  (the checkout's)
    from claw_eval.models.task import TaskDefinition  # pyright: ignore[reportMissingImports]
    from claw_eval.trace.reader import load_trace  # pyright: ignore[reportMissingImports]

    task_dir = Path(request["task_dir"])
    task = TaskDefinition.from_yaml(task_dir / "task.yaml")
    grader = get_grader(task.task_id, tasks_dir=request["tasks_dir"], task_dir=task_dir)
    _start, messages, dispatches, media_events, _end, audit_data = load_trace(request["trace"])
    judge = None
    if request.get("judge"):
        from claw_eval.graders.llm_judge import LLMJudge  # pyright: ignore[reportMissingImports]

        settings = request["judge"]
        judge = LLMJudge(model_id=settings["model"], api_key=settings["api_key"] or None, base_url=settings["base_url"])
    kwargs = {"audit_data": audit_data, "judge": judge}
    if "media_events" in inspect.signature(grader.grade).parameters:
        kwargs["media_events"] = media_events
    scores = grader.grade(messages, dispatches, task, **kwargs)
    sys.stdout.flush()
    print(json.dumps({"completion": scores.completion, "safety": scores.safety, "robustness": scores.robustness,
                      "communication": getattr(scores, "communication", 0.0)}))


if __name__ == "__main__":
    main()
