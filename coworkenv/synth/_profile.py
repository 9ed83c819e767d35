"""The capability profile: pass rates per capability × difficulty from an evaluation, and how
synthesis spends its task budget by it.

``coworkenv eval`` writes a profile (``profile.json`` beside the store); ``coworkenv synth
--profile FILE --budget N`` reads it and spends the N tasks by how much the model still has to
learn, in two steps:

1. Capabilities: a capability's weight is ``1 − pass_rate`` plus a floor of 0.1, so a capability
   the model has mastered still gets a few tasks (it must not be forgotten) and one it fails gets
   the most. A capability the profile does not cover gets the weight of a pass rate of 0.5
   (nothing known either way). The budget is split by these weights (largest remainders).
2. Difficulties, within a capability's share: each difficulty the profile measured for it weighs
   ``1 − pass_rate`` plus the floor; where the model passes every measured difficulty (≥ 0.8), the
   next harder level gets the weight of an unmeasured one, so the budget moves up as the model
   learns. A generated task whose difficulty's share is spent passes its turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from .._errors import CoworkenvError

PROFILE_VERSION = 1
WEIGHT_FLOOR = 0.1
UNKNOWN_PASS_RATE = 0.5


class ProfileCell(BaseModel):
    pass_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    tasks: int = Field(default=0, ge=0)
    trials: int = Field(default=0, ge=0)
    avg_score: float | None = None


class Profile(BaseModel):
    """What ``eval`` measured: ``pass_rates[capability][difficulty]``."""

    version: int = PROFILE_VERSION
    eval_run: str = ""
    model: str = ""
    k: int = 1
    created_at: str = ""
    pass_rates: dict[str, dict[str, ProfileCell]] = Field(default_factory=dict)

    def pass_rate(self, capability: str) -> float | None:
        """The capability's pass rate over its difficulties (weighted by trials), or None if unmeasured."""
        cells = [c for c in self.pass_rates.get(capability, {}).values() if c.pass_rate is not None and c.trials]
        if not cells:
            return None
        return sum(c.pass_rate * c.trials for c in cells if c.pass_rate is not None) / sum(c.trials for c in cells)


class ProfileError(CoworkenvError, ValueError):
    """A profile file is missing or malformed; the message names the file and what was wrong."""


def load_profile(path: str | Path) -> Profile:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such profile (coworkenv eval writes one)") from None
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{path}: not a JSON profile: {exc}") from None
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors())
        raise ProfileError(f"{path}: invalid profile: {problems}") from None
    if profile.version != PROFILE_VERSION:
        raise ProfileError(f"{path}: profile version {profile.version}, this coworkenv reads {PROFILE_VERSION}")
    return profile


def capability_weights(profile: Profile | None, capabilities: tuple[str, ...]) -> dict[str, float]:
    """How much of the task budget each capability deserves (flat without a profile)."""
    if profile is None:
        return dict.fromkeys(capabilities, 1.0)
    weights = {}
    for capability in capabilities:
        rate = profile.pass_rate(capability)
        weights[capability] = (1.0 - (UNKNOWN_PASS_RATE if rate is None else rate)) + WEIGHT_FLOOR
    return weights


MASTERED = 0.8


def difficulty_weights(profile: Profile | None, capabilities: tuple[str, ...]) -> dict[str, dict[int, float]]:
    """Capability → difficulty → weight (empty for a capability the profile did not measure)."""
    weights: dict[str, dict[int, float]] = {}
    if profile is None:
        return weights
    for capability in capabilities:
        cells = {int(d): c.pass_rate for d, c in profile.pass_rates.get(capability, {}).items()
                 if c.pass_rate is not None and c.trials and str(d).isdigit()}
        if not cells:
            continue
        weights[capability] = {d: (1.0 - rate) + WEIGHT_FLOOR for d, rate in sorted(cells.items())}
        top = max(cells)
        if all(rate >= MASTERED for rate in cells.values()) and top < 5:
            weights[capability][top + 1] = (1.0 - UNKNOWN_PASS_RATE) + WEIGHT_FLOOR
    return weights


def allocate(n: int, weights: Mapping[Any, float]) -> dict[Any, int]:
    """``n`` tasks split in proportion to ``weights`` (largest remainders; ties in the given order)."""
    total = sum(weights.values())
    if n <= 0 or total <= 0:
        return dict.fromkeys(weights, 0)
    shares = {c: n * w / total for c, w in weights.items()}
    counts = {c: int(s) for c, s in shares.items()}
    order = sorted(weights, key=lambda c: (-(shares[c] - counts[c]), list(weights).index(c)))
    for capability in order[: n - sum(counts.values())]:
        counts[capability] += 1
    return counts
