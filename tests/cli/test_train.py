"""``coworkenv train sft``: bad flags are named before anything is trained."""

from typer.testing import CliRunner

from coworkenv.cli import app

runner = CliRunner()


def test_unknown_loss_target_is_named(tmp_path):
    result = runner.invoke(app, ["train", "sft", "--store", str(tmp_path / "s.db"), "--out", str(tmp_path / "run"),
                                 "--loss-on", "prompt"])
    assert result.exit_code == 2 and "--loss-on" in result.output and "prompt" in result.output
    assert not (tmp_path / "run").exists() and not (tmp_path / "s.db").exists()


def test_lm_head_flag_takes_only_its_two_spellings(tmp_path):
    result = runner.invoke(app, ["train", "sft", "--store", str(tmp_path / "s.db"), "--out", str(tmp_path / "run"),
                                 "--fused-lm-head=maybe"])
    assert result.exit_code == 2 and "--fused-lm-head" in result.output
    assert not (tmp_path / "run").exists() and not (tmp_path / "s.db").exists()
