"""``coworkenv eval``: a model on held-out tasks, through the MCP server."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from ..agents import provider_help
from ..gate import GRADER_VERSION, reason_rule
from ..loop import DEFAULT_EVAL_SEED, SPLITS
from ..workspace import PromptStyle
from ._common import (
    DEFAULT_STORE,
    FAILED,
    AppOpt,
    CapabilityOpt,
    GeneratorOpt,
    JsonOpt,
    RayOpt,
    SandboxOpt,
    StoreOpt,
    UserModelOpt,
    check_apps,
    check_capabilities,
    check_ray,
    emit,
    err,
    on_cluster,
    open_host,
    open_store,
    out,
    progress,
    ray_cluster,
)
from ._common import fail as _fail


def _claw_table(summary: dict[str, Any], k: int) -> Table:
    table = Table("group", "tasks", "trials", "avg score", "pass rate", f"pass@{k}", f"pass^{k} (c/n)^k",
                  title="Claw-Eval")
    rows = [("overall", summary["overall"])]
    rows += [(f"split: {s}", v) for s, v in summary["splits"].items()]
    rows += [(f"  {c}", v) for c, v in summary["categories"].items()]
    for label, stats in rows:
        table.add_row(label, str(stats["tasks"]), str(stats["trials"]), f"{stats['avg_score']:.2f}",
                      f"{stats['pass_rate']:.0%}", f"{stats[f'pass@{k}']:.0%}", f"{stats[f'pass^{k}']:.0%}")
    return table


def _table(summary: dict[str, Any], k: int) -> Table:
    if summary.get("suite") == "claw-eval":
        return _claw_table(summary, k)
    table = Table("group", "tasks", "trials", "avg score", "pass rate", f"pass@{k}", f"pass^{k}", "avg steps",
                  title="evaluation")
    rows = [("overall", summary["overall"])]
    rows += [(f"split: {s}", summary["splits"][s]) for s in SPLITS]
    rows += [(f"  {c}", v) for c, v in summary["capability_difficulty"].items()]
    for label, stats in rows:
        if not stats["tasks"]:
            table.add_row(label, "0", "0", "-", "-", "-", "-", "-")
            continue
        table.add_row(label, str(stats["tasks"]), str(stats["trials"]), f"{stats['avg_score']:.2f}",
                      f"{stats['pass_rate']:.0%}", f"{stats[f'pass@{k}']:.0%}", f"{stats[f'pass^{k}']:.0%}",
                      f"{stats['avg_steps']:.1f}")
    return table


def _rejections(store: Path, trials: list[Any]) -> dict[str, dict[str, Any]]:
    """Reason -> how many trials did not pass for it, its rule, and (for a call-based rejection) the
    first such trial's offending call: why a trial scored 1.0 and still did not pass, say."""
    failed = [t for t in trials if not t.passed]
    opened = open_store(store)
    try:
        verdicts = opened.verdicts([t.episode_id for t in failed], GRADER_VERSION)
    finally:
        opened.close()
    found: dict[str, dict[str, Any]] = {}
    for trial in failed:
        entry = found.setdefault(trial.reason, {"trials": 0, "rule": reason_rule(trial.reason)})
        entry["trials"] += 1
        verdict = verdicts.get(trial.episode_id)
        if verdict is not None and verdict.detail and "example" not in entry:
            entry["example"] = f"episode {trial.episode_id} ({trial.task_id}, score {trial.score:g}): {verdict.detail}"
    return dict(sorted(found.items(), key=lambda item: -item[1]["trials"]))


def eval_command(
    model: Annotated[str, typer.Option("--model", help="The model to evaluate (a served model is openai:NAME@URL): "
                                       + provider_help())],
    store: StoreOpt = Path(DEFAULT_STORE),
    tasks: Annotated[int, typer.Option("-n", "--tasks", min=1, help="Held-out tasks to generate.")] = 12,
    seed: Annotated[int, typer.Option(help="Seed of the held-out tasks (their workspaces must be new).")] = DEFAULT_EVAL_SEED,
    capability: CapabilityOpt = None,
    app_name: AppOpt = None,
    generator: GeneratorOpt = "all",
    trials: Annotated[int, typer.Option(min=1, help="Episodes per task (n).")] = 3,
    k: Annotated[int | None, typer.Option("-k", min=1, help="k of pass@k and pass^k (default: --trials).")] = None,
    style: Annotated[PromptStyle, typer.Option("--style", help="The agent view the model was trained on.")] = "full",
    temperature: Annotated[float | None, typer.Option(
        min=0.0, show_default=False, help="Sampling temperature (0: greedy).  [default: 0.7 with several "
        "--trials, so that pass@k and pass^k measure samples; 0 with --trials 1]")] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="Tokens per model reply.")] = 512,
    tool_grammar: Annotated[bool, typer.Option(
        "--tool-grammar", help="Decode tool calls under the bound tools' grammar: a call always names a bound tool "
                               "with its required arguments, each of its type (hf:PATH, or a vLLM server).")] = False,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Cap on agent steps per episode.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes run at once (on each node, with --ray).")] = 4,
    retries: Annotated[int, typer.Option(
        min=0, help="Replays of a trial that an infrastructure failure (model server, sandbox) ended.")] = 2,
    train_data: Annotated[Path | None, typer.Option(
        help="The SFT file the model was trained on (its task_id column); default: the store's training tasks.")] = None,
    profile: Annotated[Path | None, typer.Option(
        help="Where to write the capability profile (default: profile.json beside the store).")] = None,
    as_json: JsonOpt = False,
    sandbox: SandboxOpt = "bwrap",
    user_model: UserModelOpt = "",
    suite: Annotated[str, typer.Option(
        help="generated: held-out tasks synthesized for the run; claw-eval: the imported Claw-Eval tasks "
             "(coworkenv claw-eval import), graded by their own graders.")] = "generated",
    task: Annotated[list[str] | None, typer.Option(
        "--task", help="claw-eval: only this task (repeat for more; Claw-Eval's id or coworkenv's).")] = None,
    service_error_rate: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="claw-eval: the share of service calls that fail with injected HTTP errors "
                               "(Claw-Eval's ERROR_RATE robustness setting).")] = 0.0,
    ray: RayOpt = None,
) -> None:
    """Evaluate a model on held-out tasks through the MCP server: pass@k and pass^k per capability
    (or, with --suite claw-eval, on imported Claw-Eval tasks per split and category)."""
    from ..agents import ProviderError, parse_provider, provider_problem
    from ..loop import EvalError, EvalSettings, run_eval, task_ids_in

    capabilities = check_capabilities(capability)
    apps = check_apps(app_name)
    try:
        settings = EvalSettings.model_validate(dict(
            model=model, tasks=tasks, seed=seed, capabilities=capabilities, apps=apps, generator=generator,
            trials=trials, k=k, prompt_style=style,
            temperature=temperature if temperature is not None else 0.7 if trials > 1 else 0.0,
            max_tokens=max_tokens, tool_grammar=tool_grammar, max_steps=max_steps, concurrency=concurrency,
            retries=retries, api_key=os.environ.get("OPENAI_API_KEY"),
            train_tasks=task_ids_in(train_data) if train_data is not None else None,
            suite=suite, suite_tasks=list(task) if task else None,
        ))
    except ValidationError as exc:
        raise _fail("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None
    except (ValueError, OSError) as exc:
        raise _fail(str(exc)) from None
    problem = provider_problem(parse_provider(model), os.environ)
    if problem:
        raise _fail(problem)
    if (task or service_error_rate) and suite != "claw-eval":
        raise _fail("--task and --service-error-rate apply to --suite claw-eval only")
    if (apps or generator != "all") and suite != "generated":
        raise _fail("--app and --generator choose how held-out tasks are generated: --suite generated only")
    check_ray(ray)
    host = open_host(store, sandbox, user_model=user_model,
                     service_env={"ERROR_RATE": str(service_error_rate)} if service_error_rate else None,
                     local=ray is None)
    profile = profile or store.parent / "profile.json"

    async def run():
        with progress() as bar:
            prepare = bar.add_task("held-out tasks", total=tasks, visible=suite == "generated")
            play = bar.add_task("episodes", total=None)
            options: dict[str, Any] = dict(profile_path=profile, on_task=lambda _: bar.advance(prepare),
                           on_trial=lambda _: bar.advance(play), on_start=lambda total: bar.update(play, total=total))
            try:
                if ray is None:
                    return await run_eval(host, settings, **options)
                async with ray_cluster(ray, host, concurrency) as cluster:
                    return await run_eval(host, settings, cluster=cluster, **options)
            finally:
                await host.close()

    try:
        result = on_cluster(lambda: asyncio.run(run()))
    except (EvalError, ProviderError) as exc:
        raise _fail(str(exc)) from None

    rejections = _rejections(store, result.trials)

    def human() -> None:
        out.print(_table(result.summary, settings.pass_k))
        for reason, entry in rejections.items():
            err.print(f"not passed: {entry['trials']} trials {reason}: {entry['rule']}"
                      + (f" E.g. {entry['example']}" if "example" in entry else ""), markup=False)
        kept = f"profile: {result.profile_path}" if result.profile_path else "no profile written"
        err.print(f"eval run {result.run_id} stored in {store}; {kept}")

    emit(as_json, {"run_id": result.run_id, "model": result.model,
                   "profile": str(result.profile_path) if result.profile_path else None,
                   "failures": result.failures, "not_passed": rejections, **result.summary}, human)
    if result.failures:
        for trial, why in sorted(result.failures.items()):
            err.print(f"  [red]failed[/red] {trial}: {escape(why)}")
        raise _fail(f"{len(result.failures)} trials ended by infrastructure failures (left out of the figures; "
                    "no profile written)", code=FAILED)
