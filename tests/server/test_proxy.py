"""The capture proxy of `coworkenv serve --upstream`: real clients (the OpenAI and Anthropic SDKs, an
MCP client, an OpenAI Agents SDK agent and a LangGraph agent) at an episode's address, a real vLLM
server upstream serving the committed tiny tool-calling model. What the agent and the model said
is recorded on the episode the address names (streamed or not, token ids and log-probabilities
included when asked for), becomes the episode's conversation, and a live episode exports like a
teacher's."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from coworkenv.episodes import EpisodeHost
from coworkenv.gate import GRADER_VERSION
from coworkenv.server import ServeSettings, running_http_server
from coworkenv.trainer import sft_rows
from coworkenv.workspace import agent_view

pytestmark = [pytest.mark.anyio, pytest.mark.bwrap, pytest.mark.slow]
PROBE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "tool-model" / "probe.json").read_text())


# Of the six tasks the fixture model was trained on, greedy decoding through either agent passes 5 (the
# model loops on cross_app-0-compose_join-000 until its context is full): one of slack for another build's numerics
PASSING = 4
# vLLM's 400 for a prompt longer than the served model's context (2,048 tokens for the fixture model)
CONTEXT_EXHAUSTED = "maximum context length"


def ran_out_of_context(exc: Exception) -> bool:
    """Whether an agent's model request failed because its conversation no longer fits the model's
    context: the agent's failure (it cannot go on), which ends its episode like running out of turns."""
    return getattr(exc, "status_code", None) == 400 and CONTEXT_EXHAUSTED in str(exc)


def check_statuses(calls: list, ran_out: bool) -> None:
    """Every recorded call was answered (200) but the last, which is the upstream's 400 for a conversation
    past the model's context exactly when the agent ran out of it: the proxy records what the upstream
    said, refusals included, and the agent's model client raised on it and stopped asking."""
    assert calls and all(c.status == 200 for c in calls[:-1])
    if ran_out:
        assert calls[-1].status == 400 and CONTEXT_EXHAUSTED in json.dumps(calls[-1].response)
    else:
        assert calls[-1].status == 200


async def settle(host: EpisodeHost) -> None:
    """Wait for the proxy's writes (they go to the store off the request's path)."""
    from coworkenv.server._proxy import recorded

    await recorded()
    await host.flush()


async def test_openai_calls_are_recorded_on_the_episode_of_their_address(host, tasks, tool_model_server):
    import openai

    task = host.store.task(tasks[0])
    settings = ServeSettings(upstream=tool_model_server)
    with anyio.fail_after(240):
        async with running_http_server(host, settings) as base:
            model = openai.AsyncOpenAI(base_url=f"{base}/t/{task.id}/e/agent-1/v1", api_key="upstream-key")
            request = {"model": "tool-model", "messages": PROBE["messages"], "tools": PROBE["tools"],
                       "temperature": 0, "max_tokens": 96}
            plain = await model.chat.completions.create(**request, logprobs=True,
                                                        extra_body={"return_token_ids": True})
            [call] = plain.choices[0].message.tool_calls
            assert (call.function.name, json.loads(call.function.arguments)) == (
                PROBE["expected"]["name"], PROBE["expected"]["arguments"])
            streamed = await model.chat.completions.create(**request, stream=True)
            deltas = [chunk async for chunk in streamed]
            assert len(deltas) > 2  # it came back as a stream, chunk by chunk
            # the same address's MCP endpoint is the same episode: the agent plays it there
            async with (httpx2.AsyncClient(timeout=30) as http,
                        Client(streamable_http_client(f"{base}/t/{task.id}/e/agent-1/mcp", http_client=http)) as mcp):
                for step in task.spec.reference:
                    assert not (await mcp.call_tool(step.tool, step.arguments)).is_error
                ended = await mcp.call_tool("submit_answer", {"answer": task.spec.reference_answer or "done"})
                assert not ended.is_error
            await model.close()
            await settle(host)
    [episode] = host.store.episodes(task_id=task.id, source="live")
    calls = host.store.model_calls(episode.id)
    assert [(c.api, c.stream, c.status) for c in calls] == [("chat", False, 200), ("chat", True, 200)]
    first, second = calls
    assert first.request["messages"] == PROBE["messages"] and "upstream-key" not in json.dumps(first.request)
    choice = first.response["choices"][0]
    assert choice["token_ids"] and len(choice["logprobs"]["content"]) == len(choice["token_ids"])
    assembled = second.response["choices"][0]["message"]  # put together from the stream
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in assembled["tool_calls"]] == [
        (PROBE["expected"]["name"], PROBE["expected"]["arguments"])]
    conversation = host.store.messages(episode.id)
    assert [m.role for m in conversation] == ["system", "user", "assistant"]
    assert conversation[-1].tool_calls[0].name == PROBE["expected"]["name"]
    assert conversation[-1].tool_calls[0].arguments == PROBE["expected"]["arguments"]
    assert [c.tool for c in host.store.tool_calls(episode.id)][-1] == "submit_answer"
    verdict = host.store.verdict(episode.id, GRADER_VERSION)
    assert verdict is not None and verdict.admitted, verdict
    [row] = [r for r in sft_rows(host.store) if r["episode_id"] == episode.id]  # exported like a teacher's
    assert row["source"] == "live" and row["messages"][1:] == [
        {"role": "user", "content": PROBE["messages"][1]["content"]},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": conversation[-1].tool_calls[0].id, "type": "function",
             "function": {"name": PROBE["expected"]["name"], "arguments": PROBE["expected"]["arguments"]}}]}]


async def test_openai_responses_become_the_conversation_across_previous_response_id(host, tasks, tool_model_server):
    import openai

    task = host.store.task(tasks[0])
    tools = [{"type": "function", **t["function"]} for t in PROBE["tools"]]
    with anyio.fail_after(240):
        async with running_http_server(host, ServeSettings(upstream=tool_model_server)) as base:
            model = openai.AsyncOpenAI(base_url=f"{base}/t/{task.id}/e/responses-1/v1", api_key="upstream-key")
            first = await model.responses.create(model="tool-model", instructions=PROBE["messages"][0]["content"],
                                                 input=PROBE["messages"][1]["content"], tools=tools, temperature=0,
                                                 max_output_tokens=96)
            [call] = [o for o in first.output if o.type == "function_call"]
            assert (call.name, json.loads(call.arguments)) == (PROBE["expected"]["name"], PROBE["expected"]["arguments"])
            result = [{"type": "function_call_output", "call_id": call.call_id, "output": '{"people": []}'}]
            streamed = await model.responses.create(model="tool-model", previous_response_id=first.id, input=result,
                                                    tools=tools, temperature=0, max_output_tokens=48, stream=True)
            events = [event.type async for event in streamed]
            assert events[-1] == "response.completed"
            await model.close()
            await settle(host)
    [episode] = host.store.episodes(task_id=task.id, source="live")
    calls = host.store.model_calls(episode.id)
    assert [(c.api, c.stream, c.status) for c in calls] == [("responses", False, 200), ("responses", True, 200)]
    assert calls[1].response["object"] == "response" and calls[1].response["output"]  # assembled from the stream
    conversation = host.store.messages(episode.id)  # the first exchange, then the one that continued it
    assert [m.role for m in conversation[:4]] == ["system", "user", "assistant", "tool"] and len(conversation) == 5
    assert conversation[1].content == PROBE["messages"][1]["content"]
    assert (conversation[2].tool_calls[0].name, conversation[2].tool_calls[0].arguments) == (
        PROBE["expected"]["name"], PROBE["expected"]["arguments"])
    assert conversation[3].content == '{"people": []}' and conversation[3].name == PROBE["expected"]["name"]
    assert conversation[4].role == "assistant"


def anthropic_tools() -> list[dict]:
    return [{"name": t["function"]["name"], "description": t["function"]["description"],
             "input_schema": t["function"]["parameters"]} for t in PROBE["tools"]]


async def test_anthropic_messages_with_tool_use_are_recorded(host, tasks, tool_model_server):
    import anthropic

    task = host.store.task(tasks[0])
    settings = ServeSettings(upstream=tool_model_server, token="s3cret")
    with anyio.fail_after(240):
        async with running_http_server(host, settings) as base:
            client = anthropic.AsyncAnthropic(base_url=f"{base}/t/{task.id}/e/claude-1", api_key="upstream-key",
                                              default_headers={"X-Coworkenv-Token": "s3cret"})
            request = {"model": "tool-model", "max_tokens": 96, "extra_body": {"temperature": 0}, "tools": anthropic_tools(),
                       "system": PROBE["messages"][0]["content"], "messages": [PROBE["messages"][1]]}
            reply = await client.messages.create(**request)
            [use] = [b for b in reply.content if b.type == "tool_use"]
            assert (use.name, use.input) == (PROBE["expected"]["name"], PROBE["expected"]["arguments"])
            async with client.messages.stream(**request) as stream:
                final = await stream.get_final_message()
            assert [b.name for b in final.content if b.type == "tool_use"] == [use.name]
            anonymous = anthropic.AsyncAnthropic(base_url=f"{base}/t/{task.id}/e/claude-1", api_key="upstream-key",
                                                 max_retries=0)
            with pytest.raises(anthropic.AuthenticationError, match="X-Coworkenv-Token"):
                await client.with_options(default_headers={"X-Coworkenv-Token": "wrong"}).messages.create(**request)
            with pytest.raises(anthropic.AuthenticationError):
                await anonymous.messages.create(**request)
            await client.close()
            await anonymous.close()
            await settle(host)
    [episode] = host.store.episodes(task_id=task.id, source="live")
    calls = host.store.model_calls(episode.id)
    assert [(c.api, c.stream, c.status) for c in calls] == [("messages", False, 200), ("messages", True, 200)]
    streamed = calls[1].response
    [block] = [b for b in streamed["content"] if b["type"] == "tool_use"]
    assert (block["name"], block["input"]) == (PROBE["expected"]["name"], PROBE["expected"]["arguments"])
    conversation = host.store.messages(episode.id)
    assert [m.role for m in conversation] == ["system", "user", "assistant"]
    assert conversation[-1].tool_calls[0].arguments == PROBE["expected"]["arguments"]


async def test_bad_requests_and_unknown_addresses_are_named(host, tasks, tool_model_server):
    settings = ServeSettings(upstream=tool_model_server)
    with anyio.fail_after(60):
        async with running_http_server(host, settings) as base, httpx.AsyncClient(timeout=30) as http:
            bad = await http.post(f"{base}/t/{tasks[0]}/e/k/v1/chat/completions", content=b"{not json")
            assert bad.status_code == 400 and "not JSON" in bad.json()["error"]["message"]
            missing = await http.post(f"{base}/t/no-such-task/e/k/v1/chat/completions", json={"model": "m"})
            assert missing.status_code == 404 and "no-such-task" in missing.json()["error"]["message"]
            gone = await http.post(f"{base}/e/ep-missing/v1/chat/completions", json={"model": "m"})
            assert gone.status_code == 404 and "ep-missing" in gone.json()["error"]["message"]
            models = await http.get(f"{base}/t/{tasks[0]}/e/k/v1/models")
            assert "tool-model" in {m["id"] for m in models.json()["data"]}
            upstream_error = await http.post(f"{base}/t/{tasks[0]}/e/k/v1/chat/completions",
                                             json={"model": "no-such-model", "messages": []})
            assert upstream_error.status_code == 404  # the upstream's own answer, passed back
            await settle(host)
    assert host.store.episodes(task_id="no-such-task") == []
    [episode] = host.store.episodes(task_id=tasks[0], source="live")
    [recorded] = host.store.model_calls(episode.id)
    assert recorded.status == 404 and host.store.messages(episode.id) == []  # an error is no conversation


async def test_forgotten_episode_counters_are_read_back_from_the_store(host, tasks, tool_model_server, monkeypatch):
    """The proxy keeps few episodes' call counters in memory; one it forgot numbers on from the store."""
    monkeypatch.setattr("coworkenv.server._proxy.EPISODES_KEPT", 1)
    request = {"model": "tool-model", "messages": PROBE["messages"], "max_tokens": 1}
    with anyio.fail_after(120):
        async with (running_http_server(host, ServeSettings(upstream=tool_model_server)) as base,
                    httpx.AsyncClient(timeout=60) as http):
            for key in ("a", "b", "a", "b", "a"):
                reply = await http.post(f"{base}/t/{tasks[0]}/e/{key}/v1/chat/completions", json=request)
                assert reply.status_code == 200
                await settle(host)
    by_key = {e.key: e.id for e in host.store.episodes(task_id=tasks[0], source="live")}
    assert [c.idx for c in host.store.model_calls(by_key["a"])] == [0, 1, 2]
    assert [c.idx for c in host.store.model_calls(by_key["b"])] == [0, 1]


async def test_an_agents_sdk_agent_plays_a_served_model_through_the_proxy(host, tool_model_tasks, tool_model_server):
    """An OpenAI Agents SDK agent with its own instructions and the workspace attached over MCP (every
    tool) meets the served PocketWorker in the compact view it was trained on, through the proxy."""
    import openai
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from agents.exceptions import MaxTurnsExceeded, ModelBehaviorError
    from agents.mcp import MCPServerStreamableHttp

    set_tracing_disabled(True)
    results, ran_out = {}, set()
    settings = ServeSettings(upstream=tool_model_server, upstream_view="compact")
    with anyio.fail_after(600):
        async with running_http_server(host, settings) as base:
            for task_id in tool_model_tasks:
                task = host.store.task(task_id)
                address = f"{base}/t/{task.id}/e/agents-sdk/mcp"
                model = openai.AsyncOpenAI(base_url=address.removesuffix("/mcp") + "/v1", api_key="unused")
                async with MCPServerStreamableHttp({"url": address, "timeout": 30}, name="workspace") as server:
                    agent = Agent(name="coworker", instructions="You are a helpful coworker; use the workspace.",
                                  model=OpenAIChatCompletionsModel(model="tool-model", openai_client=model),
                                  model_settings=ModelSettings(temperature=0, max_tokens=128), mcp_servers=[server])
                    try:
                        answer = str((await Runner.run(agent, task.instruction, max_turns=8)).final_output)
                    except (MaxTurnsExceeded, ModelBehaviorError):
                        answer = ""
                    except openai.BadRequestError as exc:  # a looping agent filled the context: its failure
                        if not ran_out_of_context(exc):
                            raise
                        answer, ran_out = "", ran_out | {task.id}
                    done = await server.call_tool("submit_answer", {"answer": answer})  # the app's harness ends it
                    results[task.id] = done.structured_content["episode_id"]
                await model.close()
            await settle(host)
    admitted_rows = {r["episode_id"] for r in sft_rows(host.store)}
    played = 0
    for task_id, episode_id in results.items():
        task = host.store.task_spec(task_id)
        view = agent_view("compact", host.store.workspace(task.workspace_id).tools, task)
        calls = host.store.model_calls(episode_id)
        check_statuses(calls, task_id in ran_out)
        for call in calls:  # the model saw its training view, not the app's instructions and tool list
            assert call.request["messages"][0] == {"role": "system", "content": view.system}
            assert call.request["tools"] == view.tools and "helpful coworker" not in json.dumps(call.request)
        conversation = host.store.messages(episode_id)
        assert [m.role for m in conversation[:2]] == ["system", "user"] and conversation[1].content == task.instruction
        asked = [c.name for m in conversation if m.role == "assistant" for c in m.tool_calls]
        ran = [c.tool for c in host.store.tool_calls(episode_id) if c.tool != "submit_answer"]
        assert asked[:len(ran)] == ran  # every call the app ran over MCP is one the model asked for
        played += bool(ran)
        verdict = host.store.verdict(episode_id, GRADER_VERSION)
        assert verdict is not None and (episode_id in admitted_rows) == verdict.admitted
    assert played >= len(results) // 2  # the tiny model's calls reached the workspace in most episodes
    exported = [r for r in sft_rows(host.store) if r["episode_id"] in set(results.values())]
    # the fixture model replays the oracle's compact trajectories of these tasks: most pass and export
    assert len(exported) >= PASSING and all(r["source"] == "live" and r["client"] for r in exported)


async def test_a_langgraph_agent_plays_a_served_model_through_the_proxy(host, tool_model_tasks, tool_model_server):
    """LangGraph's prebuilt ReAct agent, the model client at the episode's proxy address and the
    workspace's MCP tools as LangChain tools: whole episodes recorded, graded and exported."""
    import openai
    from langchain_openai import ChatOpenAI
    from langgraph.errors import GraphRecursionError
    from langgraph.prebuilt import create_react_agent

    from coworkenv.agents import mcp_tools

    episodes, ran_out = {}, set()
    settings = ServeSettings(upstream=tool_model_server, upstream_view="compact")
    with anyio.fail_after(600):
        async with running_http_server(host, settings) as base:
            for task_id in tool_model_tasks:
                address = f"{base}/t/{task_id}/e/langgraph-1"
                model = ChatOpenAI(model="tool-model", base_url=f"{address}/v1", api_key="unused", temperature=0,
                                   max_tokens=128)
                async with (httpx2.AsyncClient(timeout=30) as http,
                            Client(streamable_http_client(f"{address}/mcp", http_client=http)) as mcp):
                    tools = [t for t in await mcp_tools(mcp) if t.name != "submit_answer"]
                    instruction = (await mcp.get_prompt("task")).messages[0].content.text
                    agent = create_react_agent(model, tools)
                    try:
                        state = await agent.ainvoke({"messages": [("user", instruction)]}, {"recursion_limit": 16})
                        answer = str(state["messages"][-1].content)
                    except GraphRecursionError:
                        answer = ""
                    except openai.BadRequestError as exc:  # a looping agent filled the context: its failure
                        if not ran_out_of_context(exc):
                            raise
                        answer, ran_out = "", ran_out | {task_id}
                    done = await mcp.call_tool("submit_answer", {"answer": answer})
                    episodes[task_id] = done.structured_content["episode_id"]
            await settle(host)
    rows = {r["episode_id"]: r for r in sft_rows(host.store)}
    passed = 0
    for task_id, episode_id in episodes.items():
        task = host.store.task_spec(task_id)
        calls = host.store.model_calls(episode_id)
        check_statuses(calls, task_id in ran_out)
        assert all(c.api == "chat" for c in calls)
        conversation = host.store.messages(episode_id)
        assert [m.role for m in conversation[:2]] == ["system", "user"] and conversation[1].content == task.instruction
        ran = [c.tool for c in host.store.tool_calls(episode_id) if c.tool != "submit_answer"]
        assert [c.name for m in conversation if m.role == "assistant" for c in m.tool_calls][:len(ran)] == ran
        verdict = host.store.verdict(episode_id, GRADER_VERSION)
        assert verdict is not None and (episode_id in rows) == verdict.admitted
        if verdict.admitted:
            passed += 1
            row = rows[episode_id]
            assert row["source"] == "live" and row["client"]
            view = agent_view("full", host.store.workspace(task.workspace_id).tools, task)
            assert [m["role"] for m in row["messages"]][:2] == ["system", "user"]
            assert [t["function"]["name"] for t in row["tools"]] == view.names  # exported in the asked view
    assert passed >= PASSING  # the fixture model replays the oracle's compact trajectories of these tasks


async def test_a_body_with_a_key_twice_is_refused_before_it_reaches_an_episode(host, tasks, scripted_model):
    """Two ``messages`` keys: the upstream and the record would read different conversations."""
    body = (b'{"model": "m", "messages": [{"role": "user", "content": "what the model sees"}], '
            b'"messages": [{"role": "user", "content": "what the record keeps"}]}')
    with anyio.fail_after(60):
        async with (running_http_server(host, ServeSettings(upstream=scripted_model.url)) as base,
                    httpx.AsyncClient(timeout=30) as http):
            refused = await http.post(f"{base}/t/{tasks[0]}/e/k/v1/chat/completions", content=body,
                                      headers={"content-type": "application/json"})
            assert refused.status_code == 400 and "'messages' appears twice" in refused.json()["error"]["message"]
            await settle(host)
    assert scripted_model.received == [] and host.store.episodes(task_id=tasks[0], source="live") == []


async def test_upstream_credentials_are_never_shown(host, tasks, scripted_model, store_path):
    """A user name, password and query key in ``--upstream`` are used, and never echoed: not in a 502's
    body, not in the recorded ``upstream``, not in the start-up line of ``coworkenv serve``."""
    secrets = ("pa55word-secret", "query-key-secret", "ops-user")
    port = scripted_model.url.split(":")[2].split("/")[0]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    dead = f"http://ops-user:pa55word-secret@127.0.0.1:{closed}/v1?key=query-key-secret"
    alive = f"http://ops-user:pa55word-secret@127.0.0.1:{port}/v1?key=query-key-secret"
    request = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    with anyio.fail_after(60):
        async with running_http_server(host, ServeSettings(upstream=dead)) as base, httpx.AsyncClient(timeout=30) as http:
            for unanswered in (await http.post(f"{base}/t/{tasks[0]}/e/k/v1/chat/completions", json=request),
                               await http.get(f"{base}/t/{tasks[0]}/e/k/v1/models")):
                assert unanswered.status_code == 502 and f"127.0.0.1:{closed}" in unanswered.text
                assert not any(s in unanswered.text for s in secrets) and "***" in unanswered.text
        async with running_http_server(host, ServeSettings(upstream=alive)) as base, httpx.AsyncClient(timeout=30) as http:
            assert (await http.post(f"{base}/t/{tasks[0]}/e/k2/v1/chat/completions", json=request)).status_code == 200
            await settle(host)
    assert scripted_model.received[-1][0] == "/v1/chat/completions?key=query-key-secret"  # used as given
    [episode] = [e for e in host.store.episodes(task_id=tasks[0], source="live") if e.key == "k2"]
    [call] = host.store.model_calls(episode.id)
    assert call.upstream == f"http://***@127.0.0.1:{port}/v1?key=***"
    process = subprocess.Popen([sys.executable, "-m", "coworkenv", "serve", "--store", str(store_path), "--port", "0",
                                "--upstream", alive], stderr=subprocess.PIPE, text=True)
    try:
        lines = [process.stderr.readline() for _ in range(2)]
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert "recording model calls to http://***@127.0.0.1" in lines[1], lines
    assert not any(s in line for s in secrets for line in lines)
