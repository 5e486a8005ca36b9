//! Every chart in `charts/` rendered with its defaults: built or pinned images, hardened, sized from the benchmarks, probed.
//!
//! The charts are found by listing `charts/`, so a new chart is checked without touching this
//! file; a chart that cannot render without some values gets the least that renders it
//! ([`REQUIRED`]), and a few values switches that add containers or modes are rendered too
//! ([`VARIANTS`]). For every container and init container of every Deployment, DaemonSet,
//! StatefulSet, Job, CronJob and Pod the rules are:
//!
//! - **image**: under [`REPOSITORY_PREFIX`] it is exactly `<repository>:<version>` of an image
//!   `make images` builds (`crates/images/src/table.rs`, tag = the workspace version, no `v`);
//!   anything else is in [`THIRD_PARTY`] at exactly its pinned tag.
//! - **securityContext**: runs as non-root (`runAsNonRoot: true`, from the container or the pod,
//!   and not `runAsUser: 0`), `readOnlyRootFilesystem: true`, `capabilities.drop` holds `ALL` and
//!   nothing is added, `allowPrivilegeEscalation: false`, not privileged. Root and privileged are
//!   allowed only by an [`EXCEPTIONS`] entry whose security context is a key of the chart's
//!   `values.yaml` with a comment saying why; privileged only beside a Bidirectional mount (the
//!   one thing that needs it), and then the capability and escalation rules cannot apply (the
//!   API rejects `allowPrivilegeEscalation: false` on a privileged container).
//! - **resources**: CPU and memory requests and a memory limit no smaller than the request; a
//!   container whose numbers a benchmark measured ([`SIZING`], every container of ours must have
//!   one) requests at least the benchmark's peak RSS and is limited to at least twice it.
//! - **probes**: liveness and readiness on every long-running container (not on Jobs' or
//!   init containers), on a port the container declares when named.
//!
//! Every violation of every chart is listed in one failure, as `chart/Kind/name/container: rule`.
//! Beside it: every chart lints with `helm lint --strict` (given its [`REQUIRED`] values), and a
//! real kube-apiserver accepts every workload rendered (server-side dry run).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    Container, Namespace, Pod, PodSpec, Probe, ResourceRequirements, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, PostParams};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use stratus_images::table::{Kind, BINARIES, REPOSITORY_PREFIX};
use stratus_runtime::build_info::BUILD;
use stratus_testenv::tools::csi_sidecars::{self, Sidecar};
use stratus_testenv::{repo_root, Identity, KubeCluster};

/// The least values each chart needs to render at all (its `required`/`fail` checks); the test
/// also proves each entry is still needed.
const REQUIRED: &[(&str, &[&str])] = &[
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
const VARIANTS: &[(&str, &str, &[&str])] = &[
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
struct ThirdParty {
    /// Repository without tag.
    repository: &'static str,
    /// The tag every chart names.
    tag: &'static str,
    /// The sidecar the test environment builds and runs in its place, if any
    /// (`crates/testenv/src/tools/csi_sidecars.rs`).
    tested: Option<Sidecar>,
    /// Why the tested version is not the chart's, when it is not.
    differs: Option<&'static str>,
}

/// Every third-party image of every chart, and which version the test environment runs.
const THIRD_PARTY: &[ThirdParty] = &[
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
enum Allow {
    /// Running as uid 0.
    Root,
    /// `privileged: true` (only beside a Bidirectional mount).
    Privileged,
}

/// A container allowed to break a security rule, and the `values.yaml` key holding its
/// security context, which must carry a comment saying why.
struct Exception {
    chart: &'static str,
    workload: &'static str,
    container: &'static str,
    allow: &'static [Allow],
    values_key: &'static str,
}

/// The CSI node plugins mount (Bidirectional propagation needs privileged; mount(2) needs root),
/// their registrars write root-owned kubelet directories and sockets as root, and their
/// liveness-probes connect to the root-owned plugin socket as root, both with no capability.
const EXCEPTIONS: &[Exception] = &[
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
const NO_PROBES: &[(&str, &str, &str, &str)] = &[];

/// Where a container's memory was measured: files in `bench/results/` and JSON pointers to peak
/// RSS values in MiB; the largest counts.
struct Sizing {
    chart: &'static str,
    workload: &'static str,
    container: &'static str,
    peaks: &'static [(&'static str, &'static str)],
}

const CCM_PEAKS: &[(&str, &str)] = &[
    ("bench-nodes.json", "/ccm_peak_rss_mib"),
    ("bench-openstack-nodes.json", "/ccm_peak_rss_mib"),
    ("bench-lb.json", "/ccm_peak_rss_mib"),
    ("bench-openstack-lb.json", "/ccm_peak_rss_mib"),
    ("bench-faults.json", "/ccm_peak_rss_mib"),
    ("bench-dvp.json", "/ccm_peak_rss_mib"),
];
const CSI_CONTROLLER_PEAKS: &[(&str, &str)] = &[
    ("bench-csi.json", "/ebs/controller/peak_rss_mib"),
    ("bench-csi.json", "/cinder/controller/peak_rss_mib"),
];
const CSI_NODE_PEAKS: &[(&str, &str)] = &[
    ("bench-csi.json", "/ebs/node_plugin/peak_rss_mib"),
    ("bench-csi.json", "/cinder/node_plugin/peak_rss_mib"),
];

/// The provisioner and the attacher, measured by bench-csi with each backend; the resizer and
/// the snapshotter watch the same claims and volumes as the provisioner and are sized like it.
const PROVISIONER_PEAKS: &[(&str, &str)] = &[
    (
        "bench-csi.json",
        "/ebs/sidecars/csi-provisioner/peak_rss_mib",
    ),
    (
        "bench-csi.json",
        "/cinder/sidecars/csi-provisioner/peak_rss_mib",
    ),
];
const ATTACHER_PEAKS: &[(&str, &str)] = &[
    ("bench-csi.json", "/ebs/sidecars/csi-attacher/peak_rss_mib"),
    (
        "bench-csi.json",
        "/cinder/sidecars/csi-attacher/peak_rss_mib",
    ),
];

/// Stratus' own CSI sidecars, measured by bench-sidecars under the kubelet's probes.
const REGISTRAR_PEAKS: &[(&str, &str)] = &[(
    "bench-sidecars.json",
    "/csi-node-driver-registrar/peak_rss_mib",
)];
const LIVENESSPROBE_PEAKS: &[(&str, &str)] =
    &[("bench-sidecars.json", "/csi-livenessprobe/peak_rss_mib")];

/// A sidecar of a CSI chart's controller Deployment or node DaemonSet.
const fn sidecar(
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
const SIZING: &[Sizing] = &[
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

/// The namespace charts are rendered into.
const NAMESPACE: &str = "stratus-charts";

/// Every chart directory (one holding a `Chart.yaml`), sorted.
fn charts() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo_root().join("charts"))
        .expect("read charts/")
        .map(|e| e.expect("charts/ entry").path())
        .filter(|p| p.join("Chart.yaml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn helm() -> PathBuf {
    stratus_testenv::ensure_installed()
        .expect("testenv install (builds helm)")
        .helm
}

/// `helm template` of `charts/<chart>` with `sets`; the documents, or helm's error.
fn render(helm: &Path, chart: &str, sets: &[&str]) -> Result<Vec<serde_yaml::Value>, String> {
    let tmp = env!("CARGO_TARGET_TMPDIR");
    let out = Command::new(helm)
        .args(["template", "stratus", "--namespace", NAMESPACE])
        .arg(repo_root().join("charts").join(chart))
        .args(sets.iter().flat_map(|s| ["--set", s]))
        // No user configuration or repositories leak in.
        .env("HELM_CONFIG_HOME", tmp)
        .env("HELM_CACHE_HOME", tmp)
        .env("HELM_DATA_HOME", tmp)
        .output()
        .expect("run helm");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).map_err(|e| format!("{chart}: {e}")))
        .filter(|v| !matches!(v, Ok(serde_yaml::Value::Null)))
        .collect()
}

fn required(chart: &str) -> &'static [&'static str] {
    REQUIRED
        .iter()
        .find(|(c, _)| *c == chart)
        .map_or(&[], |(_, sets)| sets)
}

/// One rendering to check: the chart, a label (`""` for the defaults) and its values.
struct Rendering {
    chart: String,
    label: &'static str,
    sets: Vec<&'static str>,
}

impl Rendering {
    fn name(&self) -> String {
        if self.label.is_empty() {
            self.chart.clone()
        } else {
            format!("{}[{}]", self.chart, self.label)
        }
    }
}

/// The defaults of every chart, then every variant.
fn renderings(charts: &[String]) -> Vec<Rendering> {
    let mut all: Vec<Rendering> = charts
        .iter()
        .map(|c| Rendering {
            chart: c.clone(),
            label: "",
            sets: required(c).to_vec(),
        })
        .collect();
    for (chart, label, sets) in VARIANTS {
        let mut values = required(chart).to_vec();
        values.extend_from_slice(sets);
        all.push(Rendering {
            chart: chart.to_string(),
            label,
            sets: values,
        });
    }
    all
}

/// A workload's pod: its kind and name, the pod spec and whether its containers run for good.
struct Workload {
    kind: String,
    name: String,
    pod: PodSpec,
    long_running: bool,
}

fn typed<T: DeserializeOwned>(doc: &serde_yaml::Value) -> Result<T, String> {
    serde_yaml::from_value(doc.clone()).map_err(|e| e.to_string())
}

/// The workload a document is, if it is one.
fn workload(doc: &serde_yaml::Value) -> Option<Result<Workload, String>> {
    let kind = doc["kind"].as_str()?.to_string();
    let name = doc["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let template = |t: Option<k8s_openapi::api::core::v1::PodTemplateSpec>| {
        t.and_then(|t| t.spec)
            .ok_or_else(|| format!("{kind} {name} has no pod template"))
    };
    let pod: Result<(PodSpec, bool), String> = match kind.as_str() {
        "Deployment" => typed::<Deployment>(doc)
            .and_then(|d| template(d.spec.map(|s| s.template)).map(|p| (p, true))),
        "DaemonSet" => typed::<DaemonSet>(doc)
            .and_then(|d| template(d.spec.map(|s| s.template)).map(|p| (p, true))),
        "StatefulSet" => typed::<StatefulSet>(doc)
            .and_then(|d| template(d.spec.map(|s| s.template)).map(|p| (p, true))),
        "Job" => {
            typed::<Job>(doc).and_then(|d| template(d.spec.map(|s| s.template)).map(|p| (p, false)))
        }
        "CronJob" => typed::<CronJob>(doc).and_then(|d| {
            template(d.spec.and_then(|s| s.job_template.spec).map(|s| s.template))
                .map(|p| (p, false))
        }),
        "Pod" => typed::<Pod>(doc).and_then(|p| {
            let spec = p.spec.ok_or_else(|| format!("Pod {name} has no spec"))?;
            let long = !matches!(
                spec.restart_policy.as_deref(),
                Some("Never") | Some("OnFailure")
            );
            Ok((spec, long))
        }),
        _ => return None,
    };
    Some(pod.map(|(pod, long_running)| Workload {
        kind,
        name,
        pod,
        long_running,
    }))
}

/// The images `make images` builds, as the charts must name them.
fn built_images() -> Vec<String> {
    BINARIES
        .iter()
        .filter(|b| b.kind == Kind::Image)
        .map(|b| format!("{}:{}", b.repository(), BUILD.version))
        .collect()
}

fn check_image(image: &str, built: &[String]) -> Option<String> {
    if image.starts_with(&format!("{REPOSITORY_PREFIX}/")) {
        if built.iter().any(|b| b == image) {
            return None;
        }
        let (repository, tag) = image.rsplit_once(':').unwrap_or((image, ""));
        let same_repo = built
            .iter()
            .find(|b| b.rsplit_once(':').map(|(r, _)| r) == Some(repository));
        return Some(match same_repo {
            Some(b) => format!(
                "image: {image} has tag {tag:?}, but `make images` tags it {b} (crates/images)"
            ),
            None => format!("image: {image} is no image `make images` builds ({built:?})"),
        });
    }
    let (repository, tag) = match image.rsplit_once(':') {
        Some((r, t)) if !r.is_empty() && !t.contains('/') => (r, t),
        _ => return Some(format!("image: {image} has no tag")),
    };
    if tag == "latest" {
        return Some(format!("image: {image} is not pinned (latest)"));
    }
    match THIRD_PARTY.iter().find(|t| t.repository == repository) {
        Some(t) if t.tag == tag => None,
        Some(t) => Some(format!(
            "image: {image}, but the charts pin {repository}:{} (THIRD_PARTY)",
            t.tag
        )),
        None => Some(format!(
            "image: {image} is neither built by `make images` nor listed in THIRD_PARTY"
        )),
    }
}

fn exception(chart: &str, workload: &str, container: &str) -> Option<&'static Exception> {
    EXCEPTIONS
        .iter()
        .find(|e| judged_as(chart, e.chart) && e.workload == workload && e.container == container)
}

/// Whether a list entry of `entry_chart` speaks for a container rendered by `chart`: its own, or
/// a module chart's (`charts/cloud-provider-*`) whose `charts/` links that component chart — a
/// component's containers are judged alike alone and inside its module.
fn judged_as(chart: &str, entry_chart: &str) -> bool {
    entry_chart == chart || subcharts(chart).iter().any(|s| s == entry_chart)
}

/// The component charts a module chart links under its `charts/` (their directories' names).
fn subcharts(chart: &str) -> Vec<String> {
    let dir = repo_root().join("charts").join(chart).join("charts");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|target| Some(target.file_name()?.to_string_lossy().into_owned()))
        .collect()
}

/// The security rules; `used` collects which exception allowances were needed.
fn check_security(
    chart: &str,
    w: &Workload,
    c: &Container,
    used: &mut BTreeSet<(String, String, String, String)>,
) -> Vec<String> {
    let mut out = Vec::new();
    let sc = c.security_context.clone().unwrap_or_default();
    let pod_sc = w.pod.security_context.clone().unwrap_or_default();
    let exc = exception(chart, &w.name, &c.name);
    let allows = |a: Allow| exc.is_some_and(|e| e.allow.contains(&a));
    let mut need = |a: Allow| {
        used.insert((
            chart.to_string(),
            w.name.clone(),
            c.name.clone(),
            format!("{a:?}"),
        ));
    };

    let non_root = sc.run_as_non_root.or(pod_sc.run_as_non_root) == Some(true);
    let uid = sc.run_as_user.or(pod_sc.run_as_user);
    if !non_root || uid == Some(0) {
        need(Allow::Root);
        if !allows(Allow::Root) {
            out.push(format!(
                "securityContext: may run as root (runAsNonRoot {:?}, runAsUser {uid:?})",
                sc.run_as_non_root.or(pod_sc.run_as_non_root)
            ));
        }
    }
    let privileged = sc.privileged == Some(true);
    if privileged {
        need(Allow::Privileged);
        if !allows(Allow::Privileged) {
            out.push("securityContext: privileged".into());
        }
        let bidirectional = c
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_propagation.as_deref() == Some("Bidirectional"));
        if !bidirectional {
            out.push(
                "securityContext: privileged without a Bidirectional mount, the one thing that \
                 needs it"
                    .into(),
            );
        }
    }
    if sc.read_only_root_filesystem != Some(true) {
        out.push("securityContext: readOnlyRootFilesystem is not true".into());
    }
    // A privileged container holds every capability whatever it drops, and the API rejects
    // allowPrivilegeEscalation: false beside privileged: true.
    if !privileged {
        let caps = sc.capabilities.clone().unwrap_or_default();
        if !caps.drop.iter().flatten().any(|d| d == "ALL") {
            out.push("securityContext: capabilities.drop does not hold ALL".into());
        }
        if let Some(add) = caps.add.filter(|a| !a.is_empty()) {
            out.push(format!("securityContext: capabilities.add {add:?}"));
        }
        if sc.allow_privilege_escalation != Some(false) {
            out.push("securityContext: allowPrivilegeEscalation is not false".into());
        }
    }
    out
}

/// A quantity in bytes (`64Mi`, `1G`, `128974848`, `500m`).
fn bytes(q: &str) -> Option<f64> {
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("m", 1e-3),
    ];
    for (suffix, factor) in SUFFIXES {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<f64>().ok().map(|n| n * factor);
        }
    }
    q.parse::<f64>().ok()
}

const MIB: f64 = 1024.0 * 1024.0;

/// The largest peak RSS (MiB) of a sizing entry, or why it cannot be read.
fn bench_peak(s: &Sizing) -> Result<f64, String> {
    let mut peak: f64 = 0.0;
    for (file, pointer) in s.peaks {
        let path = repo_root().join("bench/results").join(file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{file}: {e}"))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{file}: {e}"))?;
        let value = json
            .pointer(pointer)
            .and_then(|v| v.as_f64())
            .ok_or_else(|| format!("{file} has no number at {pointer}"))?;
        peak = peak.max(value);
    }
    Ok(peak)
}

fn check_resources(chart: &str, w: &Workload, c: &Container, ours: bool) -> Vec<String> {
    let mut out = Vec::new();
    let r: ResourceRequirements = c.resources.clone().unwrap_or_default();
    let get = |m: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
               key: &str| {
        m.as_ref().and_then(|m| m.get(key)).map(|q| q.0.clone())
    };
    let cpu = get(&r.requests, "cpu");
    let memory = get(&r.requests, "memory").and_then(|q| bytes(&q));
    let limit = get(&r.limits, "memory").and_then(|q| bytes(&q));
    if cpu.is_none() {
        out.push("resources: no CPU request".into());
    }
    if memory.is_none() {
        out.push("resources: no memory request".into());
    }
    if limit.is_none() {
        out.push("resources: no memory limit".into());
    }
    if let (Some(m), Some(l)) = (memory, limit) {
        if l < m {
            out.push("resources: the memory limit is below the request".into());
        }
    }
    let sizing = SIZING
        .iter()
        .find(|s| judged_as(chart, s.chart) && s.workload == w.name && s.container == c.name);
    match sizing {
        None if ours => out
            .push("resources: no benchmark behind its memory (add the container to SIZING)".into()),
        None => {}
        Some(s) => match bench_peak(s) {
            Err(e) => out.push(format!("resources: {e}")),
            Ok(peak) => {
                if memory.is_some_and(|m| m < peak * MIB) {
                    out.push(format!(
                        "resources: the memory request {:.1} MiB is below the benchmarks' peak RSS {peak} MiB",
                        memory.unwrap() / MIB
                    ));
                }
                if limit.is_some_and(|l| l < 2.0 * peak * MIB) {
                    out.push(format!(
                        "resources: the memory limit {:.1} MiB is below twice the benchmarks' peak RSS {peak} MiB",
                        limit.unwrap() / MIB
                    ));
                }
            }
        },
    }
    out
}

/// A named probe port must be one the container declares (kubelet resolves names only there).
fn probe_port_problem(c: &Container, which: &str, p: &Probe) -> Option<String> {
    let port = p
        .http_get
        .as_ref()
        .map(|h| &h.port)
        .or(p.tcp_socket.as_ref().map(|t| &t.port))?;
    let IntOrString::String(name) = port else {
        return None;
    };
    let declared = c
        .ports
        .iter()
        .flatten()
        .any(|p| p.name.as_deref() == Some(name.as_str()));
    (!declared).then(|| format!("{which}: port {name:?} is not declared by the container"))
}

fn check_probes(chart: &str, w: &Workload, c: &Container, init: bool) -> Vec<String> {
    let mut out = Vec::new();
    let sidecar = init && c.restart_policy.as_deref() == Some("Always");
    let long_running = w.long_running && (!init || sidecar);
    let excused = NO_PROBES
        .iter()
        .any(|(ch, wl, co, _)| judged_as(chart, ch) && *wl == w.name && *co == c.name);
    if long_running && !excused {
        if c.liveness_probe.is_none() {
            out.push("probes: no livenessProbe".into());
        }
        if c.readiness_probe.is_none() {
            out.push("probes: no readinessProbe".into());
        }
    }
    for (which, p) in [
        ("livenessProbe", &c.liveness_probe),
        ("readinessProbe", &c.readiness_probe),
        ("startupProbe", &c.startup_probe),
    ] {
        if let Some(problem) = p.as_ref().and_then(|p| probe_port_problem(c, which, p)) {
            out.push(problem);
        }
    }
    out
}

/// The line of the key `path` (dotted) in a block-style YAML text.
fn key_line(text: &str, path: &[&str]) -> Option<usize> {
    let mut stack: Vec<(usize, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('-') {
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else {
            continue;
        };
        let indent = line.len() - trimmed.len();
        while stack.last().is_some_and(|(d, _)| *d >= indent) {
            stack.pop();
        }
        stack.push((indent, key.trim().to_string()));
        if stack.len() == path.len() && stack.iter().zip(path).all(|((_, k), p)| k == p) {
            return Some(i);
        }
    }
    None
}

/// An exception's values key: present, holding the container's rendered security context, with
/// a comment right above it.
fn check_exception_values(e: &Exception, rendered: Option<&SecurityContext>) -> Vec<String> {
    let file = repo_root().join("charts").join(e.chart).join("values.yaml");
    let text = std::fs::read_to_string(&file).expect("values.yaml");
    let path: Vec<&str> = e.values_key.split('.').collect();
    let mut out = Vec::new();
    let here = format!("{}/values.yaml {}", e.chart, e.values_key);
    match key_line(&text, &path) {
        None => out.push(format!("{here}: no such key")),
        Some(line) => {
            let above = line
                .checked_sub(1)
                .and_then(|l| text.lines().nth(l))
                .unwrap_or_default();
            if !above.trim_start().starts_with('#') {
                out.push(format!(
                    "{here}: no comment above the key saying why {} needs {:?}",
                    e.container, e.allow
                ));
            }
        }
    }
    let values: serde_yaml::Value = serde_yaml::from_str(&text).expect("values.yaml parses");
    let node = path.iter().fold(&values, |v, k| &v[*k]);
    match serde_yaml::from_value::<SecurityContext>(node.clone()) {
        Ok(sc) if Some(&sc) == rendered => {}
        Ok(_) => out.push(format!(
            "{here}: is not the security context {}/{} renders",
            e.workload, e.container
        )),
        Err(err) => out.push(format!("{here}: not a security context: {err}")),
    }
    out
}

#[test]
fn every_chart_runs_built_or_pinned_images_hardened_sized_and_probed() {
    let helm = helm();
    let charts = charts();
    assert!(
        charts.len() >= 11,
        "charts/ holds fewer charts than expected: {charts:?}"
    );
    let built = built_images();
    let mut violations: Vec<String> = Vec::new();
    let mut used = BTreeSet::new();
    let mut seen_containers = BTreeSet::new();
    let mut workloads = 0;

    // The lists name charts that exist, and every REQUIRED entry is still needed.
    let lists = REQUIRED
        .iter()
        .map(|(c, _)| *c)
        .chain(VARIANTS.iter().map(|(c, _, _)| *c))
        .chain(EXCEPTIONS.iter().map(|e| e.chart))
        .chain(SIZING.iter().map(|s| s.chart));
    for chart in lists {
        if !charts.iter().any(|c| c == chart) {
            violations.push(format!("{chart}: named in this test, but not in charts/"));
        }
    }
    for (chart, _) in REQUIRED {
        if render(&helm, chart, &[]).is_ok() {
            violations.push(format!(
                "{chart}: renders without its REQUIRED values; drop the entry"
            ));
        }
    }
    for t in THIRD_PARTY {
        if t.tag.is_empty() || t.tag == "latest" {
            violations.push(format!("THIRD_PARTY {}: not pinned", t.repository));
        }
        if let Some(s) = t.tested {
            match (s.version == t.tag, t.differs) {
                (true, Some(_)) => violations.push(format!(
                    "THIRD_PARTY {}: the test environment runs {} now; drop `differs`",
                    t.repository, s.version
                )),
                (false, None) => violations.push(format!(
                    "THIRD_PARTY {}: the charts pin {} but the test environment runs {}; say why \
                     in `differs` or align them",
                    t.repository, t.tag, s.version
                )),
                _ => {}
            }
        }
    }

    for r in renderings(&charts) {
        let docs = match render(&helm, &r.chart, &r.sets) {
            Ok(d) => d,
            Err(e) => {
                violations.push(format!("{}: helm template fails: {e}", r.name()));
                continue;
            }
        };
        for doc in &docs {
            let w = match workload(doc) {
                None => continue,
                Some(Err(e)) => {
                    violations.push(format!("{}: {e}", r.name()));
                    continue;
                }
                Some(Ok(w)) => w,
            };
            workloads += 1;
            let inits = w.pod.init_containers.iter().flatten().map(|c| (c, true));
            let mains = w.pod.containers.iter().map(|c| (c, false));
            for (c, init) in inits.chain(mains) {
                seen_containers.insert((r.chart.clone(), w.name.clone(), c.name.clone()));
                let image = c.image.clone().unwrap_or_default();
                let ours = image.starts_with(&format!("{REPOSITORY_PREFIX}/"));
                let mut problems: Vec<String> = check_image(&image, &built).into_iter().collect();
                problems.extend(check_security(&r.chart, &w, c, &mut used));
                problems.extend(check_resources(&r.chart, &w, c, ours));
                problems.extend(check_probes(&r.chart, &w, c, init));
                if let Some(e) = exception(&r.chart, &w.name, &c.name) {
                    problems.extend(check_exception_values(e, c.security_context.as_ref()));
                }
                for p in problems {
                    violations.push(format!(
                        "{}/{}/{}/{}: {p}",
                        r.name(),
                        w.kind,
                        w.name,
                        c.name
                    ));
                }
            }
        }
    }

    // No stale entry: every exception allowance and sizing names a container that needs it.
    for e in EXCEPTIONS {
        for a in e.allow {
            let key = (
                e.chart.to_string(),
                e.workload.to_string(),
                e.container.to_string(),
                format!("{a:?}"),
            );
            if !used.contains(&key) {
                violations.push(format!(
                    "EXCEPTIONS {}/{}/{}: {a:?} is no longer needed; drop it",
                    e.chart, e.workload, e.container
                ));
            }
        }
    }
    for s in SIZING {
        let key = (
            s.chart.to_string(),
            s.workload.to_string(),
            s.container.to_string(),
        );
        if !seen_containers.contains(&key) {
            violations.push(format!(
                "SIZING {}/{}/{}: no such container rendered",
                s.chart, s.workload, s.container
            ));
        }
    }
    for (chart, workload, container, _) in NO_PROBES {
        let key = (
            chart.to_string(),
            workload.to_string(),
            container.to_string(),
        );
        if !seen_containers.contains(&key) {
            violations.push(format!(
                "NO_PROBES {chart}/{workload}/{container}: no such container rendered"
            ));
        }
    }

    assert!(workloads > 0, "no workload rendered from {charts:?}");
    assert!(
        violations.is_empty(),
        "{} violation(s) in the charts' defaults:\n  {}",
        violations.len(),
        violations.join("\n  ")
    );
}

#[test]
fn every_chart_lints_strictly() {
    let helm = helm();
    let tmp = env!("CARGO_TARGET_TMPDIR");
    let mut failures = Vec::new();
    for chart in charts() {
        let out = Command::new(&helm)
            .args(["lint", "--strict"])
            .arg(repo_root().join("charts").join(&chart))
            .args(required(&chart).iter().flat_map(|s| ["--set", s]))
            .env("HELM_CONFIG_HOME", tmp)
            .env("HELM_CACHE_HOME", tmp)
            .env("HELM_DATA_HOME", tmp)
            .output()
            .expect("run helm lint");
        if !out.status.success() {
            failures.push(format!(
                "{chart}:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Creates `doc` with a server-side dry run, typed by its kind.
async fn dry_run(client: &kube::Client, doc: &serde_yaml::Value) -> Result<(), String> {
    async fn create<K>(client: &kube::Client, doc: &serde_yaml::Value) -> Result<(), String>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + DeserializeOwned
            + serde::Serialize,
        K::DynamicType: Default,
    {
        let object: K = typed(doc)?;
        let namespace = doc["metadata"]["namespace"].as_str().unwrap_or(NAMESPACE);
        let api: Api<K> = Api::namespaced(client.clone(), namespace);
        let params = PostParams {
            dry_run: true,
            ..Default::default()
        };
        api.create(&params, &object)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    match doc["kind"].as_str().unwrap_or_default() {
        "Deployment" => create::<Deployment>(client, doc).await,
        "DaemonSet" => create::<DaemonSet>(client, doc).await,
        "StatefulSet" => create::<StatefulSet>(client, doc).await,
        "Job" => create::<Job>(client, doc).await,
        "CronJob" => create::<CronJob>(client, doc).await,
        "Pod" => create::<Pod>(client, doc).await,
        _ => Ok(()),
    }
}

#[tokio::test]
async fn every_chart_workload_is_accepted_by_the_apiserver() {
    let helm = helm();
    let renderings = renderings(&charts());
    let rendered: Vec<(String, Result<Vec<serde_yaml::Value>, String>)> = renderings
        .iter()
        .map(|r| (r.name(), render(&helm, &r.chart, &r.sets)))
        .collect();
    let cluster = KubeCluster::start().await.expect("cluster");
    let client = cluster.kube_client(Identity::Admin).await.expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [NAMESPACE, "kube-system"] {
        let object: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
        // kube-system exists already.
        let _ = namespaces.create(&PostParams::default(), &object).await;
    }
    let mut rejected = Vec::new();
    let mut created = 0;
    for (name, docs) in rendered {
        let docs = docs.unwrap_or_else(|e| panic!("{name}: helm template fails: {e}"));
        for doc in &docs {
            if workload(doc).is_none() {
                continue;
            }
            created += 1;
            if let Err(e) = dry_run(&client, doc).await {
                rejected.push(format!(
                    "{name}/{}/{}: {e}",
                    doc["kind"].as_str().unwrap_or_default(),
                    doc["metadata"]["name"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    assert!(created > 0, "no workload rendered");
    assert!(
        rejected.is_empty(),
        "rejected:\n  {}",
        rejected.join("\n  ")
    );
}

/// The CSIDriver objects as Deckhouse's modules render them: no `fsGroupPolicy` (the API
/// default) for EBS and DVP, `ReadWriteOnceWithFSType` for Cinder, each a chart value; and the
/// Cinder topology switch reaching the driver and the provisioner.
#[test]
fn csi_drivers_and_the_cinder_topology_switch() {
    let helm = helm();
    let csidriver = |chart: &str, sets: &[&str]| -> serde_yaml::Value {
        let mut sets_all: Vec<&str> = required(chart).to_vec();
        sets_all.extend(sets);
        let docs = render(&helm, chart, &sets_all).unwrap_or_else(|e| panic!("{chart}: {e}"));
        docs.into_iter()
            .find(|d| d["kind"] == "CSIDriver")
            .unwrap_or_else(|| panic!("{chart}: no CSIDriver"))
    };
    for (chart, want) in [
        ("aws-ebs-csi-driver", None),
        ("dvp-csi-driver", None),
        ("cinder-csi-plugin", Some("ReadWriteOnceWithFSType")),
    ] {
        let d = csidriver(chart, &[]);
        assert_eq!(d["spec"]["attachRequired"], true, "{chart}");
        assert_eq!(d["spec"]["podInfoOnMount"], false, "{chart}");
        assert_eq!(d["spec"]["fsGroupPolicy"].as_str(), want, "{chart}");
        let set = csidriver(chart, &["csiDriver.fsGroupPolicy=File"]);
        assert_eq!(set["spec"]["fsGroupPolicy"], "File", "{chart}");
    }
    let args_of = |sets: &[&str], workload: &str, container: &str| -> Vec<String> {
        let mut sets_all: Vec<&str> = required("cinder-csi-plugin").to_vec();
        sets_all.extend(sets);
        let docs = render(&helm, "cinder-csi-plugin", &sets_all).unwrap();
        let w = docs
            .iter()
            .find(|d| d["metadata"]["name"] == workload)
            .unwrap_or_else(|| panic!("no {workload}"));
        let containers = w["spec"]["template"]["spec"]["containers"]
            .as_sequence()
            .unwrap();
        let c = containers
            .iter()
            .find(|c| c["name"] == container)
            .unwrap_or_else(|| panic!("no {container}"));
        serde_yaml::from_value(c["args"].clone()).unwrap()
    };
    let on = args_of(&[], "csi-cinder-controllerplugin", "csi-provisioner");
    assert!(
        on.contains(&"--feature-gates=Topology=true".to_string())
            && on.contains(&"--strict-topology".to_string()),
        "{on:?}"
    );
    let off = args_of(
        &["topology.enabled=false"],
        "csi-cinder-controllerplugin",
        "csi-provisioner",
    );
    assert!(
        off.contains(&"--feature-gates=Topology=false".to_string()),
        "{off:?}"
    );
    let driver = args_of(
        &["topology.enabled=false"],
        "csi-cinder-controllerplugin",
        "cinder-csi-plugin",
    );
    assert!(
        driver.contains(&"--with-topology=false".to_string()),
        "{driver:?}"
    );
    let node = args_of(
        &["topology.additional.topology\\.kubernetes\\.io/region=RegionOne"],
        "csi-cinder-nodeplugin",
        "cinder-csi-plugin",
    );
    assert!(
        node.contains(&"--with-topology=true".to_string()),
        "{node:?}"
    );
    assert!(
        node.contains(&"--additional-topology=topology.kubernetes.io/region=RegionOne".to_string()),
        "{node:?}"
    );
}
