#!/usr/bin/env python3
"""An ACP client built from the protocol's published schema (the official Python SDK,
agent-client-protocol, whose models are generated from schema.json), not fleetlab's
client core: over the SDK's own WebSocket transport it runs initialize -> session/new ->
session/prompt with streamed session/update notifications -> a second prompt cancelled
with session/cancel, validating every message with the SDK's models. Prints one JSON
object with what it saw; exits non-zero on any protocol error.

    .venv-acp/bin/python Tests/Fixtures/acp_sdk_client.py ws://127.0.0.1:9099
"""
import asyncio
import json
import sys

import acp
from acp import connect_to_agent, text_block
from acp.schema import ClientCapabilities, Implementation
from acp.ws import create_websocket_stream


class Recorder:
    """The client side: records the updates; asks for nothing else."""

    def __init__(self):
        self.updates = []

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append((session_id, update))

    async def request_permission(self, *args, **kwargs):
        raise acp.RequestError.method_not_found("session/request_permission")

    async def read_text_file(self, *args, **kwargs):
        raise acp.RequestError.method_not_found("fs/read_text_file")

    async def write_text_file(self, *args, **kwargs):
        raise acp.RequestError.method_not_found("fs/write_text_file")


async def main(url):
    recorder = Recorder()
    transport = await create_websocket_stream(url)
    conn = connect_to_agent(recorder, transport)
    init = await asyncio.wait_for(conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities(),
                                                  client_info=Implementation(name="acp-sdk-test", version="1.0")), 10)
    workspace = (init.field_meta or {}).get("working_directory")
    session = await asyncio.wait_for(conn.new_session(cwd=workspace, mcp_servers=[]), 10)
    first = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("explain the layout of this repository")]), 20)
    streamed = len(recorder.updates)

    # A second turn, cancelled once its plan has arrived.
    second = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block("and now rewrite it")]))
    for _ in range(200):
        if any(type(update).__name__ == "AgentPlanUpdate" for _, update in recorder.updates[streamed:]):
            break
        await asyncio.sleep(0.02)
    await conn.cancel(session_id=session.session_id)
    cancelled = await asyncio.wait_for(second, 20)
    await conn.close()

    def text(update):
        content = getattr(update, "content", None)
        return getattr(content, "text", None) if content is not None and not isinstance(content, list) else None

    print(json.dumps({
        "protocolVersion": init.protocol_version,
        "agent": init.agent_info.name if init.agent_info else None,
        "workspace": workspace,
        "sessionId": session.session_id,
        "modes": [mode.id for mode in session.modes.available_modes] if session.modes else [],
        "firstStop": first.stop_reason,
        "secondStop": cancelled.stop_reason,
        "kinds": [type(update).__name__ for _, update in recorder.updates[:streamed]],
        "answer": "".join(text(update) or "" for _, update in recorder.updates[:streamed] if type(update).__name__ == "AgentMessageChunk"),
        "sessions": sorted({sid for sid, _ in recorder.updates}),
    }))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
