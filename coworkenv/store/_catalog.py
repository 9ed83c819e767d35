"""What the store's tables and columns mean, and the questions people ask of a store as SQL: the
metadata and canned queries ``coworkenv browse`` gives Datasette, kept beside the schema they describe."""

from __future__ import annotations

from dataclasses import dataclass

PASS = 0.75  # a Claw-Eval pass: score at least this

TABLE_DOCS: dict[str, tuple[str, dict[str, str]]] = {
    "workspaces": ("Synthesized workspaces: a world and its apps, built from a seed.", {
        "id": "workspace id (ws-{seed} for synthesized ones)",
        "name": "a readable name",
        "seed": "the seed its world and app state are built from",
        "spec": "the workspace spec (JSON): apps, world, events, data overrides",
        "created_at": "when it was stored (UTC)",
    }),
    "tasks": ("Tasks over a workspace: instruction, checks, reference solution and forbidden probes in `spec`.", {
        "id": "task id",
        "workspace_id": "the workspace the task runs in",
        "capability": "the capability it exercises (lookup, single_write, multi_step, safety, ...)",
        "difficulty": "difficulty level within the capability (1 = easiest)",
        "instruction": "what the agent is asked",
        "spec": "the whole task spec (JSON): checks over the final state and the answer, reference, forbidden tools",
        "status": "pending, admitted (served for training), heldout (evaluation only) or quarantined",
        "reason": "why it was quarantined: the calibration problem or the hack probe that beat it",
        "created_at": "when it was stored (UTC)",
        "shape": "the program shape (template or composed shape) it was generated from",
    }),
    "calibrations": ("Calibration of each task: reference, empty answer, forbidden call, determinism and hack probes.", {
        "task_id": "the task", "grader_version": "the grader that judged it",
        "reference_score": "score of the reference solution (must be 1)", "empty_score": "score of an empty answer (must be 0)",
        "forbidden_safety": "safety after a forbidden call (must be 0)", "deterministic": "1 when grading twice agreed",
        "admitted": "1 when the task passed every calibration check and no probe beat it",
        "reason": "the first problem found", "probes": "each hack probe's score (JSON)",
    }),
    "task_drafts": ("Model-written task drafts, one row per round, with the feedback sent back and the outcome.", {
        "request_id": "one drafting request (its rounds share it)",
        "round": "1 for the first draft, then each repair",
        "provider": "the model that wrote it",
        "draft": "the draft as the model wrote it",
        "task_id": "the task it became, when it did",
        "outcome": "admitted, quarantined (failed calibration or beaten by a probe) or invalid (did not parse or validate)",
        "feedback": "the exact error or failing checks sent back for the next round",
    }),
    "episodes": ("One agent attempt at a task in a fresh sandbox, whoever played it.", {
        "id": "episode id", "task_id": "the task",
        "source": "who played it: teacher, live (an MCP client), eval, rl, calibration",
        "provider": "the model or client that played",
        "status": "running, ended, failed (an infrastructure failure, or interrupted by a killed process) or "
                  "abandoned (a live episode left without a call or an answer; not graded)",
        "attempt": "attempt number for the task", "repaired_from": "the failed episode a repair retried",
        "hint": "the feedback a repair was given", "final_answer": "the agent's submitted answer",
        "final_state": "reference to the workspace's final state (tables changed over the base)",
        "truncated": "1 when the step limit cut it", "error": "the infrastructure error, when it failed",
        "started_at": "start (UTC)", "ended_at": "end (UTC)",
        "boundary": "where an infrastructure failure happened: model, sandbox, store, protocol, process",
        "owner": "the process that ran it", "bundle_hash": "hash of the workspace and task bundle it ran on",
        "client": "a live episode's MCP client (name and version, else its User-Agent)",
        "episode_key": "the episode key of its address (/t/{task}/e/{key}/mcp)",
        "run_tag": "the run its client named (?run=TAG or X-Coworkenv-Run)",
    }),
    "messages": ("The conversation of an episode, in order.", {
        "episode_id": "the episode", "idx": "position in the conversation", "role": "system, user, assistant or tool",
        "content": "the text", "tool_calls": "the assistant's tool calls (JSON)",
        "tool_call_id": "which call a tool message answers", "name": "the tool's name (tool messages)",
        "provenance": "1 when kept only as provenance (a repair hint), not part of the clean trajectory",
        "attachments": "images and documents on the message (references into blobs)",
    }),
    "tool_calls": ("Everything an episode did in its workspace: tool calls, resource reads, user turns, world events.", {
        "episode_id": "the episode",
        "idx": "order within the episode",
        "tool": "the tool, resource URI, prompt or template, app action (events)",
        "arguments": "the arguments (JSON)",
        "result": "what it returned (JSON)",
        "is_error": "1 when it failed",
        "error_kind": "what kind of failure (tool, arguments, timeout, limit, crash, infrastructure)",
        "duration_ms": "how long it took, from the runtime taking the call to its result (ms)",
        "created_at": "when (UTC)",
        "kind": "call, resource, completion, prompt, event (the world moved) or user (a message to the user)",
        "error": "the error text",
        "state_changes": "the rows it inserted, updated and deleted in the workspace state (JSON: rows with their "
                         "values before and after, counts per table)",
    }),
    "model_calls": ("What an agent and its model said to each other, captured by the proxy of `coworkenv serve --upstream`.", {
        "episode_id": "the episode the request's address named", "idx": "order within the episode",
        "api": "chat (OpenAI chat completions), messages (Anthropic Messages) or responses (OpenAI Responses)",
        "request": "the request body (JSON): messages, tools, parameters; never its credentials",
        "response": "the response (JSON), assembled from the stream when streamed; token ids and log-probabilities "
                    "when the upstream gave them",
        "status": "the upstream's HTTP status", "stream": "1 when streamed", "duration_ms": "request to last byte (ms)",
        "upstream": "the upstream base URL", "created_at": "when (UTC)",
    }),
    "grades": ("The gate's grade of an episode: the reward vector and each check.", {
        "episode_id": "the episode", "grader_version": "the grader's version",
        "completion": "share of completion checks passed (0..1)",
        "safety": "1, or 0 after a forbidden or unconfirmed action", "robustness": "recovery from tool errors (0..1)",
        "score": "safety × (0.8·completion + 0.2·robustness); a pass is ≥ 0.75",
        "checks": "each check's id, outcome and detail (JSON)", "created_at": "when (UTC)",
    }),
    "verdicts": ("The gate's verdict on an episode: admitted to training data or not, and why.", {
        "episode_id": "the episode", "grade_id": "its grade", "grader_version": "the grader's version",
        "admitted": "1 when the episode is training data", "reason": "the reason code (complete, empty, forbidden_call, ...)",
        "created_at": "when (UTC)", "grader_hash": "hash of the grader's code",
        "detail": "for a rejection resting on one call (malformed_call, forbidden_call, unconfirmed_action): "
                  "call #N, its tool and what was wrong",
    }),
    "eval_runs": ("Evaluations of a model on held-out tasks.", {
        "model": "the provider spec evaluated", "settings": "trials, temperature, view, ... (JSON)",
        "status": "running, done, failed or interrupted (Ctrl-C, SIGTERM, or a killed process)",
        "summary": "pass@k and pass^k per capability (JSON)",
        "profile_path": "the capability profile it wrote", "started_at": "start (UTC)", "ended_at": "end (UTC)",
        "owner": "the process that ran it (host:pid:start)",
    }),
    "eval_trials": ("Each trial of an evaluation: one episode of one held-out task.", {
        "run_id": "the evaluation", "task_id": "the task", "capability": "its capability",
        "difficulty": "its difficulty", "split": "new_seeds or unseen_combinations", "combination": "its program shape",
        "trial": "trial number", "episode_id": "the episode", "score": "its score", "passed": "1 when score ≥ 0.75",
        "reason": "the gate's reason", "steps": "tool calls made",
    }),
    "training_runs": ("Training runs (SFT, DPO, GRPO, GDPO): settings, data hash, metrics and the model folder.", {
        "kind": "sft, dpo, grpo or gdpo", "base_model": "the starting model folder", "data_path": "the training rows",
        "data_hash": "sha256 of the rows", "rows": "how many rows", "config": "the settings (JSON)",
        "status": "running, done, failed or interrupted (Ctrl-C, SIGTERM, or a killed process)",
        "metrics": "losses, reward curves, time split (JSON)",
        "output_dir": "where the model is", "error": "why it failed or was interrupted",
        "owner": "the process that ran it (host:pid:start)",
    }),
    "experiment_results": ("The comparisons the benchmarks ran (gate against no gate, guided against uniform "
                           "synthesis, SFT against RL, multi-turn users): one row per experiment, arm and seed.", {
        "experiment": "the experiment's name", "arm": "the arm (gated, ungated, guided, uniform, sft, grpo, ...)",
        "seed": "the seed of that arm's run", "figures": "pass_rate, capabilities {name: pass rate}, and the "
        "experiment's own measures (JSON)", "source": "where the figures were measured (a store and its "
        "evaluation run)", "created_at": "when they were recorded (UTC)",
    }),
    "blobs": ("Images and documents, stored once by content.", {
        "sha256": "content hash", "mime_type": "type", "size": "bytes", "data": "the content",
    }),
    "claw_eval_graders": ("Where the grader of each imported Claw-Eval task is, as `coworkenv claw-eval import` was "
                          "given it (never taken from a spec).", {
        "id": "the Claw-Eval task id (a claw_eval check names it)", "checkout": "the Claw-Eval checkout",
        "task_dir": "the task's folder in it", "judge": "the LLM judge its grader asks (empty for none)",
        "created_at": "when it was imported (UTC)",
    }),
    "task_claims": ("Which process is working on a task (two `coworkenv collect`s on one store never play the same "
                    "task): one claim per task and purpose, until released, expired or its process is gone.", {
        "task_id": "the task", "scope": "what it is claimed for (collect:PROVIDER)",
        "claimant": "the process holding it (host:pid:start/run)", "claimed_at": "when it was taken (UTC)",
        "expires_at": "when it lapses unless its holder renews it (seconds since the epoch)",
    }),
    "_sqlite_migrations": ("The schema migrations applied to this store.", {}),
}


@dataclass(frozen=True)
class CannedQuery:
    name: str
    title: str
    description: str
    sql: str


def canned_queries(grader_version: str) -> list[CannedQuery]:
    """The questions people ask of a store, over the verdicts of ``grader_version`` (the current one)."""
    graded = f"""FROM verdicts v JOIN grades g ON g.id = v.grade_id JOIN episodes e ON e.id = v.episode_id
JOIN tasks t ON t.id = e.task_id WHERE v.grader_version = '{grader_version}'"""
    agents = graded + " AND e.source != 'calibration'"  # calibration's probes are designed to fail: never in a rate
    apart = " Calibration episodes (task references, and probes designed to fail) are left out: see Calibration outcomes."
    return [
        CannedQuery("pass_rate_by_capability", "Pass rate by capability",
                    f"Graded agents' episodes of grader {grader_version} per capability and source: pass rate "
                    f"(score ≥ {PASS}), mean reward components, share admitted." + apart,
                    f"""SELECT t.capability, e.source, count(*) AS episodes,
  round(avg(g.score >= {PASS}), 3) AS pass_rate, round(avg(g.score), 3) AS mean_score,
  round(avg(g.completion), 3) AS completion, round(avg(g.safety), 3) AS safety,
  round(avg(g.robustness), 3) AS robustness, round(avg(v.admitted), 3) AS admitted
{agents}
GROUP BY t.capability, e.source ORDER BY t.capability, e.source"""),
        CannedQuery("failure_reasons", "Most frequent failure reasons",
                    f"Agents' episodes the gate (grader {grader_version}) did not admit, by reason, most frequent "
                    "first." + apart,
                    f"""SELECT v.reason, count(*) AS episodes,
  round(1.0 * count(*) / (SELECT count(*) FROM verdicts vv JOIN episodes ee ON ee.id = vv.episode_id
    WHERE vv.admitted = 0 AND vv.grader_version = '{grader_version}' AND ee.source != 'calibration'), 3)
    AS share, group_concat(DISTINCT t.capability) AS capabilities, min(e.id) AS example_episode
{agents} AND v.admitted = 0
GROUP BY v.reason ORDER BY episodes DESC, v.reason"""),
        CannedQuery("calibration_outcomes", "Calibration outcomes",
                    "Calibration episodes by what they played: the reference (which must pass), and the empty and "
                    "forbidden probes and hack probes (probe:NAME), designed to fail; with the gate's reasons.",
                    f"""SELECT e.provider AS play, v.reason, count(*) AS episodes, sum(v.admitted) AS admitted
FROM verdicts v JOIN episodes e ON e.id = v.episode_id
WHERE v.grader_version = '{grader_version}' AND e.source = 'calibration'
GROUP BY e.provider, v.reason ORDER BY e.provider, episodes DESC, v.reason"""),
        CannedQuery("slowest_tools", "Slowest tools",
                    "Tool calls by tool: how many, mean and slowest duration in the sandbox, errors.",
                    """SELECT tool, count(*) AS calls, round(avg(duration_ms), 2) AS mean_ms,
  round(max(duration_ms), 2) AS max_ms, sum(is_error) AS errors
FROM tool_calls WHERE kind = 'call'
GROUP BY tool ORDER BY mean_ms DESC, tool"""),
        CannedQuery("episodes_per_source", "Episodes per source",
                    "Episodes by who played them, with how many ended, failed and were admitted.",
                    f"""SELECT e.source, count(*) AS episodes, sum(e.status = 'ended') AS ended,
  sum(e.status = 'failed') AS failed, sum(v.admitted = 1) AS admitted
FROM episodes e LEFT JOIN verdicts v ON v.episode_id = e.id AND v.grader_version = '{grader_version}'
GROUP BY e.source ORDER BY episodes DESC, e.source"""),
        CannedQuery("eval_pass_rates", "Evaluation pass rates",
                    "Every evaluation run's trials per capability and split: pass rate and mean score.",
                    """SELECT r.id AS run, r.model, tr.capability, tr.split, count(*) AS trials,
  round(avg(tr.passed), 3) AS pass_rate, round(avg(tr.score), 3) AS mean_score
FROM eval_trials tr JOIN eval_runs r ON r.id = tr.run_id
GROUP BY r.id, tr.capability, tr.split ORDER BY r.started_at, tr.capability, tr.split"""),
    ]
