//! Error text that never echoes its input: parser messages without their values, cut to a bound.
//!
//! A config file, a request body or a credential may end up in a parser's message: serde quotes
//! the value it did not expect (`invalid type: string "<the whole file>", expected struct …`). The
//! functions here keep what helps a person — the line and column, field names and expected types
//! (serde writes those in backticks), the category of the problem — and drop the values. Every
//! loader of every binary turns parser errors into text through them.

use std::fmt::Write as _;

/// The most bytes one problem's text keeps (longer text is cut, with `…`).
pub const MAX_PROBLEM_BYTES: usize = 300;

/// The longest backticked name kept in a message: field and type names are short; a longer run
/// is content, not a name.
const MAX_NAME_CHARS: usize = 64;

/// serde's words for an unexpected value that it follows with the value itself, and what we say
/// instead.
const UNEXPECTED: &[(&str, &str)] = &[
    ("string \"", "a string"),
    ("integer `", "an integer"),
    ("floating point `", "a floating point number"),
    ("boolean `", "a boolean"),
    ("character `", "a character"),
    ("unit variant `", "a unit variant"),
    ("newtype variant `", "a newtype variant"),
];

/// `text` on one line (control characters as spaces, runs of spaces squeezed) and at most
/// `max` bytes long, cut on a character boundary with `…` appended when cut.
pub fn bounded(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max + 4));
    let mut space = false;
    for c in text.chars() {
        let c = if c.is_control() || c.is_whitespace() {
            ' '
        } else {
            c
        };
        if c == ' ' {
            if space || out.is_empty() {
                continue;
            }
            space = true;
        } else {
            space = false;
        }
        if out.len() + c.len_utf8() > max {
            out.truncate(out.trim_end().len());
            out.push('…');
            return out;
        }
        out.push(c);
    }
    out.truncate(out.trim_end().len());
    out
}

/// A name-like value (an API version, a kind, an image reference) quoted for a message when it is
/// at most `max` characters of the characters such names have (ASCII letters, digits and
/// `-._/:@+[]`); anything else is described by its length, never shown.
pub fn quoted_name(text: &str, max: usize) -> String {
    let count = text.chars().count();
    let name_like = count <= max
        && text.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '.' | '_' | '/' | ':' | '@' | '+' | '[' | ']')
        });
    if name_like {
        format!("{text:?}")
    } else {
        format!("<a {count}-character value>")
    }
}

/// Whether a backticked run is a name worth keeping (a field, type or variant name, or a bit of
/// punctuation such as `:`), not a value.
fn is_name(run: &str) -> bool {
    let punctuation = run.chars().count() <= 2 && !run.chars().any(char::is_alphanumeric);
    let name = !run.is_empty()
        && run.chars().count() <= MAX_NAME_CHARS
        && run
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ' '));
    punctuation || name
}

/// The end (exclusive, in bytes) of a Rust-escaped string literal whose opening quote is just
/// before `start`; the text's end when it is unterminated.
fn end_of_quoted(text: &str, start: usize) -> usize {
    let mut escaped = false;
    for (i, c) in text[start..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return start + i + 1,
            _ => {}
        }
    }
    text.len()
}

/// A parser's message without the values it quotes: serde's unexpected values become their kind
/// (`invalid type: string "…"` → `invalid type: a string`), any other double-quoted run becomes
/// `"…"`, a backticked run that is not a short name becomes `` `…` ``; then [`bounded`].
pub fn scrub(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_PROBLEM_BYTES * 2));
    let mut i = 0;
    'outer: while i < message.len() {
        // Stop early: what follows would be cut anyway.
        if out.len() > MAX_PROBLEM_BYTES * 2 {
            break;
        }
        let rest = &message[i..];
        for (prefix, kind) in UNEXPECTED {
            if rest.starts_with(prefix) {
                let open = i + prefix.len();
                i = if prefix.ends_with('"') {
                    end_of_quoted(message, open)
                } else {
                    message[open..]
                        .find('`')
                        .map_or(message.len(), |end| open + end + 1)
                };
                out.push_str(kind);
                continue 'outer;
            }
        }
        let c = rest.chars().next().expect("not at the end");
        match c {
            '"' => {
                i = end_of_quoted(message, i + 1);
                out.push_str("\"…\"");
            }
            '`' => {
                let open = i + 1;
                let Some(len) = message[open..].find('`') else {
                    out.push_str("`…");
                    break;
                };
                let run = &message[open..open + len];
                if is_name(run) {
                    let _ = write!(out, "`{run}`");
                } else {
                    out.push_str("`…`");
                }
                i = open + len + 1;
            }
            _ => {
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    bounded(&out, MAX_PROBLEM_BYTES)
}

/// A parse problem as one short line: `line L, column C: <scrubbed message>` (the position left
/// out when unknown), with a trailing ` at line N column M` of the parser's own text dropped.
pub fn parse_problem(message: &str, position: Option<(usize, usize)>) -> String {
    let message = strip_position(message);
    let scrubbed = scrub(message);
    match position {
        Some((line, column)) => bounded(
            &format!("line {line}, column {column}: {scrubbed}"),
            MAX_PROBLEM_BYTES,
        ),
        None => scrubbed,
    }
}

/// `message` without a trailing ` at line N column M` (serde_yaml's and serde_json's suffix) or
/// ` at line N, column M` (serde-saphyr's).
fn strip_position(message: &str) -> &str {
    let Some(at) = message.rfind(" at line ") else {
        return message;
    };
    let tail = &message[at + " at line ".len()..];
    let mut words = tail.split(' ');
    let digits = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
    let shape = matches!(
        (words.next(), words.next(), words.next(), words.next()),
        (Some(l), Some("column"), Some(c), None)
            if (digits(l) || l.strip_suffix(',').is_some_and(digits)) && digits(c)
    );
    if shape {
        &message[..at]
    } else {
        message
    }
}

/// What is wrong with a PEM file (a certificate or a private key), in words of our own: the
/// parser's errors quote lines of the file, so they are never shown.
pub fn pem(error: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match error {
        Error::MissingSectionEnd { .. } => "a section has no -----END line".into(),
        Error::IllegalSectionStart { .. } => "a -----BEGIN line is malformed".into(),
        Error::Base64Decode(_) => "a section is not valid base64".into(),
        Error::Io(e) => scrub(&e.to_string()),
        Error::NoItemsFound => "no PEM section of this kind in it".into(),
        Error::SectionTooLarge => "a section is too large".into(),
        _ => "not a PEM file".into(),
    }
}

/// A serde_yaml error as [`parse_problem`] shows it (1-based line and column).
pub fn yaml(error: &serde_yaml::Error) -> String {
    parse_problem(
        &error.to_string(),
        error.location().map(|l| (l.line(), l.column())),
    )
}

/// A serde_json error as [`parse_problem`] shows it (1-based line and column).
pub fn json(error: &serde_json::Error) -> String {
    let position = (error.line() > 0).then(|| (error.line(), error.column()));
    parse_problem(&error.to_string(), position)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    const SECRET: &str = "tok-7f3a9c-SECRET";

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct File {
        namespace: Option<String>,
        port: Option<u16>,
        enabled: Option<bool>,
    }

    #[test]
    fn serde_values_are_removed_and_names_kept() {
        // Message, then what must stay.
        let table: &[(&str, &str)] = &[
            (
                r#"invalid type: string "tok-7f3a9c-SECRET \" more", expected struct File"#,
                "invalid type: a string, expected struct File",
            ),
            (
                "invalid type: integer `7f3a9c`, expected a string",
                "invalid type: an integer, expected a string",
            ),
            (
                "invalid value: floating point `1.5`, expected u16",
                "invalid value: a floating point number, expected u16",
            ),
            (
                "unknown field `colour`, expected one of `namespace`, `port`",
                "unknown field `colour`, expected one of `namespace`, `port`",
            ),
            (
                "expected `:` at line 1 column 3",
                "expected `:` at line 1 column 3",
            ),
            (
                "unknown variant `tok-7f3a9c-SECRET with spaces and more!`, expected `a`",
                "unknown variant `…`, expected `a`",
            ),
            (r#"bad "tok-7f3a9c-SECRET"#, "bad \"…\""),
            ("open `tok-7f3a9c-SECRET", "open `…"),
        ];
        for (message, want) in table {
            let got = scrub(message);
            assert_eq!(&got, want, "{message}");
            assert!(!got.contains("7f3a9c"), "{got}");
        }
    }

    #[test]
    fn output_is_one_bounded_line() {
        let long = format!("invalid type: {}", "x".repeat(10 << 20));
        let got = scrub(&long);
        assert!(
            got.len() <= MAX_PROBLEM_BYTES + '…'.len_utf8(),
            "{}",
            got.len()
        );
        assert!(got.ends_with('…'));
        assert_eq!(bounded("a\n\tb\r\n  c", 100), "a b c");
        assert_eq!(bounded(&"é".repeat(10), 5), "éé…");
        assert_eq!(bounded("short", 100), "short");
    }

    #[test]
    fn yaml_errors_keep_position_and_lose_content() {
        let base64_file = format!("YXBpVmVyc2lvbjogdjEK{SECRET}{}", "QUFB".repeat(1 << 18));
        let inputs = [
            base64_file.clone(),
            format!("namespace: [1]\nport: {SECRET}\n"),
            format!("namespace: x\ncolour: {SECRET}\n"),
            format!("namespace: x\n  port: \"{SECRET}\n"),
            format!("- {SECRET}\n"),
        ];
        for text in &inputs {
            let err = serde_yaml::from_str::<File>(text).unwrap_err();
            let shown = yaml(&err);
            assert!(!shown.contains(SECRET), "{shown}");
            assert!(!shown.contains("QUFBQUFB"), "{shown}");
            assert!(shown.len() <= MAX_PROBLEM_BYTES + 3, "{}", shown.len());
            assert!(shown.starts_with("line "), "{shown}");
        }
        let err = serde_yaml::from_str::<File>(&base64_file).unwrap_err();
        assert_eq!(
            yaml(&err),
            "line 1, column 1: invalid type: a string, expected struct File"
        );
        let err = serde_yaml::from_str::<File>("namespace: x\nport: nope\n").unwrap_err();
        assert_eq!(
            yaml(&err),
            "line 2, column 7: port: invalid type: a string, expected u16"
        );
        let err = serde_yaml::from_str::<File>("namespace: x\ncolour: 1\n").unwrap_err();
        assert!(
            yaml(&err).contains("unknown field `colour`"),
            "{}",
            yaml(&err)
        );
    }

    #[test]
    fn json_errors_keep_position_and_lose_content() {
        let inputs = [
            format!(r#"{{"namespace": 5, "port": "{SECRET}"}}"#),
            format!(r#"{{"port": "{SECRET}"}}"#),
            format!(r#"{{"enabled": "{SECRET}"}}"#),
            format!(r#""{SECRET}""#),
            format!(r#"{{"namespace": "{SECRET}"#),
            SECRET.to_string(),
        ];
        for text in &inputs {
            let err = serde_json::from_str::<File>(text).unwrap_err();
            let shown = json(&err);
            assert!(!shown.contains(SECRET), "{shown}");
            assert!(shown.starts_with("line 1, column "), "{shown}");
        }
        let err = serde_json::from_str::<File>(r#"{"port": "x"}"#).unwrap_err();
        assert_eq!(
            json(&err),
            "line 1, column 12: invalid type: a string, expected u16"
        );
    }

    #[test]
    fn only_name_like_values_are_quoted() {
        assert_eq!(
            quoted_name("credentialprovider.kubelet.k8s.io/v2", 64),
            "\"credentialprovider.kubelet.k8s.io/v2\""
        );
        assert_eq!(quoted_name("a b", 64), "<a 3-character value>");
        assert_eq!(quoted_name(&"x".repeat(65), 64), "<a 65-character value>");
    }

    #[test]
    fn pem_errors_never_show_the_line() {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::PrivateKeyDer;
        let inputs = [
            format!("-----BEGIN PRIVATE KEY-----\n{SECRET}\n"),
            format!("-----BEGIN {SECRET}\n"),
            format!("-----BEGIN PRIVATE KEY-----\n{SECRET}!\n-----END PRIVATE KEY-----\n"),
            SECRET.to_string(),
        ];
        for text in &inputs {
            let e = PrivateKeyDer::from_pem_slice(text.as_bytes()).unwrap_err();
            let shown = pem(&e);
            assert!(
                !shown.contains("7f3a9c") && !shown.contains("[45"),
                "{shown}"
            );
        }
    }

    #[test]
    fn only_a_trailing_position_is_stripped() {
        assert_eq!(strip_position("bad at line 3 column 4"), "bad");
        assert_eq!(strip_position("bad at line 3, column 4"), "bad");
        assert_eq!(
            strip_position("bad at line , column 4"),
            "bad at line , column 4"
        );
        assert_eq!(strip_position("at line 3 column x"), "at line 3 column x");
        assert_eq!(strip_position("plain"), "plain");
    }
}
