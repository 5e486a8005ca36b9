//! Whether every field of the cluster configuration is used: the leaf paths of the
//! `providerClusterConfiguration` object type, against the attribute accesses (`.name`) in the
//! expressions of a cloud's layouts. A name-level check: a field counts as used when every
//! segment of its path is accessed somewhere outside the variable declarations (module
//! boundaries rename variables, so full paths cannot be followed without evaluating).

use std::collections::BTreeSet;

use hcl::Expression;
use regex::Regex;

use crate::module::object_key;

/// The leaf paths of an OpenTofu type expression: `object({a = string, b = object({c = number})})`
/// gives `a` and `b.c`; `optional(T, default)`, `list(T)`, `set(T)`, `map(T)` give the paths of
/// `T` (elements need no index in the path).
pub fn leaf_paths(type_expr: &Expression) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    walk(type_expr, &mut Vec::new(), &mut out);
    out
}

fn walk(expr: &Expression, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match expr {
        Expression::FuncCall(call) => match (call.name.name.as_str(), call.args.first()) {
            ("object", Some(Expression::Object(fields))) => {
                for (key, field_type) in fields.iter() {
                    path.push(object_key(key));
                    walk(field_type, path, out);
                    path.pop();
                }
            }
            ("optional" | "list" | "set" | "map", Some(inner)) => walk(inner, path, out),
            _ => out.push(path.clone()),
        },
        _ => out.push(path.clone()),
    }
}

/// Every attribute name accessed with `.name` in `text` (comments dropped).
pub fn attribute_accesses(text: &str) -> BTreeSet<String> {
    let comment = Regex::new(r"(?m)(^|\s)(#|//).*$").expect("static regex");
    let access = Regex::new(r"\.([A-Za-z_][A-Za-z0-9_]*)").expect("static regex");
    let code = comment.replace_all(text, "");
    // `.name` counts after an identifier, an index or a call, never after a number.
    access
        .captures_iter(&code)
        .filter(|c| {
            let dot = c.get(0).map_or(0, |m| m.start());
            code[..dot]
                .chars()
                .next_back()
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == '_' || b == ']' || b == ')')
        })
        .map(|c| c[1].to_string())
        .collect()
}

/// The leaf paths (dotted) of `type_expr` some segment of which is never accessed in `texts`.
pub fn unused_fields(type_expr: &Expression, texts: &[String]) -> Vec<String> {
    let accessed: BTreeSet<String> = texts.iter().flat_map(|t| attribute_accesses(t)).collect();
    leaf_paths(type_expr)
        .into_iter()
        .filter(|path| !path.iter().all(|segment| accessed.contains(segment)))
        .map(|path| path.join("."))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn type_of(src: &str) -> Expression {
        let body = hcl::parse(&format!("variable \"v\" {{\n  type = {src}\n}}\n")).unwrap();
        let block = body.blocks().next().unwrap();
        crate::module::attr_expr(&block.body, "type")
            .unwrap()
            .clone()
    }

    #[test]
    fn leaf_paths_follow_objects_through_wrappers() {
        let t = type_of(
            "object({\n a = string\n b = optional(object({\n c = number\n d = list(object({ e = bool }))\n }), {})\n f = map(string)\n})",
        );
        let paths: Vec<String> = leaf_paths(&t).iter().map(|p| p.join(".")).collect();
        assert_eq!(paths, vec!["a", "b.c", "b.d.e", "f"]);
    }

    #[test]
    fn accesses_ignore_comments_and_find_interpolations() {
        let found = attribute_accesses(
            "# var.nothing.here\nx = var.pcc.zones\ny = \"${local.pcc.tags[\"a\"]}\"\nz = m[0].peer\n",
        );
        assert!(found.contains("zones") && found.contains("tags") && found.contains("peer"));
        assert!(!found.contains("here"), "{found:?}");
    }

    #[test]
    fn an_unused_field_is_reported_and_a_used_one_is_not() {
        let t = type_of("object({\n used = string\n nested = object({ forgotten = string })\n})");
        let texts = vec!["x = var.c.used\ny = var.c.nested\n".to_string()];
        assert_eq!(unused_fields(&t, &texts), vec!["nested.forgotten"]);
    }
}
