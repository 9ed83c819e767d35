"""What values from outside may hold: the bounds of the spec's fields, shared by the spec and the checks.

Specs come from data (bundles, a model's drafts, Claw-Eval task files), so what they may hold is
bounded by the models' constraints and refused with the field's name when passed:

- ids of workspaces and tasks (and a Claw-Eval check's task id) are safe file names
  (``SAFE_NAME``: letters, digits, ``_``, ``-``, ``.``, not starting with ``.``, at most 128
  characters), since bundles use them as folder and file names;
- an instruction, a reference answer and a user's persona prompt hold at most ``MAX_INSTRUCTION``
  (65,536) characters; descriptions (of apps, tools, checks, events) and a user's replies at most
  ``MAX_DESCRIPTION`` (8,192); names (a workspace's, a persona's name, role and tone, a shape) at most
  ``MAX_NAME`` (256); a check's SQL at most ``MAX_QUERY`` (16,384);
- a spec file holds at most ``MAX_SPEC_FILE_BYTES`` (64 MiB: a Claw-Eval workspace carries its
  services' files) and its YAML is read with alias and size bounds (``coworkenv.workspace._yaml``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

SAFE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
"""What an id that names a file or folder may be (a workspace's, a task's): no path separator, no leading dot."""
MAX_NAME = 256
MAX_DESCRIPTION = 8_192
MAX_INSTRUCTION = 65_536
MAX_QUERY = 16_384
MAX_SPEC_FILE_BYTES = 64 << 20
MAX_ATTACHMENTS = 16

SafeId = Annotated[str, Field(pattern=SAFE_NAME)]
Name = Annotated[str, Field(max_length=MAX_NAME)]
Description = Annotated[str, Field(max_length=MAX_DESCRIPTION)]
LongText = Annotated[str, Field(max_length=MAX_INSTRUCTION)]


class StrictModel(BaseModel):
    """A part of a spec: a field it does not know is refused, not ignored."""

    model_config = ConfigDict(extra="forbid")
