"""Capability-guided task synthesis over the built-in apps, with calibration before admission."""

from ._apart import GenerationError, generate_apart
from ._calibrate import Calibration, calibrate_task, calibrate_tasks, play_probes
from ._compose import SHAPES, Catalog, catalog
from ._draft import DraftError, DraftSummary, draft_tasks, parse_draft
from ._generate import GENERATED, Generation, Generator, generate, generate_tasks, signature
from ._pipeline import SynthSummary, synthesize
from ._probes import PROBES, Probe, dry_run, harden, probes
from ._profile import Profile, ProfileCell, ProfileError, allocate, capability_weights, difficulty_weights, load_profile
from ._taxonomy import TAXONOMY, CapabilitySpec
from ._workers import CalibrationWorkers, WorkerError
from .templates import TEMPLATES

__all__ = [
    "GENERATED",
    "Generation",
    "Generator",
    "PROBES",
    "SHAPES",
    "TAXONOMY",
    "TEMPLATES",
    "CalibrationWorkers",
    "GenerationError",
    "CapabilitySpec",
    "Catalog",
    "DraftError",
    "DraftSummary",
    "Probe",
    "catalog",
    "draft_tasks",
    "dry_run",
    "harden",
    "play_probes",
    "probes",
    "Calibration",
    "Profile",
    "ProfileCell",
    "ProfileError",
    "SynthSummary",
    "WorkerError",
    "allocate",
    "calibrate_task",
    "calibrate_tasks",
    "capability_weights",
    "difficulty_weights",
    "generate",
    "generate_apart",
    "generate_tasks",
    "signature",
    "load_profile",
    "parse_draft",
    "synthesize",
]
