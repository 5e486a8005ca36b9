//! Lexer for the gcfg INI dialect: config text to raw sections, knowing nothing of AWS keys.
//!
//! Syntax (as gcfg v1, a git-config subset): `[section]` or `[section "subsection"]` headers;
//! `key = value` or a bare `key` (no value); `;` and `#` start comments, also after a value;
//! double quotes may wrap all or part of a value, keeping its whitespace and comment
//! characters; inside quotes the escapes are `\\`, `\"`, `\n` and `\t`; outside quotes a `\`
//! must end the line and continues the value on the next one. Whitespace is space, tab and CR.
//! Names are kept as written: folding case is the validator's business.

use super::problem::{name as shown_name, ConfigProblem};

/// A section header and the entries under it, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSection {
    /// Section name as written (`Global`, `serviceoverride`, ...).
    pub name: String,
    /// The quoted subsection name, if any (`"1"` in `[ServiceOverride "1"]`), unescaped.
    pub subsection: Option<String>,
    /// 1-based line of the header.
    pub line: usize,
    /// Entries in file order.
    pub entries: Vec<RawEntry>,
}

/// One `key = value` (or bare `key`) line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    /// Key as written.
    pub key: String,
    /// The unquoted value; `None` for a bare key without `=`.
    pub value: Option<String>,
    /// 1-based line the entry starts on.
    pub line: usize,
}

/// What one logical line turned out to be.
enum Line {
    Blank,
    Header {
        name: String,
        subsection: Option<String>,
    },
    Entry {
        key: String,
        value: Option<String>,
    },
}

/// A malformed line: what is wrong, and the key when one was read.
struct LineError {
    key: Option<String>,
    message: String,
}

impl LineError {
    fn new(message: impl Into<String>) -> Self {
        LineError {
            key: None,
            message: message.into(),
        }
    }

    fn with_key(key: &str, message: impl Into<String>) -> Self {
        LineError {
            key: Some(key.to_owned()),
            message: message.into(),
        }
    }
}

/// Where entries currently go.
enum Target {
    /// No header seen yet.
    Nowhere,
    /// After a malformed header: entries are dropped (the header was already reported).
    Discard,
    /// Into `sections[index]`.
    Section(usize),
}

/// Splits `text` into raw sections, reporting every malformed line (with its number) and going on.
pub fn parse(text: &str) -> (Vec<RawSection>, Vec<ConfigProblem>) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .split('\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
    let mut sections: Vec<RawSection> = Vec::new();
    let mut problems = Vec::new();
    let mut target = Target::Nowhere;
    while let Some((line_no, line)) = lines.next() {
        match parse_line(line, &mut lines) {
            Ok(Line::Blank) => {}
            Ok(Line::Header { name, subsection }) => {
                sections.push(RawSection {
                    name,
                    subsection,
                    line: line_no,
                    entries: Vec::new(),
                });
                target = Target::Section(sections.len() - 1);
            }
            Ok(Line::Entry { key, value }) => match target {
                Target::Section(i) => sections[i].entries.push(RawEntry {
                    key,
                    value,
                    line: line_no,
                }),
                Target::Discard => {}
                // The "key" is not named: text before any header is often not config at all
                // (a token or a kubeconfig written where the config file belongs).
                Target::Nowhere => problems.push(
                    ConfigProblem::new(
                        "text outside of any section: a gcfg file starts with a section header such as [Global]",
                    )
                    .at_line(line_no),
                ),
            },
            Err(err) => {
                if line.trim_start_matches(is_space).starts_with('[') {
                    target = Target::Discard;
                }
                let mut problem = ConfigProblem::new(err.message).at_line(line_no);
                if let Some(key) = err.key {
                    problem = problem.for_key(key);
                }
                problems.push(problem);
            }
        }
    }
    (sections, problems)
}

/// Classifies one line; `more` supplies continuation lines for values ending in `\`.
fn parse_line<'a, I>(line: &'a str, more: &mut I) -> Result<Line, LineError>
where
    I: Iterator<Item = (usize, &'a str)>,
{
    let rest = line.trim_start_matches(is_space);
    match rest.chars().next() {
        None | Some(';') | Some('#') => Ok(Line::Blank),
        Some('[') => parse_header(&rest[1..]),
        Some(_) => parse_entry(rest, more),
    }
}

/// gcfg's whitespace.
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r')
}

/// Whether `c` may appear in a section or key name (the first must be an ASCII letter).
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_'
}

/// Splits a leading name off `s`; `None` when `s` does not start with an ASCII letter.
fn take_name(s: &str) -> Option<(&str, &str)> {
    if !s.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let end = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
    Some(s.split_at(end))
}

/// Whether nothing but whitespace or a comment is left.
fn is_line_end(s: &str) -> bool {
    let s = s.trim_start_matches(is_space);
    s.is_empty() || s.starts_with([';', '#'])
}

/// Parses what follows `[` in a header line.
fn parse_header(rest: &str) -> Result<Line, LineError> {
    let (name, rest) = take_name(rest.trim_start_matches(is_space)).ok_or_else(|| {
        LineError::new("malformed section header: expected a section name after '['")
    })?;
    let rest = rest.trim_start_matches(is_space);
    let (subsection, rest) = match rest.strip_prefix('"') {
        Some(quoted) => {
            let (sub, after) = lex_subsection(quoted)?;
            (Some(sub), after.trim_start_matches(is_space))
        }
        None => (None, rest),
    };
    let rest = rest.strip_prefix(']').ok_or_else(|| {
        LineError::new(format!(
            "malformed section header [{}: expected ']'",
            shown_name(name)
        ))
    })?;
    if !is_line_end(rest) {
        return Err(LineError::new(
            "malformed section header: unexpected text after ']'",
        ));
    }
    Ok(Line::Header {
        name: name.to_owned(),
        subsection,
    })
}

/// Reads a subsection name after its opening quote; returns it and the text after the closing one.
fn lex_subsection(s: &str) -> Result<(String, &str), LineError> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, e @ ('\\' | '"'))) => out.push(e),
                Some((_, e)) => {
                    return Err(LineError::new(format!(
                        "malformed section header: unknown escape sequence \\{} in subsection name",
                        e.escape_debug()
                    )))
                }
                None => break,
            },
            _ => out.push(c),
        }
    }
    Err(LineError::new(
        "malformed section header: unterminated subsection name",
    ))
}

/// Parses a `key`, `key = value` or `key = value ; comment` line.
fn parse_entry<'a, I>(line: &'a str, more: &mut I) -> Result<Line, LineError>
where
    I: Iterator<Item = (usize, &'a str)>,
{
    let Some((key, rest)) = take_name(line) else {
        let found = line.chars().next().unwrap_or(' ');
        return Err(LineError::new(format!(
            "malformed line: expected `key = value`, a [section] header or a comment, found {found:?}"
        )));
    };
    if is_line_end(rest) {
        return Ok(Line::Entry {
            key: key.to_owned(),
            value: None,
        });
    }
    let Some(value) = rest.trim_start_matches(is_space).strip_prefix('=') else {
        // Not named: a line that is not `key = value` is often not config at all (a secret
        // written in the wrong file), and its first word is not known to be a key.
        return Err(LineError::new(
            "malformed line: expected `key = value` (no '=' after the first word)",
        ));
    };
    let value = lex_value(value, more).map_err(|message| LineError::with_key(key, message))?;
    Ok(Line::Entry {
        key: key.to_owned(),
        value: Some(value),
    })
}

/// Accumulates a value: unquoted whitespace is kept only between other characters.
#[derive(Default)]
struct ValueBuilder {
    out: String,
    pending_space: String,
    started: bool,
}

impl ValueBuilder {
    /// Appends a character that counts as content (keeping the whitespace before it).
    fn push(&mut self, c: char) {
        self.mark_started();
        self.out.push(c);
    }

    /// Marks the start of content (e.g. an opening quote), keeping the whitespace before it.
    fn mark_started(&mut self) {
        self.out.push_str(&self.pending_space);
        self.pending_space.clear();
        self.started = true;
    }

    /// Records unquoted whitespace, dropped if nothing follows it.
    fn space(&mut self, c: char) {
        if self.started {
            self.pending_space.push(c);
        }
    }
}

/// Why a `\` outside quotes that does not end the line is refused (as gcfg refuses it).
const UNQUOTED_BACKSLASH: &str =
    "a '\\' outside quotes must end the line (to continue the value); quote the value to use escapes";

/// Reads a value after `=`, pulling continuation lines from `more` after a trailing `\`.
fn lex_value<'a, I>(first: &'a str, more: &mut I) -> Result<String, String>
where
    I: Iterator<Item = (usize, &'a str)>,
{
    let mut value = ValueBuilder::default();
    let mut in_quotes = false;
    let mut line = first;
    'lines: loop {
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match (chars.next(), in_quotes) {
                    (Some(e), true) => value.push(unescape(e)?),
                    (None, true) => return Err("unterminated quoted value".into()),
                    (Some(_), false) => return Err(UNQUOTED_BACKSLASH.into()),
                    (None, false) => match more.next() {
                        Some((_, next)) => {
                            line = next;
                            continue 'lines;
                        }
                        None => {
                            return Err("value continues ('\\') past the end of the file".into())
                        }
                    },
                },
                '"' => {
                    value.mark_started();
                    in_quotes = !in_quotes;
                }
                _ if in_quotes => value.push(c),
                ';' | '#' => break 'lines,
                _ if is_space(c) => value.space(c),
                _ => value.push(c),
            }
        }
        break;
    }
    if in_quotes {
        return Err("unterminated quoted value".into());
    }
    Ok(value.out)
}

/// The character an escape sequence `\e` (inside quotes) stands for.
fn unescape(e: char) -> Result<char, String> {
    match e {
        '\\' => Ok('\\'),
        '"' => Ok('"'),
        'n' => Ok('\n'),
        't' => Ok('\t'),
        other => Err(format!(
            "unknown escape sequence \\{} in value",
            other.escape_debug()
        )),
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<(String, Option<String>, usize)> {
        let (sections, problems) = parse(text);
        assert!(problems.is_empty(), "{problems:?}");
        sections
            .into_iter()
            .flat_map(|s| s.entries)
            .map(|e| (e.key, e.value, e.line))
            .collect()
    }

    fn value(raw: &str) -> Option<String> {
        entries(&format!("[s]\nk ={raw}")).remove(0).1
    }

    #[test]
    fn headers_keep_names_and_unescape_subsections() {
        let text = "[Global]\n [ ServiceOverride \"a \\\"b\\\\\" ] ; c\n[x \"\\q\"]\n";
        let (sections, problems) = parse(text);
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[0].name, "Global");
        assert_eq!(sections[0].subsection, None);
        assert_eq!(sections[1].name, "ServiceOverride");
        assert_eq!(sections[1].subsection.as_deref(), Some("a \"b\\"));
        assert_eq!(sections[1].line, 2);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].line, Some(3));
        assert!(problems[0].message.contains("\\q"), "{problems:?}");
    }

    #[test]
    fn values_follow_gcfg_quoting_and_comments() {
        let cases: &[(&str, Option<&str>)] = &[
            (" plain ", Some("plain")),
            ("  two  words  ; comment", Some("two  words")),
            ("a#b", Some("a")),
            (r#" "quoted ; # kept " "#, Some("quoted ; # kept ")),
            (r#" part"ly quoted"  x"#, Some("partly quoted  x")),
            (r#" "" "#, Some("")),
            ("a\\\n  b", Some("a  b")),
            ("", Some("")),
            (r#" "a\"b\\c\td\ne""#, Some("a\"b\\c\td\ne")),
            ("\ta\u{a0}b\u{a0} ", Some("a\u{a0}b\u{a0}")),
        ];
        for (raw, want) in cases {
            assert_eq!(value(raw).as_deref(), *want, "value {raw:?}");
        }
    }

    #[test]
    fn bare_keys_have_no_value() {
        assert_eq!(
            entries("[s]\nflag\nother ; comment\n"),
            vec![("flag".into(), None, 2), ("other".into(), None, 3)]
        );
    }

    #[test]
    fn backslash_continues_a_value_on_the_next_line() {
        assert_eq!(
            entries("[s]\nk = one \\\n  two\nj = 3"),
            vec![
                ("k".into(), Some("one   two".into()), 2),
                ("j".into(), Some("3".into()), 4)
            ]
        );
    }

    #[test]
    fn a_quoted_value_cannot_span_lines() {
        let (_, problems) = parse("[s]\nk = \"a\\\nb\"\n");
        assert!(problems[0].message.contains("unterminated"), "{problems:?}");
    }

    #[test]
    fn crlf_and_bom_are_accepted() {
        assert_eq!(
            entries("\u{feff}[s]\r\nk = v\r\n"),
            vec![("k".into(), Some("v".into()), 2)]
        );
    }

    #[test]
    fn every_malformed_line_is_reported_with_its_number() {
        let text = "k = before\n[Global\nx = dropped\n[ok]\n= v\nkey value\nq = \"open\nr = \"\\q\"\n[\"x\"]\ns = \\";
        let (sections, problems) = parse(text);
        let lines: Vec<_> = problems.iter().map(|p| p.line.unwrap()).collect();
        assert_eq!(lines, vec![1, 2, 5, 6, 7, 8, 9, 10], "{problems:#?}");
        assert_eq!(sections.len(), 1);
        assert!(sections[0].entries.is_empty());
        assert!(problems[1].message.contains("expected ']'"));
        assert_eq!(
            problems[3].key, None,
            "the first word of a line without '=' is not named"
        );
        assert!(problems[3].message.contains("no '='"), "{problems:?}");
        assert!(problems[4].message.contains("unterminated"));
        assert!(problems[5].message.contains("\\q"));
        assert!(problems[7].message.contains("end of the file"));
    }
}
