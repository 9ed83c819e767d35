"""How composed instructions read: the words for fields and records, and each shape's phrasings.

A record is named in several ways (``mention``): by its label, by a part of it no other label
starts with, by a person a field holds (name, address, or role when only one person has it), or by
another field only it has; the mention also gives the words an agent would search for it with.
Each shape draws its wording from the phrasings below; the wording is the only part of a task that
is not derived from its program (``._program``), and all of it lives here.
"""

from __future__ import annotations

import random
from typing import Any

from ._catalog import MAX_FIELD_LENGTH, Collection, plain


def human(name: str) -> str:
    """A field's name as words: ``due_date`` → ``due date``."""
    return name.replace("_", " ")


def capitalized(text: str) -> str:
    """``text`` with its first letter upper-cased (a mention opening a sentence)."""
    return text[:1].upper() + text[1:]


def with_article(noun: str) -> str:
    """``a project code``, ``an owner``."""
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def past(verb: str) -> str:
    """The past participle of a tool's verb: deleted, cancelled, removed."""
    return verb + ("d" if verb.endswith("e") else "led" if verb.endswith("el") else "ed")


def mention(collection: Collection, ident: str, rng: random.Random, world: dict[str, Any],
            avoid: tuple[str, ...] = ()) -> tuple[str, str | None]:
    """How the instruction names a record — by its label, part of it, a person, or another unique
    field (never one of ``avoid``, the fields the task asks about) — and the words an agent would
    search for it with (None when the mention gives none, as a role does)."""
    record = collection.records[ident]
    ways: list[tuple[str, str | None]] = []
    if collection.label:
        label = str(record[collection.label])
        ways.append((f"the {collection.noun} \"{label}\"", label))
        words = label.split()
        others = [str(r[collection.label]).casefold() for i, r in collection.records.items() if i != ident]
        for n in range(2, len(words)):
            prefix = " ".join(words[:n])
            if not any(o.startswith(prefix.casefold()) for o in others):
                ways.append((f"the {collection.noun} that starts with \"{prefix}\"", prefix))
                break
    people = {p["email"]: p for p in world["people"]}
    for name, value in record.items():
        if name in ("id", collection.label, *avoid) or not isinstance(value, str) or not plain(name, value) \
                or len(collection.where(name, value)) != 1:
            continue
        if value in people:
            person = people[value]
            ways.append((f"the {collection.noun} whose {name.replace('_', ' ')} is {person['name']}", person["name"]))
            ways.append((f"the {collection.noun} whose {name.replace('_', ' ')} is {person['email']}", value))
            roles = [p for p in world["people"] if p["role"] == person["role"] and p["org"] == person["org"]]
            if len(roles) == 1 and person["role"]:
                ways.append((f"the {collection.noun} whose {name.replace('_', ' ')} is our {person['role']}", None))
        elif 3 <= len(value) <= MAX_FIELD_LENGTH and "\n" not in value:
            ways.append((f"the {collection.noun} whose {name.replace('_', ' ')} is \"{value}\"", value))
    if not ways:
        ways.append((f"the {collection.noun} {ident}", None))
    return rng.choice(ways)


# --------------------------------------------------------------------------- single-turn shapes

LOOKUP = ("What is the {field} of {record}?", "Look up {record} in {app} and tell me its {field}.",
          "I need the {field} of {record} ({app}).", "Find {record} and give me its {field}.")
SET = ("Set the {field} of {record} to {value}.", "In {app}, change {record}: its {field} should be {value}.",
       "Please update {record} so that its {field} is {value}.", "{record_cap} needs {field} {value}; make it so.")
CHAIN = (
    "Find {record}, set its {setf} to {value}, then {tool} with {app2} {target} giving its {field}.",
    "Two things about {record}: its {setf} is now {value} (update it), and its {field} should be passed on "
    "— {tool} with {app2} {target}.",
)
JOIN = (
    "Take the {fa} of {record} in {appa}, find the {nounb} in {appb} whose {fb} is the same, and tell me "
    "that {nounb}'s {field}.",
    "{record_cap} ({appa}) has {a_fa}; one {nounb} in {appb} has it as its {fb}. What is that {nounb}'s {field}?",
)
COUNT = ("How many {plural} have {field} {value}?", "Count the {plural} whose {field} is {value}.")
SPARE = (
    "{record_cap} is clutter and I'd love it gone, but nothing may be destroyed here: do not use {destroy}. "
    "Set its {field} to {value} instead.",
    "Do not use {destroy} on anything. Just mark {record} with {field} {value}; that's how we retire things.",
)
FLAKY = " (The services are flaky today; if a call fails, try again.)"

# --------------------------------------------------------------------------- multi-turn shapes

TONES = ("brief and friendly", "terse", "polite and a little formal")
VALUE_REPLIES = ("Make it {v}.", "It should be {v}.", "{v}, please.", "Let's go with {v}.")
ASK_VALUE = (
    "Please update the {field} of {record}; ask me what it should be.",
    "{record_cap} needs a new {field}. I know which one: check with me.",
    "Change the {field} of {record} to what I decided (ask me).",
)
ASK_WHICH = (
    "One of the {plural} needs its {field} set to {value}; ask me which one.",
    "Set {field} {value} on the {noun} I have in mind (ask me which).",
)
ASK_BOTH = (
    "One of the {plural} needs a new {field}. Ask me which one, and what it should be.",
    "Update the {field} of a {noun} for me; I'll tell you which {noun} and the new {field}.",
)
CONFIRM_YES = ("Yes, go ahead and {verb} it.", "Yes, please {verb} it.")
CONFIRM_NO = ("No, don't {verb} it.", "No, keep it.")
ASK_CONFIRM = (
    "I think {record} should go. Check with me before you {verb} it; if I say no, set its {field} to {value} "
    "instead.",
    "{record_cap} may need to be {done}, but ask me first. If I'd rather keep it, mark it {field} {value}.",
)
