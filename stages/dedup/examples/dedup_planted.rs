//! Planted clusters for the scale bench of `scripts/bench-dedup-scale.sh`
//! ([`dedup::planted`]): signature files written directly, and the clusters phase's
//! removal lists checked against the planted truth.
//!
//! Usage:
//!   dedup_planted write <signatures folder> <documents> <documents per input>
//!   dedup_planted check <clusters folder> <documents> <documents per input>
//!
//! `check` prints one JSON line: clusters and removals found against planted, and the
//! inputs whose removal list differs from the truth (none when every planted cluster
//! became one component with its smallest document kept).

use dedup::Config;
use dedup::dups::read_dups;
use dedup::planted::Planted;
use pipeline::{Location, Storage};
use rayon::prelude::*;

const SEED: u64 = 20261205;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() == 5 && (args[1] == "write" || args[1] == "check"),
        "usage: dedup_planted write|check <folder> <documents> <documents per input>"
    );
    let folder = Location::parse(&args[2])?;
    let documents: u64 = args[3].parse()?;
    let per_file: u64 = args[4].parse()?;
    let config = Config::default();
    let planted = Planted::standard(documents, per_file, config.bands, SEED);
    let storage = Storage::new();
    if args[1] == "write" {
        let bytes = planted.write(&storage, &folder, &config)?;
        println!(
            "{{\"documents\": {documents}, \"inputs\": {}, \"clusters\": {}, \"clustered\": {}, \"bytes\": {bytes}}}",
            planted.files(),
            planted.clusters.len(),
            planted.clustered()
        );
        return Ok(());
    }
    let keepers = planted.keepers();
    let wrong: Vec<u64> = (0..planted.files())
        .into_par_iter()
        .map(|f| -> anyhow::Result<Option<u64>> {
            let got = read_dups(&storage, &folder, &format!("part-{f:06}"))?;
            Ok((got != planted.expected(&keepers, f)).then_some(f))
        })
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    let summary = dedup::clusters::read_summary(&storage, &folder)?;
    let planted_removed = planted.clustered() - planted.clusters.len() as u64;
    println!(
        "{{\"clusters\": {}, \"planted_clusters\": {}, \"removed\": {}, \"planted_removed\": {planted_removed}, \"largest\": {}, \"inputs_differing\": {}, \"first_differing\": {}}}",
        summary.clusters,
        planted.clusters.len(),
        summary.removed,
        summary.largest,
        wrong.len(),
        wrong.first().map_or("null".to_string(), |f| f.to_string())
    );
    anyhow::ensure!(
        wrong.is_empty() && summary.clusters == planted.clusters.len() as u64,
        "the clusters differ from the planted ones"
    );
    Ok(())
}
