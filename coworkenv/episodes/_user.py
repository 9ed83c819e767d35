"""The simulated user of a multi-turn task: answers the agent's ``ask_user`` messages from the task's
persona, hidden facts and confirmations.

Two simulators behind one interface (``UserSimulator.reply(message) -> UserReply``):

- ``ScriptedUser`` (the default): deterministic. A message is about a fact or a confirmation when it
  mentions one of its cues (``User.about``); the user then gives that item's reply, word for word,
  and nothing else. A message about nothing it holds gets "I don't know"; one that fishes for
  everything at once (``User.fishes``: it names more than the user holds) is told to ask about what
  the task needs, and given nothing. It ends (``done``) once
  every fact and confirmation has been given, or at its ``max_turns``-th reply.
- ``ModelUser``: a chat model from any provider plays the persona, told the facts and not to
  volunteer them; it ends when it says so (``[done]``) or at ``max_turns``.

``fidelity`` judges a simulator's replies against the task (leaks, contradictions, failure to end),
so that both can be measured the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..workspace import Confirmation, HiddenFact, Task, User, mentions

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

UNKNOWN_REPLY = "I don't know, sorry; that is not something I can tell you (the apps may show it)."
DONE_REPLY = "That's everything from me; please go ahead and finish."
GONE_REPLY = "I have to go now; please finish with what you have."
FISHING_REPLY = "Please ask me about what you need from me for this task, not about everything at once."
DONE_MARK = "[done]"


@dataclass
class UserReply:
    text: str
    done: bool  # the user has nothing more to add: the agent should finish


class UserSimulator(Protocol):
    async def reply(self, message: str) -> UserReply: ...


class ScriptedUser:
    """The task's user by rule: reveals a fact only when a message is about it (see the module)."""

    def __init__(self, user: User) -> None:
        self.user = user
        self.turns = 0
        self.given: set[str] = set()

    async def reply(self, message: str) -> UserReply:
        self.turns += 1
        if self.turns > self.user.max_turns:
            return UserReply(GONE_REPLY, True)
        items = self.user.about(message)
        for item in items:
            self.given.add(item.id)
        goal_met = len(self.given) == len(self.user.facts) + len(self.user.confirmations)
        if items:
            text = " ".join(item.reply for item in items)
        elif self.user.fishes(message):
            text = FISHING_REPLY
        else:
            text = DONE_REPLY if goal_met else UNKNOWN_REPLY
        return UserReply(text, goal_met or self.turns >= self.user.max_turns)


def persona_prompt(task: Task) -> str:
    """The system prompt of a model playing ``task``'s user."""
    user = task.user
    assert user is not None
    if user.prompt:  # a persona written as free text (a Claw-Eval task's user agent)
        return (f"{user.prompt.strip()}\n\nYou asked an assistant for this: \"{task.instruction}\"\n"
                "The assistant may message you with questions; reply as this person would, briefly, with what "
                "they know and nothing they would not know. When you are satisfied or have nothing more to add, "
                f"end your reply with {DONE_MARK}.")
    lines = [f"You are {user.persona.name}, {user.persona.role}. You asked an assistant to do this for you: "
             f"\"{task.instruction}\"",
             f"The assistant may message you with questions. Reply as {user.persona.name} would, "
             f"{user.persona.tone}, in one or two sentences.",
             "You know the following. Reveal an item only when the assistant's message asks about it; never "
             "volunteer one it has not asked about, and never change a value:"]
    for fact in user.facts:
        lines.append(f"- asked about {' / '.join(fact.cues)}: the answer is {fact.value} (say: {fact.reply})")
    for confirmation in user.confirmations:
        verdict = "yes, go ahead" if confirmation.confirm else "no, do not"
        lines.append(f"- asked to confirm {' / '.join(confirmation.cues)}: {verdict} (say: {confirmation.reply})")
    lines.append("If it asks anything else, say you don't know. Once every item above has been asked about, "
                 f"or when you have nothing more to add, end your reply with {DONE_MARK}.")
    return "\n".join(lines)


class ModelUser:
    """The task's user played by a chat model (any provider of ``coworkenv.agents``)."""

    def __init__(self, task: Task, model: BaseChatModel) -> None:
        from langchain_core.messages import BaseMessage, SystemMessage

        assert task.user is not None
        self.user = task.user
        self.model = model
        self.turns = 0
        self.history: list[BaseMessage] = [SystemMessage(persona_prompt(task))]

    async def reply(self, message: str) -> UserReply:
        from langchain_core.messages import AIMessage, HumanMessage

        from .._errors import ModelError

        self.turns += 1
        if self.turns > self.user.max_turns:
            return UserReply(GONE_REPLY, True)
        self.history.append(HumanMessage(message))
        try:
            answer = await self.model.ainvoke(self.history)
        except Exception as exc:  # the simulator's model server: a failure outside the agent's control
            raise ModelError(f"the simulated user's model did not answer: {type(exc).__name__}: {exc}") from exc
        text = str(answer.content).strip()
        self.history.append(AIMessage(text))
        done = DONE_MARK in text.lower()
        text = re.sub(re.escape(DONE_MARK), "", text, flags=re.I).strip() or DONE_REPLY
        return UserReply(text, done or self.turns >= self.user.max_turns)


def simulator(task: Task, model: str = "") -> UserSimulator:
    """The simulator of ``task``'s user: the scripted one, or a model-backed one when ``model`` names a
    provider (``openai:M``, ``anthropic:M``, ``scripted:FILE``…)."""
    if task.user is None:
        raise ValueError(f"task {task.id} has no user to simulate")
    if not model and task.user.prompt:
        raise ValueError(f"task {task.id}'s user is a persona written as free text; only a model can play it "
                         "(give --user-model PROVIDER)")
    if not model:
        return ScriptedUser(task.user)
    from ..agents import ProviderSettings, chat_model, parse_provider

    return ModelUser(task, chat_model(parse_provider(model), None, None, ProviderSettings()))


# --------------------------------------------------------------------------- fidelity

_YES = re.compile(r"^\W*(yes|yeah|yep|sure|ok|okay|go ahead|please do|do it|confirmed|correct)\b", re.I)
_NO = re.compile(r"^\W*(no|nope|don't|do not|please don't|not|never|cancel that)\b", re.I)


@dataclass
class Fidelity:
    """How a simulator kept to its task over one conversation."""

    replies: int = 0
    leaks: list[str] = field(default_factory=list)  # facts given before any message was about them
    contradictions: list[str] = field(default_factory=list)  # asked items answered wrongly
    failed_to_end: bool = False  # it went on after its goal was met or its turns ran out

    @property
    def faithful(self) -> bool:
        return not self.leaks and not self.contradictions and not self.failed_to_end


def fidelity(user: User, exchanges: list[tuple[str, UserReply]]) -> Fidelity:
    """Judge a conversation's replies against the user's facts: a leak is a fact's value given before
    any message was about it; a contradiction is an asked fact answered without its value or with one
    of its alternatives, or a confirmation answered the other way; failing to end is a reply that is
    not ``done`` once every item was asked about, or at the ``max_turns``-th reply."""
    judged = Fidelity(replies=len(exchanges))
    asked: set[str] = set()
    items: list[HiddenFact | Confirmation] = [*user.facts, *user.confirmations]
    for turn, (message, reply) in enumerate(exchanges, 1):
        if turn > user.max_turns:  # the user is gone: it must say so and give nothing away
            judged.failed_to_end = judged.failed_to_end or not reply.done
            judged.leaks += [f.id for f in user.facts if f.id not in asked and mentions(reply.text, f.value)]
            continue
        about = user.about(message)
        asked.update(item.id for item in about)
        for fact in user.facts:
            if fact.id not in asked and mentions(reply.text, fact.value):
                judged.leaks.append(fact.id)
        for item in about:
            if isinstance(item, HiddenFact):
                wrong = not mentions(reply.text, item.value) or any(mentions(reply.text, a) for a in item.alternatives)
            else:
                wrong = bool((_NO if item.confirm else _YES).search(reply.text))
            if wrong:
                judged.contradictions.append(item.id)
        goal_met = len(asked) == len(items)
        if (goal_met or turn >= user.max_turns) and not reply.done:
            judged.failed_to_end = True
    return judged
