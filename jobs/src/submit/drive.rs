//! `mill drive`: the in-cluster driver of a Kubernetes submission. Every step's Jobs
//! are created suspended; the driver looks at them every `poll` seconds and resumes
//! the Jobs of the first step that is not complete once every step before it is, so
//! a step's pods exist only when they can run. A failed Job ends the driver with
//! [`STEP_FAILED`] (its Job's pod failure policy then fails the driver Job at once);
//! an error talking to the API ends it with 1, and the restarted driver goes on from
//! where the Jobs stand: its decisions depend on nothing but their states.
//!
//! [`decide`] is the whole policy, a function of the Jobs' states; [`HttpApi`] reads
//! and patches Jobs through the Kubernetes API with the pod's ServiceAccount token
//! (or any address given, for tests).

use std::time::Duration;

use pipeline::{Error, Result};

/// The driver's exit status when a step failed.
pub const STEP_FAILED: i32 = 3;

/// Where a Job stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Created suspended, not resumed yet.
    Suspended,
    /// Resumed, not finished.
    Active,
    Complete,
    /// Failed, with the reason Kubernetes gives.
    Failed(String),
    /// Not found.
    Missing,
}

/// A Job's state from its JSON (`spec.suspend`, `status.conditions`).
pub fn job_state(job: &serde_json::Value) -> JobState {
    let conditions = job["status"]["conditions"].as_array();
    let holds = |kind: &str| {
        conditions.and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == kind && c["status"] == "True")
        })
    };
    if holds("Complete").is_some() {
        return JobState::Complete;
    }
    if let Some(c) = holds("Failed") {
        let reason = [c["reason"].as_str(), c["message"].as_str()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(": ");
        return JobState::Failed(reason);
    }
    if job["spec"]["suspend"] == true {
        JobState::Suspended
    } else {
        JobState::Active
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Resume these Jobs (the next step's suspended ones).
    Resume(Vec<String>),
    /// A step is running: look again later.
    Wait,
    /// Every Job completed.
    Done,
    /// The run failed.
    Fail(String),
}

/// One step: its name and its Jobs' names with their states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepJobs {
    pub step: String,
    pub jobs: Vec<(String, JobState)>,
}

/// The policy: steps in order; the first not complete is resumed (its suspended Jobs)
/// or waited for; a failed or missing Job fails the run.
pub fn decide(steps: &[StepJobs]) -> Decision {
    for s in steps {
        for (name, state) in &s.jobs {
            match state {
                JobState::Failed(why) => {
                    return Decision::Fail(format!("step {}: Job {name} failed: {why}", s.step));
                }
                JobState::Missing => {
                    return Decision::Fail(format!("step {}: Job {name} does not exist", s.step));
                }
                _ => {}
            }
        }
        if s.jobs.iter().all(|(_, st)| *st == JobState::Complete) {
            continue;
        }
        let suspended: Vec<String> = s
            .jobs
            .iter()
            .filter(|(_, st)| *st == JobState::Suspended)
            .map(|(n, _)| n.clone())
            .collect();
        return if suspended.is_empty() {
            Decision::Wait
        } else {
            Decision::Resume(suspended)
        };
    }
    Decision::Done
}

/// Reads and resumes Jobs.
pub trait Api {
    /// The Job's JSON, `None` when it does not exist.
    fn get_job(&mut self, name: &str) -> Result<Option<serde_json::Value>>;
    /// Sets `spec.suspend` to false.
    fn resume(&mut self, name: &str) -> Result<()>;
}

/// How a drive ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Failed(String),
}

/// Drives `steps` (step name, Job names) until every Job completed or one failed.
pub fn drive(
    api: &mut dyn Api,
    steps: &[(String, Vec<String>)],
    poll: Duration,
) -> Result<Outcome> {
    loop {
        let mut states = Vec::with_capacity(steps.len());
        for (step, names) in steps {
            let mut jobs = Vec::with_capacity(names.len());
            for n in names {
                let state = api.get_job(n)?.map_or(JobState::Missing, |j| job_state(&j));
                jobs.push((n.clone(), state));
            }
            states.push(StepJobs {
                step: step.clone(),
                jobs,
            });
        }
        match decide(&states) {
            Decision::Done => return Ok(Outcome::Done),
            Decision::Fail(why) => return Ok(Outcome::Failed(why)),
            Decision::Resume(names) => {
                for n in &names {
                    api.resume(n)?;
                    tracing::info!(job = %n, "resumed");
                }
            }
            Decision::Wait => std::thread::sleep(poll),
        }
    }
}

/// `--step NAME=JOB[,JOB…]` as (step, Jobs).
pub fn parse_step(arg: &str) -> Result<(String, Vec<String>)> {
    let (step, jobs) = arg
        .split_once('=')
        .ok_or_else(|| Error::Usage(format!("--step {arg:?}: write NAME=JOB[,JOB…]")))?;
    let jobs: Vec<String> = jobs
        .split(',')
        .map(str::trim)
        .filter(|j| !j.is_empty())
        .map(str::to_string)
        .collect();
    if step.is_empty() || jobs.is_empty() {
        return Err(Error::Usage(format!(
            "--step {arg:?}: write NAME=JOB[,JOB…]"
        )));
    }
    Ok((step.to_string(), jobs))
}

/// The Kubernetes API over HTTP(S): the in-cluster address, token and CA by default.
#[derive(Debug)]
pub struct HttpApi {
    base: String,
    namespace: String,
    token: Option<String>,
    runtime: tokio::runtime::Runtime,
    client: hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        http_body_util::Full<bytes::Bytes>,
    >,
}

/// Where a pod finds its ServiceAccount's token and the cluster's CA.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

impl HttpApi {
    /// `api`: an address (`http://…` or `https://…`), else the in-cluster one
    /// (`KUBERNETES_SERVICE_HOST`, `KUBERNETES_SERVICE_PORT`). The token and CA come
    /// from the pod's ServiceAccount folder when present.
    pub fn new(api: Option<&str>, namespace: &str) -> Result<HttpApi> {
        let base = match api {
            Some(a) => a.trim_end_matches('/').to_string(),
            None => {
                let host = std::env::var("KUBERNETES_SERVICE_HOST").map_err(|_| {
                    Error::Usage(
                        "not in a Kubernetes pod (no KUBERNETES_SERVICE_HOST): give --api".into(),
                    )
                })?;
                let port =
                    std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
                if host.contains(':') {
                    format!("https://[{host}]:{port}")
                } else {
                    format!("https://{host}:{port}")
                }
            }
        };
        let dir = std::path::Path::new(SERVICE_ACCOUNT_DIR);
        let token = std::fs::read_to_string(dir.join("token"))
            .ok()
            .map(|t| t.trim().to_string());
        let mut roots = rustls::RootCertStore::empty();
        let ca = dir.join("ca.crt");
        if ca.is_file() {
            use rustls_pki_types::pem::PemObject;
            let certs = rustls_pki_types::CertificateDer::pem_file_iter(&ca)
                .map_err(|e| Error::Usage(format!("reading {}: {e}", ca.display())))?;
            for cert in certs {
                let cert =
                    cert.map_err(|e| Error::Usage(format!("reading {}: {e}", ca.display())))?;
                roots
                    .add(cert)
                    .map_err(|e| Error::Usage(format!("a certificate of {}: {e}", ca.display())))?;
            }
        } else if base.starts_with("https://") {
            return Err(Error::Usage(format!(
                "no cluster CA at {} to check {base}",
                ca.display()
            )));
        }
        let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Usage(format!("TLS settings: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(connector);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Usage(format!("an async runtime: {e}")))?;
        Ok(HttpApi {
            base,
            namespace: namespace.to_string(),
            token,
            runtime,
            client,
        })
    }

    fn job_url(&self, name: &str) -> String {
        format!(
            "{}/apis/batch/v1/namespaces/{}/jobs/{name}",
            self.base, self.namespace
        )
    }

    /// Sends a request; (status, body).
    fn send(
        &self,
        method: hyper::Method,
        url: &str,
        body: Option<(&str, String)>,
    ) -> Result<(u16, String)> {
        let mut req = hyper::Request::builder().method(method.clone()).uri(url);
        req = req.header(hyper::header::ACCEPT, "application/json");
        if let Some(t) = &self.token {
            req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let bytes = match body {
            Some((kind, text)) => {
                req = req.header(hyper::header::CONTENT_TYPE, kind);
                bytes::Bytes::from(text)
            }
            None => bytes::Bytes::new(),
        };
        let req = req
            .body(http_body_util::Full::new(bytes))
            .map_err(|e| Error::Usage(format!("{method} {url}: {e}")))?;
        let client = self.client.clone();
        self.runtime.block_on(async move {
            use http_body_util::BodyExt;
            let resp = tokio::time::timeout(Duration::from_secs(60), client.request(req))
                .await
                .map_err(|_| Error::Usage(format!("{method} {url}: no answer in 60 s")))?
                .map_err(|e| Error::Usage(format!("{method} {url}: {e}")))?;
            let status = resp.status().as_u16();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| Error::Usage(format!("{method} {url}: reading the answer: {e}")))?
                .to_bytes();
            Ok((status, String::from_utf8_lossy(&body).into_owned()))
        })
    }
}

impl Api for HttpApi {
    fn get_job(&mut self, name: &str) -> Result<Option<serde_json::Value>> {
        let url = self.job_url(name);
        let (status, body) = self.send(hyper::Method::GET, &url, None)?;
        match status {
            404 => Ok(None),
            200 => serde_json::from_str(&body)
                .map(Some)
                .map_err(|e| Error::Usage(format!("GET {url}: {e}"))),
            _ => Err(Error::Usage(format!("GET {url}: {status} {body}"))),
        }
    }

    fn resume(&mut self, name: &str) -> Result<()> {
        let url = self.job_url(name);
        let (status, body) = self.send(
            hyper::Method::PATCH,
            &url,
            Some((
                "application/merge-patch+json",
                r#"{"spec":{"suspend":false}}"#.to_string(),
            )),
        )?;
        if status == 200 {
            Ok(())
        } else {
            Err(Error::Usage(format!("PATCH {url}: {status} {body}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, jobs: &[(&str, JobState)]) -> StepJobs {
        StepJobs {
            step: name.into(),
            jobs: jobs
                .iter()
                .map(|(n, s)| (n.to_string(), s.clone()))
                .collect(),
        }
    }

    #[test]
    fn the_first_unfinished_step_is_resumed_then_waited_for() {
        use JobState::*;
        // Nothing started: the first step's Jobs (both arrays) are resumed.
        let steps = [
            step("text", &[("r-text-0", Suspended), ("r-text-1", Suspended)]),
            step("sig", &[("r-sig", Suspended)]),
        ];
        assert_eq!(
            decide(&steps),
            Decision::Resume(vec!["r-text-0".into(), "r-text-1".into()])
        );
        // One array done, one running: wait; the next step stays suspended.
        let steps = [
            step("text", &[("r-text-0", Complete), ("r-text-1", Active)]),
            step("sig", &[("r-sig", Suspended)]),
        ];
        assert_eq!(decide(&steps), Decision::Wait);
        // A driver restarted after resuming one of two Jobs resumes the other.
        let steps = [step(
            "text",
            &[("r-text-0", Active), ("r-text-1", Suspended)],
        )];
        assert_eq!(decide(&steps), Decision::Resume(vec!["r-text-1".into()]));
        // The step before complete: the next one goes.
        let steps = [
            step("text", &[("r-text-0", Complete), ("r-text-1", Complete)]),
            step("sig", &[("r-sig", Suspended)]),
        ];
        assert_eq!(decide(&steps), Decision::Resume(vec!["r-sig".into()]));
        let steps = [
            step("text", &[("a", Complete)]),
            step("sig", &[("b", Complete)]),
        ];
        assert_eq!(decide(&steps), Decision::Done);
    }

    #[test]
    fn a_failed_or_missing_job_fails_the_run_and_nothing_after_it_runs() {
        use JobState::*;
        let steps = [
            step("text", &[("r-text", Failed("BackoffLimitExceeded".into()))]),
            step("sig", &[("r-sig", Suspended)]),
        ];
        match decide(&steps) {
            Decision::Fail(why) => {
                assert!(why.contains("r-text") && why.contains("Backoff"), "{why}")
            }
            d => panic!("{d:?}"),
        }
        let steps = [
            step("text", &[("r-text", Complete)]),
            step("sig", &[("r-sig", Missing)]),
        ];
        assert!(matches!(decide(&steps), Decision::Fail(_)));
    }

    #[test]
    fn job_states_from_their_json() {
        let j = |v: serde_json::Value| job_state(&v);
        assert_eq!(
            j(serde_json::json!({"spec": {"suspend": true}})),
            JobState::Suspended
        );
        assert_eq!(
            j(serde_json::json!({"spec": {"suspend": false}, "status": {"active": 3}})),
            JobState::Active
        );
        assert_eq!(
            j(serde_json::json!({"spec": {}, "status": {"conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True"}]}})),
            JobState::Complete
        );
        assert_eq!(
            j(
                serde_json::json!({"spec": {"suspend": true}, "status": {"conditions": [
                {"type": "Suspended", "status": "True"}]}})
            ),
            JobState::Suspended
        );
        assert_eq!(
            j(serde_json::json!({"spec": {}, "status": {"conditions": [
                {"type": "Failed", "status": "True", "reason": "FailedIndexes",
                 "message": "Job has failed indexes"}]}})),
            JobState::Failed("FailedIndexes: Job has failed indexes".into())
        );
        // A condition that no longer holds counts for nothing.
        assert_eq!(
            j(
                serde_json::json!({"spec": {"suspend": false}, "status": {"conditions": [
                {"type": "Failed", "status": "False"}]}})
            ),
            JobState::Active
        );
    }

    #[test]
    fn step_arguments() -> Result<()> {
        assert_eq!(
            parse_step("text=r-text-0,r-text-1")?,
            ("text".into(), vec!["r-text-0".into(), "r-text-1".into()])
        );
        assert!(parse_step("text").is_err());
        assert!(parse_step("text=").is_err());
        Ok(())
    }
}
