//! Part 1's list: every config input of every shipped binary (and why a binary has none), with
//! the placeholders the test fills in.

use std::path::{Path, PathBuf};

/// One config input of one binary. In `args` and `env` values: `{junk}` is the junk file's path,
/// `{junk-text}` its content (text shapes only, for variables), `{cert}`/`{key}` a valid
/// certificate and key, `{clouds-conf}`, `{ca-conf}`, `{key-conf}` a cloud.conf whose
/// `clouds-file`, `ca-file` or `key-file` is the junk, `{cert-is-junk}`/`{key-is-junk}` a
/// `tls.crt`/`tls.key` directory with the junk as one of the two, `{closed}` a closed port.
pub(crate) struct Input {
    pub(crate) binary: &'static str,
    pub(crate) args: &'static [&'static str],
    pub(crate) env: &'static [(&'static str, &'static str)],
    /// `Some("{junk}")`: the junk on stdin; other text is given as is.
    pub(crate) stdin: Option<&'static str>,
    /// What the output names whenever the junk is refused (`{junk}` and `{dir}` replaced), or
    /// `None` when some junk is valid input (a webhook template is any text).
    pub(crate) names: Option<&'static str>,
}

pub(crate) const fn input(
    binary: &'static str,
    args: &'static [&'static str],
    names: &'static str,
) -> Input {
    Input {
        binary,
        args,
        env: &[],
        stdin: None,
        names: Some(names),
    }
}

/// A variable; `names` as in [`Input::names`] (some junk is a valid value of some variables: a
/// base64 kubeconfig, a JSON object).
pub(crate) const fn variable(
    binary: &'static str,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    names: Option<&'static str>,
) -> Input {
    Input {
        binary,
        args,
        env,
        stdin: None,
        names,
    }
}

/// Every config input of every binary. Adding a binary or a flag is one line.
pub(crate) const INPUTS: &[Input] = &[
    // cloud-controller-manager: the cloud config of each provider, the kubeconfigs, leader
    // migration, the serving certificate and key, the DVP parent kubeconfig variable.
    input(
        "cloud-controller-manager",
        &["--cloud-provider=aws", "--cloud-config={junk}"],
        "--cloud-config {junk}",
    ),
    input(
        "cloud-controller-manager",
        &["--cloud-provider=openstack", "--cloud-config={junk}"],
        "--cloud-config {junk}",
    ),
    input(
        "cloud-controller-manager",
        &["--cloud-provider=openstack", "--cloud-config={clouds-conf}"],
        "{junk}",
    ),
    input(
        "cloud-controller-manager",
        &["--cloud-provider=openstack", "--cloud-config={ca-conf}"],
        "{junk}",
    ),
    input(
        "cloud-controller-manager",
        &["--cloud-provider=openstack", "--cloud-config={key-conf}"],
        "{junk}",
    ),
    input(
        "cloud-controller-manager",
        &["--cloud-provider=dvp", "--cloud-config={junk}"],
        "--cloud-config {junk}",
    ),
    variable(
        "cloud-controller-manager",
        &["--cloud-provider=dvp"],
        &[
            ("DVP_KUBERNETES_CONFIG_BASE64", "{junk-text}"),
            ("DVP_NAMESPACE", "ns"),
        ],
        None,
    ),
    input(
        "cloud-controller-manager",
        &["--cloud-provider=aws", "--kubeconfig={junk}"],
        "--kubeconfig {junk}",
    ),
    variable(
        "cloud-controller-manager",
        &["--cloud-provider=aws"],
        &[("KUBECONFIG", "{junk}")],
        Some("KUBECONFIG={junk}"),
    ),
    input(
        "cloud-controller-manager",
        &["--cloud-provider=aws", "--authentication-kubeconfig={junk}"],
        "--authentication-kubeconfig {junk}",
    ),
    input(
        "cloud-controller-manager",
        &["--cloud-provider=aws", "--authorization-kubeconfig={junk}"],
        "--authorization-kubeconfig {junk}",
    ),
    input(
        "cloud-controller-manager",
        &[
            "--cloud-provider=aws",
            "--enable-leader-migration",
            "--leader-migration-config={junk}",
        ],
        "--leader-migration-config {junk}",
    ),
    input(
        "cloud-controller-manager",
        &[
            "--cloud-provider=aws",
            "--tls-cert-file={junk}",
            "--tls-private-key-file={key}",
        ],
        "--tls-cert-file {junk}",
    ),
    input(
        "cloud-controller-manager",
        &[
            "--cloud-provider=aws",
            "--tls-cert-file={cert}",
            "--tls-private-key-file={junk}",
        ],
        "--tls-private-key-file {junk}",
    ),
    // dvp-csi-driver: its cloud config and the parent kubeconfig variable.
    input(
        "dvp-csi-driver",
        &["--endpoint=unix://{dir}/csi.sock", "--cloud-config={junk}"],
        "--cloud-config {junk}",
    ),
    variable(
        "dvp-csi-driver",
        &["--endpoint=unix://{dir}/csi.sock"],
        &[
            ("DVP_KUBERNETES_CONFIG_BASE64", "{junk-text}"),
            ("DVP_NAMESPACE", "ns"),
        ],
        None,
    ),
    // capdvp-controller-manager: cloud config, kubeconfigs, serving certificate and key.
    input(
        "capdvp-controller-manager",
        &["--cloud-config={junk}"],
        "--cloud-config {junk}",
    ),
    variable(
        "capdvp-controller-manager",
        &[],
        &[
            ("DVP_KUBERNETES_CONFIG_BASE64", "{junk-text}"),
            ("DVP_NAMESPACE", "ns"),
        ],
        None,
    ),
    input(
        "capdvp-controller-manager",
        &["--kubeconfig={junk}"],
        "--kubeconfig {junk}",
    ),
    input(
        "capdvp-controller-manager",
        &[
            "--secure-port=8443",
            "--bind-address=127.0.0.1",
            "--authentication-kubeconfig={junk}",
        ],
        "--authentication-kubeconfig {junk}",
    ),
    input(
        "capdvp-controller-manager",
        &[
            "--secure-port=8443",
            "--bind-address=127.0.0.1",
            "--authorization-kubeconfig={junk}",
        ],
        "--authorization-kubeconfig {junk}",
    ),
    input(
        "capdvp-controller-manager",
        &[
            "--secure-port=8443",
            "--bind-address=127.0.0.1",
            "--tls-cert-file={junk}",
            "--tls-private-key-file={key}",
        ],
        "--tls-cert-file {junk}",
    ),
    input(
        "capdvp-controller-manager",
        &[
            "--secure-port=8443",
            "--bind-address=127.0.0.1",
            "--tls-cert-file={cert}",
            "--tls-private-key-file={junk}",
        ],
        "--tls-private-key-file {junk}",
    ),
    // cinder-csi-plugin: cloud.conf, the clouds.yaml and TLS files it names.
    input(
        "cinder-csi-plugin",
        &["--endpoint=unix://{dir}/csi.sock", "--cloud-config={junk}"],
        "--cloud-config {junk}",
    ),
    input(
        "cinder-csi-plugin",
        &[
            "--endpoint=unix://{dir}/csi.sock",
            "--cloud-config={clouds-conf}",
        ],
        "{junk}",
    ),
    input(
        "cinder-csi-plugin",
        &[
            "--endpoint=unix://{dir}/csi.sock",
            "--cloud-config={ca-conf}",
            "--provide-node-service=false",
        ],
        "{junk}",
    ),
    input(
        "cinder-csi-plugin",
        &[
            "--endpoint=unix://{dir}/csi.sock",
            "--cloud-config={key-conf}",
            "--provide-node-service=false",
        ],
        "{junk}",
    ),
    // module-controller: kubeconfig and the chart's values file.
    input(
        "module-controller",
        &["--cloud-provider=aws", "--kubeconfig={junk}"],
        "--kubeconfig {junk}",
    ),
    input(
        "module-controller",
        &["--cloud-provider=aws", "--values={junk}"],
        "--values {junk}",
    ),
    // cloud-data-discoverer: kubeconfig, serving certificate and key, and its variables.
    input(
        "cloud-data-discoverer",
        &["--cloud-provider=aws", "--kubeconfig={junk}"],
        "--kubeconfig {junk}",
    ),
    input(
        "cloud-data-discoverer",
        &[
            "--cloud-provider=aws",
            "--secure-listen-address=127.0.0.1:0",
            "--tls-cert-file={junk}",
            "--tls-private-key-file={key}",
        ],
        "--tls-cert-file {junk}",
    ),
    input(
        "cloud-data-discoverer",
        &[
            "--cloud-provider=aws",
            "--secure-listen-address=127.0.0.1:0",
            "--tls-cert-file={cert}",
            "--tls-private-key-file={junk}",
        ],
        "--tls-private-key-file {junk}",
    ),
    variable(
        "cloud-data-discoverer",
        &["--cloud-provider=dvp"],
        &[
            ("DVP_KUBERNETES_CONFIG_BASE64", "{junk-text}"),
            ("DVP_NAMESPACE", "ns"),
        ],
        None,
    ),
    variable(
        "cloud-data-discoverer",
        &["--cloud-provider=openstack"],
        &[
            ("MODULE_CONFIG", "{junk-text}"),
            ("OS_AUTH_URL", "http://127.0.0.1:{closed}/v3"),
            ("OS_USERNAME", "u"),
            ("OS_PASSWORD", "p"),
            ("OS_REGION", "r"),
            ("OS_TENANT_NAME", "t"),
            ("OS_DOMAIN_NAME", "d"),
        ],
        None,
    ),
    variable(
        "cloud-data-discoverer",
        &["--cloud-provider=openstack"],
        &[
            ("OS_CACERT", "{junk}"),
            ("OS_AUTH_URL", "http://127.0.0.1:{closed}/v3"),
            ("OS_USERNAME", "u"),
            ("OS_PASSWORD", "p"),
            ("OS_REGION", "r"),
            ("OS_TENANT_NAME", "t"),
            ("OS_DOMAIN_NAME", "d"),
        ],
        Some("{junk}"),
    ),
    // node-termination-handler: the webhook template file (any text is a template) and the
    // kubeconfig it infers.
    Input {
        binary: "node-termination-handler",
        args: &[
            "--node-name=n",
            "--webhook-url=http://127.0.0.1:{closed}/hook",
            "--webhook-template-file={junk}",
        ],
        env: &[],
        stdin: None,
        names: None,
    },
    variable(
        "node-termination-handler",
        &["--node-name=n"],
        &[("KUBECONFIG", "{junk}")],
        Some("KUBECONFIG={junk}"),
    ),
    // aws-load-balancer-controller: kubeconfig and the webhook's certificate directory.
    input(
        "aws-load-balancer-controller",
        &[
            "--cluster-name=c",
            "--aws-region=eu-west-1",
            "--kubeconfig={junk}",
        ],
        "--kubeconfig {junk}",
    ),
    input(
        "aws-load-balancer-controller",
        &[
            "--cluster-name=c",
            "--aws-region=eu-west-1",
            "--webhook-cert-dir={cert-is-junk}",
        ],
        "--webhook-cert-dir {dir}",
    ),
    input(
        "aws-load-balancer-controller",
        &[
            "--cluster-name=c",
            "--aws-region=eu-west-1",
            "--webhook-cert-dir={key-is-junk}",
        ],
        "--webhook-cert-dir {dir}",
    ),
    // ecr-credential-provider: the kubelet's request on stdin (a credential may be in it), and
    // the cache entry a valid request reads (junk is ignored; AWS is a closed port).
    Input {
        binary: "ecr-credential-provider",
        args: &["--cache-dir={dir}/cache"],
        env: &[],
        stdin: Some("{junk}"),
        names: None,
    },
    Input {
        binary: "ecr-credential-provider",
        args: &["--cache-dir={ecr-cache}"],
        env: &[
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "example"),
        ],
        stdin: Some(ECR_REQUEST),
        names: None,
    },
];

/// A valid request for an image in a private ECR registry.
pub(crate) const ECR_REQUEST: &str = r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"123456789012.dkr.ecr.us-east-1.amazonaws.com/app:v1"}"#;

/// A cache directory whose entry for [`ECR_REQUEST`] is `junk` (private to this user, so that it
/// is read).
pub(crate) fn ecr_cache(dir: &Path, junk: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let cache = dir.join("ecr-cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    let key = stratus_ecr::cache::CacheKey {
        registry: "123456789012.dkr.ecr.us-east-1.amazonaws.com".into(),
        region: "us-east-1".into(),
        role: String::new(),
        service_account: String::new(),
    };
    let entry = cache.join(key.file_name());
    std::fs::copy(junk, &entry).unwrap();
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o600)).unwrap();
    cache
}

/// Binaries without a config file or credential input: why.
pub(crate) const NO_CONFIG_INPUT: &[(&str, &str)] = &[
    (
        "ebs-csi-driver",
        "flags and the standard AWS environment only (the region is checked in part 2)",
    ),
    (
        "csi-node-driver-registrar",
        "flags and the driver's socket only: no file is read, no credential held",
    ),
    (
        "csi-livenessprobe",
        "flags and the driver's socket only: no file is read, no credential held",
    ),
];
