//! The OpenStack and DVP modules' glue on a real apiserver, under the shipped RBAC: classes from
//! the discovery data (OpenStack volume types sanitised with an anchored exclude; DVP parent
//! classes with their reclaim policy and default), the registration Secrets, and what happens
//! when a source goes: OpenStack keeps its classes without discovery data, DVP keeps a class the
//! parent stops reporting; a missing required key fails the registration and changes nothing;
//! OpenStack's `allowVolumeExpansion` from one probe of Cinder's microversions (Keystone and the
//! simulators), retried after a refusal and never repeated once answered.

mod common;

use anyhow::Result;
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use stratus_module::driver::{Driver, Reason};
use stratus_module::metrics::Metrics;
use stratus_module::Cloud;

use common::{is_default, params, values, Bed};

const OPENSTACK_PCC: &str = "apiVersion: deckhouse.io/v1
kind: OpenStackClusterConfiguration
sshPublicKey: ssh-rsa AAAA stratus
provider:
  authURL: https://keystone.example/v3
  domainName: Default
  tenantName: demo
  username: demo
  password: secret-example
  region: RegionOne
";

fn driver(bed: &Bed, cloud: Cloud, values: std::path::PathBuf) -> Driver {
    let mut registry = Registry::default();
    Driver::new(
        bed.controller.clone(),
        cloud,
        Some(values),
        Metrics::register(&mut registry),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstack_module_glue() -> Result<()> {
    let bed = Bed::start().await?;
    bed.secret(
        "d8-provider-cluster-configuration",
        &[("cloud-provider-cluster-configuration.yaml", OPENSTACK_PCC)],
    )
    .await?;
    let discovery = json!({"internalNetworkNames": ["int"], "zones": ["nova"], "podNetworkMode": "DirectRoutingWithPortSecurityEnabled",
        "instances": {"imageName": "ubuntu", "mainNetwork": "int", "sshKeyPairName": "kp"},
        "volumeTypes": [{"name": "SSD Fast"}, {"name": "__DEFAULT__"}, {"name": "hdd"}, {"name": "hdd-archive"}]});
    bed.secret(
        "d8-cloud-provider-discovery-data",
        &[("discovery-data.json", &discovery.to_string())],
    )
    .await?;
    let dir = bed.cluster.dir().to_path_buf();
    let file = values(
        &dir,
        json!({"storageClass": {"exclude": ["hdd"]}, "supportsOnlineDiskResize": true}),
    )?;
    let driver = driver(&bed, Cloud::OpenStack, file.clone());
    assert_eq!(driver.reconcile().await, vec![]);
    let classes = bed.classes("cloud-provider-openstack").await?;
    // "hdd" is anchored: hdd-archive stays.
    assert_eq!(
        classes.keys().collect::<Vec<_>>(),
        ["default", "hdd-archive", "ssd-fast"]
    );
    assert_eq!(params(&classes["ssd-fast"])["type"], "SSD Fast");
    assert_eq!(classes["ssd-fast"].provisioner, "cinder.csi.openstack.org");
    assert_eq!(classes["ssd-fast"].allow_volume_expansion, Some(true));
    assert!(is_default(&classes["default"]));
    let data = bed
        .registration("d8-node-manager-cloud-provider-openstack")
        .await?;
    assert_eq!(data["region"], "RegionOne");
    let os: Value = serde_json::from_str(&data["openstack"])?;
    assert_eq!(os["connection"]["tenantName"], "demo");
    assert_eq!(os["internalNetworkNames"], json!(["int"]));
    assert_eq!(os["instances"]["imageName"], "ubuntu");

    // Without discovery data the classes stay as they are.
    bed.admin_delete_secret("d8-cloud-provider-discovery-data")
        .await?;
    let failures = driver.reconcile().await;
    let after = bed.classes("cloud-provider-openstack").await?;
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        ["default", "hdd-archive", "ssd-fast"]
    );
    // …but the registration needs internalNetworkNames, which the stored data lacks: it fails
    // naming the key and the Secret keeps its last good content.
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].reason, Reason::Settings);
    assert_eq!(
        failures[0].message,
        "discovery data (with settings): internalNetworkNames: required"
    );
    let conditions = bed.conditions("cloud-provider-openstack").await?;
    assert_eq!(conditions["RegistrationReady"]["status"], "False");
    assert_eq!(conditions["RegistrationReady"]["reason"], "Settings");
    assert_eq!(
        conditions["RegistrationReady"]["message"],
        "discovery data (with settings): internalNetworkNames: required"
    );
    assert_eq!(conditions["StorageClassesReady"]["status"], "True");
    assert_eq!(
        bed.registration("d8-node-manager-cloud-provider-openstack")
            .await?,
        data
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dvp_module_glue() -> Result<()> {
    let bed = Bed::start().await?;
    let doc = |classes: Value| {
        json!({"apiVersion": "deckhouse.io/v1", "kind": "DVPCloudDiscoveryData", "zones": ["z1"], "storageClasses": classes}).to_string()
    };
    bed.secret(
        "d8-cloud-provider-discovery-data",
        &[("discovery-data.json", &doc(json!([
            {"name": "linstor-thin-r1", "reclaimPolicy": "Retain", "allowVolumeExpansion": true, "isEnabled": true, "isDefault": false},
            {"name": "ceph-rbd", "reclaimPolicy": "Delete", "allowVolumeExpansion": false, "isEnabled": true, "isDefault": true},
            {"name": "local", "isEnabled": false},
            {"name": "nfs-slow", "isEnabled": true}
        ])))],
    )
    .await?;
    let dir = bed.cluster.dir().to_path_buf();
    let file = values(
        &dir,
        json!({"storage": {"parameters": {"excludedStorageClasses": ["nfs-.*"]}}, "nodes": {"parameters": {"sshPublicKey": "ssh-ed25519 K"}}}),
    )?;
    let driver = driver(&bed, Cloud::Dvp, file);
    assert_eq!(driver.reconcile().await, vec![]);
    let classes = bed.classes("cloud-provider-dvp").await?;
    assert_eq!(
        classes.keys().collect::<Vec<_>>(),
        ["ceph-rbd", "linstor-thin-r1"]
    );
    let thin = &classes["linstor-thin-r1"];
    assert_eq!(params(thin)["dvpStorageClass"], "linstor-thin-r1");
    assert_eq!(thin.reclaim_policy.as_deref(), Some("Retain"));
    assert_eq!(thin.allow_volume_expansion, Some(true));
    assert!(
        is_default(&classes["ceph-rbd"]),
        "the parent's default is the module's"
    );
    assert!(!is_default(thin));
    let data = bed.registration("d8-node-manager-cloud-provider").await?;
    assert_eq!(data["type"], "dvp");
    assert_eq!(
        serde_json::from_str::<Value>(&data["zones"])?,
        json!(["z1"])
    );
    assert_eq!(data["sshPublicKey"], "ssh-ed25519 K");
    assert_eq!(data["capiClusterName"], "dvp");

    // The parent stops reporting linstor-thin-r1: the class is kept as it is.
    bed.secret("d8-cloud-provider-discovery-data", &[("discovery-data.json", &doc(json!([
        {"name": "ceph-rbd", "reclaimPolicy": "Delete", "isEnabled": true, "isDefault": true}
    ])))])
    .await?;
    assert_eq!(driver.reconcile().await, vec![]);
    let after = bed.classes("cloud-provider-dvp").await?;
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        ["ceph-rbd", "linstor-thin-r1"]
    );
    assert_eq!(after["linstor-thin-r1"].metadata.uid, thin.metadata.uid);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstack_expansion_follows_a_one_time_cinder_probe() -> Result<()> {
    let bed = Bed::start().await?;
    let cloud = stratus_testenv::OpenStackEnv::start().await?;
    let creds = cloud.credentials();
    let pcc = |password: &str| {
        format!(
            "apiVersion: deckhouse.io/v1\nkind: OpenStackClusterConfiguration\nprovider:\n  authURL: {}\n  domainName: {}\n  tenantName: {}\n  username: {}\n  password: {password}\n  region: {}\n",
            creds.auth_url, creds.user_domain_name, creds.project_name, creds.username, creds.region
        )
    };
    let pcc_key = "cloud-provider-cluster-configuration.yaml";
    bed.secret(
        "d8-provider-cluster-configuration",
        &[(pcc_key, &pcc("wrong-password-x"))],
    )
    .await?;
    let discovery = json!({"internalNetworkNames": ["int"], "volumeTypes": [{"name": "ssd"}]});
    bed.secret(
        "d8-cloud-provider-discovery-data",
        &[("discovery-data.json", &discovery.to_string())],
    )
    .await?;
    let file = values(bed.cluster.dir(), json!({}))?;
    let driver = driver(&bed, Cloud::OpenStack, file);

    // Keystone refuses: the classes wait, the failure names the probe and no credential.
    let failures = driver.reconcile().await;
    let probe = failures
        .iter()
        .find(|f| f.part == "storage_classes")
        .expect("the probe fails the classes");
    assert_eq!(probe.reason, Reason::Cloud, "{probe:?}");
    assert!(
        probe
            .message
            .starts_with("probing Cinder for online resize: "),
        "{probe:?}"
    );
    assert!(!probe.message.contains("wrong-password-x"), "{probe:?}");
    assert!(bed.classes("cloud-provider-openstack").await?.is_empty());

    // With the right credentials the simulators' Cinder (microversions up to 3.70) answers:
    // every class allows expansion.
    bed.secret(
        "d8-provider-cluster-configuration",
        &[(pcc_key, &pcc(&creds.password))],
    )
    .await?;
    assert_eq!(driver.reconcile().await, vec![]);
    let classes = bed.classes("cloud-provider-openstack").await?;
    assert_eq!(classes["ssd"].allow_volume_expansion, Some(true));

    // Probed once: a later pass asks OpenStack nothing.
    let before = cloud.request_counts().await?;
    assert_eq!(driver.reconcile().await, vec![]);
    assert_eq!(cloud.request_counts().await?, before);
    Ok(())
}
