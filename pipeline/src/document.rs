//! The document every stage sees.

/// One document. Column names follow FineWeb where they overlap.
///
/// Columns of the input that no field here names are not in `Document`: the runner
/// carries them through to the output unchanged, row for row. Columns a stage adds are
/// declared by the stage ([`crate::Stage::columns`]) and set with [`Document::annotate`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Document {
    /// Stable, unique id: the WARC-Record-ID when there is one.
    pub id: String,
    /// The text.
    pub text: String,
    /// Where the page came from.
    pub url: Option<String>,
    /// Crawl date (WARC-Date, ISO 8601).
    pub date: Option<String>,
    /// Name of the crawl or dump this came from.
    pub dump: Option<String>,
    /// Address of the input file this document was read from.
    pub file_path: Option<String>,
    /// Language code, e.g. `en`.
    pub language: Option<String>,
    /// Confidence of `language`.
    pub language_score: Option<f64>,
    /// Number of tokens, once tokenized.
    pub token_count: Option<i64>,
    /// Values of stage-declared columns, by column name.
    pub annotations: Vec<(&'static str, Value)>,
    /// Bytes a source read but did not decode (a web page), for the stage that turns
    /// them into `text`. Never written to shards.
    pub payload: Option<Payload>,
    /// Events stages counted on this document without dropping it (PII replaced, by
    /// kind), added to the input's [`crate::Stats::counts`]. Never written to shards.
    pub counts: Vec<(&'static str, u64)>,
    /// Values stages measured on this document whose distribution the run keeps (a
    /// classifier's score), by the name of a measure the stage declared
    /// ([`crate::Stage::measures`]). Never written to shards.
    pub measures: Vec<(&'static str, f32)>,
}

/// Undecoded bytes of a document, with what their container said about them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payload {
    pub bytes: Vec<u8>,
    /// The charset the container declared (the HTTP `Content-Type` parameter).
    pub charset: Option<String>,
}

impl Document {
    /// A document with only an id and a text.
    pub fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        Document {
            id: id.into(),
            text: text.into(),
            ..Default::default()
        }
    }

    /// Sets (or replaces) the value of a stage-declared column.
    pub fn annotate(&mut self, column: &'static str, value: Value) {
        match self
            .annotations
            .iter_mut()
            .find(|(name, _)| *name == column)
        {
            Some(slot) => slot.1 = value,
            None => self.annotations.push((column, value)),
        }
    }

    /// Adds `n` to the event `name` counted on this document (see [`Document::counts`]).
    pub fn count(&mut self, name: &'static str, n: u64) {
        match self.counts.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 += n,
            None => self.counts.push((name, n)),
        }
    }

    /// Records `value` of the measure `name` (see [`Document::measures`]).
    pub fn measure(&mut self, name: &'static str, value: f32) {
        match self.measures.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => self.measures.push((name, value)),
        }
    }

    /// The value of a stage-declared column, if set.
    pub fn annotation(&self, column: &str) -> Option<&Value> {
        self.annotations
            .iter()
            .find(|(name, _)| *name == column)
            .map(|(_, v)| v)
    }
}

/// A value of a stage-declared column.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    F64(f64),
    F32(f32),
    I64(i64),
    Bool(bool),
    Str(String),
}

/// The type of a stage-declared column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    F64,
    F32,
    I64,
    Bool,
    Str,
}

/// A typed, nullable column a stage adds to its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub kind: ColumnKind,
}
