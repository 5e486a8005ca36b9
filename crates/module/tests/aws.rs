//! The AWS module's glue on a real apiserver, under the shipped RBAC: StorageClasses from the
//! settings (a provision overriding a default by regex, an unanchored exclude, the default rule),
//! the registration Secrets from the provider cluster configuration and discovery data, no write
//! on an idle pass (audit log), a parameter change recreating a class while its PVC stays, a bad
//! setting changing nothing and reported in an Event, and the spot-termination marks.

mod common;

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use stratus_module::driver::{Driver, Reason};
use stratus_module::metrics::Metrics;
use stratus_module::Cloud;
use stratus_scenarios::wait_for;

use common::{is_default, params, values, Bed};

const PCC: &str = "apiVersion: deckhouse.io/v1
kind: AWSClusterConfiguration
layout: WithoutNAT
sshPublicKey: ssh-ed25519 AAAA stratus
provider:
  providerAccessKeyId: AKIAEXAMPLE
  providerSecretAccessKey: secret-example
  region: eu-central-1
tags:
  team: platform
";

const DISCOVERY: &str = r#"{"keyName": "prod-key", "loadBalancerSecurityGroup": "sg-lb",
 "zones": ["eu-central-1a", "eu-central-1b"],
 "zoneToSubnetIdMap": {"eu-central-1a": "subnet-a", "eu-central-1b": "subnet-b"},
 "instances": {"ami": "ami-1", "iamProfileName": "node", "additionalSecurityGroups": ["sg-1"], "associatePublicIPAddress": false}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_module_glue() -> Result<()> {
    let bed = Bed::start().await?;
    bed.secret(
        "d8-provider-cluster-configuration",
        &[
            ("cloud-provider-cluster-configuration.yaml", PCC),
            ("cloud-provider-discovery-data.json", DISCOVERY),
        ],
    )
    .await?;
    let dir = bed.cluster.dir().to_path_buf();
    let settings = |gp3_iops: &str| {
        json!({"storageClass": {
            "provision": [
                {"name": "gp3", "type": "gp3", "iops": gp3_iops, "throughput": "250"},
                {"name": "io-fast", "type": "io2", "iopsPerGB": "30"}
            ],
            "exclude": ["c1"]
        }})
    };
    let values_file = values(&dir, settings("4000"))?;
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let driver = Driver::new(
        bed.controller.clone(),
        Cloud::Aws,
        Some(values_file.clone()),
        metrics.clone(),
    );

    assert_eq!(driver.reconcile().await, vec![]);
    let classes = bed.classes("cloud-provider-aws").await?;
    assert_eq!(
        classes.keys().collect::<Vec<_>>(),
        ["gp2", "gp3", "io-fast", "st1"]
    );
    assert_eq!(
        params(&classes["gp3"]),
        [("iops", "4000"), ("throughput", "250"), ("type", "gp3")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into()
    );
    assert_eq!(params(&classes["io-fast"])["iopsPerGB"], "30");
    for sc in classes.values() {
        assert_eq!(sc.provisioner, "ebs.csi.aws.com");
        assert_eq!(
            sc.volume_binding_mode.as_deref(),
            Some("WaitForFirstConsumer")
        );
        assert_eq!(sc.allow_volume_expansion, Some(true));
        assert_eq!(
            sc.metadata.labels.as_ref().unwrap()["app"],
            "ebs-csi-driver"
        );
    }
    let defaults: Vec<&String> = classes
        .iter()
        .filter(|(_, sc)| is_default(sc))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        defaults,
        ["gp2"],
        "the first class by name is the default when no global default is set"
    );

    for name in [
        "d8-node-manager-cloud-provider",
        "d8-node-manager-cloud-provider-aws",
    ] {
        let data = bed.registration(name).await?;
        assert_eq!(data["type"], "aws");
        assert_eq!(data["region"], "eu-central-1");
        assert_eq!(data["machineClassKind"], "AWSMachineClass");
        assert_eq!(data["sshPublicKey"], "ssh-ed25519 AAAA stratus");
        assert_eq!(
            serde_json::from_str::<Value>(&data["zones"])?,
            json!(["eu-central-1a", "eu-central-1b"])
        );
        let aws: Value = serde_json::from_str(&data["aws"])?;
        assert_eq!(aws["providerAccessKeyId"], "AKIAEXAMPLE");
        assert_eq!(
            aws["internal"]["zoneToSubnetIdMap"]["eu-central-1b"],
            "subnet-b"
        );
        assert_eq!(aws["keyName"], "prod-key");
        assert_eq!(aws["loadBalancerSecurityGroup"], "sg-lb");
        assert_eq!(aws["instances"]["ami"], "ami-1");
        assert_eq!(aws["tags"], json!({"team": "platform"}));
    }

    // Idle: passes over an unchanged cluster write nothing (the audit log's count, not ours).
    let counted = metrics.writes_total();
    assert_eq!(
        counted, 7,
        "4 classes, 2 Secrets and the status ConfigMap created"
    );
    let audited = wait_for(
        "the first pass's writes in the audit log",
        Duration::from_secs(10),
        || async {
            let n = bed.writes()?;
            Ok((n >= counted).then_some(n))
        },
    )
    .await?;
    for _ in 0..3 {
        assert_eq!(driver.reconcile().await, vec![]);
    }
    // A write would show in the audit log within a second or two; a marker write after the
    // passes bounds the wait: once the marker is logged, anything before it is too.
    bed.secret("marker", &[("k", "v")]).await?;
    wait_for(
        "the marker in the audit log",
        Duration::from_secs(10),
        || async { Ok((bed.cluster.kube_writes_by("stratus-admin")? > 0).then_some(())) },
    )
    .await?;
    assert_eq!(bed.writes()?, audited, "an idle pass wrote");
    assert_eq!(metrics.writes_total(), counted);

    // A PVC of gp3; gp3's iops change: the class is recreated, the PVC stays as it was.
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"storageClassName": "gp3", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))?;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(bed.admin.clone(), "default");
    let pvc = pvcs.create(&PostParams::default(), &pvc).await?;
    let old_uid = classes["gp3"].metadata.uid.clone();
    values(&dir, settings("5000"))?;
    assert_eq!(driver.reconcile().await, vec![]);
    let classes = bed.classes("cloud-provider-aws").await?;
    assert_eq!(params(&classes["gp3"])["iops"], "5000");
    assert_ne!(classes["gp3"].metadata.uid, old_uid, "gp3 was recreated");
    let after = pvcs.get("data").await?;
    assert_eq!(after.metadata.uid, pvc.metadata.uid);
    assert_eq!(
        after.spec.unwrap().storage_class_name.as_deref(),
        Some("gp3")
    );

    // A bad setting: nothing changes, the failure names the key, an Event says it once.
    values(
        &dir,
        json!({"storageClass": {"provision": [{"name": "slow", "type": "io1"}]}}),
    )?;
    let uids: Vec<_> = classes.values().map(|sc| sc.metadata.uid.clone()).collect();
    let failures = driver.reconcile().await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].reason, Reason::Settings);
    assert_eq!(
        failures[0].message,
        "values file: storageClass.provision[0].iopsPerGB: required for io1"
    );
    let kept = bed.classes("cloud-provider-aws").await?;
    assert_eq!(
        kept.values()
            .map(|sc| sc.metadata.uid.clone())
            .collect::<Vec<_>>(),
        uids
    );
    let events = Api::<Event>::namespaced(bed.admin.clone(), "kube-system");
    let event = wait_for("the failure's Event", Duration::from_secs(10), || async {
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("ModuleReconcileFailed")))
    })
    .await?;
    assert!(event
        .note
        .unwrap_or_default()
        .contains("storageClass.provision[0].iopsPerGB"));
    assert!(registry_text(&registry).contains(
        r#"stratus_module_reconcile_failures_total{part="storage_classes",reason="settings"} 1"#
    ));
    // …and a False condition naming the key in the module's status ConfigMap; the other parts
    // stay True.
    let conditions = bed.conditions("cloud-provider-aws").await?;
    let storage = &conditions["StorageClassesReady"];
    assert_eq!(storage["status"], "False", "{conditions:?}");
    assert_eq!(storage["reason"], "Settings");
    assert_eq!(
        storage["message"],
        "values file: storageClass.provision[0].iopsPerGB: required for io1"
    );
    assert_eq!(conditions["RegistrationReady"]["status"], "True");
    // The same failure again writes nothing more.
    let writes = driver_writes(&registry);
    driver.reconcile().await;
    assert_eq!(driver_writes(&registry), writes);

    // A node the termination handler tainted for a spot interruption gets Deckhouse's marks.
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "spot-1"},
        "spec": {"taints": [{"key": "aws-node-termination-handler/spot-itn", "effect": "NoSchedule"}]}
    }))?;
    let nodes = Api::<Node>::all(bed.admin.clone());
    nodes.create(&PostParams::default(), &node).await?;
    driver.reconcile().await;
    let marked = nodes.get("spot-1").await?;
    assert_eq!(
        marked.metadata.labels.unwrap()["node.deckhouse.io/termination-in-progress"],
        "true"
    );
    assert_eq!(
        marked.metadata.annotations.unwrap()["update.node.deckhouse.io/draining"],
        "aws-node-termination-handler"
    );
    Ok(())
}

/// The module controller's writes so far, by its metric.
fn driver_writes(registry: &Registry) -> String {
    registry_text(registry)
        .lines()
        .filter(|l| l.starts_with("stratus_module_kubernetes_writes_total"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn registry_text(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}
