//! Where an attached volume's block device is: the [`DeviceFinder`] seam each backend
//! implements (NVMe serials for EBS, virtio serials for Cinder), [`LoopDevices`] standing a loop
//! device in for every volume so tests run the real node path, and the bounded wait for a
//! device to appear.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::BackendError;

/// Finds the device of an attached volume.
#[async_trait]
pub trait DeviceFinder: Send + Sync + 'static {
    /// The device now, `None` if it has not appeared (yet).
    async fn locate(
        &self,
        volume_id: &str,
        hint: Option<&str>,
    ) -> Result<Option<PathBuf>, BackendError>;
    /// Makes the kernel see the volume grown to `required_bytes`.
    async fn rescan(
        &self,
        _volume_id: &str,
        _device: &Path,
        _required_bytes: i64,
    ) -> Result<(), BackendError> {
        Ok(())
    }
}

/// Loop devices standing in for cloud volumes (tests and the test environment): each volume gets
/// a sparse backing file `<dir>/<volume>.img` attached with `losetup`.
#[derive(Debug, Clone)]
pub struct LoopDevices {
    dir: PathBuf,
    size_bytes: u64,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl LoopDevices {
    /// Loop devices with backing files in `dir`, each `size_bytes` at first.
    pub fn new(dir: PathBuf, size_bytes: u64) -> LoopDevices {
        LoopDevices {
            dir,
            size_bytes,
            lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    fn backing(&self, volume_id: &str) -> PathBuf {
        self.dir.join(format!("{volume_id}.img"))
    }

    /// The loop device bound to a backing file, if any.
    async fn bound(file: &Path) -> Result<Option<PathBuf>, BackendError> {
        let out = run("losetup", &["-j".as_ref(), file.as_os_str()]).await?;
        Ok(out
            .lines()
            .next()
            .and_then(|l| l.split(':').next())
            .filter(|d| !d.is_empty())
            .map(PathBuf::from))
    }

    /// Detaches every loop device of this directory and removes the backing files.
    pub async fn release_all(&self) -> Result<(), BackendError> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Ok(());
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_some_and(|x| x == "img") {
                while let Some(dev) = Self::bound(&path).await? {
                    run("losetup", &["-d".as_ref(), dev.as_os_str()]).await?;
                }
                let _ = std::fs::remove_file(&path);
            }
        }
        Ok(())
    }
}

async fn run(program: &str, args: &[&std::ffi::OsStr]) -> Result<String, BackendError> {
    let out = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .map_err(|e| BackendError::Internal(format!("running {program}: {e}")))?;
    if !out.status.success() {
        return Err(BackendError::Internal(format!(
            "{program} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[async_trait]
impl DeviceFinder for LoopDevices {
    async fn locate(
        &self,
        volume_id: &str,
        _hint: Option<&str>,
    ) -> Result<Option<PathBuf>, BackendError> {
        let _guard = self.lock.lock().await;
        let file = self.backing(volume_id);
        if let Some(dev) = Self::bound(&file).await? {
            return Ok(Some(dev));
        }
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| BackendError::Internal(format!("creating {}: {e}", self.dir.display())))?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&file)
            .map_err(|e| BackendError::Internal(format!("creating {}: {e}", file.display())))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.size_bytes {
            f.set_len(self.size_bytes)
                .map_err(|e| BackendError::Internal(format!("sizing {}: {e}", file.display())))?;
        }
        let out = run(
            "losetup",
            &["--find".as_ref(), "--show".as_ref(), file.as_os_str()],
        )
        .await?;
        Ok(Some(PathBuf::from(out.trim())))
    }

    async fn rescan(
        &self,
        volume_id: &str,
        device: &Path,
        required_bytes: i64,
    ) -> Result<(), BackendError> {
        let file = self.backing(volume_id);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .map_err(|e| BackendError::Internal(format!("opening {}: {e}", file.display())))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let want = u64::try_from(required_bytes).unwrap_or(0);
        if want > len {
            f.set_len(want)
                .map_err(|e| BackendError::Internal(format!("growing {}: {e}", file.display())))?;
            run("losetup", &["-c".as_ref(), device.as_os_str()]).await?;
        }
        Ok(())
    }
}

/// Asks `finder` until the device of `volume_id` appears or `wait` passes (then Pending, naming
/// `how` the driver looks for it).
pub async fn wait_for_device(
    finder: &dyn DeviceFinder,
    volume_id: &str,
    hint: Option<&str>,
    wait: Duration,
    how: &str,
) -> Result<PathBuf, BackendError> {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(dev) = finder.locate(volume_id, hint).await? {
            return Ok(dev);
        }
        if Instant::now() >= deadline {
            return Err(BackendError::Pending(format!(
                "no device for volume {volume_id} after {wait:?} ({how} or {})",
                hint.unwrap_or("no device name")
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Never;

    #[async_trait]
    impl DeviceFinder for Never {
        async fn locate(&self, _: &str, _: Option<&str>) -> Result<Option<PathBuf>, BackendError> {
            Ok(None)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_missing_device_is_pending_after_the_wait() {
        let e = wait_for_device(
            &Never,
            "vol-1",
            Some("/dev/vdb"),
            Duration::from_secs(5),
            "serial",
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&e, BackendError::Pending(m) if m.contains("/dev/vdb")),
            "{e}"
        );
    }
}
