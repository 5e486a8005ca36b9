//! The takeover harness on a provider-free module (tofu's built-in `terraform_data`): a state
//! another tool wrote is planned against a module that renamed its resource, once without a
//! `moved` block (the harness must see the destroy) and once with one (only a move).

use stratus_layouts_check::takeover::plan_takeover;

use crate::common::tofu;

const MODULE: &str = r#"
variable "name" {
  type = string
}

resource "terraform_data" "renamed" {
  input = var.name
}
"#;

const MOVED: &str = r#"
moved {
  from = terraform_data.original
  to   = terraform_data.renamed
}
"#;

fn state() -> serde_json::Value {
    serde_json::json!({
        "version": 4,
        "terraform_version": "1.9.0",
        "serial": 3,
        "lineage": "8c6f5d0e-2a41-4b7e-9d3c-5f0a1b2c3d4e",
        "outputs": {},
        "resources": [{
            "mode": "managed",
            "type": "terraform_data",
            "name": "original",
            "provider": "provider[\"terraform.io/builtin/terraform\"]",
            "instances": [{
                "schema_version": 0,
                "attributes": {
                    "id": "6b0f3a52-7c1e-4d2f-8a9b-0c1d2e3f4a5b",
                    "input": { "value": "kept", "type": "string" },
                    "output": { "value": "kept", "type": "string" },
                    "triggers_replace": null
                },
                "sensitive_attributes": []
            }]
        }]
    })
}

fn plan(with_moved: bool) -> stratus_layouts_check::takeover::PlanSummary {
    let dir = tempfile::tempdir().unwrap();
    let text = if with_moved {
        format!("{MODULE}{MOVED}")
    } else {
        MODULE.to_string()
    };
    std::fs::write(dir.path().join("main.tf"), text).unwrap();
    plan_takeover(
        &tofu(),
        dir.path(),
        &serde_json::json!({ "name": "kept" }),
        &state(),
    )
    .unwrap()
}

#[test]
fn takeover_harness_sees_a_destroy_without_a_moved_block() {
    let summary = plan(false);
    let counts = summary.counts();
    assert_eq!((counts.deletes, counts.creates), (1, 1), "{summary}");
    assert_eq!(summary.destructive().len(), 1, "{summary}");
}

#[test]
fn takeover_harness_sees_only_a_move_with_a_moved_block() {
    let summary = plan(true);
    let counts = summary.counts();
    assert!(summary.destructive().is_empty(), "{summary}");
    assert_eq!(
        (counts.moves, counts.no_ops, counts.creates),
        (1, 1, 0),
        "{summary}"
    );
    assert_eq!(
        summary
            .change("terraform_data.renamed")
            .and_then(|c| c.previous_address.as_deref()),
        Some("terraform_data.original")
    );
}
