//! How a volume is formatted, as a pure function: the StorageClass's formatting parameters
//! travel in the volume context under upstream EBS's keys (`blocksize`, `inodesize`,
//! `bytesperinode`, `numberofinodes`, `ext4bigalloc`, `ext4clustersize`), the node plugin adds
//! its own switch (`--legacy-xfs`), and [`FormatOptions::mkfs_args`] turns them into the `mkfs`
//! arguments of the file system — or names the option that file system cannot take.

/// Volume-context key of the file-system block size (bytes).
pub const BLOCK_SIZE: &str = "blocksize";
/// Volume-context key of the inode size (bytes).
pub const INODE_SIZE: &str = "inodesize";
/// Volume-context key of the bytes-per-inode ratio (ext).
pub const BYTES_PER_INODE: &str = "bytesperinode";
/// Volume-context key of the inode count (ext).
pub const NUMBER_OF_INODES: &str = "numberofinodes";
/// Volume-context key of ext4's bigalloc feature.
pub const EXT4_BIGALLOC: &str = "ext4bigalloc";
/// Volume-context key of ext4's cluster size (bytes, with bigalloc).
pub const EXT4_CLUSTER_SIZE: &str = "ext4clustersize";
/// Every formatting key, as the StorageClass parameter names are matched (lower case).
pub const KEYS: &[&str] = &[
    BLOCK_SIZE,
    INODE_SIZE,
    BYTES_PER_INODE,
    NUMBER_OF_INODES,
    EXT4_BIGALLOC,
    EXT4_CLUSTER_SIZE,
];

/// What `mkfs` is asked for beyond its defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FormatOptions {
    /// Block size in bytes.
    pub block_size: Option<u64>,
    /// Inode size in bytes.
    pub inode_size: Option<u64>,
    /// Bytes per inode (ext).
    pub bytes_per_inode: Option<u64>,
    /// Number of inodes (ext).
    pub number_of_inodes: Option<u64>,
    /// ext4 bigalloc.
    pub ext4_bigalloc: bool,
    /// ext4 cluster size in bytes.
    pub ext4_cluster_size: Option<u64>,
    /// XFS without `bigtime`, `inobtcount` and `reflink`, mountable by Linux ≤ 5.4 (the node's
    /// `--legacy-xfs`).
    pub legacy_xfs: bool,
}

fn positive(key: &str, value: &str) -> Result<u64, String> {
    match value.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{key}: {value:?} is not a positive whole number")),
    }
}

/// Checks one StorageClass formatting parameter (`key` in lower case); the value the volume
/// context carries.
pub fn check_parameter(key: &str, value: &str) -> Result<String, String> {
    match key {
        EXT4_BIGALLOC => match value.trim().to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(value.trim().to_ascii_lowercase()),
            _ => Err(format!("{key}: {value:?} is not true or false")),
        },
        _ if KEYS.contains(&key) => positive(key, value).map(|n| n.to_string()),
        _ => Err(format!("{key} is not a formatting parameter")),
    }
}

impl FormatOptions {
    /// The options the volume context carries (keys matched in any case); every bad value named.
    pub fn from_context<'a>(
        context: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Result<FormatOptions, String> {
        let mut options = FormatOptions::default();
        let mut problems = Vec::new();
        for (key, value) in context {
            let key = key.to_ascii_lowercase();
            if !KEYS.contains(&key.as_str()) {
                continue;
            }
            let checked = match check_parameter(&key, value) {
                Ok(v) => v,
                Err(e) => {
                    problems.push(e);
                    continue;
                }
            };
            let n = checked.parse::<u64>().ok();
            match key.as_str() {
                BLOCK_SIZE => options.block_size = n,
                INODE_SIZE => options.inode_size = n,
                BYTES_PER_INODE => options.bytes_per_inode = n,
                NUMBER_OF_INODES => options.number_of_inodes = n,
                EXT4_CLUSTER_SIZE => options.ext4_cluster_size = n,
                _ => options.ext4_bigalloc = checked == "true",
            }
        }
        if problems.is_empty() {
            Ok(options)
        } else {
            Err(problems.join("; "))
        }
    }

    /// The `mkfs` arguments these options add for `fs_type`, or the option `fs_type` cannot
    /// take.
    pub fn mkfs_args(&self, fs_type: &str) -> Result<Vec<String>, String> {
        let mut args = Vec::new();
        let refuse = |what: &str| Err(format!("{what} does not apply to {fs_type}"));
        match fs_type {
            "ext2" | "ext3" | "ext4" => {
                if let Some(n) = self.block_size {
                    args.extend(["-b".to_string(), n.to_string()]);
                }
                if let Some(n) = self.inode_size {
                    args.extend(["-I".to_string(), n.to_string()]);
                }
                if let Some(n) = self.bytes_per_inode {
                    args.extend(["-i".to_string(), n.to_string()]);
                }
                if let Some(n) = self.number_of_inodes {
                    args.extend(["-N".to_string(), n.to_string()]);
                }
                if self.ext4_bigalloc || self.ext4_cluster_size.is_some() {
                    if fs_type != "ext4" {
                        return refuse("ext4BigAlloc and ext4ClusterSize");
                    }
                    if self.ext4_bigalloc {
                        args.extend(["-O".to_string(), "bigalloc".to_string()]);
                    }
                    if let Some(n) = self.ext4_cluster_size {
                        args.extend(["-C".to_string(), n.to_string()]);
                    }
                }
            }
            "xfs" => {
                if self.bytes_per_inode.is_some() || self.number_of_inodes.is_some() {
                    return refuse("bytesPerInode and numberOfInodes");
                }
                if self.ext4_bigalloc || self.ext4_cluster_size.is_some() {
                    return refuse("ext4BigAlloc and ext4ClusterSize");
                }
                if let Some(n) = self.block_size {
                    args.extend(["-b".to_string(), format!("size={n}")]);
                }
                if let Some(n) = self.inode_size {
                    args.extend(["-i".to_string(), format!("size={n}")]);
                }
                if self.legacy_xfs {
                    args.extend([
                        "-m".to_string(),
                        "bigtime=0,inobtcount=0,reflink=0".to_string(),
                    ]);
                }
            }
            _ => {
                if *self
                    != (FormatOptions {
                        legacy_xfs: self.legacy_xfs,
                        ..FormatOptions::default()
                    })
                {
                    return refuse("formatting parameters");
                }
            }
        }
        Ok(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn context(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn context_values_become_mkfs_arguments_per_file_system() {
        let o = FormatOptions::from_context(&context(&[
            ("blockSize", "2048"),
            ("inodesize", "512"),
            ("fsType", "ext4"),
        ]))
        .unwrap();
        assert_eq!(o.mkfs_args("ext4").unwrap(), ["-b", "2048", "-I", "512"]);
        assert_eq!(
            o.mkfs_args("xfs").unwrap(),
            ["-b", "size=2048", "-i", "size=512"]
        );
        let ext = FormatOptions::from_context(&context(&[
            ("bytesperinode", "8192"),
            ("numberofinodes", "1000"),
            ("ext4bigalloc", "true"),
            ("ext4clustersize", "16384"),
        ]))
        .unwrap();
        assert_eq!(
            ext.mkfs_args("ext4").unwrap(),
            ["-i", "8192", "-N", "1000", "-O", "bigalloc", "-C", "16384"]
        );
        assert!(ext.mkfs_args("ext3").unwrap_err().contains("ext4BigAlloc"));
        assert!(ext.mkfs_args("xfs").unwrap_err().contains("bytesPerInode"));
        let legacy = FormatOptions {
            legacy_xfs: true,
            ..FormatOptions::default()
        };
        assert_eq!(
            legacy.mkfs_args("xfs").unwrap(),
            ["-m", "bigtime=0,inobtcount=0,reflink=0"]
        );
        assert!(legacy.mkfs_args("ext4").unwrap().is_empty());
        assert!(FormatOptions::default()
            .mkfs_args("ext4")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn bad_values_are_named() {
        let err = FormatOptions::from_context(&context(&[
            ("blocksize", "big"),
            ("inodesize", "0"),
            ("ext4bigalloc", "yes"),
        ]))
        .unwrap_err();
        for key in ["blocksize", "inodesize", "ext4bigalloc"] {
            assert!(err.contains(key), "{err}");
        }
        assert_eq!(check_parameter(EXT4_BIGALLOC, "TRUE").unwrap(), "true");
        assert!(check_parameter("color", "1").is_err());
    }
}
