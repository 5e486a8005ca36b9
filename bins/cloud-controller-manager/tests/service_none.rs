//! `service.beta.kubernetes.io/aws-load-balancer-type: none` (Deckhouse's patch to upstream)
//! against a real kube-apiserver and moto: no load balancer, one instance target group per port
//! named after the load-balancer name, the nodes registered on the node port, kube-proxy's (or
//! the health-check node port's) health check, a protocol change recreating the groups, the
//! status marker `0.0.0.0` / `none` (a status value, nothing binds it), and the groups deleted
//! with the Service or when the annotation goes.

mod common;

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2::types::TargetGroup;
use common::lb::{annotations, lb_setup, Lb, NS, P};
use common::WAIT;
use k8s_openapi::api::core::v1::Service;
use stratus_scenarios::service_fixture::{
    create_lb_service, delete_service, get_service, ingress_hostname, load_balancer_name,
    patch_service,
};
use stratus_scenarios::wait_for;

/// Deckhouse's status marker of a `type: none` Service.
fn is_marked(svc: &Service) -> bool {
    let ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref());
    ingress.is_some_and(|i| {
        i.len() == 1
            && i[0].ip.as_deref() == Some("0.0.0.0")
            && i[0].hostname.as_deref() == Some("none")
    })
}

async fn wait_marked(lb: &Lb, name: &str) -> Service {
    wait_for(&format!("status of {name}"), WAIT, || async {
        Ok(get_service(&lb.s.admin, NS, name).await?.filter(is_marked))
    })
    .await
    .unwrap()
}

/// The groups named `names`, by name (absent ones left out).
async fn groups(lb: &Lb, names: &[String]) -> BTreeMap<String, TargetGroup> {
    let mut out = BTreeMap::new();
    for n in names {
        if let Ok(d) = lb.lbs.elbv2.describe_target_groups().names(n).send().await {
            if let Some(g) = d.target_groups().first() {
                out.insert(n.clone(), g.clone());
            }
        }
    }
    out
}

/// (instance ID, port) registered in a group, sorted.
async fn targets(lb: &Lb, arn: &str) -> Vec<(String, i32)> {
    let h = lb
        .lbs
        .elbv2
        .describe_target_health()
        .target_group_arn(arn)
        .send()
        .await
        .unwrap();
    let mut t: Vec<(String, i32)> = h
        .target_health_descriptions()
        .iter()
        .filter_map(|d| d.target())
        .filter_map(|t| Some((t.id()?.to_string(), t.port()?)))
        .collect();
    t.sort();
    t
}

fn group_names(svc: &Service) -> Vec<String> {
    let lb_name = load_balancer_name(svc);
    (0..svc.spec.as_ref().unwrap().ports.as_ref().unwrap().len())
        .map(|i| format!("{}-{i}", &lb_name[..31 - i.to_string().len()]))
        .collect()
}

fn node_ports(svc: &Service) -> Vec<i32> {
    svc.spec
        .as_ref()
        .unwrap()
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| p.node_port.unwrap())
        .collect()
}

/// Waits until every group holds exactly the nodes on its node port.
async fn wait_targets(lb: &Lb, svc: &Service) {
    let names = group_names(svc);
    let ports = node_ports(svc);
    wait_for("every node registered on the node port", WAIT, || async {
        let g = groups(lb, &names).await;
        if g.len() != names.len() {
            return Ok(None);
        }
        for (name, port) in names.iter().zip(&ports) {
            let mut want: Vec<(String, i32)> =
                lb.nodes.values().map(|id| (id.clone(), *port)).collect();
            want.sort();
            if targets(lb, g[name].target_group_arn().unwrap()).await != want {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn none_makes_target_groups_only_and_follows_nodes_protocol_and_deletion() {
    let mut lb = lb_setup("tgnone", 2).await;
    let ccm = lb.ccm(&[]);
    let ann = annotations(&[("type", "none"), ("additional-resource-tags", "team=edge")]);
    create_lb_service(&lb.s.admin, NS, "ext", &[80, 443], ann)
        .await
        .unwrap();
    let svc = wait_marked(&lb, "ext").await;
    assert_eq!(ingress_hostname(&svc).as_deref(), Some("none"));
    let names = group_names(&svc);
    assert!(names.iter().all(|n| n.len() == 32), "{names:?}");
    wait_targets(&lb, &svc).await;
    let made = groups(&lb, &names).await;
    for (name, port) in names.iter().zip(node_ports(&svc)) {
        let g = &made[name];
        assert_eq!(g.protocol().map(|p| p.as_str()), Some("TCP"), "{name}");
        assert_eq!(g.port(), Some(port), "{name}");
        assert_eq!(g.target_type().map(|t| t.as_str()), Some("instance"));
        assert_eq!(g.health_check_protocol().map(|p| p.as_str()), Some("HTTP"));
        assert_eq!(g.health_check_port(), Some("10256"));
        assert_eq!(g.health_check_path(), Some("/healthz"));
        assert!(g.load_balancer_arns().is_empty());
    }
    let tags = lb
        .lbs
        .elbv2
        .describe_tags()
        .resource_arns(made[&names[0]].target_group_arn().unwrap())
        .send()
        .await
        .unwrap();
    let tags: BTreeMap<&str, &str> = tags.tag_descriptions()[0]
        .tags()
        .iter()
        .map(|t| (t.key().unwrap(), t.value().unwrap_or("")))
        .collect();
    assert_eq!(tags["kubernetes.io/cluster/tgnone"], "owned");
    assert_eq!(tags["kubernetes.io/service-name"], "default/ext");
    assert_eq!(tags["team"], "edge");
    // No load balancer of any kind.
    assert!(lb.lbs.classic_names().await.unwrap().is_empty());
    assert!(lb.lbs.v2_names().await.unwrap().is_empty());

    // A node joins: registered in both groups.
    lb.add_nodes(1).await;
    wait_targets(&lb, &svc).await;

    // The backend protocol changes: the groups are recreated with it, targets and all.
    patch_service(
        &lb.s.admin,
        NS,
        "ext",
        serde_json::json!({"metadata": {"annotations": {
            format!("{P}backend-protocol"): "http"}}}),
    )
    .await
    .unwrap();
    wait_for("groups recreated as HTTP", WAIT, || async {
        let g = groups(&lb, &names).await;
        Ok((g.len() == 2
            && g.values()
                .all(|g| g.protocol().map(|p| p.as_str()) == Some("HTTP"))
            && g.values()
                .zip(made.values())
                .all(|(new, old)| new.target_group_arn() != old.target_group_arn()))
        .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ccm.log()));
    wait_targets(&lb, &svc).await;

    // externalTrafficPolicy: Local: the groups check the health-check node port.
    let svc = patch_service(
        &lb.s.admin,
        NS,
        "ext",
        serde_json::json!({"spec": {"externalTrafficPolicy": "Local"}}),
    )
    .await
    .unwrap();
    let hcnp = svc.spec.as_ref().unwrap().health_check_node_port.unwrap();
    wait_for(
        "health check on the health-check node port",
        WAIT,
        || async {
            let g = groups(&lb, &names).await;
            Ok(g.values()
                .all(|g| g.health_check_port() == Some(hcnp.to_string().as_str()))
                .then_some(()))
        },
    )
    .await
    .unwrap();

    delete_service(&lb.s.admin, NS, "ext").await.unwrap();
    wait_for("ext gone", WAIT, || async {
        Ok(get_service(&lb.s.admin, NS, "ext")
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(lb.leftovers().await, Vec::<String>::new(), "{}", ccm.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_none_deletes_the_target_groups() {
    let lb = lb_setup("tgnone-drop", 1).await;
    let ccm = lb.ccm(&[]);
    create_lb_service(
        &lb.s.admin,
        NS,
        "ext",
        &[80],
        annotations(&[("type", "none")]),
    )
    .await
    .unwrap();
    let svc = wait_marked(&lb, "ext").await;
    let names = group_names(&svc);
    wait_targets(&lb, &svc).await;

    // The annotation goes: a Classic ELB takes over, the target group goes.
    patch_service(
        &lb.s.admin,
        NS,
        "ext",
        serde_json::json!({"metadata": {"annotations": {format!("{P}type"): null}}}),
    )
    .await
    .unwrap();
    wait_for("target group deleted", WAIT, || async {
        Ok(groups(&lb, &names).await.is_empty().then_some(()))
    })
    .await
    .unwrap();
    let svc = wait_for("a Classic ELB's hostname", WAIT, || async {
        Ok(get_service(&lb.s.admin, NS, "ext")
            .await?
            .filter(|s| ingress_hostname(s).is_some_and(|h| h != "none")))
    })
    .await
    .unwrap();
    assert!(!is_marked(&svc));
    assert_eq!(
        lb.lbs.classic_names().await.unwrap(),
        vec![load_balancer_name(&svc)]
    );
    delete_service(&lb.s.admin, NS, "ext").await.unwrap();
    lb.wait_no_leftovers().await;
    drop(ccm);
}
