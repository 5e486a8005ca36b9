//! The shared libraries a dynamically linked binary needs, as `ldd` names them (the loader
//! included; the kernel's vDSO left out).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Runs `ldd` on `binary` and returns the libraries it names, loader included (none for a
/// static binary).
pub fn libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .context("running ldd (glibc's, from libc-bin)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    // A static binary (the sandbox's pause) needs no library; ldd says so and exits 1.
    if String::from_utf8_lossy(&out.stderr).contains("not a dynamic executable")
        || text.contains("not a dynamic executable")
    {
        return Ok(Vec::new());
    }
    if !out.status.success() {
        bail!(
            "ldd {}: {}{}",
            binary.display(),
            text,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    parse(&text)
}

/// Reads `ldd` output: `name => /path (0x…)` lines and the loader's `/path (0x…)` line give a
/// path; `linux-vdso.so.1 (0x…)` gives none; `not found` is an error.
pub fn parse(output: &str) -> Result<Vec<PathBuf>> {
    let mut libs = Vec::new();
    for line in output.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("not found") {
            bail!("a library is missing: {line}");
        }
        if line.contains("statically linked") {
            continue;
        }
        let target = match line.split_once("=>") {
            Some((_, right)) => right.trim(),
            None => line,
        };
        let path = target.split_whitespace().next().unwrap_or("");
        if path.starts_with('/') {
            libs.push(PathBuf::from(path));
        }
    }
    libs.sort();
    libs.dedup();
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_glibc_ldd_output() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd4b5f2000)\n\
                   \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f0e1c5e0000)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e1c400000)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f0e1c62c000)\n";
        assert_eq!(
            parse(out).unwrap(),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert!(parse("\tlibfoo.so => not found\n").is_err());
        assert!(parse("\tstatically linked\n").unwrap().is_empty());
    }

    #[test]
    fn this_test_binary_needs_libc() {
        let libs = libraries(&std::env::current_exe().unwrap()).unwrap();
        assert!(
            libs.iter()
                .any(|l| l.file_name().is_some_and(|n| n == "libc.so.6")),
            "{libs:?}"
        );
    }
}
