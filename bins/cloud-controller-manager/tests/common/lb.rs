//! Shared set-up of the load-balancer tests: a public VPC, a node security group, ready nodes
//! backed by instances, the CCM's service controller, and reads of what it made in moto.

#![allow(dead_code)]

use std::collections::BTreeMap;

use stratus_scenarios::lb_fixture::LbClients;
use stratus_scenarios::service_fixture::{create_ready_node, get_service, ingress_hostname};
use stratus_scenarios::{ec2_fixture, wait_for};

use super::{setup, Setup, WAIT, ZONE};

pub const NS: &str = "default";
pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
pub const P: &str = "service.beta.kubernetes.io/aws-load-balancer-";

pub struct Lb {
    pub s: Setup,
    pub lbs: LbClients,
    /// Instance IDs behind the ready nodes, by node name.
    pub nodes: BTreeMap<String, String>,
    /// The nodes' security group.
    pub node_group: String,
}

/// Environment, public VPC, `n` ready nodes backed by instances.
pub async fn lb_setup(cluster: &str, n: i32) -> Lb {
    let s = setup(cluster, true).await;
    ec2_fixture::make_public(&s.ec2, &s.subnet).await.unwrap();
    let lbs = LbClients::new(s.env.moto_endpoint()).await;
    let node_group = ec2_fixture::node_security_group(&s.ec2, &s.subnet, cluster)
        .await
        .unwrap();
    let mut lb = Lb {
        s,
        lbs,
        nodes: BTreeMap::new(),
        node_group,
    };
    lb.add_nodes(n).await;
    lb
}

impl Lb {
    pub async fn add_nodes(&mut self, n: i32) -> Vec<String> {
        if n == 0 {
            return vec![];
        }
        let launched = self.s.launch(n).await;
        let mut names = vec![];
        for i in launched {
            ec2_fixture::set_instance_groups(
                &self.s.ec2,
                &i.id,
                std::slice::from_ref(&self.node_group),
            )
            .await
            .unwrap();
            let pid = format!("aws:///{ZONE}/{}", i.id);
            create_ready_node(&self.s.admin, &i.private_dns, &pid, BTreeMap::new())
                .await
                .unwrap();
            self.nodes.insert(i.private_dns.clone(), i.id.clone());
            names.push(i.private_dns);
        }
        names
    }

    pub fn ccm(&self, extra: &[&str]) -> stratus_scenarios::ccm::CcmProcess {
        self.ccm_with_config("", extra)
    }

    /// The service controller with `more_global` (whole lines) in the cloud config's `[Global]`.
    pub fn ccm_with_config(
        &self,
        more_global: &str,
        extra: &[&str],
    ) -> stratus_scenarios::ccm::CcmProcess {
        let mut args = vec!["--controllers=service"];
        args.extend_from_slice(extra);
        self.s.start_ccm_with_config(more_global, &args)
    }

    pub async fn wait_ingress(&self, name: &str) -> k8s_openapi::api::core::v1::Service {
        wait_for(&format!("ingress of {name}"), WAIT, || async {
            Ok(get_service(&self.s.admin, NS, name)
                .await?
                .filter(|s| ingress_hostname(s).is_some()))
        })
        .await
        .unwrap()
    }

    pub async fn registered(&self, lb: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .lbs
            .classic(lb)
            .await
            .unwrap()
            .map(|d| {
                d.instances()
                    .iter()
                    .filter_map(|i| i.instance_id().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    }

    pub async fn wait_registered(&self, lb: &str, want: &[&String]) {
        let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        want.sort();
        wait_for(&format!("targets of {lb} = {want:?}"), WAIT, || async {
            Ok((self.registered(lb).await == want).then_some(()))
        })
        .await
        .unwrap();
    }

    /// Waits until Classic ELB `name` is the only one, has every node registered, and has one
    /// security group of its own and one cluster backend group: nothing was made twice.
    pub async fn assert_made_once(&self, name: &str) {
        let all: Vec<&String> = self.nodes.values().collect();
        self.wait_registered(name, &all).await;
        assert_eq!(
            self.lbs.classic_names().await.unwrap(),
            vec![name.to_string()]
        );
        for (prefix, what) in [
            ("k8s-elb-a", "group of the ELB"),
            ("k8s-elb-backend-", "backend group"),
        ] {
            let groups = ec2_fixture::security_groups_named(&self.s.ec2, prefix)
                .await
                .unwrap();
            assert_eq!(groups.len(), 1, "one {what}: {groups:?}");
        }
    }

    /// Everything this test's CCM could have made: ELBs, NLBs, target groups, k8s-* groups.
    pub async fn leftovers(&self) -> Vec<String> {
        let mut out = self.lbs.classic_names().await.unwrap();
        out.extend(self.lbs.v2_names().await.unwrap());
        out.extend(self.lbs.target_group_names().await.unwrap());
        out.extend(
            ec2_fixture::security_groups_named(&self.s.ec2, "k8s-")
                .await
                .unwrap(),
        );
        out
    }

    /// Waits until nothing the CCM made is left in moto.
    pub async fn wait_no_leftovers(&self) {
        let waited = wait_for("no leftovers", WAIT, || async {
            let left = self.leftovers().await;
            Ok(left.is_empty().then_some(()))
        })
        .await;
        if let Err(e) = waited {
            panic!("{e}: still there: {:?}", self.leftovers().await);
        }
    }

    pub async fn node_group_sources(&self) -> Vec<(String, String)> {
        let id = self.nodes.values().next().unwrap();
        let groups = ec2_fixture::instance_groups(&self.s.ec2, id).await.unwrap();
        assert_eq!(groups, vec![self.node_group.clone()]);
        ec2_fixture::group_sources(&self.s.ec2, &self.node_group)
            .await
            .unwrap()
    }
}

pub fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (format!("{P}{k}"), v.to_string()))
        .collect()
}
