//! Renders what the Debian package ships besides the executable, from the
//! clap definitions themselves so that the man pages and completions cannot
//! drift from the real options: `volce-lab.1` and one page per subcommand,
//! `volce-lab-host.8` and one page per host subcommand (nested ones as
//! `volce-lab-host-audit-verify.8`), bash/zsh/fish completions for
//! `volce-lab-host`, the host-mode symlink itself and the workstation's `volce-lab`
//! symlink on PATH.
//!
//! Run by `scripts/package`: `cargo run --example package-assets -- OUT_DIR`.
//! Unprivileged; writes only under OUT_DIR.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use clap::CommandFactory as _;
use clap_complete::Shell;
use volce_lab::cli::{Cli, HOST_NAME, HostCli};

/// Where the package puts the executable; the symlink points there.
const EXECUTABLE: &str = "/usr/lib/volce-lab/volce-lab";

fn main() -> Result<()> {
    let mut args = std::env::args_os().skip(1);
    let (Some(out), None) = (args.next(), args.next()) else {
        bail!("usage: package-assets OUT_DIR");
    };
    let out = PathBuf::from(out);
    for dir in ["man1", "man8", "completions"] {
        let dir = out.join(dir);
        if dir.exists() {
            // Stale pages of a removed subcommand must not reach the package.
            fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }

    let workstation = Cli::command();
    write_pages(&out.join("man1"), workstation, "volce-lab", "volce-lab", "1")?;
    let host = HostCli::command();
    write_pages(&out.join("man8"), host.clone(), HOST_NAME, HOST_NAME, "8")?;

    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut command = host.clone();
        let path = clap_complete::generate_to(shell, &mut command, HOST_NAME, out.join("completions"))
            .with_context(|| format!("writing the {shell} completion"))?;
        println!("{}", path.display());
    }

    // The host-mode name, and the workstation's `volce-lab` on PATH
    // (/usr/bin), both leading to the one executable.
    for name in [HOST_NAME, "volce-lab"] {
        let link = out.join(name);
        if link.symlink_metadata().is_ok() {
            fs::remove_file(&link).with_context(|| format!("removing {}", link.display()))?;
        }
        std::os::unix::fs::symlink(EXECUTABLE, &link)
            .with_context(|| format!("creating {}", link.display()))?;
        println!("{} -> {EXECUTABLE}", link.display());
    }
    Ok(())
}

/// Where the package puts the docs (Cargo.toml's assets: docs/*.md, flat).
const DOCS: &str = "/usr/share/doc/volce-lab";

/// A SEE ALSO section naming the doc pages a reader of this section needs:
/// the man pages say what each option is, the pages why and what next, so
/// both lead to the same files (issue 37).
fn see_also(section: &str) -> String {
    let pages: &[&str] = if section == "8" {
        &[
            "server-install.md",
            "operator.md",
            "policy.md",
            "data.md",
            "env-files.md",
            "troubleshooting.md",
            "security.md",
        ]
    } else {
        &["workstation.md", "tools.md", "troubleshooting.md", "security.md"]
    };
    let mut roff = String::from(".SH \"SEE ALSO\"\n");
    for (i, page) in pages.iter().enumerate() {
        if i > 0 {
            roff.push_str(".br\n");
        }
        roff.push_str(&format!("{DOCS}/{page}\n"));
    }
    roff
}

/// One page for `command`, named `page` and typed as `typed`, then one for
/// each visible subcommand, recursively (`page-sub`, typed `typed sub`).
fn write_pages(dir: &Path, command: clap::Command, page: &str, typed: &str, section: &str) -> Result<()> {
    // clap takes `&'static str` names without its `string` feature; this
    // one-shot program leaks a few bytes per page instead of adding it.
    let command = command.name(&*page.to_owned().leak()).bin_name(&*typed.to_owned().leak());
    let mut text = Vec::new();
    clap_mangen::Man::new(command.clone()).section(section).render(&mut text)?;
    text.extend_from_slice(see_also(section).as_bytes());
    let path = dir.join(format!("{page}.{section}"));
    fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    println!("{}", path.display());
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set() && sub.get_name() != "help") {
        let name = sub.get_name();
        if typed == "volce-lab" && name == "host" {
            // `volce-lab host X` is `volce-lab-host X`, whose pages are in section 8.
            continue;
        }
        write_pages(dir, sub.clone(), &format!("{page}-{name}"), &format!("{typed} {name}"), section)?;
    }
    Ok(())
}
