//! A small JSON-schema checker for the discovery-data documents the layouts output: the subset
//! of OpenAPI v3 keywords Deckhouse's discovery schemas use (`type`, `enum`, `required`,
//! `properties`, `additionalProperties: false`, `items`, `minItems`, `uniqueItems`,
//! `minLength`, `oneOf`). Pure: a document and a schema in, every violation with its path out.

use serde_json::Value;

/// Every violation of `schema` by `doc`, each naming the path (`$.instances.securityGroups`).
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
            "integer" => doc.is_i64() || doc.is_u64(),
            "number" => doc.is_number(),
            _ => true,
        };
        if !ok {
            out.push(format!("{path}: must be of type {kind}, is {doc}"));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(doc) {
            out.push(format!(
                "{path}: {doc} is not one of {}",
                Value::from(allowed.clone())
            ));
        }
    }
    if let (Some(min), Some(s)) = (
        schema.get("minLength").and_then(Value::as_u64),
        doc.as_str(),
    ) {
        if (s.chars().count() as u64) < min {
            out.push(format!("{path}: shorter than {min} characters"));
        }
    }
    if let Some(items) = doc.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
            if (items.len() as u64) < min {
                out.push(format!("{path}: fewer than {min} items"));
            }
        }
        if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    out.push(format!("{path}[{i}]: repeats {item}"));
                }
            }
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(item_schema, item, &format!("{path}[{i}]"), out);
            }
        }
    }
    if let Some(fields) = doc.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        for name in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = name.as_str() {
                if !fields.contains_key(name) {
                    out.push(format!("{path}.{name}: is required"));
                }
            }
        }
        for (name, value) in fields {
            match properties.and_then(|p| p.get(name)) {
                Some(sub) => check(sub, value, &format!("{path}.{name}"), out),
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    out.push(format!("{path}.{name}: is not allowed"));
                }
                None => {}
            }
        }
    }
    if let Some(branches) = schema.get("oneOf").and_then(Value::as_array) {
        let results: Vec<Vec<String>> = branches
            .iter()
            .map(|b| {
                let mut v = Vec::new();
                check(b, doc, path, &mut v);
                v
            })
            .collect();
        let matching = results.iter().filter(|r| r.is_empty()).count();
        if matching != 1 {
            let why: Vec<String> = results.iter().flatten().cloned().collect();
            out.push(format!(
                "{path}: matches {matching} of the {} oneOf branches, not exactly one ({})",
                branches.len(),
                why.join("; ")
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_each_violation_by_path() {
        let schema = json!({
            "type": "object", "additionalProperties": false, "required": ["kind", "zones"],
            "properties": {
                "kind": {"type": "string", "enum": ["A"]},
                "zones": {"type": "array", "minItems": 1, "uniqueItems": true,
                          "items": {"type": "string", "minLength": 1}}
            }
        });
        assert!(violations(&schema, &json!({"kind": "A", "zones": ["z"]})).is_empty());
        let v = violations(
            &schema,
            &json!({"kind": "B", "zones": ["z", "z", ""], "layout": "x"}),
        );
        assert_eq!(v.len(), 4, "{v:?}");
        assert!(v.iter().any(|m| m == "$.layout: is not allowed"), "{v:?}");
        assert!(
            v.iter().any(|m| m.starts_with("$.zones[1]: repeats")),
            "{v:?}"
        );
        assert!(
            v.iter().any(|m| m.starts_with("$.zones[2]: shorter")),
            "{v:?}"
        );
        assert_eq!(
            violations(&schema, &json!({"kind": "A"})),
            ["$.zones: is required"]
        );
    }

    #[test]
    fn one_of_needs_exactly_one_branch() {
        let schema = json!({"oneOf": [
            {"properties": {"k": {"enum": ["a"]}}},
            {"properties": {"k": {"enum": ["a", "b"]}}}
        ]});
        assert!(violations(&schema, &json!({"k": "b"})).is_empty());
        assert_eq!(violations(&schema, &json!({"k": "a"})).len(), 1);
        assert_eq!(violations(&schema, &json!({"k": "c"})).len(), 1);
    }
}
