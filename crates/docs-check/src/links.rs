//! Relative links and `#anchors` in Markdown, resolved the way mdBook renders them: a link must
//! name an existing file and, when it has a fragment, a heading of that file (ids as mdBook
//! makes them: lower-cased, punctuation dropped, spaces to `-`, repeats numbered `-1`, `-2`).

use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path, PathBuf};

/// One link found in a Markdown file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// 1-based line of the link.
    pub line: usize,
    /// The destination as written.
    pub target: String,
}

/// The lines of a Markdown file that are not inside fenced code blocks, with their numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// The line with its inline code spans removed.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let after = &rest[start + ticks..];
        match after.find(&"`".repeat(ticks)) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every inline link destination (`[text](dest)`, `![alt](dest)`) and reference definition
/// (`[name]: dest`) outside code.
pub fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    for (line_no, raw) in prose_lines(text) {
        let line = without_code_spans(raw);
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            if let Some(close) = trimmed.find("]:") {
                let dest = trimmed[close + 2..].split_whitespace().next().unwrap_or("");
                if !dest.is_empty() {
                    found.push(Link {
                        line: line_no,
                        target: dest.trim_matches(|c| c == '<' || c == '>').to_string(),
                    });
                }
            }
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let dest = after[..end].split_whitespace().next().unwrap_or("");
            found.push(Link {
                line: line_no,
                target: dest.trim_matches(|c| c == '<' || c == '>').to_string(),
            });
            rest = &after[end..];
        }
    }
    found
}

/// The text of a heading as mdBook sees it: code spans keep their text, links their label,
/// emphasis markers go.
fn heading_text(raw: &str) -> String {
    let mut text = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' | '*' => {}
            '[' => {}
            ']' if chars.peek() == Some(&'(') => {
                for c in chars.by_ref() {
                    if c == ')' {
                        break;
                    }
                }
            }
            ']' => {}
            _ => text.push(c),
        }
    }
    text
}

/// An id as mdBook 0.5 makes it from a heading's text.
pub fn heading_id(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c)
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// Every anchor a file offers: its headings' ids (numbered when repeated) and explicit
/// `{#id}` or `<a id="…">`/`<a name="…">` anchors.
pub fn anchors(text: &str) -> HashSet<String> {
    let mut used = HashSet::new();
    for (_, line) in prose_lines(text) {
        let trimmed = line.trim_start();
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            let mut title = trimmed[hashes..].trim().to_string();
            if let Some(open) = title.find("{#") {
                if let Some(close) = title[open..].find('}') {
                    used.insert(title[open + 2..open + close].to_string());
                    title.truncate(open);
                    continue;
                }
            }
            let id = heading_id(&heading_text(&title));
            let mut candidate = id.clone();
            let mut n = 0;
            while !used.insert(candidate.clone()) {
                n += 1;
                candidate = format!("{id}-{n}");
            }
        }
        for key in ["<a id=\"", "<a name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(key) {
                let after = &rest[at + key.len()..];
                if let Some(end) = after.find('"') {
                    used.insert(after[..end].to_string());
                }
                rest = after;
            }
        }
    }
    used
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Checks every relative link of the given Markdown files. `confine`: a link may not leave this
/// directory (the book's `src/`, whose files alone are published). Returns one message per
/// broken link, naming the file and line.
pub fn check(files: &[PathBuf], confine: Option<&Path>) -> Vec<String> {
    let mut cache: BTreeMap<PathBuf, HashSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(file) else {
            problems.push(format!("{}: cannot be read", file.display()));
            continue;
        };
        for link in links(&text) {
            let t = link.target.as_str();
            if t.is_empty() || t.contains("://") || t.starts_with("mailto:") || t.starts_with('/') {
                if t.is_empty() || t.starts_with('/') {
                    problems.push(format!(
                        "{}:{}: {t:?}: use a relative link",
                        file.display(),
                        link.line
                    ));
                }
                continue;
            }
            let (path_part, fragment) = match t.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (t, None),
            };
            let target = if path_part.is_empty() {
                file.clone()
            } else {
                normalize(&file.parent().unwrap_or(Path::new("")).join(path_part))
            };
            let at = format!("{}:{}: {t}", file.display(), link.line);
            if let Some(dir) = confine {
                if file.starts_with(dir) && !target.starts_with(dir) {
                    problems.push(format!("{at}: leaves {} (not published)", dir.display()));
                    continue;
                }
            }
            if !target.exists() {
                problems.push(format!("{at}: no such file"));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            if target.extension().and_then(|e| e.to_str()) != Some("md") {
                continue;
            }
            let ids = cache
                .entry(target.clone())
                .or_insert_with(|| anchors(&std::fs::read_to_string(&target).unwrap_or_default()));
            if !ids.contains(fragment) {
                problems.push(format!("{at}: no heading with the id {fragment:?}"));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_mdbook() {
        let cases = [
            (
                "`--passes`: add more rustdoc passes",
                "--passes-add-more-rustdoc-passes",
            ),
            (
                "OpenStack (`--cloud-provider=openstack`)",
                "openstack---cloud-provideropenstack",
            ),
            (
                "Performance (`make bench-nth`)",
                "performance-make-bench-nth",
            ),
            ("Über", "über"),
            ("bench-nodes", "bench-nodes"),
        ];
        for (heading, id) in cases {
            assert_eq!(heading_id(&heading_text(heading)), id, "{heading}");
        }
    }

    #[test]
    fn repeated_headings_are_numbered_and_code_is_skipped() {
        let text = "# Tests\n## Tests\n```\n# not a heading\n```\n## [Linked](x.md) *title*\n";
        let ids = anchors(text);
        for id in ["tests", "tests-1", "linked-title"] {
            assert!(ids.contains(id), "{id} in {ids:?}");
        }
        assert!(!ids.contains("not-a-heading"));
    }

    #[test]
    fn links_outside_code_are_found() {
        let text = "see [a](a.md#x) and `[b](b.md)`\n```\n[c](c.md)\n```\n[d]: d.md \"t\"\n![i](img.svg)\n";
        let got: Vec<_> = links(text)
            .into_iter()
            .map(|l| (l.line, l.target))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, "a.md#x".to_string()),
                (5, "d.md".to_string()),
                (6, "img.svg".to_string())
            ]
        );
    }
}
