//! fastText classifiers of any labels: DCLM's `fasttext-oh-eli5` (`hq` against `cc`),
//! a FineWeb-Edu fastText model, or one `mill-classify train` fits. The model is read
//! into the predictor langid and toxicity use ([`pipeline::fasttext_model`]), whose
//! probabilities are fastText's own; every label's probability comes from one
//! prediction (`predict(k=-1)`). A softmax model of few labels is scored from each
//! row's products with the output rows (`Predictor::project`): within 1e-7 of
//! fastText's probabilities, several times faster on a large model.

use pipeline::fasttext_model::Model;
use pipeline::{Result, Storage};

use crate::{ClassifierConfig, TextForm};

/// A loaded fastText classifier.
#[derive(Debug)]
pub struct FastText {
    model: Model,
    form: TextForm,
}

impl FastText {
    /// Loads the model at `config.model` (disk or S3), checking its SHA-256 when given.
    pub fn load(storage: &Storage, config: &ClassifierConfig) -> Result<FastText> {
        let mut model = Model::load(
            storage,
            &config.model,
            config.model_sha256.as_deref(),
            "give a supervised fastText model (.bin or .ftz), or train one with `mill-classify train`",
        )?;
        // A softmax over few labels (DCLM's, FineWeb-Edu fastText's): each row's
        // products with the output rows stand for the row (see `Predictor::project`).
        model.predictor.project();
        Ok(FastText {
            model,
            form: config.text,
        })
    }

    /// The model's labels without `__label__`, by index.
    pub fn labels(&self) -> Vec<String> {
        self.model
            .predictor
            .labels()
            .iter()
            .map(|l| l.strip_prefix("__label__").unwrap_or(l).to_string())
            .collect()
    }

    /// SHA-256 of the model file.
    pub fn sha256(&self) -> &str {
        &self.model.sha256
    }

    /// Every label's probability for `text`, by label index.
    pub fn probabilities(&self, text: &str) -> Vec<f32> {
        let predictor = &self.model.predictor;
        let mut out = vec![0f32; predictor.labels().len()];
        for (i, p) in predictor.predict_text(&self.form.apply(text), -1, 0.0) {
            if let Some(slot) = out.get_mut(i) {
                *slot = p;
            }
        }
        out
    }
}
