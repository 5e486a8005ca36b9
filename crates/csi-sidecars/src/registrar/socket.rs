//! The registrar's files: the registration socket `<dir>/<driver>-reg.sock` (a stale one is
//! removed before binding, ours is removed when dropped) and the registration probe file
//! `registration` beside the kubelet registration path, which `--mode=kubelet-registration-probe`
//! looks for.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

/// The registration socket's path for `driver` in `dir`.
pub fn socket_path(dir: &Path, driver: &str) -> PathBuf {
    dir.join(format!("{driver}-reg.sock"))
}

/// The registration probe file for a kubelet registration path: `registration` in its directory
/// (upstream's location).
pub fn probe_file(kubelet_registration_path: &Path) -> PathBuf {
    kubelet_registration_path
        .parent()
        .unwrap_or(Path::new("/"))
        .join("registration")
}

/// The bound registration socket; dropping it removes the file.
#[derive(Debug)]
pub struct RegistrationSocket {
    path: PathBuf,
}

impl RegistrationSocket {
    /// Removes a stale socket at `path`, binds a new one (mode 0600: only the kubelet, as root,
    /// needs it) and returns it with its listener.
    pub fn bind(path: &Path) -> Result<(Self, UnixListener), String> {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path)
                .map_err(|e| format!("removing the stale socket {}: {e}", path.display()))?,
            Ok(_) => {
                return Err(format!(
                    "{} exists and is not a socket; not replacing it",
                    path.display()
                ))
            }
            Err(_) => {}
        }
        let listener = UnixListener::bind(path)
            .map_err(|e| format!("creating the registration socket {}: {e}", path.display()))?;
        let socket = RegistrationSocket {
            path: path.to_path_buf(),
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("restricting {}: {e}", path.display()))?;
        Ok((socket, listener))
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RegistrationSocket {
    fn drop(&mut self) {
        match std::fs::remove_file(&self.path) {
            Ok(()) => tracing::info!("removed the registration socket {}", self.path.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("removing {}: {e}", self.path.display()),
        }
    }
}

/// Writes the probe file (best effort, as upstream: the directory may not be mounted here).
pub fn touch_probe_file(path: &Path) {
    match std::fs::write(path, b"") {
        Ok(()) => tracing::info!(
            "kubelet registration probe file created at {}",
            path.display()
        ),
        Err(e) => tracing::warn!(
            "cannot create the registration probe file {}: {e}",
            path.display()
        ),
    }
}

/// Removes the probe file if it is there.
pub fn remove_probe_file(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(
                "removing the registration probe file {}: {e}",
                path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            socket_path(Path::new("/registration"), "ebs.csi.aws.com"),
            PathBuf::from("/registration/ebs.csi.aws.com-reg.sock")
        );
        assert_eq!(
            probe_file(Path::new("/var/lib/kubelet/csi-plugins/x/csi.sock")),
            PathBuf::from("/var/lib/kubelet/csi-plugins/x/registration")
        );
    }

    #[tokio::test]
    async fn a_stale_socket_is_replaced_and_ours_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = socket_path(dir.path(), "x");
        let stale = std::os::unix::net::UnixListener::bind(&path).unwrap();
        drop(stale);
        let (socket, _listener) = RegistrationSocket::bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        drop(socket);
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn a_regular_file_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = socket_path(dir.path(), "x");
        std::fs::write(&path, "data").unwrap();
        let err = RegistrationSocket::bind(&path).unwrap_err();
        assert!(err.contains("is not a socket"), "{err}");
        assert!(path.exists());
    }
}
