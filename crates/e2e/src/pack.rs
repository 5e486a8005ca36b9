//! Packing several of Stratus's binaries as images at once: each on its own thread (packing a
//! debug binary is compressing a hundred megabytes), the archives in the order asked.

use anyhow::{Context, Result};
use stratus_testenv::node::{images, ImageArchive};

/// The images of the shipped binaries `names`, packed in parallel (or taken from the machine's
/// image cache).
pub fn stratus_images(names: &[&str]) -> Result<Vec<ImageArchive>> {
    std::thread::scope(|scope| {
        let packing: Vec<_> = names
            .iter()
            .map(|name| (*name, scope.spawn(move || images::stratus(name))))
            .collect();
        packing
            .into_iter()
            .map(|(name, thread)| {
                thread
                    .join()
                    .map_err(|_| anyhow::anyhow!("packing {name} panicked"))?
                    .with_context(|| format!("packing the image of {name}"))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_binary_is_named() {
        let err = stratus_images(&["no-such-binary"]).unwrap_err();
        assert!(format!("{err:#}").contains("no-such-binary"), "{err:#}");
    }
}
