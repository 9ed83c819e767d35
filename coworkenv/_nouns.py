"""How a collection's name reads for one of its records: ``tickets`` → ticket, ``people`` → person.

Resources name their collections in the plural (``ResourceSpec.collection``); synthesis names one
record of a collection in an instruction ("the ticket …"), and pretraining finds the record inside
what a get tool returns under that name (``{"ticket": {...}}``). Both read it here, so the two agree.
"""

from __future__ import annotations


def singular(collection: str) -> str:
    """The singular of a collection's name, words apart (``time_entries`` → ``time entry``)."""
    name = collection.replace("_", " ")
    if name.endswith("people"):
        return name[:-6] + "person"
    if name.endswith("ies"):
        return name[:-3] + "y"
    if name.endswith(("sses", "ches", "shes", "xes")):
        return name[:-2]
    return name[:-1] if name.endswith("s") else name
