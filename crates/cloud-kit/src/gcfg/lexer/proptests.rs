//! Property tests of the gcfg lexer: no panic on any text, problems point at real lines, and
//! quoted values, subsections and plain entries round-trip.

use super::*;
use proptest::prelude::*;

/// `value` written as a gcfg quoted string.
fn quote(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn key() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9_.-]{0,12}"
}

/// A value that needs no quotes: no comment characters, quotes, backslashes or edge spaces.
fn plain_value() -> impl Strategy<Value = String> {
    "([A-Za-z0-9_./:@,=-]([A-Za-z0-9_./:@,= -]{0,20}[A-Za-z0-9_./:@,=-])?)?"
}

proptest! {
    #[test]
    fn parse_never_panics_and_problems_have_lines(text in any::<String>()) {
        let (_, problems) = parse(&text);
        let lines = text.split('\n').count();
        for p in problems {
            let line = p.line.expect("every lexer problem has a line");
            prop_assert!((1..=lines).contains(&line), "line {} of {}", line, lines);
            prop_assert!(!p.message.contains('\n'));
        }
    }

    #[test]
    fn quoted_values_round_trip(k in key(), value in any::<String>()) {
        let text = format!("[Global]\n{k} = {} ; comment\n", quote(&value));
        let (sections, problems) = parse(&text);
        prop_assert!(problems.is_empty(), "{:?}", problems);
        prop_assert_eq!(&sections[0].entries[0].value, &Some(value));
    }

    #[test]
    fn plain_values_round_trip(k in key(), value in plain_value(), pad in "[ \t]{0,3}") {
        let text = format!("[Global]\n{pad}{k}{pad}={pad}{value}{pad}# comment\r\n");
        let (sections, problems) = parse(&text);
        prop_assert!(problems.is_empty(), "{:?}", problems);
        let entry = &sections[0].entries[0];
        prop_assert_eq!(&entry.key, &k);
        prop_assert_eq!(&entry.value, &Some(value));
    }

    #[test]
    fn subsections_round_trip(name in key(), sub in "[^\n]{0,30}") {
        let escaped = sub.replace('\\', "\\\\").replace('"', "\\\"");
        let text = format!("[{name} \"{escaped}\"]\nk = v\n");
        let (sections, problems) = parse(&text);
        prop_assert!(problems.is_empty(), "{:?}", problems);
        prop_assert_eq!(&sections[0].name, &name);
        prop_assert_eq!(&sections[0].subsection, &Some(sub));
    }

    #[test]
    fn entries_keep_their_order_and_lines(
        entries in prop::collection::vec((key(), prop::option::of(plain_value()), 0usize..3), 0..20)
    ) {
        let mut text = String::from("[Global]\n");
        let mut want = Vec::new();
        let mut line = 1;
        for (k, v, blank_lines) in &entries {
            for _ in 0..*blank_lines {
                text.push_str("; nothing here\n");
                line += 1;
            }
            line += 1;
            match v {
                Some(v) => text.push_str(&format!("{k} = {v}\n")),
                None => text.push_str(&format!("{k}\n")),
            }
            want.push((k.clone(), v.clone(), line));
        }
        let (sections, problems) = parse(&text);
        prop_assert!(problems.is_empty(), "{:?}", problems);
        let got: Vec<_> = sections[0]
            .entries
            .iter()
            .map(|e| (e.key.clone(), e.value.clone(), e.line))
            .collect();
        prop_assert_eq!(got, want);
    }
}
