//! Credentials never leave the process: not in logs, errors, markers, `_started/`
//! notes, the report or any object of a run. The runs here use fake credentials that
//! the loopback S3 server accepts, and a hostile server that echoes each request's
//! signed head (its `Authorization` and `X-Amz-Security-Token`) in an `AccessDenied`
//! error, as a misconfigured proxy might.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{mill, pipeline_at};

pub const KEY_ID: &str = "AKIATOKENMILLFAKE7Q2X";
pub const SECRET: &str = "tmFakeSecret9f8e7d6c5b4a3210zyxwvuTSRQP";
pub const TOKEN: &str = "tmFakeSessionTokenIQoJb3JpZ2luX2VjEH0aCXVzLWVhc3QtMSJHMEUCIQ";

/// Runs `c` against `endpoint` with the fake credentials.
pub fn with_fake_credentials(c: &mut Command, endpoint: &str) -> Output {
    c.env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_SESSION_TOKEN", TOKEN)
        .output()
        .expect("run mill")
}

/// The fake credentials found in `bytes`.
pub fn leaks(bytes: &[u8]) -> Vec<&'static str> {
    [KEY_ID, SECRET, TOKEN]
        .into_iter()
        .filter(|s| bytes.windows(s.len()).any(|w| w == s.as_bytes()))
        .collect()
}

/// A server on loopback that answers every request `403 AccessDenied`, with the
/// request's head in the error message. Returns its endpoint and its request count.
fn echoing_server() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            c.fetch_add(1, Ordering::SeqCst);
            let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let text = String::from_utf8_lossy(&head);
            let length: usize = text
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            let mut body = vec![0u8; length];
            let _ = conn.read_exact(&mut body);
            let echoed = text
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;");
            let xml = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied. You sent: {echoed}</Message><RequestId>tm-1</RequestId></Error>"
            );
            let _ = write!(
                conn,
                "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{xml}",
                xml.len()
            );
        }
    });
    (format!("http://127.0.0.1:{port}"), count)
}

/// An `AccessDenied` is final: one request, not ten, and an error that names the
/// object and the code but holds none of what the server echoed of the credentials.
#[test]
fn access_denied_is_final_and_echoed_secrets_are_redacted() {
    let (endpoint, count) = echoing_server();
    let dir = tempfile::tempdir().expect("tmp");
    let pipeline = pipeline_at(dir.path(), "s3://tm-denied/run");
    let pipeline = pipeline.to_string_lossy();
    let mut redacted = false;
    // A listing (status) and a write (run: its lock's claim object).
    for args in [vec!["status", "s3://tm-denied/run"], vec!["run", &pipeline]] {
        let before = count.load(Ordering::SeqCst);
        let out = with_fake_credentials(&mut mill(&args), &endpoint);
        let requests = count.load(Ordering::SeqCst) - before;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{args:?} succeeded against a denying server"
        );
        assert!(stderr.contains("AccessDenied"), "{args:?}: {stderr}");
        assert!(stderr.contains("s3://tm-denied/run"), "{args:?}: {stderr}");
        redacted |= stderr.contains("[redacted]");
        assert_eq!(
            requests, 1,
            "{args:?}: an AccessDenied was retried: {stderr}"
        );
        let mut all = out.stdout.clone();
        all.extend_from_slice(&out.stderr);
        assert_eq!(leaks(&all), Vec::<&str>::new(), "{args:?}: {stderr}");
    }
    // At least one of the errors carries the server's echo, with the secrets cut out.
    assert!(redacted, "no error showed the server's (redacted) message");
}
