//! Prints how the extractor sees one HTML file: the largest elements with their text,
//! group and flags, then the extracted text. `cargo run --example explain -- page.html [min_share] [favor]`
use std::io::Read;

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: explain PAGE.html [min_share] [favor]"))?;
    let min_share: f64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.05);
    let mut bytes = Vec::new();
    std::fs::File::open(&path)?.read_to_end(&mut bytes)?;
    let decoded = extract::charset::decode(&bytes, None, "");
    let page = extract::html::parse(&decoded.text, 2_000_000);
    print!("{}", extract::extract::explain(&page, min_share));
    let favor = match std::env::args().nth(3).as_deref() {
        None => extract::extract::Favor::default(),
        Some("balanced") => extract::extract::Favor::Balanced,
        Some("precision") => extract::extract::Favor::Precision,
        Some("recall") => extract::extract::Favor::Recall,
        Some(other) => anyhow::bail!("favor is precision, balanced or recall, not {other}"),
    };
    let opts = extract::extract::Options {
        favor,
        ..Default::default()
    };
    let text = extract::extract::main_text(&page, &opts);
    println!("---- text ({} bytes)\n{}", text.len(), text);
    Ok(())
}
