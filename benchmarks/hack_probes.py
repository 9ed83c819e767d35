"""How many tasks each hack probe beats: the tasks as the templates write them (the checks that
calibration admitted before hardening existed) against the same tasks hardened.

    python benchmarks/hack_probes.py --tasks 120 --seed 0 [--generator templates]

Generates ``--tasks`` tasks (the hand-written templates by default: what calibration admitted
before the probes existed) twice from the same seed: once as written, once hardened (the
guard that nothing else changed, the excluded candidates). Each is calibrated in bubblewrap
sandboxes with every probe played, and the share of tasks each probe beats (the gate admits the
probe's episode) is reported, with the share quarantined for any reason.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from coworkenv.episodes import EpisodeHost, EpisodeSettings
from coworkenv.store import Store
from coworkenv.synth import GENERATED, PROBES, SHAPES, TEMPLATES, calibrate_task, generate


async def beaten(tasks: int, seed: int, hardened: bool, generator: str, directory: Path,
                 ) -> tuple[dict[str, int], int, int, float]:
    store = Store(directory / f"{'hard' if hardened else 'raw'}.db")
    host = EpisodeHost(store, EpisodeSettings(cache_dir=directory / "cache"))
    capabilities = tuple(c for c in GENERATED if generator != "templates" or set(TEMPLATES[c]) - set(SHAPES.get(c, {})))
    made = generate(tasks, seed, capabilities, hardened=hardened, generator=generator)  # type: ignore[arg-type]
    for workspace in made.workspaces:
        store.put_workspace(workspace)
    counts = dict.fromkeys(PROBES, 0)
    quarantined = 0
    started = time.perf_counter()
    try:
        for task in made.tasks:
            store.put_task(task)
            result = await calibrate_task(host, task, as_written=True)
            quarantined += not result.admitted
            for name, outcome in result.probes.items():
                counts[name] += outcome == "beaten"
    finally:
        await host.close()
    return counts, quarantined, len(made.tasks), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generator", choices=("templates", "composed", "all"), default="templates")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        raw = asyncio.run(beaten(args.tasks, args.seed, False, args.generator, Path(tmp)))
        hard = asyncio.run(beaten(args.tasks, args.seed, True, args.generator, Path(tmp)))
    print(f"| probe | tasks as written ({raw[2]}) | hardened ({hard[2]}) |")
    print("| --- | --- | --- |")
    for name in PROBES:
        print(f"| `{name}` | {raw[0][name]} ({raw[0][name] / raw[2]:.0%}) | {hard[0][name]} ({hard[0][name] / hard[2]:.0%}) |")
    print(f"| quarantined for any reason | {raw[1]} ({raw[1] / raw[2]:.0%}) | {hard[1]} ({hard[1] / hard[2]:.0%}) |")
    print(f"\ncalibration time: {raw[3]:.0f} s as written, {hard[3]:.0f} s hardened")


if __name__ == "__main__":
    main()
