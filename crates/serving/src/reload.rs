//! A serving certificate read from its PEM files and read again when they change (cert-manager
//! or a Secret volume rotating it): the files' modification times and sizes are looked at, at
//! most once per [`CHECK_EVERY`], on a TLS handshake; a pair that cannot be read or does not
//! match keeps the previous certificate in use and is logged.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How often the files are looked at, at most.
pub const CHECK_EVERY: Duration = Duration::from_secs(10);

/// What the two files looked like when last read: modification time and size of each.
type Stamp = [(Option<SystemTime>, u64); 2];

/// The certificate of a file pair, kept current.
#[derive(Debug)]
pub struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    flags: (&'static str, &'static str),
    provider: Arc<CryptoProvider>,
    check_every: Duration,
    current: RwLock<(Arc<CertifiedKey>, Stamp)>,
    checked: Mutex<Instant>,
}

fn stamp(cert: &Path, key: &Path) -> Stamp {
    [cert, key].map(|p| match std::fs::metadata(p) {
        Ok(m) => (m.modified().ok(), m.len()),
        Err(_) => (None, 0),
    })
}

impl ReloadingCert {
    /// Reads the pair now (errors name `flags`); looked at again at most every `check_every`.
    pub fn load(
        cert: &Path,
        key: &Path,
        flags: (&'static str, &'static str),
        provider: Arc<CryptoProvider>,
        check_every: Duration,
    ) -> anyhow::Result<ReloadingCert> {
        let before = stamp(cert, key);
        let certified = read(cert, key, flags, &provider)?;
        Ok(ReloadingCert {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            flags,
            provider,
            check_every,
            current: RwLock::new((certified, before)),
            checked: Mutex::new(Instant::now()),
        })
    }

    /// The certificate in use, read again first when the files changed and a check is due.
    pub fn current(&self) -> Arc<CertifiedKey> {
        if self.check_due() {
            self.reload_if_changed();
        }
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
            .clone()
    }

    fn check_due(&self) -> bool {
        let mut checked = self
            .checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if checked.elapsed() < self.check_every {
            return false;
        }
        *checked = Instant::now();
        true
    }

    fn reload_if_changed(&self) {
        let now = stamp(&self.cert, &self.key);
        let mut current = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.1 == now {
            return;
        }
        // Remembered either way: a broken pair is logged once, not at every handshake.
        current.1 = now;
        match read(&self.cert, &self.key, self.flags, &self.provider) {
            Ok(certified) => {
                current.0 = certified;
                tracing::info!(cert = %self.cert.display(), "serving certificate read again");
            }
            Err(e) => tracing::warn!(
                cert = %self.cert.display(),
                error = format!("{e:#}"),
                "the changed serving certificate cannot be used; the previous one stays"
            ),
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn read(
    cert: &Path,
    key: &Path,
    flags: (&str, &str),
    provider: &CryptoProvider,
) -> anyhow::Result<Arc<CertifiedKey>> {
    let (chain, key) = crate::tls::load_files(cert, key, flags)?;
    let certified = CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        anyhow::anyhow!("the serving certificate does not match its private key: {e}")
    })?;
    Ok(Arc::new(certified))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::self_signed;

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::aws_lc_rs::default_provider())
    }

    /// Writes `pem` to `path` with the modification time `at` (seconds after an epoch
    /// offset), so a change is seen without waiting for the clock.
    fn write(path: &Path, pem: &str, at: u64) {
        std::fs::write(path, pem).unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + at))
            .unwrap();
    }

    #[test]
    fn a_rotated_pair_is_served_and_a_broken_one_keeps_the_last_good() {
        let dir = std::env::temp_dir().join(format!("stratus-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        let hosts = vec!["localhost".to_string()];
        let a = self_signed::generate(&hosts).unwrap();
        let b = self_signed::generate(&hosts).unwrap();
        write(&cert, &a.cert_pem, 1);
        write(&key, &a.key_pem, 1);
        let flags = ("--webhook-cert-dir", "--webhook-cert-dir");
        let r = ReloadingCert::load(&cert, &key, flags, provider(), Duration::ZERO).unwrap();
        assert_eq!(r.current().cert[0].as_ref(), a.cert_der.as_slice());

        // Rotated: the next handshake gets the new certificate.
        write(&cert, &b.cert_pem, 2);
        write(&key, &b.key_pem, 2);
        assert_eq!(r.current().cert[0].as_ref(), b.cert_der.as_slice());

        // Half-written (new certificate, old key): the last good pair stays in use.
        write(&cert, &a.cert_pem, 3);
        assert_eq!(r.current().cert[0].as_ref(), b.cert_der.as_slice());
        // ...until the key follows.
        write(&key, &a.key_pem, 3);
        assert_eq!(r.current().cert[0].as_ref(), a.cert_der.as_slice());

        // Not due yet: no look at the files.
        let slow = ReloadingCert::load(&cert, &key, flags, provider(), CHECK_EVERY).unwrap();
        write(&cert, &b.cert_pem, 4);
        write(&key, &b.key_pem, 4);
        assert_eq!(slow.current().cert[0].as_ref(), a.cert_der.as_slice());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
