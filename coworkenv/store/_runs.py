"""Evaluation and training runs: what was run, with which settings, and what came of it.

A run is recorded as ``running`` before its work starts, with the process that runs it, and closed
with its status (done, failed, interrupted) at the end, so a run that was stopped or crashed is still
in the store, with the settings it ran with and the trials it finished. A process killed outright
(SIGKILL, the OOM killer, a power loss) cannot close its run: ``interrupt_orphaned_runs`` does, once
that process is gone.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from .._process import label_gone, process_label
from ._connection import Connection
from ._rows import EvalRunRow, EvalTrialRow, ExperimentResultRow, TrainingRunRow, _json
from ._statements import new_id, now, where_equal


class RunRepository(Connection):
    """The ``eval_runs``, ``eval_trials``, ``training_runs`` and ``experiment_results`` tables."""

    # --- experiments -------------------------------------------------------------------------

    def put_experiment_result(self, experiment: str, arm: str, seed: int, figures: dict[str, Any],
                              source: str = "") -> None:
        """Record one arm's figures for one seed, replacing what that experiment, arm and seed had."""
        if not experiment or not arm:
            raise ValueError("an experiment result needs an experiment and an arm name")
        with self.transaction() as db:
            db.table("experiment_results").upsert(
                {"experiment": experiment, "arm": arm, "seed": seed, "figures": json.dumps(figures),
                 "source": source, "created_at": now()}, pk=("experiment", "arm", "seed"))

    def experiment_results(self, experiment: str | None = None) -> list[ExperimentResultRow]:
        """Recorded experiment results (of one experiment, or all), in the order they were first recorded."""
        where, params = where_equal(experiment=experiment)
        rows = self.query(f"select * from experiment_results{where} order by rowid", params)
        return [ExperimentResultRow(r["experiment"], r["arm"], r["seed"], _json(r["figures"], {}), r["source"] or "",
                                    r["created_at"]) for r in rows]

    # --- evaluation runs -------------------------------------------------------------------

    def start_eval_run(self, model: str, settings: dict[str, Any]) -> str:
        """Record a new evaluation, run by this process."""
        run_id = new_id("eval")
        with self.transaction() as db:
            db.table("eval_runs").insert({"id": run_id, "model": model, "settings": json.dumps(settings),
                                          "status": "running", "started_at": now(), "owner": process_label()})
        return run_id

    def add_eval_trial(self, trial: EvalTrialRow) -> None:
        with self.transaction() as db:
            db.table("eval_trials").insert({**asdict(trial), "passed": int(trial.passed), "created_at": now()})

    def end_eval_run(self, run_id: str, *, status: str, summary: dict[str, Any] | None = None,
                     profile_path: str | None = None) -> None:
        with self.transaction() as db:
            db.table("eval_runs").update(run_id, {"status": status, "summary": json.dumps(summary) if summary else None,
                                                  "profile_path": profile_path, "ended_at": now()})

    def eval_run(self, run_id: str) -> EvalRunRow | None:
        rows = self.query("select * from eval_runs where id = ?", (run_id,))
        return _eval_run(rows[0]) if rows else None

    def eval_runs(self, status: str | None = None) -> list[EvalRunRow]:
        """Every evaluation run (or those of one status), by start."""
        where, params = where_equal(status=status)
        return [_eval_run(r) for r in self.query(f"select * from eval_runs{where} order by started_at, id", params)]

    def eval_trials(self, run_id: str) -> list[EvalTrialRow]:
        rows = self.query("select * from eval_trials where run_id = ? order by id", (run_id,))
        return [EvalTrialRow(r["run_id"], r["task_id"], r["capability"], r["difficulty"], r["split"],
                             r["combination"], r["trial"], r["episode_id"], r["score"], bool(r["passed"]),
                             r["reason"], r["steps"]) for r in rows]

    # --- training runs ---------------------------------------------------------------------

    def start_training_run(self, row: dict) -> str:
        """Record a new training from ``row`` (the ``training_runs`` columns it gives), run by this process."""
        run_id = row.get("id") or new_id("train")
        with self.transaction() as db:
            db.table("training_runs").insert({**row, "id": run_id, "status": "running", "started_at": now(),
                                              "owner": process_label()})
        return run_id

    def end_training_run(self, run_id: str, *, status: str, metrics: dict | None = None, error: str = "") -> None:
        with self.transaction() as db:
            db.table("training_runs").update(run_id, {"status": status, "metrics": json.dumps(metrics or {}),
                                                      "error": error, "ended_at": now()})

    def training_run(self, run_id: str) -> TrainingRunRow | None:
        rows = self.query("select * from training_runs where id = ?", (run_id,))
        return _training_run(rows[0]) if rows else None

    def training_runs(self, kind: str | None = None, status: str | None = None) -> list[TrainingRunRow]:
        where, params = where_equal(kind=kind, status=status)
        return [_training_run(r) for r in self.query(f"select * from training_runs{where} order by started_at", params)]

    def interrupt_orphaned_runs(self) -> list[str]:
        """End every evaluation and training left ``running`` by a process that is gone, as interrupted;
        return their ids. A run recorded without its process (before processes were recorded) is left
        as it is, and so is one of another host: nothing here tells whether it still runs."""
        ended = []
        for evaluation in self.eval_runs(status="running"):
            if evaluation.owner and label_gone(evaluation.owner):
                self.end_eval_run(evaluation.id, status="interrupted", summary=evaluation.summary,
                                  profile_path=evaluation.profile_path)
                ended.append(evaluation.id)
        for training in self.training_runs(status="running"):
            if training.owner and label_gone(training.owner):
                self.end_training_run(training.id, status="interrupted", metrics=training.metrics,
                                      error=f"interrupted: the process that ran it ({training.owner}) is gone")
                ended.append(training.id)
        return ended


def _eval_run(r: dict[str, Any]) -> EvalRunRow:
    return EvalRunRow(r["id"], r["model"], _json(r["settings"], {}), r["status"], _json(r["summary"], None),
                      r["profile_path"], r["started_at"], r["ended_at"], r.get("owner"))


def _training_run(r: dict[str, Any]) -> TrainingRunRow:
    return TrainingRunRow(r["id"], r["kind"], r["base_model"] or "", r["data_path"] or "", r["data_hash"] or "",
                          r["rows"] or 0, _json(r["config"], {}), r["status"], _json(r["metrics"], {}),
                          r["output_dir"] or "", r["error"] or "", r["started_at"], r["ended_at"],
                          r.get("owner"))
