//! Processes read from /proc: a helper found by its argv, a field of a
//! process's status (root suites: the helper runs as root).

/// The pid of a running `volce-lab-host SUBCOMMAND` (`rpc`, `rpc-worker`),
/// found by its argv in /proc.
pub fn helper_process(subcommand: &str) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
        let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        (argv.len() >= 2 && argv[0].ends_with(b"volce-lab-host") && argv[1] == subcommand.as_bytes())
            .then_some(pid)
    })
}

/// The value of `field` (`PPid`, `Uid`, `Name`...) in `/proc/PID/status`,
/// its words joined by one space; empty when the process is gone.
pub fn process_field(pid: impl std::fmt::Display, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let prefix = format!("{field}:");
    let value = status.lines().find_map(|line| line.strip_prefix(prefix.as_str())).unwrap_or_default();
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}
