"""A foreign MCP client for volce-lab: the official Python SDK (`mcp`, pinned
in requirements.txt) drives `volce-lab mcp-serve` over stdio and prints one
JSON report on stdout for tests/real/mcp_python.rs to assert. Runs
unprivileged; talks to nothing but the child it starts and a listener of its
own on 127.0.0.1.

    python mcp_client.py BINARY

For each lifecycle the SDK offers (`initialize`, which negotiates 2025-11-25,
and `discover`, the stateless 2026-07-28): in demo mode, list the tools,
call each one with a ping before and after every call, and call an unknown
tool; then, in ssh mode against a "server" that accepts the TCP connection
and never says a word (a hung sshd), start cloud_check identity, cancel it
after a second, ping, and see the ssh connection closed by the kill.
Failures are recorded in the report, not raised, so the test sees them all.
"""

import json
import os
import socket
import sys
import tempfile
import threading
import time
from importlib.metadata import version

import anyio
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

PLAN_ID = "0123456789abcdef0123456789abcdef"
# Demo arguments for each tool: all valid, so each answers with its demo result.
CALLS = {
    "cloud_check": {"check": "identity"},
    "service_inventory": {},
    "service_plan": {"action": "stop", "parameters": {"app": "web"}},
    "service_execute": {"plan_id": PLAN_ID},
    "service_logs": {"app": "web", "container": "app"},
}
CANCEL_AFTER = 1.0


class SilentServer:
    """A TCP listener on 127.0.0.1 that accepts and never answers; it notes
    when each connection is closed by the other side."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.closed_at = []
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            conn, _ = self.sock.accept()
            self.accepted += 1
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn):
        while conn.recv(4096):
            pass  # ssh's own banner; we never send ours
        self.closed_at.append(time.monotonic())


async def ping(session, report, where):
    try:
        result = await session.send_ping()
        report["pings"].append({"after": where, "ok": True, "result": result.model_dump(exclude_none=True)})
    except MCPError as error:
        report["pings"].append({"after": where, "ok": False, "code": error.error.code, "message": error.error.message})


async def open_session(session, lifecycle):
    if lifecycle == "initialize":
        await session.initialize()
    else:
        await session.discover()
    return session.protocol_version


async def demo(binary, lifecycle, state):
    report = {"pings": [], "calls": []}
    params = StdioServerParameters(command=binary, args=["mcp-serve"], env={"XDG_STATE_HOME": state})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        report["protocol_version"] = await open_session(session, lifecycle)
        await ping(session, report, "open")
        tools = await session.list_tools()
        report["tools"] = [tool.name for tool in tools.tools]
        await ping(session, report, "tools/list")
        for name in report["tools"]:
            result = await session.call_tool(name, CALLS[name])
            content = result.structured_content or {}
            report["calls"].append(
                {"tool": name, "status": content.get("status"), "is_error": result.is_error, "is_demo": content.get("is_demo")}
            )
            await ping(session, report, name)
        try:
            await session.call_tool("shell_execute", {"command": "id"})
            report["unknown_tool"] = {"error": None}
        except MCPError as error:
            report["unknown_tool"] = {"error": error.error.code}
        await ping(session, report, "unknown tool")
    return report


async def cancel(binary, lifecycle, state, runtime):
    report = {"pings": []}
    silent = SilentServer()
    config = os.path.join(runtime, "ssh_config")
    with open(config, "w") as file:
        file.write(f"Host hung-server\n    HostName 127.0.0.1\n    Port {silent.port}\n")
    env = {
        "XDG_STATE_HOME": state,
        "XDG_RUNTIME_DIR": runtime,
        "VOLCE_LAB_MODE": "ssh",
        "VOLCE_LAB_SSH_ALIAS": "hung-server",
        "VOLCE_LAB_SSH_CONFIG": config,
        "VOLCE_LAB_EXPECTED_HOST": "hung-server",
        "VOLCE_LAB_EXPECTED_USER": "deploy",
        # The check's own limit (ssh's ConnectTimeout is at most 8 s): far past the cancel.
        "VOLCE_LAB_TIMEOUT": "30",
    }
    params = StdioServerParameters(command=binary, args=["mcp-serve"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        report["protocol_version"] = await open_session(session, lifecycle)
        await ping(session, report, "open")
        started = time.monotonic()
        with anyio.move_on_after(CANCEL_AFTER) as scope:
            await session.call_tool("cloud_check", {"check": "identity"})
        cancelled = time.monotonic()
        report["call_cancelled"] = scope.cancelled_caught
        report["ssh_connected"] = silent.accepted
        await ping(session, report, "cancel")
        # The cancel kills ssh's process group: its connection closes long
        # before ssh's own 8 s ConnectTimeout would have ended it.
        while not silent.closed_at and time.monotonic() - cancelled < 6:
            await anyio.sleep(0.05)
        report["ssh_closed_after_cancel_s"] = round(silent.closed_at[0] - cancelled, 3) if silent.closed_at else None
        report["cancelled_after_s"] = round(cancelled - started, 3)
        # The server goes on: the gate is still closed, nothing runs.
        result = await session.call_tool("cloud_check", {"check": "disk"})
        report["after_cancel_status"] = (result.structured_content or {}).get("status")
        await ping(session, report, "call after cancel")
    return report


def audit(state):
    path = os.path.join(state, "volce-lab", "audit.jsonl")
    with open(path) as file:
        return [json.loads(line) for line in file]


async def main(binary):
    report = {"sdk": version("mcp")}
    for lifecycle in ("initialize", "discover"):
        with tempfile.TemporaryDirectory() as state:
            report[f"demo_{lifecycle}"] = await demo(binary, lifecycle, state)
        with tempfile.TemporaryDirectory() as state, tempfile.TemporaryDirectory() as runtime:
            cancelled = await cancel(binary, lifecycle, state, runtime)
            cancelled["audit"] = [{k: line.get(k) for k in ("tool", "check", "status")} for line in audit(state)]
            report[f"cancel_{lifecycle}"] = cancelled
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
