//! A certificate authority that client certificates are checked against (`--client-ca-file`,
//! `--requestheader-client-ca-file` or their ConfigMap keys), and the user a client certificate
//! names: its common name, its organisations as groups (as Kubernetes' x509 authenticator).

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;

use crate::authn::User;

/// One CA bundle, ready to check client certificate chains.
#[derive(Clone)]
pub struct Authority {
    verifier: Arc<dyn ClientCertVerifier>,
    /// Where the bundle came from (a flag or a ConfigMap key), for messages.
    pub source: String,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("source", &self.source)
            .finish()
    }
}

impl Authority {
    /// The authority of the PEM certificates in `pem`; `source` names where they came from.
    /// A bundle with no certificate, or one that does not parse, is refused naming `source`.
    pub fn from_pem(pem: &[u8], source: &str) -> Result<Authority, String> {
        let mut roots = RootCertStore::empty();
        let mut count = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| {
                format!(
                    "{source}: not a PEM certificate bundle ({})",
                    stratus_runtime::redact::pem(&e)
                )
            })?;
            roots
                .add(cert)
                .map_err(|e| format!("{source}: not a CA certificate: {e}"))?;
            count += 1;
        }
        if count == 0 {
            return Err(format!("{source}: no certificate in the bundle"));
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| format!("{source}: {e}"))?;
        Ok(Authority {
            verifier,
            source: source.to_string(),
        })
    }

    /// The authority of the PEM file at `path`; `flag` names the flag that gave it.
    pub fn from_file(path: &std::path::Path, flag: &str) -> Result<Authority, String> {
        let source = format!("{flag} {}", path.display());
        let pem = std::fs::read(path).map_err(|e| format!("{source}: cannot read: {e}"))?;
        Authority::from_pem(&pem, &source)
    }

    /// Whether `chain` (leaf first) is a client certificate issued under this authority and
    /// valid now.
    pub fn verifies(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let (leaf, intermediates) = chain.split_first().ok_or("no client certificate")?;
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(drop)
            .map_err(|e| format!("certificate not verified by {}: {e}", self.source))
    }
}

/// The common name of a certificate, if it has one.
pub fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let name = parsed
        .subject()
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    Some(name)
}

/// The subject attribute Kubernetes reads a user's UID from (`1.3.6.1.4.1.57683.2`).
pub const UID_ATTRIBUTE: &[u64] = &[1, 3, 6, 1, 4, 1, 57683, 2];

/// The user a verified client certificate names: the common name (required), the organisations
/// as groups and, with `uid_attribute` (the `AllowParsingUserUIDFromCertAuth` gate, on by
/// default as upstream), the UID from the subject's [`UID_ATTRIBUTE`] (more than one refuses the
/// certificate, as upstream).
pub fn user_of(cert: &CertificateDer<'_>, uid_attribute: bool) -> Result<User, String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| format!("the client certificate does not parse: {e}"))?;
    let uid = if uid_attribute {
        let oid = x509_parser::der_parser::oid::Oid::from(UID_ATTRIBUTE)
            .map_err(|_| "the UID attribute's OID".to_string())?;
        let uids: Vec<String> = parsed
            .subject()
            .iter_by_oid(&oid)
            .map(|a| {
                a.as_str()
                    .map(str::to_string)
                    .map_err(|_| "the client certificate's UID is not a string".to_string())
            })
            .collect::<Result<_, _>>()?;
        match uids.as_slice() {
            [] => String::new(),
            [one] => one.clone(),
            _ => return Err("the client certificate names more than one UID".into()),
        }
    } else {
        String::new()
    };
    let name = parsed
        .subject()
        .iter_common_name()
        .next()
        .and_then(|n| n.as_str().ok())
        .filter(|n| !n.is_empty())
        .ok_or("the client certificate has no common name")?
        .to_string();
    let groups = parsed
        .subject()
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Ok(User {
        name,
        uid,
        groups,
        ..User::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_auth::test_pki::{client_cert, Ca};

    #[test]
    fn chains_are_checked_against_the_bundle() {
        let ca = Ca::new("client-ca");
        let other = Ca::new("other-ca");
        let authority =
            Authority::from_pem(ca.pem().as_bytes(), "--client-ca-file ca.crt").unwrap();
        let good = client_cert(&ca, "alice", &["team-a"]);
        authority.verifies(&good).unwrap();
        let user = user_of(&good[0], true).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, vec!["team-a"]);
        let foreign = client_cert(&other, "mallory", &[]);
        let e = authority.verifies(&foreign).unwrap_err();
        assert!(e.contains("--client-ca-file ca.crt"), "{e}");
        assert!(authority.verifies(&[]).is_err());
    }

    #[test]
    fn bad_bundles_are_refused_naming_their_source() {
        let e = Authority::from_pem(b"", "--client-ca-file x").unwrap_err();
        assert!(
            e.contains("--client-ca-file x") && e.contains("no certificate"),
            "{e}"
        );
        let e = Authority::from_pem(
            b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
            "configmap key client-ca-file",
        )
        .unwrap_err();
        assert!(e.starts_with("configmap key client-ca-file"), "{e}");
        let e = Authority::from_file(
            std::path::Path::new("/nonexistent/ca.crt"),
            "--client-ca-file",
        )
        .unwrap_err();
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn a_certificate_without_common_name_names_no_user() {
        let ca = Ca::new("client-ca");
        let chain = client_cert(&ca, "", &["g"]);
        assert!(user_of(&chain[0], true).is_err());
    }

    #[test]
    fn the_uid_attribute_names_the_uid_when_the_gate_is_on() {
        let ca = Ca::new("client-ca");
        let cert = crate::client_auth::test_pki::client_pair_with_uid(
            &ca,
            "alice",
            &[],
            Some("6f1c2a9e-uid"),
        )
        .der;
        assert_eq!(user_of(&cert, true).unwrap().uid, "6f1c2a9e-uid");
        assert_eq!(user_of(&cert, false).unwrap().uid, "");
        assert_eq!(
            user_of(&client_cert(&ca, "bob", &[])[0], true).unwrap().uid,
            ""
        );
    }
}
