"""Capability-guided task synthesis over the built-in apps, with calibration before admission."""

from ._calibrate import Calibration, calibrate_task, calibrate_tasks
from ._generate import generate_tasks
from ._pipeline import SynthSummary, synthesize
from ._profile import Profile, ProfileCell, ProfileError, allocate, capability_weights, load_profile
from .templates import TEMPLATES

__all__ = [
    "TEMPLATES",
    "Calibration",
    "Profile",
    "ProfileCell",
    "ProfileError",
    "SynthSummary",
    "allocate",
    "calibrate_task",
    "calibrate_tasks",
    "capability_weights",
    "generate_tasks",
    "load_profile",
    "synthesize",
]
