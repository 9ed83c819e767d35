"""coworkenv: executable training workspaces for tool-using coworker agents."""

__version__ = "0.1.0"
