//! Checking raw gcfg sections against a provider's schema: sections sorted by kind, entries filed
//! under their schema keys (case-insensitive), and typed readers that report every problem with
//! its line. The schema (which sections and keys exist) is the provider's; this module knows none.

use std::collections::HashMap;

use super::lexer::{RawEntry, RawSection};
use super::problem::{name as shown_name, ConfigProblem};

/// A kind of section a config file may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionKind {
    /// The name as the provider spells it (`Global`, `ServiceOverride`).
    pub name: &'static str,
    /// Whether it takes a quoted name (`[ServiceOverride "1"]`); an unnamed header of a named
    /// kind is the section named `""`, as gcfg reads it.
    pub named: bool,
}

impl SectionKind {
    /// `[Global]` or `[ServiceOverride "name"]`, for messages.
    pub fn header(&self) -> String {
        if self.named {
            format!("[{} \"name\"]", self.name)
        } else {
            format!("[{}]", self.name)
        }
    }
}

/// The headers of one section (a section may be split over several headers), by kind and name.
#[derive(Debug)]
pub struct Group<'a> {
    /// The kind.
    pub kind: SectionKind,
    /// The quoted name (`None` for an unnamed kind).
    pub name: Option<String>,
    /// Its headers, in file order.
    pub raws: Vec<&'a RawSection>,
}

impl Group<'_> {
    /// `Global` or `ServiceOverride "1"`: the label problems carry.
    pub fn label(&self) -> String {
        section_label(self.kind.name, self.name.as_deref())
    }
}

/// `name` or `name "sub"`.
pub fn section_label(name: &str, sub: Option<&str>) -> String {
    match sub {
        Some(sub) => format!(
            "{} \"{}\"",
            shown_name(name),
            shown_name(sub).escape_debug()
        ),
        None => shown_name(name),
    }
}

/// "[Global] and [ServiceOverride "name"]" or "[A], [B] and [C]".
fn list_headers(kinds: &[SectionKind]) -> String {
    let headers: Vec<String> = kinds.iter().map(SectionKind::header).collect();
    match headers.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// Sorts raw sections into groups of `kinds` (in order of first appearance), reporting sections of
/// no kind and names given to unnamed kinds.
pub fn group<'a>(
    sections: &'a [RawSection],
    kinds: &[SectionKind],
    problems: &mut Vec<ConfigProblem>,
) -> Vec<Group<'a>> {
    let mut groups: Vec<Group<'a>> = Vec::new();
    for raw in sections {
        let label = section_label(&raw.name, raw.subsection.as_deref());
        let Some(kind) = kinds.iter().find(|k| raw.name.eq_ignore_ascii_case(k.name)) else {
            let message = format!(
                "unknown section; valid sections are {}",
                list_headers(kinds)
            );
            problems.push(
                ConfigProblem::new(message)
                    .in_section(label)
                    .at_line(raw.line),
            );
            continue;
        };
        let name = match (kind.named, &raw.subsection) {
            (true, sub) => Some(sub.clone().unwrap_or_default()),
            (false, None) => None,
            (false, Some(_)) => {
                let message = format!("[{}] takes no name, so this section is not read", kind.name);
                problems.push(
                    ConfigProblem::new(message)
                        .in_section(label)
                        .at_line(raw.line),
                );
                continue;
            }
        };
        match groups
            .iter_mut()
            .find(|g| g.kind == *kind && g.name == name)
        {
            Some(g) => g.raws.push(raw),
            None => groups.push(Group {
                kind: *kind,
                name,
                raws: vec![raw],
            }),
        }
    }
    groups
}

/// The keys one kind of section accepts.
#[derive(Debug, Clone, Copy)]
pub struct KeySchema<'s> {
    /// Every key, spelled as the provider documents it.
    pub keys: &'s [&'static str],
    /// Keys that may be given more than once (each adds a value).
    pub repeatable: &'s [&'static str],
}

/// One logical section (all its headers merged): entries by schema key, duplicates dropped.
#[derive(Debug)]
pub struct Section<'a> {
    /// `Global` or `ServiceOverride "1"`.
    pub label: String,
    /// The line of its first header, when it has one.
    pub header_line: Option<usize>,
    keys: HashMap<&'static str, Vec<&'a RawEntry>>,
}

impl<'a> Section<'a> {
    /// Files the entries of `raws` under the schema's keys; reports unknown keys (with the hint
    /// `unknown_hint` gives for a key, e.g. " (it belongs in [Global])") and repeated ones.
    pub fn keyed(
        label: String,
        raws: &[&'a RawSection],
        schema: KeySchema<'_>,
        unknown_hint: impl Fn(&str) -> String,
        problems: &mut Vec<ConfigProblem>,
    ) -> Section<'a> {
        let mut section = Section {
            label,
            header_line: raws.first().map(|r| r.line),
            keys: HashMap::new(),
        };
        // The valid keys are listed once per section, at its first unknown key.
        let mut listed_on: Option<usize> = None;
        for entry in raws.iter().flat_map(|r| &r.entries) {
            let Some(&key) = schema
                .keys
                .iter()
                .find(|k| k.eq_ignore_ascii_case(&entry.key))
            else {
                let message = match listed_on {
                    None => format!(
                        "unknown key{}; valid keys are {}",
                        unknown_hint(&entry.key),
                        schema.keys.join(", ")
                    ),
                    Some(line) => format!(
                        "unknown key{} (valid keys are listed at line {line})",
                        unknown_hint(&entry.key)
                    ),
                };
                listed_on.get_or_insert(entry.line);
                problems.push(section.problem(&entry.key, Some(entry.line), message));
                continue;
            };
            let seen = section.keys.entry(key).or_default();
            match seen.first() {
                Some(first) if !schema.repeatable.contains(&key) => {
                    let message = format!(
                        "is set more than once (first on line {}); keep only one",
                        first.line
                    );
                    problems.push(section.problem(key, Some(entry.line), message));
                }
                _ => seen.push(entry),
            }
        }
        section
    }

    /// An empty section (the kind was absent from the file): every key reads as unset.
    pub fn absent(label: impl Into<String>) -> Section<'static> {
        Section {
            label: label.into(),
            header_line: None,
            keys: HashMap::new(),
        }
    }

    /// The (only) entry of a single-valued key.
    pub fn first(&self, key: &str) -> Option<&'a RawEntry> {
        self.keys.get(key).and_then(|e| e.first().copied())
    }

    /// Every entry of a repeatable key, in file order.
    pub fn all(&self, key: &str) -> &[&'a RawEntry] {
        self.keys.get(key).map_or(&[], Vec::as_slice)
    }

    /// A problem with `key` of this section, on `line`.
    pub fn problem(
        &self,
        key: &str,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> ConfigProblem {
        let problem = ConfigProblem::new(message)
            .in_section(&self.label)
            .for_key(key);
        match line {
            Some(line) => problem.at_line(line),
            None => problem,
        }
    }

    /// The non-empty value of a single-valued key, with its line; a bare key (no `=`) is
    /// reported.
    pub fn text(
        &self,
        key: &'static str,
        problems: &mut Vec<ConfigProblem>,
    ) -> Option<(&'a str, usize)> {
        let entry = self.first(key)?;
        match entry.value.as_deref() {
            None => {
                problems.push(self.problem(key, Some(entry.line), "needs a value (`key = value`)"));
                None
            }
            Some("") => None,
            Some(value) => Some((value, entry.line)),
        }
    }

    /// An optional free-form string.
    pub fn string(&self, key: &'static str, problems: &mut Vec<ConfigProblem>) -> Option<String> {
        self.text(key, problems).map(|(v, _)| v.to_owned())
    }

    /// An optional value converted by `check`, whose error message is reported. The message
    /// should not quote the value; should it still, the value is cut out of it.
    pub fn checked<T>(
        &self,
        key: &'static str,
        problems: &mut Vec<ConfigProblem>,
        check: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let (value, line) = self.text(key, problems)?;
        check(value)
            .map_err(|message| {
                let message = without_value(&message, value);
                problems.push(self.problem(key, Some(line), message));
            })
            .ok()
    }

    /// A boolean; a bare key means true, an absent one `default`.
    pub fn boolean_or(
        &self,
        key: &'static str,
        default: bool,
        problems: &mut Vec<ConfigProblem>,
    ) -> bool {
        let Some(entry) = self.first(key) else {
            return default;
        };
        let Some(value) = entry.value.as_deref() else {
            return true;
        };
        parse_bool(value).unwrap_or_else(|| {
            let message = "not a boolean (use true/false, yes/no, on/off or 1/0)";
            problems.push(self.problem(key, Some(entry.line), message));
            default
        })
    }

    /// A boolean; a bare key means true, an absent one false.
    pub fn boolean(&self, key: &'static str, problems: &mut Vec<ConfigProblem>) -> bool {
        self.boolean_or(key, false, problems)
    }

    /// A required value, trimmed; missing or empty is reported.
    pub fn required(
        &self,
        key: &'static str,
        problems: &mut Vec<ConfigProblem>,
    ) -> Option<(String, usize)> {
        let entry = self.first(key);
        let value = self
            .text(key, problems)
            .map(|(v, line)| (v.trim(), line))
            .filter(|(v, _)| !v.is_empty());
        match (value, entry) {
            (Some((v, line)), _) => Some((v.to_owned(), line)),
            (None, Some(RawEntry { value: None, .. })) => None,
            (None, Some(entry)) => {
                problems.push(self.problem(key, Some(entry.line), "is required but empty"));
                None
            }
            (None, None) => {
                problems.push(self.problem(key, self.header_line, "is required but missing"));
                None
            }
        }
    }
}

/// `message` with every occurrence of `value` (or of its trimmed form, when that is longer than
/// two characters) replaced by `…`.
fn without_value(message: &str, value: &str) -> String {
    let trimmed = value.trim();
    if trimmed.chars().count() <= 2 {
        return message.to_owned();
    }
    message.replace(value, "…").replace(trimmed, "…")
}

/// Reads a gcfg boolean: true/false, yes/no, on/off, 1/0, in any case.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Matches `value` exactly against `choices`; a case-only mismatch gets a hint. The message names
/// the choices, never the value.
pub fn enum_value<T: Copy>(value: &str, choices: &[(&str, T)]) -> Result<T, String> {
    if let Some((_, t)) = choices.iter().find(|(name, _)| *name == value) {
        return Ok(*t);
    }
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    let hint = choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(value))
        .map(|(name, _)| format!(" (values are case-sensitive: write {name})"))
        .unwrap_or_default();
    Err(format!("not one of {}{hint}", names.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gcfg::lexer;

    const KINDS: &[SectionKind] = &[
        SectionKind {
            name: "Global",
            named: false,
        },
        SectionKind {
            name: "ServiceOverride",
            named: true,
        },
    ];

    #[test]
    fn groups_by_kind_and_name_and_reports_the_rest() {
        let (raws, _) = lexer::parse(
            "[global]\na=1\n[ServiceOverride \"1\"]\n[Other]\n[Global \"x\"]\n[GLOBAL]\nb=2\n[serviceoverride]\n",
        );
        let mut problems = Vec::new();
        let groups = group(&raws, KINDS, &mut problems);
        let shape: Vec<(String, usize)> =
            groups.iter().map(|g| (g.label(), g.raws.len())).collect();
        assert_eq!(
            shape,
            vec![
                ("Global".to_string(), 2),
                ("ServiceOverride \"1\"".to_string(), 1),
                ("ServiceOverride \"\"".to_string(), 1)
            ]
        );
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            vec![
                "[Other] unknown section; valid sections are [Global] and [ServiceOverride \"name\"] (line 4)",
                "[Global \"x\"] [Global] takes no name, so this section is not read (line 5)",
            ]
        );
    }

    #[test]
    fn readers_report_every_problem_with_its_line() {
        let (raws, _) =
            lexer::parse("[G]\nName = x\nname = y\nFlag = maybe\nBare\nEmpty =\nOdd = 1\nOdder\n");
        let mut problems = Vec::new();
        let refs: Vec<&RawSection> = raws.iter().collect();
        let schema = KeySchema {
            keys: &["Name", "Flag", "Bare", "Empty", "Need"],
            repeatable: &[],
        };
        let s = Section::keyed("G".into(), &refs, schema, |_| String::new(), &mut problems);
        assert_eq!(s.string("Name", &mut problems).as_deref(), Some("x"));
        assert!(!s.boolean("Flag", &mut problems));
        assert_eq!(s.string("Bare", &mut problems), None);
        assert_eq!(s.string("Empty", &mut problems), None);
        assert_eq!(s.required("Need", &mut problems), None);
        assert!(s.boolean_or("Missing", true, &mut problems));
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            vec![
                "[G] Name: is set more than once (first on line 2); keep only one (line 3)",
                "[G] Odd: unknown key; valid keys are Name, Flag, Bare, Empty, Need (line 7)",
                "[G] Odder: unknown key (valid keys are listed at line 7) (line 8)",
                "[G] Flag: not a boolean (use true/false, yes/no, on/off or 1/0) (line 4)",
                "[G] Bare: needs a value (`key = value`) (line 5)",
                "[G] Need: is required but missing (line 1)",
            ]
        );
    }

    #[test]
    fn a_checker_quoting_the_value_has_it_cut_out() {
        let (raws, _) = lexer::parse("[G]\nName = hunter2-secret\n");
        let refs: Vec<&RawSection> = raws.iter().collect();
        let schema = KeySchema {
            keys: &["Name"],
            repeatable: &[],
        };
        let mut problems = Vec::new();
        let s = Section::keyed("G".into(), &refs, schema, |_| String::new(), &mut problems);
        let got: Option<u8> = s.checked("Name", &mut problems, |v| Err(format!("{v:?} is bad")));
        assert_eq!(got, None);
        assert_eq!(problems[0].to_string(), "[G] Name: \"…\" is bad (line 2)");
    }

    #[test]
    fn enums_are_exact_with_a_case_hint() {
        assert_eq!(enum_value("b", &[("a", 1), ("b", 2)]), Ok(2));
        assert_eq!(
            enum_value("A", &[("a", 1)]).unwrap_err(),
            "not one of a (values are case-sensitive: write a)"
        );
        assert_eq!(parse_bool("YES"), Some(true));
        assert_eq!(parse_bool("nope"), None);
    }
}
