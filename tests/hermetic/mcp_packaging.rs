//! The workstation's packaging for MCP clients (issue 45): the registry's
//! server.json and the bundle's manifest.json in packaging/mcp agree with
//! Cargo.toml's version and with the tools the server offers, and the
//! published schemas they are validated against are stored beside them.
//! Reads files only. The schema validation and the bundle itself are the
//! real-parts suite tests/real/mcp_bundle.rs (it needs Python's jsonschema).

use std::path::Path;

use serde_json::Value;
use strum::VariantArray as _;
use volce_lab::mcp::tools::ToolName;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn json(path: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    serde_json::from_slice(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

#[test]
fn server_json_names_cargo_tomls_version_and_a_bundle_of_it() {
    let server = json("packaging/mcp/server.json");
    assert_eq!(server["version"], VERSION);
    let packages = server["packages"].as_array().unwrap();
    assert_eq!(packages.len(), 1, "one package: the .mcpb bundle");
    let package = &packages[0];
    assert_eq!(package["registryType"], "mcpb");
    assert_eq!(package["version"], VERSION);
    assert_eq!(package["transport"]["type"], "stdio");
    let identifier = package["identifier"].as_str().unwrap();
    assert!(
        identifier.ends_with(&format!("/v{VERSION}/volce-lab-{VERSION}-linux-x86_64.mcpb")),
        "the release's bundle URL names the version: {identifier}"
    );
    // The template never carries a bundle's hash: scripts/mcpb writes the
    // published copy with the real one, so a stale hash cannot be committed.
    assert_eq!(package["fileSha256"], "0".repeat(64));
}

#[test]
fn the_bundle_manifest_names_cargo_tomls_version_and_exactly_the_servers_tools() {
    let manifest = json("packaging/mcp/manifest.json");
    assert_eq!(manifest["version"], VERSION);
    let tools: Vec<&str> =
        manifest["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    let offered: Vec<&str> = ToolName::VARIANTS.iter().map(|t| t.as_str()).collect();
    assert_eq!(tools, offered);
    assert_eq!(manifest["tools_generated"], false);
    let server = &manifest["server"];
    assert_eq!(server["type"], "binary");
    assert_eq!(
        server["mcp_config"]["command"],
        format!("${{__dirname}}/{}", server["entry_point"].as_str().unwrap())
    );
    assert_eq!(server["mcp_config"]["args"], serde_json::json!(["mcp-serve"]));
}

#[test]
fn the_published_schemas_are_stored_with_their_ids() {
    let registry = json("packaging/mcp/schemas/server.schema.json");
    assert_eq!(
        registry["$id"],
        "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
    );
    assert_eq!(json("packaging/mcp/server.json")["$schema"], registry["$id"]);
    let bundle = json("packaging/mcp/schemas/mcpb-manifest-v0.3.schema.json");
    assert_eq!(bundle["properties"]["manifest_version"]["const"], "0.3");
    assert_eq!(json("packaging/mcp/manifest.json")["manifest_version"], "0.3");
}
