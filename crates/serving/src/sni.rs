//! `--tls-sni-cert-key`: more serving certificates, chosen by the name a client asks for (TLS
//! SNI), as Kubernetes servers: `cert,key[:name1,name2]`; without names, the certificate's DNS
//! names and common name. An exact name beats a wildcard (`*.example.com`, one label), a named
//! pattern beats a name read from the certificate; no match, or no SNI: the default
//! certificate. Each pair is read again when its files change.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::reload::{ReloadingCert, CHECK_EVERY};

/// One `--tls-sni-cert-key` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SniCert {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
    /// Name patterns given after `:`; empty: read from the certificate.
    pub names: Vec<String>,
}

/// Parses `cert,key[:name,…]`.
pub fn parse_sni_cert_key(value: &str) -> Result<SniCert, String> {
    let (files, names) = match value.split_once(':') {
        Some((files, names)) => (files, names),
        None => (value, ""),
    };
    let (cert, key) = files
        .split_once(',')
        .filter(|(c, k)| !c.trim().is_empty() && !k.trim().is_empty() && !k.contains(','))
        .ok_or("expected certfile,keyfile[:name1,name2]")?;
    let names = names
        .split(',')
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .collect();
    Ok(SniCert {
        cert: cert.trim().into(),
        key: key.trim().into(),
        names,
    })
}

/// Chooses a certificate by SNI among the named ones, else the default.
pub struct SniResolver {
    /// (pattern, explicit, certificate) in flag order.
    named: Vec<(String, bool, Arc<ReloadingCert>)>,
    default: Arc<dyn ResolvesServerCert>,
}

impl std::fmt::Debug for SniResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SniResolver")
            .field(
                "names",
                &self.named.iter().map(|n| &n.0).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl SniResolver {
    /// Loads every pair (errors name `--tls-sni-cert-key` and the file) over `default`.
    pub fn load(
        certs: &[SniCert],
        default: Arc<dyn ResolvesServerCert>,
        provider: Arc<CryptoProvider>,
    ) -> anyhow::Result<SniResolver> {
        let flags = ("--tls-sni-cert-key", "--tls-sni-cert-key");
        let mut named = Vec::new();
        for c in certs {
            let reloading = Arc::new(ReloadingCert::load(
                &c.cert,
                &c.key,
                flags,
                provider.clone(),
                CHECK_EVERY,
            )?);
            if c.names.is_empty() {
                let leaf = reloading.current();
                let names = leaf
                    .cert
                    .first()
                    .map(|der| certificate_names(der.as_ref()))
                    .unwrap_or_default();
                if names.is_empty() {
                    anyhow::bail!(
                        "--tls-sni-cert-key {}: the certificate names no host; give the names after ':'",
                        c.cert.display()
                    );
                }
                named.extend(names.into_iter().map(|n| (n, false, reloading.clone())));
            } else {
                named.extend(c.names.iter().map(|n| (n.clone(), true, reloading.clone())));
            }
        }
        Ok(SniResolver { named, default })
    }

    /// The certificate for `server_name`, if a pattern matches it.
    fn choose(&self, server_name: &str) -> Option<Arc<CertifiedKey>> {
        let name = server_name.to_ascii_lowercase();
        let wildcard = name.split_once('.').map(|(_, rest)| format!("*.{rest}"));
        // Explicit exact, extracted exact, explicit wildcard, extracted wildcard.
        let order = [
            (Some(name.as_str()), true),
            (Some(name.as_str()), false),
            (wildcard.as_deref(), true),
            (wildcard.as_deref(), false),
        ];
        order.iter().find_map(|(pattern, explicit)| {
            let pattern = (*pattern)?;
            self.named
                .iter()
                .find(|(p, e, _)| p == pattern && e == explicit)
                .map(|(_, _, c)| c.current())
        })
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(chosen) = hello.server_name().and_then(|n| self.choose(n)) {
            return Some(chosen);
        }
        self.default.resolve(hello)
    }
}

/// The DNS names and common name of a certificate, lower-cased.
pub fn certificate_names(der: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let mut names: Vec<String> = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => {
                        Some(d.to_ascii_lowercase())
                    }
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(cn) = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|c| c.as_str().ok())
    {
        let cn = cn.to_ascii_lowercase();
        if !names.contains(&cn) {
            names.push(cn);
        }
    }
    names
}

/// A fixed certificate as a resolver (the self-signed default under SNI certificates).
#[derive(Debug)]
pub struct Fixed(pub Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(
            parse_sni_cert_key("/a.crt,/a.key").unwrap(),
            SniCert {
                cert: "/a.crt".into(),
                key: "/a.key".into(),
                names: vec![]
            }
        );
        assert_eq!(
            parse_sni_cert_key("/a.crt,/a.key:Foo.example.com,*.bar.io")
                .unwrap()
                .names,
            vec!["foo.example.com", "*.bar.io"]
        );
        for bad in ["/a.crt", ",/a.key", "/a.crt,", "/a,/b,/c"] {
            assert!(parse_sni_cert_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_are_read_from_the_certificate() {
        use rustls::pki_types::pem::PemObject;
        let pair =
            crate::self_signed::generate(&["api.example.com".into(), "10.0.0.1".into()]).unwrap();
        let der =
            rustls::pki_types::CertificateDer::from_pem_slice(pair.cert_pem.as_bytes()).unwrap();
        let names = certificate_names(der.as_ref());
        assert!(names.contains(&"api.example.com".to_string()), "{names:?}");
        assert!(
            !names.iter().any(|n| n == "10.0.0.1"),
            "IPs are not names: {names:?}"
        );
    }
}
