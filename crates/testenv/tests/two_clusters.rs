//! Two Kubernetes clusters in one process (as the DVP provider needs: a parent beside the
//! tenant): both start, both answer, and what is written to one is absent from the other.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use stratus_testenv::{Identity, KubeCluster};

#[tokio::test]
async fn two_clusters_start_side_by_side_and_stay_apart() {
    let (tenant, parent) =
        tokio::try_join!(KubeCluster::start(), KubeCluster::start()).expect("two clusters");
    assert_ne!(tenant.apiserver_url(), parent.apiserver_url());
    assert_ne!(tenant.dir(), parent.dir());
    let tenant_admin = tenant.kube_client(Identity::Admin).await.unwrap();
    let parent_admin = parent.kube_client(Identity::Admin).await.unwrap();
    let mut ns = Namespace::default();
    ns.metadata.name = Some("only-in-parent".into());
    Api::<Namespace>::all(parent_admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create in the parent");
    let in_parent = Api::<Namespace>::all(parent_admin)
        .get_opt("only-in-parent")
        .await
        .unwrap();
    let in_tenant = Api::<Namespace>::all(tenant_admin)
        .get_opt("only-in-parent")
        .await
        .unwrap();
    assert!(in_parent.is_some());
    assert!(in_tenant.is_none(), "the clusters share nothing");
    // Each cluster audits its own writes.
    assert_eq!(parent.kube_writes_by("stratus-admin").unwrap(), 1);
    assert_eq!(tenant.kube_writes_by("stratus-admin").unwrap(), 0);
}
