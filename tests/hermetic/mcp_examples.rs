//! The client configuration examples in `examples/` are parsed and checked:
//! the right shape for each client, the fixed `mcp-serve` argument, an
//! environment that volce-lab's own configuration accepts, and (for the demo
//! ones) a real start of the binary with exactly that argv and environment.
//! Runs unprivileged; no network.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use rmcp::ServiceExt as _;
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value};
use volce_lab::config::{Config, Mode};

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");
const COMMAND: &str = "/usr/bin/volce-lab";

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// One configured server: the command, its args, its environment.
#[derive(Debug)]
struct Entry {
    command: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

fn config_of(env: &[(String, String)]) -> Config {
    for (key, _) in env {
        assert!(key.starts_with("VOLCE_LAB_"), "unexpected variable {key}");
    }
    Config::from_lookup(|name| env.iter().find(|(k, _)| k == name).map(|(_, v)| OsString::from(v)))
        .unwrap_or_else(|error| panic!("the example's environment is refused: {error}"))
}

fn entry(file: &str, key: &str) -> (Entry, Map<String, Value>) {
    let text = std::fs::read_to_string(examples().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let document: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file} is not JSON: {e}"));
    let servers = document[key].as_object().unwrap_or_else(|| panic!("{file} needs a `{key}` object"));
    assert_eq!(servers.len(), 1, "{file}");
    let server =
        servers["volce-lab"].as_object().unwrap_or_else(|| panic!("{file}: no volce-lab entry")).clone();
    let strings = |value: &Value| -> Vec<String> {
        value.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
    };
    let env =
        server["env"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()));
    let entry = Entry {
        command: server["command"].as_str().unwrap().to_owned(),
        args: strings(&server["args"]),
        env: env.collect(),
    };
    assert_eq!(entry.command, COMMAND, "{file}: an absolute path, the same in every example");
    assert_eq!(entry.args, ["mcp-serve"], "{file}");
    (entry, server)
}

/// Starts the real binary exactly as the client would (args and env from
/// the example, a clean environment otherwise) and lists its tools.
async fn starts(entry: &Entry) {
    let state = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(BIN);
    command.args(&entry.args).env_clear().env("XDG_STATE_HOME", state.path()).stderr(Stdio::null());
    for (key, value) in &entry.env {
        command.env(key, value);
    }
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.expect("initialize");
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 5);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn claude_code_project_file_is_a_stdio_server() {
    let (entry, server) = entry("claude-code.mcp.json", "mcpServers");
    assert_eq!(server["type"], "stdio");
    assert_eq!(config_of(&entry.env).mode, Mode::Demo);
    starts(&entry).await;
}

#[tokio::test]
async fn claude_desktop_files_use_mcp_servers() {
    let (entry, _) = entry("claude-desktop.json", "mcpServers");
    assert_eq!(config_of(&entry.env).mode, Mode::Demo);
    starts(&entry).await;

    let (ssh, _) = entry_ssh();
    let config = config_of(&ssh.env);
    assert_eq!(config.mode, Mode::Ssh);
    assert!(!config.management, "the example leaves management off");
}

fn entry_ssh() -> (Entry, Map<String, Value>) {
    entry("claude-desktop.ssh.json", "mcpServers")
}

#[tokio::test]
async fn cursor_file_uses_mcp_servers() {
    let (entry, _) = entry("cursor.mcp.json", "mcpServers");
    assert_eq!(config_of(&entry.env).mode, Mode::Demo);
    starts(&entry).await;
}

#[tokio::test]
async fn vscode_file_uses_servers_with_type_stdio() {
    let (entry, server) = entry("vscode.mcp.json", "servers");
    assert_eq!(server["type"], "stdio");
    assert_eq!(config_of(&entry.env).mode, Mode::Demo);
    starts(&entry).await;
}

/// `claude mcp add [options] <name> -- <command> [args...]`
fn parse_claude_mcp_add(line: &str) -> Entry {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&words[..3], ["claude", "mcp", "add"], "{line}");
    let mut env = Vec::new();
    let mut name = None;
    let mut rest = words[3..].iter();
    while let Some(word) = rest.next() {
        match *word {
            "--transport" => assert_eq!(rest.next(), Some(&"stdio")),
            "--scope" => assert!(matches!(rest.next(), Some(&("local" | "project" | "user")))),
            "--env" | "-e" => {
                let (key, value) = rest.next().unwrap().split_once('=').expect("KEY=value");
                env.push((key.to_owned(), value.to_owned()));
            }
            "--" => break,
            other => {
                assert!(name.is_none() && !other.starts_with('-'), "unexpected word {other} in {line}");
                name = Some(other);
            }
        }
    }
    assert_eq!(name, Some("volce-lab"), "{line}");
    let mut tail = rest.map(|w| w.to_string());
    let command = tail.next().expect("a command after --");
    Entry { command, args: tail.collect(), env }
}

#[tokio::test]
async fn readme_claude_mcp_add_lines_parse_and_start() {
    let readme = std::fs::read_to_string(examples().join("README.md")).unwrap();
    let lines: Vec<&str> = readme.lines().filter(|l| l.starts_with("claude mcp add")).collect();
    assert_eq!(lines.len(), 2, "a demo line and an ssh line");
    for line in lines {
        let entry = parse_claude_mcp_add(line);
        assert_eq!(entry.command, COMMAND);
        assert_eq!(entry.args, ["mcp-serve"]);
        let config = config_of(&entry.env);
        if config.mode == Mode::Demo {
            starts(&entry).await;
        }
    }
}

#[test]
fn readme_ssh_env_block_matches_the_ssh_example() {
    let readme = std::fs::read_to_string(examples().join("README.md")).unwrap();
    let start = readme.find("```json\n").expect("a json block") + "```json\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let block: Value =
        serde_json::from_str(&format!("{{{}}}", &readme[start..end])).expect("the block is JSON");
    let (_, server) = entry_ssh();
    assert_eq!(block["env"], server["env"]);
}

/// The many-servers example: one MCP entry naming a targets file, and the
/// example targets file, accepted as they are once the aliases are Hosts
/// of the user's ssh_config.
#[test]
fn the_targets_example_is_one_entry_and_its_file_gives_three_targets() {
    let (entry, _) = entry("claude-desktop.targets.json", "mcpServers");
    let keys: Vec<&str> = entry.env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["VOLCE_LAB_TARGETS", "VOLCE_LAB_TIMEOUT"], "the file holds every per-target fact");
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/config"), "Host web-1 web-2 staging\n    User vl-agent\n").unwrap();
    let file = examples().join("targets.toml");
    let table: Vec<(&str, OsString)> = vec![
        ("HOME", home.path().as_os_str().to_owned()),
        ("VOLCE_LAB_TARGETS", file.as_os_str().to_owned()),
        ("VOLCE_LAB_TIMEOUT", "12".into()),
    ];
    let fleet = volce_lab::config::Fleet::from_lookup(|name| {
        table.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
    })
    .unwrap_or_else(|error| panic!("examples/targets.toml is refused: {error}"));
    assert_eq!(fleet.names(), ["staging", "web-1", "web-2"]);
    assert_eq!(fleet.group("web"), ["web-1", "web-2"]);
    assert!(fleet.targets().iter().all(|t| t.config.mode == Mode::Ssh));
}
