//! Parquet shards and JSONL readers.

use std::io::Write;

use pipeline::shard::{
    SCHEMA_VERSION, SCHEMA_VERSION_KEY, ShardOptions, ShardWriter, read_all_documents,
};
use pipeline::{Document, Location, Storage};
use proptest::prelude::*;

fn write_docs(storage: &Storage, loc: &Location, docs: &[Document]) {
    let mut w = ShardWriter::new(
        storage.create(loc).expect("create"),
        None,
        &[],
        false,
        &ShardOptions::default(),
    )
    .expect("writer");
    let refs: Vec<&Document> = docs.iter().collect();
    for chunk in refs.chunks(7) {
        w.write(chunk, None, None).expect("write");
    }
    w.finish().expect("finish");
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    prop::option::of("\\PC{0,20}")
}

fn document() -> impl Strategy<Value = Document> {
    (
        "\\PC{1,30}",
        "\\PC{0,200}",
        (opt_text(), opt_text(), opt_text(), opt_text()),
        (
            opt_text(),
            prop::option::of(0.0f64..1.0),
            prop::option::of(0i64..1_000_000),
        ),
    )
        .prop_map(
            |(id, text, (url, date, dump, file_path), (language, language_score, token_count))| {
                Document {
                    id,
                    text,
                    url,
                    date,
                    dump,
                    file_path: file_path.or(Some(String::new())),
                    language,
                    language_score,
                    token_count,
                    annotations: Vec::new(),
                    payload: None,
                    counts: Vec::new(),
                    measures: Vec::new(),
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn parquet_round_trips_any_document(docs in prop::collection::vec(document(), 0..40)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let storage = Storage::new();
        let loc = Location::Local(dir.path().join("s.parquet"));
        write_docs(&storage, &loc, &docs);
        let back = read_all_documents(&storage, &loc).expect("read back");
        prop_assert_eq!(back, docs);
    }
}

#[test]
fn shard_metadata_names_the_schema_version_and_zstd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let storage = Storage::new();
    let loc = Location::Local(dir.path().join("s.parquet"));
    write_docs(
        &storage,
        &loc,
        &[Document::new("a", "ünïcødé text 中文 العربية")],
    );
    let file = std::fs::File::open(dir.path().join("s.parquet")).expect("open");
    let reader = parquet::file::reader::SerializedFileReader::new(file).expect("parquet");
    use parquet::file::reader::FileReader;
    let meta = reader.metadata().file_metadata();
    let kv = meta.key_value_metadata().expect("key-value metadata");
    assert!(
        kv.iter()
            .any(|k| k.key == SCHEMA_VERSION_KEY && k.value.as_deref() == Some(SCHEMA_VERSION))
    );
    let column = reader.metadata().row_group(0).column(1);
    assert!(matches!(
        column.compression(),
        parquet::basic::Compression::ZSTD(_)
    ));
}

fn jsonl_lines() -> String {
    [
        r#"{"id":"d1","text":"Hello world","url":"http://a.example/","source":"cc","score":0.5}"#,
        r#"{"text":"Bonjour le monde","metadata":{"url":"http://b.example/","language":"fr","lang_probs":[0.9]}}"#,
        "not json at all",
        r#"{"id":"d3"}"#,
        "",
        r#"{"id":"d4","text":"こんにちは世界","token_count":5}"#,
    ]
    .join("\n")
}

fn read_jsonl(name: &str, bytes: &[u8]) -> (Vec<Document>, Vec<Option<String>>, Vec<&'static str>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("write");
    let storage = Storage::new();
    let raw = storage.open(&Location::Local(path.clone())).expect("open");
    let reader =
        pipeline::shard::JsonlReader::new(raw, &path.display().to_string(), name, 2, 1 << 20);
    let (mut docs, mut meta, mut drops) = (Vec::new(), Vec::new(), Vec::new());
    for batch in reader {
        let batch = batch.expect("no storage error");
        let carry = batch.carry.expect("jsonl batches carry metadata");
        let col = carry.column(0);
        let strings = arrow_array::cast::AsArray::as_string::<i32>(col.as_ref());
        for i in 0..arrow_array::Array::len(strings) {
            meta.push(
                arrow_array::Array::is_valid(strings, i).then(|| strings.value(i).to_string()),
            );
        }
        docs.extend(batch.docs);
        drops.extend(batch.drops.iter().map(|(reason, _)| *reason));
    }
    (docs, meta, drops)
}

#[test]
fn jsonl_plain_gzip_and_zstd_read_alike() {
    let text = jsonl_lines();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).expect("gzip");
    let gz = gz.finish().expect("gzip");
    let zst = zstd::encode_all(text.as_bytes(), 3).expect("zstd");
    let texts = |docs: &[Document]| {
        docs.iter()
            .map(|d| (d.text.clone(), d.url.clone()))
            .collect::<Vec<_>>()
    };
    let plain = read_jsonl("a.jsonl", text.as_bytes());
    assert_eq!(texts(&read_jsonl("a.jsonl.gz", &gz).0), texts(&plain.0));
    assert_eq!(texts(&read_jsonl("a.jsonl.zst", &zst).0), texts(&plain.0));
    let (docs, meta, drops) = plain;
    let ids: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["d1", "a.jsonl/1", "d4"]);
    assert_eq!(docs[1].url.as_deref(), Some("http://b.example/"));
    assert_eq!(docs[1].language.as_deref(), Some("fr"));
    assert_eq!(docs[2].token_count, Some(5));
    assert_eq!(meta[0].as_deref(), Some(r#"{"score":0.5,"source":"cc"}"#));
    assert_eq!(meta[1].as_deref(), Some(r#"{"lang_probs":[0.9]}"#));
    assert_eq!(meta[2], None);
    assert_eq!(drops, ["malformed_json", "missing_text"]);
}

#[test]
fn truncated_gzip_keeps_what_came_before() {
    let text: String = (0..2000)
        .map(|i| format!("{{\"id\":\"{i}\",\"text\":\"document number {i} with some words\"}}\n"))
        .collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).expect("gzip");
    let gz = gz.finish().expect("gzip");
    let cut = &gz[..gz.len() * 2 / 3];
    let (docs, _, drops) = read_jsonl("t.jsonl.gz", cut);
    assert!(
        docs.len() > 500 && docs.len() < 2000,
        "{} documents before the cut",
        docs.len()
    );
    assert!(docs.iter().enumerate().all(|(i, d)| d.id == i.to_string()));
    assert_eq!(drops.last().copied(), Some("truncated_input"));
}

#[test]
fn oversized_lines_are_dropped_not_held() {
    let big = format!("{{\"text\":\"{}\"}}", "x".repeat(3 << 20));
    let text = format!("{{\"text\":\"a\"}}\n{big}\n{{\"text\":\"b\"}}\n");
    let (docs, _, drops) = read_jsonl("o.jsonl", text.as_bytes());
    assert_eq!(
        docs.iter().map(|d| d.text.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(drops, ["oversized_record"]);
}
