"""Capability-guided task synthesis over the built-in apps, with calibration before admission."""

from ._generate import generate_tasks
from ._pipeline import SynthSummary, synthesize
from ._templates import TEMPLATES

__all__ = ["TEMPLATES", "SynthSummary", "generate_tasks", "synthesize"]
