//! Exit codes of every `volce-lab` entry point, in one closed set.

/// What a process of ours tells its caller through its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything asked for was done and every check was healthy.
    Ok = 0,
    /// The command ran, but a check is unhealthy or a request was refused.
    Failure = 1,
    /// The invocation or the configuration is wrong; nothing was done.
    Usage = 2,
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit as u8)
    }
}
