"""The official Python SDK (pinned in requirements.txt) as a client that can
show forms: it starts `volce-lab mcp-serve` in ssh mode against the e2e
installation, opens the session with `initialize` (2025-11-25, where the
server asks with `elicitation/create`), checks identity and calls
service_execute once. Its elicitation callback plays the user: it writes
each form's message to DIR/form-N, then declines (CHOICE decline) or waits
for DIR/go-N, which the test writes, and accepts (CHOICE accept). One JSON
report on stdout for tests/real/mcp_python.rs. Runs as the test's user.

    python approval_client.py BINARY DIR CHOICE PLAN_ID   (environment: the server's VOLCE_LAB_*)
"""

import json
import os
import sys
import time
from importlib.metadata import version

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, types

GO_TIMEOUT = 120


async def main(binary, directory, choice, plan_id):
    report = {"sdk": version("mcp"), "forms": [], "accepted_at": []}
    env = {key: value for key, value in os.environ.items() if key.startswith("VOLCE_LAB_")}
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
    async with stdio_client(params) as (read, write), ClientSession(read, write, elicitation_callback=elicit) as session:
        await session.initialize()
        report["protocol_version"] = session.protocol_version
        identity = await session.call_tool("cloud_check", {"check": "identity"})
        report["identity"] = (identity.structured_content or {}).get("status")
        result = await session.call_tool("service_execute", {"plan_id": plan_id}, read_timeout_seconds=600)
        report["result_at"] = time.time()
        report["result"] = result.structured_content
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
