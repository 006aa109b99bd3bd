//! The workstation half in one step (issue 45): the MCP Bundle that
//! `scripts/mcpb` builds and the server.json the MCP registry publishes for
//! it, checked against the published JSON Schemas stored in
//! packaging/mcp/schemas, then installed as a client installs a bundle
//! (unpacked into a scratch directory, modes kept) and run from there:
//! `inspect` gives the demo report, and `mcp-serve`, started as the
//! manifest's `mcp_config` says, answers `initialize` and `tools/list` with
//! exactly the tools the manifest lists. Runs as whoever runs it; no network.
//!
//! The bundle wraps the debug binary this test run built
//! (`CARGO_BIN_EXE_volce-lab`, through `scripts/mcpb --binary`), not a
//! release build: scripts/test builds no release binary, a release build
//! would add minutes on CI's 2 cores, and the bundle's layout, manifest and
//! zip are the same whichever binary they wrap. `scripts/mcpb` without
//! `--binary` is the release path; that bundle is never this one.
//!
//! The schemas are validated with `jsonschema` from the venv scripts/test
//! makes (tests/support/python/requirements.txt), named by
//! `VOLCE_LAB_TEST_PYTHON`; without it this fails.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use rmcp::ServiceExt as _;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");
const TOOLS: [&str; 5] =
    ["cloud_check", "service_inventory", "service_plan", "service_execute", "service_logs"];
/// 2026-01-01T00:00:01Z: an odd second, which a zip time cannot hold (it
/// counts in 2 s), so the entries say 00:00:00.
const EPOCH: &str = "1767225601";
const ENTRY_TIME: [u64; 6] = [2026, 1, 1, 0, 0, 0];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> OsString {
    let python = std::env::var_os("VOLCE_LAB_TEST_PYTHON").expect(
        "VOLCE_LAB_TEST_PYTHON must name the python of a venv with tests/support/python/requirements.txt \
         installed (scripts/test sets it up)",
    );
    assert!(Path::new(&python).is_file(), "VOLCE_LAB_TEST_PYTHON={python:?} is not a file");
    python
}

/// `scripts/mcpb --binary BIN --out OUT` in the time zone `tz`: the
/// bundle's path, the script's last line.
fn build(out: &Path, tz: &str) -> PathBuf {
    let output = Command::new(repo().join("scripts/mcpb"))
        .args(["--binary", BIN, "--out"])
        .arg(out)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()))
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .env("TZ", tz)
        .output()
        .expect("run scripts/mcpb");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "scripts/mcpb failed ({}):\n{stderr}", output.status);
    let stdout = String::from_utf8(output.stdout).unwrap();
    PathBuf::from(stdout.lines().last().expect("scripts/mcpb prints the bundle's path"))
}

/// tests/support/python/bundle_check.py's report on what `scripts/mcpb`
/// wrote to `out`; it unpacks the bundle into `scratch/unpacked`.
fn check(out: &Path, scratch: &Path) -> Value {
    let output = Command::new(python())
        .arg(repo().join("tests/support/python/bundle_check.py"))
        .args([repo(), out, scratch])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("run bundle_check.py");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bundle_check.py failed ({}):\n{stderr}", output.status);
    serde_json::from_slice(&output.stdout).expect("the report is JSON")
}

fn json_file(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The published schemas accept the template, the published server.json and
/// the bundle's manifest, and refuse the two wrong documents.
fn assert_schemas(report: &Value) {
    let errors = &report["errors"];
    assert_eq!(report["jsonschema"], "4.26.0", "the pinned jsonschema");
    for valid in ["template", "server_json", "manifest"] {
        assert_eq!(errors[valid], json!([]), "{valid} against its published schema");
    }
    assert_eq!(
        errors["wrong_manifest"],
        json!(["server/type: 'shell' is not one of ['python', 'node', 'binary']"])
    );
    assert_eq!(errors["wrong_server_json"], json!(["packages/0: 'transport' is a required property"]));
}

/// The zip holds exactly the manifest and the binary, sorted, with fixed
/// modes and the epoch's time; the manifest is the repository's, the
/// server.json beside it the template with the bundle's sha256.
fn assert_contents(report: &Value, bundle: &Path) {
    let entries = report["entries"].as_array().unwrap();
    let names: Vec<&str> = entries.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["manifest.json", "server/volce-lab"]);
    for (entry, mode) in entries.iter().zip(["0o644", "0o755"]) {
        assert_eq!(entry["mode"], mode, "{entry}");
        assert_eq!(entry["date_time"], json!(ENTRY_TIME), "{entry}");
        assert_eq!(entry["unix"], true, "{entry}");
    }
    let manifest = &report["manifest"];
    assert_eq!(*manifest, json_file(&repo().join("packaging/mcp/manifest.json")));
    assert_eq!(manifest["server"]["type"], "binary");
    assert_eq!(manifest["server"]["entry_point"], "server/volce-lab");
    assert_eq!(manifest["server"]["mcp_config"]["args"], json!(["mcp-serve"]));
    assert_eq!(manifest["compatibility"]["platforms"], json!(["linux"]));
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));

    let sha256 = report["sha256"].as_str().unwrap();
    let name = bundle.file_name().unwrap().to_str().unwrap();
    assert_eq!(report["bundle"], name);
    assert_eq!(report["sha256_file"], format!("{sha256}  {name}\n"), "the .sha256 beside it");
    let mut published = report["server_json"].clone();
    assert_eq!(published["packages"][0]["fileSha256"], sha256);
    assert!(published["packages"][0]["identifier"].as_str().unwrap().ends_with(&format!("/{name}")));
    let mut template = json_file(&repo().join("packaging/mcp/server.json"));
    published["packages"][0]["fileSha256"] = Value::Null;
    template["packages"][0]["fileSha256"] = Value::Null;
    assert_eq!(published, template, "server.json differs from the template only by fileSha256");
}

/// The unpacked binary is the one wrapped, and `inspect` from it gives the
/// demo report with no server and no configuration.
fn assert_inspect(unpacked: &Path, home: &Path) {
    let binary = unpacked.join("server/volce-lab");
    assert!(
        std::fs::read(&binary).unwrap() == std::fs::read(BIN).unwrap(),
        "the bundle holds the binary wrapped"
    );
    let output = Command::new(&binary)
        .arg("inspect")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("XDG_STATE_HOME", home)
        .output()
        .expect("run inspect from the bundle");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "inspect failed ({}):\n{stdout}", output.status);
    assert!(stdout.starts_with("volce-lab inspect: DEMO"), "{stdout}");
    assert!(stdout.contains("3 of 3 checks ok"), "{stdout}");
}

/// `mcp-serve` started as the manifest's mcp_config says (`${__dirname}`
/// being the directory it was unpacked into) answers initialize and
/// tools/list with exactly the manifest's tools.
async fn assert_serves(manifest: &Value, unpacked: &Path, home: &Path) {
    let config = &manifest["server"]["mcp_config"];
    let dirname = unpacked.to_str().unwrap();
    let program = config["command"].as_str().unwrap().replace("${__dirname}", dirname);
    let mut command = tokio::process::Command::new(program);
    for arg in config["args"].as_array().unwrap() {
        command.arg(arg.as_str().unwrap().replace("${__dirname}", dirname));
    }
    command.env_clear().env("PATH", "/usr/bin:/bin").env("HOME", home).env("XDG_STATE_HOME", home);
    for (name, value) in config["env"].as_object().unwrap() {
        command.env(name, value.as_str().unwrap());
    }
    command.stderr(std::process::Stdio::null());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.expect("initialize");
    let info = client.peer_info().expect("server info");
    let server = info.server_info.as_ref().expect("server info");
    assert_eq!((server.name.as_str(), server.version.as_str()), ("volce-lab", env!("CARGO_PKG_VERSION")));
    let listed: Vec<String> =
        client.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    let declared: Vec<&str> =
        manifest["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(declared, TOOLS, "the manifest lists the five tools");
    assert_eq!(listed, declared, "tools/list answers exactly the manifest's tools");
    client.cancel().await.unwrap();
}

#[tokio::test]
#[ignore = "real parts: run by scripts/test (needs the pinned jsonschema in a venv)"]
async fn the_bundle_validates_installs_and_serves_the_manifests_tools() {
    let started = Instant::now();
    let scratch = tempfile::tempdir().unwrap();
    let (first, second) = (scratch.path().join("first"), scratch.path().join("second"));
    let bundle = build(&first, "UTC");
    let built = started.elapsed();
    // Another time zone and another directory give the same bytes.
    let again = build(&second, "Pacific/Kiritimati");
    assert!(std::fs::read(&bundle).unwrap() == std::fs::read(&again).unwrap(), "two builds differ");
    assert_eq!(
        std::fs::read(first.join("server.json")).unwrap(),
        std::fs::read(second.join("server.json")).unwrap()
    );

    let report = check(&first, scratch.path());
    assert_schemas(&report);
    assert_contents(&report, &bundle);
    let unpacked = scratch.path().join("unpacked");
    let home = scratch.path().join("home");
    std::fs::create_dir(&home).unwrap();
    assert_inspect(&unpacked, &home);
    assert_serves(&report["manifest"], &unpacked, &home).await;
    eprintln!(
        "bundle of the debug binary: {} bytes, built in {:.1} s; the whole test {:.1} s",
        std::fs::metadata(&bundle).unwrap().len(),
        built.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
