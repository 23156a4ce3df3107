//! What `verify` reports: one drift of one input (or of the product's commit log),
//! in a word and a sentence. Its own file, so each check imports it from here.

use serde::Serialize;

/// One drift of `verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub input_name: String,
    pub finding: &'static str,
    pub detail: String,
}

impl Finding {
    pub(super) fn new(input: &str, finding: &'static str, detail: impl Into<String>) -> Self {
        Finding {
            input_name: input.to_owned(),
            finding,
            detail: detail.into(),
        }
    }
}
