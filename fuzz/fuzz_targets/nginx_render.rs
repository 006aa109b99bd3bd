//! Fuzz target: the gateway's nginx.conf (`volce_lab::nginx::render`). Any
//! server name that validation accepts (`ServerName::parse`), with any port
//! in the plan range, renders to exactly the statements we write: the
//! structural check of tests/support/nginx_shape.rs, included by path so
//! both use one definition.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volce_lab::nginx::{AccessLog, render};
use volce_lab::vocab::ServerName;

#[path = "../../tests/support/nginx_shape.rs"]
mod nginx_shape;

fuzz_target!(|data: &[u8]| {
    let Some((port_bytes, name)) = data.split_at_checked(2) else { return };
    let port = 1024 + u16::from_le_bytes([port_bytes[0], port_bytes[1]]) % (65535 - 1024 + 1);
    let Ok(name) = std::str::from_utf8(name) else { return };
    let Some(name) = ServerName::parse(name) else { return };
    let config = render(name.as_str(), port, AccessLog::Off);
    if let Err(difference) = nginx_shape::only_our_directives(&config, name.as_str(), port) {
        panic!("{name:?} {port}: {difference}");
    }
});
