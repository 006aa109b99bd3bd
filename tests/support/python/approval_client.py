"""The official Python SDK (pinned in requirements.txt) as a client that can
show forms: it starts `volce-lab mcp-serve` in ssh mode against the e2e
installation, opens the session with `initialize` (2025-11-25, where the
server asks with `elicitation/create`) under MODE legacy, or through the
SDK's `Client` in its default mode (`discover`, 2026-07-28, where the form
comes in an `InputRequiredResult` and the SDK retries with the answer and the
sealed `requestState`) under MODE default; checks identity and calls
service_execute once. Its elicitation callback plays the user: it writes
each form's message to DIR/form-N, then declines (CHOICE decline) or waits
for DIR/go-N, which the test writes, and accepts (CHOICE accept). One JSON
report on stdout for tests/real/mcp_python.rs. Runs as the test's user.

    python approval_client.py BINARY DIR CHOICE PLAN_ID MODE   (environment: the server's VOLCE_LAB_*)
"""

import json
import os
import sys
import time
from importlib.metadata import version

import anyio
from mcp import Client, ClientSession, StdioServerParameters, stdio_client, types

GO_TIMEOUT = 120


async def main(binary, directory, choice, plan_id, mode):
    report = {"sdk": version("mcp"), "forms": [], "accepted_at": []}
    # XDG_STATE_HOME too: the server's audit log and witness belong to this
    # test, never to the machine's /root (a witness left there by an earlier
    # run meets a reinstalled host as a rolled-back trail).
    env = {key: value for key, value in os.environ.items() if key.startswith("VOLCE_LAB_") or key == "XDG_STATE_HOME"}
    env.update({"PATH": "/usr/bin:/bin", "HOME": "/root", "XDG_STATE_HOME": os.path.join(directory, "state")})

    async def elicit(context, params):
        report["forms"].append(params.message)
        n = len(report["forms"])
        with open(os.path.join(directory, f"form-{n}"), "w") as file:
            file.write(params.message)
        if choice == "decline":
            return types.ElicitResult(action="decline")
        go = os.path.join(directory, f"go-{n}")
        waited = time.monotonic()
        while not os.path.exists(go) and time.monotonic() - waited < GO_TIMEOUT:
            await anyio.sleep(0.02)
        report["accepted_at"].append(time.time())
        return types.ElicitResult(action="accept", content={})

    params = StdioServerParameters(command=binary, args=["mcp-serve"], env=env)

    async def run(caller):
        identity = await caller.call_tool("cloud_check", {"check": "identity"})
        report["identity"] = (identity.structured_content or {}).get("status")
        result = await caller.call_tool("service_execute", {"plan_id": plan_id}, read_timeout_seconds=600)
        report["result_at"] = time.time()
        report["result"] = result.structured_content

    async def forge(client):
        # By hand: the InputRequiredResult, then retries with its state changed,
        # then with the state itself (accepted), then with it again.
        identity = await client.call_tool("cloud_check", {"check": "identity"})
        report["identity"] = (identity.structured_content or {}).get("status")
        session = client.session
        args = {"plan_id": plan_id}
        first = await session.call_tool("service_execute", args, allow_input_required=True)
        state = first.request_state
        key = next(iter(first.input_requests))
        accept = {key: types.ElicitResult(action="accept", content={})}
        flipped = state[:-1] + ("1" if state[-1] == "0" else "0")
        codes = {}
        for name, sent in (("tampered", flipped), ("genuine", state), ("replayed", state)):
            answer = await session.call_tool(
                "service_execute", args, input_responses=accept, request_state=sent, allow_input_required=True
            )
            content = getattr(answer, "structured_content", None) or {}
            codes[name] = content.get("code") or type(answer).__name__
        report["codes"] = codes
        report["result_at"] = time.time()

    if choice == "forge":
        async with Client(params, elicitation_callback=elicit) as client:
            report["protocol_version"] = client.protocol_version
            await forge(client)
    elif mode == "legacy":
        async with stdio_client(params) as (read, write), ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.initialize()
            report["protocol_version"] = session.protocol_version
            await run(session)
    else:
        async with Client(params, elicitation_callback=elicit) as client:
            report["protocol_version"] = client.protocol_version
            await run(client)
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:6])
