//! Leader migration against a real kube-apiserver: controllers listed for migration run only while
//! this CCM holds the migration Lease (shared with kube-controller-manager), the others run under
//! the main Lease meanwhile, and controllers the configuration gives to another component never
//! run here.

mod common;

use std::collections::BTreeMap;

use common::lb::{lb_setup, Lb, FINALIZER, NS};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use stratus_scenarios::service_fixture::{create_lb_service, get_service};
use stratus_testenv::Identity;

const MIGRATION_LEASE: &str = "cloud-provider-extraction-migration";
const KCM: &str = "kube-controller-manager-0_8f2c";

/// Creates `name` in kube-system, held by kube-controller-manager for an hour.
async fn hold_lease(lb: &Lb, name: &str) {
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("kube-system".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(KCM.into()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    };
    leases(lb)
        .create(&PostParams::default(), &lease)
        .await
        .expect("create the held lease");
}

fn leases(lb: &Lb) -> Api<Lease> {
    Api::namespaced(lb.s.admin.clone(), "kube-system")
}

async fn holder(lb: &Lb, name: &str) -> Option<String> {
    leases(lb)
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Load-balancer calls seen by the AWS proxy.
async fn elb_requests(lb: &Lb) -> u64 {
    lb.s.env
        .aws_request_counts()
        .await
        .unwrap()
        .iter()
        .filter(|(k, _)| k.contains("LoadBalancer"))
        .map(|(_, v)| v)
        .sum()
}

fn ccm_service_writes(lb: &Lb) -> u64 {
    let user = Identity::CloudControllerManager.username();
    lb.s.env.kube_writes_to(user, "services").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrated_controllers_wait_for_the_migration_lease() {
    let lb = lb_setup("migrate", 1).await;
    hold_lease(&lb, MIGRATION_LEASE).await;
    let ccm = lb.s.start_ccm(&[
        "--controllers=cloud-node,service",
        "--enable-leader-migration",
    ]);
    create_lb_service(&lb.s.admin, NS, "web", &[80], BTreeMap::new())
        .await
        .unwrap();
    // cloud-node is not migrated (upstream default): it runs under the main lease at once, and
    // initialises a node created after the Service.
    lb.s.initialized_node().await;
    assert!(
        holder(&lb, "cloud-controller-manager").await.is_some(),
        "main lease held"
    );
    assert_eq!(
        holder(&lb, MIGRATION_LEASE).await.as_deref(),
        Some(KCM),
        "migration lease still kube-controller-manager's"
    );
    // The service controller (migrated by default) has not acted: no finalizer, no AWS call, no
    // Service write.
    let svc = get_service(&lb.s.admin, NS, "web").await.unwrap().unwrap();
    assert!(svc.metadata.finalizers.is_none(), "{:?}", svc.metadata);
    assert_eq!(elb_requests(&lb).await, 0);
    assert_eq!(ccm_service_writes(&lb), 0);
    assert!(
        ccm.log().contains("leader migration enabled"),
        "{}",
        ccm.log()
    );

    // kube-controller-manager steps down (as client-go's release does): the CCM takes the
    // migration lease and the service controller makes the load balancer.
    let mut lease = leases(&lb).get(MIGRATION_LEASE).await.unwrap();
    let spec = lease.spec.as_mut().unwrap();
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    leases(&lb)
        .replace(MIGRATION_LEASE, &PostParams::default(), &lease)
        .await
        .unwrap();
    let svc = lb.wait_ingress("web").await;
    assert_eq!(
        svc.metadata.finalizers.unwrap_or_default(),
        vec![FINALIZER.to_string()]
    );
    let ours = holder(&lb, MIGRATION_LEASE)
        .await
        .expect("migration lease held");
    assert_ne!(ours, KCM);
    assert_eq!(
        holder(&lb, "cloud-controller-manager").await.as_deref(),
        Some(ours.as_str()),
        "one identity holds both leases"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_given_to_kube_controller_manager_never_run_here() {
    let lb = lb_setup("migrate-cfg", 1).await;
    let config = lb.s.env.dir().join("migration.yaml");
    std::fs::write(
        &config,
        "kind: LeaderMigrationConfiguration\n\
         apiVersion: controllermanager.config.k8s.io/v1\n\
         leaderName: custom-migration\n\
         controllerLeaders:\n\
         \x20 - name: service-controller\n\
         \x20   component: kube-controller-manager\n\
         \x20 - name: cloud-node-controller\n\
         \x20   component: cloud-controller-manager\n",
    )
    .unwrap();
    let ccm = lb.s.start_ccm(&[
        "--controllers=cloud-node,service",
        "--enable-leader-migration=true",
        &format!("--leader-migration-config={}", config.display()),
    ]);
    create_lb_service(&lb.s.admin, NS, "web", &[80], BTreeMap::new())
        .await
        .unwrap();
    // cloud-node is migrated here: it runs once the (free) custom migration lease is ours.
    lb.s.initialized_node().await;
    assert!(holder(&lb, "custom-migration").await.is_some());
    assert!(
        ccm.log()
            .contains("leader migration assigns this controller to another component"),
        "{}",
        ccm.log()
    );
    let svc = get_service(&lb.s.admin, NS, "web").await.unwrap().unwrap();
    assert!(svc.metadata.finalizers.is_none(), "{:?}", svc.metadata);
    assert_eq!(elb_requests(&lb).await, 0);
    assert_eq!(ccm_service_writes(&lb), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_migration_settings_are_refused() {
    let lb = lb_setup("migrate-bad", 0).await;
    let config = lb.s.env.dir().join("bad-migration.yaml");
    std::fs::write(
        &config,
        "kind: LeaderMigrationConfiguration\napiVersion: controllermanager.config.k8s.io/v1\nleaderName: m\nresourceLock: endpoints\n",
    )
    .unwrap();
    let cases = [
        (
            vec![
                "--enable-leader-migration".to_string(),
                format!("--leader-migration-config={}", config.display()),
            ],
            "resourceLock is not supported",
        ),
        (
            vec![
                "--enable-leader-migration".to_string(),
                "--leader-elect=false".to_string(),
            ],
            "--enable-leader-migration needs leader election",
        ),
        (
            vec![
                "--enable-leader-migration".to_string(),
                "--leader-migration-config=/nonexistent/migration.yaml".to_string(),
            ],
            "--leader-migration-config /nonexistent/migration.yaml: cannot read",
        ),
    ];
    for (args, want) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut ccm = lb.s.start_ccm(&args);
        let status = ccm.wait();
        assert!(status.is_some_and(|s| !s.success()), "{args:?}: {status:?}");
        assert!(ccm.log().contains(want), "{args:?}: {}", ccm.log());
    }
}
