//! A minimal MCP client over stdio for the benchmarks that measure
//! `volce-lab mcp-serve` as a client sees it (fleet_bench, rollout): it
//! starts the server, initializes (2025-11-25) and makes tool calls, one at
//! a time, reading lines until the answer to the call.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

pub struct StdioClient {
    pub child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl StdioClient {
    /// Starts `command` (an `mcp-serve` with its environment) and initializes.
    pub fn start(mut command: Command, name: &str) -> StdioClient {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn volce-lab mcp-serve");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut client = StdioClient { child, stdin, stdout, next_id: 0 };
        let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": name, "version": "0"}}});
        client.answer_to(initialize);
        writeln!(client.stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
        client
    }

    /// One `tools/call`: its answer's structured content.
    pub fn call(&mut self, tool: &str, arguments: serde_json::Value) -> serde_json::Value {
        self.next_id += 1;
        let request = serde_json::json!({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        self.answer_to(request)["result"]["structuredContent"].clone()
    }

    /// Sends `request` and reads lines until the one that answers it.
    fn answer_to(&mut self, request: serde_json::Value) -> serde_json::Value {
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "mcp-serve closed its stdout");
            let answer: serde_json::Value = serde_json::from_str(&line).expect("one JSON-RPC line");
            if answer["id"] == request["id"] {
                return answer;
            }
        }
    }

    pub fn finish(self) {
        let StdioClient { mut child, stdin, .. } = self;
        drop(stdin);
        let _ = child.wait();
    }
}
