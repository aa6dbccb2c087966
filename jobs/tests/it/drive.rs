//! `mill drive` against a stand-in for the Kubernetes API on loopback: Jobs created
//! suspended are resumed one step at a time, each when every Job of the step before
//! has completed; a failed Job ends the driver with status 3 and nothing after it is
//! resumed.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A Job as the stand-in keeps it.
#[derive(Debug, Clone)]
struct Job {
    suspended: bool,
    /// Looks left until a resumed Job finishes.
    left: u32,
    fails: bool,
}

#[derive(Debug, Default)]
struct Cluster {
    jobs: BTreeMap<String, Job>,
    /// (Job resumed, Jobs complete at that moment), in order.
    resumed: Vec<(String, Vec<String>)>,
}

impl Cluster {
    fn json(&mut self, name: &str) -> Option<String> {
        let job = self.jobs.get_mut(name)?;
        let condition = if job.suspended {
            None
        } else if job.left > 0 {
            job.left -= 1;
            None
        } else if job.fails {
            Some(
                r#"{"type":"Failed","status":"True","reason":"FailedIndexes","message":"index 2 failed"}"#,
            )
        } else {
            Some(r#"{"type":"Complete","status":"True"}"#)
        };
        Some(format!(
            r#"{{"kind":"Job","metadata":{{"name":"{name}"}},"spec":{{"suspend":{}}},"status":{{"conditions":[{}]}}}}"#,
            job.suspended,
            condition.unwrap_or("")
        ))
    }

    fn complete(&self) -> Vec<String> {
        self.jobs
            .iter()
            .filter(|(_, j)| !j.suspended && j.left == 0 && !j.fails)
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// Serves GET and PATCH of `/apis/batch/v1/namespaces/ns/jobs/<name>` until the test
/// ends; returns the address.
fn serve(cluster: Arc<Mutex<Cluster>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut length = 0usize;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            let mut parts = line.split_whitespace();
            let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let name = path
                .strip_prefix("/apis/batch/v1/namespaces/ns/jobs/")
                .unwrap_or("")
                .to_string();
            let mut c = cluster.lock().expect("lock");
            let (status, text) = match method {
                "PATCH" if c.jobs.contains_key(&name) => {
                    assert_eq!(
                        String::from_utf8_lossy(&body),
                        r#"{"spec":{"suspend":false}}"#
                    );
                    let done = c.complete();
                    c.resumed.push((name.clone(), done));
                    if let Some(j) = c.jobs.get_mut(&name) {
                        j.suspended = false;
                    }
                    (200, c.json(&name).unwrap_or_default())
                }
                "GET" => match c.json(&name) {
                    Some(j) => (200, j),
                    None => (404, r#"{"kind":"Status","code":404}"#.to_string()),
                },
                _ => (405, String::new()),
            };
            drop(c);
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    format!("http://{addr}")
}

fn cluster(jobs: &[(&str, bool)]) -> Arc<Mutex<Cluster>> {
    Arc::new(Mutex::new(Cluster {
        jobs: jobs
            .iter()
            .map(|(n, fails)| {
                (
                    n.to_string(),
                    Job {
                        suspended: true,
                        left: 2,
                        fails: *fails,
                    },
                )
            })
            .collect(),
        resumed: Vec::new(),
    }))
}

fn drive(api: &str) -> std::process::Output {
    crate::mill(&[
        "drive",
        "--namespace",
        "ns",
        "--api",
        api,
        "--poll",
        "0.05",
        "--step",
        "text=r-text-0,r-text-1",
        "--step",
        "signatures=r-sig",
        "--step",
        "model=r-model",
    ])
    .output()
    .expect("mill drive")
}

#[test]
fn the_driver_resumes_each_step_after_the_one_before() {
    let c = cluster(&[
        ("r-text-0", false),
        ("r-text-1", false),
        ("r-sig", false),
        ("r-model", false),
    ]);
    let out = drive(&serve(c.clone()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = c.lock().expect("lock");
    let order: Vec<&str> = c.resumed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(order, ["r-text-0", "r-text-1", "r-sig", "r-model"]);
    // Each step started only once every Job before it had completed.
    assert!(c.resumed[0].1.is_empty() && c.resumed[1].1.is_empty());
    assert_eq!(c.resumed[2].1, ["r-text-0", "r-text-1"]);
    assert_eq!(c.resumed[3].1, ["r-sig", "r-text-0", "r-text-1"]);
}

#[test]
fn a_failed_job_fails_the_driver_and_nothing_after_it_runs() {
    let c = cluster(&[
        ("r-text-0", false),
        ("r-text-1", false),
        ("r-sig", true),
        ("r-model", false),
    ]);
    let out = drive(&serve(c.clone()));
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("r-sig") && err.contains("index 2 failed"),
        "{err}"
    );
    let c = c.lock().expect("lock");
    assert!(
        c.jobs["r-model"].suspended,
        "the step after a failure was resumed"
    );
    // A Job that does not exist fails the run too (a driver started before the Jobs).
    let missing = cluster(&[("r-text-0", false), ("r-text-1", false)]);
    let out = drive(&serve(missing));
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    // An API that does not answer is an error (1): the driver's Job retries it.
    let out = drive("http://127.0.0.1:9");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}
