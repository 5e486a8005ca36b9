//! The real cluster's certificates: one throwaway CA signs the apiserver's and the kubelet's
//! serving certificates and a client certificate per component identity (admin, the node, the
//! scheduler, the controller manager, kube-proxy, the apiserver as the kubelet's client); each
//! identity also gets a kubeconfig embedding its certificate.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::core::cluster::write_private;

/// The client identities with a certificate and a kubeconfig: (file stem, user, group).
const CLIENTS: &[(&str, &str, Option<&str>)] = &[
    ("admin", "stratus-admin", Some("system:masters")),
    ("kube-scheduler", "system:kube-scheduler", None),
    (
        "kube-controller-manager",
        "system:kube-controller-manager",
        None,
    ),
    ("kube-proxy", "system:kube-proxy", None),
];

/// A certificate and key written to disk.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The PEM certificate.
    pub cert: PathBuf,
    /// The PEM private key.
    pub key: PathBuf,
}

/// Everything the real cluster's components read.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA certificate (PEM).
    pub ca_cert: PathBuf,
    /// The CA key (kube-controller-manager signs CSRs with it).
    pub ca_key: PathBuf,
    /// The apiserver's serving certificate.
    pub apiserver: CertFiles,
    /// The kubelet's serving certificate.
    pub kubelet_serving: CertFiles,
    /// The apiserver's client certificate towards the kubelet.
    pub apiserver_kubelet_client: CertFiles,
    /// The service-account signing key and its public half.
    pub sa_key: PathBuf,
    /// The service-account public key.
    pub sa_pub: PathBuf,
    dir: PathBuf,
}

/// The ClusterIP of `kubernetes.default` in the service range the real cluster uses.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

impl Pki {
    /// Writes a CA, every certificate and every kubeconfig (pointing at `server`) under
    /// `dir/pki`.
    pub fn create(dir: &Path, node_ip: Ipv4Addr, node_name: &str, server: &str) -> Result<Pki> {
        let dir = dir.join("pki");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let ca_key = KeyPair::generate().context("generating the CA key")?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params
            .distinguished_name
            .push(DnType::CommonName, "stratus-testenv real-cluster CA");
        let ca_key_pem = ca_key.serialize_pem();
        let ca = CertifiedIssuer::self_signed(params, ca_key).context("signing the CA")?;
        let ca_cert = dir.join("ca.crt");
        std::fs::write(&ca_cert, ca.pem())?;
        let ca_key_path = dir.join("ca.key");
        write_private(&ca_key_path, &ca_key_pem)?;

        let node_ip = node_ip.to_string();
        let apiserver = issue(
            &ca,
            &dir,
            "apiserver",
            "kube-apiserver",
            None,
            &[
                "127.0.0.1",
                &node_ip,
                &KUBERNETES_SERVICE_IP.to_string(),
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let kubelet_serving = issue(
            &ca,
            &dir,
            "kubelet-serving",
            &format!("system:node:{node_name}"),
            Some("system:nodes"),
            &["127.0.0.1", &node_ip, node_name],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let apiserver_kubelet_client = issue(
            &ca,
            &dir,
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            Some("system:masters"),
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let sa = KeyPair::generate().context("generating the service-account key")?;
        let sa_key = dir.join("sa.key");
        write_private(&sa_key, &sa.serialize_pem())?;
        let sa_pub = dir.join("sa.pub");
        std::fs::write(&sa_pub, sa.public_key_pem())?;
        let ca_pem = ca.pem();
        let node_user = format!("system:node:{node_name}");
        let clients =
            CLIENTS
                .iter()
                .copied()
                .chain([("kubelet", node_user.as_str(), Some("system:nodes"))]);
        for (slug, user, group) in clients {
            let files = issue(
                &ca,
                &dir,
                slug,
                user,
                group,
                &[],
                ExtendedKeyUsagePurpose::ClientAuth,
            )?;
            let cert = std::fs::read_to_string(&files.cert)?;
            let key = std::fs::read_to_string(&files.key)?;
            write_private(
                &dir.join(format!("{slug}.kubeconfig")),
                &kubeconfig(server, &ca_pem, &cert, &key),
            )?;
        }
        Ok(Pki {
            ca_cert,
            ca_key: ca_key_path,
            apiserver,
            kubelet_serving,
            apiserver_kubelet_client,
            sa_key,
            sa_pub,
            dir,
        })
    }

    /// The kubeconfig of a client identity (`admin`, `kube-scheduler`,
    /// `kube-controller-manager`, `kube-proxy`, `kubelet`).
    pub fn kubeconfig(&self, slug: &str) -> PathBuf {
        self.dir.join(format!("{slug}.kubeconfig"))
    }
}

fn issue(
    ca: &CertifiedIssuer<'_, KeyPair>,
    dir: &Path,
    slug: &str,
    common_name: &str,
    organisation: Option<&str>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> Result<CertFiles> {
    let key = KeyPair::generate().with_context(|| format!("generating the {slug} key"))?;
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .with_context(|| format!("the {slug} certificate's names"))?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    if let Some(org) = organisation {
        params
            .distinguished_name
            .push(DnType::OrganizationName, org);
    }
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    let cert = params
        .signed_by(&key, ca)
        .with_context(|| format!("signing the {slug} certificate"))?;
    let files = CertFiles {
        cert: dir.join(format!("{slug}.crt")),
        key: dir.join(format!("{slug}.key")),
    };
    std::fs::write(&files.cert, cert.pem())?;
    write_private(&files.key, &key.serialize_pem())?;
    Ok(files)
}

fn kubeconfig(server: &str, ca: &str, cert: &str, key: &str) -> String {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: real
  cluster:
    server: {server}
    certificate-authority-data: {}
users:
- name: real
  user:
    client-certificate-data: {}
    client-key-data: {}
contexts:
- name: real
  context:
    cluster: real
    user: real
current-context: real
",
        b64(ca),
        b64(cert),
        b64(key)
    )
}
