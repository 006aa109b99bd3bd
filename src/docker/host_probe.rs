//! Probes of the host itself, not of docker: whether a loopback port is
//! free, free memory and disk, and the gateway health check's HTTP GET.
//! Runs as root in the host helper; reads /proc/meminfo, binds and connects
//! on 127.0.0.1 only.

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use super::EngineError;
use crate::exec::{ExecutionStatus, ProcessSpec, minimal_env};
use crate::vocab::{Capacity, HealthPath, HttpsAnswer};

/// Whether nothing listens on 127.0.0.1:`port`: we can bind it, and a
/// connection attempt is refused (docker's proxy or a NAT rule may answer
/// without holding the address).
pub fn port_free(port: u16) -> bool {
    if port == 0 {
        return false;
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let bindable = TcpListener::bind(addr).is_ok();
    bindable && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err()
}

/// Where this host reaches a listener bound to `address`: loopback for an
/// unspecified address, else the address itself.
fn reachable(address: SocketAddr) -> SocketAddr {
    match address.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from((Ipv4Addr::LOCALHOST, address.port()))
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, address.port()))
        }
        _ => address,
    }
}

/// Whether nothing listens on `address` (the edge's, issue 39): we can bind
/// it, and a connection to it (to loopback for an unspecified address) is
/// refused, as [`port_free`] asks for a loopback port.
pub fn address_free(address: SocketAddr) -> bool {
    if address.port() == 0 {
        return false;
    }
    let target = reachable(address);
    TcpListener::bind(address).is_ok()
        && TcpStream::connect_timeout(&target, Duration::from_millis(200)).is_err()
}

/// The process that listens on TCP `port` (any address), as `NAME (pid N)`,
/// when /proc tells: the socket's inode from /proc/net/tcp and tcp6, then
/// the process holding it. `None` when nothing is found (or we may not look).
pub fn port_holder(port: u16) -> Option<String> {
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| listening_inodes(&text, port))
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|inode| format!("socket:[{inode}]")).collect();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else { continue };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| wanted.iter().any(|w| target.as_os_str() == w.as_str()))
        });
        if holds {
            let name = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            let name: String = name.trim().chars().filter(|c| c.is_ascii_graphic()).take(16).collect();
            return Some(format!("{name} (pid {pid})"));
        }
    }
    None
}

/// The inodes of the sockets in LISTEN state (`0A`) on `port` in one
/// /proc/net/tcp* table.
fn listening_inodes(table: &str, port: u16) -> Vec<String> {
    let wanted = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            (local.ends_with(&wanted) && *state == "0A" && *inode != "0").then(|| (*inode).to_owned())
        })
        .collect()
}

/// `MemAvailable` of /proc/meminfo, in bytes.
pub(crate) fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib.checked_mul(1024)?)
}

/// What a probe saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// A minimal HTTP/1.0 GET of `path` (a validated [`HealthPath`], so it goes
/// into the request line as it is) on 127.0.0.1 (never anywhere else) with
/// the given Host header. Reads at most 64 KiB. `None` when nothing
/// sensible came back.
/// Debian's curl: the one TLS client the helper runs (web_status's check
/// of an exposed name through the edge).
const CURL: &str = "/usr/bin/curl";

/// A GET of `path` for `name` through the edge's HTTPS `address` (loopback
/// for an unspecified one; the name pinned to it by `--resolve`, never
/// looked up), TLS verified for the name against `ca`: the edge's copy of
/// the certificate volce-lab installed for it (curl trusts a leaf or an
/// intermediate there as an anchor, so this proves the edge serves that
/// certificate, unexpired, for that name). One try within `timeout`.
pub fn https_get(
    address: SocketAddr,
    name: &str,
    path: &HealthPath,
    ca: &Path,
    timeout: Duration,
) -> HttpsAnswer {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-') {
        return HttpsAnswer::NoAnswer;
    }
    let target = reachable(address);
    let port = target.port();
    let ip = match target {
        SocketAddr::V4(v4) => v4.ip().to_string(),
        SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
    };
    let (resolve, url) = (format!("{name}:{port}:{ip}"), format!("https://{name}:{port}{path}"));
    let seconds = format!("{:.1}", timeout.as_secs_f64());
    let ca = ca.display().to_string();
    let args = [
        "--silent",
        "--output",
        "/dev/null",
        "--write-out",
        "%{http_code}",
        "--max-time",
        &seconds,
        "--proto",
        "=https",
        "--noproxy",
        "*",
        "--resolve",
        &resolve,
        "--cacert",
        &ca,
        &url,
    ];
    let mut process = ProcessSpec::new(CURL, args.iter().map(|a| (*a).to_owned()));
    process.env = minimal_env();
    process.timeout = timeout + Duration::from_secs(1);
    process.stdout_limit = 16;
    let out = crate::exec::run_blocking(&process);
    let status: Option<u16> = std::str::from_utf8(&out.stdout).ok().and_then(|s| s.trim().parse().ok());
    https_answer(out.execution.execution_status, out.execution.exit_code, status)
}

/// curl's end as one [`HttpsAnswer`] (its exit codes: 35 the TLS
/// handshake, 51 and 60 the peer's certificate, 58 and 77 our own files,
/// 90 and 91 pinning and status checks).
fn https_answer(status: ExecutionStatus, exit: Option<i32>, http: Option<u16>) -> HttpsAnswer {
    match (status, exit) {
        (ExecutionStatus::Ok, _) if http.is_some_and(|code| (200..400).contains(&code)) => HttpsAnswer::Ok,
        (ExecutionStatus::LaunchFailed, _) => HttpsAnswer::NotChecked,
        (ExecutionStatus::NonzeroExit, Some(35 | 51 | 58 | 60 | 77 | 90 | 91)) => HttpsAnswer::TlsFailed,
        _ => HttpsAnswer::NoAnswer,
    }
}

pub fn http_get(port: u16, host: &str, path: &HealthPath, timeout: Duration) -> Option<HttpReply> {
    if host.is_empty() || !host.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: volce-lab-health\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).ok()?;
    // A read timeout bounds each read, not the reply: an app that trickles a
    // byte now and then would keep the claim forever. One deadline for all.
    let deadline = std::time::Instant::now() + timeout;
    let mut response = Vec::new();
    let mut buffer = [0u8; 4096];
    while response.len() < 64 * 1024 {
        let left = deadline.checked_duration_since(std::time::Instant::now()).filter(|d| !d.is_zero())?;
        stream.set_read_timeout(Some(left)).ok()?;
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => response.extend_from_slice(&buffer[..n.min(64 * 1024 - response.len())]),
            Err(_) => return None,
        }
    }
    parse_http_reply(&response)
}

pub(crate) fn parse_http_reply(response: &[u8]) -> Option<HttpReply> {
    let head_end = response.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&response[..head_end]).ok()?;
    let mut words = head.lines().next()?.split(' ');
    let version = words.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    let status: u16 = words.next()?.parse().ok()?;
    (100..600).contains(&status).then(|| HttpReply { status, body: response[head_end + 4..].to_vec() })
}

/// Free memory (MemAvailable) and free disk on the filesystem of `state_dir`.
pub(super) fn capacity(state_dir: &Path) -> Result<Capacity, EngineError> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .map_err(|_| EngineError::Host { step: "read /proc/meminfo" })?;
    let free_memory_bytes =
        mem_available(&meminfo).ok_or(EngineError::Host { step: "parse MemAvailable in /proc/meminfo" })?;
    let stat = nix::sys::statvfs::statvfs(state_dir)
        .map_err(|_| EngineError::Host { step: "statvfs of the state directory" })?;
    let free_disk_bytes = (stat.blocks_available() as u64).saturating_mul(stat.fragment_size() as u64);
    Ok(Capacity { free_memory_bytes, free_disk_bytes })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_listener_is_found_by_its_port_and_named() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(!super::address_free(listener.local_addr().unwrap()));
        let holder = super::port_holder(port).expect("this test's own process holds it");
        assert!(holder.contains(&format!("(pid {})", std::process::id())), "{holder}");
        drop(listener);
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 00000000:01BB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1\n";
        assert_eq!(super::listening_inodes(table, 443), vec!["4242".to_owned()]);
        assert!(super::listening_inodes(table, 80).is_empty());
    }

    #[test]
    fn curls_end_is_one_https_answer() {
        use ExecutionStatus::*;
        assert_eq!(https_answer(Ok, Some(0), Some(200)), HttpsAnswer::Ok);
        assert_eq!(https_answer(Ok, Some(0), Some(302)), HttpsAnswer::Ok);
        assert_eq!(https_answer(Ok, Some(0), Some(502)), HttpsAnswer::NoAnswer);
        assert_eq!(https_answer(NonzeroExit, Some(60), None), HttpsAnswer::TlsFailed);
        assert_eq!(https_answer(NonzeroExit, Some(35), None), HttpsAnswer::TlsFailed);
        assert_eq!(https_answer(NonzeroExit, Some(7), None), HttpsAnswer::NoAnswer);
        assert_eq!(https_answer(Timeout, None, None), HttpsAnswer::NoAnswer);
        assert_eq!(https_answer(LaunchFailed, None, None), HttpsAnswer::NotChecked);
    }

    use super::*;

    #[test]
    fn meminfo_and_http_replies_parse_strictly() {
        let free_port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let meminfo = "MemTotal:       24684000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(mem_available(meminfo), Some(2048 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(
            parse_http_reply(b"HTTP/1.1 302 Found\r\nLocation: /x\r\n\r\nbody"),
            Some(HttpReply { status: 302, body: b"body".to_vec() })
        );
        assert_eq!(parse_http_reply(b"SSH-2.0-OpenSSH\r\n\r\n"), None);
        assert_eq!(parse_http_reply(b"HTTP/1.1 200 OK\r\n"), None, "no end of head");
        assert!(
            http_get(free_port, "bad host\r\nX: y", &HealthPath::default(), Duration::from_millis(100))
                .is_none()
        );
    }

    #[test]
    fn a_bound_port_is_not_free() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(!port_free(port));
        drop(listener);
        assert!(port_free(port));
        assert!(!port_free(0));
    }

    #[test]
    fn a_health_check_reply_that_trickles_stops_at_one_deadline() {
        // A listener on loopback that answers the head and then one byte every
        // 100 ms: each read succeeds, so only an overall deadline ends it.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = std::io::Read::read(&mut stream, &mut request);
            let _ = std::io::Write::write_all(&mut stream, b"HTTP/1.0 200 OK\r\n\r\n");
            for _ in 0..30 {
                if std::io::Write::write_all(&mut stream, b".").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let started = std::time::Instant::now();
        assert_eq!(http_get(port, "example.test", &HealthPath::default(), Duration::from_millis(500)), None);
        assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
        server.join().unwrap();
    }

    /// Tried: a check of `/healthz`: the request line names that path, the
    /// Host header is the server name, and the reply is read.
    #[test]
    fn a_health_check_asks_its_path() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let n = std::io::Read::read(&mut stream, &mut request).unwrap();
            std::io::Write::write_all(&mut stream, b"HTTP/1.0 204 No Content\r\n\r\n").unwrap();
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        let path = HealthPath::parse("/healthz").unwrap();
        let reply = http_get(port, "shop.example", &path, Duration::from_secs(2)).unwrap();
        assert_eq!(reply.status, 204);
        let request = server.join().unwrap();
        assert!(request.starts_with("GET /healthz HTTP/1.0\r\nHost: shop.example\r\n"), "{request:?}");
    }
}
