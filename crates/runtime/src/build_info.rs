//! What every binary says about its build: version, git revision and build date, as `--version`
//! prints them and as the release image's OCI labels carry them.
//!
//! The revision and date come in at compile time through `STRATUS_GIT_REVISION` and
//! `STRATUS_BUILD_DATE` (the Makefile's `images` target sets them); a plain `cargo build`, offline
//! and without git, says `unknown` for both.

use std::sync::OnceLock;

/// The placeholder for a revision or date the build was not given.
pub const UNKNOWN: &str = "unknown";

/// The build's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// The workspace version (`0.1.0`).
    pub version: &'static str,
    /// The git commit the binary was built from, or `unknown`.
    pub revision: &'static str,
    /// When it was built (RFC 3339, UTC), or `unknown`.
    pub date: &'static str,
}

/// This build's identity.
pub const BUILD: BuildInfo = BuildInfo {
    version: env!("CARGO_PKG_VERSION"),
    revision: or_unknown(option_env!("STRATUS_GIT_REVISION")),
    date: or_unknown(option_env!("STRATUS_BUILD_DATE")),
};

const fn or_unknown(value: Option<&'static str>) -> &'static str {
    match value {
        Some(v) if !v.is_empty() => v,
        _ => UNKNOWN,
    }
}

impl BuildInfo {
    /// The text after the program name in `--version`: `0.1.0 (revision abc123, built …)`.
    pub fn version_line(&self) -> String {
        format!(
            "{} (revision {}, built {})",
            self.version, self.revision, self.date
        )
    }
}

/// [`BUILD`]'s version line, for clap's `#[command(version = stratus_runtime::build_info::version())]`.
pub fn version() -> &'static str {
    static LINE: OnceLock<String> = OnceLock::new();
    LINE.get_or_init(|| BUILD.version_line())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_line_names_all_three() {
        let info = BuildInfo {
            version: "1.2.3",
            revision: "abc",
            date: "2026-01-02T03:04:05Z",
        };
        assert_eq!(
            info.version_line(),
            "1.2.3 (revision abc, built 2026-01-02T03:04:05Z)"
        );
        assert_eq!(or_unknown(Some("")), UNKNOWN);
        assert_eq!(or_unknown(None), UNKNOWN);
        assert!(version().starts_with(env!("CARGO_PKG_VERSION")));
    }
}
