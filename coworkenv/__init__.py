"""coworkenv: executable training workspaces for tool-using coworker agents."""

from ._errors import BOUNDARIES, Boundary, CoworkenvError, InfrastructureError, ModelError, ProtocolError

__version__ = "0.1.0"
__all__ = ["BOUNDARIES", "Boundary", "CoworkenvError", "InfrastructureError", "ModelError", "ProtocolError", "__version__"]
