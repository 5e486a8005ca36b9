//! Structure checks: every layout has its three modules, every module its `versions.tf` agreeing
//! with the cloud's pin file (`terraform_versions.yml`, else `versions.yml`), every variable a type and a description, every dhctl-facing variable a
//! validation with a clear message, every output a description, every module call a shared
//! module that exists; OpenStack layouts carry `tofu test` files, DVP layouts build their
//! objects in a provider-free module. Pure over the files: nothing is run.

use std::fmt;
use std::path::Path;

use crate::catalog::{self, CloudSpec, DHCTL_VARIABLES, LAYOUT_MODULES};
use crate::module::Module;
use crate::versions::Versions;

/// One problem, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// A path relative to `layouts/` (and an item in it).
    pub place: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.message)
    }
}

/// Every problem of one cloud's layouts under `root` (a `layouts/` directory).
pub fn check_cloud(root: &Path, spec: &CloudSpec) -> Vec<Problem> {
    let mut problems = Vec::new();
    let cloud_dir = root.join(spec.cloud);
    let versions = match Versions::load(&cloud_dir) {
        Ok(v) => v,
        Err(e) => {
            problems.push(problem(
                spec.cloud,
                Versions::file_name(&cloud_dir),
                e.to_string(),
            ));
            return problems;
        }
    };
    if !versions.providers.contains_key(spec.provider) {
        problems.push(problem(
            spec.cloud,
            Versions::file_name(&cloud_dir),
            format!("names no version of provider {}", spec.provider),
        ));
    }
    for (layout, _) in spec.layouts {
        for kind in LAYOUT_MODULES {
            let dir = catalog::layout_module_dir(root, spec.cloud, layout, kind);
            let place = relative(root, &dir);
            if !dir.is_dir() {
                problems.push(problem(&place, "", "the layout module is missing".into()));
                continue;
            }
            match Module::load(&dir) {
                Ok(m) => {
                    check_module(root, spec, &versions, &m, &mut problems);
                    check_layout_module(root, spec, kind, &m, &mut problems);
                }
                Err(e) => problems.push(problem(&place, "", e.to_string())),
            }
        }
    }
    match catalog::shared_modules(root, spec.cloud) {
        Ok(dirs) => {
            for dir in dirs {
                match Module::load(&dir) {
                    Ok(m) => check_module(root, spec, &versions, &m, &mut problems),
                    Err(e) => problems.push(problem(&relative(root, &dir), "", e.to_string())),
                }
            }
        }
        Err(e) => problems.push(problem(
            spec.cloud,
            "terraform-modules",
            format!("cannot be listed: {e}"),
        )),
    }
    problems
}

/// What every module, layout or shared, must satisfy.
fn check_module(
    root: &Path,
    spec: &CloudSpec,
    versions: &Versions,
    m: &Module,
    problems: &mut Vec<Problem>,
) {
    let place = relative(root, &m.dir);
    if !m.dir.join("versions.tf").is_file() {
        problems.push(problem(&place, "versions.tf", "is missing".into()));
    }
    if m.required_version.as_deref() != Some(versions.opentofu.required_version.as_str()) {
        problems.push(problem(
            &place,
            "required_version",
            format!(
                "is {:?}, the pin file says {:?}",
                m.required_version, versions.opentofu.required_version
            ),
        ));
    }
    let prefix = format!("{}_", spec.provider);
    let uses_provider = !m.provider_blocks.is_empty()
        || m.resources
            .iter()
            .any(|r| r.resource_type.starts_with(&prefix));
    if uses_provider {
        match (
            m.required_providers.get(spec.provider),
            versions.providers.get(spec.provider),
        ) {
            (Some(req), Some(want)) => {
                if req.source.as_deref() != Some(want.source.as_str())
                    || req.version.as_deref() != Some(want.version.as_str())
                {
                    problems.push(problem(
                        &place,
                        "required_providers",
                        format!(
                            "{} is {:?} {:?}, the pin file says {} {}",
                            spec.provider, req.source, req.version, want.source, want.version
                        ),
                    ));
                }
            }
            (None, _) => problems.push(problem(
                &place,
                "required_providers",
                format!(
                    "uses {} resources but does not require the provider",
                    spec.provider
                ),
            )),
            (Some(_), None) => {}
        }
    }
    for v in &m.variables {
        let item = format!("variable {}", v.name);
        if v.type_expr.is_none() {
            problems.push(problem(&place, &item, "has no type".into()));
        }
        if v.description.as_deref().is_none_or(|d| d.trim().is_empty()) {
            problems.push(problem(&place, &item, "has no description".into()));
        }
        for val in &v.validations {
            if let Some(why) = unclear_message(val.error_message.as_deref()) {
                problems.push(problem(&place, &item, why));
            }
        }
    }
    for o in &m.outputs {
        if o.description.as_deref().is_none_or(|d| d.trim().is_empty()) {
            problems.push(problem(
                &place,
                &format!("output {}", o.name),
                "has no description".into(),
            ));
        }
    }
    let shared = root.join(spec.cloud).join("terraform-modules");
    for call in &m.module_calls {
        let item = format!("module {}", call.name);
        let Some(source) = call.source.as_deref() else {
            problems.push(problem(&place, &item, "has no literal source".into()));
            continue;
        };
        let target = m.dir.join(source);
        match (target.canonicalize(), shared.canonicalize()) {
            (Ok(t), Ok(s)) if t.starts_with(&s) && t.is_dir() => {}
            _ => problems.push(problem(
                &place,
                &item,
                format!(
                    "source {source} is not a module under {}/terraform-modules",
                    spec.cloud
                ),
            )),
        }
    }
}

/// Why an error message is not clear enough, if it is not.
pub fn unclear_message(message: Option<&str>) -> Option<String> {
    match message {
        None => Some("a validation has no literal error_message".into()),
        Some(m) if m.len() < 20 => Some(format!("error message {m:?} is too short to help")),
        Some(m) if !m.ends_with('.') => Some(format!("error message {m:?} is not a sentence")),
        Some(_) => None,
    }
}

/// What a layout's base-infrastructure, master-node or static-node module must satisfy.
fn check_layout_module(
    root: &Path,
    spec: &CloudSpec,
    kind: &str,
    m: &Module,
    problems: &mut Vec<Problem>,
) {
    let place = relative(root, &m.dir);
    for name in DHCTL_VARIABLES {
        match m.variable(name) {
            None => problems.push(problem(
                &place,
                &format!("variable {name}"),
                "is missing (dhctl passes it)".into(),
            )),
            Some(v) if v.validations.is_empty() => problems.push(problem(
                &place,
                &format!("variable {name}"),
                "has no validation".into(),
            )),
            Some(_) => {}
        }
    }
    for name in catalog::required_outputs(spec, kind) {
        if m.output(name).is_none() {
            problems.push(problem(
                &place,
                &format!("output {name}"),
                "is missing (dhctl reads it)".into(),
            ));
        }
    }
    if !m.provider_blocks.iter().any(|p| p == spec.provider) {
        problems.push(problem(
            &place,
            "provider",
            format!("configures no {} provider", spec.provider),
        ));
    }
    match spec.cloud {
        "openstack" => check_tofu_tests(&place, m, problems),
        "dvp" => check_dvp_render(&place, m, problems),
        _ => {}
    }
}

/// OpenStack layout modules carry `tofu test` files with a mocked provider.
fn check_tofu_tests(place: &str, m: &Module, problems: &mut Vec<Problem>) {
    let tests: Vec<String> = std::fs::read_dir(m.dir.join("tests"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".tftest.hcl"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    if !tests
        .iter()
        .any(|t| t.contains("mock_provider \"openstack\"") && t.contains("run \""))
    {
        problems.push(problem(
            place,
            "tests/",
            "has no .tftest.hcl with mock_provider \"openstack\" and a run block".into(),
        ));
    }
}

/// DVP layout modules build every object in the provider-free module `render` and apply
/// exactly its outputs, so the rendered objects are the applied ones.
fn check_dvp_render(place: &str, m: &Module, problems: &mut Vec<Problem>) {
    let Some(render) = m.module_call("render") else {
        problems.push(problem(
            place,
            "module render",
            "is missing (objects must be built by a provider-free module)".into(),
        ));
        return;
    };
    if let Some(source) = &render.source {
        match Module::load(&m.dir.join(source)) {
            Ok(r) if !r.resources.is_empty() => problems.push(problem(
                place,
                "module render",
                format!("{source} declares resources; it must stay provider-free"),
            )),
            Ok(_) => {}
            Err(e) => problems.push(problem(place, "module render", e.to_string())),
        }
    }
    for r in m.resources_of("kubernetes_manifest") {
        let manifest = r.attr("manifest").unwrap_or_default();
        let for_each = r.attr("for_each").unwrap_or_default();
        let from_render = manifest.starts_with("module.render.")
            || (manifest == "each.value" && for_each.starts_with("module.render."));
        if !from_render {
            problems.push(problem(
                place,
                &format!("kubernetes_manifest.{}", r.name),
                format!("applies {manifest:?}, not an output of module.render"),
            ));
        }
    }
}

fn problem(place: &str, item: &str, message: String) -> Problem {
    Problem {
        place: if item.is_empty() {
            place.to_string()
        } else {
            format!("{place} ({item})")
        },
        message,
    }
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_messages_are_sentences() {
        assert!(unclear_message(None).is_some());
        assert!(unclear_message(Some("bad value")).is_some());
        assert!(unclear_message(Some("nodeIndex must be a whole number of at least 0")).is_some());
        assert_eq!(
            unclear_message(Some("nodeIndex must be a whole number of at least 0.")),
            None
        );
    }
}
