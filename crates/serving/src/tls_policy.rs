//! `--tls-cipher-suites` and `--tls-min-version` with upstream's meaning (Go's `crypto/tls`
//! names, as Kubernetes components take them) on rustls. As in Go, the list restricts the
//! TLS 1.2 suites and TLS 1.3's suites are always on. rustls implements only the AEAD suites
//! with ephemeral key exchange, so a listed suite rustls lacks (CBC, RC4, 3DES, static RSA key
//! exchange: Go's "insecure" list and the CBC ones) is accepted and not offered, with a warning;
//! a name Go does not know is refused. `VersionTLS10` and `VersionTLS11` are accepted and mean
//! TLS 1.2 (rustls speaks 1.2 and 1.3 only), with a warning.

use rustls::crypto::CryptoProvider;
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};

/// Go's cipher-suite names (`tls.CipherSuites()` and `tls.InsecureCipherSuites()`), plus the
/// two short ChaCha20 aliases Kubernetes also accepts.
const GO_CIPHER_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_RSA_WITH_RC4_128_SHA",
];

/// TLS 1.3 alone.
static TLS13_ONLY: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// The lowest TLS version served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MinVersion {
    /// `VersionTLS12` (the default), or `VersionTLS10`/`VersionTLS11`, which rustls serves as 1.2.
    #[default]
    Tls12,
    /// `VersionTLS13`.
    Tls13,
}

/// What the TLS flags ask for; the default is rustls's safe defaults (TLS 1.2 and 1.3, every
/// suite it implements).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsPolicy {
    /// `--tls-min-version`.
    pub min_version: MinVersion,
    /// `--tls-cipher-suites` in Go's names, aliases resolved; empty: every suite.
    pub cipher_suites: Vec<String>,
    /// Ask clients for a certificate (optional; which authority it chains to is checked per
    /// request: client-certificate and front-proxy authentication).
    pub client_certificates: bool,
    /// `--tls-sni-cert-key`: certificates chosen by SNI.
    pub sni_certs: Vec<crate::sni::SniCert>,
}

/// `--tls-min-version`: `VersionTLS10` … `VersionTLS13`.
pub fn parse_min_version(value: &str) -> Result<MinVersion, String> {
    match value.trim() {
        "VersionTLS10" | "VersionTLS11" => {
            tracing::warn!(
                "--tls-min-version={}: TLS 1.0 and 1.1 are not served (rustls speaks TLS 1.2 and 1.3); the minimum is TLS 1.2",
                value.trim()
            );
            Ok(MinVersion::Tls12)
        }
        "VersionTLS12" => Ok(MinVersion::Tls12),
        "VersionTLS13" => Ok(MinVersion::Tls13),
        _ => Err(
            "not a TLS version (VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13)".into(),
        ),
    }
}

/// One item of `--tls-cipher-suites` (Go's name), the ChaCha20 aliases resolved.
pub fn parse_cipher_suite(value: &str) -> Result<String, String> {
    let name = value.trim();
    if !GO_CIPHER_SUITES.contains(&name) {
        return Err(format!(
            "unknown cipher suite {name} (Go's names, e.g. TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)"
        ));
    }
    Ok(match name {
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => {
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256".into()
        }
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => {
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256".into()
        }
        other => other.into(),
    })
}

/// The IANA name of a rustls suite (Go uses the IANA names for TLS 1.2 suites).
fn iana_name(suite: &SupportedCipherSuite) -> String {
    format!("{:?}", suite.suite())
}

impl TlsPolicy {
    /// The aws-lc-rs provider restricted to the listed TLS 1.2 suites (TLS 1.3's always kept),
    /// with a warning naming listed suites rustls does not offer.
    pub fn provider(&self) -> CryptoProvider {
        let mut provider = rustls::crypto::aws_lc_rs::default_provider();
        if self.cipher_suites.is_empty() {
            return provider;
        }
        let offered: Vec<String> = provider
            .cipher_suites
            .iter()
            .filter(|s| matches!(s, SupportedCipherSuite::Tls12(_)))
            .map(iana_name)
            .collect();
        let not_offered: Vec<&str> = self
            .cipher_suites
            .iter()
            .filter(|name| !name.starts_with("TLS_AES_") && !name.starts_with("TLS_CHACHA20_"))
            .filter(|name| !offered.contains(name))
            .map(String::as_str)
            .collect();
        if !not_offered.is_empty() {
            tracing::warn!(
                suites = %not_offered.join(","),
                "--tls-cipher-suites: these suites are not offered (rustls implements only AEAD suites with ephemeral key exchange)"
            );
        }
        provider.cipher_suites.retain(|suite| match suite {
            SupportedCipherSuite::Tls13(_) => true,
            SupportedCipherSuite::Tls12(_) => self.cipher_suites.contains(&iana_name(suite)),
        });
        if self.min_version == MinVersion::Tls12
            && !provider
                .cipher_suites
                .iter()
                .any(|s| matches!(s, SupportedCipherSuite::Tls12(_)))
        {
            tracing::warn!(
                "--tls-cipher-suites names no TLS 1.2 suite rustls offers: only TLS 1.3 clients can connect"
            );
        }
        provider
    }

    /// The protocol versions served.
    pub fn versions(&self) -> &'static [&'static SupportedProtocolVersion] {
        match self.min_version {
            MinVersion::Tls12 => rustls::DEFAULT_VERSIONS,
            MinVersion::Tls13 => TLS13_ONLY,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_names_parse_and_unknown_ones_are_named() {
        assert_eq!(
            parse_cipher_suite("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305").unwrap(),
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
        );
        assert_eq!(
            parse_cipher_suite(" TLS_RSA_WITH_AES_128_GCM_SHA256").unwrap(),
            "TLS_RSA_WITH_AES_128_GCM_SHA256"
        );
        let e = parse_cipher_suite("TLS_MADE_UP").unwrap_err();
        assert!(e.contains("TLS_MADE_UP"), "{e}");
        assert_eq!(
            parse_min_version("VersionTLS13").unwrap(),
            MinVersion::Tls13
        );
        assert_eq!(
            parse_min_version("VersionTLS10").unwrap(),
            MinVersion::Tls12
        );
        assert!(parse_min_version("TLS1.3").is_err());
    }

    #[test]
    fn the_list_restricts_tls12_suites_and_keeps_tls13() {
        let every = rustls::crypto::aws_lc_rs::default_provider();
        let policy = TlsPolicy {
            min_version: MinVersion::Tls12,
            cipher_suites: vec![
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".into(),
                "TLS_RSA_WITH_AES_128_CBC_SHA".into(),
            ],
            ..TlsPolicy::default()
        };
        let names: Vec<String> = policy
            .provider()
            .cipher_suites
            .iter()
            .map(iana_name)
            .collect();
        let tls13 = every
            .cipher_suites
            .iter()
            .filter(|s| matches!(s, SupportedCipherSuite::Tls13(_)))
            .count();
        assert_eq!(names.len(), tls13 + 1, "{names:?}");
        assert!(names.contains(&"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".to_string()));
        // Every Go name of a suite rustls offers is spelled as rustls spells it.
        for suite in every.cipher_suites.iter() {
            if matches!(suite, SupportedCipherSuite::Tls12(_)) {
                let name = iana_name(suite);
                assert!(GO_CIPHER_SUITES.contains(&name.as_str()), "{name}");
            }
        }
        assert_eq!(
            TlsPolicy::default().provider().cipher_suites.len(),
            every.cipher_suites.len()
        );
    }
}
