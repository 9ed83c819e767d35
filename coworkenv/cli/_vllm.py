"""Which interpreter runs vLLM, for ``doctor``, ``serve-model`` and ``demo --full``: the one given
(an option, or ``COWORKENV_VLLM_PYTHON``, which wins over any found), else the ``.venv-vllm`` that
``make vllm`` installs beside the project, else this interpreter; each command names the one it
uses and how it was found."""

from __future__ import annotations

import os

from ..trainer import VLLM_VENV, VLLMPython, find_vllm_python, vllm_venv_places

ENV = "COWORKENV_VLLM_PYTHON"


def vllm_python(given: str | None, option: str) -> VLLMPython:
    """The interpreter for vLLM; ``given``: the value of ``option`` (typer fills it from ``ENV`` too)."""
    from_env = given is not None and given == os.environ.get(ENV)
    return find_vllm_python(given, given_as=f"from {ENV}" if from_env else f"given with {option}")


def where_looked() -> str:
    """Where a ``.venv-vllm`` was looked for, in words."""
    return " and ".join(f"{where} ({root / VLLM_VENV})" for where, root in vllm_venv_places())


def install_hint(found: VLLMPython, option: str) -> str:
    """What to run when ``found`` has no vLLM."""
    make = (f"`make vllm` in a checkout (it installs {VLLM_VENV}, used without any setting), or "
            f"scripts/install-vllm.sh VENV then {option} VENV/bin/python (or {ENV})")
    if found.found == "this interpreter":
        return f"no {VLLM_VENV} was found in {where_looked()}: {make}"
    return f"install vLLM into {found.path}, or make an environment for it: {make}"
