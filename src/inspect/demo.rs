//! Demo mode's simulated answers: built through the types a real server's
//! answers are (the helper's `gateway_status` body is `crate::wire`'s), and
//! no process started. Runs unprivileged on the workstation.

use crate::config::Config;
use crate::exec::{Execution, ExecutionStatus, ProcessOutput};
use crate::wire::Reply;
use crate::wire::answers::Body;
use crate::wire::answers::app_state::EngineState;
use crate::wire::answers::gateways::{Gateway, GatewayStatus};
use crate::wire::remote::RemoteCommand;

/// Simulated answers: the same shapes a real server gives.
pub(super) fn outcome(config: &Config, command: RemoteCommand) -> ProcessOutput {
    let stdout = match command {
        RemoteCommand::Identity => format!("{}\n{}\n", config.expected_host, config.expected_user),
        RemoteCommand::Disk => "Filesystem      Size  Used Avail Use% Mounted on\n\
                                /dev/demo        20G  2.0G   18G  10% /\n"
            .to_owned(),
        RemoteCommand::Rpc => Reply::from(Body::GatewayStatus(healthy_demo_app())).to_line(),
    };
    let mut execution = Execution::not_started(ExecutionStatus::Ok);
    execution.exit_code = Some(0);
    ProcessOutput { execution, stdout: stdout.into_bytes(), stderr_len: 0, stderr: Vec::new() }
}

/// The helper's `gateway_status` body for one healthy app, `demo`.
fn healthy_demo_app() -> GatewayStatus {
    let gateway = Gateway {
        app: "demo".into(),
        name: "vl-demo-gateway".into(),
        state: EngineState::Running.into(),
        container_state: "running".into(),
        stopped_on_purpose: false,
        stopped_by: None,
        answers: Some(true),
        drift: None,
        https: Vec::new(),
        acme_error: None,
    };
    GatewayStatus { gateways: vec![gateway] }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The simulated web_status answer is byte for byte the line a helper
    /// prints for one healthy app (before, demo mode wrote its own copy
    /// with `status` first), and web_status judges it healthy.
    #[test]
    fn the_demo_gateway_answer_is_a_helper_s_reply() {
        let out = outcome(&Config::default(), RemoteCommand::Rpc);
        let helper = r#"{"operation":"gateway_status","result":{"gateways":[{"answers":true,"app":"demo","container_state":"running","drift":null,"name":"vl-demo-gateway","state":"running","stopped_on_purpose":false}]},"status":"ok"}"#;
        assert_eq!(String::from_utf8(out.stdout.clone()).unwrap(), format!("{helper}\n"));
        assert!(crate::inspect::gateways_healthy(&out.stdout).unwrap());
    }
}
