//! `deploy/iam-policy.json` grants exactly the AWS API actions the provider calls: every
//! `AwsApi::call("Operation", ..)` in `crates/providers/aws/src` and every action of the
//! `crates/aws-api` methods it calls (EC2 or Elastic Load Balancing, by the SDK the file uses),
//! plus `ec2:CreateTags` for tag-on-create, and nothing else (CreateTags/DeleteTags on existing
//! instances are the tagging controller's).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use stratus_scenarios::kube_fixture::repo_root;

/// Rust sources under `dir`, recursively, skipping unit-test files.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// The string literals following `marker` (e.g. `.call("`) in `text`.
fn literals_after<'a>(text: &'a str, marker: &str) -> Vec<&'a str> {
    text.match_indices(marker)
        .filter_map(|(i, _)| {
            let rest = &text[i + marker.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect()
}

/// `describe_vpcs` -> `DescribeVpcs`.
fn pascal(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// SDK operations sent in `text`: `client.operation()` (whitespace allowed around the dot).
fn sdk_operations(text: &str) -> BTreeSet<String> {
    let compact: String = text.split_whitespace().collect();
    compact
        .match_indices("client.")
        .filter_map(|(i, m)| {
            let rest = &compact[i + m.len()..];
            let end = rest.find("()")?;
            let name = &rest[..end];
            (name != "clone" && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
                .then(|| pascal(name))
        })
        .collect()
}

/// The AWS service a source file's SDK calls go to.
fn service_of(file: &Path, code: &str) -> &'static str {
    let elb = code.contains("aws_sdk_elasticloadbalancing");
    let ec2 = code.contains("aws_sdk_ec2");
    match (ec2, elb) {
        (true, false) => "ec2",
        (false, true) => "elasticloadbalancing",
        _ => panic!("{}: cannot tell which AWS service it calls", file.display()),
    }
}

/// The call labels of a file (`.call("…"` and the pager's `pages(&self.api, "…"`), checked to
/// name every SDK operation the file sends.
fn labels(file: &Path, code: &str) -> BTreeSet<String> {
    let compact: String = code.split_whitespace().collect();
    let calls: BTreeSet<String> = literals_after(&compact, ".call(\"")
        .into_iter()
        .chain(literals_after(&compact, "pages(&self.api,\""))
        .map(String::from)
        .collect();
    if !calls.is_empty() {
        // The labels name what is sent: every SDK operation of the file is labelled.
        let sent = sdk_operations(code);
        assert!(
            sent.is_subset(&calls),
            "{}: SDK operations {:?} are sent without a matching .call(\"…\") label",
            file.display(),
            sent.difference(&calls).collect::<Vec<_>>()
        );
    }
    calls
}

/// The names `name` in `.name(` of `text`.
fn method_calls(text: &str) -> BTreeSet<String> {
    let compact: String = text.split_whitespace().collect();
    compact
        .match_indices('.')
        .filter_map(|(i, _)| {
            let rest = &compact[i + 1..];
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
            rest[end..]
                .starts_with('(')
                .then(|| rest[..end].to_string())
        })
        .collect()
}

/// The methods an API method calls on itself or a field (`self.x(`, `self.ec2.x(`): not the
/// SDK builders' setters, which share names with API methods (`set_subnets`).
fn self_calls(text: &str) -> BTreeSet<String> {
    let compact: String = text.split_whitespace().collect();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    compact
        .match_indices("self.")
        .filter_map(|(i, m)| {
            let rest = &compact[i + m.len()..];
            let first = ident(rest);
            let after = &rest[first.len()..];
            if after.starts_with('(') {
                return Some(first);
            }
            let after = after.strip_prefix('.')?;
            let second = ident(after);
            after[second.len()..].starts_with('(').then_some(second)
        })
        .collect()
}

/// Every method of `crates/aws-api` by name with the actions it sends: its own labels and
/// those of the API methods it calls (the subnet cache asks `vpc_subnets`, and so on).
fn api_methods() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(&repo_root().join("crates/aws-api/src"), &mut files);
    let mut own: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut callees: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        let has_calls = !labels(&file, code).is_empty();
        for chunk in code.split("async fn ").skip(1) {
            let name: String = chunk
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let mut actions = BTreeSet::new();
            if has_calls {
                let service = service_of(&file, code);
                let compact: String = chunk.split_whitespace().collect();
                for c in literals_after(&compact, ".call(\"")
                    .into_iter()
                    .chain(literals_after(&compact, "pages(&self.api,\""))
                {
                    actions.insert(format!("{service}:{c}"));
                }
                // Tag-on-create (TagSpecifications) needs ec2:CreateTags.
                if service == "ec2" && chunk.contains(".tag_specifications(") {
                    actions.insert("ec2:CreateTags".to_string());
                }
            }
            own.entry(name.clone()).or_default().extend(actions);
            callees.entry(name).or_default().extend(self_calls(chunk));
        }
    }
    let mut all = own.clone();
    loop {
        let mut grown = false;
        for (name, called) in &callees {
            let more: BTreeSet<String> = called
                .iter()
                .filter(|c| *c != name)
                .filter_map(|c| all.get(c))
                .flatten()
                .cloned()
                .collect();
            let mine = all.get_mut(name).unwrap();
            let before = mine.len();
            mine.extend(more);
            grown |= mine.len() > before;
        }
        if !grown {
            return all;
        }
    }
}

/// The actions the provider's code calls: the `.call("…"` labels of the files that send requests
/// themselves, and the actions of the API crate methods the other files call.
fn called_actions() -> BTreeSet<String> {
    let api = api_methods();
    let mut files = Vec::new();
    sources(&repo_root().join("crates/providers/aws/src"), &mut files);
    let mut actions = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit tests sit at the end of a file.
        let code = text.split("#[cfg(test)]").next().unwrap();
        let calls = labels(&file, code);
        if calls.is_empty() {
            // A file that sends no request itself: the API methods it calls (a file that does,
            // the classic ELB seam, names SDK builder setters like the API's `set_subnets`).
            for method in method_calls(code) {
                actions.extend(api.get(&method).into_iter().flatten().cloned());
            }
            continue;
        }
        let service = service_of(&file, code);
        // Tag-on-create (TagSpecifications) needs ec2:CreateTags.
        if service == "ec2" && code.contains(".tag_specifications(") {
            actions.insert("ec2:CreateTags".to_string());
        }
        actions.extend(calls.into_iter().map(|c| format!("{service}:{c}")));
    }
    actions
}

#[test]
fn iam_policy_grants_exactly_the_called_actions() {
    let text = std::fs::read_to_string(repo_root().join("deploy/iam-policy.json")).unwrap();
    let policy: serde_json::Value = serde_json::from_str(&text).expect("policy is JSON");
    assert_eq!(policy["Version"], "2012-10-17");
    let mut granted = BTreeSet::new();
    for statement in policy["Statement"].as_array().expect("Statement list") {
        assert_eq!(statement["Effect"], "Allow", "{statement}");
        assert_eq!(statement["Resource"], "*", "{statement}");
        let actions = match &statement["Action"] {
            serde_json::Value::String(a) => vec![a.clone()],
            serde_json::Value::Array(a) => a
                .iter()
                .map(|v| v.as_str().expect("action string").to_string())
                .collect(),
            other => panic!("unexpected Action {other}"),
        };
        for action in actions {
            assert!(!action.contains('*'), "wildcard action {action}");
            assert!(granted.insert(action.clone()), "{action} granted twice");
            // No conditions: CreateTags serves tag-on-create and the tagging controller, which
            // tags existing instances.
            assert!(statement.get("Condition").is_none(), "{statement}");
        }
    }
    let called = called_actions();
    assert!(called.contains("ec2:DescribeInstances"), "{called:?}");
    // The tagging controller (crates/providers/aws/src/node_tags.rs).
    assert!(called.contains("ec2:CreateTags"), "{called:?}");
    assert!(called.contains("ec2:DeleteTags"), "{called:?}");
    assert!(
        called.contains("elasticloadbalancing:RegisterTargets"),
        "{called:?}"
    );
    assert_eq!(
        granted,
        called,
        "\nmissing from deploy/iam-policy.json: {:?}\nnot called by the code: {:?}",
        called.difference(&granted).collect::<Vec<_>>(),
        granted.difference(&called).collect::<Vec<_>>()
    );
}

#[test]
fn sdk_operation_scan_finds_split_calls() {
    let code = "self.client\n    .describe_vpcs()\n    .send(); other.client.clone(); client . create_route ()";
    assert_eq!(
        sdk_operations(code),
        ["CreateRoute".to_string(), "DescribeVpcs".to_string()].into()
    );
    assert_eq!(
        literals_after(r#"api.call("A", x); api.call("B","#, ".call(\""),
        ["A", "B"]
    );
}
