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
    // Read as the config reads `favor` (precision, balanced or recall).
    let favor = match std::env::args().nth(3) {
        None => extract::extract::Favor::default(),
        Some(name) => serde::Deserialize::deserialize(serde::de::value::StrDeserializer::<
            serde::de::value::Error,
        >::new(&name))?,
    };
    let opts = extract::extract::Options {
        favor,
        ..Default::default()
    };
    let text = extract::extract::main_text(&page, &opts);
    println!("---- text ({} bytes)\n{}", text.len(), text);
    Ok(())
}
