//! The JSON Schema (draft 2020-12) of one line of a product, for producers to check
//! lines before they send them (`landing contract schema PRODUCT`).
//!
//! It says what JSON Schema can say; what it cannot (docs/contracts.md lists it:
//! a repeated key, an integer written `1.0`, a lone surrogate, an impossible date
//! such as 30 February, an id sent twice with another payload) only `landing
//! check` decides.

use serde_json::{json, Map, Value};

use super::spec::{Contract, Kind};

/// Any control character (U+0000–U+001F), which no string field may hold. Used
/// under `not` (unanchored: Python's `$` would also match before a final `\n`).
const CONTROL: &str = "[\\u0000-\\u001f]";

/// The RFC 3339 grammar `event_time` accepts; the calendar (days per month) and
/// the normalized instant's range are beyond a pattern.
const TIME: &str = "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$";

fn field_schema(kind: &Kind) -> Value {
    match kind {
        Kind::String => json!({"type": "string", "minLength": 1, "not": {"pattern": CONTROL}}),
        Kind::Enum(values) => json!({"type": "string", "enum": values}),
        Kind::Integer { min, max } => json!({"type": "integer", "minimum": min, "maximum": max}),
        Kind::Boolean => json!({"type": "boolean"}),
        Kind::Time => json!({
            "type": "string",
            "format": "date-time",
            "pattern": TIME,
            "not": {"pattern": CONTROL},
        }),
    }
}

/// The schema of one line of `c`'s product.
pub fn json_schema(c: &Contract) -> Value {
    let mut properties = Map::new();
    for &k in &c.check {
        let f = &c.fields[k];
        let mut s = field_schema(&f.kind);
        if f.nullable {
            s = json!({"anyOf": [s, {"type": "null"}]});
        }
        if let Some(d) = &f.description {
            s["description"] = json!(d);
        }
        properties.insert(f.name.clone(), s);
    }
    let required: Vec<&str> = c
        .check
        .iter()
        .map(|&k| &c.fields[k])
        .filter(|f| f.required)
        .map(|f| f.name.as_str())
        .collect();
    let mut schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("urn:landing:contract:{}:{}", c.name, c.sha256),
        "title": format!("One line of product {} (contract version {})", c.name, c.version),
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    if !c.prohibited.is_empty() {
        // Also outside `properties`, but named: one of these refuses the whole file.
        schema["propertyNames"] = json!({"not": {"enum": c.prohibited}});
    }
    if let Some(d) = &c.description {
        schema["description"] = json!(d);
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::progress;

    #[test]
    fn progress_schema_declares_every_rule_it_can() {
        let s = json_schema(progress());
        assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(
            s["required"],
            json!([
                "event_id",
                "learner_id",
                "lesson_id",
                "event_type",
                "attempt_number",
                "event_time"
            ])
        );
        let p = &s["properties"];
        assert_eq!(p["event_type"]["enum"], json!(["checkpoint", "completed"]));
        assert_eq!(p["attempt_number"]["minimum"], 1);
        assert_eq!(p["attempt_number"]["maximum"], 2147483647);
        assert_eq!(p["checkpoint"]["anyOf"][1], json!({"type": "null"}));
        assert_eq!(p["event_id"]["minLength"], 1);
        assert_eq!(
            s["propertyNames"]["not"]["enum"],
            json!(["email", "name", "payment_token"])
        );
        assert_eq!(p.as_object().map(Map::len), Some(7));
    }
}
