//! The doctor's findings: one line each, how it weighs ([`Level`]), and
//! the report they make ([`report`]). Pure; runs as root inside
//! `volce-lab-host doctor`.

use std::fmt;

/// How a finding weighs. Only a failure makes doctor exit non-zero; a
/// warning names what this server cannot guarantee (an old engine, an old
/// app network) or what will bite later (an image not pulled yet, an
/// image built for another user), without stopping the helper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub level: Level,
    pub subject: String,
    pub detail: String,
    pub fix: Option<String>,
}

impl Finding {
    /// Whether this finding fails the run (exit status, `problem(s) found`).
    pub fn failed(&self) -> bool {
        self.level == Level::Fail
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = match self.level {
            Level::Ok => "ok  ",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        };
        write!(f, "{mark} {}: {}", self.subject, self.detail)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n     fix: {fix}")?;
        }
        Ok(())
    }
}

pub(super) fn ok(subject: impl Into<String>, detail: impl Into<String>) -> Finding {
    Finding { level: Level::Ok, subject: subject.into(), detail: detail.into(), fix: None }
}

pub(super) fn fail(subject: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding { level: Level::Fail, subject: subject.into(), detail: detail.into(), fix: Some(fix.into()) }
}

pub(super) fn warn(subject: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding { level: Level::Warn, subject: subject.into(), detail: detail.into(), fix: Some(fix.into()) }
}

/// Prints the findings; exit 0 when none is a failure (warnings pass).
pub fn report(findings: &[Finding]) -> (String, bool) {
    let mut text = String::new();
    for finding in findings {
        text.push_str(&finding.to_string());
        text.push('\n');
    }
    let failures = findings.iter().filter(|f| f.failed()).count();
    let warnings = findings.iter().filter(|f| f.level == Level::Warn).count();
    if warnings > 0 {
        text.push_str(&format!(
            "{warnings} warning(s): the WARN lines above do not fail the check; read their fix\n"
        ));
    }
    if failures == 0 {
        text.push_str("all checks passed\n");
    } else {
        text.push_str(&format!("{failures} problem(s) found\n"));
    }
    (text, failures == 0)
}
