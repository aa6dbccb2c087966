//! Kernel benchmarks of the extract stage: HTML parse + main text, and WARC reading.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn page(paragraphs: usize) -> String {
    let mut html = String::from(
        "<!doctype html><html><head><title>Bench</title><style>p{}</style></head><body>\
         <nav><ul><li><a href=/>Home</a></li><li><a href=/a>About</a></li></ul></nav>\
         <div class=\"cookie-banner\">We use cookies <button>OK</button></div><article><h1>Title</h1>",
    );
    for i in 0..paragraphs {
        html.push_str(&format!(
            "<p>Paragraph {i} with <b>some</b> text, a <a href=\"/l{i}\">link</a> and &amp; entities \
             like &eacute;t&eacute;; it goes on for a while so that it looks like prose.</p>"
        ));
    }
    html.push_str("</article><footer>Copyright</footer></body></html>");
    html
}

fn bench(c: &mut Criterion) {
    let extract = extract::Extract::new(&extract::Config::default());
    let html = page(200);
    let mut g = c.benchmark_group("extract");
    g.throughput(Throughput::Bytes(html.len() as u64));
    g.bench_function("main_text_40k_page", |b| {
        b.iter(|| {
            extract
                .text_of(
                    black_box(html.as_bytes()),
                    Some("utf-8"),
                    "https://example.com/",
                )
                .map(|t| t.len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
