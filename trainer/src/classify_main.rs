//! `mill-classify-gpu`: the classify stage with its transformers on GPUs (libtorch,
//! bf16), the same flags as `mill-classify` plus `--gpus`. `mill` runs it for a chain
//! of the classify stage alone that names `gpus_per_node`; it plans, resumes and marks
//! each input like every stage binary, and its outputs are the CPU stage's (the
//! configuration hash does not depend on where the model runs).

use clap::Parser;
use pipeline::Storage;
use pipeline::cli::{StageArgs, init_logging, summary};

#[derive(Debug, Parser)]
#[command(
    name = "mill-classify-gpu",
    version,
    about = "Score documents with transformer classifiers on GPUs (and fastText ones on the CPU)"
)]
struct Args {
    #[command(flatten)]
    stage: StageArgs,
    /// GPUs to use (cuda:0 .. cuda:N-1 of those the process sees); 0 runs libtorch on
    /// the CPU (f32).
    #[arg(long, default_value_t = 1)]
    gpus: usize,
    /// Also write what the run did as JSON to this file (for `mill`).
    #[arg(long)]
    report: Option<std::path::PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logging(args.stage.log_format);
    let devices: Vec<tch::Device> = if args.gpus == 0 {
        vec![tch::Device::Cpu]
    } else {
        let available = tch::Cuda::device_count() as usize;
        anyhow::ensure!(
            available >= args.gpus,
            "--gpus {} but libtorch sees {available} CUDA devices",
            args.gpus
        );
        (0..args.gpus).map(tch::Device::Cuda).collect()
    };
    let storage = Storage::new();
    let config: classify::Config = args.stage.load_config(&storage)?;
    let step = classify::step_with_backend(&storage, &config, &trainer::encoder::factory(devices))?;
    let mut options = args.stage.options()?;
    // At least two threads a GPU: one feeds it while another reads and writes.
    if options.threads == 0 {
        options.threads = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .max(2 * args.gpus);
    }
    let report = pipeline::run(&step, &storage, &options)?;
    if let Some(path) = &args.report {
        let json = serde_json::to_vec(&classify::RunReport::of(&report))?;
        std::fs::write(path, json)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    }
    if !options.dry_run {
        println!("{}", summary(&step.name, &report));
    }
    Ok(())
}
