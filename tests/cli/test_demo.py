"""``coworkenv demo --full``: bad settings are named before anything runs."""

from typer.testing import CliRunner

from coworkenv.cli import app

runner = CliRunner()


def test_full_demo_names_bad_settings(tmp_path):
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--serve", "tpu"])
    assert result.exit_code == 2 and "serve" in result.output
    result = runner.invoke(app, ["demo", "--full", "--dir", str(tmp_path / "d"), "--capability", "telepathy"])
    assert result.exit_code == 2 and "telepathy" in result.output
    assert not (tmp_path / "d").exists()  # nothing was created
