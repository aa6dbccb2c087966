//! Phase 3: all candidate pairs become removal lists.
//!
//! MinHash: union-find over the pairs (union by smaller global number, path halving), so
//! a cluster's keeper is its first document in input order, or the index when any member
//! matched an earlier run. When the pairs need more than `clusters_memory_bytes` for it,
//! the same components come from rounds of units that any number of tasks share
//! ([`crate::components`]), byte for byte. Exact and URL: the groups are already
//! complete (one key, one unit), so the first of each pair is the keeper and the second
//! is removed; one unit (task 0) does it.
//!
//! Output, for every signature file: `<output>/<stem>.dups` (the format of
//! [`crate::dups`]), `files.json` (the inputs in the order of the keepers' global
//! numbers), `summary.json` (cluster-size histogram) and `_done/clusters.json`, the
//! marker of the phase's own unit, written last.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Read};

use pipeline::cli::config_hash;
use pipeline::marker::{marker_location, read_marker};
use pipeline::{
    Error, Location, Report, Result, RunOptions, Stats, Storage, Unit, UnitDone, plan_units,
    run_units,
};

use crate::components::{self, UNION_FIND_BYTES_PER_PAIR};
pub use crate::dups::Summary;
use crate::dups::{CLUSTERS_UNIT, Dups, Removed, SUFFIX, apply_index_matches, summarize};
use crate::ids::{KeeperIds, attach_names};
use crate::pairs::{PAIRS_HEADER, read_pairs_header, unit_name};
use crate::signatures::{FILES, FileList};
use crate::{Config, Kind, is_index, split_global};

/// Step name in markers.
pub const STEP: &str = "dedup.clusters";
/// Name of the summary.
pub const SUMMARY: &str = "summary.json";
/// Version of what the phase writes (part of its configuration hash).
const FORMAT_VERSION: u32 = 3;

/// A map keyed by global numbers, hashed with foldhash: SipHash, the standard map's
/// hasher, was most of the union-find's time (60% of the phase's CPU at 10^7 planted
/// documents). Fixed seeds: the same run hashes the same way every time.
type NumberMap = HashMap<u64, u64, foldhash::fast::FixedState>;

/// Union-find over global numbers, by smaller root.
#[derive(Debug, Default)]
pub struct UnionFind {
    parent: NumberMap,
}

impl UnionFind {
    /// The root of `x` (path halving).
    pub fn find(&mut self, mut x: u64) -> u64 {
        loop {
            let p = *self.parent.get(&x).unwrap_or(&x);
            if p == x {
                return x;
            }
            let gp = *self.parent.get(&p).unwrap_or(&p);
            self.parent.insert(x, gp);
            x = gp;
        }
    }

    /// Joins the sets of `a` and `b`; the smaller root becomes the root of both.
    pub fn union(&mut self, a: u64, b: u64) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            self.parent.entry(a).or_insert(a);
            return;
        }
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.parent.insert(hi, lo);
        self.parent.entry(lo).or_insert(lo);
    }

    /// Every element seen, with its root.
    pub fn members(&mut self) -> Vec<(u64, u64)> {
        let mut keys: Vec<u64> = self.parent.keys().copied().collect();
        keys.sort_unstable();
        keys.into_iter().map(|k| (k, self.find(k))).collect()
    }
}

/// Runs the clusters phase: the pairs at `opts.input` (the buckets output) → removal
/// lists at `opts.output`. One unit, `clusters`: with several tasks, task 0 runs it.
pub fn clusters(storage: &Storage, opts: &RunOptions, config: &Config) -> Result<Report> {
    config.validate()?;
    let (buckets, output) = (&opts.input, &opts.output);
    let list: FileList =
        serde_json::from_slice(&storage.read(&buckets.join(FILES))?).map_err(|e| Error::Input {
            url: buckets.join(FILES).to_string(),
            message: e.to_string(),
        })?;
    if list.kind != config.kind {
        return Err(Error::Usage(format!(
            "{buckets} holds {} pairs; this run is configured for {}",
            list.kind.name(),
            config.kind.name()
        )));
    }
    let files_hash = list.hash();
    // Every unit of one bucket run must be there, for one listing of signatures.
    let mut found: BTreeMap<(usize, usize), (pipeline::ObjectMeta, usize)> = BTreeMap::new();
    for m in storage.list(buckets)? {
        let Some(name) = m.relative.strip_suffix(".pairs") else {
            continue;
        };
        if name.contains('/') {
            continue;
        }
        let head = storage.read_range(&m.location, 0, PAIRS_HEADER.min(m.size as usize) as u64)?;
        let mut probe = head.to_vec();
        probe.truncate(PAIRS_HEADER);
        // The length check of read_pairs_header needs the whole file: check the header only.
        let header = read_pairs_header(&probe, &m.location.to_string())?;
        let (s, r, ranges) = (header.section, header.range, header.ranges);
        if header.files_hash != files_hash {
            return Err(Error::Usage(format!(
                "{}: written for another listing of signatures than {buckets}/{FILES}; rerun the buckets phase",
                m.location
            )));
        }
        if name != unit_name(s, r) {
            return Err(Error::Input {
                url: m.location.to_string(),
                message: format!("named {name} but holds unit {}", unit_name(s, r)),
            });
        }
        found.insert((s, r), (m, ranges));
    }
    let ranges: Vec<usize> = found.values().map(|(_, r)| *r).collect();
    let Some(&r0) = ranges.first() else {
        return Err(Error::Usage(format!(
            "no pairs files at {buckets}: run the buckets phase first"
        )));
    };
    if ranges.iter().any(|&r| r != r0) {
        return Err(Error::Usage(format!(
            "{buckets} mixes bucket runs with different range counts: clear it and rerun the buckets phase"
        )));
    }
    let mut missing = Vec::new();
    for s in 0..list.sections {
        for r in 0..r0 {
            if !found.contains_key(&(s, r)) {
                missing.push(unit_name(s, r));
            }
        }
    }
    if !missing.is_empty() {
        return Err(Error::Usage(format!(
            "buckets phase incomplete at {buckets}: units {} missing (are all bucket tasks finished?)",
            missing.join(", ")
        )));
    }
    let inputs: Vec<(String, u64, Option<String>)> = found
        .values()
        .map(|(m, _)| (m.relative.clone(), m.size, m.etag.clone()))
        .collect();
    // Version 3 of the output (removal lists that name keepers and their ids,
    // `files.json`): a phase finished before it is redone, and with it what read its
    // lists.
    let hash = config_hash(
        "dedup-clusters",
        &(config.kind, &files_hash, &inputs, FORMAT_VERSION),
    );
    let unit = Unit {
        name: CLUSTERS_UNIT.into(),
        size: found.values().map(|(m, _)| m.size).sum(),
        version: files_hash.clone(),
    };
    let pairs: u64 = found
        .values()
        .map(|(m, _)| m.size.saturating_sub(PAIRS_HEADER as u64) / 16)
        .sum();
    let in_rounds = config.kind == Kind::Minhash
        && pairs.saturating_mul(UNION_FIND_BYTES_PER_PAIR) > config.clusters_memory_bytes;
    if !in_rounds {
        let plan = plan_units(STEP, vec![unit], &hash, storage, opts)?;
        return run_units(
            STEP,
            plan,
            &hash,
            &buckets.to_string(),
            storage,
            opts,
            |_| pairs_to_dups(storage, output, config, &list, &found),
        );
    }
    // In rounds: every task takes part, then task 0 adds up the summary.
    let own = RunOptions {
        tasks: 1,
        task: 0,
        ..opts.clone()
    };
    let plan = plan_units(STEP, vec![unit.clone()], &hash, storage, &own)?;
    let rounds_dir = output.join("_rounds/");
    if opts.dry_run || plan.todo.is_empty() {
        if plan.todo.is_empty() && !opts.dry_run && opts.task == 0 {
            components::clear(storage, &rounds_dir)?;
        }
        // Nothing to run (plan_units printed the plan of a dry run).
        return Ok(Report {
            skipped: if opts.task == 0 {
                plan.skipped
            } else {
                Vec::new()
            },
            ..Report::default()
        });
    }
    let root = rounds_dir.join(&format!("{}/", &hash[..hash.len().min(16)]));
    if opts.force && opts.task == 0 {
        // Redo from the pairs: the old result's marker goes first, so that no task
        // takes the phase for finished.
        storage.delete(&marker_location(output, CLUSTERS_UNIT))?;
        components::clear(storage, &root)?;
    }
    let shape = components::shape(&list, pairs, config.clusters_memory_bytes, root);
    let files: Vec<(Location, u64)> = found
        .values()
        .map(|(m, _)| (m.location.clone(), m.size))
        .collect();
    let finished = || -> Result<bool> {
        Ok(
            read_marker(storage, &marker_location(output, CLUSTERS_UNIT))?
                .is_some_and(|m| m.matches_unit(&files_hash, &hash)),
        )
    };
    let rounds = match components::run(
        storage, opts, config, &list, &files, &shape, &hash, output, &finished,
    ) {
        Ok(r) => r,
        // Other tasks may finish every unit and delete the rounds while this one still
        // reads them: then the phase is done (and what this task wrote since goes).
        Err(e) => {
            if opts.task != 0 && finished()? {
                components::clear(storage, &rounds_dir)?;
                return Ok(Report::default());
            }
            return Err(e);
        }
    };
    if opts.task != 0 {
        return Ok(Report {
            stats: rounds.stats,
            ..Report::default()
        });
    }
    let report = run_units(
        STEP,
        plan,
        &hash,
        &buckets.to_string(),
        storage,
        &own,
        |_| {
            let mut summary = components::add_partials(storage, &shape)?;
            summary.kind = config.kind.name().into();
            summary.files = list.files.len();
            summary.documents = list.files.iter().map(|f| f.documents).sum();
            summary.pairs = pairs;
            let mut done = finish_summary(storage, output, config, &list, &summary)?;
            // The bytes of every round unit once, whichever task ran it (a unit two
            // tasks ran at once counts once here, twice in their CPU time).
            let (read, written) = components::unit_bytes(storage, &shape)?;
            done.stats.bytes_in += read;
            done.stats.bytes_out += written;
            done.stats.seconds += rounds.stats.seconds;
            Ok(done)
        },
    )?;
    components::clear(storage, &rounds_dir)?;
    Ok(report)
}

/// The work of the one-unit clusters phase: every pairs file read, the removal lists
/// and the summary written.
fn pairs_to_dups(
    storage: &Storage,
    output: &Location,
    config: &Config,
    list: &FileList,
    found: &BTreeMap<(usize, usize), (pipeline::ObjectMeta, usize)>,
) -> Result<UnitDone> {
    let mut summary = Summary {
        kind: config.kind.name().into(),
        files: list.files.len(),
        documents: list.files.iter().map(|f| f.documents).sum(),
        ..Summary::default()
    };
    let mut per_file: Vec<Dups> = list
        .files
        .iter()
        .map(|f| Dups {
            documents: f.documents,
            ..Dups::default()
        })
        .collect();
    let check = |g: u64, url: &Location| -> Result<()> {
        let known = match split_global(g) {
            None => (g as usize) < list.index_runs.len(),
            Some((f, row)) => f < list.files.len() && (row as u64) < list.files[f].documents,
        };
        if known {
            return Ok(());
        }
        Err(Error::Input {
            url: url.to_string(),
            message: format!(
                "pair names {g:#x}, which is no document of the signature files and no index run of {FILES}"
            ),
        })
    };
    let mut uf = UnionFind::default();
    // Exact and URL: (removed, keeper) as the pairs come; each keeper's group size.
    let mut direct: Vec<(u64, u64)> = Vec::new();
    let mut sizes = NumberMap::default();
    // Documents paired with an index run (the first of their group): the run's node.
    let mut matched: HashMap<u64, u64> = HashMap::new();
    let mut input_bytes = 0;
    for (m, _) in found.values() {
        input_bytes += m.size;
        let mut r = BufReader::with_capacity(4 << 20, storage.open(&m.location)?);
        let mut header = [0u8; PAIRS_HEADER];
        r.read_exact(&mut header)
            .map_err(|e| Error::from_io_error("reading", &m.location, e))?;
        let mut pair = [0u8; 16];
        loop {
            match r.read_exact(&mut pair) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(Error::from_io_error("reading", &m.location, e)),
            }
            let a = u64::from_le_bytes(pair[..8].try_into().unwrap_or_default());
            let b = u64::from_le_bytes(pair[8..].try_into().unwrap_or_default());
            check(a, &m.location)?;
            check(b, &m.location)?;
            summary.pairs += 1;
            if is_index(a) {
                let run = matched.entry(b).or_insert(a);
                *run = (*run).min(a);
                continue;
            }
            match config.kind {
                Kind::Minhash => uf.union(a, b),
                Kind::Exact | Kind::Url => {
                    *sizes.entry(a).or_insert(1) += 1;
                    direct.push((b, a));
                }
            }
        }
    }
    let removed: Vec<(u64, u64)> = match config.kind {
        Kind::Minhash => {
            let members = uf.members();
            for (_, root) in &members {
                *sizes.entry(*root).or_insert(0) += 1;
            }
            members.into_iter().filter(|(x, root)| x != root).collect()
        }
        Kind::Exact | Kind::Url => direct,
    };
    // A component matched the index when any member did; keyed by its keeper.
    let mut components: HashMap<u64, u64> = HashMap::new();
    for (x, run) in matched {
        let root = match config.kind {
            Kind::Minhash => uf.find(x),
            Kind::Exact | Kind::Url => x,
        };
        let r = components.entry(root).or_insert(run);
        *r = (*r).min(run);
    }
    drop(uf);
    for (x, keeper) in removed {
        if let Some((f, row)) = split_global(x) {
            let size = sizes.get(&keeper).copied().unwrap_or(1);
            per_file[f].removed.push(Removed {
                row,
                size: size.min(u32::MAX as u64) as u32,
                keeper,
                cluster: keeper,
            });
        }
    }
    for (root, size) in &sizes {
        if let Some((f, row)) = split_global(*root) {
            per_file[f]
                .keepers
                .push((row, (*size).min(u32::MAX as u64) as u32));
        }
    }
    for d in per_file.iter_mut() {
        d.removed.sort_unstable();
        d.removed.dedup_by_key(|r| r.row);
        d.keepers.sort_unstable();
    }
    apply_index_matches(&mut per_file, 0, &components);
    let partial = summarize(&per_file, 0);
    summary.clusters = partial.clusters;
    summary.removed = partial.removed;
    summary.matched_index = partial.matched_index;
    summary.largest = partial.largest;
    summary.sizes = partial.sizes;
    // The keepers' ids (every component's keeper that still keeps), each input's id
    // file streamed once.
    let mut keepers: Vec<u64> = sizes
        .keys()
        .copied()
        .filter(|k| !is_index(*k) && !components.contains_key(k))
        .collect();
    drop(sizes);
    keepers.sort_unstable();
    let stems: Vec<String> = list.files.iter().map(|f| f.stem.clone()).collect();
    let mut lookup = KeeperIds::new(storage, &list.signatures, &stems, 1 << 20)?;
    let mut ids = HashMap::with_capacity(keepers.len());
    for k in keepers {
        if let Some(id) = lookup.get(k)? {
            ids.insert(k, id);
        }
    }
    attach_names(&mut per_file, &ids, &list.signatures)?;
    drop(ids);
    // One list per input, several written at once whatever the thread count: each
    // write waits on its sync (disk) or its request (S3), and one after another they
    // were most of the phase's time at small sizes and hours of requests at 100,000
    // inputs.
    let pairs: Vec<_> = list.files.iter().zip(&per_file).collect();
    let lists: Vec<(String, u64)> = pipeline::storage::each_in_flight(&pairs, |(f, d)| {
        let rel = format!("{}{SUFFIX}", f.stem);
        // The unit owns these names: a killed attempt's temporaries go first.
        storage.remove_stale_temporaries(&output.join(&rel))?;
        let bytes = d.encode();
        storage.put(&output.join(&rel), &bytes)?;
        Ok((rel, bytes.len() as u64))
    })?;
    let written = lists.iter().map(|(_, n)| n).sum();
    let mut outputs: Vec<String> = lists.into_iter().map(|(rel, _)| rel).collect();
    let mut done = finish_summary(storage, output, config, list, &summary)?;
    outputs.append(&mut done.outputs);
    done.outputs = outputs;
    done.stats.bytes_in = input_bytes;
    done.stats.bytes_out = written;
    Ok(done)
}

/// Writes `files.json` (the inputs in the order of global numbers, so that a keeper's
/// input can be named) and `summary.json`; the unit's counters.
fn finish_summary(
    storage: &Storage,
    output: &Location,
    config: &Config,
    list: &FileList,
    summary: &Summary,
) -> Result<UnitDone> {
    storage.remove_stale_temporaries(&output.join(FILES))?;
    storage.put(&output.join(FILES), &list.to_json())?;
    let json = serde_json::to_vec_pretty(summary).map_err(|e| Error::Usage(e.to_string()))?;
    storage.remove_stale_temporaries(&output.join(SUMMARY))?;
    storage.put(&output.join(SUMMARY), &json)?;
    let mut stats = Stats {
        docs_in: summary.documents,
        docs_out: summary.documents - summary.removed,
        ..Stats::default()
    };
    if summary.removed > 0 {
        stats
            .drops
            .insert(config.kind.reason().into(), summary.removed);
    }
    Ok(UnitDone {
        outputs: vec![FILES.into(), SUMMARY.into()],
        stats,
    })
}

/// Reads `summary.json` of a finished clusters phase.
pub fn read_summary(storage: &Storage, output: &Location) -> Result<Summary> {
    let loc = output.join(SUMMARY);
    serde_json::from_slice(&storage.read(&loc)?).map_err(|e| Error::Input {
        url: loc.to_string(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_find_keeps_the_smallest() {
        let mut uf = UnionFind::default();
        uf.union(5, 9);
        uf.union(9, 3);
        uf.union(20, 21);
        uf.union(21, 5);
        uf.union(40, 41);
        assert_eq!(uf.find(21), 3);
        assert_eq!(uf.find(9), 3);
        assert_eq!(uf.find(41), 40);
        let m = uf.members();
        assert_eq!(m.len(), 7);
        assert_eq!(m.iter().filter(|(x, r)| x == r).count(), 2);
    }

    #[test]
    fn dups_round_trip() {
        let removed = |row, keeper| Removed {
            row,
            size: 3,
            keeper,
            cluster: keeper,
        };
        let d = Dups {
            documents: 10,
            removed: vec![removed(1, 0), removed(4, 1 << 32), removed(7, 2 << 32)],
            keepers: vec![(0, 3), (2, 2)],
            names: vec![(1 << 32, "<urn:uuid:1>".into()), (2 << 32, "é".into())],
        };
        assert_eq!(Dups::decode(&d.encode(), "x").expect("decode"), d);
        assert!(Dups::decode(&d.encode()[..30], "x").is_err());
    }
}
