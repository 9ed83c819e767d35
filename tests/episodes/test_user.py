"""The simulated user of a multi-turn task: the scripted rules, a model-backed user (played here by the
offline ``scripted:FILE`` provider), and ``fidelity``, which judges either against the task."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from coworkenv._errors import ModelError
from coworkenv.episodes import ModelUser, ScriptedUser, UserReply, fidelity, persona_prompt, simulator
from coworkenv.episodes._user import DONE_MARK, DONE_REPLY, GONE_REPLY, UNKNOWN_REPLY
from coworkenv.workspace import Task

pytestmark = pytest.mark.anyio

CITY = {"id": "city", "cues": ["city", "office"], "value": "Lyon", "reply": "Lyon, please.",
        "alternatives": ["Paris", "Nantes"]}
COLOUR = {"id": "colour", "cues": ["colour"], "value": "teal", "reply": "Make it teal.", "alternatives": ["orange"]}


def confirmation(confirm: bool) -> dict:
    return {"id": "wipe", "cues": ["delete", "remove"], "tools": ["files_delete_file"], "confirm": confirm,
            "reply": "Yes, go ahead and delete it." if confirm else "No, keep it."}


def make_task(*, confirm: bool = True, max_turns: int = 6, facts: tuple[dict, ...] = (CITY, COLOUR)) -> Task:
    """A task whose user holds ``facts`` and one confirmation (the simulator needs no workspace)."""
    return Task.model_validate({
        "id": "mt", "workspace_id": "ws", "capability": "multi_turn", "difficulty": 2,
        "instruction": "Move the team's folder to the new office and delete the old draft if I agree.",
        "checks": [{"id": "answer", "kind": "answer", "description": "names the city", "contains": ["Lyon"]}],
        "reference": [{"tool": "ask_user", "arguments": {"message": "Which city?"}}],
        "user": {"persona": {"name": "Ada Quint", "role": "office manager", "tone": "terse"},
                 "facts": list(facts), "confirmations": [confirmation(confirm)], "max_turns": max_turns},
    })


async def converse(user, messages: list[str]) -> list[tuple[str, UserReply]]:
    return [(message, await user.reply(message)) for message in messages]


def model_user(task: Task, tmp_path: Path, replies: list[str]) -> ModelUser:
    """A model-backed user whose model answers ``replies`` in order, whatever it is asked."""
    path = tmp_path / "replies.yaml"
    path.write_text(yaml.safe_dump(replies))
    user = simulator(task, f"scripted:{path}")
    assert isinstance(user, ModelUser)
    return user


# --------------------------------------------------------------------------- the scripted user


async def test_a_fact_is_given_word_for_word_only_to_a_message_about_it():
    user = ScriptedUser(make_task().user)
    assert await user.reply("Which city should the folder go to?") == UserReply(CITY["reply"], False)
    assert await user.reply("Is the cityscape photo needed?") == UserReply(UNKNOWN_REPLY, False)  # whole words only
    assert await user.reply("How many files are there?") == UserReply(UNKNOWN_REPLY, False)


async def test_a_message_about_two_items_gets_both_replies():
    user = ScriptedUser(make_task().user)
    reply = await user.reply("Which city and which colour?")
    assert reply == UserReply(f"{CITY['reply']} {COLOUR['reply']}", False)


@pytest.mark.parametrize("confirm", [True, False])
async def test_the_user_confirms_or_declines_as_the_task_says(confirm):
    task = make_task(confirm=confirm)
    reply = await ScriptedUser(task.user).reply("May I delete the old draft?")
    assert reply.text == task.user.confirmations[0].reply


async def test_the_user_is_done_once_every_item_was_given_and_stays_done():
    user = ScriptedUser(make_task().user)
    assert not (await user.reply("Which city?")).done
    assert not (await user.reply("Which city, again?")).done  # asking twice gives nothing new
    assert not (await user.reply("What colour?")).done
    assert await user.reply("Shall I delete the draft?") == UserReply(confirmation(True)["reply"], True)
    assert await user.reply("Anything else?") == UserReply(DONE_REPLY, True)


async def test_the_user_is_done_at_max_turns_and_gone_after():
    user = ScriptedUser(make_task(max_turns=2).user)
    assert await user.reply("How are you?") == UserReply(UNKNOWN_REPLY, False)
    assert await user.reply("Nice weather?") == UserReply(UNKNOWN_REPLY, True)
    for message in ("Which city?", "Anything else?", "Which city?"):
        assert await user.reply(message) == UserReply(GONE_REPLY, True)  # no fact once gone


def test_simulator_is_the_scripted_user_by_default_and_needs_a_user(tmp_path):
    assert isinstance(simulator(make_task()), ScriptedUser)
    with pytest.raises(ValueError, match="has no user"):
        simulator(make_task().model_copy(update={"user": None}))


# --------------------------------------------------------------------------- fidelity of the scripted user

CONVERSATIONS = {
    "in order": ["Which city?", "What colour?", "May I delete the draft?"],
    "off topic first": ["What's the budget code?", "Which office?", "Which colour?", "Remove the draft?"],
    "repeated": ["Which city?", "Which city?", "What colour?", "What colour?", "Delete it?"],
    "all at once": ["Which city, what colour, and may I delete the draft?", "Thanks. Anything else?"],
    "never asked": ["Hello?", "Who are you?", "What day is it?", "Is it raining?", "Lunch?", "Bye?"],
    "ended then more": ["Which city, what colour, and may I delete the draft?", "Which city?", "More?"],
}


@pytest.mark.parametrize("messages", list(CONVERSATIONS.values()), ids=list(CONVERSATIONS))
@pytest.mark.parametrize("confirm", [True, False])
async def test_fidelity_finds_the_scripted_user_faithful(messages, confirm):
    task = make_task(confirm=confirm)
    judged = fidelity(task.user, await converse(ScriptedUser(task.user), messages))
    assert judged.replies == len(messages)
    assert (judged.leaks, judged.contradictions, judged.failed_to_end) == ([], [], False)
    assert judged.faithful


async def test_fidelity_finds_the_scripted_user_faithful_past_max_turns_off_topic():
    task = make_task(max_turns=2)
    exchanges = await converse(ScriptedUser(task.user), ["Hi?", "Which city?", "Lunch?", "What's new?"])
    assert fidelity(task.user, exchanges).faithful


async def test_fidelity_finds_the_scripted_user_faithful_when_asked_about_facts_past_max_turns():
    """Once its turns are spent the user is gone and says so (done); a question about a fact then is
    the agent's waste, not the user contradicting itself."""
    task = make_task(max_turns=2)
    exchanges = await converse(ScriptedUser(task.user), ["Hi?", "Which city?", "What colour?", "Which city?"])
    assert [reply.text for _, reply in exchanges[2:]] == [GONE_REPLY, GONE_REPLY]
    judged = fidelity(task.user, exchanges)
    assert judged.contradictions == []
    assert judged.faithful


# --------------------------------------------------------------------------- a model-backed user


async def test_a_model_user_that_ends_with_the_done_mark_is_faithful_and_the_mark_is_stripped(tmp_path):
    task = make_task()
    user = model_user(task, tmp_path, ["Lyon, of course.", "Teal would be nice.", f"Yes, delete it. {DONE_MARK}"])
    exchanges = await converse(user, ["Which city?", "What colour?", "Can I delete the draft?"])
    assert [reply for _, reply in exchanges] == [
        UserReply("Lyon, of course.", False), UserReply("Teal would be nice.", False),
        UserReply("Yes, delete it.", True)]
    assert fidelity(task.user, exchanges).faithful


async def test_a_model_user_that_says_only_the_done_mark_gives_the_done_reply(tmp_path):
    user = model_user(make_task(), tmp_path, ["[DONE]"])
    assert await user.reply("Anything else?") == UserReply(DONE_REPLY, True)


async def test_a_model_user_is_gone_after_max_turns_without_asking_its_model(tmp_path):
    user = model_user(make_task(max_turns=1), tmp_path, ["Lyon."])  # a second model call would fail
    assert await user.reply("Which city?") == UserReply("Lyon.", True)
    assert await user.reply("What colour?") == UserReply(GONE_REPLY, True)


async def test_a_model_user_whose_model_fails_raises_a_model_error(tmp_path):
    user = model_user(make_task(), tmp_path, ["Lyon."])
    await user.reply("Which city?")
    with pytest.raises(ModelError, match="simulated user's model did not answer"):
        await user.reply("What colour?")


async def test_fidelity_flags_a_model_user_that_volunteers_a_fact(tmp_path):
    task = make_task()
    user = model_user(task, tmp_path, ["Not sure. By the way, it goes to Lyon.", "Teal."])
    judged = fidelity(task.user, await converse(user, ["What's the budget code?", "What colour?"]))
    assert judged.leaks == ["city"] and not judged.faithful


@pytest.mark.parametrize("reply", ["Paris, please.", "Lyon, or maybe Nantes.", "Somewhere nice."])
async def test_fidelity_flags_a_model_user_that_gives_a_wrong_value(tmp_path, reply):
    task = make_task()
    judged = fidelity(task.user, await converse(model_user(task, tmp_path, [reply]), ["Which city?"]))
    assert judged.contradictions == ["city"] and not judged.faithful


@pytest.mark.parametrize(("confirm", "reply"), [(True, "No, don't delete it."), (False, "Yes, go ahead.")])
async def test_fidelity_flags_a_model_user_that_answers_a_confirmation_the_other_way(tmp_path, confirm, reply):
    task = make_task(confirm=confirm)
    judged = fidelity(task.user, await converse(model_user(task, tmp_path, [reply]), ["May I delete the draft?"]))
    assert judged.contradictions == ["wipe"] and not judged.faithful


async def test_fidelity_flags_a_model_user_that_never_ends(tmp_path):
    task = make_task(max_turns=6)
    user = model_user(task, tmp_path, ["Lyon.", "Teal.", "Yes, go ahead.", "Happy to chat more!"])
    exchanges = await converse(user, ["Which city?", "What colour?", "Delete the draft?", "Anything else?"])
    judged = fidelity(task.user, exchanges)
    assert (judged.leaks, judged.contradictions, judged.failed_to_end) == ([], [], True)
    assert not judged.faithful


def test_the_persona_prompt_names_the_persona_and_every_value_and_forbids_volunteering():
    task = make_task(confirm=False)
    prompt = persona_prompt(task)
    for text in ("Ada Quint", "office manager", "terse", task.instruction, "Lyon", CITY["reply"], "teal",
                 COLOUR["reply"], "no, do not", "No, keep it.", DONE_MARK):
        assert text in prompt
    assert "never volunteer" in prompt
    assert "Paris" not in prompt  # the alternatives are for judging, not for the model
