//! The rustls server configuration (aws-lc-rs provider, HTTP/2 and HTTP/1.1): from the certificate and key
//! files given or a `tls.crt`/`tls.key` directory (read again when they change, see
//! [`crate::reload`]), or from a self-signed certificate.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::reload::{ReloadingCert, CHECK_EVERY};
use crate::self_signed;
use crate::sni::{Fixed, SniResolver};
use crate::tls_policy::TlsPolicy;

/// Where the serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// `--tls-cert-file` (PEM, the chain after the leaf) and `--tls-private-key-file` (PEM).
    Files {
        /// PEM certificate chain.
        cert: PathBuf,
        /// PEM private key.
        key: PathBuf,
    },
    /// `tls.crt` and `tls.key` (PEM) in `dir`, the controller-runtime webhook layout; errors name
    /// `flag` (e.g. `--webhook-cert-dir`).
    PairDir {
        /// The directory.
        dir: PathBuf,
        /// The flag that named it.
        flag: &'static str,
    },
    /// Generated for `hosts`; kept in `cert_dir` when given (see [`self_signed::load_or_generate`]).
    SelfSigned {
        /// Where to keep it (memory when unset).
        cert_dir: Option<PathBuf>,
        /// Names and addresses it is valid for.
        hosts: Vec<String>,
    },
}

/// The server configuration for `source` with rustls's safe defaults.
pub fn server_config(source: &TlsSource) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    server_config_with(source, &TlsPolicy::default())
}

/// The server configuration for `source` under `policy` (`--tls-min-version`,
/// `--tls-cipher-suites`).
pub fn server_config_with(
    source: &TlsSource,
    policy: &TlsPolicy,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(policy.provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(policy.versions())
        .context("TLS protocol versions")?;
    let builder = if policy.client_certificates {
        builder.with_client_cert_verifier(Arc::new(
            stratus_runtime::any_certificate::AnyClientCertificate::new(provider.clone()),
        ))
    } else {
        builder.with_no_client_auth()
    };
    let files = match source {
        TlsSource::Files { cert, key } => Some((cert.clone(), key.clone(), FILE_FLAGS)),
        TlsSource::PairDir { dir, flag } => Some((
            dir.join(PAIR_DIR_CERT),
            dir.join(PAIR_DIR_KEY),
            (*flag, *flag),
        )),
        TlsSource::SelfSigned { .. } => None,
    };
    let mut config = match (files, policy.sni_certs.is_empty()) {
        (Some((cert, key, flags)), true) => {
            let resolver = ReloadingCert::load(&cert, &key, flags, provider, CHECK_EVERY)?;
            builder.with_cert_resolver(Arc::new(resolver))
        }
        (None, true) => {
            let (chain, key) = self_signed_pair(source)?;
            builder
                .with_single_cert(chain, key)
                .context("the serving certificate does not match its private key")?
        }
        (files, false) => {
            let default: Arc<dyn rustls::server::ResolvesServerCert> = match files {
                Some((cert, key, flags)) => Arc::new(ReloadingCert::load(
                    &cert,
                    &key,
                    flags,
                    provider.clone(),
                    CHECK_EVERY,
                )?),
                None => {
                    let (chain, key) = self_signed_pair(source)?;
                    let certified = rustls::sign::CertifiedKey::from_der(chain, key, &provider)
                        .context("the serving certificate does not match its private key")?;
                    Arc::new(Fixed(Arc::new(certified)))
                }
            };
            let sni = SniResolver::load(&policy.sni_certs, default, provider)?;
            builder.with_cert_resolver(Arc::new(sni))
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Reads the certificate and key `source` names (files or a pair directory) and checks they
/// belong together, without serving: what a binary checks before it opens any port. A self-signed
/// source has nothing to check.
pub fn check(source: &TlsSource) -> anyhow::Result<()> {
    let (cert, key, flags) = match source {
        TlsSource::Files { cert, key } => (cert.clone(), key.clone(), FILE_FLAGS),
        TlsSource::PairDir { dir, flag } => (
            dir.join(PAIR_DIR_CERT),
            dir.join(PAIR_DIR_KEY),
            (*flag, *flag),
        ),
        TlsSource::SelfSigned { .. } => return Ok(()),
    };
    let (chain, key) = load_files(&cert, &key, flags)?;
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    rustls::sign::CertifiedKey::from_der(chain, key, &provider)
        .map(drop)
        .map_err(|e| anyhow::anyhow!("the serving certificate does not match its private key: {e}"))
}

/// The certificate and key of a [`TlsSource::SelfSigned`].
fn self_signed_pair(
    source: &TlsSource,
) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    match source {
        TlsSource::SelfSigned {
            cert_dir: Some(dir),
            hosts,
        } => {
            let (cert, key) = self_signed::load_or_generate(dir, hosts)?;
            load_files(&cert, &key, FILE_FLAGS)
        }
        TlsSource::SelfSigned {
            cert_dir: None,
            hosts,
        } => {
            let generated = self_signed::generate(hosts)?;
            tracing::info!(hosts = ?hosts, "serving with a self-signed certificate kept in memory");
            Ok((
                vec![CertificateDer::from(generated.cert_der)],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(generated.key_der)),
            ))
        }
        _ => anyhow::bail!("not a self-signed source"),
    }
}

/// The flags naming [`TlsSource::Files`]' certificate and key, as errors name them.
const FILE_FLAGS: (&str, &str) = ("--tls-cert-file", "--tls-private-key-file");

/// The certificate file of a [`TlsSource::PairDir`].
pub const PAIR_DIR_CERT: &str = "tls.crt";
/// The private key file of a [`TlsSource::PairDir`].
pub const PAIR_DIR_KEY: &str = "tls.key";

pub(crate) fn load_files(
    cert: &Path,
    key: &Path,
    (cert_flag, key_flag): (&str, &str),
) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            anyhow::anyhow!(
                "{cert_flag} {}: cannot read a PEM certificate: {}",
                cert.display(),
                stratus_runtime::redact::pem(&e)
            )
        })?;
    anyhow::ensure!(
        !chain.is_empty(),
        "{cert_flag} {}: no PEM certificate in it",
        cert.display()
    );
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        anyhow::anyhow!(
            "{key_flag} {}: cannot read a PEM private key: {}",
            key.display(),
            stratus_runtime::redact::pem(&e)
        )
    })?;
    Ok((chain, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_memory_self_signed_config() {
        let config = server_config(&TlsSource::SelfSigned {
            cert_dir: None,
            hosts: vec!["localhost".into(), "127.0.0.1".into()],
        })
        .unwrap();
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }

    /// Key files with secret material in the wrong shape: the error names the flag, the file and
    /// the problem, never a line of it.
    #[test]
    fn a_bad_pem_file_is_named_without_its_content() {
        const SECRET: &str = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7SECRET";
        let dir = std::env::temp_dir().join(format!("stratus-serving-pem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = self_signed::generate(&["localhost".to_string()]).unwrap();
        let cert = dir.join("tls.crt");
        std::fs::write(&cert, &good.cert_pem).unwrap();
        let keys = [
            format!("-----BEGIN PRIVATE KEY-----\n{SECRET}\n"),
            format!("-----BEGIN PRIVATE KEY-----\n{SECRET}!!\n-----END PRIVATE KEY-----\n"),
            format!("-----BEGIN {SECRET}\n{SECRET}\n"),
            format!("{SECRET}\n"),
            format!("{SECRET}{}", "A".repeat(10 << 20)),
        ];
        for (i, text) in keys.iter().enumerate() {
            let key = dir.join(format!("tls-{i}.key"));
            std::fs::write(&key, text).unwrap();
            for (cert, key) in [(&cert, &key), (&key, &key)] {
                let source = TlsSource::Files {
                    cert: cert.clone(),
                    key: key.clone(),
                };
                let e = format!("{:#}", server_config(&source).unwrap_err());
                assert!(
                    !e.contains("SECRET") && !e.contains("MIIEvQ"),
                    "case {i}: {e}"
                );
                assert!(!e.contains("[45, 45"), "case {i}: {e}");
                assert!(e.len() < 400, "case {i}: {e}");
                assert!(e.contains(&key.display().to_string()), "case {i}: {e}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unreadable_or_mismatched_files_are_named() {
        let missing = TlsSource::Files {
            cert: "/nonexistent/tls.crt".into(),
            key: "/nonexistent/tls.key".into(),
        };
        let e = format!("{:#}", server_config(&missing).unwrap_err());
        assert!(e.contains("--tls-cert-file /nonexistent/tls.crt"), "{e}");
        let missing_dir = TlsSource::PairDir {
            dir: "/nonexistent".into(),
            flag: "--webhook-cert-dir",
        };
        let e = format!("{:#}", server_config(&missing_dir).unwrap_err());
        assert!(e.contains("--webhook-cert-dir /nonexistent/tls.crt"), "{e}");

        let dir = std::env::temp_dir().join(format!("stratus-serving-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let hosts = vec!["localhost".to_string()];
        let (a, b) = (
            self_signed::generate(&hosts).unwrap(),
            self_signed::generate(&hosts).unwrap(),
        );
        let (cert, key) = (dir.join("a.crt"), dir.join("b.key"));
        std::fs::write(&cert, &a.cert_pem).unwrap();
        std::fs::write(&key, b.key_pem).unwrap();
        let e = format!(
            "{:#}",
            server_config(&TlsSource::Files { cert, key }).unwrap_err()
        );
        assert!(e.contains("does not match"), "{e}");
        std::fs::write(dir.join(PAIR_DIR_CERT), &a.cert_pem).unwrap();
        std::fs::write(dir.join(PAIR_DIR_KEY), &a.key_pem).unwrap();
        server_config(&TlsSource::PairDir {
            dir: dir.clone(),
            flag: "--webhook-cert-dir",
        })
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
