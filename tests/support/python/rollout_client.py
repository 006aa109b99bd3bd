"""The official Python SDK (pinned in requirements.txt) as the agent's client
of a rollout over several servers (issue 43): it starts `volce-lab mcp-serve`
in ssh mode with a targets file (the SDK's `Client`, its default lifecycle),
checks identity on every target with one fan-out, then makes the calls
STEPS_FILE lists, in order, in that one session. A step is
{"tool": NAME, "arguments": {...}} and may add "cancel_after": TEXT, which
cancels the call (the SDK sends notifications/cancelled) as soon as a
progress notification whose message contains TEXT arrives; {"sleep": S}
waits; {"wait_for": PATH} makes PATH.waiting and waits until PATH exists,
so that the test acts on the servers in the middle of the session. One JSON report
on stdout for tests/real/fleet_rollout.rs: each call's structuredContent,
isError and progress messages. Runs as the test's user.

    python rollout_client.py BINARY STEPS_FILE   (environment: the server's VOLCE_LAB_* and its own XDG_STATE_HOME)
"""

import json
import os
import sys
from importlib.metadata import version

import anyio
from mcp import Client, StdioServerParameters


async def call(client, step):
    progress = []
    cancel = anyio.Event()

    async def on_progress(value, total, message):
        progress.append(message)
        if step.get("cancel_after") and message and step["cancel_after"] in message:
            cancel.set()

    outcome = {"tool": step["tool"], "progress": progress, "cancelled": False}
    async with anyio.create_task_group() as group:

        async def run():
            result = await client.call_tool(
                step["tool"], step["arguments"], read_timeout_seconds=600, progress_callback=on_progress
            )
            outcome["structured"] = result.structured_content
            outcome["is_error"] = result.is_error
            group.cancel_scope.cancel()

        async def watch():
            await cancel.wait()
            outcome["cancelled"] = True
            group.cancel_scope.cancel()

        group.start_soon(run)
        group.start_soon(watch)
    return outcome


async def main(binary, steps_file):
    if not os.environ.get("XDG_STATE_HOME", "").startswith("/"):
        sys.exit("rollout_client.py: XDG_STATE_HOME must name the test's own state directory")
    env = {key: value for key, value in os.environ.items() if key.startswith("VOLCE_LAB_") or key == "XDG_STATE_HOME"}
    env.update({"PATH": "/usr/bin:/bin", "HOME": "/root"})
    with open(steps_file) as file:
        steps = json.load(file)
    report = {"sdk": version("mcp"), "calls": []}
    params = StdioServerParameters(command=binary, args=["mcp-serve"], env=env)
    async with Client(params) as client:
        identity = await client.call_tool("cloud_check", {"check": "identity", "targets": ["@web"]})
        report["identity"] = (identity.structured_content or {}).get("summary")
        for step in steps:
            if "wait_for" in step:
                # The test acts on the servers now (cuts one off, say).
                open(step["wait_for"] + ".waiting", "w").close()
                while not os.path.exists(step["wait_for"]):
                    await anyio.sleep(0.05)
            elif "sleep" in step:
                await anyio.sleep(step["sleep"])
            else:
                report["calls"].append(await call(client, step))
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
