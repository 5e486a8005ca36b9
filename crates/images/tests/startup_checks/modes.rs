//! Part 2's list: every binary and mode started without what it needs, and what its one error
//! must name.

/// One binary or mode started without what it needs. Placeholders as in
/// [`Input`](crate::inputs::Input), plus
/// `{port}`: a port the test holds, which the binary would serve on.
pub(crate) struct Mode {
    pub(crate) binary: &'static str,
    pub(crate) args: &'static [&'static str],
    pub(crate) env: &'static [(&'static str, &'static str)],
    pub(crate) stdin: Option<&'static str>,
    /// Each must be named in the one error.
    pub(crate) named: &'static [&'static str],
}

pub(crate) const fn mode(
    binary: &'static str,
    args: &'static [&'static str],
    named: &'static [&'static str],
) -> Mode {
    Mode {
        binary,
        args,
        env: &[],
        stdin: None,
        named,
    }
}

/// The Kubernetes client's problem when no kubeconfig is given and the process is not in a pod.
pub(crate) const NO_KUBECONFIG: &str = "no kubeconfig";

/// Every binary and mode. Adding one is one line.
pub(crate) const MODES: &[Mode] = &[
    // cloud-controller-manager, per provider.
    mode(
        "cloud-controller-manager",
        &[
            "--cloud-provider=aws",
            "--secure-port={port}",
            "--bind-address=127.0.0.1",
        ],
        &[
            "no cluster ID",
            "no AWS region",
            "AWS_REGION",
            NO_KUBECONFIG,
        ],
    ),
    mode(
        "cloud-controller-manager",
        &[
            "--cloud-provider=openstack",
            "--secure-port={port}",
            "--bind-address=127.0.0.1",
        ],
        &["--cloud-config is required", NO_KUBECONFIG],
    ),
    mode(
        "cloud-controller-manager",
        &[
            "--cloud-provider=openstack",
            "--cloud-config={empty-conf}",
            "--secure-port={port}",
            "--bind-address=127.0.0.1",
        ],
        &[
            "auth-url: is required",
            "password: is required",
            "username: is required",
            "tenant-name: is required",
            NO_KUBECONFIG,
        ],
    ),
    mode(
        "cloud-controller-manager",
        &[
            "--cloud-provider=dvp",
            "--secure-port={port}",
            "--bind-address=127.0.0.1",
        ],
        &[
            "DVP_KUBERNETES_CONFIG_BASE64",
            "DVP_NAMESPACE",
            NO_KUBECONFIG,
        ],
    ),
    // ebs-csi-driver, per mode.
    mode(
        "ebs-csi-driver",
        &[
            "controller",
            "--endpoint=unix://{dir}/csi.sock",
            "--http-endpoint=127.0.0.1:{port}",
        ],
        &["no AWS region", "AWS_REGION"],
    ),
    mode(
        "ebs-csi-driver",
        &[
            "node",
            "--endpoint=unix://{dir}/csi.sock",
            "--http-endpoint=127.0.0.1:{port}",
        ],
        &["--node-id", "--availability-zone"],
    ),
    mode(
        "ebs-csi-driver",
        &[
            "all",
            "--endpoint=unix://{dir}/csi.sock",
            "--http-endpoint=127.0.0.1:{port}",
        ],
        &["no AWS region", "--node-id", "--availability-zone"],
    ),
    // cinder-csi-plugin, per service.
    mode(
        "cinder-csi-plugin",
        &[
            "--endpoint=unix://{dir}/csi.sock",
            "--http-endpoint=127.0.0.1:{port}",
            "--cloud-config={empty-conf}",
            "--provide-node-service=false",
        ],
        &["auth-url: is required", "password: is required"],
    ),
    mode(
        "cinder-csi-plugin",
        &[
            "--endpoint=unix://{dir}/csi.sock",
            "--http-endpoint=127.0.0.1:{port}",
            "--cloud-config={os-conf}",
            "--provide-controller-service=false",
        ],
        &["--nodeid", "--availability-zone", "metadata service"],
    ),
    mode(
        "cinder-csi-plugin",
        &[
            "--endpoint=unix://{dir}/csi.sock",
            "--http-endpoint=127.0.0.1:{port}",
            "--cloud-config={empty-conf}",
        ],
        &["auth-url: is required"],
    ),
    // dvp-csi-driver, per service.
    mode(
        "dvp-csi-driver",
        &[
            "--endpoint=unix://{dir}/csi.sock",
            "--http-endpoint=127.0.0.1:{port}",
            "--provide-node-service=false",
        ],
        &["DVP_KUBERNETES_CONFIG_BASE64", "DVP_NAMESPACE"],
    ),
    mode(
        "dvp-csi-driver",
        &[
            "--endpoint=unix://{dir}/csi.sock",
            "--http-endpoint=127.0.0.1:{port}",
            "--provide-controller-service=false",
        ],
        &["--node-name"],
    ),
    mode(
        "dvp-csi-driver",
        &[
            "--endpoint=unix://{dir}/csi.sock",
            "--http-endpoint=127.0.0.1:{port}",
        ],
        &[
            "DVP_KUBERNETES_CONFIG_BASE64",
            "DVP_NAMESPACE",
            "--node-name",
        ],
    ),
    // module-controller: no kubeconfig (the cloud is asked of the apiserver).
    mode(
        "module-controller",
        &[
            "--metrics-bind-address=127.0.0.1:{port}",
            "--health-probe-bind-address=0",
        ],
        &[NO_KUBECONFIG],
    ),
    // cloud-data-discoverer, per cloud, and with no cloud at all (no flag, no cloud variable).
    mode(
        "cloud-data-discoverer",
        &["--listen-address=127.0.0.1:{port}"],
        &[
            NO_KUBECONFIG,
            "--cloud-provider",
            "AWS_REGION",
            "OS_AUTH_URL",
            "DVP_KUBERNETES_CONFIG_BASE64",
        ],
    ),
    mode(
        "cloud-data-discoverer",
        &["--cloud-provider=aws", "--listen-address=127.0.0.1:{port}"],
        &[NO_KUBECONFIG, "no AWS region"],
    ),
    mode(
        "cloud-data-discoverer",
        &[
            "--cloud-provider=openstack",
            "--listen-address=127.0.0.1:{port}",
        ],
        &[
            NO_KUBECONFIG,
            "OS_AUTH_URL",
            "OS_USERNAME",
            "OS_PASSWORD",
            "OS_REGION",
            "OS_TENANT_NAME",
        ],
    ),
    mode(
        "cloud-data-discoverer",
        &["--cloud-provider=dvp", "--listen-address=127.0.0.1:{port}"],
        &[
            NO_KUBECONFIG,
            "DVP_KUBERNETES_CONFIG_BASE64",
            "DVP_NAMESPACE",
        ],
    ),
    // node-termination-handler, IMDS and queue modes.
    mode(
        "node-termination-handler",
        &[
            "--enable-prometheus-server",
            "--prometheus-server-port={port}",
        ],
        &["--node-name", "kubernetes client"],
    ),
    mode(
        "node-termination-handler",
        &[
            "--enable-sqs-termination-draining",
            "--enable-prometheus-server",
            "--prometheus-server-port={port}",
        ],
        &["--queue-url", "kubernetes client"],
    ),
    mode(
        "node-termination-handler",
        &[
            "--enable-sqs-termination-draining",
            "--queue-url=https://queue.example/123/q",
            "--enable-prometheus-server",
            "--prometheus-server-port={port}",
        ],
        &["--aws-region", "kubernetes client"],
    ),
    // aws-load-balancer-controller.
    mode(
        "aws-load-balancer-controller",
        &[
            "--metrics-bind-addr=127.0.0.1:{port}",
            "--webhook-cert-dir={dir}",
        ],
        &[
            "--cluster-name",
            NO_KUBECONFIG,
            "no AWS region",
            "--webhook-cert-dir",
        ],
    ),
    // capdvp-controller-manager.
    mode(
        "capdvp-controller-manager",
        &[
            "--secure-port={port}",
            "--bind-address=127.0.0.1",
            "--health-probe-bind-address=127.0.0.1:0",
            "--webhook-port=0",
        ],
        &[
            "DVP_KUBERNETES_CONFIG_BASE64",
            "DVP_NAMESPACE",
            NO_KUBECONFIG,
        ],
    ),
    // csi-node-driver-registrar: no registration path; every flag wrong at once; no driver
    // answering on its socket (it gives up after --timeout, before binding anything); the exec
    // probe mode before the kubelet reported a registration.
    mode(
        "csi-node-driver-registrar",
        &[
            "--csi-address=unix://{dir}/csi.sock",
            "--http-endpoint=127.0.0.1:{port}",
        ],
        &["--kubelet-registration-path"],
    ),
    mode(
        "csi-node-driver-registrar",
        &[
            "--csi-address=csi.sock",
            "--kubelet-registration-path=csi.sock",
            "--timeout=0s",
            "--http-endpoint=127.0.0.1:{port}",
        ],
        &["--csi-address", "--kubelet-registration-path", "--timeout"],
    ),
    mode(
        "csi-node-driver-registrar",
        &[
            "--csi-address=unix://{dir}/absent-driver.sock",
            "--kubelet-registration-path=/var/lib/kubelet/plugins/test.csi.stratus.dev/csi.sock",
            "--plugin-registration-path={dir}",
        ],
        &["absent-driver.sock"],
    ),
    mode(
        "csi-node-driver-registrar",
        &[
            "--mode=kubelet-registration-probe",
            "--kubelet-registration-path={dir}/csi.sock",
        ],
        &["registration hasn't succeeded"],
    ),
    // csi-livenessprobe: nothing is required (it serves before the driver answers), so every
    // flag wrong at once.
    mode(
        "csi-livenessprobe",
        &[
            "--csi-address=csi.sock",
            "--http-endpoint=127.0.0.1:{port}",
            "--health-port=9000",
            "--metrics-path=metrics",
            "--probe-timeout=0s",
        ],
        &[
            "--csi-address",
            "--http-endpoint, --health-port",
            "--metrics-path",
            "--probe-timeout",
        ],
    ),
    // ecr-credential-provider: a run per image pull, without a request it has nothing to do.
    Mode {
        binary: "ecr-credential-provider",
        args: &["--cache-dir={dir}/cache"],
        env: &[],
        stdin: Some(""),
        named: &["stdin is empty"],
    },
];
