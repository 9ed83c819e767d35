"""The whole loop on embedded defaults: ``run_demo`` (synth → calibrate → collect → gate → export)
and ``run_full`` (then init-tiny → train sft → serve → eval of the base and the trained model).

Every stage resumes from what the run folder already holds.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from rich.progress import Progress

from ..episodes import EpisodeHost, EpisodeSettings
from ..gate import GRADER_VERSION, run_gate
from ..server import running_http_server
from ..store import Store
from ..synth import GENERATED, Generator, synthesize
from ..trainer._chat_template import ToolLines
from ..trainer._model import Spaces
from ..view import write_report
from ..workspace import PromptStyle
from ._collect import TeacherSettings, collect
from ._defaults import (
    DEFAULT_EVAL_SEED,
    FULL_BASE,
    FULL_CAPABILITIES,
    FULL_EVAL_TASKS,
    FULL_LR,
    FULL_PER_WORKSPACE,
    FULL_POINTER_LOSS,
    FULL_REPLAY,
    FULL_SPACES,
    FULL_STEPS,
    FULL_TOOL_LINES,
    FULL_UNSEEN_SHARE,
    FULL_VALUE_SWAPS,
)
from ._episodes import LocalEpisodes
from ._eval import EvalReport


async def run_demo(directory: Path, n: int, seed: int, error_rate: float, progress: Progress,
                   capabilities: tuple[str, ...] = GENERATED, concurrency: int = 4,
                   apps: tuple[str, ...] | None = None, generator: Generator = "all",
                   per_workspace: int | None = None) -> dict:
    """Run the loop into ``directory`` (resumable: what the store holds is kept and reused).

    Up to ``concurrency`` tasks calibrate, and up to as many teacher episodes run, at once.
    ``apps`` and ``generator``: the workspaces' apps and the tasks' source (``synthesize``).
    """
    from ..agents import ProviderSettings
    from ..trainer import export_sft

    started = time.perf_counter()
    store = Store(directory / "coworkenv.db")
    host = EpisodeHost(store, EpisodeSettings(backend="bwrap", cache_dir=directory / "cache"))
    try:
        job = progress.add_task("synthesize + calibrate", total=n)
        synth = await synthesize(host, n, seed, capabilities=capabilities, concurrency=concurrency, apps=apps,
                                 generator=generator, per_workspace=per_workspace,
                                 on_task=lambda *_: progress.advance(job))
        job = progress.add_task("collect (oracle teacher)", total=synth.admitted)
        settings = TeacherSettings(provider="oracle", concurrency=concurrency,
                                   provider_settings=ProviderSettings(error_rate=error_rate, seed=seed))
        async with running_http_server(host) as url:  # the teacher plays over HTTP, as any MCP client
            collected = await collect(store, LocalEpisodes(host, url), settings,
                                      on_run=lambda _: progress.advance(job))
        progress.update(job, total=collected.tasks, completed=collected.tasks)
    finally:
        await host.close()
    job = progress.add_task("gate", total=1)
    run_gate(store)  # episodes are graded as they end; this catches up any that a crash left ungraded
    progress.advance(job)
    job = progress.add_task("export sft", total=1)
    rows = export_sft(store, directory / "export" / "sft.jsonl")
    progress.advance(job)

    report = write_report(store, directory / "report.html")
    teacher = store.episodes(source="teacher")
    verdicts = [store.verdict(e.id, GRADER_VERSION) for e in teacher]
    graded = [v for v in verdicts if v is not None]
    counts = store.task_counts()
    return {
        "store": str(directory / "coworkenv.db"),
        "tasks_generated": sum(counts.values()),
        "tasks_admitted": counts.get("admitted", 0),
        "tasks_quarantined": counts.get("quarantined", 0),
        "episodes": len(teacher),
        "repaired_episodes": sum(1 for e, v in zip(teacher, verdicts, strict=True) if e.repaired_from and v and v.admitted),
        "gate_pass_rate": round(sum(v.admitted for v in graded) / len(graded), 4) if graded else 0.0,
        "collect_failures": collected.failures,
        "exported_rows": rows,
        "export": str(directory / "export" / "sft.jsonl"),
        "report": str(report),
        "seconds": round(time.perf_counter() - started, 2),
    }


class FullSettings(BaseModel):
    """The closing half of the loop (``demo --full``) on embedded defaults."""

    capabilities: tuple[str, ...] = FULL_CAPABILITIES
    apps: tuple[str, ...] | None = None  # the workspaces' apps, of training and held-out tasks; every app when unset
    generator: Generator = "all"  # the tasks' source, of training and held-out tasks
    style: PromptStyle = "minimal"  # the agent view of training and evaluation (see coworkenv.agents._prompting)
    # the model fine-tuned: "pretrained" (the committed PocketWorker base), "scratch" (init-tiny on the SFT rows,
    # of vocab_size, hidden_size and layers), "circuit" (init-tiny --copy-circuit on the SFT rows: a GPT-2 whose
    # copying heads are set by hand and held in training, of vocab_size and layers) or a model folder
    base: str = FULL_BASE
    vocab_size: int = 2048
    hidden_size: int = 128
    tool_lines: ToolLines = FULL_TOOL_LINES  # the tool list of a base built here (init-tiny)
    spaces: Spaces = FULL_SPACES  # the tokenizer's cut before a word, of a base built here (init-tiny)
    layers: int = 2
    train_steps: int = Field(default=FULL_STEPS, ge=1)
    assistant_only_loss: bool = True  # every-token loss learned the protocol more slowly (benchmarks/loop.md)
    # variants of each training row with the values it copies swapped (``swapped_rows``), so that recalling
    # the training rows' values does not pay and copying does (benchmarks/loop.md: not enough for the tiny model)
    value_swaps: int = Field(default=FULL_VALUE_SWAPS, ge=0)
    # each capability's training tasks per workspace (``generate``'s ``per_workspace``; None: a round of its templates)
    per_workspace: int | None = Field(default=FULL_PER_WORKSPACE, ge=1)
    batch_size: int = Field(default=8, ge=1)
    # SFT's matrix products in bfloat16 (weights stay fp32); None: where the machine has bf16 matrix units
    bf16: bool | None = None
    learning_rate: float | None = None  # None: FULL_LR from a pretrained base, 1e-2 from scratch (benchmarks/loop.md)
    replay: float | None = Field(default=None, ge=0)  # None: FULL_REPLAY from a pretrained base, 0 from scratch
    # the weight of SFT's loss on where the circuit's pointer heads look; None: FULL_POINTER_LOSS on the circuit
    # base, 0 on others (they have no pointer heads)
    pointer_loss: float | None = Field(default=None, ge=0)
    eval_tasks: int = Field(default=FULL_EVAL_TASKS, ge=1)
    eval_seed: int = DEFAULT_EVAL_SEED
    eval_trials: int = Field(default=1, ge=1)
    # of each capability's combinations (its tools composed), the share kept out of training: held-out
    # tasks of them are the unseen-combinations split (``unseen_combinations``; 0 trains on all)
    unseen_share: float = Field(default=FULL_UNSEEN_SHARE, ge=0.0, lt=1.0)
    # how models are served for evaluation: "local" in process (hf:PATH), "vllm" by vLLM's OpenAI server,
    # "auto" in process and, where vLLM is installed, the trained model through vLLM as well (both reported)
    serve: Literal["auto", "local", "vllm"] = "auto"
    vllm_python: str | None = None

    @property
    def scratch(self) -> bool:
        """The base is built from the SFT rows here (init-tiny), not read from a folder."""
        return self.base in ("scratch", "circuit")

    def sft_learning_rate(self) -> float:
        return self.learning_rate if self.learning_rate is not None else (1e-2 if self.scratch else FULL_LR)

    def sft_bf16(self) -> bool:
        from ..trainer import bf16_is_fast

        return self.bf16 if self.bf16 is not None else bf16_is_fast()

    def sft_replay(self) -> float:
        return self.replay if self.replay is not None else (0.0 if self.scratch else FULL_REPLAY)

    def sft_pointer_loss(self) -> float:
        return self.pointer_loss if self.pointer_loss is not None else (
            FULL_POINTER_LOSS if self.base == "circuit" else 0.0)

    def paths(self) -> list[str]:
        """The serving paths evaluated, the first of them the one of the before/after table."""
        if self.serve != "auto":
            return [self.serve]
        return ["local"] if self.vllm_skipped() else ["local", "vllm"]

    def vllm_skipped(self) -> str | None:
        """Why ``--serve auto`` leaves the served path out (vLLM is not installed for ``vllm_python``),
        or None where it evaluates it too (and for ``local`` and ``vllm``, which choose their path)."""
        if self.serve != "auto":
            return None
        from ..trainer import ServeError, check_vllm

        try:
            check_vllm(self.vllm_python)
        except ServeError as exc:
            return str(exc).split(";")[0]
        return None


@contextlib.contextmanager
def _stage(progress: Progress, name: str, timings: dict[str, float]) -> Iterator[None]:
    """A progress line for one stage, timed into ``timings``."""
    job = progress.add_task(name, total=1)
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = round(time.perf_counter() - started, 1)
        progress.update(job, completed=1)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C stops the synchronous work of the block at once. Inside ``asyncio.run`` the first Ctrl-C
    only cancels the main task, which code that never awaits (a training) does not see until it
    returns; Python's own handler raises KeyboardInterrupt where the work is, as ``train sft`` does."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield  # signals are set in the main thread only; a process that ignores Ctrl-C keeps ignoring it
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


async def _evaluate(host: EpisodeHost, model_dir: Path, name: str, settings: FullSettings, store_dir: Path,
                    path: str, train_tasks: list[str]) -> EvalReport:
    from ..trainer import VLLMSettings, running_vllm_server
    from ._eval import EvalSettings, run_eval

    def options(spec: str) -> EvalSettings:
        return EvalSettings(model=spec, tasks=settings.eval_tasks, seed=settings.eval_seed,
                            capabilities=settings.capabilities, apps=settings.apps, generator=settings.generator,
                            trials=settings.eval_trials,
                            prompt_style=settings.style, temperature=0.0 if settings.eval_trials == 1 else 0.7,
                            max_tokens=256, concurrency=2, train_tasks=train_tasks)

    profile = store_dir / "eval" / f"{name}.{path}.profile.json"
    if path == "local":
        return await run_eval(host, options(f"hf:{model_dir}"), profile_path=profile)
    async with running_vllm_server(model_dir, name, settings=VLLMSettings(python=settings.vllm_python)) as url:
        return await run_eval(host, options(f"openai:{name}@{url}"), profile_path=profile)


def compare_paths(reports: dict[str, EvalReport]) -> dict[str, Any]:
    """The trained model's pass rate on each serving path, and how often the paths agree trial by
    trial (the same task and trial passed on both, or failed on both)."""
    verdicts = {path: {(t.task_id, t.trial): t.passed for t in report.trials} for path, report in reports.items()}
    shared = set.intersection(*(set(v) for v in verdicts.values()))
    disagreements = sorted(f"{task}#{trial}" for task, trial in shared
                           if len({v[(task, trial)] for v in verdicts.values()}) > 1)
    return {
        "pass_rate": {path: report.summary["overall"]["pass_rate"] for path, report in reports.items()},
        "trials": len(shared),
        "agreement": round(1 - len(disagreements) / len(shared), 3) if shared else None,
        "disagreements": disagreements,
    }


async def run_full(directory: Path, n: int, seed: int, error_rate: float, settings: FullSettings,
                   progress: Progress) -> dict:
    """synth → collect → gate → export → init-tiny → train sft → serve → eval (base and trained)."""
    from ..trainer import (
        CircuitConfig,
        TinyConfig,
        TrainSettings,
        export_sft,
        init_tiny_model,
        read_rows,
        resolve_base,
        train_sft,
        weights_hash,
    )
    from ._eval import combination, task_ids_in, training_task_ids, unseen_combinations

    started = time.perf_counter()
    timings: dict[str, float] = {}
    with _stage(progress, "synth → collect → gate → export", timings):
        collected = await run_demo(directory, n, seed, error_rate, progress, capabilities=settings.capabilities,
                                   apps=settings.apps, generator=settings.generator,
                                   per_workspace=settings.per_workspace)
    store = Store(directory / "coworkenv.db")
    data = directory / "export" / f"sft.{settings.style}.jsonl"
    run_dir = directory / "train" / "sft"
    trainable = [store.task_spec(task_id) for task_id in training_task_ids(store)]
    if not data.exists() or not (run_dir / "model" / "config.json").exists():  # else: the file it was trained on
        unseen = unseen_combinations(trainable, settings.unseen_share)
        export_sft(store, data, style=settings.style,
                   without={task.id for task in trainable if combination(task) in unseen})
    train_tasks = task_ids_in(data)  # what the model is trained on: the split of each held-out task follows
    trained_combinations = {combination(store.task_spec(task_id)) for task_id in set(train_tasks)}
    kept_out = [task for task in trainable if combination(task) not in trained_combinations]
    base_dir = directory / "models" / ("circuit" if settings.base == "circuit" else "tiny") if settings.scratch \
        else resolve_base(settings.base)
    with _stage(progress, "init-tiny" if settings.scratch else "base", timings):
        if settings.scratch and not (base_dir / "config.json").exists():
            circuit = CircuitConfig(num_hidden_layers=settings.layers, seed=seed) if settings.base == "circuit" else None
            init_tiny_model(read_rows(data), base_dir, TinyConfig(
                vocab_size=settings.vocab_size, hidden_size=settings.hidden_size,
                intermediate_size=4 * settings.hidden_size, num_hidden_layers=settings.layers,
                num_attention_heads=max(1, settings.hidden_size // 32),
                num_key_value_heads=max(1, settings.hidden_size // 64), head_dim=32, seed=seed,
                tool_lines=settings.tool_lines, spaces=settings.spaces), circuit=circuit)
    with _stage(progress, f"train sft ({settings.train_steps} steps)", timings), _interruptible():
        if not (run_dir / "model" / "config.json").exists():
            train_sft(store, TrainSettings(model=str(base_dir), data=str(data), out_dir=str(run_dir),
                                           max_steps=settings.train_steps, batch_size=settings.batch_size,
                                           learning_rate=settings.sft_learning_rate(), seed=seed,
                                           replay=settings.sft_replay(), bf16=settings.sft_bf16(),
                                           assistant_only_loss=settings.assistant_only_loss,
                                           value_swaps=settings.value_swaps,
                                           pointer_loss=settings.sft_pointer_loss()))
    host = EpisodeHost(store, EpisodeSettings(backend="bwrap", cache_dir=directory / "cache"))
    paths = settings.paths()
    trained: dict[str, EvalReport] = {}
    try:
        with _stage(progress, f"eval base ({paths[0]})", timings):
            before = (await _evaluate(host, base_dir, "base", settings, directory, paths[0], train_tasks)).summary
        for path in paths:
            with _stage(progress, f"eval trained ({path})", timings):
                trained[path] = await _evaluate(host, run_dir / "model", "trained", settings, directory, path,
                                                train_tasks)
    finally:
        await host.close()
    after = trained[paths[0]].summary
    def rates(base: dict, trained: dict) -> dict:
        return {"base": base.get("pass_rate"), "trained": trained.get("pass_rate"), "tasks": trained.get("tasks", 0)}

    capabilities = {
        c: {**rates(before["capabilities"].get(c, {}), after["capabilities"].get(c, {})),
            "splits": {split: rates(before["split_capabilities"][split].get(c, {}),
                                    after["split_capabilities"][split].get(c, {}))
                       for split in after["split_capabilities"]}}
        for c in settings.capabilities
    }
    return {
        **collected,
        "sft_rows": len(train_tasks),
        "value_swaps": settings.value_swaps,
        "pointer_loss": settings.sft_pointer_loss(),
        # the rows the model was trained on: the training file's and their value-swapped variants
        "trained_rows": next((r.rows for r in reversed(store.training_runs("sft"))
                              if r.output_dir == str(run_dir / "model") and r.status == "done"), None),
        "unseen_combinations": sorted({combination(task) for task in kept_out}),  # kept out of training
        "tasks_kept_out": len(kept_out),
        "capabilities": capabilities,
        "overall": {"base": before["overall"]["pass_rate"], "trained": after["overall"]["pass_rate"],
                    "tasks": after["overall"]["tasks"],
                    "splits": {split: rates(before["splits"][split], after["splits"][split]) for split in after["splits"]}},
        # the trained model on each path (in process, through vLLM), and why the served path was left out
        "serving": {**compare_paths(trained), "vllm_python": settings.vllm_python,
                    "skipped": None if "vllm" in paths else settings.vllm_skipped() or f"--serve {settings.serve}"},
        "base_model": str(base_dir),
        "base_weights_sha256": weights_hash(base_dir),
        "trained_model": str(run_dir / "model"),
        "report": str(write_report(store, directory / "report.html")),  # now with the training and both evaluations
        "stage_seconds": timings,
        "seconds": round(time.perf_counter() - started, 1),
    }


