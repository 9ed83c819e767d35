"""A workspace's toolbox checks call arguments against each tool's schema, and remembers the outcome
for argument texts it has seen (episodes of a task repeat the same calls): the answer is the one a
fresh check gives, for valid and invalid arguments, however many texts it has seen."""

import json

from coworkenv.episodes import Toolbox, argument_error
from coworkenv.episodes._episode import CHECKED_ARGUMENTS, CHECKED_TEXT_MAX
from coworkenv.workspace import build_workspace


def test_the_toolbox_answers_as_a_fresh_check_does_for_repeated_and_new_arguments():
    workspace = build_workspace(3, ("mail", "contacts"))
    toolbox = Toolbox(workspace)
    search = toolbox.by_name["mail_search_messages"]
    plays = [{"query": "budget"}, {"query": 3}, {}, {"query": "budget", "bogus": 1}, {"query": "a\x00b"}]
    plays += [{"query": f"q{n}"} for n in range(CHECKED_ARGUMENTS + 10)]  # more texts than it keeps
    plays += [{"query": "x" * (CHECKED_TEXT_MAX + 1)}, {"query": "x" * CHECKED_TEXT_MAX, "limit": 0}]  # long ones
    for round_ in range(2):
        for arguments in plays:
            expected = argument_error(search, arguments)
            assert toolbox.argument_error(search, arguments, json.dumps(arguments)) == expected, (round_, arguments)
    assert "field 'query'" in toolbox.argument_error(search, {"query": 3}, '{"query": 3}')
    assert toolbox.argument_error(search, {}, "{}") is None  # every field of a search is optional
    read = toolbox.by_name["mail_read_message"]
    assert "missing required field" in toolbox.argument_error(read, {}, "{}")
    assert "NUL" in toolbox.argument_error(search, {"query": "a\x00b"}, json.dumps({"query": "a\x00b"}))
    # the same text for another tool is checked against that tool's schema
    assert toolbox.argument_error(read, {"query": "budget"}, '{"query": "budget"}') == argument_error(read, {"query": "budget"})
