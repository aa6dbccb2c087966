//! A synthetic corpus for the scale bench of `scripts/bench-dedup.sh`: N documents of
//! 100 to 300 words drawn from a Zipf-like vocabulary of 100,000 made-up words, in JSONL
//! files of 100,000 documents; 5% are exact copies and 10% near copies (5% of the words
//! replaced) of an earlier document. Seeded: the same N gives the same bytes.
//!
//! Usage: dedup_synthetic <out folder> <documents>

use std::io::Write;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(args.len() == 3, "usage: dedup_synthetic <out> <documents>");
    let out = std::path::Path::new(&args[1]);
    let n: usize = args[2].parse()?;
    std::fs::create_dir_all(out)?;
    let mut rng = fastrand::Rng::with_seed(20261203);
    let syllables = [
        "ka", "lo", "mi", "ten", "ra", "su", "vo", "pe", "an", "dri", "el", "no", "ti", "gu",
        "sha", "ber",
    ];
    let vocab: Vec<String> = (0..100_000)
        .map(|_| {
            (0..rng.usize(1..4))
                .map(|_| syllables[rng.usize(..syllables.len())])
                .collect()
        })
        .collect();
    // Zipf-like: index = floor(V^u) - 1 for uniform u.
    let word = |rng: &mut fastrand::Rng| -> usize {
        let u = rng.f64();
        ((vocab.len() as f64).powf(u) as usize)
            .saturating_sub(1)
            .min(vocab.len() - 1)
    };
    let per_file = 100_000;
    let mut recent: Vec<Vec<usize>> = Vec::new();
    let mut file = None;
    for i in 0..n {
        if i % per_file == 0 {
            let path = out.join(format!("part-{:05}.jsonl", i / per_file));
            file = Some(std::io::BufWriter::with_capacity(
                1 << 20,
                std::fs::File::create(path)?,
            ));
        }
        let roll = rng.f64();
        let words: Vec<usize> = if roll < 0.05 && !recent.is_empty() {
            recent[rng.usize(..recent.len())].clone()
        } else if roll < 0.15 && !recent.is_empty() {
            let mut w = recent[rng.usize(..recent.len())].clone();
            for _ in 0..(w.len() / 20).max(1) {
                let k = rng.usize(..w.len());
                w[k] = word(&mut rng);
            }
            w
        } else {
            (0..rng.usize(100..=300)).map(|_| word(&mut rng)).collect()
        };
        if recent.len() < 10_000 {
            recent.push(words.clone());
        } else {
            let k = rng.usize(..recent.len());
            recent[k] = words.clone();
        }
        let text: Vec<&str> = words.iter().map(|&w| vocab[w].as_str()).collect();
        let line = serde_json::json!({"id": format!("syn-{i}"), "text": text.join(" ")});
        if let Some(f) = file.as_mut() {
            writeln!(f, "{line}")?;
        }
    }
    if let Some(mut f) = file {
        f.flush()?;
    }
    Ok(())
}
