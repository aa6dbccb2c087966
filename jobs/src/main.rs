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
    /// Where a run stands, per step, from its markers (disk or S3).
    Status {
        /// The run's address (the pipeline's `output`).
        run: String,
    },
    /// Write a self-contained HTML report of a run.
    Report {
        run: String,
        /// Where to write it (any address).
        #[arg(short, long, default_value = "report.html")]
        output: String,
    },
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logging(args.log_format);
    let storage = Storage::new();
    match args.command {
        Command::Run {
            pipeline,
            from,
            only,
            tasks,
            threads,
            force,
        } => {
            let p = Pipeline::load(&storage, &pipeline)?;
            let flags = Flags {
                threads,
                force,
                progress: true,
            };
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
                if s.tokens.is_some() {
                    println!("token shards: {}", p.step_output(&spec.name)?);
                }
            }
            println!("run: {} (mill status / mill report read it)", p.output);
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
            let (i, _) = p.step(&step)?;
            let n = p.tasks_of(i, tasks);
            let task = pipeline::tasks::task_index(task, n)?;
            jobs::exec::record_pipeline(&storage, &p)?;
            let flags = Flags {
                threads,
                force,
                progress: true,
            };
            let r = jobs::run_task(&storage, &p, i, task, n, &flags)?;
            println!("{}", pipeline::cli::summary(&step, &r));
        }
        Command::Status { run } => {
            let run = Location::parse(&run)?;
            let (_, steps) = jobs::status::status(&storage, &run)?;
            print!("{}", jobs::status::render(&run, &steps));
        }
        Command::Report { run, output } => {
            let html = jobs::report::report(&storage, &Location::parse(&run)?)?;
            let out = Location::parse(&output)?;
            storage.put(&out, html.as_bytes())?;
            println!("report: {out}");
        }
    }
    Ok(())
}
