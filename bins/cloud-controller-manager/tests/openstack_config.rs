//! `--cloud-provider=openstack` refuses a bad cloud.conf at start: one message listing every
//! problem of every section with its line, a non-zero exit, no secret printed, and nothing
//! contacted (the config is checked before Keystone or the apiserver are).

use std::path::PathBuf;
use std::process::Command;

/// A cloud.conf removed on drop.
struct ConfFile(PathBuf);

impl ConfFile {
    fn with(name: &str, text: &str) -> ConfFile {
        let path =
            std::env::temp_dir().join(format!("stratus-os-{name}-{}.conf", std::process::id()));
        std::fs::write(&path, text).unwrap();
        ConfFile(path)
    }
}

impl Drop for ConfFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Exit code and stderr of the CCM with `args`.
fn run(args: &[String]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
        .args(args)
        .arg("--kubeconfig=/nonexistent/stratus/kubeconfig")
        .env_remove("KUBECONFIG")
        .output()
        .expect("run ccm");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run_with(conf: &ConfFile) -> (Option<i32>, String) {
    run(&[
        "--cloud-provider=openstack".into(),
        format!("--cloud-config={}", conf.0.display()),
    ])
}

#[test]
fn a_problem_in_every_section_is_listed_in_one_message() {
    // One problem per section; the comment on each line names the line number.
    let conf = ConfFile::with(
        "every-section",
        "[Global]\n\
         auth-url = keystone.example:5000\n\
         username = ccm\n\
         password = hunter2-never-printed\n\
         tenant-name = k8s\n\
         domain-name = Default\n\
         [Networking]\n\
         address-sort-order = 10.0.0.0\n\
         [LoadBalancer]\n\
         lb-method = RANDOM\n\
         [LoadBalancerClass \"ext\"]\n\
         lb-method = RANDOM\n\
         [Route]\n\
         router = r-1\n\
         [Metadata]\n\
         request-timeout = soon\n\
         [BlockStorage]\n\
         node-volume-attach-limit = lots\n",
    );
    let (code, err) = run_with(&conf);
    assert!(
        code.is_some_and(|c| c != 0),
        "exit {code:?} for a bad cloud.conf\n{err}"
    );
    for (section, key, line) in [
        ("[Global]", "auth-url", 2),
        ("[Networking]", "address-sort-order", 8),
        ("[LoadBalancer]", "lb-method", 10),
        ("[LoadBalancerClass \"ext\"]", "lb-method", 12),
        ("[Route]", "router", 14),
        ("[Metadata]", "request-timeout", 16),
        ("[BlockStorage]", "node-volume-attach-limit", 18),
    ] {
        let found = err.lines().any(|l| {
            l.contains(section) && l.contains(key) && l.contains(&format!("(line {line})"))
        });
        assert!(found, "{section} {key} (line {line}) missing in:\n{err}");
    }
    assert!(
        !err.contains("hunter2"),
        "the password must never be printed:\n{err}"
    );
    assert_eq!(
        err.matches("invalid cloud config").count(),
        1,
        "one message listing every problem:\n{err}"
    );
}

#[test]
fn incomplete_credentials_and_a_missing_file_are_named() {
    let conf = ConfFile::with(
        "credentials",
        "[Global]\nauth-url = http://127.0.0.1:9/v3\nusername = ccm\ntenant-name = k8s\n",
    );
    let (code, err) = run_with(&conf);
    assert!(code.is_some_and(|c| c != 0), "{err}");
    for needle in ["password", "user-domain-name", "tenant-domain-name"] {
        assert!(err.contains(needle), "{needle} missing in:\n{err}");
    }

    let (code, err) = run(&[
        "--cloud-provider=openstack".into(),
        "--cloud-config=/nonexistent/stratus/cloud.conf".into(),
    ]);
    assert!(code.is_some_and(|c| c != 0), "{err}");
    assert!(err.contains("/nonexistent/stratus/cloud.conf"), "{err}");

    let (code, err) = run(&["--cloud-provider=openstack".into()]);
    assert!(code.is_some_and(|c| c != 0), "{err}");
    assert!(err.contains("--cloud-config"), "{err}");
}
