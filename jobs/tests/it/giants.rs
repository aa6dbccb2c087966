//! Giants at the document stages: a 100 MB document in a Parquet shard, a 500 MB
//! JSONL line, and a shard whose footer claims 10⁹ rows, read by langid, quality and
//! both tokenize phases, each step straight from the raw input. Each giant ends as a
//! counted drop before any stage holds it, its neighbours go on, and the whole run's
//! peak RSS stays under [`RSS_BOUND_MIB`] (printed with `--nocapture`).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use pipeline::document::Document;
use pipeline::marker::list_markers;
use pipeline::shard::{ShardOptions, ShardWriter};
use pipeline::storage::{Location, Storage};

use super::{mill, ok};

/// The stated bound on a `mill run` of one task over these inputs: the 100 MB text
/// is decoded once by the Parquet reader (the page holding it), then dropped.
const RSS_BOUND_MIB: u64 = 512;

const GIANT_TEXT: usize = 100 << 20;
const GIANT_LINE: usize = 500 << 20;

fn prose(i: usize) -> String {
    format!(
        "Document {i} is a short note about rivers, bridges and the towns that grew \
         beside them. The old stone bridge was rebuilt after the flood of that year, and \
         the market moved to the other bank. People still walk across it every morning \
         on their way to work, and the children fish from the steps below the arches."
    )
}

fn write_shard(path: &Path, docs: &[Document]) {
    let storage = Storage::new();
    let mut w = ShardWriter::new(
        storage
            .create(&Location::Local(path.to_path_buf()))
            .expect("create"),
        None,
        &[],
        false,
        &ShardOptions::default(),
    )
    .expect("writer");
    for d in docs {
        w.write(&[d], None, None).expect("write");
    }
    w.finish().expect("finish");
}

/// A copy of the shard at `from` whose footer says each row group holds 10⁹ rows (the
/// data pages hold the real few).
fn lying_footer(from: &Path, to: &Path) {
    use parquet::file::metadata::{
        FileMetaData, ParquetMetaDataBuilder, ParquetMetaDataReader, ParquetMetaDataWriter,
    };
    let bytes = std::fs::read(from).expect("read shard");
    let file = File::open(from).expect("open shard");
    let meta = ParquetMetaDataReader::new()
        .parse_and_finish(&file)
        .expect("footer");
    let claimed = 1_000_000_000i64;
    let fm = meta.file_metadata();
    let mut builder = ParquetMetaDataBuilder::new(FileMetaData::new(
        fm.version(),
        claimed * meta.num_row_groups() as i64,
        fm.created_by().map(str::to_string),
        fm.key_value_metadata().cloned(),
        fm.schema_descr_ptr(),
        fm.column_orders().cloned(),
    ));
    for rg in meta.row_groups() {
        let rg = rg
            .clone()
            .into_builder()
            .set_num_rows(claimed)
            .build()
            .expect("row group");
        builder = builder.add_row_group(rg);
    }
    let lying = builder.build();
    let footer_len = u32::from_le_bytes(
        bytes[bytes.len() - 8..bytes.len() - 4]
            .try_into()
            .expect("4 bytes"),
    ) as usize;
    let data_end = bytes.len() - 8 - footer_len;
    let mut out = bytes[..data_end].to_vec();
    ParquetMetaDataWriter::new(&mut out, &lying)
        .finish()
        .expect("write footer");
    std::fs::write(to, out).expect("write lying shard");
}

#[test]
fn giant_documents_and_lying_footers_are_counted_before_any_stage() {
    if !super::model_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).expect("docs");
    let small = |i: usize| Document::new(format!("small-{i}"), prose(i));
    // A shard: a small document, a 100 MB one, another small one.
    let mut giant = String::with_capacity(GIANT_TEXT);
    let mut i = 0;
    while giant.len() < GIANT_TEXT {
        giant.push_str(&prose(i));
        giant.push('\n');
        i += 1;
    }
    write_shard(
        &docs.join("giant.parquet"),
        &[small(1), Document::new("giant", giant), small(2)],
    );
    // A JSONL file: a small line, a 500 MB line, another small line (gzip: 500 MB
    // inflated from about half a megabyte).
    {
        let f = File::create(docs.join("line.jsonl.gz")).expect("jsonl");
        let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        writeln!(
            gz,
            "{}",
            serde_json::json!({"id": "small-3", "text": prose(3)})
        )
        .expect("w");
        gz.write_all(b"{\"id\": \"giant-line\", \"text\": \"")
            .expect("w");
        let chunk = "a river ".repeat(1 << 16);
        for _ in 0..GIANT_LINE / chunk.len() {
            gz.write_all(chunk.as_bytes()).expect("w");
        }
        gz.write_all(b"\"}\n").expect("w");
        writeln!(
            gz,
            "{}",
            serde_json::json!({"id": "small-4", "text": prose(4)})
        )
        .expect("w");
        gz.finish().expect("gzip");
    }
    // A shard whose footer claims 10⁹ rows in each row group.
    let honest = dir.path().join("honest.parquet");
    write_shard(&honest, &[small(5), small(6)]);
    lying_footer(&honest, &docs.join("lying.parquet"));

    let input = docs.to_string_lossy();
    let run = dir.path().join("run");
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(
        &pipeline,
        format!(
            r#"input = "{input}"
output = "{run}"
tasks = 1

[config.tokenize.train]
vocab_size = 300

[[step]]
name = "lang"
stages = ["langid"]

[[step]]
name = "qual"
stages = ["quality"]
input = "{input}"

[[step]]
name = "tokenizer"
phase = "tokenize.train"
input = "{input}"

[[step]]
name = "tokens"
phase = "tokenize.encode"
input = "{input}"
tokenizer = "tokenizer"
"#,
            run = run.display()
        ),
    )
    .expect("pipeline");
    let mut cmd = mill(&["run", &pipeline.to_string_lossy(), "--threads", "1"]);
    cmd.env("RUST_LOG", "warn");
    let (out, rss) = pipeline::testing::run_with_peak_rss(&cmd);
    ok(out, "mill run over the giants");
    println!("giants: mill run peak RSS {rss} MiB");
    assert!(rss < RSS_BOUND_MIB, "peak RSS {rss} MiB ≥ {RSS_BOUND_MIB}");

    let storage = Storage::new();
    for step in ["lang", "qual", "tokens"] {
        let markers = list_markers(&storage, &Location::Local(run.join(step))).expect("markers");
        let stat = |input: &str| {
            markers
                .iter()
                .find(|(stem, _)| stem.as_str() == input)
                .map(|(_, m)| m.stats.clone())
                .unwrap_or_else(|| panic!("{step}: no marker for {input}: {markers:?}"))
        };
        // Each giant is one counted drop beside its two neighbours; the lying footer's
        // missing rows are counted as lost, beside the two rows its pages hold.
        for (input, reason, dropped, docs_in) in [
            ("giant", "oversized_record", 1, 3),
            ("line", "oversized_record", 1, 3),
            ("lying", "corrupt_parquet", 999_999_998, 1_000_000_000),
        ] {
            let s = stat(input);
            assert_eq!(s.drops.get(reason), Some(&dropped), "{step}/{input}: {s:?}");
            assert_eq!(s.docs_in, docs_in, "{step}/{input}: {s:?}");
            assert_eq!(
                s.docs_in,
                s.docs_out + s.drops.values().sum::<u64>(),
                "{step}/{input}: stats add up"
            );
        }
    }
}
