//! Front-proxy (request header) authentication: a proxy that presents a client certificate of the
//! request-header authority, with an allowed common name, vouches for the user named in its
//! headers (`--requestheader-*`, as Kubernetes' aggregation layer).

use std::collections::BTreeMap;

use http::HeaderMap;

use crate::authn::User;

/// Which headers carry the user, and which proxies are trusted to set them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderNames {
    /// Common names a proxy certificate may have; empty: any the authority signed.
    pub allowed_names: Vec<String>,
    /// Headers naming the user; the first non-empty one wins.
    pub username: Vec<String>,
    /// Headers naming the user's UID; the first non-empty one wins.
    pub uid: Vec<String>,
    /// Headers naming groups; every value of every one counts.
    pub group: Vec<String>,
    /// Prefixes of headers carrying extra attributes (key: the rest of the name).
    pub extra_prefix: Vec<String>,
}

impl Default for HeaderNames {
    /// Upstream's defaults: `X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-`, no UID header.
    fn default() -> Self {
        HeaderNames {
            allowed_names: Vec::new(),
            username: vec!["x-remote-user".into()],
            uid: Vec::new(),
            group: vec!["x-remote-group".into()],
            extra_prefix: vec!["x-remote-extra-".into()],
        }
    }
}

impl HeaderNames {
    /// Whether a proxy certificate with common name `cn` may vouch for users.
    pub fn allows(&self, cn: Option<&str>) -> bool {
        self.allowed_names.is_empty()
            || cn.is_some_and(|cn| self.allowed_names.iter().any(|a| a == cn))
    }

    /// The user the headers name; `None` when no username header is set (the request is then
    /// not authenticated by the proxy).
    pub fn user(&self, headers: &HeaderMap) -> Option<User> {
        let name = first_value(headers, &self.username)?;
        let uid = first_value(headers, &self.uid).unwrap_or_default();
        let groups = self
            .group
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            let name = name.as_str();
            let Some(key) = self
                .extra_prefix
                .iter()
                .find_map(|p| strip_prefix_ignore_case(name, p))
            else {
                continue;
            };
            let Ok(value) = value.to_str() else { continue };
            extra
                .entry(unescape(key).to_lowercase())
                .or_default()
                .push(value.to_string());
        }
        Some(User {
            name,
            uid,
            groups,
            extra,
        })
    }
}

fn first_value(headers: &HeaderMap, names: &[String]) -> Option<String> {
    names
        .iter()
        .flat_map(|h| headers.get_all(h.as_str()))
        .filter_map(|v| v.to_str().ok())
        .find(|v| !v.is_empty())
        .map(str::to_string)
}

fn strip_prefix_ignore_case<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    (name.len() > prefix.len() && name[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &name[prefix.len()..])
}

/// Percent-decoding of an extra key (`%2F` → `/`), as the proxy escapes keys into header names;
/// a malformed escape is kept as written.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&key[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn users_come_from_the_configured_headers() {
        let names = HeaderNames {
            uid: vec!["X-Remote-Uid".into()],
            ..HeaderNames::default()
        };
        let user = names
            .user(&headers(&[
                ("X-Remote-User", "bob"),
                ("X-Remote-Uid", "42"),
                ("X-Remote-Group", "a"),
                ("X-Remote-Group", "b"),
                ("X-Remote-Extra-Scopes", "read"),
                ("X-Remote-Extra-Scopes", "write"),
                ("x-remote-extra-example.com%2Fkey", "v"),
                ("X-Other", "ignored"),
            ]))
            .unwrap();
        assert_eq!(user.name, "bob");
        assert_eq!(user.uid, "42");
        assert_eq!(user.groups, vec!["a", "b"]);
        assert_eq!(user.extra["scopes"], vec!["read", "write"]);
        assert_eq!(user.extra["example.com/key"], vec!["v"]);
        assert_eq!(user.extra.len(), 2);
    }

    #[test]
    fn no_username_header_names_no_user() {
        let names = HeaderNames::default();
        assert!(names.user(&headers(&[("X-Remote-Group", "a")])).is_none());
        assert!(names
            .user(&headers(&[("X-Remote-User", "")]).clone())
            .is_none());
        let names = HeaderNames {
            username: vec!["X-First".into(), "X-Second".into()],
            ..HeaderNames::default()
        };
        let user = names
            .user(&headers(&[("X-First", ""), ("X-Second", "carol")]))
            .unwrap();
        assert_eq!(user.name, "carol");
    }

    #[test]
    fn allowed_names() {
        let any = HeaderNames::default();
        assert!(any.allows(Some("front-proxy-client")));
        assert!(any.allows(None));
        let some = HeaderNames {
            allowed_names: vec!["front-proxy-client".into()],
            ..HeaderNames::default()
        };
        assert!(some.allows(Some("front-proxy-client")));
        assert!(!some.allows(Some("someone-else")));
        assert!(!some.allows(None));
    }

    #[test]
    fn escapes() {
        assert_eq!(unescape("a%2Fb"), "a/b");
        assert_eq!(unescape("bad%zz"), "bad%zz");
        assert_eq!(unescape("end%2"), "end%2");
    }
}
