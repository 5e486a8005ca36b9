//! The serving certificate used when none is given: self-signed for the host's names, kept in
//! memory, or written to (and later reused from) `--cert-dir` as upstream does.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

/// Upstream's pair name: `<cert-dir>/cloud-controller-manager.{crt,key}`.
pub const PAIR_NAME: &str = "cloud-controller-manager";
/// Validity of a generated certificate (upstream: one year).
pub const VALIDITY: time::Duration = time::Duration::days(365);

/// A generated certificate and its private key.
pub struct Generated {
    /// The certificate, DER.
    pub cert_der: Vec<u8>,
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, DER.
    pub key_der: Vec<u8>,
    /// The private key, PEM.
    pub key_pem: String,
}

/// The names a generated certificate is valid for: `localhost`, `127.0.0.1`, the host name, and
/// the bind address unless it is a wildcard.
pub fn default_hosts(bind: IpAddr) -> Vec<String> {
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    if let Some(name) = host_name() {
        hosts.push(name);
    }
    if !bind.is_unspecified() {
        hosts.push(bind.to_string());
    }
    let mut seen = std::collections::BTreeSet::new();
    hosts.retain(|h| seen.insert(h.clone()));
    hosts
}

fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// A fresh self-signed ECDSA P-256 certificate for `hosts` (DNS names or IP addresses), valid
/// from now for [`VALIDITY`].
pub fn generate(hosts: &[String]) -> anyhow::Result<Generated> {
    let first = hosts.first().map_or("localhost", String::as_str);
    let mut params =
        CertificateParams::new(hosts.to_vec()).context("self-signed certificate: bad host name")?;
    let now = time::OffsetDateTime::now_utc();
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        format!("{first}@{}", now.unix_timestamp()),
    );
    params.distinguished_name = dn;
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + VALIDITY;
    let key = KeyPair::generate().context("generating the serving key")?;
    let cert = params
        .self_signed(&key)
        .context("self-signing the serving certificate")?;
    Ok(Generated {
        cert_der: cert.der().to_vec(),
        cert_pem: cert.pem(),
        key_der: key.serialize_der(),
        key_pem: key.serialize_pem(),
    })
}

/// The certificate and key files in `dir`: reused when both exist, otherwise generated for
/// `hosts` and written (the key readable by the owner only).
pub fn load_or_generate(dir: &Path, hosts: &[String]) -> anyhow::Result<(PathBuf, PathBuf)> {
    let cert = dir.join(format!("{PAIR_NAME}.crt"));
    let key = dir.join(format!("{PAIR_NAME}.key"));
    if cert.is_file() && key.is_file() {
        tracing::info!(cert = %cert.display(), "using the self-signed certificate in --cert-dir");
        return Ok((cert, key));
    }
    let generated = generate(hosts)?;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--cert-dir {}: cannot create", dir.display()))?;
    write_file(&key, &generated.key_pem, 0o600)?;
    write_file(&cert, &generated.cert_pem, 0o644)?;
    tracing::info!(cert = %cert.display(), hosts = ?hosts, "generated a self-signed certificate");
    Ok((cert, key))
}

fn write_file(path: &Path, contents: &str, mode: u32) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(contents.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_hosts_cover_loopback_and_a_specific_bind_address() {
        let wildcard = default_hosts("0.0.0.0".parse().unwrap());
        assert_eq!(wildcard[..2], ["localhost", "127.0.0.1"]);
        assert!(!wildcard.contains(&"0.0.0.0".to_string()));
        let specific = default_hosts("10.1.2.3".parse().unwrap());
        assert!(specific.contains(&"10.1.2.3".to_string()));
        let loopback = default_hosts("127.0.0.1".parse().unwrap());
        assert_eq!(
            loopback.iter().filter(|h| *h == "127.0.0.1").count(),
            1,
            "{loopback:?}"
        );
    }

    #[test]
    fn cert_dir_pair_is_written_once_then_reused() {
        let dir = std::env::temp_dir().join(format!(
            "stratus-serving-certdir-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        let hosts = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let (cert, key) = load_or_generate(&dir.join("nested"), &hosts).unwrap();
        let first = std::fs::read_to_string(&cert).unwrap();
        assert!(first.starts_with("-----BEGIN CERTIFICATE-----"), "{first}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (cert_again, _) = load_or_generate(&dir.join("nested"), &hosts).unwrap();
        assert_eq!(cert_again, cert);
        assert_eq!(std::fs::read_to_string(&cert_again).unwrap(), first);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
