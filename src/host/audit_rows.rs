//! How `audit export` prints rows: one list of fields per row
//! ([`fields`]), which both the JSON lines ([`json_line`]) and the table
//! ([`Table`]) are made from, so the table has a column for every field
//! `--json` has, and a new column cannot reach one without the other. Pure;
//! runs as root on the server's terminal.
//!
//! The table's columns are sized to their content (the widest cell or the
//! header): a long operation (`gateway_status`), a gate refusal's code or a
//! hash never overflows into its neighbour. Every text is escaped for the
//! terminal first, and the width is that of the escaped text.

use serde_json::{Map, Value, json};

use crate::store::ChainedEntry;
use crate::text::{for_terminal, rfc3339_seconds};

/// One row's fields, in the table's column order: what happened first
/// (time, event, operation or action, outcome, code, count), then who and
/// on what, then the chain's columns. The names are `--json`'s keys.
pub fn fields(entry: &ChainedEntry) -> Vec<(&'static str, Value)> {
    vec![
        ("seq", json!(entry.seq)),
        ("time", json!(rfc3339_seconds(entry.at))),
        ("event", json!(entry.event)),
        ("operation", json!(entry.operation)),
        ("action", json!(entry.action)),
        ("outcome", json!(entry.outcome)),
        ("code", json!(entry.code)),
        ("count", json!(entry.count)),
        ("gate_reason", json!(entry.gate_reason)),
        ("exit_code", json!(entry.exit_code)),
        ("duration_ms", json!(entry.duration_ms)),
        ("actor", json!(entry.actor)),
        ("app", json!(entry.app)),
        ("plan_id", json!(entry.plan_id)),
        ("request_id", json!(entry.request_id)),
        ("process", json!(entry.process)),
        ("sudo_uid", json!(entry.sudo_uid)),
        ("login_uid", json!(entry.login_uid)),
        ("command_bytes", json!(entry.command_bytes)),
        ("command_sha256", json!(entry.command_sha256)),
        ("command_digests", json!(entry.command_digests)),
        ("commands_beyond", json!(entry.commands_beyond)),
        ("signer_key", json!(entry.signer_key)),
        ("statement_sha256", json!(entry.statement_sha256)),
        ("anchor_seq", json!(entry.anchor_seq)),
        ("anchor_hash", json!(entry.anchor_hash)),
        ("at", json!(entry.at)),
        ("prev_hash", json!(entry.prev_hash)),
        ("hash", json!(entry.hash)),
    ]
}

/// One row as one JSON object on one line: the stored columns (`at` as
/// hashed, in unix seconds, and `time` in RFC 3339), hidden characters
/// escaped.
pub fn json_line(entry: &ChainedEntry) -> String {
    let value: Map<String, Value> = fields(entry).into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    let mut line = crate::text::json_for_terminal(&Value::Object(value).to_string());
    line.push('\n');
    line
}

/// The table `audit export` prints without `--json`: rows gathered, then
/// printed with every column as wide as its widest cell.
#[derive(Default)]
pub struct Table {
    rows: Vec<Vec<(String, bool)>>,
}

impl Table {
    pub fn push(&mut self, entry: &ChainedEntry) {
        // An absent value prints as `-`; a number is marked, to align right.
        let cell = |value: &Value| match value {
            Value::Null => ("-".to_owned(), false),
            Value::String(text) => (for_terminal(text), false),
            // A count row's digests: one cell, comma-separated.
            Value::Array(items) => {
                let texts: Vec<String> =
                    items.iter().map(|v| v.as_str().map_or(v.to_string(), for_terminal)).collect();
                (texts.join(","), false)
            }
            other => (other.to_string(), true),
        };
        self.rows.push(fields(entry).iter().map(|(_, value)| cell(value)).collect());
    }

    pub fn render(&self) -> String {
        let header: Vec<String> =
            fields(&ChainedEntry::default()).iter().map(|(name, _)| name.to_uppercase()).collect();
        let width = |i: usize| {
            self.rows.iter().map(|row| row[i].0.chars().count()).chain([header[i].len()]).max().unwrap_or(0)
        };
        let widths: Vec<usize> = (0..header.len()).map(width).collect();
        // A column of numbers is right-aligned, its `-` cells too.
        let right: Vec<bool> = (0..header.len()).map(|i| self.rows.iter().any(|row| row[i].1)).collect();
        let line = |cells: Vec<&str>| {
            let padded: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, text)| {
                    let w = widths[i];
                    if right[i] { format!("{text:>w$}") } else { format!("{text:<w$}") }
                })
                .collect();
            let mut line = padded.join("  ").trim_end().to_owned();
            line.push('\n');
            line
        };
        let mut out = line(header.iter().map(String::as_str).collect());
        for row in &self.rows {
            out.push_str(&line(row.iter().map(|(text, _)| text.as_str()).collect()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `--json` key is a column of the table, in the same order as
    /// `fields` lists them, and nothing else is.
    #[test]
    fn the_table_has_a_column_for_every_json_field() {
        let entry = ChainedEntry { seq: 1, event: "request".into(), ..ChainedEntry::default() };
        let json: Value = serde_json::from_str(&json_line(&entry)).unwrap();
        let mut keys: Vec<String> = json.as_object().unwrap().keys().map(|k| k.to_uppercase()).collect();
        let mut table = Table::default();
        table.push(&entry);
        let text = table.render();
        let mut columns: Vec<String> =
            text.lines().next().unwrap().split_whitespace().map(str::to_owned).collect();
        keys.sort();
        columns.sort();
        assert_eq!(columns, keys, "{text}");
        assert_eq!(keys.len(), 29);
    }
}
