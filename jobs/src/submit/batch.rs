//! AWS Batch: a `SubmitJob` request per array of a step (an array job when it has 2
//! tasks or more; Batch takes 2 to 10,000), with `dependsOn` every job of the step
//! before (Batch takes 20, so a step may be 200,000 tasks) and a retry strategy.
//!
//! A train step that names `nodes` or `gpus_per_node` is a multi-node parallel job: a
//! `RegisterJobDefinition` request (`type: multinode`, `nodeProperties` with the GPUs,
//! vCPUs and memory of each node, the trainer image) and a `SubmitJob` of that
//! definition. Batch starts one container per node; its `mill step` starts one trainer
//! per GPU, rank `AWS_BATCH_JOB_NODE_INDEX × gpus_per_node + local`, meeting the main
//! node at `AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS` ([`pipeline::world`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use pipeline::{Error, Result};

use super::{
    Array, JobFile, StepJob, SubmitConfig, Submitted, array_name, arrays, dns_name, json_text,
    run_name, run_with_file,
};
use crate::spec::Pipeline;

/// Largest array job Batch accepts.
pub const MAX_ARRAY_SIZE: usize = 10_000;
/// Most jobs one job may depend on.
pub const MAX_DEPENDENCIES: usize = 20;

/// `[submit.aws-batch]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BatchConfig {
    pub job_queue: String,
    /// A job definition (name, `name:revision` or ARN) whose image holds `mill`.
    pub job_definition: String,
    /// Attempts per task (1 to 10).
    pub attempts: u32,
    /// The queue of a train step's multi-node job (GPU instances; default `job_queue`).
    pub gpu_job_queue: Option<String>,
    /// The image of a train step's job definition: `mill` and `mill-train` with
    /// libtorch (scripts/image.sh --trainer).
    pub trainer_image: String,
    /// The job definition of the tasks of a classify step on GPUs: one whose image is
    /// the trainer's (`mill-classify-gpu` with libtorch); default `job_definition`.
    /// They go to `gpu_job_queue`.
    pub gpu_job_definition: Option<String>,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            job_queue: "tokenmill".into(),
            job_definition: "tokenmill".into(),
            attempts: 3,
            gpu_job_queue: None,
            trainer_image: "tokenmill-trainer:latest".into(),
            gpu_job_definition: None,
        }
    }
}

/// `{"name": …, "value": …}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyValue {
    pub name: String,
    pub value: String,
}

/// `{"type": "VCPU" | "MEMORY" | "GPU", "value": …}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resource {
    #[serde(rename = "type")]
    pub kind: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerOverrides {
    pub command: Vec<String>,
    pub resource_requirements: Vec<Resource>,
    pub environment: Vec<KeyValue>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dependency {
    pub job_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArrayProperties {
    pub size: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetryStrategy {
    pub attempts: u32,
}

/// A `SubmitJob` request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmitJob {
    pub job_name: String,
    pub job_queue: String,
    pub job_definition: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array_properties: Option<ArrayProperties>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<Dependency>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_overrides: Option<ContainerOverrides>,
    pub retry_strategy: RetryStrategy,
    pub propagate_tags: bool,
    pub tags: BTreeMap<String, String>,
}

/// The container of a node range.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerProperties {
    pub image: String,
    pub command: Vec<String>,
    pub resource_requirements: Vec<Resource>,
    pub environment: Vec<KeyValue>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRange {
    pub target_nodes: String,
    pub container: ContainerProperties,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeProperties {
    pub num_nodes: u32,
    pub main_node: u32,
    pub node_range_properties: Vec<NodeRange>,
}

/// A `RegisterJobDefinition` request of a multi-node parallel job.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterJobDefinition {
    pub job_definition_name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub node_properties: NodeProperties,
    pub retry_strategy: RetryStrategy,
    pub propagate_tags: bool,
    pub tags: BTreeMap<String, String>,
}

fn environment(config: &SubmitConfig, extra: &[(&str, String)]) -> Vec<KeyValue> {
    let mut env: BTreeMap<String, String> = config.env.clone();
    for (k, v) in extra {
        env.insert((*k).to_string(), v.clone());
    }
    env.into_iter()
        .map(|(name, value)| KeyValue { name, value })
        .collect()
}

fn tags(p: &Pipeline, step: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("tokenmill-run".to_string(), run_name(p)),
        ("tokenmill-step".to_string(), step.to_string()),
    ])
}

fn resources(job: &StepJob, gpus: Option<u32>) -> Vec<Resource> {
    let mut r = vec![
        Resource {
            kind: "VCPU".into(),
            value: job.cpus.to_string(),
        },
        Resource {
            kind: "MEMORY".into(),
            value: job.memory_mib.to_string(),
        },
    ];
    if let Some(g) = gpus {
        r.push(Resource {
            kind: "GPU".into(),
            value: g.to_string(),
        });
    }
    r
}

/// The `SubmitJob` request of one array of a step; `depends_on` are the jobs of the
/// step before.
pub fn array_request(
    p: &Pipeline,
    config: &SubmitConfig,
    job: &StepJob,
    array: Array,
    name: String,
    depends_on: &[String],
) -> SubmitJob {
    let b = &config.aws_batch;
    SubmitJob {
        job_name: name,
        job_queue: b.job_queue.clone(),
        job_definition: b.job_definition.clone(),
        array_properties: (array.size >= 2).then_some(ArrayProperties { size: array.size }),
        depends_on: dependencies(depends_on),
        container_overrides: Some(ContainerOverrides {
            command: job.command.clone(),
            resource_requirements: resources(job, job.task_gpus),
            environment: environment(
                config,
                &[(pipeline::tasks::TASK_OFFSET_VAR, array.offset.to_string())],
            ),
        }),
        retry_strategy: RetryStrategy {
            attempts: b.attempts.clamp(1, 10),
        },
        propagate_tags: true,
        tags: tags(p, &job.step),
    }
}

fn dependencies(ids: &[String]) -> Vec<Dependency> {
    ids.iter()
        .map(|id| Dependency { job_id: id.clone() })
        .collect()
}

/// A train step's multi-node job definition: every node runs the same container.
pub fn train_definition(
    p: &Pipeline,
    config: &SubmitConfig,
    job: &StepJob,
    nodes: u32,
    per_node: u32,
    gpus: bool,
) -> RegisterJobDefinition {
    let name = dns_name(&format!("{}-{}", run_name(p), job.step), 128);
    RegisterJobDefinition {
        job_definition_name: name,
        kind: "multinode".into(),
        node_properties: NodeProperties {
            num_nodes: nodes,
            main_node: 0,
            node_range_properties: vec![NodeRange {
                target_nodes: "0:".into(),
                container: ContainerProperties {
                    image: config.aws_batch.trainer_image.clone(),
                    command: job.command.clone(),
                    resource_requirements: resources(job, gpus.then_some(per_node)),
                    environment: environment(
                        config,
                        &[("TOKENMILL_GPUS_PER_NODE", per_node.to_string())],
                    ),
                },
            }],
        },
        retry_strategy: RetryStrategy {
            attempts: config.aws_batch.attempts.clamp(1, 10),
        },
        propagate_tags: true,
        tags: tags(p, &job.step),
    }
}

/// Every step's requests; submitted in order with the `aws` command line when `submit`
/// (a dry run names each dependency `<job id of step …>`).
pub fn submit(
    p: &Pipeline,
    config: &SubmitConfig,
    jobs: &[StepJob],
    submit: bool,
) -> Result<Vec<Submitted>> {
    let mut out: Vec<Submitted> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let previous: Vec<String> = match out.last() {
            None => Vec::new(),
            Some(s) if submit => s.job_ids.clone(),
            Some(s) => (0..s.files.len().max(1))
                .map(|k| {
                    if s.files.len() <= 1 {
                        format!("<job id of step {}>", s.step)
                    } else {
                        format!("<job id of step {} array {k}>", s.step)
                    }
                })
                .collect(),
        };
        if previous.len() > MAX_DEPENDENCIES {
            return Err(Error::Usage(format!(
                "step {} depends on {} array jobs of the step before; AWS Batch takes {} \
                 (at most {} tasks a step)",
                job.step,
                previous.len(),
                MAX_DEPENDENCIES,
                MAX_DEPENDENCIES * MAX_ARRAY_SIZE
            )));
        }
        let base = format!("{}-{}", run_name(p), job.step);
        let mut files = Vec::new();
        let mut job_ids = Vec::new();
        if let Some(g) = job.gpus {
            let def = train_definition(p, config, job, g.nodes, g.per_node, g.gpus);
            let def_file = JobFile {
                name: format!("{i:02}-{}.jobdef.json", job.step),
                text: json_text(&def, "a job definition")?,
            };
            let definition = if submit {
                let answer = run_with_file(
                    "aws",
                    &aws_args("register-job-definition"),
                    &def_file.name,
                    &def_file.text,
                )?;
                answer_field(&answer, "jobDefinitionArn")?
            } else {
                def.job_definition_name.clone()
            };
            let mut req = array_request(
                p,
                config,
                job,
                Array { offset: 0, size: 1 },
                dns_name(&base, 128),
                &previous,
            );
            req.job_definition = definition;
            req.job_queue = config
                .aws_batch
                .gpu_job_queue
                .clone()
                .unwrap_or_else(|| config.aws_batch.job_queue.clone());
            // The definition holds the command, resources and variables of every node.
            req.container_overrides = None;
            files.push(def_file);
            files.push(JobFile {
                name: format!("{i:02}-{}.json", job.step),
                text: json_text(&req, "a SubmitJob request")?,
            });
        } else {
            let parts = arrays(job.tasks, MAX_ARRAY_SIZE);
            for (k, a) in parts.iter().enumerate() {
                let mut req = array_request(
                    p,
                    config,
                    job,
                    *a,
                    array_name(&base, k, parts.len(), 128),
                    &previous,
                );
                if job.task_gpus.is_some() {
                    let b = &config.aws_batch;
                    req.job_definition = b
                        .gpu_job_definition
                        .clone()
                        .unwrap_or_else(|| b.job_definition.clone());
                    req.job_queue = b
                        .gpu_job_queue
                        .clone()
                        .unwrap_or_else(|| b.job_queue.clone());
                }
                files.push(JobFile {
                    name: if parts.len() == 1 {
                        format!("{i:02}-{}.json", job.step)
                    } else {
                        format!("{i:02}-{}.{k}.json", job.step)
                    },
                    text: json_text(&req, "a SubmitJob request")?,
                });
            }
        }
        if submit {
            for f in files.iter().filter(|f| !f.name.ends_with(".jobdef.json")) {
                let answer = run_with_file("aws", &aws_args("submit-job"), &f.name, &f.text)?;
                let id = answer_field(&answer, "jobId")?;
                tracing::info!(step = %job.step, job = %id, "submitted");
                job_ids.push(id);
            }
        }
        out.push(Submitted {
            step: job.step.clone(),
            files,
            job_ids,
        });
    }
    Ok(out)
}

fn aws_args(operation: &str) -> Vec<String> {
    [
        "batch",
        operation,
        "--output",
        "json",
        "--cli-input-json",
        "file://{}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn answer_field(answer: &str, field: &str) -> Result<String> {
    serde_json::from_str::<serde_json::Value>(answer)
        .ok()
        .and_then(|v| v[field].as_str().map(str::to_string))
        .ok_or_else(|| Error::Usage(format!("aws batch answered {answer:?} (no {field})")))
}
