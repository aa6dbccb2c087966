//! `mill`: run a pipeline file end to end, one task of one step, or read a run's state.

use clap::{Parser, Subcommand};
use jobs::{Flags, Pipeline};
use pipeline::cli::{LogFormat, init_logging};
use pipeline::{Location, Storage};

#[derive(Debug, Parser)]
#[command(
    name = "mill",
    version,
    about = "Run tokenmill pipelines and look at their runs"
)]
struct Args {
    #[arg(long, value_enum, default_value_t = LogFormat::Auto, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run every step of a pipeline in order on this machine (each resumable: a rerun
    /// skips what is done), then print a summary.
    Run {
        /// The pipeline file (TOML), at any address.
        pipeline: String,
        /// Start at this step.
        #[arg(long, conflicts_with = "only")]
        from: Option<String>,
        /// Run only this step.
        #[arg(long)]
        only: Option<String>,
        /// Run every step as this many tasks, one after another (a local simulation of a fleet).
        #[arg(long)]
        tasks: Option<usize>,
        /// Worker threads per task (default: the pipeline's, else every core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Redo inputs that are done.
        #[arg(long)]
        force: bool,
        /// Process only the input files no earlier increment had, as increment
        /// `<output>/inc-NNNNN/`: deduplicated against what earlier increments kept,
        /// encoded with the first one's tokenizer, its shards appended to
        /// `<output>/manifest.json` (for cron and timers).
        #[arg(long, conflicts_with_all = ["from", "only", "force"])]
        incremental: bool,
    },
    /// Run an ablation file: every variant's steps (the steps they share once), a
    /// model per variant and seed on the same token budget, then the table that
    /// compares them. `mill run`, `mill submit` and `mill status` read the file too.
    Ablate {
        /// The ablation file (TOML): `pipeline`, `tokens`, `seeds`, `[[variant]]`s.
        ablation: String,
        /// Print the one pipeline the variants make (TOML) and run nothing.
        #[arg(long)]
        print: bool,
        /// Run every step as this many tasks, one after another.
        #[arg(long)]
        tasks: Option<usize>,
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Redo inputs that are done.
        #[arg(long)]
        force: bool,
        /// The comparison as JSON, for machines.
        #[arg(long)]
        json: bool,
    },
    /// Run one task of one step, as a fleet array job does.
    Step {
        pipeline: String,
        step: String,
        /// This task's index (default: SLURM_ARRAY_TASK_ID, AWS_BATCH_JOB_ARRAY_INDEX,
        /// JOB_COMPLETION_INDEX, else 0).
        #[arg(long)]
        task: Option<usize>,
        /// Number of tasks of this step (default: the pipeline's).
        #[arg(long)]
        tasks: Option<usize>,
        #[arg(long, default_value_t = 0)]
        threads: usize,
        #[arg(long)]
        force: bool,
    },
    /// Submit every step of a pipeline to a batch engine as one array job, each
    /// depending on the one before (Slurm through sbatch, AWS Batch through the aws
    /// command line, Kubernetes through kubectl).
    Submit {
        pipeline: String,
        #[arg(long, value_enum)]
        engine: jobs::submit::Engine,
        /// Print what would be submitted (sbatch scripts, SubmitJob requests as JSON,
        /// Job manifests as YAML); submit nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also write them as files in this folder (one per step).
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
    /// Drive a Kubernetes submission from inside the cluster: resume each step's
    /// suspended Jobs when every Job of the step before has completed; exit 3 when a
    /// Job fails (`mill submit --engine k8s` creates the driver Job running this).
    Drive {
        #[arg(long, default_value = "default")]
        namespace: String,
        /// The API's address (default: the pod's in-cluster address, token and CA).
        #[arg(long)]
        api: Option<String>,
        /// Seconds between looks at the Jobs.
        #[arg(long, default_value_t = 10.0)]
        poll: f64,
        /// A step and its Jobs, in order: `--step NAME=JOB[,JOB…]`, repeated.
        #[arg(long, required = true)]
        step: Vec<String>,
    },
    /// Wait until every task of a step has finished (its tasks' completion notes);
    /// exits non-zero after the timeout.
    Wait {
        pipeline: String,
        step: String,
        /// Tasks the step runs as (default: the pipeline's).
        #[arg(long)]
        tasks: Option<usize>,
        /// Seconds to wait at most.
        #[arg(long, default_value_t = 7 * 24 * 3600)]
        timeout: u64,
    },
    /// Where a run stands, per step, from its markers (disk or S3).
    Status {
        /// The run's address (the pipeline's `output`).
        run: String,
        /// Exit with status 3, listing them, when an input started has shown no
        /// heartbeat for this many minutes (its task died or hangs): for cron or a monitor.
        #[arg(long)]
        stalled: Option<u64>,
        /// The status as JSON, for machines.
        #[arg(long)]
        json: bool,
    },
    /// What a run of the whole input will cost, measured on a sample of it: the
    /// sample's input files run through every step on this machine (not the train
    /// phase), each step's CPU time, documents, output bytes, tokens and requests
    /// scaled to the whole input, then core-hours, tasks, wall time on a fleet and the
    /// price of its machines.
    Plan {
        pipeline: String,
        /// Input files to run (spread evenly over the input's listing).
        #[arg(long, default_value_t = 4)]
        sample: usize,
        /// Cores of the fleet, for the wall time.
        #[arg(long, default_value_t = 9000)]
        cores: u64,
        /// Physical cores per machine (a c5.18xlarge has 36); tasks are sized to an hour
        /// of one machine.
        #[arg(long, default_value_t = 36)]
        cores_per_node: u64,
        /// Price of one machine-hour (a c5.18xlarge on demand in us-east-1 lists at 3.06).
        #[arg(long, default_value_t = 3.06)]
        price: f64,
        /// Worker threads for the sample run (0: every core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// The plan as JSON, for machines.
        #[arg(long)]
        json: bool,
    },
    /// Write a self-contained HTML report of a run.
    Report {
        run: String,
        /// Where to write it (any address).
        #[arg(short, long, default_value = "report.html")]
        output: String,
        /// An ablation's comparison as JSON on standard output, instead of the HTML.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logging(args.log_format);
    let storage = Storage::new();
    match args.command {
        Command::Plan {
            pipeline,
            sample,
            cores,
            cores_per_node,
            price,
            threads,
            json,
        } => {
            if cores == 0 || cores_per_node == 0 {
                anyhow::bail!("--cores and --cores-per-node are at least 1");
            }
            let p = Pipeline::load(&storage, &pipeline)?;
            let scratch = tempfile::tempdir()?;
            let plan = jobs::plan::plan(
                &storage,
                &p,
                &jobs::plan::PlanOptions {
                    sample,
                    cores,
                    cores_per_node,
                    price,
                    threads,
                    scratch: scratch.path().join("plan"),
                },
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&plan)?);
            } else {
                print!("{}", jobs::plan::table(&plan));
            }
        }
        Command::Run {
            pipeline,
            from,
            only,
            tasks,
            threads,
            force,
            incremental,
        } => {
            let p = Pipeline::load(&storage, &pipeline)?;
            let flags = Flags {
                threads,
                force,
                progress: true,
            };
            if incremental {
                let inc = jobs::incremental::run(&storage, &p, &flags)?;
                match inc.number {
                    None => println!(
                        "no new inputs; the run's manifest lists {} shards",
                        inc.shards
                    ),
                    Some(k) => {
                        print!("{}", jobs::summary_table(&inc.steps));
                        println!(
                            "increment {k}: {} new inputs; {} shards in {}",
                            inc.inputs,
                            inc.shards,
                            p.run_location()?.join(pipeline::tokens::MANIFEST)
                        );
                    }
                }
                return Ok(());
            }
            let steps = jobs::run(
                &storage,
                &p,
                from.as_deref(),
                only.as_deref(),
                tasks,
                &flags,
            )?;
            print!("{}", jobs::summary_table(&steps));
            for (spec, s) in p.steps.iter().zip(&steps) {
                if s.tokens.is_some() && spec.kind()? == jobs::spec::Kind::TokenizeEncode {
                    println!("token shards: {}", p.step_output(&spec.name)?);
                }
            }
            println!("run: {} (mill status / mill report read it)", p.output);
        }
        Command::Ablate {
            ablation,
            print,
            tasks,
            threads,
            force,
            json,
        } => {
            let p = Pipeline::load(&storage, &ablation)?;
            if p.ablation.is_none() {
                anyhow::bail!("{ablation} is a pipeline, not an ablation (it has no [[variant]])");
            }
            if print {
                print!("{}", toml::to_string(&p)?);
                return Ok(());
            }
            let flags = Flags {
                threads,
                force,
                progress: !json,
            };
            let steps = jobs::run(&storage, &p, None, None, tasks, &flags)?;
            let results = jobs::ablate::results(&storage, &p)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&results)?);
            } else {
                print!("{}", jobs::summary_table(&steps));
                print!("{}", jobs::ablate::table(&results));
                println!("run: {} (mill status / mill report read it)", p.output);
            }
        }
        Command::Step {
            pipeline,
            step,
            task,
            tasks,
            threads,
            force,
        } => {
            let p = Pipeline::load(&storage, &pipeline)?;
            let (i, spec) = p.step(&step)?;
            let kind = spec.kind()?;
            if kind == jobs::spec::Kind::DedupClusters {
                dedup::components::one_allocator_arena();
            }
            let n = p.tasks_of(i, tasks);
            // A one-task step (the train step of a multi-node job among them) is task 0
            // whatever index the engine gives its processes.
            let task = match task {
                None if kind.single_task() => 0,
                flag => pipeline::tasks::task_index(flag, n)?,
            };
            jobs::exec::record_pipeline(&storage, &p)?;
            let flags = Flags {
                threads,
                force,
                progress: true,
            };
            let r = jobs::run_task(&storage, &p, i, task, n, &flags)?;
            let gpus = spec.gpus_per_node.unwrap_or(1) as usize;
            if kind != jobs::spec::Kind::Train || !jobs::train::follower(gpus)? {
                jobs::submit::write_task_note(&storage, &p.step_output(&step)?, task, n)?;
            }
            println!("{}", pipeline::cli::summary(&step, &r));
        }
        Command::Submit {
            pipeline,
            engine,
            dry_run,
            out,
        } => {
            let p = Pipeline::load(&storage, &pipeline)?;
            let done = jobs::submit::submit(&storage, &p, engine, !dry_run)?;
            if let Some(dir) = &out {
                std::fs::create_dir_all(dir)?;
                for f in done.iter().flat_map(|s| &s.files) {
                    std::fs::write(dir.join(&f.name), &f.text)?;
                }
            }
            if dry_run {
                for s in &done {
                    for f in &s.files {
                        println!("# ---- step {}: {}", s.step, f.name);
                        print!("{}", f.text);
                    }
                }
            } else {
                let ids: Vec<String> = done.iter().flat_map(|s| s.job_ids.clone()).collect();
                for s in &done {
                    let list = s.job_ids.join(",");
                    println!("{}\t{}", s.step, if list.is_empty() { "-" } else { &list });
                }
                println!("{}", jobs::submit::watch_hint(engine, &p, &ids));
            }
        }
        Command::Wait {
            pipeline,
            step,
            tasks,
            timeout,
        } => {
            let p = Pipeline::load(&storage, &pipeline)?;
            let (i, spec) = p.step(&step)?;
            let n = if spec.kind()?.single_task() {
                1
            } else {
                p.tasks_of(i, tasks)
            };
            jobs::submit::wait(
                &storage,
                &p,
                &step,
                n,
                std::time::Duration::from_secs(timeout),
                std::time::Duration::from_secs(5),
            )?;
            println!("step {step}: {n} of {n} tasks finished");
        }
        Command::Drive {
            namespace,
            api,
            poll,
            step,
        } => {
            let steps = step
                .iter()
                .map(|s| jobs::submit::drive::parse_step(s))
                .collect::<pipeline::Result<Vec<_>>>()?;
            let mut client = jobs::submit::drive::HttpApi::new(api.as_deref(), &namespace)?;
            match jobs::submit::drive::drive(
                &mut client,
                &steps,
                std::time::Duration::from_secs_f64(poll),
            )? {
                jobs::submit::drive::Outcome::Done => {
                    println!("every step's Jobs completed");
                }
                jobs::submit::drive::Outcome::Failed(why) => {
                    eprintln!("the run failed: {why}");
                    std::process::exit(jobs::submit::drive::STEP_FAILED);
                }
            }
        }
        Command::Status { run, stalled, json } => {
            let run = Location::parse(&run)?;
            let (_, steps) = jobs::status::status(&storage, &run)?;
            let after = stalled.map_or(jobs::status::STALLED_AFTER_SECS, |m| m * 60);
            let silent = jobs::status::stalled(&steps, after);
            if json {
                let stalled: Vec<serde_json::Value> = silent
                    .iter()
                    .map(|(step, r)| serde_json::json!({"step": step, "input": r}))
                    .collect();
                println!(
                    "{}",
                    serde_json::json!({
                        "run": run.to_string(),
                        "steps": steps,
                        "stalled_after_secs": after,
                        "stalled": stalled,
                    })
                );
            } else {
                print!("{}", jobs::status::render(&run, &steps, after));
            }
            if stalled.is_some() && !silent.is_empty() {
                for (step, r) in &silent {
                    eprintln!(
                        "stalled: step {step}, input {} on {}: no heartbeat for {} s",
                        r.stem, r.host, r.seen_secs_ago
                    );
                }
                std::process::exit(3);
            }
        }
        Command::Report { run, output, json } => {
            if json {
                let (p, _) = jobs::status::status(&storage, &Location::parse(&run)?)?;
                if p.ablation.is_none() {
                    anyhow::bail!(
                        "{run} is not an ablation's run: `mill report --json` gives an ablation's \
                         comparison (`mill status --json` gives any run's state)"
                    );
                }
                let results = jobs::ablate::results(&storage, &p)?;
                println!("{}", serde_json::to_string_pretty(&results)?);
                return Ok(());
            }
            let html = jobs::report::report(&storage, &Location::parse(&run)?)?;
            let out = Location::parse(&output)?;
            storage.put(&out, html.as_bytes())?;
            println!("report: {out}");
        }
    }
    Ok(())
}
