//! Problems found in a cloud config file, and how they are shown to people: by section, key and
//! line, never quoting a value (a value may be a password, or a whole file written in the wrong
//! place), and never more than [`MAX_LISTED`] of them.

use std::fmt;

/// Longest section, subsection or key name, in characters, that a problem message names; a
/// longer one is described by its length.
pub const MAX_NAME_CHARS: usize = 64;

/// The most problems [`ConfigErrors`] lists (the rest are counted).
pub const MAX_LISTED: usize = 20;

/// One thing wrong with a cloud config.
///
/// Displayed as `[Section] Key: message (line N)`, leaving out the parts that are `None`, e.g.
/// `[Global] Region: not a valid AWS region name (line 3)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The section, without brackets: `Global` or `ServiceOverride "1"`.
    pub section: Option<String>,
    /// The key, spelled as in the schema when it is a known key (`Region`), else as written.
    pub key: Option<String>,
    /// The 1-based line of the config text the problem is on, when there is one.
    pub line: Option<usize>,
    /// What is wrong; a single line that never quotes a value.
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
        self.key = Some(name(key.as_ref()));
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
/// Displayed as `invalid cloud config:` followed by one problem per line (at most
/// [`MAX_LISTED`], then how many more).
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
        for problem in self.0.iter().take(MAX_LISTED) {
            write!(f, "\n  {problem}")?;
        }
        if self.0.len() > MAX_LISTED {
            write!(f, "\n  … and {} more", self.0.len() - MAX_LISTED)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// A user-supplied name (section, subsection, key) for a message: as written when it is at most
/// [`MAX_NAME_CHARS`] characters of printable text, else described by its length (a long "name" is
/// a value or a whole file written where a name goes).
pub fn name(text: &str) -> String {
    let count = text.chars().count();
    if count <= MAX_NAME_CHARS && !text.chars().any(char::is_control) {
        text.to_owned()
    } else {
        format!("<a {count}-character name>")
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
    fn long_names_are_described_not_shown() {
        assert_eq!(name("Region"), "Region");
        assert_eq!(name(&"é".repeat(64)), "é".repeat(64));
        assert_eq!(name(&"x".repeat(65)), "<a 65-character name>");
        assert_eq!(name("a\u{1}b"), "<a 3-character name>");
    }

    #[test]
    fn errors_list_at_most_twenty_problems() {
        let errors = ConfigErrors(
            (0..25)
                .map(|i| ConfigProblem::new(format!("p{i}")))
                .collect(),
        );
        let text = errors.to_string();
        assert!(text.contains("p19") && !text.contains("p20"), "{text}");
        assert!(text.ends_with("\n  … and 5 more"), "{text}");
    }
}
