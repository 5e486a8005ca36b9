//! Every shipped binary packaged from its debug build: the image is pushed to crane's registry,
//! validated and exported by crane, unpacked, and its binary run with `chroot` as uid 65532
//! (`--version` says the expected version, `--help` works), and a CSI driver's storage tools run
//! from inside its image; node tarballs unpack and run.

mod common;

use std::os::unix::fs::PermissionsExt as _;

use common::{package, require_root, run_in, unpack, Registry, CA_BUNDLE};
use stratus_images::oci;
use stratus_images::rootfs::NONROOT_UID;
use stratus_images::table::{Kind, BINARIES};
use stratus_runtime::build_info::BUILD;

#[test]
fn every_image_runs_its_binary_as_nonroot() {
    require_root();
    let crane = stratus_testenv::tools::crane::ensure_installed().expect("crane");
    let registry = Registry::start(&crane).expect("registry");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("images");
    for binary in BINARIES.iter().filter(|b| b.kind == Kind::Image) {
        let a = package(binary, &out).unwrap();
        assert_eq!(a.tag, BUILD.version);
        assert_eq!(a.image, binary.repository());
        let work = dir.path().join(binary.name);
        let image = unpack(&registry, &a, &out, &work).unwrap();

        let c = &image.config["config"];
        assert_eq!(
            c["User"],
            format!("{NONROOT_UID}:{NONROOT_UID}"),
            "{}",
            binary.name
        );
        assert_eq!(c["Entrypoint"][0], binary.entrypoint());
        for (key, value) in oci::labels(&BUILD) {
            assert_eq!(c["Labels"][&key], value, "{}: label {key}", binary.name);
        }

        // No shell, no package manager: the tree holds the binary, its libraries, CA
        // certificates and the user files.
        let root = &image.root;
        for absent in [
            "bin/sh",
            "usr/bin/sh",
            "bin/bash",
            "usr/bin/apt",
            "usr/bin/dpkg",
        ] {
            assert!(!root.join(absent).exists(), "{}: {absent}", binary.name);
        }
        assert_eq!(
            std::fs::read(root.join(CA_BUNDLE.trim_start_matches('/'))).unwrap(),
            std::fs::read(CA_BUNDLE).unwrap()
        );
        let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
        assert!(passwd.contains("nonroot:x:65532:65532:"), "{passwd}");

        for tool in binary.tools {
            assert!(
                oci::path()
                    .split(':')
                    .any(|dir| root.join(&dir[1..]).join(tool.name).is_file()),
                "{}: {} is not on the image's PATH",
                binary.name,
                tool.name
            );
        }
        if !binary.tools.is_empty() {
            common::storage::tools_work(root, binary.name);
        }

        let version = run_in(root, &binary.entrypoint(), &["--version"]).unwrap();
        assert!(
            version.status.success(),
            "{} --version: {version:?}",
            binary.name
        );
        let text = String::from_utf8_lossy(&version.stdout).into_owned()
            + &String::from_utf8_lossy(&version.stderr);
        assert_eq!(
            text.trim(),
            format!("{} {}", binary.name, BUILD.version_line()),
            "{} --version",
            binary.name
        );
        let help = run_in(root, &binary.entrypoint(), &["--help"]).unwrap();
        assert!(help.status.success(), "{} --help: {help:?}", binary.name);
        let help_text = String::from_utf8_lossy(&help.stdout).into_owned()
            + &String::from_utf8_lossy(&help.stderr);
        assert!(
            help_text.contains("--version"),
            "{}: {help_text}",
            binary.name
        );

        // The process really is uid 65532: once only root may execute the binary, it cannot.
        let entry = root.join(binary.entrypoint().trim_start_matches('/'));
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o700)).unwrap();
        let denied = run_in(root, &binary.entrypoint(), &["--version"]).unwrap();
        assert!(
            !denied.status.success(),
            "{}: ran although only root may",
            binary.name
        );
    }
}

#[test]
fn node_tarballs_hold_a_runnable_binary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("images");
    for binary in BINARIES.iter().filter(|b| b.kind == Kind::NodeTarball) {
        let a = package(binary, &out).unwrap();
        let unpacked = dir.path().join(binary.name);
        std::fs::create_dir_all(&unpacked).unwrap();
        common::tar(&[
            "-xzf",
            &out.join(&a.file).to_string_lossy(),
            "-C",
            &unpacked.to_string_lossy(),
        ])
        .unwrap();
        let names: Vec<_> = std::fs::read_dir(&unpacked)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [binary.name]);
        let version = std::process::Command::new(unpacked.join(binary.name))
            .arg("--version")
            .output()
            .unwrap();
        assert!(version.status.success(), "{version:?}");
        assert_eq!(
            String::from_utf8_lossy(&version.stdout).trim(),
            format!("{} {}", binary.name, BUILD.version_line())
        );
    }
}

/// Every program the CSI node code runs (`run("…")`, `Command::new("…")`, `mkfs.<fs>`) is one
/// of the storage tools the CSI images carry, and each tool is one it runs.
#[test]
fn storage_tools_are_what_the_csi_code_runs() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../csi/src");
    let mut run = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for opener in ["run(", "Command::new("] {
            for piece in text.split(opener).skip(1) {
                if let Some(quoted) = piece.trim_start().strip_prefix('"') {
                    run.insert(quoted.split('"').next().unwrap().to_owned());
                }
            }
        }
        // `mkfs_command` formats these three (its own tests say so) as `mkfs.<type>`.
        if text.contains("format!(\"mkfs.{fs_type}\")") {
            run.extend(["mkfs.ext4", "mkfs.ext3", "mkfs.xfs"].map(String::from));
        }
    }
    let carried: std::collections::BTreeSet<_> = stratus_images::table::STORAGE_TOOLS
        .iter()
        .map(|t| t.name.to_owned())
        .collect();
    assert_eq!(run, carried);
}
