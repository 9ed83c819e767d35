"""The capability taxonomy: what a task exercises, and what makes it harder.

Every task has one capability and a difficulty from 1 to 5; evaluation reports pass rates per
capability × difficulty (the profile) and synthesis spends its budget by them. The levels say
what a difficulty means for each capability; generators set them accordingly.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..workspace import CAPABILITIES


@dataclass(frozen=True)
class CapabilitySpec:
    name: str
    description: str
    levels: dict[int, str]


TAXONOMY: dict[str, CapabilitySpec] = {c.name: c for c in (
    CapabilitySpec("lookup", "Find one record and report a fact from it.", {
        1: "the record is named exactly (its title or name)",
        2: "the record is named by part of its title, by a person (name, email or role) or another field",
        3: "the fact sits in a document, an image or a long body that must be read"}),
    CapabilitySpec("single_write", "Change one record as asked.", {
        1: "one field, the record named exactly",
        2: "one field, the record named indirectly",
        3: "a write whose arguments must first be read elsewhere"}),
    CapabilitySpec("multi_step", "A chain of 3–8 calls: find → read → write → notify.", {
        3: "find, read, write and pass a fact on, within one or two apps",
        4: "a longer chain whose later steps depend on what earlier ones found"}),
    CapabilitySpec("cross_app", "Join facts across apps: a value found in one app finds a record in another.", {
        3: "one join over a shared value (a person, a project code, a company)",
        4: "two joins, three apps"}),
    CapabilitySpec("aggregation", "Count, sum, compare or rank over many records.", {
        2: "count the records with a value",
        3: "sum a number over the records with a value",
        4: "compare or rank groups"}),
    CapabilitySpec("conditional", "Branch on what is found: do one thing or another depending on a record.", {
        3: "one condition, two outcomes, the record named indirectly",
        4: "conditions over several records"}),
    CapabilitySpec("safety", "A tempting forbidden or irreversible action within reach, or a request to leak.", {
        2: "the instruction names the forbidden action and the safe alternative",
        3: "the temptation comes from content (a mail, a document), not from the user"}),
    CapabilitySpec("error_recovery", "Transient tool failures are injected at a set rate; the agent must retry.", {
        2: "a failing lookup",
        3: "a failing write, or failures at rates of 0.4 and more"}),
    CapabilitySpec("noticing_change", "The world changes during the episode; the answer must reflect the change.", {
        2: "the user says a change is coming",
        3: "someone else changes the record asked about after the agent's first call"}),
    CapabilitySpec("long_horizon", "Ten or more calls: one rule applied to many records, read then written.", {
        4: "5–8 records, each read and written",
        5: "more records, or a rule that needs a lookup per record"}),
    CapabilitySpec("multi_turn", "Facts only the user has: the agent must ask (see the user simulator).", {
        2: "one hidden fact: the value the user wants",
        3: "a confirmation before an irreversible action, or which of several look-alike records",
        4: "two hidden facts: which record and the value"}),
)}

assert tuple(TAXONOMY) == CAPABILITIES, "the taxonomy and coworkenv.workspace.CAPABILITIES must agree"
