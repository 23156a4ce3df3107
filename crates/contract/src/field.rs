//! A contract's declared fields: their kinds and what the rules and the single
//! pass need of each.

/// Most fields a contract may declare: the single pass keeps one bit per field.
pub const MAX_FIELDS: usize = 64;

/// A field's type, with what its values must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A non-empty string without control characters (U+0000–U+001F).
    String,
    /// A string equal to one of these values (compared after unescaping).
    Enum(Vec<String>),
    /// A JSON integer literal (no fraction or exponent) within the bounds.
    Integer {
        min: i64,
        max: i64,
    },
    Boolean,
    /// An RFC 3339 time with an offset, published in UTC (fraction kept).
    Time,
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Enum(_) => "enum",
            Kind::Integer { .. } => "integer",
            Kind::Boolean => "boolean",
            Kind::Time => "time",
        }
    }
}

/// One declared field.
#[derive(Debug, Clone)]
pub struct FieldSpec {
    pub name: String,
    pub kind: Kind,
    pub required: bool,
    pub nullable: bool,
    pub description: Option<String>,
    /// `missing_<name>` and `invalid_<name>`: the quarantine reason codes.
    pub missing_code: String,
    pub invalid_code: String,
    /// `"name":` (with a leading `,` for every field but the first in canonical
    /// order): written before the value in the canonical form.
    pub(super) prefix: Vec<u8>,
}
