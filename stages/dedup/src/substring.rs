//! Exact-substring dedup (Lee et al. 2022, "Deduplicating Training Data Makes Language
//! Models Better"; RefinedWeb ran it after MinHash): spans of at least `min_tokens`
//! tokens that occur earlier in the corpus are cut out of every later copy.
//!
//! Two phases:
//! - [`substring`]: the inputs are grouped, in name order, into partitions of about
//!   `partition_bytes` of input; each partition is one unit (a task each). Its
//!   documents become one token stream, each document followed by a separator token
//!   of its own (so no match crosses documents); libsais builds the suffix array of the
//!   stream over its integer alphabet, then the permuted LCP array. The longest
//!   previous factor of every position (Crochemore and Ilie's stack pass over the
//!   suffix array) says how many tokens from there also occur earlier in the stream;
//!   where that is `min_tokens` or more, those tokens are cut. The first copy of every
//!   span stays; later copies go, in other documents or the same one. Each input gets
//!   `<stem>.cuts`: its rows with the byte ranges to remove.
//! - [`filter_step`]: a per-document stage bound to each input's cuts that removes the
//!   ranges and drops a document left with fewer than `min_tokens_left` tokens
//!   (`substring_dup`); new cuts redo it.
//!
//! Tokens are the pieces of GPT-2's pre-tokenizer, exact (no folding): a run of
//! letters, of digits or of other symbols, each with the one space before it, or a run
//! of whitespace; a partition's pieces get dense ids. 50 of them are about 50 to 60
//! GPT-2 tokens (BPE splits rare words further).
//!
//! Memory of a partition: its texts, plus 12 bytes per token (stream, suffix array,
//! PLCP reused for the factors), plus the piece dictionary. Repeats across partitions
//! are not seen: a partition is what fits in memory.

use std::collections::HashMap;

use pipeline::cli::config_hash;
use pipeline::runner::{Unit, UnitDone, plan_units, run_units};
use pipeline::shard::ShardOptions;
use pipeline::{
    Document, DocumentSource, Error, InputStage, Location, Planned, Report, Result, RowStage,
    RunOptions, Source, Stats, Step, Storage, Verdict,
};
use serde::{Deserialize, Serialize};

/// Step names in markers.
pub const STEP: &str = "dedup.substring";
pub const FILTER_STEP: &str = "dedup.substring_filter";
/// The drop reason of a document with too little left.
pub const REASON: &str = "substring_dup";
const MAGIC: &[u8; 8] = b"TMCUTS01";

/// `[config.dedup.substring]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubstringConfig {
    /// Shortest repeated span cut, in tokens: 50 (Lee et al. 2022; RefinedWeb).
    pub min_tokens: usize,
    /// A document left with fewer tokens is dropped: 50, the span length.
    pub min_tokens_left: usize,
    /// Input bytes per partition (the unit whose repeats are found together).
    pub partition_bytes: u64,
}

impl Default for SubstringConfig {
    fn default() -> Self {
        SubstringConfig {
            min_tokens: 50,
            min_tokens_left: 50,
            partition_bytes: 1 << 30,
        }
    }
}

/// Byte ranges of the pieces (tokens) of `text`, in order; they cover it.
pub fn pieces(text: &str) -> Vec<(usize, usize)> {
    #[derive(PartialEq, Clone, Copy)]
    enum Class {
        Letter,
        Digit,
        Other,
        Space,
    }
    let class = |c: char| {
        if c.is_whitespace() {
            Class::Space
        } else if c.is_numeric() {
            Class::Digit
        } else if c.is_alphabetic() || unicode_normalization::char::is_combining_mark(c) {
            Class::Letter
        } else {
            Class::Other
        }
    };
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let n = chars.len();
    let at = |k: usize| if k < n { chars[k].0 } else { text.len() };
    let run_end = |from: usize, cls: Class| {
        let mut k = from;
        while k < n && class(chars[k].1) == cls {
            k += 1;
        }
        k
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let c = chars[i].1;
        let cls = class(c);
        if cls == Class::Space {
            let j = run_end(i, Class::Space);
            if j < n && chars[j - 1].1 == ' ' {
                if j - 1 > i {
                    // The whitespace before the last space is a piece of its own; the
                    // last space goes with the word after it.
                    out.push((at(i), at(j - 1)));
                }
                let k = run_end(j, class(chars[j].1));
                out.push((at(j - 1), at(k)));
                i = k;
            } else {
                out.push((at(i), at(j)));
                i = j;
            }
        } else {
            let k = run_end(i, cls);
            out.push((at(i), at(k)));
            i = k;
        }
    }
    out
}

/// The longest previous factor of every position of `text` from its suffix array and
/// its permuted LCP array, written over `plcp` (Crochemore and Ilie 2008): the length
/// of the longest prefix of the suffix at `p` that starts somewhere before `p` too.
pub fn longest_previous_factor(sa: &[i32], plcp: &mut [i32]) {
    let n = sa.len();
    if n == 0 {
        return;
    }
    // (position, the LCP with the element below it on the stack) of suffixes whose
    // previous-smaller position is known and next-smaller is not yet.
    let mut stack: Vec<(usize, i32)> = Vec::new();
    // Each suffix in suffix-array order (position, LCP with the one before), then a
    // sentinel smaller than every position that empties the stack.
    for i in 0..=n {
        let current = sa.get(i).map(|&p| {
            let p = p as usize;
            (p, if i == 0 { 0 } else { plcp[p] })
        });
        let mut l = current.map_or(0, |c| c.1);
        while let Some(&(top, lt)) = stack.last() {
            if current.is_some_and(|(p, _)| p > top) {
                break;
            }
            stack.pop();
            plcp[top] = lt.max(l);
            l = lt.min(l);
        }
        if let Some((p, _)) = current {
            stack.push((p, l));
        }
    }
}

/// Token ranges `[start, end)` of `stream` to cut: where a factor of `min` or more
/// tokens occurs earlier.
fn cut_ranges(lpf: &[i32], min: usize) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (p, &l) in lpf.iter().enumerate() {
        let l = l.max(0) as usize;
        if l < min {
            continue;
        }
        match out.last_mut() {
            Some(last) if p <= last.1 => last.1 = last.1.max(p + l),
            _ => out.push((p, p + l)),
        }
    }
    out
}

/// What to cut of one document: its row and the byte ranges.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cut {
    pub row: u32,
    pub ranges: Vec<(u32, u32)>,
}

/// The cuts of one input.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cuts {
    /// By row, ascending.
    pub docs: Vec<Cut>,
}

impl Cuts {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&(self.docs.len() as u64).to_le_bytes());
        for d in &self.docs {
            out.extend_from_slice(&d.row.to_le_bytes());
            out.extend_from_slice(&(d.ranges.len() as u32).to_le_bytes());
            for (s, e) in &d.ranges {
                out.extend_from_slice(&s.to_le_bytes());
                out.extend_from_slice(&e.to_le_bytes());
            }
        }
        out
    }

    pub fn decode(bytes: &[u8], url: &str) -> Result<Cuts> {
        let bad = || Error::Input {
            url: url.to_string(),
            message: "not a cuts file of dedup.substring".into(),
        };
        let mut r = bytes.strip_prefix(MAGIC.as_slice()).ok_or_else(bad)?;
        let u32_at = |r: &mut &[u8]| -> Result<u32> {
            let (a, b) = r.split_first_chunk::<4>().ok_or_else(bad)?;
            *r = b;
            Ok(u32::from_le_bytes(*a))
        };
        let (c, rest) = r.split_first_chunk::<8>().ok_or_else(bad)?;
        r = rest;
        let count = u64::from_le_bytes(*c);
        let mut docs = Vec::new();
        for _ in 0..count {
            let row = u32_at(&mut r)?;
            let k = u32_at(&mut r)?;
            let mut ranges = Vec::new();
            for _ in 0..k {
                let s = u32_at(&mut r)?;
                let e = u32_at(&mut r)?;
                if e < s {
                    return Err(bad());
                }
                ranges.push((s, e));
            }
            docs.push(Cut { row, ranges });
        }
        if !r.is_empty() || docs.windows(2).any(|w| w[0].row >= w[1].row) {
            return Err(bad());
        }
        Ok(Cuts { docs })
    }
}

/// The cuts file of input `stem` below the substring step's output.
pub fn cuts_location(output: &Location, stem: &str) -> Location {
    output.join(&format!("{stem}.cuts"))
}

/// Byte ranges `[start, end)` of one text.
pub type ByteRanges = Vec<(u32, u32)>;

/// Finds the cuts of the documents of one partition: for each document (by position
/// in `texts`), the byte ranges to remove. Also the token count of the stream.
pub fn find_cuts(texts: &[&str], min_tokens: usize) -> Result<(Vec<ByteRanges>, usize)> {
    let clock = std::time::Instant::now();
    let mut ids: HashMap<&str, i32> = HashMap::new();
    let mut stream: Vec<i32> = Vec::new();
    // Where each document starts in the stream (its pieces are found again for the
    // documents that have cuts, rather than kept for all).
    let mut starts: Vec<usize> = Vec::with_capacity(texts.len());
    for text in texts {
        starts.push(stream.len());
        for (s, e) in &pieces(text) {
            let next = ids.len() as i32;
            let id = *ids.entry(&text[*s..*e]).or_insert(next);
            stream.push(id);
        }
        // A separator of its own, set below once the vocabulary is known.
        stream.push(-1);
    }
    let vocab = ids.len();
    drop(ids);
    let too_big = || {
        Error::Usage(format!(
            "dedup.substring: a partition of {} tokens and {} documents passes the suffix array's 2^31: lower partition_bytes",
            stream.len(),
            texts.len()
        ))
    };
    if stream.len() + vocab >= i32::MAX as usize {
        return Err(too_big());
    }
    for (sep, t) in (vocab as i32..).zip(stream.iter_mut().filter(|t| **t < 0)) {
        *t = sep;
    }
    let n_tokens = stream.len();
    let tokenized = clock.elapsed().as_secs_f64();
    let failed =
        |e: libsais::LibsaisError| Error::Usage(format!("dedup.substring: libsais: {e:?}"));
    let sa = libsais::SuffixArrayConstruction::for_text_mut(&mut stream)
        .in_owned_buffer32()
        .single_threaded()
        .run()
        .map_err(failed)?;
    let with_plcp = sa
        .plcp_construction()
        .single_threaded()
        .run()
        .map_err(failed)?;
    let (sa, plcp, _) = with_plcp.into_parts();
    let mut lpf = plcp;
    let suffix_array = clock.elapsed().as_secs_f64() - tokenized;
    longest_previous_factor(&sa, &mut lpf);
    drop(sa);
    let ranges = cut_ranges(&lpf, min_tokens);
    tracing::info!(
        tokens = n_tokens,
        vocabulary = vocab,
        tokenize_seconds = tokenized,
        suffix_array_seconds = suffix_array,
        factors_seconds = clock.elapsed().as_secs_f64() - tokenized - suffix_array,
        "substring: suffix array and factors"
    );
    // Token ranges to byte ranges of each document.
    let mut out: Vec<Vec<(u32, u32)>> = vec![Vec::new(); texts.len()];
    let mut d = 0;
    let mut ps: Option<(usize, Vec<(usize, usize)>)> = None;
    for (s, e) in ranges {
        while d + 1 < starts.len() && starts[d + 1] <= s {
            d += 1;
        }
        if ps.as_ref().is_none_or(|(k, _)| *k != d) {
            ps = Some((d, pieces(texts[d])));
        }
        let Some((_, doc_pieces)) = &ps else {
            continue;
        };
        let (ts, te) = (s - starts[d], (e - starts[d]).min(doc_pieces.len()));
        if ts >= te {
            continue;
        }
        out[d].push((doc_pieces[ts].0 as u32, doc_pieces[te - 1].1 as u32));
    }
    Ok((out, n_tokens))
}

/// Inputs of the step, grouped into partitions of about `partition_bytes`.
fn partitions(
    storage: &Storage,
    opts: &RunOptions,
    hash: &str,
    config: &SubstringConfig,
) -> Result<(Vec<Unit>, Vec<Vec<Planned>>)> {
    let all = RunOptions {
        tasks: 1,
        task: 0,
        force: true,
        dry_run: false,
        ..opts.clone()
    };
    let plan = pipeline::plan(STEP, &DocumentSource::default(), hash, storage, &all)?;
    let mut groups: Vec<Vec<Planned>> = Vec::new();
    let mut bytes = 0u64;
    for p in plan.todo {
        if groups.is_empty() || bytes + p.meta.size > config.partition_bytes.max(1) && bytes > 0 {
            groups.push(Vec::new());
            bytes = 0;
        }
        bytes += p.meta.size;
        if let Some(g) = groups.last_mut() {
            g.push(p);
        }
    }
    let units = groups
        .iter()
        .enumerate()
        .map(|(k, g)| {
            let listing: Vec<(&str, u64, Option<&str>)> = g
                .iter()
                .map(|p| (p.relative.as_str(), p.meta.size, p.meta.etag.as_deref()))
                .collect();
            Unit {
                name: format!("part-{k:05}"),
                size: g.iter().map(|p| p.meta.size).sum(),
                version: config_hash("substring-partition", &listing),
            }
        })
        .collect();
    Ok((units, groups))
}

/// Phase 1: the cuts of every input, a partition per unit.
pub fn substring(storage: &Storage, opts: &RunOptions, config: &SubstringConfig) -> Result<Report> {
    let hash = config_hash(STEP, &(config.min_tokens, config.partition_bytes));
    let (units, groups) = partitions(storage, opts, &hash, config)?;
    let plan = plan_units(STEP, units, &hash, storage, opts)?;
    let input = opts.input.to_string();
    run_units(STEP, plan, &hash, &input, storage, opts, |unit| {
        let k: usize = unit
            .name
            .trim_start_matches("part-")
            .parse()
            .map_err(|_| Error::Usage(format!("{STEP}: unit {}", unit.name)))?;
        let group = &groups[k];
        let mut stats = Stats::default();
        // (input in the group, row, text)
        let mut docs: Vec<(usize, u32, String)> = Vec::new();
        let source = DocumentSource::default();
        for (i, p) in group.iter().enumerate() {
            let mut row = 0u32;
            for batch in source.read(storage, &p.meta, &p.relative)? {
                let batch = batch?;
                batch.count_drops(&mut stats, &p.meta.location);
                for d in batch.docs {
                    docs.push((i, row, d.text));
                    row += 1;
                }
            }
            stats.bytes_in += p.meta.size;
        }
        let texts: Vec<&str> = docs.iter().map(|t| t.2.as_str()).collect();
        let (cuts, tokens) = find_cuts(&texts, config.min_tokens)?;
        let mut per_input: Vec<Cuts> = vec![Cuts::default(); group.len()];
        let mut removed = 0u64;
        for ((i, row, _), ranges) in docs.iter().zip(cuts) {
            stats.keep();
            if ranges.is_empty() {
                continue;
            }
            removed += ranges.iter().map(|(s, e)| u64::from(e - s)).sum::<u64>();
            *stats
                .counts
                .entry("substring_documents_cut".into())
                .or_default() += 1;
            per_input[*i].docs.push(Cut { row: *row, ranges });
        }
        *stats
            .counts
            .entry("substring_bytes_cut".into())
            .or_default() += removed;
        *stats.counts.entry("substring_tokens".into()).or_default() += tokens as u64;
        *stats
            .counts
            .entry("substring_text_bytes".into())
            .or_default() += texts.iter().map(|t| t.len() as u64).sum::<u64>();
        let mut outputs = Vec::new();
        for (p, cuts) in group.iter().zip(&per_input) {
            let loc = cuts_location(&opts.output, &p.stem);
            // A killed attempt may have left its temporary beside the file.
            storage.remove_stale_temporaries(&loc)?;
            storage.put(&loc, &cuts.encode())?;
            outputs.push(format!("{}.cuts", p.stem));
        }
        tracing::info!(unit = %unit.name, documents = docs.len(), tokens, bytes_cut = removed, "substring cuts found");
        Ok(UnitDone { outputs, stats })
    })
}

/// Phase 2, bound to each input's cuts.
#[derive(Debug)]
pub struct SubstringFilter {
    cuts: Location,
    min_tokens_left: usize,
}

/// The filter bound to one input.
#[derive(Debug)]
pub struct BoundSubstringFilter {
    cuts: Cuts,
    min_tokens_left: usize,
}

impl InputStage for SubstringFilter {
    fn name(&self) -> &'static str {
        FILTER_STEP
    }

    fn columns(&self) -> Vec<pipeline::Column> {
        Vec::new()
    }

    fn bind(&self, storage: &Storage, input: &Planned) -> Result<Box<dyn RowStage>> {
        let loc = cuts_location(&self.cuts, &input.stem);
        let bytes = storage.read(&loc)?;
        Ok(Box::new(BoundSubstringFilter {
            cuts: Cuts::decode(&bytes, &loc.to_string())?,
            min_tokens_left: self.min_tokens_left,
        }))
    }
}

impl RowStage for BoundSubstringFilter {
    fn process(&self, doc: &mut Document, row: u64) -> Verdict {
        let Ok(row) = u32::try_from(row) else {
            return Verdict::Keep;
        };
        let Ok(k) = self.cuts.docs.binary_search_by_key(&row, |c| c.row) else {
            return Verdict::Keep;
        };
        let text = &doc.text;
        let mut kept = String::with_capacity(text.len());
        let mut at = 0usize;
        for &(s, e) in &self.cuts.docs[k].ranges {
            let (s, e) = (s as usize, e as usize);
            // A cuts file of another version of the input: keep the document whole.
            if s < at || e > text.len() || !text.is_char_boundary(s) || !text.is_char_boundary(e) {
                return Verdict::Keep;
            }
            kept.push_str(&text[at..s]);
            at = e;
        }
        kept.push_str(&text[at..]);
        let removed = text.len() - kept.len();
        doc.count("substring_bytes_cut", removed as u64);
        doc.count("substring_documents_cut", 1);
        if pieces(&kept)
            .iter()
            .filter(|(s, e)| !kept[*s..*e].trim().is_empty())
            .count()
            < self.min_tokens_left
        {
            return Verdict::Drop(REASON);
        }
        doc.text = kept;
        Verdict::Keep
    }
}

/// Phase 2's step: the documents with the cuts of the substring step at `cuts` applied.
/// Its config hash holds the identity of every partition the substring step finished
/// (their markers' configuration and listing hashes), so new cuts (an input added to a
/// partition changes which copy comes first) redo the filter.
pub fn filter_step(storage: &Storage, config: &SubstringConfig, cuts: &str) -> Result<Step> {
    let cuts = Location::parse(cuts)?;
    let mut partitions = Vec::new();
    for meta in storage.list(&cuts.join(pipeline::marker::DONE_DIR))? {
        let Some(stem) = meta.relative.strip_suffix(".json") else {
            continue;
        };
        if let Some(m) = pipeline::marker::read_marker(storage, &meta.location)? {
            partitions.push((stem.to_string(), m.config_hash, m.source_hash));
        }
    }
    if partitions.is_empty() {
        return Err(Error::Usage(format!(
            "{cuts} has no finished dedup.substring partition (no _done/part-*.json): run it first"
        )));
    }
    partitions.sort();
    let hash = config_hash(FILTER_STEP, &(config, &partitions));
    Ok(Step {
        name: FILTER_STEP.into(),
        stages: Vec::new(),
        source: Box::new(DocumentSource::default()),
        config_hash: hash,
        shard: ShardOptions::default(),
        partition: None,
        per_input: Some(Box::new(SubstringFilter {
            cuts,
            min_tokens_left: config.min_tokens_left,
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_text_like_gpt2_pre_tokens() {
        let t = "Hello, world!  It's 2024.\n\nNew  line";
        let p: Vec<&str> = pieces(t).iter().map(|(s, e)| &t[*s..*e]).collect();
        assert_eq!(
            p,
            [
                "Hello", ",", " world", "!", " ", " It", "'", "s", " 2024", ".", "\n\n", "New",
                " ", " line"
            ]
        );
        assert_eq!(p.concat(), t);
        assert!(pieces("").is_empty());
    }

    /// The longest previous factor, the slow way.
    fn lpf_naive(t: &[i32]) -> Vec<i32> {
        (0..t.len())
            .map(|p| {
                (0..p)
                    .map(|q| {
                        t[q..]
                            .iter()
                            .zip(&t[p..])
                            .take_while(|(a, b)| a == b)
                            .count()
                    })
                    .max()
                    .unwrap_or(0) as i32
            })
            .collect()
    }

    #[test]
    fn longest_previous_factor_matches_the_definition() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..300 {
            let n = rng.usize(1..60);
            let k = rng.i32(1..4);
            let mut t: Vec<i32> = (0..n).map(|_| rng.i32(0..k)).collect();
            let expected = lpf_naive(&t);
            let sa = libsais::SuffixArrayConstruction::for_text_mut(&mut t)
                .in_owned_buffer32()
                .single_threaded()
                .run()
                .expect("sa");
            let (sa, plcp, _) = sa
                .plcp_construction()
                .single_threaded()
                .run()
                .expect("plcp")
                .into_parts();
            let mut lpf = plcp;
            longest_previous_factor(&sa, &mut lpf);
            assert_eq!(lpf, expected, "{t:?}");
        }
    }

    #[test]
    fn planted_repeats_are_cut_from_later_copies_only() {
        let shared = (0..60)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let a = format!("First document starts here: {shared} And it ends.");
        let b = format!("Second one, other words. {shared} Its own end.");
        let c = "Third document with no repeat at all.".to_string();
        let texts = [a.as_str(), b.as_str(), c.as_str()];
        let (cuts, _) = find_cuts(&texts, 50).expect("cuts");
        assert!(cuts[0].is_empty() && cuts[2].is_empty(), "{cuts:?}");
        assert_eq!(cuts[1].len(), 1);
        let (s, e) = cuts[1][0];
        assert_eq!(&b[s as usize..e as usize], format!(" {shared}"));
        // Shorter than the threshold: nothing.
        let (cuts, _) = find_cuts(&texts, 200).expect("cuts");
        assert!(cuts.iter().all(Vec::is_empty));
    }

    #[test]
    fn cuts_file_round_trip() {
        let cuts = Cuts {
            docs: vec![
                Cut {
                    row: 3,
                    ranges: vec![(0, 10), (20, 25)],
                },
                Cut {
                    row: 9,
                    ranges: vec![(5, 6)],
                },
            ],
        };
        let bytes = cuts.encode();
        assert_eq!(Cuts::decode(&bytes, "mem").expect("decode"), cuts);
        assert!(Cuts::decode(&bytes[..bytes.len() - 1], "mem").is_err());
    }
}
