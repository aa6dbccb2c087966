//! Kernels of the classify stage: a fastText classifier's scores of texts (the model
//! and texts of `TOKENMILL_BENCH_FASTTEXT_MODEL` and `TOKENMILL_BENCH_TEXTS`, a JSONL
//! of `{"text": ...}`, as scripts/bench-classify.sh leaves them; else a model trained
//! here on the classify fixtures), the CPU encoder's forward pass of a BERT-base-shaped
//! model (random weights) on 8 sequences of 256 tokens, and a quantile sketch taking
//! a million scores.

use std::path::Path;

use classify::transformer::cpu::CpuEncoder;
use classify::transformer::{
    Activation, Arch, LayerWeights, ModelConfig, Problem, Tensor, Weights,
};
use classify::{ClassifierConfig, Classify, Config, Kind};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pipeline::{Location, RunOptions, Storage};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn texts() -> Vec<String> {
    pipeline::testing::bench_texts(&root().join("fixtures/classify/positives.jsonl"))
}

fn fasttext_model(dir: &Path) -> String {
    if let Ok(m) = std::env::var("TOKENMILL_BENCH_FASTTEXT_MODEL") {
        return m;
    }
    let set =
        |n: &str| Location::Local(root().join("fixtures/classify").join(format!("{n}.jsonl")));
    classify::train::train_step(
        &Storage::new(),
        &RunOptions::new(set("positives"), Location::Local(dir.to_path_buf())),
        &set("positives"),
        &set("negatives"),
        &classify::train::TrainConfig {
            bucket: 100_000,
            ..classify::train::TrainConfig::default()
        },
    )
    .expect("train");
    dir.join("model.bin").to_string_lossy().into_owned()
}

fn fasttext(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = fasttext_model(dir.path());
    let classify = Classify::new(
        &Storage::new(),
        &Config {
            classifiers: vec![ClassifierConfig {
                label: Some("hq".into()),
                ..ClassifierConfig::new("q", Kind::Fasttext, &model)
            }],
            ..Config::default()
        },
    )
    .expect("load");
    let texts = texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let mut g = c.benchmark_group("fasttext");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function(format!("score {} texts", refs.len()), |b| {
        b.iter(|| {
            for t in &refs {
                std::hint::black_box(classify.classifiers()[0].score(t));
            }
        })
    });
    g.finish();
}

fn random(shape: &[usize], rng: &mut fastrand::Rng, scale: f32) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor {
        shape: shape.to_vec(),
        data: (0..n).map(|_| (rng.f32() - 0.5) * scale).collect(),
    }
}

fn encoder(c: &mut Criterion) {
    let (h, layers, inter, vocab) = (768, 12, 3072, 30522);
    let config = ModelConfig {
        arch: Arch::Bert,
        hidden: h,
        layers,
        heads: 12,
        intermediate: inter,
        vocab,
        positions: 512,
        type_vocab: 2,
        layer_norm_eps: 1e-12,
        activation: Activation::Gelu,
        pad_token_id: 0,
        labels: vec!["LABEL_0".into()],
        problem: Problem::Regression,
    };
    let mut rng = fastrand::Rng::with_seed(1);
    let r = &mut rng;
    let linear = |out: usize, inp: usize, r: &mut fastrand::Rng| {
        (random(&[out, inp], r, 0.05), random(&[out], r, 0.05))
    };
    let norm = |r: &mut fastrand::Rng| {
        let _ = r;
        (
            Tensor {
                shape: vec![h],
                data: vec![1.0; h],
            },
            Tensor {
                shape: vec![h],
                data: vec![0.0; h],
            },
        )
    };
    let weights = Weights {
        word: random(&[vocab, h], r, 0.05),
        position: random(&[512, h], r, 0.05),
        token_type: random(&[2, h], r, 0.05),
        embedding_norm: norm(r),
        layers: (0..layers)
            .map(|_| LayerWeights {
                query: linear(h, h, r),
                key: linear(h, h, r),
                value: linear(h, h, r),
                attention_out: linear(h, h, r),
                attention_norm: norm(r),
                up: linear(inter, h, r),
                down: linear(h, inter, r),
                output_norm: norm(r),
            })
            .collect(),
        head_dense: linear(h, h, r),
        head_out: linear(1, h, r),
    };
    let model = CpuEncoder::new(&config, weights).expect("encoder");
    let seqs: Vec<Vec<u32>> = (0..8)
        .map(|s| {
            (0..256)
                .map(|i| ((s * 977 + i * 131) % vocab) as u32)
                .collect()
        })
        .collect();
    let batch: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let mut g = c.benchmark_group("encoder");
    g.sample_size(10);
    g.throughput(Throughput::Elements(8 * 256));
    g.bench_function("bert-base forward, 8 x 256 tokens, one thread", |b| {
        b.iter(|| std::hint::black_box(model.forward(&batch)))
    });
    g.finish();
}

fn sketch(c: &mut Criterion) {
    let mut rng = fastrand::Rng::with_seed(3);
    let values: Vec<f32> = (0..1_000_000).map(|_| rng.f32()).collect();
    let mut g = c.benchmark_group("sketch");
    g.throughput(Throughput::Elements(values.len() as u64));
    g.bench_function("add 10^6 scores", |b| {
        b.iter(|| {
            let mut s = pipeline::sketch::Sketch::new(pipeline::sketch::DEFAULT_K, 1);
            for &x in &values {
                s.add(x);
            }
            std::hint::black_box(s.count())
        })
    });
    g.finish();
}

criterion_group!(benches, fasttext, encoder, sketch);
criterion_main!(benches);
