//! The lists the chart rules read: the values each chart needs, the variants rendered beside
//! the defaults, the pinned third-party images, the security exceptions, and the benchmark behind
//! each container's memory.

use stratus_testenv::tools::csi_sidecars::{self, Sidecar};

/// The least values each chart needs to render at all (its `required`/`fail` checks); the test
/// also proves each entry is still needed.
pub(crate) const REQUIRED: &[(&str, &[&str])] = &[
    ("aws-load-balancer-controller", &["clusterName=cluster"]),
    (
        "capdvp-controller-manager",
        &[
            "dvp.parentKubeconfigSecret.name=dvp-parent",
            "dvp.namespace=tenant",
        ],
    ),
    (
        "dvp-csi-driver",
        &[
            "dvp.parentKubeconfigSecret.name=dvp-parent",
            "dvp.namespace=tenant",
        ],
    ),
    (
        "cloud-provider-dvp",
        &[
            "dvp-csi-driver.dvp.parentKubeconfigSecret.name=dvp-parent",
            "dvp-csi-driver.dvp.namespace=tenant",
            "capdvp-controller-manager.dvp.parentKubeconfigSecret.name=dvp-parent",
            "capdvp-controller-manager.dvp.namespace=tenant",
        ],
    ),
    ("node-manager-aws", &["region=eu-central-1"]),
    (
        "node-manager-openstack",
        &[
            "region=RegionOne",
            "connection.authURL=https://keystone.example:5000/v3",
            "connection.username=u",
            "connection.password=p",
            "connection.domainName=Default",
            "connection.tenantName=t",
            "internalNetworkNames={int}",
        ],
    ),
];

/// Renderings beside the defaults: values switches that add containers or change the workload.
pub(crate) const VARIANTS: &[(&str, &str, &[&str])] = &[
    (
        "aws-ebs-csi-driver",
        "snapshotter",
        &["sidecars.snapshotter.enabled=true"],
    ),
    (
        "node-termination-handler",
        "queue mode",
        &[
            "enableSqsTerminationDraining=true",
            "queueURL=https://sqs.eu-central-1.amazonaws.com/1/q",
        ],
    ),
];

/// An image `make images` does not build, pinned to an exact tag.
pub(crate) struct ThirdParty {
    /// Repository without tag.
    pub(crate) repository: &'static str,
    /// The tag every chart names.
    pub(crate) tag: &'static str,
    /// The sidecar the test environment builds and runs in its place, if any
    /// (`crates/testenv/src/tools/csi_sidecars.rs`).
    pub(crate) tested: Option<Sidecar>,
    /// Why the tested version is not the chart's, when it is not.
    pub(crate) differs: Option<&'static str>,
}

/// Every third-party image of every chart, and which version the test environment runs.
pub(crate) const THIRD_PARTY: &[ThirdParty] = &[
    ThirdParty {
        repository: "registry.k8s.io/sig-storage/csi-provisioner",
        tag: "v6.4.0",
        tested: Some(csi_sidecars::PROVISIONER),
        differs: Some(
            "v6.4.0 needs sig-storage-lib-external-provisioner v13.1.0, which the Go module proxy \
             here does not serve; v6.3.0 has the same flags and client-go",
        ),
    },
    ThirdParty {
        repository: "registry.k8s.io/sig-storage/csi-attacher",
        tag: "v4.13.0",
        tested: Some(csi_sidecars::ATTACHER),
        differs: None,
    },
    ThirdParty {
        repository: "registry.k8s.io/sig-storage/csi-resizer",
        tag: "v2.3.0",
        tested: Some(csi_sidecars::RESIZER),
        differs: None,
    },
    ThirdParty {
        repository: "registry.k8s.io/sig-storage/csi-snapshotter",
        tag: "v8.2.0",
        tested: None,
        differs: None,
    },
];

/// What an exception allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Allow {
    /// Running as uid 0.
    Root,
    /// `privileged: true` (only beside a Bidirectional mount).
    Privileged,
}

/// A container allowed to break a security rule, and the `values.yaml` key holding its
/// security context, which must carry a comment saying why.
pub(crate) struct Exception {
    pub(crate) chart: &'static str,
    pub(crate) workload: &'static str,
    pub(crate) container: &'static str,
    pub(crate) allow: &'static [Allow],
    pub(crate) values_key: &'static str,
}

/// The CSI node plugins mount (Bidirectional propagation needs privileged; mount(2) needs root),
/// their registrars write root-owned kubelet directories and sockets as root, and their
/// liveness-probes connect to the root-owned plugin socket as root, both with no capability.
pub(crate) const EXCEPTIONS: &[Exception] = &[
    Exception {
        chart: "aws-ebs-csi-driver",
        workload: "ebs-csi-node",
        container: "ebs-plugin",
        allow: &[Allow::Root, Allow::Privileged],
        values_key: "node.securityContext",
    },
    Exception {
        chart: "aws-ebs-csi-driver",
        workload: "ebs-csi-node",
        container: "node-driver-registrar",
        allow: &[Allow::Root],
        values_key: "sidecars.nodeDriverRegistrar.securityContext",
    },
    Exception {
        chart: "aws-ebs-csi-driver",
        workload: "ebs-csi-node",
        container: "liveness-probe",
        allow: &[Allow::Root],
        values_key: "sidecars.livenessProbe.nodeSecurityContext",
    },
    Exception {
        chart: "cinder-csi-plugin",
        workload: "csi-cinder-nodeplugin",
        container: "cinder-csi-plugin",
        allow: &[Allow::Root, Allow::Privileged],
        values_key: "node.securityContext",
    },
    Exception {
        chart: "cinder-csi-plugin",
        workload: "csi-cinder-nodeplugin",
        container: "node-driver-registrar",
        allow: &[Allow::Root],
        values_key: "sidecars.nodeDriverRegistrar.securityContext",
    },
    Exception {
        chart: "cinder-csi-plugin",
        workload: "csi-cinder-nodeplugin",
        container: "liveness-probe",
        allow: &[Allow::Root],
        values_key: "sidecars.livenessProbe.nodeSecurityContext",
    },
    Exception {
        chart: "dvp-csi-driver",
        workload: "csi-dvp-nodeplugin",
        container: "dvp-csi-driver",
        allow: &[Allow::Root, Allow::Privileged],
        values_key: "node.securityContext",
    },
    Exception {
        chart: "dvp-csi-driver",
        workload: "csi-dvp-nodeplugin",
        container: "node-driver-registrar",
        allow: &[Allow::Root],
        values_key: "sidecars.nodeDriverRegistrar.securityContext",
    },
];

/// Long-running containers allowed to have no probe, with the reason. None today.
pub(crate) const NO_PROBES: &[(&str, &str, &str, &str)] = &[];

/// Where a container's memory was measured: files in `bench/results/` and JSON pointers to peak
/// RSS values in MiB; the largest counts.
pub(crate) struct Sizing {
    pub(crate) chart: &'static str,
    pub(crate) workload: &'static str,
    pub(crate) container: &'static str,
    pub(crate) peaks: &'static [(&'static str, &'static str)],
}

pub(crate) const CCM_PEAKS: &[(&str, &str)] = &[
    ("bench-nodes.json", "/ccm_peak_rss_mib"),
    ("bench-openstack-nodes.json", "/ccm_peak_rss_mib"),
    ("bench-lb.json", "/ccm_peak_rss_mib"),
    ("bench-openstack-lb.json", "/ccm_peak_rss_mib"),
    ("bench-faults.json", "/ccm_peak_rss_mib"),
    ("bench-dvp.json", "/ccm_peak_rss_mib"),
];
pub(crate) const CSI_CONTROLLER_PEAKS: &[(&str, &str)] = &[
    ("bench-csi.json", "/ebs/controller/peak_rss_mib"),
    ("bench-csi.json", "/cinder/controller/peak_rss_mib"),
];
pub(crate) const CSI_NODE_PEAKS: &[(&str, &str)] = &[
    ("bench-csi.json", "/ebs/node_plugin/peak_rss_mib"),
    ("bench-csi.json", "/cinder/node_plugin/peak_rss_mib"),
];

/// The provisioner and the attacher, measured by bench-csi with each backend; the resizer and
/// the snapshotter watch the same claims and volumes as the provisioner and are sized like it.
pub(crate) const PROVISIONER_PEAKS: &[(&str, &str)] = &[
    (
        "bench-csi.json",
        "/ebs/sidecars/csi-provisioner/peak_rss_mib",
    ),
    (
        "bench-csi.json",
        "/cinder/sidecars/csi-provisioner/peak_rss_mib",
    ),
];
pub(crate) const ATTACHER_PEAKS: &[(&str, &str)] = &[
    ("bench-csi.json", "/ebs/sidecars/csi-attacher/peak_rss_mib"),
    (
        "bench-csi.json",
        "/cinder/sidecars/csi-attacher/peak_rss_mib",
    ),
];

/// Stratus' own CSI sidecars, measured by bench-sidecars under the kubelet's probes.
pub(crate) const REGISTRAR_PEAKS: &[(&str, &str)] = &[(
    "bench-sidecars.json",
    "/csi-node-driver-registrar/peak_rss_mib",
)];
pub(crate) const LIVENESSPROBE_PEAKS: &[(&str, &str)] =
    &[("bench-sidecars.json", "/csi-livenessprobe/peak_rss_mib")];

/// A sidecar of a CSI chart's controller Deployment or node DaemonSet.
pub(crate) const fn sidecar(
    chart: &'static str,
    workload: &'static str,
    container: &'static str,
    peaks: &'static [(&'static str, &'static str)],
) -> Sizing {
    Sizing {
        chart,
        workload,
        container,
        peaks,
    }
}

/// The benchmark behind each container's memory. Every container running a Stratus image needs
/// an entry.
pub(crate) const SIZING: &[Sizing] = &[
    Sizing {
        chart: "cloud-controller-manager",
        workload: "aws-cloud-controller-manager",
        container: "cloud-controller-manager",
        peaks: CCM_PEAKS,
    },
    Sizing {
        chart: "module-controller",
        workload: "module-controller",
        container: "module-controller",
        peaks: &[("bench-module.json", "/peak_rss_mib")],
    },
    Sizing {
        chart: "cloud-data-discoverer",
        workload: "cloud-data-discoverer",
        container: "cloud-data-discoverer",
        peaks: &[
            ("bench-discoverer.json", "/peak_rss_mib"),
            ("bench-discoverer-openstack.json", "/peak_rss_mib"),
        ],
    },
    Sizing {
        chart: "node-termination-handler",
        workload: "aws-node-termination-handler",
        container: "aws-node-termination-handler",
        peaks: &[("bench-nth.json", "/imds_idle_memory/peak_rss_mib")],
    },
    Sizing {
        chart: "capdvp-controller-manager",
        workload: "capdvp-controller-manager",
        container: "capdvp-controller-manager",
        peaks: &[("bench-capdvp.json", "/capdvp_peak_rss_mib")],
    },
    Sizing {
        chart: "aws-load-balancer-controller",
        workload: "aws-load-balancer-controller",
        container: "controller",
        peaks: &[
            ("bench-albc-release.json", "/ingress/peak_rss_mib"),
            (
                "bench-albc-release.json",
                "/targetgroupbinding/peak_rss_mib",
            ),
        ],
    },
    Sizing {
        chart: "aws-ebs-csi-driver",
        workload: "ebs-csi-controller",
        container: "ebs-plugin",
        peaks: &[("bench-csi.json", "/ebs/controller/peak_rss_mib")],
    },
    Sizing {
        chart: "aws-ebs-csi-driver",
        workload: "ebs-csi-node",
        container: "ebs-plugin",
        peaks: &[("bench-csi.json", "/ebs/node_plugin/peak_rss_mib")],
    },
    Sizing {
        chart: "cinder-csi-plugin",
        workload: "csi-cinder-controllerplugin",
        container: "cinder-csi-plugin",
        peaks: &[("bench-csi.json", "/cinder/controller/peak_rss_mib")],
    },
    Sizing {
        chart: "cinder-csi-plugin",
        workload: "csi-cinder-nodeplugin",
        container: "cinder-csi-plugin",
        peaks: &[("bench-csi.json", "/cinder/node_plugin/peak_rss_mib")],
    },
    // No benchmark runs the DVP backend: the CSI core's other two backends stand in.
    Sizing {
        chart: "dvp-csi-driver",
        workload: "csi-dvp-controllerplugin",
        container: "dvp-csi-driver",
        peaks: CSI_CONTROLLER_PEAKS,
    },
    Sizing {
        chart: "dvp-csi-driver",
        workload: "csi-dvp-nodeplugin",
        container: "dvp-csi-driver",
        peaks: CSI_NODE_PEAKS,
    },
    sidecar(
        "aws-ebs-csi-driver",
        "ebs-csi-controller",
        "csi-provisioner",
        PROVISIONER_PEAKS,
    ),
    sidecar(
        "aws-ebs-csi-driver",
        "ebs-csi-controller",
        "csi-attacher",
        ATTACHER_PEAKS,
    ),
    sidecar(
        "aws-ebs-csi-driver",
        "ebs-csi-controller",
        "csi-resizer",
        PROVISIONER_PEAKS,
    ),
    sidecar(
        "aws-ebs-csi-driver",
        "ebs-csi-controller",
        "csi-snapshotter",
        PROVISIONER_PEAKS,
    ),
    sidecar(
        "cinder-csi-plugin",
        "csi-cinder-controllerplugin",
        "csi-provisioner",
        PROVISIONER_PEAKS,
    ),
    sidecar(
        "cinder-csi-plugin",
        "csi-cinder-controllerplugin",
        "csi-attacher",
        ATTACHER_PEAKS,
    ),
    sidecar(
        "cinder-csi-plugin",
        "csi-cinder-controllerplugin",
        "csi-resizer",
        PROVISIONER_PEAKS,
    ),
    sidecar(
        "dvp-csi-driver",
        "csi-dvp-controllerplugin",
        "csi-provisioner",
        PROVISIONER_PEAKS,
    ),
    sidecar(
        "dvp-csi-driver",
        "csi-dvp-controllerplugin",
        "csi-attacher",
        ATTACHER_PEAKS,
    ),
    sidecar(
        "dvp-csi-driver",
        "csi-dvp-controllerplugin",
        "csi-resizer",
        PROVISIONER_PEAKS,
    ),
    sidecar(
        "aws-ebs-csi-driver",
        "ebs-csi-node",
        "node-driver-registrar",
        REGISTRAR_PEAKS,
    ),
    sidecar(
        "cinder-csi-plugin",
        "csi-cinder-nodeplugin",
        "node-driver-registrar",
        REGISTRAR_PEAKS,
    ),
    sidecar(
        "dvp-csi-driver",
        "csi-dvp-nodeplugin",
        "node-driver-registrar",
        REGISTRAR_PEAKS,
    ),
    sidecar(
        "aws-ebs-csi-driver",
        "ebs-csi-controller",
        "liveness-probe",
        LIVENESSPROBE_PEAKS,
    ),
    sidecar(
        "aws-ebs-csi-driver",
        "ebs-csi-node",
        "liveness-probe",
        LIVENESSPROBE_PEAKS,
    ),
    sidecar(
        "cinder-csi-plugin",
        "csi-cinder-controllerplugin",
        "liveness-probe",
        LIVENESSPROBE_PEAKS,
    ),
    sidecar(
        "cinder-csi-plugin",
        "csi-cinder-nodeplugin",
        "liveness-probe",
        LIVENESSPROBE_PEAKS,
    ),
    sidecar(
        "dvp-csi-driver",
        "csi-dvp-controllerplugin",
        "liveness-probe",
        LIVENESSPROBE_PEAKS,
    ),
];
