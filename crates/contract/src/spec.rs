//! A product's contract as data: the reviewed file (docs/contracts.md) parsed,
//! checked and compiled into the tables the rules walk ([`Contract`]).
//!
//! Pure: it takes the file's bytes and returns a contract or a message naming the
//! problem (the caller adds the file's name). A compiled contract is owned and shared
//! ([`Arc`]): the run's threads each hold it, and a verdict names a field or a
//! prohibited key by its index, so no pipeline type borrows from it.

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};

pub use super::field::{FieldSpec, Kind, MAX_FIELDS};
use super::table::Table;

/// The `progress` contract, compiled into the binary: the default product.
pub const PROGRESS_SOURCE: &str = include_str!("../../../contracts/progress.json");

/// Key hash table size (bits): field names index into `1 << HASH_BITS` slots.
const HASH_BITS: u32 = 12;

/// The file, as written by people.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContractFile {
    name: String,
    version: String,
    #[serde(default)]
    description: Option<String>,
    identity: String,
    max_line_bytes: u64,
    prohibited: Vec<String>,
    fields: Vec<FieldFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldFile {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default = "yes")]
    required: bool,
    #[serde(default)]
    nullable: bool,
    #[serde(default)]
    values: Option<Vec<String>>,
    #[serde(default)]
    min: Option<i64>,
    #[serde(default)]
    max: Option<i64>,
    #[serde(default)]
    description: Option<String>,
}

fn yes() -> bool {
    true
}

/// A compiled contract. Fields are held in canonical (sorted) key order; `check`
/// gives the order rules are applied and reasons reported (the file's order).
pub struct Contract {
    pub name: String,
    pub version: String,
    pub description: Option<String>,
    /// SHA-256 of the file's bytes (hex): what the checkpoint records.
    pub sha256: String,
    /// The file as read, for `landing contract show`.
    pub source: String,
    pub max_line_bytes: usize,
    pub prohibited: Vec<String>,
    pub fields: Vec<FieldSpec>,
    /// Field indices (into `fields`) in the file's order.
    pub check: Vec<usize>,
    /// Index (into `fields`) of the identity key.
    pub identity: usize,
    /// The contract compiled for the single pass.
    pub(super) fast: Table,
    /// Multiplier of the key hash, chosen so that no two field names share a slot.
    hash_mul: u64,
    /// Slot → field index + 1 (0: no field).
    slots: Box<[u8]>,
}

impl fmt::Debug for Contract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Contract")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

/// The built-in `progress` contract, compiled anew (microseconds: a run does it once).
pub fn progress() -> Arc<Contract> {
    // The embedded file is checked by the unit tests, so this cannot fail at run time.
    Contract::load(PROGRESS_SOURCE.as_bytes()).expect("progress contract")
}

/// The SHA-256 (hex) of the built-in `progress` contract: what a checkpoint written
/// before contracts were stamped was landed under.
pub fn progress_sha256() -> String {
    hex(&Sha256::digest(PROGRESS_SOURCE.as_bytes()))
}

/// The contracts compiled into the binary, by product name.
pub fn builtin(product: &str) -> Option<Arc<Contract>> {
    (product == "progress").then(progress)
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

fn key_word(key: &[u8]) -> u64 {
    // First and last 8 bytes (overlapping for short keys), folded with the length.
    let load = |s: &[u8]| {
        let mut w = [0u8; 8];
        w[..s.len()].copy_from_slice(s);
        u64::from_le_bytes(w)
    };
    let n = key.len();
    let (a, b) = if n >= 8 {
        (load(&key[..8]), load(&key[n - 8..]))
    } else {
        (load(key), 0)
    };
    a ^ b.rotate_left(29) ^ (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl Contract {
    /// Parses, checks and compiles a contract file. The error names the problem
    /// (never the file: the caller knows it).
    pub fn load(bytes: &[u8]) -> Result<Arc<Contract>, String> {
        Self::compile(bytes).map(Arc::new)
    }

    fn compile(bytes: &[u8]) -> Result<Contract, String> {
        let source = std::str::from_utf8(bytes)
            .map_err(|_| "not UTF-8 text".to_owned())?
            .to_owned();
        let file: ContractFile =
            serde_json::from_str(&source).map_err(|e| format!("not a contract: {e}"))?;
        check_file(&file)?;
        let mut seen = std::collections::BTreeSet::new();
        let mut fields = Vec::with_capacity(file.fields.len());
        for f in &file.fields {
            fields.push(field_spec(f, &file.prohibited, &mut seen)?);
        }
        let declared: Vec<String> = fields.iter().map(|f| f.name.clone()).collect();
        fields.sort_by(|a, b| a.name.cmp(&b.name));
        for (k, f) in fields.iter_mut().enumerate() {
            let comma = if k == 0 { "" } else { "," };
            f.prefix = format!("{comma}\"{}\":", f.name).into_bytes();
        }
        let index_of = |name: &str| fields.iter().position(|f| f.name == name);
        let check: Vec<usize> = declared.iter().filter_map(|n| index_of(n)).collect();
        let identity = index_of(&file.identity)
            .ok_or_else(|| format!("identity {:?} is not a declared field", file.identity))?;
        let id = &fields[identity];
        if id.kind != Kind::String || !id.required || id.nullable {
            return Err(format!(
                "identity {:?} must be a required, non-nullable string field",
                file.identity
            ));
        }
        if fields.iter().any(|f| f.name.len() >= 250) {
            return Err("field names are at most 249 bytes".into());
        }
        let fast = Table::new(&fields, identity);
        let (hash_mul, slots) = hash_table(&fields)
            .ok_or("no collision-free key table for these field names (rename one)")?;
        Ok(Contract {
            sha256: hex(&Sha256::digest(bytes)),
            name: file.name,
            version: file.version,
            description: file.description,
            source,
            max_line_bytes: file.max_line_bytes as usize,
            prohibited: file.prohibited,
            fields,
            check,
            identity,
            fast,
            hash_mul,
            slots,
        })
    }

    fn slot(&self, key: &[u8]) -> usize {
        (key_word(key).wrapping_mul(self.hash_mul) >> (64 - HASH_BITS)) as usize
    }

    /// The index (canonical order) of the field named `key`, compared as bytes.
    #[inline]
    pub(super) fn field_index(&self, key: &[u8]) -> Option<usize> {
        let k = usize::from(self.slots[self.slot(key)]).checked_sub(1)?;
        (self.fields[k].name.as_bytes() == key).then_some(k)
    }

    /// The index into `prohibited` of the name `key` is, if any.
    pub(super) fn prohibited_index(&self, key: &[u8]) -> Option<usize> {
        self.prohibited.iter().position(|p| p.as_bytes() == key)
    }

    /// Every quarantine reason code this contract can give, in the order the rules
    /// are checked.
    pub fn reason_codes(&self) -> Vec<&str> {
        let mut codes = vec![
            "line_too_long",
            "invalid_utf8",
            "invalid_json",
            "not_an_object",
            "duplicate_key",
            "unknown_field",
        ];
        let ordered = || self.check.iter().map(|&k| &self.fields[k]);
        codes.extend(
            ordered()
                .filter(|f| f.required)
                .map(|f| f.missing_code.as_str()),
        );
        codes.extend(ordered().map(|f| f.invalid_code.as_str()));
        codes
    }

    /// `name@version (sha256 prefix)`, for logs and messages.
    pub fn label(&self) -> String {
        format!("{}@{} ({})", self.name, self.version, &self.sha256[..12])
    }
}

/// One declared field, checked: its name (once among the names `seen`), its type
/// and what the type allows.
fn field_spec(
    f: &FieldFile,
    prohibited: &[String],
    seen: &mut std::collections::BTreeSet<String>,
) -> Result<FieldSpec, String> {
    let at = |problem: &str| format!("field {:?}: {problem}", f.name);
    if !is_name(&f.name) {
        return Err(at("names are [A-Za-z0-9_.-]+"));
    }
    if !seen.insert(f.name.clone()) {
        return Err(at("declared twice"));
    }
    if prohibited.contains(&f.name) {
        return Err(at("is also prohibited"));
    }
    let bounds_only_for_integer = f.min.is_some() || f.max.is_some();
    let kind = match f.kind.as_str() {
        "string" => Kind::String,
        "boolean" => Kind::Boolean,
        "time" => Kind::Time,
        "integer" => {
            let (min, max) = (f.min.unwrap_or(i64::MIN), f.max.unwrap_or(i64::MAX));
            if min > max {
                return Err(at("min is above max"));
            }
            Kind::Integer { min, max }
        }
        "enum" => {
            let values = f.values.clone().unwrap_or_default();
            if values.is_empty() {
                return Err(at("an enum needs a non-empty \"values\" list"));
            }
            for (n, v) in values.iter().enumerate() {
                // Published as written: nothing JSON would escape.
                if v.is_empty() || v.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
                    return Err(at(
                        "enum values are non-empty, without control characters, '\"' or '\\'",
                    ));
                }
                if values[..n].contains(v) {
                    return Err(at("an enum value is listed twice"));
                }
            }
            Kind::Enum(values)
        }
        other => {
            return Err(at(&format!(
                "unknown type {other:?} (string, enum, integer, boolean, time)"
            )))
        }
    };
    if f.values.is_some() && !matches!(kind, Kind::Enum(_)) {
        return Err(at("\"values\" is for enum fields only"));
    }
    if bounds_only_for_integer && !matches!(kind, Kind::Integer { .. }) {
        return Err(at("\"min\" and \"max\" are for integer fields only"));
    }
    Ok(FieldSpec {
        missing_code: format!("missing_{}", f.name),
        invalid_code: format!("invalid_{}", f.name),
        name: f.name.clone(),
        kind,
        required: f.required,
        nullable: f.nullable,
        description: f.description.clone(),
        prefix: Vec::new(),
    })
}

/// What the file says of itself: its name, version, line limit, number of fields
/// and prohibited names.
fn check_file(file: &ContractFile) -> Result<(), String> {
    if !is_name(&file.name)
        || file
            .name
            .bytes()
            .any(|b| b.is_ascii_uppercase() || b == b'.')
    {
        return Err(format!(
            "name must match [a-z0-9_-]+ (it names the lake prefix), got {:?}",
            file.name
        ));
    }
    if file.version.trim().is_empty() || file.version.chars().any(char::is_control) {
        return Err("version must be a non-empty line of text".into());
    }
    if file.max_line_bytes == 0 || file.max_line_bytes > u64::from(u32::MAX) {
        return Err("max_line_bytes must be between 1 and 4294967295".into());
    }
    if file.fields.is_empty() || file.fields.len() > MAX_FIELDS {
        return Err(format!("a contract declares 1 to {MAX_FIELDS} fields"));
    }
    for p in &file.prohibited {
        if !is_name(p) {
            return Err(format!("prohibited field {p:?}: names are [A-Za-z0-9_.-]+"));
        }
    }
    Ok(())
}

/// A multiplier under which every field name has its own slot.
fn hash_table(fields: &[FieldSpec]) -> Option<(u64, Box<[u8]>)> {
    let mut mul: u64 = 0x9FB2_1C65_1E98_DF25;
    for _ in 0..256 {
        let mut slots = vec![0u8; 1 << HASH_BITS].into_boxed_slice();
        let ok = fields.iter().enumerate().all(|(k, f)| {
            let s = (key_word(f.name.as_bytes()).wrapping_mul(mul) >> (64 - HASH_BITS)) as usize;
            let free = slots[s] == 0;
            // k < MAX_FIELDS (64), so k + 1 fits a byte.
            slots[s] = k as u8 + 1;
            free
        });
        if ok {
            return Some((mul, slots));
        }
        mul = mul
            .wrapping_mul(0x2545_F491_4F6C_DD1D)
            .wrapping_add(0x9E37_79B9)
            | 1;
    }
    None
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Contract::compile(text.as_bytes()).expect_err("invalid contract")
    }

    const MIN: &str = r#"{"name":"t","version":"1","identity":"id","max_line_bytes":100,"prohibited":["email"],"fields":[{"name":"id","type":"string"}]}"#;

    /// Checkpoints written before contracts were stamped were landed under this
    /// file's bytes: its hash (as `openssl dgst -sha256 contracts/progress.json`
    /// prints it) must never move, or those days would read as landed under another
    /// contract.
    #[test]
    fn the_progress_stamp_is_the_hash_of_the_embedded_file() {
        assert_eq!(
            progress_sha256(),
            "6929ffeec21fb9acfab03437ff62d5ecbba3e8edea7e6d02cc83cfc5c66461b4"
        );
        assert_eq!(progress().sha256, progress_sha256());
    }

    #[test]
    fn progress_compiles_in_canonical_order() {
        let c = progress();
        assert_eq!(c.name, "progress");
        let names: Vec<&str> = c.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, crate::CONTRACT_FIELDS);
        assert_eq!(c.fields[c.identity].name, "event_id");
        assert_eq!(c.max_line_bytes, 1 << 20);
        assert_eq!(c.sha256.len(), 64);
        assert_eq!(c.prohibited, ["email", "name", "payment_token"]);
        for (k, f) in c.fields.iter().enumerate() {
            assert_eq!(c.field_index(f.name.as_bytes()), Some(k));
        }
        for other in ["", "event_idx", "email", "x", "attempt_numbe"] {
            assert_eq!(c.field_index(other.as_bytes()), None, "{other}");
        }
    }

    #[test]
    fn a_minimal_contract_loads() {
        let c = Contract::compile(MIN.as_bytes()).expect("valid");
        assert!(c.fields[0].required, "required by default");
        assert_eq!(c.reason_codes().last(), Some(&"invalid_id"));
    }

    #[test]
    fn invalid_contracts_name_the_problem() {
        let cases = [
            ("{", "not a contract"),
            (
                &MIN.replace(r#""name":"t""#, r#""name":"T x""#),
                "name must match",
            ),
            (
                &MIN.replace(r#""version":"1""#, r#""version":"""#),
                "version",
            ),
            (
                &MIN.replace(r#""identity":"id""#, r#""identity":"x""#),
                "identity \"x\"",
            ),
            (&MIN.replace("100", "0"), "max_line_bytes"),
            (
                &MIN.replace(r#""type":"string""#, r#""type":"float""#),
                "unknown type",
            ),
            (
                &MIN.replace(r#""type":"string""#, r#""type":"integer""#),
                "must be a required",
            ),
            (&MIN.replace(r#"["email"]"#, r#"["id"]"#), "also prohibited"),
            (
                &MIN.replace("}]}", r#"},{"name":"id","type":"string"}]}"#),
                "declared twice",
            ),
            (
                &MIN.replace("}]}", r#"},{"name":"k","type":"enum","values":[]}]}"#),
                "non-empty",
            ),
            (
                &MIN.replace("}]}", r#"},{"name":"k","type":"enum","values":["a\""]}]}"#),
                "enum values",
            ),
            (
                &MIN.replace(
                    "}]}",
                    r#"},{"name":"k","type":"integer","min":2,"max":1}]}"#,
                ),
                "min is above max",
            ),
            (
                &MIN.replace("}]}", r#"},{"name":"k","type":"string","min":2}]}"#),
                "integer fields only",
            ),
            (
                &MIN.replace("}]}", r#"},{"name":"k","type":"string","colour":2}]}"#),
                "unknown field",
            ),
            (
                &MIN.replace("\"fields\":[", "\"fields\":[],\"x\":["),
                "unknown field",
            ),
        ];
        for (text, expected) in cases {
            let e = err(text);
            assert!(e.contains(expected), "{text}: {e}");
        }
    }

    #[test]
    fn many_fields_get_a_collision_free_table() {
        let fields: Vec<String> = (0..MAX_FIELDS)
            .map(|k| format!(r#"{{"name":"f{k:02}","type":"string"}}"#))
            .collect();
        let text = format!(
            r#"{{"name":"w","version":"1","identity":"f00","max_line_bytes":9,"prohibited":[],"fields":[{}]}}"#,
            fields.join(",")
        );
        let c = Contract::compile(text.as_bytes()).expect("64 fields");
        for (k, f) in c.fields.iter().enumerate() {
            assert_eq!(c.field_index(f.name.as_bytes()), Some(k));
        }
        let too_many = text.replace("[{", r#"[{"name":"g","type":"string"},{"#);
        assert!(err(&too_many).contains("1 to 64"));
    }

    #[test]
    fn short_names_that_differ_in_a_few_bits_get_their_own_slots() {
        // One-letter names differ in their low bits only ('a' 0x61, 'c' 0x63): the
        // key word must keep every bit of them, or no multiplier separates them.
        let fields: Vec<String> = ('a'..='z')
            .map(|c| format!(r#"{{"name":"{c}","type":"string"}}"#))
            .collect();
        let text = format!(
            r#"{{"name":"w","version":"1","identity":"a","max_line_bytes":9,"prohibited":[],"fields":[{}]}}"#,
            fields.join(",")
        );
        let c = Contract::compile(text.as_bytes()).expect("26 one-letter fields");
        for (k, f) in c.fields.iter().enumerate() {
            assert_eq!(c.field_index(f.name.as_bytes()), Some(k), "{}", f.name);
        }
    }

    #[test]
    fn names_that_share_a_slot_under_the_first_multiplier_get_another() {
        // "f114" and "f420" share a slot under the first multiplier (computed from
        // key_word), and have one length, so only the high bits of the
        // next multiplier can part them: it must be odd, not 0 or 1.
        let text = MIN.replace(
            r#"[{"name":"id","type":"string"}]"#,
            r#"[{"name":"id","type":"string"},{"name":"f114","type":"string"},{"name":"f420","type":"string"}]"#,
        );
        let c = Contract::compile(text.as_bytes()).expect("a collision-free table");
        for (k, f) in c.fields.iter().enumerate() {
            assert_eq!(c.field_index(f.name.as_bytes()), Some(k), "{}", f.name);
        }
    }

    /// MIN with one more field, `field` being its JSON object's members.
    fn with_field(field: &str) -> String {
        MIN.replace("}]}", &format!("}},{{{field}}}]}}"))
    }

    #[test]
    fn names_are_checked_character_by_character() {
        let named = |name: &str| MIN.replace(r#""name":"t""#, &format!(r#""name":"{name}""#));
        // The contract's own name: lower case, digits, '_' and '-' (a lake prefix).
        for ok in ["t", "a-b_c9"] {
            assert!(Contract::compile(named(ok).as_bytes()).is_ok(), "{ok}");
        }
        for bad in ["T", "a.b", "a b", ""] {
            assert!(err(&named(bad)).contains("name must match"), "{bad}");
        }
        // Prohibited and field names: ASCII letters and digits, '_', '-' and '.'.
        let prohibited = MIN.replace(r#"["email"]"#, r#"["E-mail_1.x"]"#);
        assert!(Contract::compile(prohibited.as_bytes()).is_ok());
        let field = with_field(r#""name":"E-mail_1.x","type":"string""#);
        assert!(Contract::compile(field.as_bytes()).is_ok());
        for bad in ["a b", "", "a/b", "é"] {
            let e = err(&MIN.replace(r#"["email"]"#, &format!(r#"["{bad}"]"#)));
            assert!(e.contains("prohibited field"), "{bad}: {e}");
            let e = err(&with_field(&format!(r#""name":"{bad}","type":"string""#)));
            assert!(e.contains("names are"), "{bad}: {e}");
        }
    }

    #[test]
    fn versions_line_lengths_and_field_counts_have_bounds() {
        let version = |v: &str| MIN.replace(r#""version":"1""#, &format!(r#""version":"{v}""#));
        for bad in ["", " ", r"1\n", r"1\u007f"] {
            assert!(err(&version(bad)).contains("version"), "{bad}");
        }
        assert!(Contract::compile(version("1.0 beta").as_bytes()).is_ok());
        let most = MIN.replace("100", "4294967295");
        assert!(Contract::compile(most.as_bytes()).is_ok());
        assert!(err(&MIN.replace("100", "4294967296")).contains("max_line_bytes"));
        let none = MIN.replace(r#"[{"name":"id","type":"string"}]"#, "[]");
        assert!(err(&none).contains("1 to 64"));
        let long = |n: usize| with_field(&format!(r#""name":"{}","type":"string""#, "f".repeat(n)));
        assert!(Contract::compile(long(249).as_bytes()).is_ok());
        assert!(err(&long(250)).contains("at most 249 bytes"));
    }

    #[test]
    fn field_types_take_only_their_own_options() {
        let ok = [
            r#""name":"k","type":"integer","min":1,"max":1"#,
            r#""name":"k","type":"enum","values":["a b","~"]"#,
            r#""name":"k","type":"boolean""#,
            r#""name":"k","type":"time""#,
        ];
        for field in ok {
            assert!(
                Contract::compile(with_field(field).as_bytes()).is_ok(),
                "{field}"
            );
        }
        let bad = [
            (r#""name":"k","type":"enum","values":[""]"#, "enum values"),
            (
                r#""name":"k","type":"enum","values":["a\\b"]"#,
                "enum values",
            ),
            (
                r#""name":"k","type":"enum","values":["a\u0001"]"#,
                "enum values",
            ),
            (
                r#""name":"k","type":"enum","values":["a","a"]"#,
                "listed twice",
            ),
            (r#""name":"k","type":"enum""#, "non-empty"),
            (
                r#""name":"k","type":"string","values":["a"]"#,
                "enum fields only",
            ),
            (
                r#""name":"k","type":"string","max":2"#,
                "integer fields only",
            ),
        ];
        for (field, problem) in bad {
            let e = err(&with_field(field));
            assert!(e.contains(problem), "{field}: {e}");
        }
        // The identity: a required, non-nullable string.
        for id in [r#""required":false"#, r#""nullable":true"#] {
            let text = MIN.replace(r#""type":"string"}"#, &format!(r#""type":"string",{id}}}"#));
            assert!(err(&text).contains("must be a required"), "{id}");
        }
    }

    #[test]
    fn a_contract_is_labelled_and_hashed_by_its_file() {
        let c = Contract::compile(MIN.as_bytes()).expect("valid");
        let sha = format!("{:x}", Sha256::digest(MIN.as_bytes()));
        assert_eq!(c.sha256, sha);
        assert_eq!(c.label(), format!("t@1 ({})", &sha[..12]));
        assert!(format!("{c:?}").contains(r#"name: "t""#));
        assert_eq!(
            builtin("progress").map(|p| p.name.clone()).as_deref(),
            Some("progress")
        );
        assert!(builtin("enrollment").is_none());
        let kinds = [
            Kind::String,
            Kind::Enum(vec![]),
            Kind::Integer { min: 0, max: 0 },
            Kind::Boolean,
            Kind::Time,
        ];
        let names: Vec<&str> = kinds.iter().map(Kind::name).collect();
        assert_eq!(names, ["string", "enum", "integer", "boolean", "time"]);
    }
}
