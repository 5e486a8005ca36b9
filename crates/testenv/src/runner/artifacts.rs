//! The test binaries of a workspace: `cargo test --no-run --message-format=json` compiles them and
//! names each one's executable; this reads those messages and asks each binary for its tests.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

/// One compiled test binary: a crate's unit tests or one of its integration test files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestBinary {
    /// `package/kind/target`, stable across builds (the executable's hash suffix is not).
    pub key: String,
    /// The package's name.
    pub package: String,
    /// The compiled binary.
    pub executable: PathBuf,
    /// The package's directory: `cargo test` runs a test binary there and sets
    /// `CARGO_MANIFEST_DIR` to it.
    pub manifest_dir: PathBuf,
    /// An integration test file (`tests/*.rs`) rather than a crate's unit tests.
    pub integration: bool,
}

#[derive(Deserialize)]
struct Message {
    reason: String,
    #[serde(default)]
    package_id: String,
    #[serde(default)]
    manifest_path: Option<PathBuf>,
    #[serde(default)]
    target: Option<Target>,
    #[serde(default)]
    profile: Option<Profile>,
    #[serde(default)]
    executable: Option<PathBuf>,
    #[serde(default)]
    fresh: bool,
}

/// The key of the test binary a message reports as freshly built (not one cargo found up to
/// date), if it is one.
pub fn built_test_binary(line: &str) -> Option<String> {
    let message: Message = serde_json::from_str(line).ok()?;
    if message.reason != "compiler-artifact" || message.fresh || message.executable.is_none() {
        return None;
    }
    let target = message.target?;
    message.profile.filter(|p| p.test)?;
    let package = package_name(&message.package_id, message.manifest_path.as_deref()?);
    Some(format!(
        "{package}/{}/{}",
        target.kind.join(","),
        target.name
    ))
}

#[derive(Deserialize)]
struct Target {
    name: String,
    kind: Vec<String>,
}

#[derive(Deserialize)]
struct Profile {
    test: bool,
}

/// The test binaries named in cargo's JSON messages (one message per line; other lines, such as
/// build-script output, are not messages and are skipped).
pub fn test_binaries(messages: &str) -> Result<Vec<TestBinary>> {
    let mut binaries = Vec::new();
    for line in messages.lines().filter(|l| l.starts_with('{')) {
        let message: Message = serde_json::from_str(line)
            .with_context(|| format!("cargo message is not JSON: {line}"))?;
        if message.reason != "compiler-artifact" {
            continue;
        }
        let (Some(target), Some(profile), Some(executable), Some(manifest)) = (
            message.target,
            message.profile,
            message.executable,
            message.manifest_path,
        ) else {
            continue;
        };
        if !profile.test {
            continue;
        }
        let package = package_name(&message.package_id, &manifest);
        let kind = target.kind.join(",");
        binaries.push(TestBinary {
            key: format!("{package}/{kind}/{}", target.name),
            package,
            executable,
            manifest_dir: manifest.parent().map(Path::to_path_buf).unwrap_or_default(),
            integration: target.kind.iter().any(|k| k == "test"),
        });
    }
    if binaries.is_empty() {
        bail!("cargo named no test binary");
    }
    binaries.sort_by(|a, b| a.key.cmp(&b.key));
    binaries.dedup_by(|a, b| a.key == b.key);
    Ok(binaries)
}

/// The package name from a package id (`path+file:///…/crates/kube-kit#stratus-kube-kit@0.1.0`
/// or the older `name version (source)`), falling back to the manifest's directory name.
fn package_name(package_id: &str, manifest: &Path) -> String {
    let from_id = match package_id.rsplit_once('#') {
        Some((path, rest)) => {
            let name = rest.split('@').next().unwrap_or(rest);
            // `…/crates/foo#0.1.0`: the fragment holds only the version when the name is the
            // directory's.
            if name.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                path.rsplit('/').next().unwrap_or(path).to_string()
            } else {
                name.to_string()
            }
        }
        None => package_id.split(' ').next().unwrap_or_default().to_string(),
    };
    if from_id.is_empty() {
        let dir = manifest.parent().and_then(Path::file_name);
        return dir
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default();
    }
    from_id
}

/// The test names a libtest `--list --format terse` printed (`name: test`; benchmarks and other
/// lines are not tests).
pub fn test_names(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_test_artifacts_and_skips_the_rest() {
        let messages = [
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/kube-kit#stratus-kube-kit@0.1.0","manifest_path":"/w/crates/kube-kit/Cargo.toml","target":{"name":"stratus_kube_kit","kind":["lib"]},"profile":{"test":true},"executable":"/t/debug/deps/stratus_kube_kit-1"}"#,
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/bins/module-controller#0.1.0","manifest_path":"/w/bins/module-controller/Cargo.toml","target":{"name":"process","kind":["test"]},"profile":{"test":true},"executable":"/t/debug/deps/process-2"}"#,
            r#"{"reason":"compiler-artifact","package_id":"x","manifest_path":"/w/Cargo.toml","target":{"name":"lib","kind":["lib"]},"profile":{"test":false},"executable":null}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "warning: not a message",
        ]
        .join("\n");
        let binaries = test_binaries(&messages).unwrap();
        assert_eq!(binaries.len(), 2);
        assert_eq!(binaries[0].key, "module-controller/test/process");
        assert!(binaries[0].integration);
        assert_eq!(
            binaries[0].manifest_dir,
            PathBuf::from("/w/bins/module-controller")
        );
        assert_eq!(binaries[1].key, "stratus-kube-kit/lib/stratus_kube_kit");
        assert!(!binaries[1].integration);
    }

    #[test]
    fn names_freshly_built_test_binaries_only() {
        let built = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/bins/module-controller#0.1.0","manifest_path":"/w/bins/module-controller/Cargo.toml","target":{"name":"process","kind":["test"]},"profile":{"test":true},"executable":"/t/process-2","fresh":false}"#;
        assert_eq!(
            built_test_binary(built).as_deref(),
            Some("module-controller/test/process")
        );
        let fresh = built.replace(r#""fresh":false"#, r#""fresh":true"#);
        assert_eq!(built_test_binary(&fresh), None);
        assert_eq!(built_test_binary("not json"), None);
    }

    #[test]
    fn no_test_binary_is_an_error() {
        assert!(test_binaries(r#"{"reason":"build-finished","success":true}"#).is_err());
    }

    #[test]
    fn lists_tests_only() {
        let listing = "a::b: test\nc: benchmark\n\n2 tests, 0 benchmarks\nd: test\n";
        assert_eq!(test_names(listing), ["a::b", "d"]);
    }
}
