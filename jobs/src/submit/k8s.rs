//! Kubernetes: each step is one or more Indexed Jobs (`completionMode: Indexed`, the
//! index in `JOB_COMPLETION_INDEX`, at most 100,000 indexes a Job, each told its first
//! task in `TOKENMILL_TASK_OFFSET`), all created suspended. A driver Job (`mill drive`,
//! [`super::drive`]) with its ServiceAccount, Role and RoleBinding resumes a step's Jobs
//! when every Job of the step before has completed, and fails when one fails: no pod
//! of a step exists before it can run, so waiting steps hold no cores and poll nothing.
//!
//! A train step that names `nodes` or `gpus_per_node` is an Indexed Job of one pod per
//! node (`nvidia.com/gpu` limits) with a headless Service as its subdomain: pod `i` is
//! `<job>-<i>.<service>`, so rank 0's address is `<job>-0.<service>`, given to every
//! pod as `MASTER_ADDR`; each pod's `mill step` starts one trainer per GPU.
//!
//! The manifests are typed values written as JSON (`kubectl create -f` reads JSON), one
//! `List` per step and one for the driver.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use pipeline::Result;

use super::{
    Array, JobFile, StepJob, SubmitConfig, Submitted, arrays, dns_name, json_text, run_name,
    run_with_file,
};
use crate::spec::Pipeline;

/// Most indexes of one Indexed Job (the API's limit on `completions` with
/// `backoffLimitPerIndex`, and on `parallelism`).
pub const MAX_INDEXES: usize = 100_000;

/// `[submit.k8s]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct K8sConfig {
    /// An image with `mill` on its `PATH` (scripts/image.sh).
    pub image: String,
    /// The image of a train step: `mill` and `mill-train` with libtorch.
    pub trainer_image: String,
    pub namespace: String,
    /// The ServiceAccount of the task pods (e.g. one allowed to reach the bucket).
    pub service_account: Option<String>,
    /// Limits as multiples of the requests (1.0: limits equal requests).
    pub limit_factor: f64,
    /// Pods run at once per Job (default: every task).
    pub parallelism: Option<u32>,
    /// Retries of each index.
    pub backoff_limit_per_index: u32,
    /// Seconds between the driver's looks at the Jobs.
    pub poll_s: u64,
}

impl Default for K8sConfig {
    fn default() -> Self {
        K8sConfig {
            image: "tokenmill:latest".into(),
            trainer_image: "tokenmill-trainer:latest".into(),
            namespace: "default".into(),
            service_account: None,
            limit_factor: 1.0,
            parallelism: None,
            backoff_limit_per_index: 2,
            poll_s: 10,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    pub name: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resources {
    pub requests: BTreeMap<String, String>,
    pub limits: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Container {
    pub name: String,
    pub image: String,
    pub command: Vec<String>,
    pub env: Vec<EnvVar>,
    pub resources: Resources,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub restart_policy: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// The headless Service that names the pods (train steps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    pub containers: Vec<Container>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemplateMeta {
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodTemplate {
    pub metadata: TemplateMeta,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitCodes {
    pub container_name: String,
    pub operator: String,
    pub values: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodFailureRule {
    pub action: String,
    pub on_exit_codes: ExitCodes,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodFailurePolicy {
    pub rules: Vec<PodFailureRule>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_mode: Option<String>,
    pub completions: usize,
    pub parallelism: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_limit_per_index: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_failed_indexes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_failure_policy: Option<PodFailurePolicy>,
    pub suspend: bool,
    pub template: PodTemplate,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(rename = "clusterIP")]
    pub cluster_ip: String,
    pub selector: BTreeMap<String, String>,
    /// Pods are named in DNS before they are ready: ranks meet while starting.
    pub publish_not_ready_addresses: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub verbs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    pub api_group: String,
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Subject {
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

/// The objects `mill submit` creates.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind")]
pub enum Object {
    Job {
        #[serde(rename = "apiVersion")]
        api_version: String,
        metadata: ObjectMeta,
        spec: JobSpec,
    },
    Service {
        #[serde(rename = "apiVersion")]
        api_version: String,
        metadata: ObjectMeta,
        spec: ServiceSpec,
    },
    ServiceAccount {
        #[serde(rename = "apiVersion")]
        api_version: String,
        metadata: ObjectMeta,
    },
    Role {
        #[serde(rename = "apiVersion")]
        api_version: String,
        metadata: ObjectMeta,
        rules: Vec<PolicyRule>,
    },
    RoleBinding {
        #[serde(rename = "apiVersion")]
        api_version: String,
        metadata: ObjectMeta,
        #[serde(rename = "roleRef")]
        role_ref: RoleRef,
        subjects: Vec<Subject>,
    },
}

/// `kind: List`: what one file holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct List {
    pub api_version: String,
    pub kind: String,
    pub items: Vec<Object>,
}

/// A DNS-1035 label (a letter first), at most `max` long.
pub fn label_name(s: &str, max: usize) -> String {
    let name = dns_name(s, max);
    if name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name
    } else {
        dns_name(&format!("t-{name}"), max)
    }
}

/// Job names leave room for the pods' `-<index>` host names (63 at most).
const JOB_NAME_MAX: usize = 56;

fn labels(p: &Pipeline, step: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            "tokenmill".to_string(),
        ),
        ("tokenmill/run".to_string(), dns_name(&run_name(p), 63)),
        ("tokenmill/step".to_string(), dns_name(step, 63)),
    ])
}

fn meta(p: &Pipeline, name: String, step: &str) -> ObjectMeta {
    ObjectMeta {
        name,
        namespace: p.submit.k8s.namespace.clone(),
        labels: labels(p, step),
    }
}

fn env(config: &SubmitConfig, extra: &[(&str, String)]) -> Vec<EnvVar> {
    let mut all = config.env.clone();
    for (k, v) in extra {
        all.insert((*k).to_string(), v.clone());
    }
    all.into_iter()
        .map(|(name, value)| EnvVar { name, value })
        .collect()
}

fn resources(job: &StepJob, factor: f64, gpus: Option<u32>) -> Resources {
    let amounts = |factor: f64| {
        let mut m = BTreeMap::from([
            (
                "cpu".to_string(),
                format!("{}m", (job.cpus as f64 * 1000.0 * factor).round() as u64),
            ),
            (
                "memory".to_string(),
                format!("{}Mi", (job.memory_mib as f64 * factor).round() as u64),
            ),
        ]);
        if let Some(g) = gpus {
            // Extended resources: requests equal limits.
            m.insert("nvidia.com/gpu".to_string(), g.to_string());
        }
        m
    };
    Resources {
        requests: amounts(1.0),
        limits: amounts(factor.max(1.0)),
    }
}

/// The Indexed Job of one array of a step (created suspended).
pub fn array_job(
    p: &Pipeline,
    config: &SubmitConfig,
    job: &StepJob,
    array: Array,
    name: String,
) -> Object {
    let k = &config.k8s;
    let parallelism = k
        .parallelism
        .map_or(array.size, |n| (n as usize).clamp(1, array.size))
        .min(MAX_INDEXES);
    indexed_job(
        p,
        name,
        &job.step,
        array.size,
        parallelism,
        None,
        Container {
            name: "task".into(),
            // A classify step on GPUs runs the trainer's image (mill-classify-gpu).
            image: if job.task_gpus.is_some() {
                k.trainer_image.clone()
            } else {
                k.image.clone()
            },
            command: job.command.clone(),
            env: env(
                config,
                &[(pipeline::tasks::TASK_OFFSET_VAR, array.offset.to_string())],
            ),
            resources: resources(job, k.limit_factor, job.task_gpus),
        },
    )
}

/// A suspended Indexed Job of `completions` pods running `container`, each index
/// retried `backoff_limit_per_index` times, the Job failed by any failed index.
fn indexed_job(
    p: &Pipeline,
    name: String,
    step: &str,
    completions: usize,
    parallelism: usize,
    subdomain: Option<String>,
    container: Container,
) -> Object {
    let k = &p.submit.k8s;
    Object::Job {
        api_version: "batch/v1".into(),
        metadata: meta(p, name, step),
        spec: JobSpec {
            completion_mode: Some("Indexed".into()),
            completions,
            parallelism,
            backoff_limit_per_index: Some(k.backoff_limit_per_index),
            max_failed_indexes: Some(0),
            backoff_limit: None,
            pod_failure_policy: None,
            suspend: true,
            template: PodTemplate {
                metadata: TemplateMeta {
                    labels: labels(p, step),
                },
                spec: PodSpec {
                    restart_policy: "Never".into(),
                    service_account_name: k.service_account.clone(),
                    subdomain,
                    containers: vec![container],
                },
            },
        },
    }
}

/// A train step: an Indexed Job of one pod per node and its headless Service.
pub fn train_objects(
    p: &Pipeline,
    config: &SubmitConfig,
    job: &StepJob,
    nodes: u32,
    per_node: u32,
    gpus: bool,
) -> Vec<Object> {
    let k = &config.k8s;
    let name = label_name(&format!("{}-{}", run_name(p), job.step), JOB_NAME_MAX);
    let master = format!("{name}-0.{name}");
    let service = Object::Service {
        api_version: "v1".into(),
        metadata: meta(p, name.clone(), &job.step),
        spec: ServiceSpec {
            cluster_ip: "None".into(),
            selector: labels(p, &job.step),
            publish_not_ready_addresses: true,
        },
    };
    let job_object = indexed_job(
        p,
        name.clone(),
        &job.step,
        nodes as usize,
        nodes as usize,
        Some(name),
        Container {
            name: "train".into(),
            image: k.trainer_image.clone(),
            command: job.command.clone(),
            env: env(
                config,
                &[
                    ("TOKENMILL_NODES", nodes.to_string()),
                    ("TOKENMILL_GPUS_PER_NODE", per_node.to_string()),
                    ("MASTER_ADDR", master),
                    ("MASTER_PORT", pipeline::world::DEFAULT_PORT.to_string()),
                ],
            ),
            resources: resources(job, k.limit_factor, gpus.then_some(per_node)),
        },
    );
    vec![service, job_object]
}

/// The driver: its ServiceAccount, a Role to read and resume Jobs, the binding, and
/// the Job running `mill drive` over `steps` (step name, its Jobs' names).
pub fn driver_objects(p: &Pipeline, mill: &str, steps: &[(String, Vec<String>)]) -> Vec<Object> {
    let k = &p.submit.k8s;
    let name = label_name(&format!("{}-driver", run_name(p)), JOB_NAME_MAX);
    let mut command = vec![
        mill.to_string(),
        "drive".into(),
        "--namespace".into(),
        k.namespace.clone(),
        "--poll".into(),
        k.poll_s.max(1).to_string(),
    ];
    for (step, jobs) in steps {
        command.push("--step".into());
        command.push(format!("{step}={}", jobs.join(",")));
    }
    let small = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), cpu.to_string()),
            ("memory".to_string(), memory.to_string()),
        ])
    };
    vec![
        Object::ServiceAccount {
            api_version: "v1".into(),
            metadata: meta(p, name.clone(), "driver"),
        },
        Object::Role {
            api_version: "rbac.authorization.k8s.io/v1".into(),
            metadata: meta(p, name.clone(), "driver"),
            rules: vec![PolicyRule {
                api_groups: vec!["batch".into()],
                resources: vec!["jobs".into()],
                verbs: vec!["get".into(), "patch".into()],
            }],
        },
        Object::RoleBinding {
            api_version: "rbac.authorization.k8s.io/v1".into(),
            metadata: meta(p, name.clone(), "driver"),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: name.clone(),
            },
            subjects: vec![Subject {
                kind: "ServiceAccount".into(),
                name: name.clone(),
                namespace: k.namespace.clone(),
            }],
        },
        Object::Job {
            api_version: "batch/v1".into(),
            metadata: meta(p, name.clone(), "driver"),
            spec: JobSpec {
                completion_mode: None,
                completions: 1,
                parallelism: 1,
                backoff_limit_per_index: None,
                max_failed_indexes: None,
                // A restarted driver picks up where the Jobs stand; a failed step
                // (exit 3) fails the driver at once.
                backoff_limit: Some(6),
                pod_failure_policy: Some(PodFailurePolicy {
                    rules: vec![PodFailureRule {
                        action: "FailJob".into(),
                        on_exit_codes: ExitCodes {
                            container_name: "driver".into(),
                            operator: "In".into(),
                            values: vec![super::drive::STEP_FAILED],
                        },
                    }],
                }),
                suspend: false,
                template: PodTemplate {
                    metadata: TemplateMeta {
                        labels: labels(p, "driver"),
                    },
                    spec: PodSpec {
                        restart_policy: "Never".into(),
                        service_account_name: Some(name),
                        subdomain: None,
                        containers: vec![Container {
                            name: "driver".into(),
                            image: k.image.clone(),
                            command,
                            env: Vec::new(),
                            resources: Resources {
                                requests: small("50m", "64Mi"),
                                limits: small("200m", "128Mi"),
                            },
                        }],
                    },
                },
            },
        },
    ]
}

fn list(items: Vec<Object>) -> List {
    List {
        api_version: "v1".into(),
        kind: "List".into(),
        items,
    }
}

/// Every step's objects and the driver's; created in order with `kubectl create -f`
/// when `submit`.
pub fn submit(
    p: &Pipeline,
    config: &SubmitConfig,
    jobs: &[StepJob],
    submit: bool,
) -> Result<Vec<Submitted>> {
    let mut out: Vec<Submitted> = Vec::new();
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let base = format!("{}-{}", run_name(p), job.step);
        let items = match job.gpus {
            Some(g) => train_objects(p, config, job, g.nodes, g.per_node, g.gpus),
            None => {
                let parts = arrays(job.tasks, MAX_INDEXES);
                parts
                    .iter()
                    .enumerate()
                    .map(|(k, a)| {
                        let name = if parts.len() == 1 {
                            label_name(&base, JOB_NAME_MAX)
                        } else {
                            let suffix = format!("-{k}");
                            format!("{}{suffix}", label_name(&base, JOB_NAME_MAX - suffix.len()))
                        };
                        array_job(p, config, job, *a, name)
                    })
                    .collect()
            }
        };
        let names: Vec<String> = items
            .iter()
            .filter_map(|o| match o {
                Object::Job { metadata, .. } => Some(metadata.name.clone()),
                _ => None,
            })
            .collect();
        steps.push((job.step.clone(), names.clone()));
        out.push(Submitted {
            step: job.step.clone(),
            files: vec![JobFile {
                name: format!("{i:02}-{}.k8s.json", job.step),
                text: json_text(&list(items), "Kubernetes objects")?,
            }],
            job_ids: if submit { names } else { Vec::new() },
        });
    }
    let mill = jobs
        .first()
        .and_then(|j| j.command.first())
        .cloned()
        .unwrap_or_else(|| "mill".into());
    let driver = driver_objects(p, &mill, &steps);
    let driver_name = driver
        .iter()
        .find_map(|o| match o {
            Object::Job { metadata, .. } => Some(metadata.name.clone()),
            _ => None,
        })
        .unwrap_or_default();
    out.push(Submitted {
        step: "driver".into(),
        files: vec![JobFile {
            name: format!("{:02}-driver.k8s.json", jobs.len()),
            text: json_text(&list(driver), "Kubernetes objects")?,
        }],
        job_ids: if submit {
            vec![driver_name]
        } else {
            Vec::new()
        },
    });
    if submit {
        // The suspended steps first, the driver last: it finds every Job it names.
        for s in &out {
            for f in &s.files {
                run_with_file(
                    "kubectl",
                    &["create".into(), "-f".into(), "{}".into()],
                    &f.name,
                    &f.text,
                )?;
                tracing::info!(step = %s.step, file = %f.name, "created");
            }
        }
    }
    Ok(out)
}
