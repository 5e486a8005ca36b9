//! The proxy settings of the environment, as every Stratus cloud client reads them: `HTTP_PROXY`,
//! `HTTPS_PROXY`, `ALL_PROXY` and `NO_PROXY`, upper or lower case (upper case first), with
//! curl's and Go's meaning: `HTTPS_PROXY` for `https://` targets, `HTTP_PROXY` for `http://`
//! ones, `NO_PROXY` a comma-separated list of hosts, domains (`.example.com` or `example.com`
//! match the domain and its subdomains), IP addresses, CIDR blocks, `host:port` (that port
//! only, as Go reads it), or `*` for every target.
//! Unlike hyper-util's matcher alone, a value that is not a usable proxy URL is refused by name
//! instead of being silently ignored; the value is never quoted (it may hold a password).

use http::Uri;
use hyper_util::client::proxy::matcher::{Intercept, Matcher};

/// The variables read, each with its lower-case spelling.
const VARIABLES: [(&str, &str); 4] = [
    ("HTTP_PROXY", "http_proxy"),
    ("HTTPS_PROXY", "https_proxy"),
    ("ALL_PROXY", "all_proxy"),
    ("NO_PROXY", "no_proxy"),
];

/// A proxy variable that is not a usable proxy URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {reason}")]
pub struct ProxyEnvError {
    /// The variable, as spelt in the environment.
    pub variable: String,
    /// What is wrong (never the value).
    pub reason: String,
}

/// Which proxy, if any, each target goes through.
#[derive(Debug, Clone)]
pub struct ProxyEnv {
    matcher: std::sync::Arc<Matcher>,
    /// The raw `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` values (empty when unset).
    raw: [String; 3],
    /// `NO_PROXY`'s `host:port` entries (the matcher knows hosts only).
    no_ports: Vec<(String, u16)>,
}

impl ProxyEnv {
    /// The settings of this process's environment.
    pub fn from_env() -> Result<ProxyEnv, ProxyEnvError> {
        ProxyEnv::from_lookup(|name| std::env::var(name).ok())
    }

    /// The settings `lookup` gives (a variable's value by name); pure, for tests.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<ProxyEnv, ProxyEnvError> {
        let mut values: [(String, String); 4] = Default::default();
        for (slot, (upper, lower)) in values.iter_mut().zip(VARIABLES) {
            let found = [upper, lower].into_iter().find_map(|name| {
                lookup(name)
                    .filter(|v| !v.trim().is_empty())
                    .map(|v| (name.to_string(), v.trim().to_string()))
            });
            if let Some(found) = found {
                *slot = found;
            }
        }
        let [(http_name, http), (https_name, https), (all_name, all), (_, no)] = values;
        for (name, value) in [
            (&http_name, &http),
            (&https_name, &https),
            (&all_name, &all),
        ] {
            if !value.is_empty() {
                check_proxy_url(value).map_err(|reason| ProxyEnvError {
                    variable: name.clone(),
                    reason,
                })?;
            }
        }
        let (no_ports, no_hosts) = split_no_proxy(&no);
        let matcher = Matcher::builder()
            .http(http.clone())
            .https(https.clone())
            .all(all.clone())
            .no(no_hosts)
            .build();
        Ok(ProxyEnv {
            matcher: std::sync::Arc::new(matcher),
            raw: [http, https, all],
            no_ports,
        })
    }

    /// No proxy at all (nothing set).
    pub fn none() -> ProxyEnv {
        ProxyEnv {
            matcher: std::sync::Arc::new(Matcher::builder().build()),
            raw: Default::default(),
            no_ports: Vec::new(),
        }
    }

    /// Whether any proxy variable is set (some target may be proxied).
    pub fn is_set(&self) -> bool {
        self.raw.iter().any(|v| !v.is_empty())
    }

    /// Whether `url` is the value of one of the proxy variables (so a client that read the
    /// variable itself, like kube-rs, did not get it from its own settings).
    pub fn is_variable_value(&self, url: &Uri) -> bool {
        self.raw
            .iter()
            .filter(|raw| !raw.is_empty())
            .any(|raw| raw.parse::<Uri>().ok().as_ref() == Some(url))
    }

    /// The proxy `target` goes through: `None` for a direct connection (no proxy for its
    /// scheme, or its host is in `NO_PROXY`).
    pub fn intercept(&self, target: &Uri) -> Option<Intercept> {
        let host = target.host()?.trim_start_matches('[').trim_end_matches(']');
        let port = target
            .port_u16()
            .unwrap_or(if target.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        if self
            .no_ports
            .iter()
            .any(|(h, p)| *p == port && h.eq_ignore_ascii_case(host))
        {
            return None;
        }
        self.matcher.intercept(target)
    }

    /// The proxy URL for `target` as its variable spells it, credentials included (the form
    /// kube-rs's `proxy_url` takes), or `None` for a direct connection.
    pub fn proxy_url(&self, target: &Uri) -> Option<Uri> {
        let intercept = self.intercept(target)?;
        let [http, https, all] = &self.raw;
        let own = if target.scheme_str() == Some("https") {
            https
        } else {
            http
        };
        let raw = if own.is_empty() { all } else { own };
        let raw = if raw.contains("://") {
            raw.clone()
        } else {
            format!("http://{raw}")
        };
        // The intercept keeps the credentials apart as a header; the raw value has them.
        Some(raw.parse().unwrap_or_else(|_| intercept.uri().clone()))
    }
}

/// `NO_PROXY` split into its `host:port` entries and the rest (hosts, domains, addresses, CIDR
/// blocks, `*`), rejoined for the matcher.
fn split_no_proxy(no: &str) -> (Vec<(String, u16)>, String) {
    let mut ports = Vec::new();
    let mut rest = Vec::new();
    for entry in no.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let with_port = entry.rsplit_once(':').and_then(|(host, port)| {
            let bracketed = host.starts_with('[') && host.ends_with(']');
            let port = port.parse::<u16>().ok()?;
            (bracketed || !host.contains(':')).then(|| {
                let host = host.trim_start_matches('[').trim_end_matches(']');
                (host.to_string(), port)
            })
        });
        match with_port {
            Some(hp) => ports.push(hp),
            None => rest.push(entry),
        }
    }
    (ports, rest.join(","))
}

/// Whether `value` is a proxy URL hyper-util can use: `http://` (or no scheme, meaning
/// `http://`) with a host; an `https://` proxy is refused (TLS to the proxy is not supported by
/// every client here), as is any other scheme.
pub fn check_proxy_url(value: &str) -> Result<(), String> {
    let uri: Uri = value
        .parse()
        .map_err(|_| "not a URL (expected http://[user:password@]host:port)".to_string())?;
    match uri.scheme_str() {
        None | Some("http") => {}
        Some("https") => {
            return Err("an https:// proxy is not supported; use http:// (requests to https targets are still tunnelled with CONNECT and encrypted end to end)".into())
        }
        Some(other) => return Err(format!("unsupported proxy scheme {other:?}; use http://")),
    }
    match uri.host() {
        Some(h) if !h.is_empty() => Ok(()),
        _ => Err("no host (expected http://[user:password@]host:port)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    fn proxied(e: &ProxyEnv, target: &str) -> Option<String> {
        e.intercept(&target.parse().unwrap())
            .map(|i| i.uri().to_string())
    }

    #[test]
    fn each_scheme_takes_its_variable_and_no_proxy_bypasses() {
        let e = ProxyEnv::from_lookup(env(&[
            ("HTTP_PROXY", "http://p1:3128"),
            ("https_proxy", "p2:8080"),
            ("no_proxy", "10.0.0.0/8,.cluster.local,api.internal"),
        ]))
        .unwrap();
        assert!(e.is_set());
        assert_eq!(
            proxied(&e, "http://ec2.example.com/").as_deref(),
            Some("http://p1:3128/")
        );
        assert_eq!(
            proxied(&e, "https://ec2.example.com/").as_deref(),
            Some("http://p2:8080/")
        );
        assert_eq!(proxied(&e, "https://10.1.2.3:6443/"), None);
        assert_eq!(
            proxied(&e, "https://kubernetes.default.svc.cluster.local/"),
            None
        );
        assert_eq!(proxied(&e, "https://api.internal/"), None);
        assert_eq!(proxied(&e, "https://x.api.internal/"), None);
        assert!(proxied(&e, "https://internal/").is_some());
    }

    #[test]
    fn no_proxy_host_port_entries_bypass_that_port_only() {
        let e = ProxyEnv::from_lookup(env(&[
            ("HTTPS_PROXY", "http://p:1"),
            ("NO_PROXY", "127.0.0.1:6443, [::1]:8443,api.example:443,::1"),
        ]))
        .unwrap();
        assert_eq!(proxied(&e, "https://127.0.0.1:6443/"), None);
        assert!(proxied(&e, "https://127.0.0.1:7443/").is_some());
        assert_eq!(proxied(&e, "https://[::1]:8443/"), None);
        assert_eq!(proxied(&e, "https://api.example/"), None);
        assert!(proxied(&e, "https://api.example:8443/").is_some());
    }

    #[test]
    fn upper_case_wins_and_all_proxy_is_the_fallback() {
        let e = ProxyEnv::from_lookup(env(&[
            ("HTTPS_PROXY", "http://upper:1"),
            ("https_proxy", "http://lower:1"),
            ("ALL_PROXY", "http://all:2"),
        ]))
        .unwrap();
        assert_eq!(
            proxied(&e, "https://a/").as_deref(),
            Some("http://upper:1/")
        );
        assert_eq!(proxied(&e, "http://a/").as_deref(), Some("http://all:2/"));
    }

    #[test]
    fn nothing_set_or_star_means_direct() {
        let e = ProxyEnv::from_lookup(env(&[])).unwrap();
        assert!(!e.is_set());
        assert_eq!(proxied(&e, "https://a/"), None);
        let e = ProxyEnv::from_lookup(env(&[("HTTPS_PROXY", "http://p:1"), ("NO_PROXY", "*")]))
            .unwrap();
        assert_eq!(proxied(&e, "https://a/"), None);
    }

    #[test]
    fn credentials_become_basic_auth_and_stay_in_the_raw_url() {
        let raw = "http://user:p%40ss@p:3128";
        let e = ProxyEnv::from_lookup(env(&[("HTTPS_PROXY", raw)])).unwrap();
        let target = "https://a/".parse().unwrap();
        let i = e.intercept(&target).unwrap();
        assert_eq!(i.basic_auth().unwrap(), "Basic dXNlcjpwQHNz");
        assert_eq!(
            e.proxy_url(&target).unwrap().to_string(),
            "http://user:p%40ss@p:3128/"
        );
    }

    #[test]
    fn bad_values_are_refused_by_name_without_the_value() {
        for (value, reason) in [
            ("http://user:secret@", "not a URL"),
            ("socks9://secret:1", "unsupported proxy scheme"),
            ("https://secret:1", "https:// proxy is not supported"),
            ("http://se cret", "not a URL"),
        ] {
            let e = ProxyEnv::from_lookup(env(&[("https_proxy", value)])).unwrap_err();
            assert_eq!(e.variable, "https_proxy");
            assert!(e.reason.contains(reason), "{value}: {e}");
            assert!(!e.to_string().contains("secret"), "{e}");
        }
    }
}
