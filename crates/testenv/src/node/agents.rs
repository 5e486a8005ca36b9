//! The node's agents: kubelet (external cloud provider, so its Node waits for a CCM; every
//! directory it writes under the cluster's directory; serving on the node IP with a certificate
//! from [`Pki`]) and kube-proxy in iptables mode (leaving the host-wide conntrack settings
//! alone).

use std::path::Path;

use anyhow::Result;

use crate::core::process::{Lifetime, Proc};
use crate::node::control_plane::{Flags, CLUSTER_CIDR};
use crate::node::netns::NODE_IP;
use crate::node::pki::Pki;
use crate::tools::install::Paths;

/// kubelet's API port on the node IP.
pub const KUBELET_PORT: u16 = 10250;
/// kubelet's `/healthz` on loopback.
pub const KUBELET_HEALTHZ_PORT: u16 = 10248;

/// kubelet's root directory (the CSI charts' `kubeletPath` value must name it).
pub fn kubelet_root(dir: &Path) -> std::path::PathBuf {
    dir.join("kubelet")
}

/// Starts kubelet as `node_name` against the CRI `endpoint`.
pub(crate) fn start_kubelet(
    paths: &Paths,
    dir: &Path,
    pki: &Pki,
    node_name: &str,
    endpoint: &str,
) -> Result<Proc> {
    for sub in ["kubelet", "manifests", "pod-logs", "volume-plugins"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    let config = dir.join("kubelet-config.yaml");
    std::fs::write(&config, kubelet_config(dir, pki, endpoint))?;
    let mut flags = Flags::default();
    flags.set("kubeconfig", pki.kubeconfig("kubelet").display());
    flags.set("config", config.display());
    flags.set("cloud-provider", "external");
    flags.set("hostname-override", node_name);
    flags.set("node-ip", NODE_IP);
    flags.set("root-dir", kubelet_root(dir).display());
    flags.set("cert-dir", dir.join("kubelet-pki").display());
    flags.set("volume-plugin-dir", dir.join("volume-plugins").display());
    Proc::spawn(
        "kubelet",
        &paths.kubelet(),
        flags.0,
        dir.join("kubelet.log"),
        Lifetime::Attached,
    )
}

/// Starts kube-proxy for `node_name`.
pub(crate) fn start_proxy(paths: &Paths, dir: &Path, pki: &Pki, node_name: &str) -> Result<Proc> {
    let mut flags = Flags::default();
    flags.set("kubeconfig", pki.kubeconfig("kube-proxy").display());
    flags.set("proxy-mode", "iptables");
    flags.set("cluster-cidr", CLUSTER_CIDR);
    flags.set("hostname-override", node_name);
    flags.set("metrics-bind-address", "127.0.0.1:10249");
    flags.set("healthz-bind-address", "127.0.0.1:10256");
    // conntrack's table size and timeouts are host-wide: leave them as they are.
    flags.set("conntrack-max-per-core", 0);
    flags.set("conntrack-tcp-timeout-established", "0s");
    flags.set("conntrack-tcp-timeout-close-wait", "0s");
    flags.set("profiling", "false");
    Proc::spawn(
        "kube-proxy",
        &paths.kube_proxy(),
        flags.0,
        dir.join("kube-proxy.log"),
        Lifetime::Attached,
    )
}

/// The KubeletConfiguration: webhook authn/authz, cgroup v1 with cgroupfs, no image GC and
/// eviction only near a full disk (imported images cannot be pulled again), logs and static
/// pods under `dir`.
fn kubelet_config(dir: &Path, pki: &Pki, endpoint: &str) -> String {
    let dir = dir.display();
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {NODE_IP}
port: {KUBELET_PORT}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {KUBELET_HEALTHZ_PORT}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {ca}
authorization:
  mode: Webhook
tlsCertFile: {cert}
tlsPrivateKeyFile: {key}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: {endpoint}
failCgroupV1: false
failSwapOn: false
staticPodPath: {dir}/manifests
podLogsDir: {dir}/pod-logs
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
protectKernelDefaults: false
serializeImagePulls: false
maxPods: 50
syncFrequency: 5s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
shutdownGracePeriod: 0s
"#,
        ca = pki.ca_cert.display(),
        cert = pki.kubelet_serving.cert.display(),
        key = pki.kubelet_serving.key.display(),
    )
}
