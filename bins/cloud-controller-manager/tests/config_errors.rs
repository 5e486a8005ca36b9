//! The binary refuses bad configuration at start, naming every problem, and never starts work.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let (code, err) = run_code(args);
    (code == Some(0), err)
}

/// The exit code and stderr.
fn run_code(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("run ccm");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn config_file(text: &str) -> tempfile_path::TempPath {
    tempfile_path::TempPath::with(text)
}

mod tempfile_path {
    //! A file removed on drop.
    pub struct TempPath(pub std::path::PathBuf);
    impl TempPath {
        pub fn with(text: &str) -> TempPath {
            let p = std::env::temp_dir().join(format!(
                "stratus-cfg-{}-{}.conf",
                std::process::id(),
                rand_suffix()
            ));
            std::fs::write(&p, text).unwrap();
            TempPath(p)
        }
    }
    fn rand_suffix() -> u128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    }
    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[test]
fn every_problem_of_a_bad_config_is_named() {
    let cfg = config_file("[Global]\nRegion = moon-base-x\nKubernetesClusterID = c1\nFlavour = spicy\nDisableSecurityGroupIngress = maybe\n");
    let (ok, err) = run(&[
        "--cloud-provider=aws",
        &format!("--cloud-config={}", cfg.0.display()),
    ]);
    assert!(!ok);
    assert!(
        err.contains("[Global] Region: not a valid AWS region name (e.g. us-east-1) (line 2)"),
        "{err}"
    );
    assert!(err.contains("[Global] Flavour: unknown key;"), "{err}");
    assert!(err.contains("(line 4)"), "{err}");
    assert!(
        err.contains("DisableSecurityGroupIngress: not a boolean"),
        "{err}"
    );
    // Values are never quoted: the file could hold a password in the wrong place.
    for value in ["moon-base-x", "spicy", "maybe"] {
        assert!(!err.contains(value), "{value} quoted in {err}");
    }
}

#[test]
fn unreadable_config_is_named() {
    let (ok, err) = run(&[
        "--cloud-provider=aws",
        "--cloud-config=/nonexistent/stratus/cloud.conf",
    ]);
    assert!(!ok);
    assert!(err.contains("/nonexistent/stratus/cloud.conf"), "{err}");
}

#[test]
fn values_without_a_meaning_and_bad_values_are_refused() {
    let (ok, err) = run(&[
        "--cloud-provider=aws",
        "--leader-elect-resource-lock=endpoints",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--leader-elect-resource-lock") && err.contains("use leases"),
        "{err}"
    );
    let (ok, err) = run(&["--cloud-provider=aws", "--no-such-upstream-flag=1"]);
    assert!(!ok);
    assert!(err.contains("--no-such-upstream-flag"), "{err}");
    let (ok, err) = run(&[
        "--cloud-provider=aws",
        "--leader-elect-lease-duration=5s",
        "--leader-elect-renew-deadline=10s",
    ]);
    assert!(!ok);
    assert!(err.contains("--leader-elect-lease-duration"), "{err}");
    let (ok, err) = run(&["--cloud-provider=gce"]);
    assert!(!ok);
    assert!(err.contains("gce"), "{err}");
    let (ok, err) = run(&[
        "--cloud-provider=aws",
        "--controllers=cloud-node,warp-drive",
    ]);
    assert!(!ok);
    assert!(err.contains("warp-drive"), "{err}");
}

#[test]
fn missing_cluster_id_is_refused_unless_untagged_is_allowed() {
    let cfg = config_file("[Global]\nRegion = us-east-1\n");
    let (ok, err) = run(&[
        "--cloud-provider=aws",
        &format!("--cloud-config={}", cfg.0.display()),
        "--kubeconfig=/dev/null",
    ]);
    assert!(!ok);
    assert!(err.contains("no cluster ID"), "{err}");
}

#[test]
fn bad_pod_network_flags_exit_2_naming_the_flag() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--cluster-cidr=10.244.0.0"],
            &["--cluster-cidr", "10.244.0.0"],
        ),
        (
            &["--cluster-cidr=10.244.0.0/16,10.245.0.0/16"],
            &["--cluster-cidr", "dual-stack"],
        ),
        (
            &["--cidr-allocator-type=CloudAllocator"],
            &["--cidr-allocator-type", "RangeAllocator"],
        ),
        (
            &[
                "--allocate-node-cidrs",
                "--cluster-cidr=10.244.0.0/16,fd00::/56",
                "--node-cidr-mask-size=24",
            ],
            &["--node-cidr-mask-size", "dual-stack"],
        ),
        (
            &[
                "--allocate-node-cidrs",
                "--cluster-cidr=10.244.0.0/16",
                "--node-cidr-mask-size-ipv4=8",
            ],
            &["--node-cidr-mask-size-ipv4", "10.244.0.0/16"],
        ),
        (&["--allocate-node-cidrs"], &["--cluster-cidr"]),
        (
            &["--route-reconciliation-period=soon"],
            &["--route-reconciliation-period"],
        ),
    ];
    for (flags, words) in cases {
        let mut args = vec!["--cloud-provider=aws"];
        args.extend_from_slice(flags);
        let (code, err) = run_code(&args);
        assert_eq!(code, Some(2), "{flags:?}: {err}");
        for w in *words {
            assert!(err.contains(w), "{flags:?}: {w:?} missing in {err}");
        }
    }
}
