//! Demo mode's simulated answers: the same shapes a real server gives, and
//! no process started. Runs unprivileged on the workstation.

use super::transport::RemoteCommand;
use crate::config::Config;
use crate::exec::{Execution, ExecutionStatus, Outcome};

/// Simulated answers: the same shapes a real server gives.
pub(super) fn outcome(config: &Config, command: RemoteCommand) -> Outcome {
    let stdout = match command {
        RemoteCommand::Identity => format!("{}\n{}\n", config.expected_host, config.expected_user),
        RemoteCommand::Disk => "Filesystem      Size  Used Avail Use% Mounted on\n\
                                /dev/demo        20G  2.0G   18G  10% /\n"
            .to_owned(),
        RemoteCommand::HostRpc => {
            let reply = r#"{"status":"ok","operation":"gateway_status","result":{"gateways":[{"answers":true,"app":"demo","container_state":"running","drift":null,"name":"vl-demo-gateway","state":"running","stopped_on_purpose":false}]}}"#;
            format!("{reply}\n")
        }
    };
    let mut execution = Execution::not_started(ExecutionStatus::Ok);
    execution.exit_code = Some(0);
    Outcome { execution, stdout: stdout.into_bytes(), stderr_len: 0 }
}
