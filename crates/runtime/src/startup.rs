//! The check every binary makes before it serves: every missing or wrong setting, named at once.
//!
//! Each problem is collected; the process stops naming all of them, before it opens a port or
//! calls a cloud.

use std::fmt;

use crate::redact::bounded;

/// The most problems a startup error lists (the rest are counted).
pub const MAX_PROBLEMS: usize = 20;

/// The most bytes one problem line keeps.
pub const MAX_LINE_BYTES: usize = 1024;

/// Problems found so far. Each is kept as lines of at most [`MAX_LINE_BYTES`] bytes (a problem
/// that is itself a list, such as every bad line of a config file, keeps its first
/// [`MAX_PROBLEMS`] lines).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Problems(Vec<String>);

impl Problems {
    /// No problem yet.
    pub fn new() -> Problems {
        Problems::default()
    }

    /// Records a problem.
    pub fn push(&mut self, problem: impl fmt::Display) {
        let text = problem.to_string();
        let mut lines: Vec<String> = text
            .lines()
            .map(|l| bounded(l, MAX_LINE_BYTES))
            .filter(|l| !l.is_empty())
            .collect();
        if lines.len() > MAX_PROBLEMS {
            let more = lines.len() - MAX_PROBLEMS;
            lines.truncate(MAX_PROBLEMS);
            lines.push(format!("… and {more} more"));
        }
        if !lines.is_empty() {
            self.0.push(lines.join("\n    "));
        }
    }

    /// The value of `result`, or `None` with its error recorded.
    pub fn take<T, E: fmt::Display>(&mut self, result: Result<T, E>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(e) => {
                self.push(e);
                None
            }
        }
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems recorded, in order.
    pub fn list(&self) -> &[String] {
        &self.0
    }

    /// `Ok` when nothing was found, else every problem as one error.
    pub fn finish(self) -> Result<(), StartupError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(StartupError(self.0))
        }
    }
}

/// Why a process did not start: every problem found, one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupError(pub Vec<String>);

impl fmt::Display for StartupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "cannot start: {one}"),
            all => {
                write!(f, "cannot start, {} problems:", all.len())?;
                for problem in all.iter().take(MAX_PROBLEMS) {
                    write!(f, "\n  - {problem}")?;
                }
                if all.len() > MAX_PROBLEMS {
                    write!(f, "\n  … and {} more", all.len() - MAX_PROBLEMS)?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for StartupError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_listed_once_and_bounded() {
        let mut p = Problems::new();
        assert_eq!(p.take::<u8, String>(Ok(1)), Some(1));
        assert!(p.clone().finish().is_ok());
        p.push("AWS_REGION is not set");
        assert_eq!(
            p.clone().finish().unwrap_err().to_string(),
            "cannot start: AWS_REGION is not set"
        );
        assert_eq!(p.take::<u8, _>(Err("--node-id is not set")), None);
        p.push(format!("huge: {}", "x".repeat(1 << 20)));
        p.push("a list:\n  first\n\n  second");
        p.push("");
        let text = p.finish().unwrap_err().to_string();
        assert!(
            text.starts_with("cannot start, 4 problems:\n  - AWS_REGION"),
            "{text}"
        );
        assert!(text.contains("\n  - --node-id is not set"), "{text}");
        assert!(
            text.contains("\n  - a list:\n    first\n    second"),
            "{text}"
        );
        assert!(text.len() < 1200, "{}", text.len());
    }

    #[test]
    fn a_long_list_is_cut() {
        let mut p = Problems::new();
        for i in 0..100 {
            p.push(format!("problem {i}"));
        }
        let text = p.finish().unwrap_err().to_string();
        assert!(
            text.contains("problem 19") && !text.contains("problem 20"),
            "{text}"
        );
        assert!(text.ends_with("… and 80 more"), "{text}");
        let mut p = Problems::new();
        p.push((0..1000).map(|i| format!("line {i}\n")).collect::<String>());
        let text = p.finish().unwrap_err().to_string();
        assert!(
            text.contains("line 19") && !text.contains("line 20"),
            "{text}"
        );
        assert!(text.ends_with("… and 980 more"), "{text}");
    }
}
