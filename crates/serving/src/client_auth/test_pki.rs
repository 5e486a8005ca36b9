//! A throwaway certificate authority and client certificates signed by it, for the tests of
//! client-certificate and front-proxy authentication (this crate's and the binaries').

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::CertificateDer;

/// A CA: its certificate and key.
pub struct Ca {
    params: CertificateParams,
    key: KeyPair,
    cert: rcgen::Certificate,
}

impl Ca {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        Ca { params, key, cert }
    }

    /// The CA certificate in PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }
}

/// A client certificate and its key in PEM, signed by a [`Ca`].
pub struct ClientPair {
    /// The certificate (PEM).
    pub cert_pem: String,
    /// Its private key (PEM).
    pub key_pem: String,
    /// The certificate (DER).
    pub der: CertificateDer<'static>,
}

/// A client certificate for common name `cn` (none when empty) and organisations `groups` (rcgen
/// keeps one organisation: the last).
pub fn client_pair(ca: &Ca, cn: &str, groups: &[&str]) -> ClientPair {
    client_pair_with_uid(ca, cn, groups, None)
}

/// [`client_pair`] with Kubernetes' UID subject attribute when `uid` is given.
pub fn client_pair_with_uid(ca: &Ca, cn: &str, groups: &[&str], uid: Option<&str>) -> ClientPair {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("client parameters");
    params.distinguished_name = DistinguishedName::new();
    if !cn.is_empty() {
        params.distinguished_name.push(DnType::CommonName, cn);
    }
    if let Some(uid) = uid {
        params.distinguished_name.push(
            DnType::CustomDnType(crate::client_auth::authority::UID_ATTRIBUTE.to_vec()),
            uid,
        );
    }
    for g in groups {
        params.distinguished_name.push(DnType::OrganizationName, *g);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().expect("client key");
    let issuer = Issuer::from_params(&ca.params, &ca.key);
    let cert = params.signed_by(&key, &issuer).expect("client certificate");
    ClientPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        der: cert.der().clone(),
    }
}

/// The chain (leaf only) of a client certificate for `cn` and `groups`.
pub fn client_cert(ca: &Ca, cn: &str, groups: &[&str]) -> Vec<CertificateDer<'static>> {
    vec![client_pair(ca, cn, groups).der]
}
