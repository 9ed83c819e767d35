"""Fixtures of the official MCP conformance suite (npm ``@modelcontextprotocol/conformance``).

``coworkenv serve --conformance`` serves them at ``/mcp`` behind the same HTTP guards as the
workspaces (bearer token, Host/Origin, body size, rate), so the suite exercises this package's
transport and security in both protocol eras. The fixture names and payloads are what the
suite's server scenarios call and check.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server.caching import CacheHint
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from .. import __version__
from ._front import INTERNAL_PREFIX, STATE_KEY_ENV, TrustedClient
from ._serve import Guard, ServeSettings, bind_socket, serve_app

NAME = "coworkenv-conformance"
INVALID_PARAMS = -32602
MISSING_CLIENT_CAPABILITY = -32021
PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_SILENT = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                   "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                   "phone": {"type": "string"}, "email": {"type": "string"}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or list(properties)}


def _elicit(message: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"method": "elicitation/create",
            "params": {"message": message, "requestedSchema": _schema(properties, required)}}


def _sample(text: str, max_tokens: int = 100) -> dict[str, Any]:
    return {"method": "sampling/createMessage",
            "params": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}],
                       "maxTokens": max_tokens}}


ROOTS = {"method": "roots/list", "params": {}}
DEFAULTS_SCHEMA = {
    "name": {"type": "string", "default": "John Doe"},
    "age": {"type": "integer", "default": 30},
    "score": {"type": "number", "default": 95.5},
    "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
    "verified": {"type": "boolean", "default": True},
}
ENUMS_SCHEMA = {
    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
    "titledSingle": {"type": "string", "oneOf": [{"const": "value1", "title": "First Option"},
                                                 {"const": "value2", "title": "Second Option"},
                                                 {"const": "value3", "title": "Third Option"}]},
    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                   "enumNames": ["Option One", "Option Two", "Option Three"]},
    "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
    "titledMulti": {"type": "array", "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                                         {"const": "value2", "title": "Second Choice"},
                                                         {"const": "value3", "title": "Third Choice"}]}},
}


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def _need(requests: dict[str, Any], state: str | None = None) -> types.InputRequiredResult:
    return types.InputRequiredResult.model_validate(
        {"inputRequests": requests, **({"requestState": state} if state is not None else {})})


def _session_of(ctx: Any) -> str:
    """The legacy session a request belongs to ('' on transports without sessions)."""
    return ctx.request.headers.get("mcp-session-id", "") if ctx.request is not None else ""


def _responses(params: Any) -> dict[str, Any]:
    """The input responses of a retried request, as plain JSON (``{}`` when there are none)."""
    raw = getattr(params, "input_responses", None)
    if raw is None:
        return {}
    out = {}
    for key, value in dict(raw).items():
        out[key] = value.model_dump(mode="json", by_alias=True) if hasattr(value, "model_dump") else value
    return out


def _content(response: Any) -> dict[str, Any]:
    content = response.get("content") if isinstance(response, dict) else None
    return content if isinstance(content, dict) else {}


class MemoryEventStore(EventStore):
    """Events kept in memory so a client can resume an SSE stream (2025-11-25 polling)."""

    def __init__(self, limit: int = 10_000) -> None:
        self.events: list[tuple[str, str, Any]] = []
        self.limit = limit
        self.counter = 0

    async def store_event(self, stream_id: str, message: Any) -> str:
        self.counter += 1
        self.events.append((stream_id, str(self.counter), message))
        del self.events[:-self.limit]
        return str(self.counter)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for s, e, _ in self.events if e == last_event_id), None)
        if stream is None:
            return None
        for stream_id, event_id, message in self.events:
            if stream_id == stream and int(event_id) > int(last_event_id) and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


TOOLS = [
    types.Tool(name="test_simple_text", description="Returns a simple text response", input_schema=NO_ARGS),
    types.Tool(name="test_image_content", description="Returns an image", input_schema=NO_ARGS),
    types.Tool(name="test_audio_content", description="Returns audio", input_schema=NO_ARGS),
    types.Tool(name="test_embedded_resource", description="Returns an embedded resource", input_schema=NO_ARGS),
    types.Tool(name="test_multiple_content_types", description="Returns text, image and a resource",
               input_schema=NO_ARGS),
    types.Tool(name="test_tool_with_logging", description="Logs while it runs", input_schema=NO_ARGS),
    types.Tool(name="test_tool_with_progress", description="Reports progress while it runs", input_schema=NO_ARGS),
    types.Tool(name="test_error_handling", description="Always fails as a tool error", input_schema=NO_ARGS),
    types.Tool(name="test_sampling", description="Asks the client's model",
               input_schema=_schema({"prompt": {"type": "string"}})),
    types.Tool(name="test_elicitation", description="Asks the user",
               input_schema=_schema({"message": {"type": "string"}})),
    types.Tool(name="test_elicitation_sep1034_defaults", description="Asks with defaults", input_schema=NO_ARGS),
    types.Tool(name="test_elicitation_sep1330_enums", description="Asks with enums", input_schema=NO_ARGS),
    types.Tool(name="test_reconnection", description="Closes its SSE stream mid-call", input_schema=NO_ARGS),
    types.Tool(name="json_schema_2020_12_tool", description="Tool with JSON Schema 2020-12 features",
               input_schema=SCHEMA_2020_12),
    types.Tool(name="test_custom_headers", description="Echoes a parameter mirrored into a header",
               input_schema=_schema({"region": {"type": "string", "x-mcp-header": "Region"}})),
    types.Tool(name="test_logging_tool", description="Logs (only when the request opted in)", input_schema=NO_ARGS),
    types.Tool(name="test_streaming_elicitation", description="Asks the user within the call's own response",
               input_schema=NO_ARGS),
    types.Tool(name="test_missing_capability", description="Needs the client's sampling capability",
               input_schema=NO_ARGS),
    *[types.Tool(name=f"test_input_required_result_{n}", description=f"Multi-round-trip fixture: {n}",
                 input_schema=NO_ARGS)
      for n in ("elicitation", "sampling", "list_roots", "request_state", "multiple_inputs", "multi_round",
                "tampered_state", "capabilities")],
]
PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A prompt without arguments"),
    types.Prompt(name="test_prompt_with_arguments", description="A prompt with two arguments",
                 arguments=[types.PromptArgument(name="arg1", required=True),
                            types.PromptArgument(name="arg2", required=True)]),
    types.Prompt(name="test_prompt_with_embedded_resource", description="A prompt embedding a resource",
                 arguments=[types.PromptArgument(name="resourceUri", required=True)]),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
    types.Prompt(name="test_input_required_result_prompt", description="A prompt that asks for context first"),
]
RESOURCES = [
    types.Resource(name="static-text", uri="test://static-text", mime_type="text/plain"),
    types.Resource(name="static-binary", uri="test://static-binary", mime_type="image/png"),
    types.Resource(name="watched-resource", uri="test://watched-resource", mime_type="text/plain"),
]


def conformance_server() -> Server:
    """The fixture server: tools, resources, prompts, logging, completion, subscriptions, multi-round-trip."""
    log_levels: dict[str, str] = {}
    subscriptions: set[str] = set()

    def modern(ctx: Any) -> bool:
        return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def log(ctx: Any, level: str, message: str) -> None:
        if not modern(ctx):
            threshold = log_levels.get(_session_of(ctx), "debug")
            if LEVELS.index(level) < LEVELS.index(threshold):
                return
        with _quiet():
            pending = ctx.session.send_log_message(level, message, logger=NAME, related_request_id=ctx.request_id)
        await pending

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        name, args = params.name, params.arguments or {}
        if name == "test_simple_text":
            return _text("This is a simple text response for testing.")
        if name == "test_image_content":
            return types.CallToolResult(content=[types.ImageContent(data=PNG_1PX, mime_type="image/png")])
        if name == "test_audio_content":
            return types.CallToolResult(content=[types.AudioContent(data=WAV_SILENT, mime_type="audio/wav")])
        if name == "test_embedded_resource":
            return types.CallToolResult(content=[types.EmbeddedResource(resource=types.TextResourceContents(
                uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."))])
        if name == "test_multiple_content_types":
            return types.CallToolResult(content=[
                types.TextContent(text="Multiple content types test:"),
                types.ImageContent(data=PNG_1PX, mime_type="image/png"),
                types.EmbeddedResource(resource=types.TextResourceContents(
                    uri="test://mixed-content-resource", mime_type="application/json",
                    text=json.dumps({"test": "data", "value": 123}))),
            ])
        if name == "test_logging_tool":
            await log(ctx, "info", "test_logging_tool ran")
            return _text("Logging tool complete")
        if name == "test_streaming_elicitation":
            return await _ask(ctx, params, name, args)
        if name == "test_tool_with_logging":
            for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
                await log(ctx, "info", step)
                await asyncio.sleep(0.05)
            return _text("Tool with logging executed successfully")
        if name == "test_tool_with_progress":
            for done in (0, 50, 100):
                await ctx.session.report_progress(done, 100, f"Completed step {done} of 100")
                await asyncio.sleep(0.05)
            token = (ctx.meta or {}).get("progress_token", 0)
            return _text(str(token))
        if name == "test_error_handling":
            return _text("This tool intentionally returns an error for testing", error=True)
        if name == "test_reconnection":
            await log(ctx, "info", "Before disconnect")
            if ctx.close_sse_stream is not None:
                await ctx.close_sse_stream()
            await asyncio.sleep(0.2)
            await log(ctx, "info", "After reconnect")
            return _text("Reconnection test completed")
        if name == "json_schema_2020_12_tool":
            return _text(json.dumps(args))
        if name == "test_custom_headers":
            return _text(str(args.get("region", "")))
        if name == "test_missing_capability":
            raise MCPError(code=MISSING_CLIENT_CAPABILITY, message="this tool needs the client's sampling capability",
                           data={"requiredCapabilities": {"sampling": {}}})
        if name in ("test_sampling", "test_elicitation", "test_elicitation_sep1034_defaults",
                    "test_elicitation_sep1330_enums"):
            return await _ask(ctx, params, name, args)
        if name.startswith("test_input_required_result_"):
            return _multi_round(ctx, params, name.removeprefix("test_input_required_result_"))
        raise MCPError(code=INVALID_PARAMS, message=f"unknown tool {name!r}")

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=RESOURCES)

    async def list_templates(ctx, params) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            name="template", uri_template="test://template/{id}/data", mime_type="application/json")])

    async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == "test://static-text":
            contents: Any = types.TextResourceContents(uri=uri, mime_type="text/plain",
                                                       text="This is the content of the static text resource.")
        elif uri == "test://static-binary":
            contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG_1PX)
        elif uri == "test://watched-resource":
            contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched resource content")
        elif uri.startswith("test://template/") and uri.endswith("/data"):
            item = uri.removeprefix("test://template/").removesuffix("/data")
            contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(
                {"id": item, "templateTest": True, "data": f"Data for ID: {item}"}))
        else:
            raise MCPError(code=INVALID_PARAMS, message=f"Resource not found: {uri}", data={"uri": uri})
        return types.ReadResourceResult(contents=[contents])

    async def subscribe(ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscriptions.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        subscriptions.discard(str(params.uri))
        return types.EmptyResult()

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=PROMPTS)

    async def get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult | types.InputRequiredResult:
        args = params.arguments or {}

        def user(content: Any) -> types.PromptMessage:
            return types.PromptMessage(role="user", content=content)

        if params.name == "test_simple_prompt":
            return types.GetPromptResult(messages=[user(types.TextContent(text="This is a simple prompt for testing."))])
        if params.name == "test_prompt_with_arguments":
            text = f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"
            return types.GetPromptResult(messages=[user(types.TextContent(text=text))])
        if params.name == "test_prompt_with_embedded_resource":
            return types.GetPromptResult(messages=[
                user(types.EmbeddedResource(resource=types.TextResourceContents(
                    uri=args.get("resourceUri", "test://example-resource"), mime_type="text/plain",
                    text="Embedded resource content for testing."))),
                user(types.TextContent(text="Please process the embedded resource above.")),
            ])
        if params.name == "test_prompt_with_image":
            return types.GetPromptResult(messages=[
                user(types.ImageContent(data=PNG_1PX, mime_type="image/png")),
                user(types.TextContent(text="Please analyze the image above.")),
            ])
        if params.name == "test_input_required_result_prompt":
            answer = _content(_responses(params).get("user_context"))
            if "context" not in answer:
                return _need({"user_context": _elicit("What context should the prompt use?",
                                                      {"context": {"type": "string"}})})
            return types.GetPromptResult(messages=[user(types.TextContent(text=f"Context: {answer['context']}"))])
        raise MCPError(code=INVALID_PARAMS, message=f"unknown prompt {params.name!r}")

    async def complete(ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))

    async def set_level(ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        log_levels[_session_of(ctx)] = params.level
        return types.EmptyResult()

    hint = CacheHint(ttl_ms=0, scope="private")
    with _quiet():
        server = Server(
            NAME, version=__version__,
            cache_hints={m: hint for m in ("tools/list", "prompts/list", "resources/list",
                                           "resources/templates/list", "resources/read")},
            on_list_tools=list_tools, on_call_tool=call_tool,
            on_list_resources=list_resources, on_list_resource_templates=list_templates,
            on_read_resource=read_resource, on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe,
            on_list_prompts=list_prompts, on_get_prompt=get_prompt, on_completion=complete,
            on_set_logging_level=set_level,
        )
    # Multi-round-trip state is sealed (AES-GCM, process key): a tampered requestState is refused.
    shared = os.environ.get(STATE_KEY_ENV)  # serve --workers: every worker reads the states any of them signed
    security = RequestStateSecurity(keys=[shared]) if shared else RequestStateSecurity.ephemeral()
    server.middleware.append(RequestStateBoundary(security, default_audience=NAME))
    return server


async def _ask(ctx: Any, params: Any, name: str, args: dict[str, Any]) -> types.CallToolResult | types.InputRequiredResult:
    """Sampling and elicitation: a server request on 2025-11-25, an input-required round on 2026-07-28."""
    if name == "test_sampling":
        prompt = args.get("prompt", "")
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            answer = _responses(params).get("sample_request")
            if answer is None:
                return _need({"sample_request": _sample(prompt)})
            return _text(f"LLM response: {_content(answer).get('text', '')}")
        reply = await ctx.session.create_message(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(text=prompt))], max_tokens=100,
            related_request_id=ctx.request_id)
        text = reply.content.text if isinstance(reply.content, types.TextContent) else "No response"
        return _text(f"LLM response: {text}")
    message, properties, key = {
        "test_elicitation": (args.get("message", ""), {"response": {"type": "string", "description": "User's response"}},
                             "user_response"),
        "test_streaming_elicitation": ("What is your name?", {"name": {"type": "string"}}, "user_name"),
        "test_elicitation_sep1034_defaults": ("Please provide user information", DEFAULTS_SCHEMA, "defaults"),
        "test_elicitation_sep1330_enums": ("Please select values using different enum schema types",
                                           ENUMS_SCHEMA, "enum_options"),
    }[name]
    required = {"test_elicitation": ["response"], "test_streaming_elicitation": ["name"],
                "test_elicitation_sep1330_enums": list(ENUMS_SCHEMA)}.get(name, [])
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answer = _responses(params).get(key)
        if answer is None:
            return _need({key: _elicit(message, properties, required)})
        action, content = answer.get("action", "accept"), answer.get("content") or {}
    else:
        result = await ctx.session.elicit_form(message, {"type": "object", "properties": properties,
                                                         "required": required}, related_request_id=ctx.request_id)
        action, content = result.action, result.content or {}
    return _text(f"User response: action={action}, content={json.dumps(content)}")


def _multi_round(ctx: Any, params: Any, fixture: str) -> types.CallToolResult | types.InputRequiredResult:
    """The SEP-2322 fixtures: ask, then complete once the answers (and the sealed state) come back."""
    answers = _responses(params)
    state = getattr(params, "request_state", None)
    name_request = {"user_name": _elicit("What is your name?", {"name": {"type": "string"}})}
    if fixture == "elicitation":
        answer = _content(answers.get("user_name"))
        if not isinstance(answers.get("user_name", {}), dict) or "name" not in answer:
            if "user_name" in answers:
                raise MCPError(code=INVALID_PARAMS, message="inputResponses.user_name must be an elicitation result")
            return _need(name_request)
        return _text(f"Hello, {answer['name']}!")
    if fixture == "sampling":
        answer = answers.get("capital_question")
        if answer is None:
            return _need({"capital_question": _sample("What is the capital of France?")})
        return _text(f"Sampling result: {_content(answer).get('text', '')}")
    if fixture == "list_roots":
        answer = answers.get("client_roots")
        if answer is None:
            return _need({"client_roots": ROOTS})
        roots = answer.get("roots") or []
        return _text(f"Client roots: {', '.join(str(r.get('uri')) for r in roots) or 'none'}")
    if fixture in ("request_state", "tampered_state"):
        if state is None or "confirm" not in answers:
            return _need({"confirm": _elicit("Please confirm", {"ok": {"type": "boolean"}})}, f"{fixture}:round-1")
        if state != f"{fixture}:round-1":
            raise MCPError(code=INVALID_PARAMS, message="requestState does not belong to this request")
        return _text("state-ok: confirmed")
    if fixture == "multiple_inputs":
        wanted = {**name_request, "greeting": _sample("Generate a greeting", 50), "client_roots": ROOTS}
        if state is None or not set(wanted) <= set(answers):
            return _need(wanted, "multiple_inputs:round-1")
        return _text(f"Hello, {_content(answers['user_name']).get('name', '?')}! All inputs received.")
    if fixture == "multi_round":
        if state == "multi_round:round-2" and "step2" in answers:
            return _text(f"Done: favourite color {_content(answers['step2']).get('color', '?')}")
        if state == "multi_round:round-1" and "step1" in answers:
            return _need({"step2": _elicit("Step 2: What is your favorite color?", {"color": {"type": "string"}})},
                         "multi_round:round-2")
        return _need({"step1": _elicit("Step 1: What is your name?", {"name": {"type": "string"}})},
                     "multi_round:round-1")
    if fixture == "capabilities":
        declared = (ctx.meta or {}).get("io.modelcontextprotocol/clientCapabilities") or {}
        wanted = {}
        if "elicitation" in declared:
            wanted.update(name_request)
        if "sampling" in declared:
            wanted["greeting"] = _sample("Generate a greeting", 50)
        if not wanted or set(wanted) <= set(answers):
            return _text("Nothing more needed for the declared capabilities.")
        return _need(wanted)
    raise MCPError(code=INVALID_PARAMS, message=f"unknown tool test_input_required_result_{fixture}")


@contextlib.contextmanager
def _quiet():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


def conformance_app(settings: ServeSettings | None = None, *, worker: bool = False) -> ASGIApp:
    """The fixture server at ``/mcp`` behind the HTTP guards (resumable SSE streams included);
    ``worker``: as one of ``serve --workers``' processes (see ``coworkenv.server.http_app``)."""
    settings = settings or ServeSettings(rate_per_s=None)
    settings.check()
    manager = StreamableHTTPSessionManager(
        app=conformance_server(), event_store=MemoryEventStore(), retry_interval=100,
        session_idle_timeout=settings.session_idle_timeout, max_request_body_size=settings.max_body_bytes,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    async def load(request: Request) -> JSONResponse:
        return JSONResponse({"open": 0})  # sessions only; the front spreads them in turn

    guard = Guard(Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan),
                  settings)
    return TrustedClient(guard, Starlette(routes=[Route(f"{INTERNAL_PREFIX}load", endpoint=load)])) if worker else guard


async def serve_conformance(settings: ServeSettings, *, sock: socket.socket | None = None,
                            on_ready: Callable[[], None] | None = None, worker: bool = False) -> None:
    """Serve the fixtures until interrupted, on ``sock`` or the settings' address; ``on_ready`` runs
    once connections are accepted."""
    await serve_app(conformance_app(settings, worker=worker), sock or bind_socket(settings.bind, settings.port),
                    on_ready=on_ready, worker=worker)

