//! The `volce-lab` executable: everything lives in the library; this file only
//! hands over the process arguments and turns the outcome into an exit code.
fn main() -> std::process::ExitCode {
    volce_lab::cli::main(std::env::args_os().collect())
}
