"""The official Python SDK (pinned in requirements.txt) as the agent's client
carrying an operator's signed approval: it starts `volce-lab mcp-serve` in
ssh mode against the e2e installation (the SDK's `Client`, its default
lifecycle), checks identity, then calls service_execute on PLAN_ID three
times: with the FORGED signed approval (a statement with one parameter
changed, validly signed), with the GOOD one, and with the GOOD one again.
One JSON report on stdout for tests/real/mcp_python.rs. Runs as the test's
user.

    python signed_client.py BINARY PLAN_ID GOOD_FILE FORGED_FILE   (environment: the server's VOLCE_LAB_* and its own XDG_STATE_HOME)
"""

import json
import os
import sys
from importlib.metadata import version

import anyio
from mcp import Client, StdioServerParameters


async def main(binary, plan_id, good_file, forged_file):
    report = {"sdk": version("mcp"), "calls": []}
    # XDG_STATE_HOME too: the server's audit log and witness belong to this
    # test, never to the machine's /root (a witness left there by an earlier
    # run meets a reinstalled host as a rolled-back trail).
    if not os.environ.get("XDG_STATE_HOME", "").startswith("/"):
        sys.exit("signed_client.py: XDG_STATE_HOME must name the test's own state directory")
    env = {key: value for key, value in os.environ.items() if key.startswith("VOLCE_LAB_") or key == "XDG_STATE_HOME"}
    env.update({"PATH": "/usr/bin:/bin", "HOME": "/root"})
    with open(good_file) as file:
        good = file.read()
    with open(forged_file) as file:
        forged = file.read()
    params = StdioServerParameters(command=binary, args=["mcp-serve"], env=env)
    async with Client(params) as client:
        report["protocol_version"] = client.protocol_version
        identity = await client.call_tool("cloud_check", {"check": "identity"})
        report["identity"] = (identity.structured_content or {}).get("status")
        for name, approval in (("forged", forged), ("good", good), ("replayed", good)):
            result = await client.call_tool(
                "service_execute", {"plan_id": plan_id, "signed_approval": approval}, read_timeout_seconds=300
            )
            content = result.structured_content or {}
            report["calls"].append(
                {"name": name, "status": content.get("status"), "code": content.get("code"), "is_error": result.is_error}
            )
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
