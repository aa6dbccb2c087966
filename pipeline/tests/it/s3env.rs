//! The S3 test server: `TOKENMILL_TEST_S3_ENDPOINT` (set by scripts/test.sh, which
//! starts it on loopback). Under CI the tests refuse to run without it.

use std::time::Duration;

use pipeline::storage::{Location, S3Options, Storage};

/// The server's endpoint, or `None` (outside CI) when it is not configured.
pub fn endpoint() -> Option<String> {
    match std::env::var("TOKENMILL_TEST_S3_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the S3 tests: set TOKENMILL_TEST_S3_ENDPOINT (scripts/test.sh does)"
            );
            eprintln!("TOKENMILL_TEST_S3_ENDPOINT unset: S3 half of this test skipped");
            None
        }
    }
}

/// The upstream port of the S3 server.
pub fn port(endpoint: &str) -> u16 {
    endpoint
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("endpoint ends with a port")
}

/// Options for tests: short waits, 5 MiB parts.
pub fn options(endpoint: &str) -> S3Options {
    S3Options {
        endpoint: Some(endpoint.to_string()),
        base_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(100),
        part_bytes: 5 << 20,
        part_concurrency: 4,
        read_timeout: Duration::from_secs(20),
        ..S3Options::default()
    }
}

/// A fresh bucket on the server, and a storage facade pointed at `endpoint`.
pub fn bucket(endpoint: &str, name: &str) -> (Storage, Location) {
    let storage = Storage::with_options(options(endpoint));
    let bucket = format!(
        "tm-{}-{}-{}",
        name.replace('_', "-"),
        std::process::id(),
        fastrand::u32(..)
    );
    let loc = Location::parse(&format!("s3://{bucket}/")).expect("valid bucket address");
    storage.create_bucket(&loc).expect("create test bucket");
    (storage, loc)
}

/// Local disk, plus the S3 server when configured: a storage and a root on each.
pub fn backends(name: &str) -> (tempfile::TempDir, Vec<(Storage, Location)>) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut out = vec![(Storage::new(), Location::Local(dir.path().join("store")))];
    if let Some(endpoint) = endpoint() {
        out.push(bucket(&endpoint, name));
    }
    (dir, out)
}
