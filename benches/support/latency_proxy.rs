//! A TCP proxy on loopback that makes a server look far away (issue 44):
//! this kernel has no netem, so a bench that needs a round trip of 30 ms
//! puts one of these in front of the e2e sshd. Each listener forwards to
//! one upstream address and holds every chunk it reads for `one_way`
//! before writing it on, in both directions; a new connection first waits
//! one round trip, the TCP handshake a real network would cost. Runs
//! unprivileged on 127.0.0.1 only; the threads end with their connections.
//!
//! Each chunk is delayed on its own (a reader thread stamps it, a writer
//! thread sends it when its time has come), so the proxy adds latency, not
//! a bandwidth limit: chunks in flight overlap as they would on a wire.
#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// One listener on 127.0.0.1 that forwards to `upstream` with the delay.
pub struct LatencyProxy {
    pub port: u16,
}

impl LatencyProxy {
    /// Binds a free port on 127.0.0.1 and serves it from a thread of its own.
    pub fn start(upstream: SocketAddr, one_way: Duration) -> std::io::Result<LatencyProxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                thread::spawn(move || connect(client, upstream, one_way));
            }
        });
        Ok(LatencyProxy { port })
    }
}

/// Joins one accepted connection to the upstream, after the handshake's
/// round trip; a failed upstream connect just closes the client.
fn connect(client: TcpStream, upstream: SocketAddr, one_way: Duration) {
    thread::sleep(one_way * 2);
    let Ok(server) = TcpStream::connect(upstream) else { return };
    // Every chunk goes out as soon as its delay is over, not when Nagle
    // would let it: the delay is the only one we mean to add.
    for stream in [&client, &server] {
        let _ = stream.set_nodelay(true);
    }
    let (Ok(client_reader), Ok(server_reader)) = (client.try_clone(), server.try_clone()) else { return };
    pump(client_reader, server, one_way);
    pump(server_reader, client, one_way);
}

/// Copies `from` to `to`, each chunk `delay` after it was read; the end
/// of `from` becomes the end of what `to` is sent.
fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (chunks, due) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buffer) {
                // The end is delayed like a chunk: an empty one marks it.
                Ok(0) | Err(_) => {
                    let _ = chunks.send((Instant::now() + delay, Vec::new()));
                    break;
                }
                Ok(n) => {
                    if chunks.send((Instant::now() + delay, buffer[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
    });
    thread::spawn(move || {
        for (at, chunk) in due {
            thread::sleep(at.saturating_duration_since(Instant::now()));
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        // The end arrives after the last chunk, in order, when its own delay is over.
        let _ = to.shutdown(Shutdown::Write);
    });
}
