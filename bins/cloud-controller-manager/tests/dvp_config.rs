//! `--cloud-provider=dvp` refuses a missing or bad configuration at start, naming every problem
//! and printing no credential, before any cluster is contacted.

use std::process::Command;

use base64::Engine as _;

fn run(vars: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"));
    cmd.arg("--cloud-provider=dvp")
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("DVP_KUBERNETES_CONFIG_BASE64")
        .env_remove("DVP_NAMESPACE");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run ccm");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn missing_dvp_configuration_names_both_variables() {
    let (code, err) = run(&[], &[]);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("DVP_KUBERNETES_CONFIG_BASE64"), "{err}");
    assert!(err.contains("DVP_NAMESPACE"), "{err}");
}

#[test]
fn bad_dvp_configuration_is_refused_without_printing_the_token() {
    let kubeconfig = "apiVersion: v1
kind: Config
clusters: [{name: p, cluster: {server: 'ftp://parent'}}]
users: [{name: u, user: {token: very-secret-token}}]
contexts: [{name: c, context: {cluster: p, user: u}}]
current-context: c
";
    let encoded = base64::engine::general_purpose::STANDARD.encode(kubeconfig);
    let (code, err) = run(
        &[
            ("DVP_KUBERNETES_CONFIG_BASE64", &encoded),
            ("DVP_NAMESPACE", "Not_A_Namespace"),
        ],
        &[],
    );
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("not an http(s) URL"), "{err}");
    assert!(err.contains("not a namespace name"), "{err}");
    assert!(!err.contains("very-secret-token"), "{err}");
}
