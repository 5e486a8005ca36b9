//! The part of OpenAPI v3 schemas Deckhouse's discovery-data and cluster-configuration schemas
//! use (`type`, `required`, `properties`, `additionalProperties` as a boolean or a schema,
//! `items`, `enum`, `minItems`), enough to hold a layout's output against them. Pure: the
//! schema and the document are JSON values; every violation is reported with its path.

use serde_json::Value;

/// Every violation of `schema` by `doc`, each as `<path>: <what>` (`$` is the document).
pub fn violations(schema: &Value, doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    check(schema, doc, "$", &mut out);
    out
}

fn check(schema: &Value, doc: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(kind) = schema.get("type").and_then(Value::as_str) {
        let ok = match kind {
            "object" => doc.is_object(),
            "array" => doc.is_array(),
            "string" => doc.is_string(),
            "boolean" => doc.is_boolean(),
            "integer" => doc.as_i64().is_some() || doc.as_u64().is_some(),
            "number" => doc.is_number(),
            _ => true,
        };
        if !ok {
            out.push(format!("{path}: must be of type {kind}, got {doc}"));
            return;
        }
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        if !values.contains(doc) {
            out.push(format!("{path}: must be one of {values:?}, got {doc}"));
        }
    }
    if let Some(object) = doc.as_object() {
        for key in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !object.contains_key(key) {
                out.push(format!("{path}: required key {key} is missing"));
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (key, value) in object {
            let child = format!("{path}.{key}");
            match (
                properties.and_then(|p| p.get(key)),
                schema.get("additionalProperties"),
            ) {
                (Some(s), _) => check(s, value, &child, out),
                (None, Some(Value::Bool(false))) => out.push(format!(
                    "{child}: not allowed (additionalProperties: false)"
                )),
                (None, Some(s @ Value::Object(_))) => check(s, value, &child, out),
                (None, _) => {}
            }
        }
    }
    if let Some(items) = doc.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
            if (items.len() as u64) < min {
                out.push(format!("{path}: must hold at least {min} items"));
            }
        }
        if let Some(s) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(s, item, &format!("{path}[{i}]"), out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["kind", "zones", "map"],
            "properties": {
                "kind": { "type": "string", "enum": ["A"] },
                "zones": { "type": "array", "minItems": 1, "items": { "type": "string" } },
                "map": { "type": "object", "additionalProperties": { "type": "string" } },
                "open": { "type": "object" }
            }
        })
    }

    #[test]
    fn a_valid_document_has_no_violation() {
        let doc = json!({"kind": "A", "zones": ["z"], "map": {"z": "s"}, "open": {"x": 1}});
        assert_eq!(violations(&schema(), &doc), Vec::<String>::new());
    }

    #[test]
    fn each_violation_names_its_path() {
        let doc = json!({"kind": "B", "zones": [], "map": {"z": 1}, "extra": true});
        let found = violations(&schema(), &doc);
        assert_eq!(
            found,
            vec![
                "$.extra: not allowed (additionalProperties: false)".to_string(),
                "$.kind: must be one of [String(\"A\")], got \"B\"".to_string(),
                "$.map.z: must be of type string, got 1".to_string(),
                "$.zones: must hold at least 1 items".to_string(),
            ]
        );
        let missing = violations(&schema(), &json!({"kind": "A"}));
        assert!(
            missing.contains(&"$: required key zones is missing".to_string()),
            "{missing:?}"
        );
    }
}
