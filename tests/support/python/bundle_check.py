"""Checks the workstation's MCP Bundle for tests/real/mcp_bundle.rs and prints
one JSON report on stdout for it to assert. Runs unprivileged; reads the
repository and the bundle, writes only under SCRATCH.

    python bundle_check.py REPO OUT SCRATCH

OUT is what `scripts/mcpb --out OUT` wrote. The JSON Schemas are the
published ones stored in REPO/packaging/mcp/schemas (draft-07, checked with
`jsonschema`, pinned in requirements.txt):

- the server.json template, the server.json beside the bundle and the
  bundle's manifest.json are validated, each error reported;
- two wrong documents are validated too (a manifest whose server type is not
  one mcpb knows, a package without its transport), so a validator that
  accepts anything fails the test;
- the bundle's entries are listed (name, mode, time, size) and unpacked into
  SCRATCH/unpacked with their modes, as a client that installs a bundle does;
  an entry whose name would leave that directory is refused.
"""

import copy
import hashlib
import json
import os
import sys
import zipfile
from importlib.metadata import version

import jsonschema

repo, out, scratch = sys.argv[1:4]


def load(path):
    with open(path, "rb") as f:
        return json.load(f)


def errors(schema_name, document):
    schema = load(os.path.join(repo, "packaging/mcp/schemas", schema_name))
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document))


def unpack(bundle, into):
    entries = []
    with zipfile.ZipFile(bundle) as z:
        for info in z.infolist():
            target = os.path.realpath(os.path.join(into, info.filename))
            if not target.startswith(os.path.realpath(into) + os.sep):
                raise SystemExit(f"bundle entry {info.filename!r} leaves the directory")
            mode = (info.external_attr >> 16) & 0o7777
            entries.append({
                "name": info.filename,
                "mode": oct(mode),
                "date_time": list(info.date_time),
                "size": info.file_size,
                "unix": info.create_system == 3,
            })
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(info) as source, open(target, "wb") as sink:
                sink.write(source.read())
            os.chmod(target, mode)
    return entries


(bundle_name,) = [n for n in os.listdir(out) if n.endswith(".mcpb")]
bundle = os.path.join(out, bundle_name)
with open(bundle, "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()
unpacked = os.path.join(scratch, "unpacked")
os.makedirs(unpacked)
entries = unpack(bundle, unpacked)
manifest = load(os.path.join(unpacked, "manifest.json"))
published = load(os.path.join(out, "server.json"))

wrong_manifest = copy.deepcopy(manifest)
wrong_manifest["server"]["type"] = "shell"
wrong_server = copy.deepcopy(published)
del wrong_server["packages"][0]["transport"]

json.dump({
    "jsonschema": version("jsonschema"),
    "bundle": bundle_name,
    "sha256": digest,
    "sha256_file": open(bundle + ".sha256").read(),
    "entries": entries,
    "manifest": manifest,
    "server_json": published,
    "errors": {
        "template": errors("server.schema.json", load(os.path.join(repo, "packaging/mcp/server.json"))),
        "server_json": errors("server.schema.json", published),
        "manifest": errors("mcpb-manifest-v0.3.schema.json", manifest),
        "wrong_manifest": errors("mcpb-manifest-v0.3.schema.json", wrong_manifest),
        "wrong_server_json": errors("server.schema.json", wrong_server),
    },
}, sys.stdout, indent=1)
