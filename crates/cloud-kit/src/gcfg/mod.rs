//! The gcfg INI dialect every cloud's `cloud.conf` is written in (AWS, OpenStack): a lexer that
//! knows no keys, a problem list, and schema helpers a provider's validator is built from.
//!
//! A provider parses in two steps: [`lexer::parse`] turns text into raw sections (reporting
//! malformed lines), then the provider's validator files them with [`schema`] and collects every
//! problem; [`parse_with`] runs both and reports all problems at once, sorted by line.

pub mod lexer;
pub mod problem;
pub mod schema;

use std::path::Path;

pub use lexer::{RawEntry, RawSection};
pub use problem::{name, ConfigErrors, ConfigProblem, MAX_LISTED, MAX_NAME_CHARS};
pub use schema::{enum_value, group, parse_bool, Group, KeySchema, Section, SectionKind};

/// Lexes `text` and validates it with `validate`; every problem of both steps, sorted by line,
/// or the typed config.
pub fn parse_with<T>(
    text: &str,
    validate: impl FnOnce(&[RawSection], &mut Vec<ConfigProblem>) -> T,
) -> Result<T, ConfigErrors> {
    let (sections, mut problems) = lexer::parse(text);
    let config = validate(&sections, &mut problems);
    if problems.is_empty() {
        return Ok(config);
    }
    problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    Err(ConfigErrors(problems))
}

/// Reads the file at `path` and parses it as [`parse_with`] does; an unreadable file is one
/// problem naming the path and the OS error.
pub fn load_with<T>(
    path: &Path,
    validate: impl FnOnce(&[RawSection], &mut Vec<ConfigProblem>) -> T,
) -> Result<T, ConfigErrors> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigErrors(vec![ConfigProblem::new(format!(
            "cannot read {}: {e}",
            path.display()
        ))])
    })?;
    parse_with(&text, validate)
}
