//! Problems found in a cloud config file, and how they are shown to people.

use std::fmt;

/// Longest part of a value, in characters, that a problem message quotes.
pub const MAX_SHOWN_CHARS: usize = 200;

/// One thing wrong with a cloud config.
///
/// Displayed as `[Section] Key: message (line N)`, leaving out the parts that are `None`, e.g.
/// `[Global] Region: "moon-1" is not a valid AWS region name (line 3)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The section, without brackets: `Global` or `ServiceOverride "1"`.
    pub section: Option<String>,
    /// The key, spelled as in the schema when it is a known key (`Region`), else as written.
    pub key: Option<String>,
    /// The 1-based line of the config text the problem is on, when there is one.
    pub line: Option<usize>,
    /// What is wrong; a single line that never quotes more than 200 characters of a value.
    pub message: String,
}

impl ConfigProblem {
    /// A problem with only a message.
    pub fn new(message: impl Into<String>) -> Self {
        ConfigProblem {
            section: None,
            key: None,
            line: None,
            message: message.into(),
        }
    }

    /// Sets the section label (without brackets).
    pub fn in_section(mut self, section: impl Into<String>) -> Self {
        self.section = Some(section.into());
        self
    }

    /// Sets the key.
    pub fn for_key(mut self, key: impl AsRef<str>) -> Self {
        self.key = Some(truncate(key.as_ref()));
        self
    }

    /// Sets the line number.
    pub fn at_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(section) = &self.section {
            write!(f, "[{section}] ")?;
        }
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

/// Every problem found in a cloud config (never empty when returned as an error).
///
/// Displayed as `invalid cloud config:` followed by one problem per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigProblem>);

impl ConfigErrors {
    /// The problems, in the order of the lines they are on.
    pub fn problems(&self) -> &[ConfigProblem] {
        &self.0
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid cloud config:")?;
        for problem in &self.0 {
            write!(f, "\n  {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Quotes a user-supplied value for a message: escaped, on one line, at most 200 characters of it.
pub fn shown(value: &str) -> String {
    let total = value.chars().count();
    if total <= MAX_SHOWN_CHARS {
        return format!("{value:?}");
    }
    let head: String = value.chars().take(MAX_SHOWN_CHARS).collect();
    format!("{head:?}… ({total} characters, truncated)")
}

/// Cuts a user-supplied name to at most 200 characters (names are never secrets, just long).
pub fn truncate(name: &str) -> String {
    match name.char_indices().nth(MAX_SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &name[..cut]),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_display_leaves_out_missing_parts() {
        let full = ConfigProblem::new("bad")
            .in_section("Global")
            .for_key("Region")
            .at_line(3);
        assert_eq!(full.to_string(), "[Global] Region: bad (line 3)");
        assert_eq!(ConfigProblem::new("bad").to_string(), "bad");
        assert_eq!(
            ConfigProblem::new("bad").at_line(9).to_string(),
            "bad (line 9)"
        );
    }

    #[test]
    fn errors_display_one_problem_per_line() {
        let errors = ConfigErrors(vec![ConfigProblem::new("a"), ConfigProblem::new("b")]);
        assert_eq!(errors.to_string(), "invalid cloud config:\n  a\n  b");
    }

    #[test]
    fn shown_escapes_and_truncates() {
        assert_eq!(shown("a\"b\nc"), r#""a\"b\nc""#);
        let long = "x".repeat(500);
        let s = shown(&long);
        assert!(s.contains(&"x".repeat(200)));
        assert!(!s.contains(&"x".repeat(201)));
        assert!(s.ends_with("(500 characters, truncated)"));
        assert_eq!(truncate(&"é".repeat(300)).chars().count(), 201);
        assert_eq!(truncate("short"), "short");
    }
}
