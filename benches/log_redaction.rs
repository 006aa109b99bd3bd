//! Log redaction benchmark (shipped; `cargo bench --bench log_redaction`).
//!
//! What `service_logs` (and a failed plan's `app_log`) spends making an
//! app's log safe, on 1 MiB of realistic docker-stamped lines (access
//! lines, JSON logs, a Java-style logger, SQL, a Python traceback; one line
//! in 256 prints a configured value, as printed, upper-cased or inside an
//! `Authorization: Basic` header) with 4 configured values (a database
//! password, an API token, a `DATABASE_URL` holding the password, a
//! 64-character hex session secret):
//! - the configured values' stage alone (`configured`, on cleaned lines:
//!   `logs::redact_configured_for_tests`), the part issue 38 changed;
//! - the same with a fifth value of 3,272 characters (an RSA 4096 private
//!   key in PKCS#8 PEM, as an env var may hold one), reported: the cost of
//!   building the matcher grows with the values' length;
//! - the stage on 50 lines, `service_logs`' default tail, where building
//!   the matcher is most of the cost;
//! - the whole render (`logs::render_knowing`: cleaning, the configured
//!   values, key blocks, every pattern of every view), with and without the
//!   4 values: the difference is what the values add to one call.
//!
//! Each is the median of 7 runs, taken in turns. Target: the configured
//! values' stage under 20 ms per MiB with the 4 values; a miss prints
//! FAILED and exits 1. Pure computation on generated text: it touches no
//! installation, engine or network. Under `cargo test --all-targets` (no
//! `--bench`, a debug build) it runs once on 64 KiB and holds nothing to
//! the target.

#[path = "support/stats.rs"]
mod stats;

use std::time::{Duration, Instant};

use volce_lab::logs::{REDACTED, clean, redact_configured_for_tests, render, render_knowing};

const MIB: usize = 1024 * 1024;
const RUNS: usize = 7;
/// The target of the configured values' stage, per MiB.
const TARGET: Duration = Duration::from_millis(20);

const DB_PASSWORD: &str = "Xk9mQ2vL7pR4wZ8tY6nB3cFa";
const API_TOKEN: &str = "ghp_7fK2mN9qR4tV8wX1zA5cE3gH6jL0pS2uY4bD";
const SESSION_SECRET: &str = "4f9c2e7a1b8d3f6e0a5c9b2d7e4f1a8c3b6d9e2f5a8c1b4d7e0f3a6c9b2e5d8f";

fn database_url() -> String {
    format!("postgres://app:{DB_PASSWORD}@db:5432/app")
}

/// A PEM body of `len` characters in 64-character lines, as a private key
/// in an env var (its newlines kept: docker's env holds them as they are).
fn pem(len: usize, rng: &mut Rng) -> String {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut body = String::from("-----BEGIN PRIVATE KEY-----\n");
    let mut column = 0;
    while body.len() < len - 26 {
        body.push(char::from(B64[rng.below(64)]));
        column += 1;
        if column == 64 {
            body.push('\n');
            column = 0;
        }
    }
    body.push_str("\n-----END PRIVATE KEY-----");
    body
}

/// A small deterministic generator (the same text every run).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (k, b)| n | u32::from(*b) << (16 - 8 * k));
        for k in 0..4 {
            out.push(if k <= chunk.len() {
                char::from(ALPHABET[(n >> (18 - 6 * k) & 63) as usize])
            } else {
                '='
            });
        }
    }
    out
}

/// About `size` bytes of docker-stamped log lines, newline-terminated.
fn log_text(size: usize) -> Vec<u8> {
    const PATHS: [&str; 6] =
        ["/api/v1/orders", "/api/v1/items/list", "/healthz", "/static/app.js", "/login", "/api/v1/users/me"];
    const AGENTS: [&str; 3] = [
        "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
        "curl/8.5.0",
        "python-requests/2.32.3",
    ];
    let mut rng = Rng(38);
    let mut out = String::with_capacity(size + 512);
    let mut n = 0usize;
    while out.len() < size {
        n += 1;
        let stamp = format!(
            "2026-12-01T10:{:02}:{:02}.{:09}Z",
            (n / 600) % 60,
            (n / 10) % 60,
            n * 7919 % 1_000_000_000
        );
        let line = match (n.is_multiple_of(256), rng.below(8)) {
            (true, pick) => match pick % 3 {
                0 => format!("db: connected with password {DB_PASSWORD}"),
                1 => format!("upstream: token {} rejected", API_TOKEN.to_uppercase()),
                _ => format!(
                    "proxy: Authorization: Basic {}",
                    base64(format!("admin:{DB_PASSWORD}").as_bytes())
                ),
            },
            (_, 0..=2) => format!(
                "172.18.0.{} - - [01/Dec/2026:10:00:{:02} +0000] \"GET {}?page={} HTTP/1.1\" {} {} \"-\" \"{}\" rt=0.{:03}",
                rng.below(250) + 2,
                n % 60,
                PATHS[rng.below(PATHS.len())],
                rng.below(40),
                [200, 200, 200, 304, 404, 500][rng.below(6)],
                rng.below(90_000),
                AGENTS[rng.below(AGENTS.len())],
                rng.below(1000)
            ),
            (_, 3 | 4) => format!(
                "{{\"level\":\"info\",\"ts\":\"2026-12-01T10:00:{:02}Z\",\"msg\":\"request done\",\"path\":\"{}\",\"status\":200,\"duration_ms\":{}.{},\"request_id\":\"{:08x}-{:04x}-4{:03x}\"}}",
                n % 60,
                PATHS[rng.below(PATHS.len())],
                rng.below(300),
                rng.below(10),
                rng.below(1 << 30),
                rng.below(1 << 16),
                rng.below(1 << 12)
            ),
            (_, 5) => format!(
                "INFO  [worker-{}] com.example.orders.OrderService - processed order {} for customer {} in {} ms",
                rng.below(8),
                rng.below(1_000_000),
                rng.below(100_000),
                rng.below(500)
            ),
            (_, 6) => format!(
                "DEBUG db: SELECT id, name, email FROM users WHERE id = $1 AND active = true [args: {}] ({} rows, {} us)",
                rng.below(100_000),
                rng.below(3),
                rng.below(5000)
            ),
            _ => format!(
                "  File \"/usr/local/lib/python3.12/site-packages/app/views.py\", line {}, in handle_{}",
                rng.below(900),
                ["get", "post", "delete"][rng.below(3)]
            ),
        };
        out.push_str(&stamp);
        out.push(' ');
        out.push_str(&line);
        out.push('\n');
    }
    out.into_bytes()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn per_mib(took: Duration, bytes: usize) -> (f64, f64) {
    let ms = stats::ms(took) * MIB as f64 / bytes as f64;
    (ms, 1000.0 / ms)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let size = if full { MIB } else { 64 * 1024 };
    let runs = if full { RUNS } else { 1 };
    let raw = log_text(size);
    let lines: Vec<String> = String::from_utf8(raw.clone()).unwrap().lines().map(clean).collect();
    let url = database_url();
    let four: Vec<&str> = vec![DB_PASSWORD, API_TOKEN, &url, SESSION_SECRET];
    let key = pem(3272, &mut Rng(4096));
    let five: Vec<&str> = four.iter().copied().chain([key.as_str()]).collect();

    let stage = |values: &[&str]| {
        let mut copy = lines.clone();
        let started = Instant::now();
        let count = redact_configured_for_tests(&mut copy, values);
        (started.elapsed(), count, copy)
    };
    let (mut alone, mut with_key, mut bare, mut knowing) = (vec![], vec![], vec![], vec![]);
    // What the planted lines print: the password as it is, the token
    // upper-cased, the password inside a Basic header's base64.
    let planted =
        [DB_PASSWORD.to_owned(), API_TOKEN.to_uppercase(), base64(format!("admin:{DB_PASSWORD}").as_bytes())];
    let (mut counted, mut left) = (0, 0);
    for _ in 0..runs {
        let (took, count, out) = stage(&four);
        alone.push(took);
        counted = count;
        left = out.iter().filter(|l| planted.iter().any(|form| l.contains(form.as_str()))).count();
        with_key.push(stage(&five).0);
        let started = Instant::now();
        std::hint::black_box(render(&raw, b""));
        bare.push(started.elapsed());
        let started = Instant::now();
        let safe = render_knowing(&raw, b"", &four);
        knowing.push(started.elapsed());
        assert!(safe.lines.iter().all(|l| !l.contains(DB_PASSWORD)), "a configured value left the render");
    }
    let (alone, with_key, bare, knowing) = (median(alone), median(with_key), median(bare), median(knowing));
    // One `service_logs` call of the default tail: 50 lines, the matcher
    // built for them.
    let tail = |values: &[&str]| {
        median(
            (0..RUNS * 3)
                .map(|_| {
                    let mut copy = lines[..50].to_vec();
                    let started = Instant::now();
                    redact_configured_for_tests(&mut copy, values);
                    started.elapsed()
                })
                .collect(),
        )
    };
    let (tail_four, tail_five) = (tail(&four), tail(&five));
    let redacted = lines.iter().filter(|l| l.contains(REDACTED)).count();
    assert_eq!(redacted, 0, "the generated text holds no marker of its own");

    println!(
        "log redaction: {:.2} MiB of {} lines, {} configured values, median of {runs} run(s){}",
        raw.len() as f64 / MIB as f64,
        lines.len(),
        four.len(),
        if full { "" } else { " (quick run: a debug build on 64 KiB, not held to the target)" }
    );
    let (ms, rate) = per_mib(alone, raw.len());
    let missed = full && ms >= stats::ms(TARGET);
    println!(
        "  configured values' stage alone: {ms:.2} ms per MiB ({rate:.0} MiB/s), {counted} replaced, \
         {left} planted lines still whole (target < {} ms per MiB) {}",
        TARGET.as_millis(),
        if !full {
            "(quick run)"
        } else if missed {
            "FAILED"
        } else {
            "met"
        }
    );
    let (ms, rate) = per_mib(with_key, raw.len());
    println!(
        "  the same with a 3,272-character PEM key as a fifth value: {ms:.2} ms per MiB ({rate:.0} MiB/s)"
    );
    println!(
        "  one call of 50 lines (service_logs' default tail), the stage alone: {:.3} ms with the 4 values, \
         {:.3} ms with the PEM key as well",
        stats::ms(tail_four),
        stats::ms(tail_five)
    );
    let (bare_ms, bare_rate) = per_mib(bare, raw.len());
    let (knowing_ms, knowing_rate) = per_mib(knowing, raw.len());
    println!(
        "  whole render: {bare_ms:.1} ms per MiB ({bare_rate:.1} MiB/s) without values, \
         {knowing_ms:.1} ms per MiB ({knowing_rate:.1} MiB/s) with the 4: the values add {:.1} ms per MiB",
        knowing_ms - bare_ms
    );
    if missed {
        eprintln!("FAILED: the configured values' stage took {} ms per MiB or more", TARGET.as_millis());
        std::process::exit(1);
    }
}
