//! Whole-stage speed on one core: documents/s of langid, quality, and the two fused, on
//! the JSONL corpus named by `TOKENMILL_BENCH_CORPUS` (scripts/bench-filters.sh makes it
//! and times datatrove on the same documents); and, when `TOKENMILL_BENCH_WARC` names a
//! WARC file, pages/s of extract alone and of extract -> langid -> quality fused on its
//! HTML pages; toxicity (adult-URL list, bad-word list and the shipped fastText
//! classifier, `classifier = "default"`) alone and at the end of the fused chain.
//! Prints one JSON line of results.

use std::io::BufRead;
use std::path::Path;
use std::time::Instant;

use pipeline::{Document, Stage, Storage, Verdict};

fn main() {
    let Ok(corpus) = std::env::var("TOKENMILL_BENCH_CORPUS") else {
        eprintln!("TOKENMILL_BENCH_CORPUS unset: run scripts/bench-filters.sh");
        return;
    };
    let file = std::fs::File::open(&corpus).expect("open corpus");
    let docs: Vec<Document> = std::io::BufReader::new(file)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l.expect("line")).expect("json");
            Document::new(
                v["id"].as_str().unwrap_or_default(),
                v["text"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let model = langid::default_model_path().display().to_string();
    let langid = langid::LangId::new(
        &Storage::new(),
        &langid::Config {
            model,
            languages: vec!["en".into()],
            ..langid::Config::default()
        },
    )
    .expect("lid.176 (run scripts/fetch-models.sh)");
    let quality = quality::Quality::new(&pipeline::Storage::new(), &quality::Config::default())
        .expect("quality stage");

    let toxicity_step = toxicity_step(&root);
    let toxicity: Vec<&dyn Stage> = toxicity_step.stages.iter().map(|s| s.as_ref()).collect();

    let time = |stages: &[&dyn Stage]| rate(&docs, stages);
    let (langid_rate, langid_kept) = time(&[&langid]);
    let (quality_rate, quality_kept) = time(&[&quality]);
    let (fused_rate, fused_kept) = time(&[&langid, &quality]);
    let (toxicity_rate, toxicity_kept) = time(&toxicity);
    let mut out = serde_json::json!({
        "toxicity_docs_per_s": toxicity_rate, "toxicity_kept": toxicity_kept,
        "docs": docs.len(),
        "langid_docs_per_s": langid_rate, "langid_kept": langid_kept,
        "quality_docs_per_s": quality_rate, "quality_kept": quality_kept,
        "fused_docs_per_s": fused_rate, "fused_kept": fused_kept,
    });
    if let Ok(warc) = std::env::var("TOKENMILL_BENCH_WARC") {
        let pages = warc_pages(&warc);
        let extract = extract::Extract::new(&extract::Config::default());
        let time_pages = |stages: &[&dyn Stage]| rate(&pages, stages);
        let (extract_rate, extract_kept) = time_pages(&[&extract]);
        let (all_rate, all_kept) = time_pages(&[&extract, &langid, &quality]);
        out["pages"] = pages.len().into();
        out["extract_pages_per_s"] = extract_rate.into();
        out["extract_kept"] = extract_kept.into();
        out["extract_fused_pages_per_s"] = all_rate.into();
        out["extract_fused_kept"] = all_kept.into();
        // Each stage alone on the text extracted from these pages (web text, not the
        // documentation corpus above), in milliseconds per document.
        let mut texts = pages.clone();
        texts.retain_mut(|d| extract.process(d) == Verdict::Keep);
        let ms = |stages: &[&dyn Stage]| 1000.0 / rate(&texts, stages).0;
        out["page_texts"] = texts.len().into();
        out["page_extract_ms"] = (1000.0 / extract_rate).into();
        out["page_langid_ms"] = ms(&[&langid]).into();
        out["page_quality_ms"] = ms(&[&quality]).into();
        out["page_toxicity_ms"] = ms(&toxicity).into();
        let mut chain: Vec<&dyn Stage> = vec![&extract, &langid, &quality];
        chain.extend(toxicity.iter().copied());
        let (tox_rate, tox_kept) = time_pages(&chain);
        out["extract_fused_toxicity_pages_per_s"] = tox_rate.into();
        out["extract_fused_toxicity_kept"] = tox_kept.into();
    }
    println!("{out}");
}

/// The toxicity step of the fixture pipeline: the fixtures' adult-domain and word lists
/// and the shipped classifier with its settings.
fn toxicity_step(root: &Path) -> pipeline::Step {
    let storage = Storage::new();
    let fx = |rel: &str| {
        root.join("fixtures/toxicity")
            .join(rel)
            .display()
            .to_string()
    };
    let config: toxicity::Config = toml::from_str(&format!(
        "classifier = \"default\"\n[urls]\nlists = [{:?}]\n[words]\nlists = {{ default = {:?} }}\n",
        fx("blacklists/adult"),
        fx("words/en.txt"),
    ))
    .expect("toxicity config");
    toxicity::step(&storage, &config).expect("toxicity step")
}

/// Documents/s of a chain of stages on copies of `docs` (copying is not timed), and how
/// many documents it kept.
fn rate(docs: &[Document], stages: &[&dyn Stage]) -> (f64, usize) {
    let mut work = docs.to_vec();
    let start = Instant::now();
    let mut kept = 0usize;
    for doc in work.iter_mut() {
        if stages.iter().all(|s| s.process(doc) == Verdict::Keep) {
            kept += 1;
        }
    }
    (docs.len() as f64 / start.elapsed().as_secs_f64(), kept)
}

/// The HTML pages of a WARC file, as the extract stage's source hands them on.
fn warc_pages(path: &str) -> Vec<Document> {
    use pipeline::{Location, Source};
    let storage = Storage::new();
    let loc = Location::Local(path.into());
    let meta = storage
        .head(&loc)
        .expect("stat WARC")
        .expect("the WARC file exists");
    let source = extract::WarcSource::new(&extract::Config::default());
    let name = loc.file_name().to_string();
    let mut pages = Vec::new();
    for batch in source.read(&storage, &meta, &name).expect("open WARC") {
        pages.extend(batch.expect("read WARC").docs);
    }
    pages
}
