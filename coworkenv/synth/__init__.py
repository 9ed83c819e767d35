"""Capability-guided task synthesis over the built-in apps, with calibration before admission."""

from ._calibrate import Calibration, calibrate_task, calibrate_tasks, play_probes
from ._compose import SHAPES, Catalog, catalog
from ._generate import GENERATED, generate_tasks
from ._probes import PROBES, Probe, dry_run, harden, probes
from ._taxonomy import TAXONOMY, CapabilitySpec
from ._pipeline import SynthSummary, synthesize
from ._profile import Profile, ProfileCell, ProfileError, allocate, capability_weights, load_profile
from .templates import TEMPLATES

__all__ = [
    "GENERATED",
    "PROBES",
    "SHAPES",
    "TAXONOMY",
    "TEMPLATES",
    "CapabilitySpec",
    "Catalog",
    "Probe",
    "catalog",
    "dry_run",
    "harden",
    "play_probes",
    "probes",
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
