"""Orchestration: who plays which episode, with which provenance. ``collect`` (the teacher, with
repair), ``run_eval`` (held-out tasks, pass@k and pass^k), ``run_rl`` (GRPO and GDPO on live
episodes; ``CoworkEnv`` gives the same episodes to a TRL trainer built by its
caller), the demo of the whole loop, and ``RayCluster`` (the batch work on a Ray cluster's nodes).

Names are imported on first use (the agent stack is heavy; the CLI needs only a few constants).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._collect import CollectSummary, TaskRun, Teacher, TeacherSettings, collect, pending_tasks
    from ._defaults import (
        DEFAULT_EVAL_SEED,
        DEMO_TASKS,
        FULL_BASE,
        FULL_CAPABILITIES,
        FULL_EVAL_TASKS,
        FULL_LR,
        FULL_POINTER_LOSS,
        FULL_REPLAY,
        FULL_SPACES,
        FULL_STEPS,
        FULL_TASKS,
        FULL_TOOL_LINES,
        FULL_UNSEEN_SHARE,
        FULL_VALUE_SWAPS,
        SPLITS,
    )
    from ._demo import FullSettings, run_demo, run_full
    from ._episodes import EpisodeService, LocalEpisodes, OpenedEpisode, RemoteEpisodes
    from ._eval import (
        EvalError,
        EvalReport,
        EvalSettings,
        Trial,
        check_model_server,
        combination,
        pass_at_k,
        pass_hat_k,
        report,
        run_eval,
        summarize,
        task_ids_in,
        unseen_combinations,
    )
    from ._play import Played, play
    from ._ray import ClusterError, NodeHost, RayCluster
    from ._rl import LiveRollouts, RLEpisode, rl_training_rows, run_rl
    from ._trl import CoworkEnv

__getattr__, __dir__, __all__ = lazy_names(__name__, {  # submodule: the names it gives
    "_collect": ("CollectSummary", "TaskRun", "Teacher", "TeacherSettings", "collect", "pending_tasks"),
    "_defaults": ("DEFAULT_EVAL_SEED", "DEMO_TASKS", "FULL_BASE", "FULL_CAPABILITIES", "FULL_VALUE_SWAPS",
                  "FULL_EVAL_TASKS", "FULL_LR", "FULL_POINTER_LOSS", "FULL_REPLAY", "FULL_SPACES", "FULL_STEPS",
                  "FULL_TASKS", "FULL_TOOL_LINES", "FULL_UNSEEN_SHARE", "SPLITS"),
    "_demo": ("FullSettings", "run_demo", "run_full"),
    "_episodes": ("EpisodeService", "LocalEpisodes", "OpenedEpisode", "RemoteEpisodes"),
    "_eval": (
        "EvalError", "EvalReport", "EvalSettings", "Trial", "check_model_server", "combination", "pass_at_k",
        "pass_hat_k", "report", "run_eval", "summarize", "task_ids_in", "unseen_combinations",
    ),
    "_play": ("Played", "play"),
    "_ray": ("ClusterError", "NodeHost", "RayCluster"),
    "_rl": ("LiveRollouts", "RLEpisode", "rl_training_rows", "run_rl"),
    "_trl": ("CoworkEnv",),
})
