//! Client-certificate and front-proxy authentication on a secure port, as Kubernetes' delegating
//! authenticator: a certificate of the client CA names its user (common name, organisations as
//! groups); a certificate of the request-header CA with an allowed common name lets a front proxy
//! name the user in headers. The authorities come from the flags (`--client-ca-file`,
//! `--requestheader-*`) or, for whichever the flags leave out, from the cluster's
//! `kube-system/extension-apiserver-authentication` ConfigMap, watched for changes. The flags'
//! CA files are read again when their contents change (looked at, at most once per
//! [`crate::reload::CHECK_EVERY`], on a request with a certificate), as upstream's dynamic CA
//! content; a file that cannot be used then keeps the previous authority and is logged.

pub mod authority;
pub mod front_proxy;
pub mod lookup;
pub mod test_pki;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher;
use kube::Api;
use rustls::pki_types::CertificateDer;

use crate::authn::User;
use authority::{common_name, user_of, Authority};
use front_proxy::HeaderNames;

/// The client certificates a connection presented (leaf first), as a request extension.
#[derive(Debug, Clone)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// A trusted front proxy: its authority and the headers it sets.
#[derive(Debug, Clone)]
pub struct FrontProxy {
    /// The request-header CA.
    pub authority: Authority,
    /// Allowed proxy names and the user headers.
    pub names: HeaderNames,
}

/// The authorities in force, from one place (the flags or the ConfigMap).
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// Client CA: certificates it signed name their users.
    pub client_ca: Option<Authority>,
    /// Front proxy.
    pub front_proxy: Option<FrontProxy>,
}

/// Whether and how the cluster's ConfigMap is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Lookup {
    /// Not read (`--authentication-skip-lookup`).
    #[default]
    Off,
    /// Read for what the flags leave out; a failed first read stops the start unless tolerated
    /// (`--authentication-tolerate-lookup-failure`).
    InCluster {
        /// Start anyway when the first read fails.
        tolerate_failure: bool,
    },
}

/// What the flags ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientAuthSettings {
    /// `--client-ca-file`.
    pub client_ca_file: Option<PathBuf>,
    /// `--requestheader-client-ca-file`.
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// `--requestheader-allowed-names` and the header flags.
    pub header_names: HeaderNames,
    /// The ConfigMap lookup.
    pub lookup: Lookup,
    /// A client certificate's UID subject attribute names the user's UID (the
    /// `AllowParsingUserUIDFromCertAuth` gate, on by default as upstream).
    pub uid_from_certificates: bool,
}

impl ClientAuthSettings {
    /// Whether clients are asked for certificates at all.
    pub fn wanted(&self) -> bool {
        self.client_ca_file.is_some()
            || self.requestheader_client_ca_file.is_some()
            || self.lookup != Lookup::Off
    }

    /// The authorities the flags name, read now; errors name the flag and file.
    pub fn from_flags(&self) -> Result<Sources, String> {
        let client_ca = self
            .client_ca_file
            .as_deref()
            .map(|p| Authority::from_file(p, "--client-ca-file"))
            .transpose()?;
        let front_proxy = self
            .requestheader_client_ca_file
            .as_deref()
            .map(|p| {
                Authority::from_file(p, "--requestheader-client-ca-file").map(|authority| {
                    FrontProxy {
                        authority,
                        names: self.header_names.clone(),
                    }
                })
            })
            .transpose()?;
        Ok(Sources {
            client_ca,
            front_proxy,
        })
    }
}

/// The flags' CA files as last read, and when they were last looked at.
struct FlagFiles {
    settings: ClientAuthSettings,
    check_every: Duration,
    /// The files' contents when last read (`None`: unreadable) and the time of the last look.
    seen: Mutex<(Vec<Option<Vec<u8>>>, Instant)>,
}

impl FlagFiles {
    fn contents(&self) -> Vec<Option<Vec<u8>>> {
        [
            &self.settings.client_ca_file,
            &self.settings.requestheader_client_ca_file,
        ]
        .iter()
        .filter_map(|p| p.as_ref())
        .map(|p| std::fs::read(p).ok())
        .collect()
    }
}

/// The authenticator of a running server.
pub struct ClientAuth {
    flags: RwLock<Sources>,
    files: Option<FlagFiles>,
    cluster: RwLock<Sources>,
    uid_from_certificates: bool,
}

impl ClientAuth {
    /// An authenticator with fixed authorities (no lookup, no reload).
    pub fn fixed(flags: Sources) -> Arc<ClientAuth> {
        Arc::new(ClientAuth {
            flags: RwLock::new(flags),
            files: None,
            cluster: RwLock::new(Sources::default()),
            uid_from_certificates: true,
        })
    }

    /// The authorities of `settings`' files, read now (errors name the flag and file) and again
    /// when their contents change, looked at most every `check_every`.
    pub fn from_files(
        settings: &ClientAuthSettings,
        check_every: Duration,
    ) -> Result<ClientAuth, String> {
        let files = FlagFiles {
            settings: settings.clone(),
            check_every,
            seen: Mutex::new((Vec::new(), Instant::now())),
        };
        let before = files.contents();
        let flags = settings.from_flags()?;
        *files.seen.lock().unwrap_or_else(|e| e.into_inner()) = (before, Instant::now());
        Ok(ClientAuth {
            flags: RwLock::new(flags),
            files: Some(files),
            cluster: RwLock::new(Sources::default()),
            uid_from_certificates: settings.uid_from_certificates,
        })
    }

    /// Reads the flags' files again when due and changed; an unusable file keeps what was in
    /// force.
    fn refresh_files(&self) {
        let Some(files) = &self.files else { return };
        let mut seen = files.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.1.elapsed() < files.check_every {
            return;
        }
        seen.1 = Instant::now();
        let now = files.contents();
        if now == seen.0 {
            return;
        }
        seen.0 = now;
        match files.settings.from_flags() {
            Ok(sources) => {
                *self.flags.write().unwrap_or_else(|e| e.into_inner()) = sources;
                tracing::info!("client CA files changed: the new authorities are in force");
            }
            Err(e) => tracing::warn!(
                error = e,
                "client CA files changed but cannot be used: the previous authorities stay in force"
            ),
        }
    }

    /// Reads the flags' files and, when asked, the cluster's ConfigMap (then watches it in the
    /// background through `client`). Errors name the flag, the file or the ConfigMap.
    pub async fn start(
        settings: &ClientAuthSettings,
        client: &kube::Client,
    ) -> anyhow::Result<Arc<ClientAuth>> {
        let mut auth = ClientAuth::from_files(settings, crate::reload::CHECK_EVERY)
            .map_err(anyhow::Error::msg)?;
        let Lookup::InCluster { tolerate_failure } = settings.lookup else {
            return Ok(Arc::new(auth));
        };
        {
            let flags = auth.flags.read().unwrap_or_else(|e| e.into_inner());
            if flags.client_ca.is_some() && flags.front_proxy.is_some() {
                // Upstream looks nothing up when the flags give both.
                drop(flags);
                return Ok(Arc::new(auth));
            }
        }
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), lookup::NAMESPACE);
        let first = match api.get_opt(lookup::NAME).await {
            Ok(Some(cm)) => lookup::sources_from(&cm.data.unwrap_or_default())
                .map_err(anyhow::Error::msg)?,
            Ok(None) => Sources::default(),
            Err(e) if tolerate_failure => {
                tracing::warn!(error = %e, "cannot read configmap {}/{}: continuing without the cluster's client CA and front-proxy settings (--authentication-tolerate-lookup-failure)", lookup::NAMESPACE, lookup::NAME);
                Sources::default()
            }
            Err(e) => anyhow::bail!(
                "cannot read configmap {}/{} for the client CA and front-proxy settings: {e} (grant the role extension-apiserver-authentication-reader in {}, or pass --authentication-skip-lookup or --authentication-tolerate-lookup-failure)",
                lookup::NAMESPACE,
                lookup::NAME,
                lookup::NAMESPACE
            ),
        };
        auth.cluster = RwLock::new(first);
        let auth = Arc::new(auth);
        tokio::spawn(watch(api, Arc::downgrade(&auth)));
        Ok(auth)
    }

    /// The user the connection's certificate (and, for a front proxy, the headers) names;
    /// `None` when they name nobody (the request may still carry a bearer token).
    pub fn authenticate(
        &self,
        chain: Option<&PeerCertificates>,
        headers: &http::HeaderMap,
    ) -> Option<User> {
        let chain = chain.map(|c| c.0.as_slice()).filter(|c| !c.is_empty())?;
        self.refresh_files();
        let flags = self.flags.read().unwrap_or_else(|e| e.into_inner());
        let cluster = self.cluster.read().unwrap_or_else(|e| e.into_inner());
        let front_proxy = flags.front_proxy.as_ref().or(cluster.front_proxy.as_ref());
        let client_ca = flags.client_ca.as_ref().or(cluster.client_ca.as_ref());
        if let Some(fp) = front_proxy {
            if fp.authority.verifies(chain).is_ok() {
                let cn = common_name(&chain[0]);
                if !fp.names.allows(cn.as_deref()) {
                    tracing::debug!(
                        cn,
                        "front-proxy certificate of a name not in --requestheader-allowed-names"
                    );
                    return None;
                }
                if let Some(user) = fp.names.user(headers) {
                    return Some(user);
                }
            }
        }
        let ca = client_ca?;
        match ca
            .verifies(chain)
            .and_then(|()| user_of(&chain[0], self.uid_from_certificates))
        {
            Ok(user) => Some(user),
            Err(reason) => {
                tracing::debug!(reason, "client certificate not accepted");
                None
            }
        }
    }

    fn replace_cluster(&self, sources: Sources) {
        *self.cluster.write().unwrap_or_else(|e| e.into_inner()) = sources;
    }
}

/// Keeps the cluster's settings current until the authenticator is dropped; an unusable update
/// keeps the previous settings.
async fn watch(api: Api<ConfigMap>, auth: std::sync::Weak<ClientAuth>) {
    let config = watcher::Config::default().fields(&format!("metadata.name={}", lookup::NAME));
    let mut events = std::pin::pin!(watcher(api, config));
    while let Some(event) = events.next().await {
        let Some(auth) = auth.upgrade() else { return };
        match event {
            Ok(watcher::Event::Apply(cm)) | Ok(watcher::Event::InitApply(cm)) => {
                match lookup::sources_from(&cm.data.unwrap_or_default()) {
                    Ok(sources) => auth.replace_cluster(sources),
                    Err(e) => tracing::warn!(error = e, "ignoring an unusable update"),
                }
            }
            Ok(watcher::Event::Delete(_)) => auth.replace_cluster(Sources::default()),
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "watching the authentication configmap");
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_pki::{client_cert, Ca};

    fn chain(c: Vec<CertificateDer<'static>>) -> PeerCertificates {
        PeerCertificates(Arc::new(c))
    }

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn client_certificates_and_front_proxies() {
        let client_ca = Ca::new("client-ca");
        let proxy_ca = Ca::new("front-proxy-ca");
        let auth = ClientAuth::fixed(Sources {
            client_ca: Some(Authority::from_pem(client_ca.pem().as_bytes(), "client").unwrap()),
            front_proxy: Some(FrontProxy {
                authority: Authority::from_pem(proxy_ca.pem().as_bytes(), "proxy").unwrap(),
                names: HeaderNames {
                    allowed_names: vec!["front-proxy-client".into()],
                    ..HeaderNames::default()
                },
            }),
        });
        let as_user = headers(&[("X-Remote-User", "dave"), ("X-Remote-Group", "ops")]);
        // A client certificate names its user; headers are not trusted from it.
        let alice = chain(client_cert(&client_ca, "alice", &["devs"]));
        let user = auth.authenticate(Some(&alice), &as_user).unwrap();
        assert_eq!(
            (user.name.as_str(), user.groups.as_slice()),
            ("alice", &["devs".to_string()][..])
        );
        // The allowed proxy vouches for the header's user.
        let proxy = chain(client_cert(&proxy_ca, "front-proxy-client", &[]));
        let user = auth.authenticate(Some(&proxy), &as_user).unwrap();
        assert_eq!(user.name, "dave");
        assert_eq!(user.groups, vec!["ops"]);
        // Without a username header the proxy names nobody (it is no client-CA user either).
        assert!(auth.authenticate(Some(&proxy), &headers(&[])).is_none());
        // A proxy name not allowed, a foreign CA, no certificate: nobody.
        let other = chain(client_cert(&proxy_ca, "someone", &[]));
        assert!(auth.authenticate(Some(&other), &as_user).is_none());
        let foreign = chain(client_cert(&Ca::new("evil"), "alice", &[]));
        assert!(auth.authenticate(Some(&foreign), &as_user).is_none());
        assert!(auth.authenticate(None, &as_user).is_none());
    }

    #[test]
    fn a_rotated_client_ca_file_is_read_again_and_a_broken_one_keeps_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("client-ca.crt");
        let (old_ca, new_ca) = (Ca::new("old-ca"), Ca::new("new-ca"));
        std::fs::write(&path, old_ca.pem()).unwrap();
        let settings = ClientAuthSettings {
            client_ca_file: Some(path.clone()),
            ..ClientAuthSettings::default()
        };
        let auth = ClientAuth::from_files(&settings, Duration::ZERO).unwrap();
        let none = headers(&[]);
        let old_user = chain(client_cert(&old_ca, "alice", &[]));
        let new_user = chain(client_cert(&new_ca, "bob", &[]));
        assert!(auth.authenticate(Some(&old_user), &none).is_some());
        assert!(auth.authenticate(Some(&new_user), &none).is_none());
        std::fs::write(&path, new_ca.pem()).unwrap();
        assert_eq!(
            auth.authenticate(Some(&new_user), &none).unwrap().name,
            "bob"
        );
        assert!(auth.authenticate(Some(&old_user), &none).is_none());
        // A half-written file keeps the authority in force.
        std::fs::write(&path, "-----BEGIN CERTIFICATE-----\nnot base64").unwrap();
        assert_eq!(
            auth.authenticate(Some(&new_user), &none).unwrap().name,
            "bob"
        );
    }

    #[test]
    fn certificates_are_asked_for_only_when_some_authority_may_exist() {
        assert!(!ClientAuthSettings::default().wanted());
        assert!(ClientAuthSettings {
            lookup: Lookup::InCluster {
                tolerate_failure: false
            },
            ..ClientAuthSettings::default()
        }
        .wanted());
        assert!(ClientAuthSettings {
            client_ca_file: Some("/ca.crt".into()),
            ..ClientAuthSettings::default()
        }
        .wanted());
    }
}
