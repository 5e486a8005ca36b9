//! The cluster's own client-certificate settings: the ConfigMap
//! `kube-system/extension-apiserver-authentication` the API server publishes (its client CA and
//! its front-proxy settings), read at start and watched, as Kubernetes' delegating authenticator
//! does when the flags do not give them.

use std::collections::BTreeMap;

use super::authority::Authority;
use super::front_proxy::HeaderNames;
use super::{FrontProxy, Sources};

/// The ConfigMap's namespace.
pub const NAMESPACE: &str = "kube-system";
/// The ConfigMap's name.
pub const NAME: &str = "extension-apiserver-authentication";

/// What the ConfigMap's data gives; a key that is set but unusable is an error naming it.
pub fn sources_from(data: &BTreeMap<String, String>) -> Result<Sources, String> {
    let source = |key: &str| format!("configmap {NAMESPACE}/{NAME} key {key}");
    let client_ca = match data.get("client-ca-file").filter(|v| !v.trim().is_empty()) {
        Some(pem) => Some(Authority::from_pem(
            pem.as_bytes(),
            &source("client-ca-file"),
        )?),
        None => None,
    };
    let front_proxy = match data
        .get("requestheader-client-ca-file")
        .filter(|v| !v.trim().is_empty())
    {
        Some(pem) => {
            let authority =
                Authority::from_pem(pem.as_bytes(), &source("requestheader-client-ca-file"))?;
            let list = |key: &str| -> Result<Vec<String>, String> {
                match data.get(key).filter(|v| !v.trim().is_empty()) {
                    None => Ok(Vec::new()),
                    Some(json) => serde_json::from_str::<Vec<String>>(json)
                        .map_err(|e| format!("{}: not a JSON list of strings: {e}", source(key))),
                }
            };
            Some(FrontProxy {
                authority,
                names: HeaderNames {
                    allowed_names: list("requestheader-allowed-names")?,
                    username: list("requestheader-username-headers")?,
                    uid: list("requestheader-uid-headers")?,
                    group: list("requestheader-group-headers")?,
                    extra_prefix: list("requestheader-extra-headers-prefix")?,
                },
            })
        }
        None => None,
    };
    Ok(Sources {
        client_ca,
        front_proxy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_auth::test_pki::Ca;

    #[test]
    fn the_api_servers_settings_are_read() {
        let ca = Ca::new("client-ca");
        let proxy = Ca::new("front-proxy-ca");
        let data: BTreeMap<String, String> = [
            ("client-ca-file", ca.pem()),
            ("requestheader-client-ca-file", proxy.pem()),
            (
                "requestheader-allowed-names",
                r#"["front-proxy-client"]"#.into(),
            ),
            (
                "requestheader-username-headers",
                r#"["X-Remote-User"]"#.into(),
            ),
            (
                "requestheader-group-headers",
                r#"["X-Remote-Group"]"#.into(),
            ),
            (
                "requestheader-extra-headers-prefix",
                r#"["X-Remote-Extra-"]"#.into(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let s = sources_from(&data).unwrap();
        assert!(s.client_ca.is_some());
        let fp = s.front_proxy.unwrap();
        assert_eq!(fp.names.allowed_names, vec!["front-proxy-client"]);
        assert_eq!(fp.names.username, vec!["X-Remote-User"]);
        assert!(fp.names.uid.is_empty());

        let only_client: BTreeMap<String, String> =
            [("client-ca-file".to_string(), ca.pem())].into();
        let s = sources_from(&only_client).unwrap();
        assert!(s.client_ca.is_some() && s.front_proxy.is_none());
        assert!(sources_from(&BTreeMap::new()).unwrap().client_ca.is_none());
    }

    #[test]
    fn unusable_keys_are_named() {
        let proxy = Ca::new("front-proxy-ca");
        let data: BTreeMap<String, String> = [
            ("requestheader-client-ca-file".to_string(), proxy.pem()),
            (
                "requestheader-allowed-names".to_string(),
                "front-proxy-client".to_string(),
            ),
        ]
        .into();
        let e = sources_from(&data).unwrap_err();
        assert!(e.contains("requestheader-allowed-names"), "{e}");
        let data: BTreeMap<String, String> =
            [("client-ca-file".to_string(), "garbage".to_string())].into();
        let e = sources_from(&data).unwrap_err();
        assert!(e.contains("key client-ca-file"), "{e}");
    }
}
