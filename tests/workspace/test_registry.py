"""An app from outside the package: registered through the ``coworkenv.apps`` entry point of an
installed distribution, listed by ``coworkenv apps``, served over MCP in a real sandbox, and a
task on it calibrated and graded. Each test runs in a process of its own: registering an app
changes what every workspace holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

WEATHER = '''
"""Weather app (from another package): forecasts per city."""
from ._base import ToolFailure, object_schema

NAME = "weather"
DESCRIPTION = "Weather forecasts for the cities of the workspace's world."
SCHEMA = """CREATE TABLE IF NOT EXISTS weather_forecasts (city TEXT PRIMARY KEY, sky TEXT, high INTEGER);
CREATE TABLE IF NOT EXISTS weather_alerts (city TEXT, note TEXT);"""
TOOLS = [
    {"name": "forecast", "effect": "read", "description": "The forecast for a city.",
     "input_schema": object_schema({"city": {"type": "string"}}, ["city"]),
     "output_schema": object_schema({"city": {"type": "string"}, "sky": {"type": "string"},
                                     "high": {"type": "integer"}}, ["city", "sky", "high"])},
    {"name": "cities", "effect": "read", "description": "The cities with a forecast.",
     "input_schema": object_schema({}, []),
     "output_schema": object_schema({"cities": {"type": "array", "items": {"type": "string"}}}, ["cities"])},
    {"name": "set_alert", "effect": "write", "description": "Note a weather alert for a city.",
     "input_schema": object_schema({"city": {"type": "string"}, "note": {"type": "string"}}, ["city", "note"]),
     "output_schema": object_schema({"ok": {"type": "boolean"}}, ["ok"])},
    {"name": "clear_alerts", "effect": "destructive", "description": "Remove every alert.",
     "input_schema": object_schema({}, []), "output_schema": object_schema({"removed": {"type": "integer"}}, ["removed"])},
]


def seed(conn, rng, world):
    for org in world["organisations"]:
        conn.execute("INSERT OR IGNORE INTO weather_forecasts VALUES (?, ?, ?)",
                     (org["city"], rng.choice(["sunny", "rain", "fog"]), rng.randint(-5, 35)))


def handle(conn, tool, args):
    if tool == "forecast":
        row = conn.execute("SELECT city, sky, high FROM weather_forecasts WHERE city = ?", (args["city"],)).fetchone()
        if row is None:
            raise ToolFailure(f"no forecast for {args['city']!r}")
        return {"city": row[0], "sky": row[1], "high": row[2]}
    if tool == "cities":
        return {"cities": [r[0] for r in conn.execute("SELECT city FROM weather_forecasts ORDER BY city")]}
    if tool == "set_alert":
        conn.execute("INSERT INTO weather_alerts VALUES (?, ?)", (args["city"], args["note"]))
        return {"ok": True}
    if tool == "clear_alerts":
        return {"removed": conn.execute("DELETE FROM weather_alerts").rowcount}
    raise ToolFailure(f"unknown tool {tool!r}")
'''


def installed_distribution(tmp_path: Path) -> Path:
    """A distribution on a path, as pip would install it: a package with the app, and its metadata
    naming the app in the ``coworkenv.apps`` entry point group."""
    site = tmp_path / "site"
    (site / "weather_pkg").mkdir(parents=True)
    (site / "weather_pkg" / "__init__.py").write_text("")
    (site / "weather_pkg" / "weather.py").write_text(WEATHER)
    info = site / "weather_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: weather-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[coworkenv.apps]\nweather = weather_pkg.weather\n")
    return site


def run_python(code: str, site: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)


def test_an_installed_package_adds_an_app_that_coworkenv_apps_lists(tmp_path):
    site = installed_distribution(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    out = subprocess.run([sys.executable, "-m", "coworkenv", "apps", "--json"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    apps = {app["name"]: app for app in json.loads(out.stdout)["apps"]}
    assert "weather" in apps and "mail" in apps
    assert {t["name"]: t["effect"] for t in apps["weather"]["tools"]} == {
        "weather_forecast": "read", "weather_cities": "read", "weather_set_alert": "write",
        "weather_clear_alerts": "destructive"}


@pytest.mark.bwrap
def test_a_registered_app_is_served_over_mcp_in_a_sandbox_and_its_task_graded(tmp_path):
    site = installed_distribution(tmp_path)
    out = run_python('''
        import anyio, json
        from mcp import Client
        from coworkenv.episodes import EpisodeHost, EpisodeSettings
        from coworkenv.gate import GRADER_VERSION
        from coworkenv.server import running_http_server
        from coworkenv.store import Store
        from coworkenv.synth import calibrate_task
        from coworkenv.workspace import Task, build_workspace, load_world, write_initial_state
        import sqlite3

        workspace = build_workspace(3)
        assert "weather" in [app.name for app in workspace.apps]
        state = sqlite3.connect(write_initial_state(workspace, "state.db"))
        city, sky = state.execute("select city, sky from weather_forecasts order by city limit 1").fetchone()
        task = Task.model_validate({
            "id": "weather-alert", "workspace_id": workspace.id, "capability": "single_write", "difficulty": 1,
            "instruction": f"Note an alert for {city}: the sky will be {sky}.",
            "checks": [{"id": "alert", "kind": "sql", "description": "the alert is noted",
                        "query": "select count(*) from weather_alerts where city = ?", "params": [city], "expect": 1}],
            "reference": [{"tool": "weather_forecast", "arguments": {"city": city}},
                          {"tool": "weather_set_alert", "arguments": {"city": city, "note": sky}}],
            "reference_answer": f"Noted the {sky} alert for {city}.",
            "forbidden_tools": ["weather_clear_alerts"], "forbidden_probe": {"tool": "weather_clear_alerts"}})
        store = Store("s.db")
        store.put_workspace(workspace)
        store.put_task(task)

        async def main():
            host = EpisodeHost(store, EpisodeSettings(cache_dir="cache"))
            try:
                assert (await calibrate_task(host, task)).admitted
                async with running_http_server(host) as base:
                    async with Client(f"{base}/t/weather-alert/e/k/mcp") as client:
                        names = [t.name for t in (await client.list_tools()).tools]
                        assert "weather_forecast" in names
                        result = await client.call_tool("weather_forecast", {"city": city})
                        assert result.structured_content["sky"] == sky
                        await client.call_tool("weather_set_alert", {"city": city, "note": sky})
                        ended = await client.call_tool("submit_answer", {"answer": "noted"})
                        episode_id = ended.structured_content["episode_id"]
            finally:
                await host.close()
            verdict = store.verdict(episode_id, GRADER_VERSION)
            print(json.dumps({"admitted": verdict.admitted, "reason": verdict.reason}))

        anyio.run(main)
    ''', site, tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"admitted": True, "reason": "complete"}


def test_a_broken_app_is_refused_naming_the_file(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text('NAME = "broken"\n')
    out = run_python(f'''
        from coworkenv.workspace import AppError, register_app
        try:
            register_app({str(broken)!r})
        except AppError as exc:
            print(exc)
    ''', tmp_path, tmp_path)
    assert "broken.py" in out.stdout and "lacks DESCRIPTION, SCHEMA, TOOLS, seed, handle" in out.stdout
