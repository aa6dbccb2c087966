//! Times each rule family of the quality stage on a JSONL of documents
//! (`{"text": …}` a line), one core, best of five passes: `cargo run --release -p quality --example profile -- docs.jsonl`
use std::io::BufRead;
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: profile DOCS.jsonl"))?;
    let mut texts = Vec::new();
    for line in std::io::BufReader::new(std::fs::File::open(&path)?).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        texts.push(v["text"].as_str().unwrap_or_default().to_string());
    }
    let n = texts.len() as f64;
    let c = quality::Config::default();
    // Best of five passes: the machine's noise only ever adds time.
    let time = |name: &str, f: &dyn Fn(&str)| {
        let best = (0..5)
            .map(|_| {
                let start = Instant::now();
                for t in &texts {
                    f(t);
                }
                start.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        println!("{name:<20} {:8.3} ms/doc", best * 1000.0 / n);
    };
    let only_stage = std::env::var_os("PROFILE_STAGE_ONLY").is_some();
    if !only_stage {
        time("split_words", &|t| {
            std::hint::black_box(quality::words::split_words(t));
        });
        time("gopher_repetition", &|t| {
            std::hint::black_box(c.gopher_repetition.check(t));
        });
        time("gopher_quality", &|t| {
            std::hint::black_box(c.gopher_quality.check(t));
        });
        time("c4", &|t| {
            let _ = std::hint::black_box(c.c4.apply(t));
        });
        time("fineweb", &|t| {
            std::hint::black_box(c.fineweb.check(t));
        });
    }
    if !only_stage {
        let words_of: Vec<Vec<&str>> = texts
            .iter()
            .map(|t| quality::words::split_words(t))
            .collect();
        let mut r = c.gopher_repetition.clone();
        let full = r.clone();
        r.top_ngram_char_frac.clear();
        r.dup_ngram_char_frac.clear();
        let time_words = |name: &str, rule: &quality::GopherRepetition| {
            let start = Instant::now();
            for (t, w) in texts.iter().zip(&words_of) {
                std::hint::black_box(rule.check_words(t, w));
            }
            println!(
                "{name:<20} {:8.3} ms/doc",
                start.elapsed().as_secs_f64() * 1000.0 / n
            );
        };
        time_words("rep: lines+paras", &r);
        r.top_ngram_char_frac = full.top_ngram_char_frac.clone();
        time_words("rep: + top n-grams", &r);
        time_words("rep: all", &full);
    }
    let q = quality::Quality::new(&pipeline::Storage::new(), &c).expect("quality stage");
    // The decisions, so that a faster version can be checked to decide the same.
    let mut reasons = std::collections::BTreeMap::<&str, usize>::new();
    for t in &texts {
        let mut s = t.clone();
        *reasons
            .entry(q.judge(&mut s).unwrap_or("kept"))
            .or_default() += 1;
    }
    println!("decisions            {reasons:?}");
    time("whole stage", &|t| {
        let mut s = t.to_string();
        std::hint::black_box(q.judge(&mut s));
    });
    Ok(())
}
