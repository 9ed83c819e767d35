"""Exports as Hugging Face datasets: ``datasets.load_dataset`` reads the folder (one split per
capability) and gives back the rows of the JSON-lines export; the card names the features, the
splits and their seeds, the bundle and grader hashes and the licence."""

import json
import re
import runpy
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coworkenv.agents import ProviderSettings
from coworkenv.cli import app
from coworkenv.gate import GRADER_HASH, GRADER_VERSION
from coworkenv.loop import LocalEpisodes, TeacherSettings, collect
from coworkenv.trainer import card_metadata, dataset_features, export_dataset, export_dpo, export_rl, export_sft

datasets = pytest.importorskip("datasets", reason="needs the 'train' extra")
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "fixtures" / "tool-model"
JSONL = {"sft": export_sft, "dpo": export_dpo, "rl": export_rl}


def as_exported(row: dict) -> dict:
    """A row read from a dataset as the JSON-lines export writes it: message fields a message does not
    have read as None there."""
    return {k: [{f: x for f, x in m.items() if x is not None} for m in v]
            if k in ("messages", "prompt", "chosen", "rejected") else v for k, v in row.items()}


@pytest.mark.anyio
@pytest.mark.bwrap
async def test_load_dataset_reads_back_the_jsonl_rows_split_by_capability(host, tasks, tmp_path):
    store = host.store
    # the teacher fails every first attempt and is repaired: SFT rows, DPO pairs and RL rewards of both
    await collect(store, LocalEpisodes(host), TeacherSettings(provider_settings=ProviderSettings(error_rate=1.0)))
    for kind in ("sft", "dpo", "rl"):
        JSONL[kind](store, tmp_path / f"{kind}.jsonl", style="compact")
        expected = [json.loads(line) for line in (tmp_path / f"{kind}.jsonl").read_text().splitlines()]
        assert expected, kind
        folder = tmp_path / kind
        splits = export_dataset(store, kind, folder, fmt="hf", style="compact", license="cc-by-4.0")

        loaded = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf-cache"))
        capabilities = sorted({r["capability"] for r in expected})
        assert sorted(loaded) == capabilities == sorted(splits)
        for capability in capabilities:
            want = sorted((r for r in expected if r["capability"] == capability), key=lambda r: (r["seed"], r["task_id"]))
            assert [as_exported(r) for r in loaded[capability]] == want, (kind, capability)
            assert splits[capability] == len(want)
        assert loaded[capabilities[0]].features == dataset_features(kind)

        card = card_metadata(folder)
        assert card["license"] == "cc-by-4.0"
        assert {s["split"] for s in card["configs"][0]["data_files"]} == set(capabilities)
        assert {s["name"]: s["num_examples"] for s in card["dataset_info"]["splits"]} == splits
        made = card["coworkenv"]
        assert made["kind"] == kind and made["style"] == "compact" and made["rows"] == len(expected)
        assert made["graders"] == [{"version": GRADER_VERSION, "hash": GRADER_HASH}]
        assert made["bundle_hashes"] == sorted({r["bundle_hash"] for r in expected}) and made["bundles"] >= 1
        assert made["seeds"] == {c: sorted({r["seed"] for r in expected if r["capability"] == c}) for c in capabilities}
        text = (folder / "README.md").read_text()
        assert "load_dataset" in text and "cc-by-4.0" in text and GRADER_HASH in text

        # one parquet file holds the same rows, in the export's order
        export_dataset(store, kind, tmp_path / f"{kind}.parquet", fmt="parquet", style="compact")
        table = datasets.load_dataset("parquet", data_files=str(tmp_path / f"{kind}.parquet"),
                                      cache_dir=str(tmp_path / "hf-cache"), split="train")
        assert [as_exported(r) for r in table] == expected

    # as a chat template renders them, the dataset's conversations are those `train sft` reads from JSON lines
    from transformers import AutoTokenizer

    from coworkenv.trainer import read_rows
    from coworkenv.trainer._train import sft_dataset

    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    ours = sft_dataset(read_rows(tmp_path / "sft.jsonl"))
    loaded = datasets.load_dataset(str(tmp_path / "sft"), cache_dir=str(tmp_path / "hf-cache"))
    theirs = {r["episode_id"]: r for split in loaded.values() for r in split}
    for row, trained in zip(read_rows(tmp_path / "sft.jsonl"), ours, strict=True):
        hub = theirs[row["episode_id"]]
        assert tokenizer.apply_chat_template(hub["messages"], tools=hub["tools"], tokenize=False) == \
            tokenizer.apply_chat_template(trained["messages"], tools=json.loads(trained["tools"]), tokenize=False)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.bwrap
async def test_the_documented_sft_example_trains_on_the_folder(host, tasks, tmp_path, monkeypatch):
    await collect(host.store, LocalEpisodes(host), TeacherSettings())
    export_dataset(host.store, "sft", tmp_path / "runs" / "export" / "sft", fmt="hf", style="compact")
    shutil.copytree(MODEL, tmp_path / "runs" / "models" / "tiny")
    (code,) = [c for c in re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "datasets.md").read_text(), re.S)
               if "SFTTrainer(" in c]
    (tmp_path / "example.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    ran = runpy.run_path(str(tmp_path / "example.py"))
    trainer = ran["trainer"]  # (TRL leaves out a conversation whose answers its max_length cuts off)
    assert trainer.state.global_step == 2 and 0 < len(trainer.train_dataset) <= len(tasks)
    assert trainer.state.log_history[-1]["train_loss"] > 0


def test_export_command_writes_a_dataset_folder_and_refuses_what_it_would_lose(six_tasks, tmp_path):
    store = tmp_path / "coworkenv.db"
    shutil.copy(six_tasks, store)
    folder = tmp_path / "rl"
    result = runner.invoke(app, ["export", "rl", "--store", str(store), "--out", str(folder), "--format", "hf",
                                 "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["format"] == "hf" and summary["rows"] == sum(summary["splits"].values()) > 0
    assert sorted(datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "c"))) == sorted(summary["splits"])
    # the same command again replaces the export whole
    again = runner.invoke(app, ["export", "rl", "--store", str(store), "--out", str(folder), "--format", "hf"])
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "data"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]

    # a folder holding anything else is not replaced; a file is not a folder; --vision is JSON lines only
    other = tmp_path / "notes"
    other.mkdir()
    (other / "README.md").write_text("# my notes\n")
    refused = runner.invoke(app, ["export", "rl", "--store", str(store), "--out", str(other), "--format", "hf"])
    assert refused.exit_code == 2 and "holds other files than a dataset export" in refused.output
    assert (other / "README.md").read_text() == "# my notes\n"
    refused = runner.invoke(app, ["export", "rl", "--store", str(store), "--out", str(store), "--format", "hf"])
    assert refused.exit_code == 2 and "is a file; give a folder" in refused.output
    refused = runner.invoke(app, ["export", "sft", "--store", str(store), "--out", str(folder), "--format", "parquet"])
    assert refused.exit_code == 2 and "is a folder; give a file name" in refused.output
    refused = runner.invoke(app, ["export", "sft", "--store", str(store), "--format", "hf", "--vision"])
    assert refused.exit_code == 2 and "--vision" in refused.output
    refused = runner.invoke(app, ["export", "rl", "--store", str(store), "--format", "csv"])
    assert refused.exit_code == 2 and "csv" in refused.output
