//! One AdamW step on CPU for the `125m` preset's parameters (f32, 256,000-entry
//! vocabulary: about 1.2 GB a buffer): one parameter at a time (ten element-wise
//! operations each, the unfused form) against the fused step over flat buffers (the
//! gradients gathered into one, then a dozen operations over three tensors).
//! `cargo bench -p trainer --bench optim`.

use criterion::{Criterion, criterion_group, criterion_main};
use tch::{Device, Kind, Tensor, nn};
use trainer::model::{Model, ModelConfig};
use trainer::optim::{AdamW, AdamWConfig, Flat, flatten_into};

fn shapes() -> Vec<Vec<i64>> {
    let vs = nn::VarStore::new(Device::Cpu);
    let config = ModelConfig::preset("125m").expect("preset");
    let _model = Model::new(&vs, &config).expect("model");
    let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named.iter().map(|(_, t)| t.size()).collect()
}

fn randn(shapes: &[Vec<i64>]) -> Vec<Tensor> {
    shapes
        .iter()
        .map(|s| Tensor::randn(s.as_slice(), (Kind::Float, Device::Cpu)) * 0.02)
        .collect()
}

fn optimiser_step(c: &mut Criterion) {
    tch::manual_seed(1);
    let shapes = shapes();
    let elements: i64 = shapes.iter().map(|s| s.iter().product::<i64>()).sum();
    eprintln!("125m: {} tensors, {elements} parameters", shapes.len());
    let config = AdamWConfig::default();
    let mut group = c.benchmark_group("adamw_125m_cpu");
    group.sample_size(10);
    {
        let mut params = randn(&shapes);
        let grads = randn(&shapes);
        let mut opt = AdamW::new(&params, &config).expect("adamw");
        group.bench_function("per_parameter", |b| {
            b.iter(|| opt.update_each(&mut params, &grads, 1e-4).expect("step"))
        });
    }
    {
        let params = randn(&shapes);
        let grads = randn(&shapes);
        let mut opt = AdamW::new(&params, &config).expect("adamw");
        let masters = Flat::copy_of(&params, &opt.layout, Kind::Float).expect("flat");
        drop(params);
        let grad = Tensor::zeros([opt.layout.total], (Kind::Float, Device::Cpu));
        group.bench_function("fused", |b| {
            b.iter(|| {
                flatten_into(&grads, &opt.layout, &grad).expect("flatten");
                opt.update(&masters.flat, &grad, 1e-4).expect("step")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, optimiser_step);
criterion_main!(benches);
