//! `--authorization-always-allow-paths`: paths served without authentication or authorization,
//! with the upstream syntax (exact paths, or a prefix ending in `*`; the leading `/` optional).

/// Paths open to everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlwaysAllow {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

/// The upstream default of `--authorization-always-allow-paths`.
pub const DEFAULT_ALWAYS_ALLOW_PATHS: &str = "/healthz,/readyz,/livez";

impl AlwaysAllow {
    /// Parses the flag's items; empty items are skipped. A `*` anywhere but at the end is refused.
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<AlwaysAllow, String> {
        let mut allow = AlwaysAllow::default();
        for item in items.iter().map(|s| s.as_ref().trim()) {
            if item.is_empty() {
                continue;
            }
            let path = item.strip_prefix('/').unwrap_or(item);
            let (body, is_prefix) = match path.strip_suffix('*') {
                Some(prefix) => (prefix, true),
                None => (path, false),
            };
            if body.contains('*') {
                return Err(format!("only a trailing * is allowed in {item:?}"));
            }
            if is_prefix {
                allow.prefixes.push(body.to_string());
            } else {
                allow.exact.push(body.to_string());
            }
        }
        Ok(allow)
    }

    /// Whether `path` (a request path) is open.
    pub fn matches(&self, path: &str) -> bool {
        let path = path.strip_prefix('/').unwrap_or(path);
        self.exact.iter().any(|p| p == path) || self.prefixes.iter().any(|p| path.starts_with(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_opens_the_health_paths_only() {
        let items: Vec<&str> = DEFAULT_ALWAYS_ALLOW_PATHS.split(',').collect();
        let a = AlwaysAllow::parse(&items).unwrap();
        for open in ["/healthz", "/readyz", "/livez"] {
            assert!(a.matches(open), "{open}");
        }
        for closed in ["/metrics", "/healthz/ping", "/", "/livezz", "/readyz/"] {
            assert!(!a.matches(closed), "{closed}");
        }
    }

    #[test]
    fn prefixes_and_root() {
        let a = AlwaysAllow::parse(&["healthz*", "/", "/debug/*"]).unwrap();
        assert!(a.matches("/healthz"));
        assert!(a.matches("/healthz/ping"));
        assert!(a.matches("/"));
        assert!(a.matches("/debug/pprof"));
        assert!(!a.matches("/debug"));
        assert!(!a.matches("/metrics"));
        // `*` alone opens everything.
        assert!(AlwaysAllow::parse(&["*"]).unwrap().matches("/metrics"));
    }

    #[test]
    fn empty_items_open_nothing() {
        let a = AlwaysAllow::parse(&[""]).unwrap();
        assert!(!a.matches("/healthz"));
        assert!(!a.matches("/"));
    }

    #[test]
    fn inner_stars_are_refused() {
        for bad in ["/he*lthz", "/a/*/b", "/x**"] {
            let e = AlwaysAllow::parse(&[bad]).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }
}
