//! The request body of the POST rungs: JSON, checked against one JSON Schema compiled once at startup.

use serde_json::{Value, json};

/// The body schema, the same as `SCHEMA` in bench/peers/ladder/ladder.mjs (the cross-runtime test compares
/// them).
pub fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["id", "region", "tags"],
        "properties": {
            "id": { "type": "string", "pattern": "^[A-Za-z0-9_-]{1,32}$" },
            "region": { "type": "string", "pattern": "^[A-Za-z-]{2,35}$" },
            "tags": { "type": "array", "maxItems": 16, "items": { "type": "string", "maxLength": 32 } },
            "note": { "type": "string", "maxLength": 280 }
        }
    })
}

/// The compiled schema.
pub struct BodyValidator(jsonschema::Validator);

impl BodyValidator {
    pub fn new() -> Result<BodyValidator, String> {
        jsonschema::options()
            .offline()
            .build(&schema())
            .map(BodyValidator)
            .map_err(|e| format!("the body schema does not compile: {e}"))
    }

    /// The body's `id` when the body is JSON that matches the schema, else the message for a 400.
    pub fn check(&self, body: &[u8]) -> Result<String, String> {
        // serde_json refuses what JSON.parse refuses, and also invalid UTF-8, lone surrogate escapes and nesting
        // past 128 levels; the peers refuse the first two as well, and such nesting could not match the schema.
        let value: Value = serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
        if let Err(e) = self.0.validate(&value) {
            let path = e.instance_path().as_str();
            return Err(format!("{}: {}", if path.is_empty() { "/" } else { path }, e.masked()));
        }
        match value.get("id") {
            Some(Value::String(id)) => Ok(id.clone()),
            _ => Err("/id: missing".to_string()), // the schema requires a string id; not reached
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_contract_and_refuses_the_rest() {
        let v = BodyValidator::new().expect("compiles");
        let ok = |body: &str| v.check(body.as_bytes());
        assert_eq!(ok(r#"{"id":"abc_-9","region":"en-US","tags":[]}"#).as_deref(), Ok("abc_-9"));
        assert_eq!(ok(r#"{"id":"x","region":"ja","tags":["a","b"],"note":"hi"}"#).as_deref(), Ok("x"));
        let long_tag = "é".repeat(32); // 32 characters, 64 bytes: characters count
        assert!(ok(&format!(r#"{{"id":"x","region":"ja","tags":["{long_tag}"]}}"#)).is_ok());
        for bad in [
            "",
            "{",
            "[]",
            "null",
            r#"{"id":"x","region":"ja"}"#,
            r#"{"id":"","region":"ja","tags":[]}"#,
            r#"{"id":"a b","region":"ja","tags":[]}"#,
            r#"{"id":"abc\n","region":"ja","tags":[]}"#,
            r#"{"id":"x","region":"j","tags":[]}"#,
            r#"{"id":"x","region":"ja1","tags":[]}"#,
            r#"{"id":"x","region":"ja","tags":[1]}"#,
            r#"{"id":"x","region":"ja","tags":[],"extra":1}"#,
            r#"{"id":"x","region":"ja","tags":[],"note":5}"#,
            r#"{"id":"x","region":"ja","tags":["\ud800"]}"#,
        ] {
            assert!(ok(bad).is_err(), "{bad:?} accepted");
        }
        let id33 = "a".repeat(33);
        assert!(ok(&format!(r#"{{"id":"{id33}","region":"ja","tags":[]}}"#)).is_err());
        let tags17 = vec!["\"t\""; 17].join(",");
        assert!(ok(&format!(r#"{{"id":"x","region":"ja","tags":[{tags17}]}}"#)).is_err());
        let note281 = "n".repeat(281);
        assert!(ok(&format!(r#"{{"id":"x","region":"ja","tags":[],"note":"{note281}"}}"#)).is_err());
        assert!(ok(&format!(r#"{{"id":"x","region":"ja","tags":[],"note":"{}"}}"#, "n".repeat(280))).is_ok());
    }
}
