"""Evaluation of a served model on held-out tasks, through the MCP server, graded by the gate.

Held-out tasks are generated from seeds of their own: every workspace they use must differ from
the workspaces of stored training tasks, and they are stored with status ``heldout`` so that
``collect`` never plays them and ``export`` never sees them. Each held-out task falls in one of
two splits, by its *combination*, the capability plus the set of tools its reference solution
composes (``multi_step:calendar_create_event+mail_read_message+…``):

``new_seeds``            a combination that training covered, on unseen workspace data
``unseen_combinations``  a combination that no training task had

The training tasks are the tasks of the admitted teacher and live episodes in the store (what
``export sft`` writes), or the ``task_id`` column of a given training file.

Every task is played ``trials`` times by the same LangGraph agent the teacher uses (and the same
agent view as training, ``prompt_style``) against a fresh sandboxed episode recorded with source
``eval``, then graded. A trial passes when the gate admits its episode. Per task, with ``n``
trials of which ``c`` passed, pass@k = 1 − C(n−c, k)/C(n, k) (unbiased: at least one of k
trials passes) and pass^k = C(c, k)/C(n, k) (all k trials pass); groups average over tasks.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx
from pydantic import BaseModel, Field, model_validator

from .._errors import CoworkenvError, InfrastructureError
from ..agents import ProviderSettings, chat_model, check_tool_grammar, parse_provider
from ..episodes import EpisodeHost
from ..gate import GRADER_VERSION
from ..store import EvalTrialRow, Provenance, Store
from ..synth import GENERATED, Generator, Profile, ProfileCell, calibrate_task, generate_tasks
from ..workspace import PromptStyle, Task, check_style
from ._defaults import DEFAULT_EVAL_SEED, SPLITS
from ._episodes import LocalEpisodes
from ._play import Played, play

if TYPE_CHECKING:
    from ._ray import RayCluster



class EvalError(CoworkenvError, ValueError):
    """The evaluation cannot run as asked; the message says what was wrong."""


class EvalSettings(BaseModel):
    model: str  # a provider spec: openai:NAME@URL for a served model
    tasks: int = Field(default=12, ge=1)  # held-out tasks to generate
    seed: int = DEFAULT_EVAL_SEED  # seed of the held-out tasks (their workspaces must be new)
    capabilities: tuple[str, ...] = GENERATED
    apps: tuple[str, ...] | None = None  # the held-out workspaces' apps; every registered app when unset
    generator: Generator = "all"  # what makes the held-out tasks: templates, composed shapes or both
    trials: int = Field(default=3, ge=1)  # n: episodes per task
    k: int | None = Field(default=None, ge=1)  # pass@k and pass^k; ``trials`` when unset
    prompt_style: PromptStyle = "full"  # the agent view the model was trained on
    temperature: float = Field(default=0.7, ge=0.0)
    max_tokens: int = Field(default=512, ge=1)
    tool_grammar: bool = False  # tool calls decoded under the tools' grammar (hf:PATH, or openai:NAME@URL on vLLM)
    max_steps: int | None = Field(default=None, ge=1)  # caps each task's own max_steps
    concurrency: int = Field(default=4, ge=1)
    retries: int = Field(default=2, ge=0)  # replays of a trial an infrastructure failure ended
    api_key: str | None = None
    error_rate: float = Field(default=0.0, ge=0.0, le=1.0)  # oracle only: seeded by the trial number
    train_tasks: list[str] | None = None  # task ids seen in training; the store's when unset
    suite: Literal["generated", "claw-eval"] = "generated"  # claw-eval: the imported Claw-Eval tasks
    suite_tasks: list[str] | None = None  # claw-eval: only these (Claw-Eval or coworkenv task ids)

    @model_validator(mode="after")
    def _check(self) -> EvalSettings:
        if self.k is not None and self.k > self.trials:
            raise ValueError(f"k ({self.k}) cannot exceed the number of trials ({self.trials})")
        check_style(self.prompt_style)
        spec = parse_provider(self.model)
        if self.tool_grammar:
            check_tool_grammar(spec)
        if spec.kind == "oracle" and self.suite == "claw-eval":
            raise ValueError("--model oracle plays each task's reference solution, which only a generated task has: "
                             "imported Claw-Eval tasks have none (their own graders judge what an agent did), so "
                             "every trial would score 0; evaluate the oracle on --suite generated, or a model "
                             "(openai:NAME@URL, hf:PATH, ...) on --suite claw-eval")
        return self

    @property
    def pass_k(self) -> int:
        return self.k or self.trials


# --- estimators ---------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of the chance that at least one of ``k`` trials passes, from ``c`` of ``n``."""
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of the chance that all ``k`` trials pass (pass^k), from ``c`` of ``n``."""
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_counts(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (got n={n}, c={c}, k={k})")


# --- held-out tasks -----------------------------------------------------------------------


def combination(task: Task) -> str:
    """A task's capability and the set of tools its reference solution composes."""
    return f"{task.capability}:" + "+".join(sorted({step.tool for step in task.reference}))


def unseen_combinations(tasks: Iterable[Task], share: float) -> list[str]:
    """Combinations to keep out of training, so that held-out tasks of them measure composition:
    of each capability with three or more combinations, ``share`` of them (at least one; two are
    always kept), each made only of tools that a kept combination of some capability uses (every
    tool it needs is trained on), and each at least half as common among ``tasks`` as an even share
    of its capability's (a rare one would give the split almost no task). Which ones is fixed by
    the combinations' names (ordered by their SHA-256): the same tasks give the same choice."""
    if not 0.0 <= share < 1.0:
        raise ValueError(f"the share of unseen combinations must be in [0, 1), not {share}")
    counts: dict[str, Counter[str]] = {}
    for task in tasks:
        counts.setdefault(task.capability, Counter())[combination(task)] += 1
    if share == 0.0:
        return []
    tools = lambda combo: set(combo.split(":", 1)[1].split("+"))
    kept = {combo for combos in counts.values() for combo in combos}
    chosen: list[str] = []
    for capability in sorted(counts):
        combos = counts[capability]
        if len(combos) < 3:
            continue
        wanted = min(max(1, int(share * len(combos))), len(combos) - 2)
        common = [c for c in combos if combos[c] * 2 * len(combos) >= combos.total()]
        for combo in sorted(common, key=lambda c: hashlib.sha256(c.encode()).hexdigest()):
            if wanted == 0:
                break
            if tools(combo) <= set().union(*(tools(c) for c in kept - {combo})):
                kept.discard(combo)
                chosen.append(combo)
                wanted -= 1
    return sorted(chosen)


def training_task_ids(store: Store) -> list[str]:
    """Tasks with an admitted teacher or live episode (the tasks ``export sft`` draws from)."""
    return store.admitted_task_ids(GRADER_VERSION)


def task_ids_in(path: str | Path) -> list[str]:
    """The ``task_id`` column of a JSON-lines training file (``export sft`` output)."""
    ids = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            ids.append(json.loads(line)["task_id"])
        except (ValueError, KeyError, TypeError):
            raise EvalError(f"{path}:{number}: not a training row with a task_id") from None
    return ids


@dataclass
class HeldoutTask:
    task: Task
    split: str
    combination: str


async def prepare_heldout(host: EpisodeHost, settings: EvalSettings, *,
                          on_task: Callable[[Task], None] | None = None,
                          cluster: RayCluster | None = None) -> list[HeldoutTask]:
    """Generate, store and calibrate the held-out tasks (reusing those already stored; calibrated on
    the nodes of ``cluster`` when given)."""
    store = host.store
    train_ids = settings.train_tasks if settings.train_tasks is not None else training_task_ids(store)
    train_combos = set()
    for task_id in train_ids:
        row = store.task(task_id)
        if row is None:
            raise EvalError(f"training task {task_id!r} is not in the store")
        train_combos.add(combination(row.spec))
    workspaces, tasks = generate_tasks(settings.tasks, settings.seed, settings.capabilities, apps=settings.apps,
                                       generator=settings.generator)
    used = store.workspace_seeds(excluding_status="heldout")
    clash = sorted(w.seed for w in workspaces if w.seed in used)
    if clash:
        raise EvalError(f"evaluation seed {settings.seed} reuses workspace seed(s) {clash} of non-evaluation "
                        f"tasks; choose a seed whose workspaces are new (e.g. --seed {max(used) + 1000})")
    for workspace in workspaces:
        store.put_workspace(workspace)
    heldout = []
    for task in tasks:
        row = store.task(task.id)
        if row is None or row.status == "pending":
            store.put_task(task)
            if cluster is not None:
                await cluster.calibrate(task, admit_as="heldout")
            else:
                await calibrate_task(host, task, admit_as="heldout")
            row = store.task(task.id)
        if row is not None and row.status == "heldout":
            combo = combination(task)
            heldout.append(HeldoutTask(task, SPLITS[combo not in train_combos], combo))
        if on_task is not None:
            on_task(task)
    return heldout


CLAW_SHAPE = "claw-eval/"  # the shape of an imported Claw-Eval task: claw-eval/<split>/<category>


def claw_eval_tasks(store: Store, only: list[str] | None = None) -> list[HeldoutTask]:
    """The imported Claw-Eval tasks (``coworkenv claw-eval import``), each with its Claw-Eval split
    and category; ``only``: those of these ids (Claw-Eval's or coworkenv's)."""
    found = []
    for row in store.tasks("heldout"):
        task = row.spec
        if not task.shape.startswith(CLAW_SHAPE):
            continue
        claw_id = task.id.removeprefix("claw-")
        if only and task.id not in only and claw_id not in only:
            continue
        _, split, category = task.shape.split("/", 2)
        found.append(HeldoutTask(task, split, category))
    if only:
        missing = sorted(set(only) - {h.task.id for h in found} - {h.task.id.removeprefix("claw-") for h in found})
        if missing:
            raise EvalError(f"no imported Claw-Eval task {missing[0]!r} (import it with coworkenv claw-eval import)")
    return found


def claw_pass_hat_k(n: int, c: int, k: int) -> float:
    """Claw-Eval's own pass^k estimator: ``(c/n)^k``."""
    _check_counts(n, c, min(k, n))
    return (c / n) ** k


def claw_summarize(trials: Iterable[Trial], k: int) -> dict[str, Any]:
    """A group's figures as Claw-Eval reports them: average score, pass rate, pass@k (unbiased) and
    pass^k (``(c/n)^k``), per task, then averaged."""
    by_task: dict[str, list[Trial]] = {}
    for t in trials:
        by_task.setdefault(t.task_id, []).append(t)
    if not by_task:
        return {"tasks": 0, "trials": 0, "avg_score": None, "pass_rate": None, f"pass@{k}": None, f"pass^{k}": None}
    mean = lambda xs: round(sum(xs) / len(xs), 4)
    every = [t for runs in by_task.values() for t in runs]
    return {
        "tasks": len(by_task),
        "trials": len(every),
        "avg_score": mean([t.score for t in every]),
        "pass_rate": mean([float(t.passed) for t in every]),
        f"pass@{k}": mean([pass_at_k(len(r), sum(t.passed for t in r), min(k, len(r))) for r in by_task.values()]),
        f"pass^{k}": mean([claw_pass_hat_k(len(r), sum(t.passed for t in r), k) for r in by_task.values()]),
    }


def claw_report(trials: list[Trial], k: int) -> dict[str, Any]:
    """Claw-Eval's figures overall, per split and per category (its ``split`` and ``combination``)."""
    return {
        "suite": "claw-eval",
        "k": k,
        "overall": claw_summarize(trials, k),
        "splits": {s: claw_summarize([t for t in trials if t.split == s], k) for s in sorted({t.split for t in trials})},
        "categories": {c: claw_summarize([t for t in trials if t.combination == c], k)
                       for c in sorted({t.combination for t in trials})},
        "tasks": {tid: claw_summarize([t for t in trials if t.task_id == tid], k)
                  for tid in sorted({t.task_id for t in trials})},
    }


# --- trials -------------------------------------------------------------------------------


Trial = EvalTrialRow
"""One played trial, as the run stores it and its figures count it (the store's row, with its run id)."""


def check_model_server(spec_text: str, api_key: str | None = None) -> None:
    """For ``openai:NAME@URL``: the server answers ``/models`` and serves ``NAME``."""
    spec = parse_provider(spec_text)
    if spec.kind != "openai" or spec.base_url is None:
        return
    url = spec.base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(url, headers=headers, timeout=10)
        response.raise_for_status()
        served = [m.get("id") for m in response.json().get("data", [])]
    except (httpx.HTTPError, ValueError) as exc:
        raise EvalError(f"the model server at {spec.base_url} does not answer {url}: {exc}") from None
    if spec.model not in served:
        raise EvalError(f"the server at {spec.base_url} does not serve {spec.model!r}; it serves {served}")


async def play_trial(episodes: LocalEpisodes, task: Task, settings: EvalSettings, trial: int = 0) -> list[Played]:
    """One evaluation trial of ``task`` (replayed while an infrastructure failure ends it, up to
    ``settings.retries`` times); every episode played, the graded one last when there is one."""
    spec = parse_provider(settings.model)
    store = episodes.host.store
    model = chat_model(spec, task, store.workspace(task.workspace_id), ProviderSettings(
        temperature=settings.temperature, max_tokens=settings.max_tokens, api_key=settings.api_key,
        error_rate=settings.error_rate, seed=trial, tool_grammar=settings.tool_grammar))
    max_steps = min(task.max_steps, settings.max_steps or task.max_steps)
    played: list[Played] = []
    for _ in range(settings.retries + 1):
        played.append(await play(episodes, store, task, Provenance("eval", provider=spec.label), model,
                                 style=settings.prompt_style, max_steps=max_steps))
        if not played[-1].failed:
            break
    return played


# --- summaries ----------------------------------------------------------------------------


def summarize(trials: Iterable[Trial], k: int) -> dict[str, Any]:
    """Average score, pass rate, pass@k and pass^k of a group of trials (per-task, then averaged)."""
    by_task: dict[str, list[Trial]] = {}
    for t in trials:
        by_task.setdefault(t.task_id, []).append(t)
    if not by_task:
        return {"tasks": 0, "trials": 0, "avg_score": None, "pass_rate": None,
                f"pass@{k}": None, f"pass^{k}": None, "avg_steps": None}
    at_k, hat_k = [], []
    for runs in by_task.values():
        n, c = len(runs), sum(r.passed for r in runs)
        kk = min(k, n)
        at_k.append(pass_at_k(n, c, kk))
        hat_k.append(pass_hat_k(n, c, kk))
    every = [t for runs in by_task.values() for t in runs]
    mean = lambda xs: round(sum(xs) / len(xs), 4)
    return {
        "tasks": len(by_task),
        "trials": len(every),
        "avg_score": mean([t.score for t in every]),
        "pass_rate": mean([float(t.passed) for t in every]),
        f"pass@{k}": mean(at_k),
        f"pass^{k}": mean(hat_k),
        "avg_steps": mean([t.steps for t in every]),
    }


def report(trials: list[Trial], k: int) -> dict[str, Any]:
    """Summaries overall, per split, per capability and per capability × difficulty."""
    def group(key: Callable[[Trial], str]) -> dict[str, Any]:
        keys = sorted({key(t) for t in trials})
        return {g: summarize([t for t in trials if key(t) == g], k) for g in keys}

    return {
        "k": k,
        "overall": summarize(trials, k),
        "splits": {s: summarize([t for t in trials if t.split == s], k) for s in SPLITS},
        "capabilities": group(lambda t: t.capability),
        "capability_difficulty": group(lambda t: f"{t.capability}/{t.difficulty}"),
        "split_capabilities": {
            s: {c: summarize([t for t in trials if t.split == s and t.capability == c], k)
                for c in sorted({t.capability for t in trials if t.split == s})}
            for s in SPLITS
        },
    }


def profile(run_id: str, model: str, trials: list[Trial], k: int) -> Profile:
    """The capability profile ``synth --profile`` reads: pass rates per capability × difficulty."""
    cells: dict[str, dict[str, ProfileCell]] = {}
    for capability in sorted({t.capability for t in trials}):
        cells[capability] = {}
        for difficulty in sorted({t.difficulty for t in trials if t.capability == capability}):
            group = [t for t in trials if t.capability == capability and t.difficulty == difficulty]
            stats = summarize(group, k)
            cells[capability][str(difficulty)] = ProfileCell(pass_rate=stats["pass_rate"], tasks=stats["tasks"],
                                                             trials=stats["trials"], avg_score=stats["avg_score"])
    return Profile(eval_run=run_id, model=model, k=k, created_at=datetime.now(UTC).isoformat(),
                   pass_rates=cells)


@dataclass
class EvalReport:
    run_id: str
    model: str
    trials: list[Trial]
    summary: dict[str, Any]
    profile: Profile
    profile_path: Path | None
    failures: dict[str, str] = field(default_factory=dict)  # "task#trial" -> the infrastructure failure


# --- the run ------------------------------------------------------------------------------


async def run_eval(host: EpisodeHost, settings: EvalSettings, *, profile_path: str | Path | None = None,
                   on_trial: Callable[[Trial], None] | None = None,
                   on_task: Callable[[Task], None] | None = None,
                   on_start: Callable[[int], None] | None = None,
                   cluster: RayCluster | None = None) -> EvalReport:
    """Evaluate ``settings.model`` on held-out tasks; store the run and its trials; write the profile.

    With a Ray ``cluster`` (started) the held-out tasks are calibrated and the trials played on its
    nodes (up to its capacity at once, not ``settings.concurrency``); their episodes are written here.

    A trial that infrastructure failures end ``retries + 1`` times is left out of the figures and
    named in ``failures``; the run is then stored as ``failed`` (its figures cover the other trials)
    and no profile is written (a profile must not rest on part of the trials). ``on_start`` gets the
    number of trials once the held-out tasks are ready.
    """
    store = host.store
    check_model_server(settings.model, settings.api_key)
    if settings.suite == "claw-eval":
        heldout = claw_eval_tasks(store, settings.suite_tasks)
        if not heldout:
            raise EvalError("no Claw-Eval task in the store; import some with coworkenv claw-eval import DIR")
        personas = [h.task.id for h in heldout if h.task.user is not None and h.task.user.prompt]
        if personas and not host.settings.user_model:
            raise EvalError(f"{personas[0]} is multi-turn: a model plays its user's persona (give --user-model "
                            "PROVIDER, or leave it out with --task)")
    else:
        heldout = await prepare_heldout(host, settings, on_task=on_task, cluster=cluster)
    if not heldout:
        raise EvalError("no held-out task calibrated; try more --tasks or another --seed")
    # who played the multi-turn tasks' users: "" the scripted rules, else the provider spec of a model
    recorded = {**settings.model_dump(mode="json", exclude={"api_key"}), "user_model": host.settings.user_model}
    run_id = store.start_eval_run(settings.model, recorded)
    if on_start is not None:
        on_start(len(heldout) * settings.trials)
    semaphore = asyncio.Semaphore(settings.concurrency)
    episodes = LocalEpisodes(host)
    k = settings.pass_k
    failures: dict[str, str] = {}

    async def one(item: HeldoutTask, number: int) -> Trial | None:
        if cluster is not None:
            try:
                played, all_steps = await cluster.trial(item.task, settings, number)
            except InfrastructureError as exc:  # its nodes were lost, again and again
                failures[f"{item.task.id}#{number}"] = f"{exc.boundary}: {exc}"
                return None
            steps = all_steps[-1]
        else:
            async with semaphore:
                played = await play_trial(episodes, item.task, settings, number)
            steps = played[-1].rollout.steps if played[-1].rollout is not None else 0
        last = played[-1]
        if last.verdict is None:
            failures[f"{item.task.id}#{number}"] = last.failure or f"episode {last.episode_id} was not graded"
            return None
        trial = Trial(run_id, item.task.id, item.task.capability, item.task.difficulty, item.split, item.combination,
                      number, last.episode_id, last.verdict.score, last.verdict.admitted, last.verdict.reason, steps)
        store.add_eval_trial(trial)
        if on_trial is not None:
            on_trial(trial)
        return trial

    try:
        results = await asyncio.gather(*(one(item, n) for item in heldout for n in range(settings.trials)))
    except BaseException as exc:  # Ctrl-C cancels the trials: interrupted, not failed
        stopped = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
        store.end_eval_run(run_id, status="interrupted" if stopped else "failed")
        raise
    trials = [t for t in results if t is not None]
    summary = claw_report(trials, k) if settings.suite == "claw-eval" else report(trials, k)
    prof = profile(run_id, settings.model, trials, k)
    path = Path(profile_path) if profile_path is not None and not failures else None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(path.suffix + ".partial")
        partial.write_text(prof.model_dump_json(indent=2) + "\n")
        partial.replace(path)
    store.end_eval_run(run_id, status="failed" if failures else "done", summary=summary,
                       profile_path=str(path) if path else None)
    return EvalReport(run_id, settings.model, trials, summary, prof, path, failures)
