//! The environment's proxy for every Kubernetes client, as client-go does it: a kubeconfig's own
//! `proxy-url` wins; otherwise `HTTPS_PROXY` (or `HTTP_PROXY` for an `http://` server), either
//! case, unless the server's host is in `NO_PROXY` (Deckhouse lists the cluster's own addresses
//! there, so the in-cluster client stays direct while a parent cluster is reached through the
//! proxy). kube-rs alone takes `HTTPS_PROXY` for every kubeconfig server and matches `NO_PROXY`
//! against the proxy's own address, not the server's; [`with_env_proxy`] replaces that choice.

use http::Uri;
use stratus_runtime::proxy_env::ProxyEnv;

/// The proxy a client of `server` uses: `explicit` (the kubeconfig's `proxy-url`) when set,
/// else the environment's proxy for `server`, else none.
pub fn proxy_for(server: &Uri, explicit: Option<&Uri>, env: &ProxyEnv) -> Option<Uri> {
    match explicit {
        Some(url) => Some(url.clone()),
        None => env.proxy_url(server),
    }
}

/// `config` with its `proxy_url` chosen by [`proxy_for`]. A `proxy_url` equal to a proxy
/// variable's value is taken as kube-rs's own pick from the environment, not as the
/// kubeconfig's, and chosen again with `NO_PROXY` matched against the server.
pub fn with_env_proxy(mut config: kube::Config, env: &ProxyEnv) -> kube::Config {
    let explicit = config
        .proxy_url
        .take()
        .filter(|url| !env.is_variable_value(url));
    config.proxy_url = proxy_for(&config.cluster_url, explicit.as_ref(), env);
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(https: &str, no: &str) -> ProxyEnv {
        let (https, no) = (https.to_string(), no.to_string());
        ProxyEnv::from_lookup(move |name| match name {
            "https_proxy" => Some(https.clone()),
            "no_proxy" => Some(no.clone()),
            _ => None,
        })
        .unwrap()
    }

    fn config(server: &str, proxy: Option<&str>) -> kube::Config {
        let mut c = kube::Config::new(server.parse().unwrap());
        c.proxy_url = proxy.map(|p| p.parse().unwrap());
        c
    }

    fn chosen(c: kube::Config, e: &ProxyEnv) -> Option<String> {
        with_env_proxy(c, e).proxy_url.map(|u| u.to_string())
    }

    #[test]
    fn the_server_decides_and_the_kubeconfig_wins() {
        let e = env(
            "http://u:p@proxy:3128",
            "10.0.0.0/8,.cluster.local,127.0.0.2",
        );
        // The parent cluster: through the proxy, credentials kept for Proxy-Authorization.
        assert_eq!(
            chosen(config("https://parent.example:6443", None), &e).as_deref(),
            Some("http://u:p@proxy:3128/")
        );
        // kube-rs's own pick from HTTPS_PROXY is chosen again against NO_PROXY.
        for server in [
            "https://10.96.0.1",
            "https://kubernetes.default.svc.cluster.local",
            "https://127.0.0.2:6443",
        ] {
            assert_eq!(
                chosen(config(server, Some("http://u:p@proxy:3128")), &e),
                None,
                "{server}"
            );
        }
        // A kubeconfig's own proxy-url wins, even for a host in NO_PROXY.
        assert_eq!(
            chosen(config("https://10.96.0.1", Some("http://other:8080")), &e).as_deref(),
            Some("http://other:8080/")
        );
        // Nothing set: direct.
        assert_eq!(
            chosen(config("https://parent.example", None), &ProxyEnv::none()),
            None
        );
    }
}
