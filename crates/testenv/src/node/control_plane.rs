//! The real cluster's control plane: etcd, kube-apiserver (on the node IP, ServiceAccount
//! admission on, privileged pods allowed, Node+RBAC authorisation, audit log of writes),
//! kube-controller-manager and kube-scheduler, with client certificates from [`Pki`].

use std::ffi::OsString;
use std::path::Path;

use anyhow::Result;

use crate::core::cluster::{etcd_args, AUDIT_POLICY};
use crate::core::process::{Lifetime, Proc};
use crate::node::netns::NODE_IP;
use crate::node::pki::Pki;
use crate::tools::install::Paths;

/// The apiserver's port on the node IP.
pub const APISERVER_PORT: u16 = 6443;
/// The service range (kube-proxy's ClusterIPs).
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
/// The cluster's pod range (kube-proxy's `--cluster-cidr`).
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";
const ETCD_PORT: u16 = 2379;
const ETCD_PEER_PORT: u16 = 2380;

/// `https://<node IP>:6443`.
pub fn apiserver_url() -> String {
    format!("https://{NODE_IP}:{APISERVER_PORT}")
}

/// Starts etcd and kube-apiserver (not waiting for them).
pub(crate) fn start_store_and_apiserver(
    paths: &Paths,
    dir: &Path,
    pki: &Pki,
) -> Result<(Proc, Proc)> {
    let etcd_url = format!("http://127.0.0.1:{ETCD_PORT}");
    let etcd = Proc::spawn(
        "etcd",
        &paths.etcd,
        etcd_args(&dir.join("etcd-data"), &etcd_url, ETCD_PEER_PORT),
        dir.join("etcd.log"),
        Lifetime::Attached,
    )?;
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, AUDIT_POLICY)?;
    let mut args = Flags::default();
    args.set("etcd-servers", etcd_url);
    args.set("bind-address", NODE_IP);
    args.set("advertise-address", NODE_IP);
    args.set("secure-port", APISERVER_PORT);
    args.set("tls-cert-file", pki.apiserver.cert.display());
    args.set("tls-private-key-file", pki.apiserver.key.display());
    args.set("client-ca-file", pki.ca_cert.display());
    args.set(
        "kubelet-client-certificate",
        pki.apiserver_kubelet_client.cert.display(),
    );
    args.set(
        "kubelet-client-key",
        pki.apiserver_kubelet_client.key.display(),
    );
    args.set("kubelet-certificate-authority", pki.ca_cert.display());
    args.set("kubelet-preferred-address-types", "InternalIP,Hostname");
    args.set("service-account-issuer", "https://kubernetes.default.svc");
    args.set("service-account-key-file", pki.sa_pub.display());
    args.set("service-account-signing-key-file", pki.sa_key.display());
    args.set("service-cluster-ip-range", SERVICE_CIDR);
    args.set("authorization-mode", "Node,RBAC");
    args.set("enable-admission-plugins", "NodeRestriction");
    args.set("allow-privileged", "true");
    args.set("profiling", "false");
    args.set("audit-policy-file", policy.display());
    args.set("audit-log-path", dir.join("audit.log").display());
    args.set("audit-log-format", "json");
    args.set("audit-log-mode", "blocking");
    let apiserver = Proc::spawn(
        "kube-apiserver",
        &paths.kube_apiserver,
        args.0,
        dir.join("kube-apiserver.log"),
        Lifetime::Attached,
    )?;
    Ok((etcd, apiserver))
}

/// Starts kube-controller-manager and kube-scheduler.
pub(crate) fn start_controllers(paths: &Paths, dir: &Path, pki: &Pki) -> Result<(Proc, Proc)> {
    let mut kcm = Flags::default();
    let kubeconfig = pki.kubeconfig("kube-controller-manager");
    for flag in [
        "kubeconfig",
        "authentication-kubeconfig",
        "authorization-kubeconfig",
    ] {
        kcm.set(flag, kubeconfig.display());
    }
    kcm.set("bind-address", "127.0.0.1");
    kcm.set("leader-elect", "false");
    kcm.set("use-service-account-credentials", "true");
    kcm.set("service-account-private-key-file", pki.sa_key.display());
    kcm.set("root-ca-file", pki.ca_cert.display());
    kcm.set("cluster-signing-cert-file", pki.ca_cert.display());
    kcm.set("cluster-signing-key-file", pki.ca_key.display());
    kcm.set("service-cluster-ip-range", SERVICE_CIDR);
    kcm.set("profiling", "false");
    kcm.set(
        "flex-volume-plugin-dir",
        dir.join("volume-plugins").display(),
    );
    let kcm = Proc::spawn(
        "kube-controller-manager",
        &paths.kube_controller_manager(),
        kcm.0,
        dir.join("kube-controller-manager.log"),
        Lifetime::Attached,
    )?;
    let mut scheduler = Flags::default();
    let kubeconfig = pki.kubeconfig("kube-scheduler");
    for flag in [
        "kubeconfig",
        "authentication-kubeconfig",
        "authorization-kubeconfig",
    ] {
        scheduler.set(flag, kubeconfig.display());
    }
    scheduler.set("bind-address", "127.0.0.1");
    scheduler.set("leader-elect", "false");
    scheduler.set("profiling", "false");
    let scheduler = Proc::spawn(
        "kube-scheduler",
        &paths.kube_scheduler(),
        scheduler.0,
        dir.join("kube-scheduler.log"),
        Lifetime::Attached,
    )?;
    Ok((kcm, scheduler))
}

/// `--name=value` arguments in order.
#[derive(Default)]
pub(crate) struct Flags(pub(crate) Vec<OsString>);

impl Flags {
    pub(crate) fn set(&mut self, name: &str, value: impl std::fmt::Display) {
        self.0.push(format!("--{name}={value}").into());
    }
}
