//! Document shards: Parquet files (zstd) in the FineWeb column layout, and JSONL
//! readers for corpora brought from elsewhere.

mod jsonl;
mod parquet;
mod ranged;

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};

pub use jsonl::JsonlReader;
pub use parquet::{ParquetReader, ShardOptions, ShardWriter, read_all_documents, read_columns};

use crate::document::{Column, ColumnKind};

/// Version of the shard layout, stored in the Parquet key-value metadata under
/// [`SCHEMA_VERSION_KEY`].
pub const SCHEMA_VERSION: &str = "1";
/// Key-value metadata key holding [`SCHEMA_VERSION`].
pub const SCHEMA_VERSION_KEY: &str = "tokenmill.schema_version";
/// Column of `_rejected/` shards holding why a document was dropped.
pub const DROP_REASON: &str = "drop_reason";

/// The columns every shard has, in order.
pub const KNOWN_COLUMNS: [&str; 9] = [
    "id",
    "text",
    "url",
    "date",
    "dump",
    "file_path",
    "language",
    "language_score",
    "token_count",
];

fn known_fields() -> Vec<Field> {
    KNOWN_COLUMNS
        .iter()
        .map(|&name| {
            let (ty, nullable) = match name {
                "id" | "text" => (DataType::Utf8, false),
                "language_score" => (DataType::Float64, true),
                "token_count" => (DataType::Int64, true),
                _ => (DataType::Utf8, true),
            };
            Field::new(name, ty, nullable)
        })
        .collect()
}

fn kind_type(kind: ColumnKind) -> DataType {
    match kind {
        ColumnKind::F64 => DataType::Float64,
        ColumnKind::F32 => DataType::Float32,
        ColumnKind::I64 => DataType::Int64,
        ColumnKind::Bool => DataType::Boolean,
        ColumnKind::Str => DataType::Utf8,
    }
}

/// The output schema: the known columns, then the carried input columns (minus any a
/// stage now declares), then the declared columns; `rejected` adds [`DROP_REASON`].
pub fn output_schema(carry: Option<&Schema>, declared: &[Column], rejected: bool) -> SchemaRef {
    let mut fields = known_fields();
    if let Some(carry) = carry {
        for f in carry.fields() {
            if !declared.iter().any(|c| c.name == f.name()) {
                fields.push(f.as_ref().clone());
            }
        }
    }
    for c in declared {
        fields.push(Field::new(c.name, kind_type(c.kind), true));
    }
    if rejected {
        fields.push(Field::new(DROP_REASON, DataType::Utf8, false));
    }
    let metadata: std::collections::HashMap<String, String> =
        [(SCHEMA_VERSION_KEY.to_string(), SCHEMA_VERSION.to_string())]
            .into_iter()
            .collect();
    Arc::new(Schema::new_with_metadata(fields, metadata))
}
