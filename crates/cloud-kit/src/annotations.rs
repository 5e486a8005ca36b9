//! The annotation engine: reads a Service's annotations under one provider prefix against the
//! provider's key table, rejecting hostile sizes before anything is parsed, and collecting every
//! problem at once (some only as warnings, as the provider decides). Pure: no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Longest value or key excerpt echoed back in a problem message.
const EXCERPT_CHARS: usize = 100;

/// A provider's annotations: their common prefix, the suffixes it understands, and its rules.
#[derive(Debug, Clone, Copy)]
pub struct KeyTable {
    /// The common prefix, e.g. `service.beta.kubernetes.io/aws-load-balancer-`.
    pub prefix: &'static str,
    /// Every understood suffix (the part after the prefix).
    pub known: &'static [&'static str],
    /// The longest accepted value of a suffix, in characters.
    pub max_chars: fn(&str) -> usize,
    /// Whether a problem of this kind with this suffix is only a warning (the Service is still
    /// served, the problem is listed as ignored).
    pub ignorable: fn(&str, ProblemKind) -> bool,
}

/// The class of an [`AnnotationProblem`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// A key under the prefix that is not understood.
    UnknownKey,
    /// A value longer than its bound.
    ValueTooLong,
    /// A value that does not parse or is out of range.
    InvalidValue,
    /// An annotation that does not apply to the kind of load balancer asked for.
    NotApplicable,
    /// Individually valid annotations that contradict each other.
    Inconsistent,
}

/// One problem with one annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationProblem {
    /// Full annotation key (truncated to 100 characters if longer).
    pub key: String,
    /// What is wrong.
    pub kind: ProblemKind,
    /// The offending value, truncated to 100 characters.
    pub value: Option<String>,
    /// Why, for people.
    pub reason: String,
}

impl fmt::Display for AnnotationProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key.escape_debug(), self.reason)?;
        if let Some(value) = &self.value {
            write!(f, " (value \"{}\")", value.escape_debug())?;
        }
        Ok(())
    }
}

/// Every problem found in a Service's annotations (never empty when returned as an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationErrors(pub Vec<AnnotationProblem>);

impl fmt::Display for AnnotationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for AnnotationErrors {}

/// Shortens `s` to 100 characters, marking the cut.
pub fn excerpt(s: &str) -> String {
    match s.char_indices().nth(EXCERPT_CHARS) {
        None => s.to_owned(),
        Some((cut, _)) => format!("{}… ({} chars)", &s[..cut], s.chars().count()),
    }
}

/// Go's `strconv.ParseBool`, which upstream controllers use for boolean annotations.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Reads one Service's annotations against a [`KeyTable`], collecting problems.
#[derive(Debug)]
pub struct AnnotationReader<'a> {
    table: KeyTable,
    annotations: &'a BTreeMap<String, String>,
    oversized: BTreeSet<&'static str>,
    problems: Vec<AnnotationProblem>,
    ignored: Vec<AnnotationProblem>,
}

impl<'a> AnnotationReader<'a> {
    /// Starts reading: unknown keys and oversized values are reported first, so nothing
    /// oversized is parsed further.
    pub fn new(table: KeyTable, annotations: &'a BTreeMap<String, String>) -> Self {
        let mut reader = AnnotationReader {
            table,
            annotations,
            oversized: BTreeSet::new(),
            problems: Vec::new(),
            ignored: Vec::new(),
        };
        for (full, value) in annotations {
            let Some(suffix) = full.strip_prefix(table.prefix) else {
                continue;
            };
            match table.known.iter().find(|k| **k == suffix) {
                None => reader.report(
                    suffix,
                    ProblemKind::UnknownKey,
                    None,
                    format!("unknown annotation (known: {})", table.known.join(", ")),
                ),
                Some(known) => {
                    let max = (table.max_chars)(known);
                    if value.len() > max && value.chars().count() > max {
                        reader.oversized.insert(known);
                        reader.report(
                            suffix,
                            ProblemKind::ValueTooLong,
                            Some(value),
                            format!(
                                "value is {} characters long, at most {max} are accepted",
                                value.chars().count()
                            ),
                        );
                    }
                }
            }
        }
        reader
    }

    /// The full key of `suffix`.
    pub fn full_key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.table.prefix)
    }

    /// Whether the annotation is set (even if oversized).
    pub fn present(&self, suffix: &str) -> bool {
        self.annotations.contains_key(&self.full_key(suffix))
    }

    /// Whether the value was rejected as too long.
    pub fn is_oversized(&self, suffix: &str) -> bool {
        self.oversized.contains(suffix)
    }

    /// The value, unless absent or already rejected as too long.
    pub fn raw(&self, suffix: &'static str) -> Option<&'a str> {
        if self.oversized.contains(suffix) {
            return None;
        }
        self.annotations
            .get(&self.full_key(suffix))
            .map(String::as_str)
    }

    /// Records a problem (as a warning when the table says it is ignorable).
    pub fn report(&mut self, suffix: &str, kind: ProblemKind, value: Option<&str>, reason: String) {
        let problem = AnnotationProblem {
            key: excerpt(&self.full_key(suffix)),
            kind,
            value: value.map(excerpt),
            reason,
        };
        if (self.table.ignorable)(suffix, kind) {
            self.ignored.push(problem);
        } else {
            self.problems.push(problem);
        }
    }

    /// Records an invalid value.
    pub fn invalid(&mut self, suffix: &str, value: &str, reason: impl Into<String>) {
        self.report(
            suffix,
            ProblemKind::InvalidValue,
            Some(value),
            reason.into(),
        );
    }

    /// A boolean in Go's spellings.
    pub fn bool(&mut self, suffix: &'static str) -> Option<bool> {
        let value = self.raw(suffix)?;
        let parsed = parse_go_bool(value);
        if parsed.is_none() {
            self.invalid(suffix, value, "must be a boolean (true or false)");
        }
        parsed
    }

    /// An integer in `min..=max`.
    pub fn int_in(&mut self, suffix: &'static str, min: u32, max: u32) -> Option<u32> {
        let value = self.raw(suffix)?;
        match value.parse::<i64>() {
            Ok(n) if (i64::from(min)..=i64::from(max)).contains(&n) => u32::try_from(n).ok(),
            Ok(_) => {
                self.invalid(suffix, value, format!("must be between {min} and {max}"));
                None
            }
            Err(_) => {
                self.invalid(
                    suffix,
                    value,
                    format!("must be an integer between {min} and {max}"),
                );
                None
            }
        }
    }

    /// A non-blank string.
    pub fn string(&mut self, suffix: &'static str) -> Option<String> {
        let value = self.raw(suffix)?;
        if value.trim().is_empty() {
            self.invalid(suffix, value, "must not be empty");
            return None;
        }
        Some(value.to_owned())
    }

    /// Comma-separated items, trimmed, empty items skipped; with the whole value.
    pub fn list(&self, suffix: &'static str) -> Option<(&'a str, Vec<&'a str>)> {
        let value = self.raw(suffix)?;
        let items = value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        Some((value, items))
    }

    /// `k=v` items; an item without `=` is a key with an empty value (as upstream).
    pub fn key_values(
        &mut self,
        suffix: &'static str,
    ) -> Option<(&'a str, Vec<(&'a str, &'a str)>)> {
        let (value, items) = self.list(suffix)?;
        let mut out = Vec::new();
        for item in items {
            let (k, v) = item.split_once('=').unwrap_or((item, ""));
            let k = k.trim();
            if k.is_empty() {
                self.invalid(
                    suffix,
                    value,
                    format!("\"{}\" has an empty key", excerpt(item).escape_debug()),
                );
            } else {
                out.push((k, v.trim()));
            }
        }
        Some((value, out))
    }

    /// The warnings, or every problem when there is any that is not ignorable.
    pub fn finish(self) -> Result<Vec<AnnotationProblem>, AnnotationErrors> {
        if self.problems.is_empty() {
            Ok(self.ignored)
        } else {
            Err(AnnotationErrors(self.problems))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: KeyTable = KeyTable {
        prefix: "example.com/lb-",
        known: &["size", "name", "flag", "tags"],
        max_chars: |suffix| if suffix == "name" { 8 } else { 64 },
        ignorable: |_, kind| kind == ProblemKind::UnknownKey,
    };

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("example.com/lb-{k}"), v.to_string()))
            .chain([("other.io/x".to_string(), "ignored".to_string())])
            .collect()
    }

    #[test]
    fn reads_values_and_collects_every_problem() {
        let m = map(&[
            ("size", "70"),
            ("name", "much-too-long"),
            ("flag", "True"),
            ("tags", "a=1, =2 ,b"),
            ("typo", "x"),
        ]);
        let mut r = AnnotationReader::new(TABLE, &m);
        assert_eq!(r.int_in("size", 1, 64), None);
        assert_eq!(r.string("name"), None, "oversized values are not read");
        assert!(r.is_oversized("name") && r.present("name"));
        assert_eq!(r.bool("flag"), Some(true));
        let (_, kv) = r.key_values("tags").unwrap();
        assert_eq!(kv, vec![("a", "1"), ("b", "")]);
        let errors = r.finish().unwrap_err();
        let kinds: Vec<ProblemKind> = errors.0.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            vec![
                ProblemKind::ValueTooLong,
                ProblemKind::InvalidValue,
                ProblemKind::InvalidValue
            ]
        );
        assert_eq!(
            errors.0[1].to_string(),
            "example.com/lb-size: must be between 1 and 64 (value \"70\")"
        );
    }

    #[test]
    fn only_warnings_leave_the_service_served() {
        let m = map(&[("typo", "x")]);
        let ignored = AnnotationReader::new(TABLE, &m).finish().unwrap();
        assert_eq!(ignored.len(), 1);
        assert_eq!(ignored[0].kind, ProblemKind::UnknownKey);
        assert_eq!(parse_go_bool("T"), Some(true));
        assert_eq!(parse_go_bool("yes"), None);
        assert!(excerpt(&"x".repeat(150)).ends_with("… (150 chars)"));
    }
}
