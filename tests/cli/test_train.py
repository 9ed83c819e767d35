"""``coworkenv model init-tiny`` and ``coworkenv train sft|dpo`` as a user meets them: bad flags and
files are named before anything is trained or stored (exit 2), runs show their progress on stderr,
``--json`` prints the summary on stdout, and ``--report-to tensorboard`` writes event files."""

import io
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from coworkenv.cli import app
from coworkenv.cli._train import TrainingDisplay, spinner
from coworkenv.store import Store
from coworkenv.trainer._train import TrainProgress

runner = CliRunner()

TOOLS = [{"type": "function", "function": {"name": "mail_read_message", "description": "Read one message.",
                                           "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}]


def _conversation(i: int) -> list[dict]:
    return [
        {"role": "user", "content": f"Read m{i:02d} and tell me its subject."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "mail_read_message", "arguments": {"id": f"m{i:02d}"}}}]},
        {"role": "tool", "name": "mail_read_message", "content": json.dumps({"id": f"m{i:02d}", "subject": "Lunch"})},
        {"role": "assistant", "content": "The subject is \"Lunch\"."},
    ]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """SFT and DPO rows, and a tiny model made from them by `model init-tiny --json`."""
    pytest.importorskip("trl", reason="needs the 'train' extra")
    root = tmp_path_factory.mktemp("train-cli")
    (root / "sft.jsonl").write_text("".join(json.dumps({"messages": _conversation(i), "tools": TOOLS}) + "\n"
                                            for i in range(8)))
    (root / "dpo.jsonl").write_text("".join(json.dumps(
        {"prompt": _conversation(i)[:1], "chosen": _conversation(i)[1:], "tools": TOOLS,
         "rejected": [{"role": "assistant", "content": "Done."}]}) + "\n" for i in range(8)))
    result = runner.invoke(app, ["model", "init-tiny", "--data", str(root / "sft.jsonl"), "--out", str(root / "tiny"),
                                 "--vocab-size", "400", "--hidden-size", "32", "--intermediate-size", "64",
                                 "--layers", "1", "--heads", "1", "--kv-heads", "1", "--json"])
    assert result.exit_code == 0, result.output
    written = json.loads(result.stdout)
    assert written["path"] == str(root / "tiny") and written["kind"] == "tiny"
    assert 0 < written["parameters"] < 100_000 and 300 < written["vocab_size"] < 500
    assert "training a 400-token BPE tokenizer" in result.stderr and "saving to" in result.stderr
    return root


def _train(kind: str, data: Path, out: Path, *extra: str):
    return runner.invoke(app, ["train", kind, "--model", str(data / "tiny"), "--data", str(data / f"{kind}.jsonl"),
                               "--out", str(out), "--store", str(out.parent / "s.db"), "--batch-size", "2",
                               "--lr", "1e-2", *extra])


def test_unknown_loss_target_is_named(tmp_path):
    result = runner.invoke(app, ["train", "sft", "--store", str(tmp_path / "s.db"), "--out", str(tmp_path / "run"),
                                 "--loss-on", "prompt"])
    assert result.exit_code == 2 and "--loss-on" in result.output and "prompt" in result.output
    assert "assistant" in result.output  # the choices are listed
    assert not (tmp_path / "run").exists() and not (tmp_path / "s.db").exists()


def test_lm_head_flag_takes_only_its_two_spellings(tmp_path):
    result = runner.invoke(app, ["train", "sft", "--store", str(tmp_path / "s.db"), "--out", str(tmp_path / "run"),
                                 "--fused-lm-head=maybe"])
    assert result.exit_code == 2 and "--fused-lm-head" in result.output
    assert not (tmp_path / "run").exists() and not (tmp_path / "s.db").exists()


def test_sft_shows_progress_and_prints_its_summary(data, tmp_path):
    result = _train("sft", data, tmp_path / "run", "--steps", "3", "--logging-steps", "2", "--report-to",
                    "tensorboard")
    assert result.exit_code == 0, result.output
    # stderr (not a terminal here): a line per stage and per logged loss, with elapsed time and ETA
    lines = result.stderr.splitlines()
    assert lines[0] == "sft: loading the model and preparing 8 rows" and lines[1] == "sft: training 3 steps"
    logged = [line for line in lines if line.startswith("sft step ")]
    assert [line.split()[2] for line in logged] == ["1/3", "2/3", "3/3"]  # the first step, then every 2nd, the last
    assert all(" loss " in line and " lr " in line and " elapsed " in line and " ETA " in line for line in logged)
    assert lines[-1].startswith("sft: 3 steps, loss ") and f"tensorboard --logdir {tmp_path / 'run' / 'tensorboard'}" \
        in lines[-1]
    assert result.stdout == ""
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))


def test_sft_value_swaps_add_variants_and_are_checked(data, tmp_path):
    subjects = ["Lunch", "Harbor", "Quarry", "Tundra", "Meadow", "Canyon", "Lagoon", "Summit"]
    varied = tmp_path / "varied"
    varied.mkdir()
    (varied / "tiny").symlink_to(data / "tiny")
    rows = (data / "sft.jsonl").read_text().splitlines()
    (varied / "sft.jsonl").write_text("".join(row.replace("Lunch", s) + "\n" for row, s in zip(rows, subjects, strict=True)))
    result = _train("sft", varied, tmp_path / "run", "--steps", "1", "--value-swaps", "2")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == "sft: loading the model and preparing 24 rows"  # 8 and 2 variants of each
    result = _train("sft", varied, tmp_path / "bad", "--value-swaps", "-1")
    assert result.exit_code == 2 and "--value-swaps" in result.output and not (tmp_path / "bad").exists()


def test_dpo_prints_json_on_stdout(data, tmp_path):
    result = _train("dpo", data, tmp_path / "dpo", "--steps", "2", "--logging-steps", "1", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["kind"] == "dpo" and summary["run_id"].startswith("train_") and summary["steps"] == 2
    assert summary["model_dir"] == str(tmp_path / "dpo" / "model") and summary["seconds"] > 0
    assert [x["step"] for x in summary["losses"]] == [1, 2] and summary["final_loss"] == summary["losses"][-1]["loss"]
    assert "dpo step 2/2" in result.stderr  # progress still shows, on stderr


@pytest.mark.parametrize("case", ["no data", "not a model", "unknown tracker", "tracker missing", "corrupt store",
                                  "no pointer heads", "stop weight on the fused head"])
def test_bad_training_input_is_one_line_and_stores_nothing(data, tmp_path, monkeypatch, case):
    out, store = tmp_path / "run", tmp_path / "s.db"
    args = ["train", "sft", "--model", str(data / "tiny"), "--data", str(data / "sft.jsonl"), "--out", str(out),
            "--store", str(store), "--steps", "1"]
    expected = {"no data": f"no dataset at {tmp_path / 'none.jsonl'}",
                "not a model": f"{tmp_path} is not a model folder (no config.json)",
                "unknown tracker": "unknown --report-to 'tensorbored'; choose from: none, all,",
                "tracker missing": "--report-to tensorboard needs the tensorboard package: pip install tensorboard",
                "corrupt store": f"{store} is not a coworkenv store",
                "no pointer heads": f"--pointer-loss needs a base with pointer heads (`coworkenv model init-tiny "
                                    f"--copy-circuit`); {data / 'tiny'} has none",
                "stop weight on the fused head": "--stop-weight needs the plain LM head: drop --fused-lm-head"}[case]
    if case == "no data":
        args[args.index("--data") + 1] = str(tmp_path / "none.jsonl")
    elif case == "not a model":
        args[args.index("--model") + 1] = str(tmp_path)
    elif case == "unknown tracker":
        args += ["--report-to", "none,tensorbored"]
    elif case == "no pointer heads":
        args += ["--pointer-loss", "1"]
    elif case == "stop weight on the fused head":
        args += ["--stop-weight", "4", "--fused-lm-head"]
    elif case == "tracker missing":
        args += ["--report-to", "tensorboard"]
        for module in ("tensorboard", "tensorboardX"):  # as on a machine without them
            monkeypatch.setitem(sys.modules, module, None)
    else:
        store.write_bytes(b"not a database at all, but something a user cares about")
    before = store.read_bytes() if store.exists() else None
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and expected in " ".join(result.stderr.split())
    assert "Traceback" not in result.output and result.stdout == ""
    assert not out.exists() and (store.read_bytes() if store.exists() else None) == before


def test_init_tiny_refuses_bad_input_in_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    for args, expected in ((["--data", str(tmp_path / "none.jsonl")], "no dataset at"),
                           (["--out", str(tmp_path / "file")], "is a file"),
                           (["--heads", "3", "--kv-heads", "2"], "multiple of --kv-heads"),
                           (["--spaces", "none"], "'none' is not one of 'separate', 'attached'"),
                           (["--base", str(tmp_path)], "not a model folder")):
        result = runner.invoke(app, ["model", "init-tiny", "--out", str(tmp_path / "tiny"), *args])
        assert result.exit_code == 2 and expected in result.stderr and "Traceback" not in result.output, args
        assert not (tmp_path / "tiny").exists()


def test_the_bar_shows_step_loss_learning_rate_elapsed_and_eta():
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=140)
    with TrainingDisplay(console) as display:
        display(TrainProgress("sft", "prepare", 0, 10, rows=12))
        display(TrainProgress("sft", "begin", 0, 10))
        display(TrainProgress("sft", "log", 4, 10, loss=1.23456, learning_rate=3e-3, seconds=8.0))
        display.progress.refresh()  # pyright: ignore[reportOptionalMemberAccess]
        shown = screen.getvalue()
    assert "sft" in shown and "step 4/10" in shown and "loss 1.2346" in shown and "lr 3.00e-03" in shown
    assert "ETA 0:00:12" in shown  # 8 s for 4 steps: 12 s for the 6 left
    with spinner("building", console) as stage:
        stage("saving")
    assert "saving" in screen.getvalue()


def test_a_time_limit_ends_the_run_at_a_step_end_and_saves_it(data, tmp_path):
    result = _train("sft", data, tmp_path / "run", "--steps", "100000", "--max-minutes", "0.001", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    # 0.06 s: a tiny model's steps can be shorter than that, so the run ends at the end of the first
    # step past it, far short of 100000; it is logged, saved at that step and recorded as done
    steps = summary["steps"]
    assert 1 <= steps < 1000 and summary["stopped_by_time_limit"] is True
    assert summary["final_loss"] is not None and (tmp_path / "run" / "model" / "config.json").exists()
    assert (tmp_path / "run" / "checkpoints" / f"checkpoint-{steps}").is_dir()
    result = _train("sft", data, tmp_path / "other", "--steps", "2", "--max-minutes", "60", "--json")
    assert json.loads(result.stdout)["stopped_by_time_limit"] is False
    result = _train("sft", data, tmp_path / "bad", "--max-minutes", "0")
    assert result.exit_code == 2 and "--max-minutes: Input should be greater than 0" in result.output and not (tmp_path / "bad").exists()


def test_rows_whose_learned_tokens_are_all_cut_off_are_named_not_a_sampler_error(data, tmp_path):
    long = tmp_path / "long.jsonl"
    long.write_text("".join(json.dumps({"messages": [{"role": "system", "content": "background " * 400}, *_conversation(i)],
                                        "tools": TOOLS}) + "\n" for i in range(3)))
    result = runner.invoke(app, ["train", "sft", "--model", str(data / "tiny"), "--data", str(long), "--out",
                                 str(tmp_path / "run"), "--store", str(tmp_path / "s.db"), "--max-length", "64"])
    assert result.exit_code == 2, result.output
    assert "none of the 3 rows is left to train on once prepared" in result.output and "--max-length 64" in result.output
    [run] = Store(tmp_path / "s.db", create=False).training_runs()
    assert run.status == "failed" and "none of the 3 rows" in run.error
