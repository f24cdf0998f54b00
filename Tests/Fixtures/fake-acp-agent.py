#!/usr/bin/env python3
"""A minimal agent speaking current ACP on stdio (one JSON-RPC message per line), for the
desktop bridge's agent-program provider: it answers initialize and session/new; on a
prompt it asks the client for a file (the desktop refuses), says what the refusal was in
a thought, streams its answer as three agent_message_chunk updates and ends the turn. A
prompt containing "crash" makes it exit mid-turn. Standard library only."""
import json
import sys


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def update(kind, text):
    send({"jsonrpc": "2.0", "method": "session/update",
          "params": {"sessionId": SESSION, "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}}}})


SESSION = "agent-session-1"
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": SESSION}})
    elif method == "session/prompt":
        text = message["params"]["prompt"][0]["text"]
        send({"jsonrpc": "2.0", "id": "ask-1", "method": "fs/read_text_file", "params": {"sessionId": SESSION, "path": "/etc/hostname"}})
        answer = json.loads(sys.stdin.readline())
        update("agent_thought_chunk", "the desktop answered %s" % answer.get("error", {}).get("code"))
        if "crash" in text:
            sys.exit(3)
        for piece in ["The program ", "read: ", text.upper()]:
            update("agent_message_chunk", piece)
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"stopReason": "end_turn"}})
