//! The secure port of a CCM under test: a free loopback port, the first answer once it listens,
//! and RBAC for non-resource paths.

use std::net::{SocketAddr, TcpListener};

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, PostParams};
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::https::{self, Answer, Trust};
use stratus_scenarios::wait_for;

use super::{Setup, WAIT};

/// A port free right now on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// Starts the CCM serving HTTPS on a free loopback port.
pub fn start_serving(s: &Setup, extra: &[&str]) -> (CcmProcess, SocketAddr) {
    let port = free_port();
    let mut args = vec![
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ccm = s.start_ccm(&args);
    (ccm, SocketAddr::from(([127, 0, 0, 1], port)))
}

/// The first answer of `path`, once the server accepts connections.
pub async fn first_answer(
    ccm: &CcmProcess,
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
    trust: &Trust,
) -> Answer {
    wait_for(&format!("an answer on {path}"), WAIT, || async {
        Ok(https::get(addr, path, token, trust).await.ok())
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()))
}

pub async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> Answer {
    https::get(addr, path, token, &Trust::Any)
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e:#}"))
}

/// Lets `user` GET `/metrics`, as a Prometheus deployment's RBAC would.
pub async fn grant_metrics(admin: &kube::Client, user: &str) {
    grant_paths(admin, "stratus-test-metrics-reader", user, &["/metrics"]).await;
}

/// Lets `user` GET `paths` (a ClusterRole and its binding named `name`).
pub async fn grant_paths(admin: &kube::Client, name: &str, user: &str, paths: &[&str]) {
    let name = name.to_string();
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(paths.iter().map(|p| p.to_string()).collect()),
            verbs: vec!["get".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("create ClusterRole");
    let binding = ClusterRoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name,
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "User".into(),
            name: user.into(),
            namespace: None,
        }]),
    };
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("create ClusterRoleBinding");
}
