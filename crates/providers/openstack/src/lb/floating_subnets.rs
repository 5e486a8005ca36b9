//! Choosing the floating subnet by name pattern or tags, as OCCM's `floating-subnet` and
//! `floating-subnet-tags`: a pattern is a glob (`*`, `?`), or a regular expression after `~`,
//! negated by a leading `!`, matching the whole subnet name; tags are `a,b` (any of them),
//! `&a,b` (all of them), negated by a leading `!` (sent to Neutron exactly as OCCM sends them). Tags go into the Neutron listing's query, the
//! name is matched here; the floating IP is then tried on each subnet in turn. Pure.

use regex::Regex;

/// A subnet name pattern.
#[derive(Debug, Clone)]
pub struct NameMatcher {
    regex: Regex,
    negate: bool,
}

fn glob_to_regex(glob: &str) -> String {
    let mut out = String::from("^");
    for c in glob.chars() {
        match c {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            c => out.push_str(&regex::escape(&c.to_string())),
        }
    }
    out.push('$');
    out
}

impl NameMatcher {
    /// Parses a pattern; the error says why it is not one.
    pub fn parse(pattern: &str) -> Result<NameMatcher, String> {
        let (negate, rest) = match pattern.strip_prefix('!') {
            Some(r) => (true, r),
            None => (false, pattern),
        };
        let source = match rest.strip_prefix('~') {
            Some(re) => format!("^(?:{re})$"),
            None => glob_to_regex(rest),
        };
        let regex = Regex::new(&source).map_err(|e| format!("not a valid pattern: {e}"))?;
        Ok(NameMatcher { regex, negate })
    }

    /// Whether a subnet name matches.
    pub fn matches(&self, name: &str) -> bool {
        self.regex.is_match(name) != self.negate
    }
}

/// The Neutron query filter of a tag spec: `(key, comma-separated tags)`.
pub fn tag_query(spec: &str) -> (&'static str, String) {
    let (not, rest) = match spec.strip_prefix('!') {
        Some(r) => (true, r),
        None => (false, spec),
    };
    let (all, rest) = match rest.strip_prefix('&') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let tags: Vec<&str> = rest
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    // OCCM's mapping, kept as it is so a spec selects the same subnets under Stratus.
    let key = match (all, not) {
        (true, false) => "tags",
        (true, true) => "not-tags-any",
        (false, false) => "tags-any",
        (false, true) => "not-tags",
    };
    (key, tags.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_names() {
        // (pattern, name, matches)
        let cases = [
            ("public-*", "public-a", true),
            ("public-*", "my-public-a", false),
            ("public-?", "public-ab", false),
            ("!public-*", "public-a", false),
            ("!public-*", "private", true),
            ("~pub(lic)?-[0-9]+", "pub-12", true),
            ("~pub(lic)?-[0-9]+", "pub-12x", false),
            ("!~pub.*", "private", true),
            ("a.b", "axb", false),
            ("a.b", "a.b", true),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(
                NameMatcher::parse(pattern).unwrap().matches(name),
                want,
                "{pattern} {name}"
            );
        }
        assert!(NameMatcher::parse("~(unclosed").is_err());
    }

    #[test]
    fn tag_specs_become_neutron_filters() {
        assert_eq!(tag_query("a,b"), ("tags-any", "a,b".into()));
        assert_eq!(tag_query("&a, b"), ("tags", "a,b".into()));
        assert_eq!(tag_query("!a"), ("not-tags", "a".into()));
        assert_eq!(tag_query("!&a,b"), ("not-tags-any", "a,b".into()));
    }
}
