"""Images and documents from tools: an MCP client gets them as image and embedded-resource content
with their text fallbacks; the store keeps their bytes once, by content; the teacher's conversation
references them; the SFT export writes them beside the rows (and, with vision, in the chat format of
vision-language templates). Runs in a process of its own: it registers an app."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.bwrap

SCANS = '''
"""Scans app: receipts as images, contracts as PDF documents."""
import base64, struct, zlib
from ._base import ToolFailure, object_schema

NAME = "scans"
DESCRIPTION = "Scanned receipts and contracts."
SCHEMA = "CREATE TABLE IF NOT EXISTS scans_items (id TEXT PRIMARY KEY, total TEXT);"


def png(width, height, shade):
    raw = b"".join(b"\\x00" + bytes([shade, 255 - shade, 128]) * width for _ in range(height))
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


CONTENT = {"type": "array", "items": {"type": "object"}}
TOOLS = [
    {"name": "receipt", "effect": "read", "description": "A scanned receipt, as an image.",
     "input_schema": object_schema({"id": {"type": "string"}}, ["id"]),
     "output_schema": object_schema({"id": {"type": "string"}, "_content": CONTENT}, ["id", "_content"])},
    {"name": "contract", "effect": "read", "description": "A contract, as a PDF.",
     "input_schema": object_schema({}, []),
     "output_schema": object_schema({"pages": {"type": "integer"}, "_content": CONTENT}, ["pages", "_content"])},
    {"name": "note_total", "effect": "write", "description": "Note a receipt's total.",
     "input_schema": object_schema({"id": {"type": "string"}, "total": {"type": "string"}}, ["id", "total"]),
     "output_schema": object_schema({"ok": {"type": "boolean"}}, ["ok"])},
    {"name": "shred", "effect": "destructive", "description": "Shred every scan.",
     "input_schema": object_schema({}, []), "output_schema": object_schema({"ok": {"type": "boolean"}}, ["ok"])},
]


def seed(conn, rng, world):
    conn.execute("INSERT INTO scans_items VALUES ('r1', NULL)")


def handle(conn, tool, args):
    if tool == "receipt":
        return {"id": args["id"], "_content": [{"type": "image", "mime_type": "image/png",
                                                "data": base64.b64encode(png(4, 3, 40)).decode()}]}
    if tool == "contract":
        return {"pages": 1, "_content": [{"type": "resource", "uri": "scans://contract.pdf",
                                          "mime_type": "application/pdf", "text": "A one-page contract.",
                                          "blob": base64.b64encode(b"%PDF-1.4 fake").decode()}]}
    if tool == "note_total":
        conn.execute("UPDATE scans_items SET total = ? WHERE id = ?", (args["total"], args["id"]))
        return {"ok": True}
    if tool == "shred":
        conn.execute("DELETE FROM scans_items")
        return {"ok": True}
    raise ToolFailure(f"unknown tool {tool!r}")
'''


def test_images_and_documents_reach_the_client_the_store_and_the_export(tmp_path):
    (tmp_path / "scans.py").write_text(SCANS)
    code = textwrap.dedent(f'''
        import anyio, base64, json, hashlib
        import mcp_types as types
        from mcp import Client
        from coworkenv.episodes import EpisodeHost, EpisodeSettings
        from coworkenv.loop import LocalEpisodes, TeacherSettings, collect
        from coworkenv.server import running_http_server
        from coworkenv.store import Store
        from coworkenv.synth import calibrate_task
        from coworkenv.trainer import export_sft
        from coworkenv.workspace import Task, build_workspace, register_app

        register_app({str(tmp_path / "scans.py")!r})
        workspace = build_workspace(5, ("mail", "scans"))
        task = Task.model_validate({{
            "id": "receipt-total", "workspace_id": workspace.id, "capability": "single_write", "difficulty": 1,
            "instruction": "Note the total of receipt r1.",
            "checks": [{{"id": "noted", "kind": "sql", "description": "a total is noted",
                        "query": "select count(*) from scans_items where total = '12.50'", "expect": 1}}],
            "reference": [{{"tool": "scans_receipt", "arguments": {{"id": "r1"}}}},
                          {{"tool": "scans_contract", "arguments": {{}}}},
                          {{"tool": "scans_note_total", "arguments": {{"id": "r1", "total": "12.50"}}}}],
            "reference_answer": "Noted 12.50.", "forbidden_tools": ["scans_shred"],
            "forbidden_probe": {{"tool": "scans_shred"}}}})
        store = Store("s.db")
        store.put_workspace(workspace)
        store.put_task(task)
        out = {{}}

        async def main():
            host = EpisodeHost(store, EpisodeSettings(cache_dir="cache"))
            try:
                assert (await calibrate_task(host, task)).admitted
                async with running_http_server(host) as base:
                    async with Client(f"{{base}}/t/receipt-total/e/k/mcp") as client:
                        receipt = await client.call_tool("scans_receipt", {{"id": "r1"}})
                        contract = await client.call_tool("scans_contract", {{}})
                        await client.call_tool("submit_answer", {{"answer": "looked"}})
                    out["receipt"] = [type(b).__name__ for b in receipt.content]
                    out["contract"] = [type(b).__name__ for b in contract.content]
                    out["fallback"] = contract.content[-1].text
                    out["structured"] = receipt.structured_content
                    image = next(b for b in receipt.content if isinstance(b, types.ImageContent))
                    out["sha"] = hashlib.sha256(base64.b64decode(image.data)).hexdigest()
                    summary = await collect(store, LocalEpisodes(host, base), TeacherSettings())
                    out["collected"] = summary.succeeded
            finally:
                await host.close()
            (teacher,) = store.episodes(source="teacher")
            calls = store.tool_calls(teacher.id)
            out["recorded"] = json.loads(calls[0].result)["_content"]
            out["blob"] = store.blob(out["sha"])[0]
            tool_messages = [m for m in store.messages(teacher.id) if m.role == "tool"]
            out["message_attachments"] = [[a.kind for a in m.attachments] for m in tool_messages]
            out["rows"] = export_sft(store, "export/sft.jsonl")
            export_sft(store, "export/vision.jsonl", vision=True)

        anyio.run(main)
        print(json.dumps(out))
    ''')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["receipt"] == ["TextContent", "ImageContent"]
    assert out["contract"] == ["TextContent", "EmbeddedResource", "TextContent"]
    assert out["fallback"] == "A one-page contract."
    assert out["structured"] == {"id": "r1"}  # the JSON, without the bytes
    assert out["collected"] == 1
    assert out["recorded"][0]["sha256"] == out["sha"] and out["recorded"][0]["kind"] == "image"
    assert out["blob"] == "image/png"
    assert out["message_attachments"] == [["image"], ["document"], []]
    row = json.loads((tmp_path / "export" / "sft.jsonl").read_text())
    assert row["images"] == [str(Path("export") / "sft.images" / f"{out['sha']}.png")]
    assert (tmp_path / row["images"][0]).read_bytes().startswith(b"\x89PNG")
    assert all(isinstance(m["content"], str) for m in row["messages"])  # text models read text
    vision = json.loads((tmp_path / "export" / "vision.jsonl").read_text())
    (with_image,) = [m for m in vision["messages"] if isinstance(m["content"], list)]
    assert with_image["role"] == "tool" and with_image["content"][0] == {"type": "image"}
