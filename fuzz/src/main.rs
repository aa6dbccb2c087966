//! `mill-fuzz`: fuzzes the parsers of outside bytes for a while and prints what it
//! found. `mill-fuzz --seconds 20` runs every target 20 s (the CI smoke run);
//! `mill-fuzz html warc --seconds 600` runs two for ten minutes each. Inputs that
//! break a contract are saved under `--findings` and make the exit status 1.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

#[global_allocator]
static ALLOC: fuzz::Counting = fuzz::Counting;

#[derive(Debug, Parser)]
#[command(about = "Fuzz tokenmill's parsers of outside bytes")]
struct Args {
    /// Targets to run (default: all); `--list` names them.
    targets: Vec<String>,
    /// Seconds per target.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Seed of the mutator (the run is reproducible for a seed, up to timing).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where inputs that break a contract are saved.
    #[arg(long, default_value = "target/fuzz-findings")]
    findings: PathBuf,
    /// List the targets and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let all = fuzz::targets();
    if args.list {
        for t in &all {
            println!("{:<8} {}", t.name, t.about);
        }
        return Ok(());
    }
    for name in &args.targets {
        if !all.iter().any(|t| t.name == name) {
            anyhow::bail!("no target {name} (mill-fuzz --list names them)");
        }
    }
    println!(
        "{:<8} {:>10} {:>9} {:>9} {:>11} {:>8} {:>8}  outcomes",
        "target", "execs", "execs/s", "peak MiB", "slowest ms", "labels", "findings"
    );
    let mut broken = 0;
    for t in all
        .iter()
        .filter(|t| args.targets.is_empty() || args.targets.iter().any(|n| n == t.name))
    {
        let s = fuzz::fuzz(
            t,
            Duration::from_secs(args.seconds),
            args.seed,
            &args.findings,
        );
        let mut labels: Vec<(&String, &u64)> = s.labels.iter().collect();
        labels.sort_by(|a, b| b.1.cmp(a.1));
        let top: Vec<String> = labels
            .iter()
            .take(4)
            .map(|(l, n)| format!("{l}: {n}"))
            .collect();
        println!(
            "{:<8} {:>10} {:>9.0} {:>9.1} {:>11.1} {:>8} {:>8}  {}",
            t.name,
            s.executions,
            s.executions as f64 / s.seconds.max(1e-9),
            s.peak_bytes as f64 / (1 << 20) as f64,
            s.slowest.as_secs_f64() * 1e3,
            s.labels.len(),
            s.findings.len(),
            top.join("; ")
        );
        for (what, path) in &s.findings {
            println!("  finding: {what} ({})", path.display());
        }
        broken += s.findings.len();
    }
    fuzz::targets::remove_scratch();
    if broken > 0 {
        anyhow::bail!(
            "{broken} inputs broke a contract; saved under {}",
            args.findings.display()
        );
    }
    Ok(())
}
