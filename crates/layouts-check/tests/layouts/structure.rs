//! Structure checks of every cloud's layouts, the cluster-configuration usage check, and
//! `tofu fmt -check` on everything.

use std::collections::BTreeSet;

use stratus_layouts_check::catalog::{self, CLOUDS};
use stratus_layouts_check::config_usage::unused_fields;
use stratus_layouts_check::module::Module;
use stratus_layouts_check::structure::check_cloud;
use stratus_layouts_check::workspace::Workspace;

use crate::common::{layouts, lines, tofu};

#[test]
fn every_cloud_ships_its_layouts_in_deckhouse_shape() {
    let root = layouts();
    let mut modules = 0;
    for spec in CLOUDS {
        let problems = check_cloud(&root, spec);
        assert!(
            problems.is_empty(),
            "{} layouts:\n{}",
            spec.cloud,
            lines(&problems)
        );
        modules += catalog::all_modules(&root, spec).unwrap().len();
    }
    // 7 layouts × 3 modules plus the shared ones.
    assert!(modules > 21, "only {modules} modules found");
}

#[test]
fn structure_check_reports_a_missing_module_and_an_undocumented_variable() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let root = ws.root();
    std::fs::remove_dir_all(catalog::layout_module_dir(
        &root,
        "dvp",
        "standard",
        "static-node",
    ))
    .unwrap();
    let node = catalog::shared_module_dir(&root, "aws", "node").join("main.tf");
    let text = std::fs::read_to_string(&node).unwrap();
    let text = text.replacen("  description = \"Subnet of the instance.\"\n", "", 1);
    std::fs::write(&node, text).unwrap();

    let dvp = check_cloud(&root, &CLOUDS[2]);
    assert!(
        dvp.iter()
            .any(|p| p.place.contains("static-node") && p.message.contains("missing")),
        "{}",
        lines(&dvp)
    );
    let aws = check_cloud(&root, &CLOUDS[0]);
    assert!(
        aws.iter()
            .any(|p| p.place.contains("variable subnet_id") && p.message == "has no description"),
        "{}",
        lines(&aws)
    );
}

/// Every field of each cloud's cluster configuration type is read somewhere in its layouts.
#[test]
fn every_cluster_configuration_field_is_used() {
    let root = layouts();
    let mut report = Vec::new();
    for spec in CLOUDS {
        // cluster-config takes the document untyped (to refuse unknown fields) and types it in
        // its typed/ module.
        let typed = catalog::shared_module_dir(&root, spec.cloud, "cluster-config").join("typed");
        let config = Module::load(&typed).unwrap();
        let pcc = config
            .variable("providerClusterConfiguration")
            .and_then(|v| v.type_expr.clone())
            .expect("cluster-config/typed types providerClusterConfiguration");
        let mut texts = Vec::new();
        for dir in catalog::all_modules(&root, spec).unwrap() {
            let m = Module::load(&dir).unwrap();
            texts.extend(
                m.texts()
                    .into_iter()
                    // fields.tf names every field as text: it would make each one look used.
                    .filter(|(path, _)| {
                        !path.ends_with("variables.tf") && !path.ends_with("fields.tf")
                    })
                    .map(|(_, text)| text),
            );
        }
        let unused = unused_fields(&pcc, &texts);
        if !unused.is_empty() {
            report.push(format!("{}: {unused:?}", spec.cloud));
        }
    }
    assert!(
        report.is_empty(),
        "cluster configuration fields never used:\n{}",
        report.join("\n")
    );
}

#[test]
fn tofu_fmt_check_passes_on_every_file() {
    let unformatted = tofu().fmt_check(&layouts()).unwrap();
    assert!(
        unformatted.is_empty(),
        "run `tofu fmt -recursive layouts`: {unformatted:?}"
    );
}

#[test]
fn tofu_fmt_check_reports_a_badly_formatted_file() {
    let ws = Workspace::copy(&layouts()).unwrap();
    let file = catalog::shared_module_dir(&ws.root(), "dvp", "cluster-config").join("main.tf");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replacen("  pcc    = ", "  pcc = ", 1)).unwrap();
    let unformatted: BTreeSet<String> = tofu().fmt_check(&ws.root()).unwrap().into_iter().collect();
    assert!(
        unformatted
            .iter()
            .any(|f| f.ends_with("dvp/terraform-modules/cluster-config/main.tf")),
        "{unformatted:?}"
    );
}
