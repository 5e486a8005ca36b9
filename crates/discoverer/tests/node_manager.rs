//! The node-manager artifacts of the AWS, OpenStack and DVP modules on a real kube-apiserver: the
//! instance-class CRDs accept valid objects in every served version (read back through the
//! others), refuse invalid ones naming the field, fill the defaults, and the registration Secrets
//! rendered by each module's chart (real helm) carry every key of node-manager's contract (the
//! MCM engine key, or every Cluster API one).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde::Deserialize as _;
use stratus_testenv::{Identity, KubeCluster};

mod common;

use common::repo_file;

/// node-manager's Cluster API engine keys (all required when `machineClassKind` is empty).
const CAPI_KEYS: &[&str] = &[
    "capiClusterName",
    "capiClusterKind",
    "capiClusterAPIVersion",
    "capiMachineTemplateKind",
    "capiMachineTemplateAPIVersion",
];

fn helm_template(chart: &str, sets: &[&str]) -> Result<String, String> {
    let paths = stratus_testenv::ensure_installed().expect("tools installed");
    let mut cmd = Command::new(&paths.helm);
    cmd.args(["template", "x"])
        .arg(stratus_testenv::repo_root().join(chart));
    for s in sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().expect("run helm");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

async fn install_crd(client: &kube::Client, rel: &str) -> Result<CustomResourceDefinition> {
    let crd: CustomResourceDefinition = serde_yaml::from_str(&repo_file(rel))?;
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    api.create(&PostParams::default(), &crd).await?;
    let name = crd.metadata.name.clone().context("crd name")?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = api.get(&name).await?;
        let established = got
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established {
            return Ok(crd);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "CRD {name} not established in 30s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn api(client: &kube::Client, kind: &str, plural: &str, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("deckhouse.io", version, kind),
        plural,
    );
    Api::all_with(client.clone(), &ar)
}

async fn create(
    api: &Api<DynamicObject>,
    body: serde_json::Value,
) -> Result<DynamicObject, kube::Error> {
    let obj: DynamicObject = serde_json::from_value(body).expect("object");
    api.create(&PostParams::default(), &obj).await
}

/// Valid objects in every served version; invalid ones refused with the field named.
async fn check_class(
    client: &kube::Client,
    kind: &str,
    plural: &str,
    valid: serde_json::Value,
    invalid: &[(serde_json::Value, &str)],
) -> Result<()> {
    check_class_in(client, kind, plural, &["v1alpha1", "v1"], valid, invalid).await
}

/// [`check_class`] for the served `versions` (the last one is used for the invalid objects).
async fn check_class_in(
    client: &kube::Client,
    kind: &str,
    plural: &str,
    versions: &[&str],
    valid: serde_json::Value,
    invalid: &[(serde_json::Value, &str)],
) -> Result<()> {
    let last = versions.last().copied().context("a version")?;
    for (i, version) in versions.iter().copied().enumerate() {
        let a = api(client, kind, plural, version);
        let obj = create(
            &a,
            serde_json::json!({"apiVersion": format!("deckhouse.io/{version}"), "kind": kind,
                "metadata": {"name": format!("ok-{i}")}, "spec": valid}),
        )
        .await
        .with_context(|| format!("valid {kind} {version}"))?;
        assert_eq!(obj.data["spec"], valid);
        // Read back through the other versions (conversion).
        for other in versions.iter().filter(|v| **v != version) {
            let other = api(client, kind, plural, other);
            assert_eq!(other.get(&format!("ok-{i}")).await?.data["spec"], valid);
        }
    }
    for (n, (spec, field)) in invalid.iter().enumerate() {
        let a = api(client, kind, plural, last);
        let err = create(
            &a,
            serde_json::json!({"apiVersion": format!("deckhouse.io/{last}"), "kind": kind,
                "metadata": {"name": format!("bad-{n}")}, "spec": spec}),
        )
        .await
        .expect_err(&format!("{kind} {spec} must be refused"));
        let text = err.to_string();
        assert!(
            text.contains(field),
            "{kind} {spec}: the error names {field}: {text}"
        );
    }
    Ok(())
}

/// Decodes the rendered Secrets and checks node-manager's contract.
fn check_registration(
    rendered: &str,
    ty: &str,
    kind: &str,
    served: &[&str],
) -> Result<serde_json::Value> {
    let mut names = Vec::new();
    let mut subtree = serde_json::Value::Null;
    for doc in serde_yaml::Deserializer::from_str(rendered) {
        let value = serde_yaml::Value::deserialize(doc)?;
        if value.is_null() {
            continue;
        }
        let secret: Secret = serde_yaml::from_value(value)?;
        let labels = secret.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels
                .get("cloud-provider.deckhouse.io/registration")
                .map(String::as_str),
            Some("")
        );
        assert_eq!(
            labels
                .get("cloud-provider.deckhouse.io/name")
                .map(String::as_str),
            Some(ty)
        );
        assert_eq!(secret.metadata.namespace.as_deref(), Some("kube-system"));
        names.push(secret.metadata.name.clone().unwrap_or_default());
        let data: BTreeMap<String, String> = secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8(v.0).expect("utf-8")))
            .collect();
        assert_eq!(data["type"], ty);
        assert!(!data["region"].is_empty());
        let zones: Vec<String> = serde_json::from_str(&data["zones"])?;
        let _ = zones;
        assert_eq!(data["instanceClassKind"], kind);
        assert!(
            served.contains(&data["instanceClassAPIVersion"].as_str()),
            "{:?} is served",
            data["instanceClassAPIVersion"]
        );
        let mcm = data.get("machineClassKind").is_some_and(|k| !k.is_empty());
        let capi = CAPI_KEYS
            .iter()
            .all(|k| data.get(*k).is_some_and(|v| !v.is_empty()));
        assert!(
            mcm || capi,
            "an engine: machineClassKind or every CAPI key: {data:?}"
        );
        subtree = serde_json::from_str(&data[ty])?;
        assert!(subtree.is_object());
    }
    names.sort();
    assert_eq!(
        names,
        vec![
            "d8-node-manager-cloud-provider".to_owned(),
            format!("d8-node-manager-cloud-provider-{ty}")
        ]
    );
    Ok(subtree)
}

#[tokio::test]
async fn instance_classes_and_registration_secrets() -> Result<()> {
    let cluster = KubeCluster::start().await?;
    let admin = cluster.kube_client(Identity::Admin).await?;

    let crd = install_crd(
        &admin,
        "charts/node-manager-openstack/crds/openstackinstanceclasses.yaml",
    )
    .await?;
    let served: Vec<String> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect();
    assert_eq!(
        crd.spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.as_str()),
        Some("v1")
    );
    assert_eq!(
        crd.spec.names.categories,
        Some(vec!["cloudinstanceclasses".to_owned()])
    );
    check_class(
        &admin,
        "OpenStackInstanceClass",
        "openstackinstanceclasses",
        serde_json::json!({"flavorName": "m1.large", "imageName": "ubuntu-22-04", "rootDiskSize": 20,
            "mainNetwork": "int", "additionalNetworks": ["a"], "additionalSecurityGroups": ["sg"],
            "additionalTags": {"team": "x"}, "tags": ["role-worker"]}),
        &[
            (serde_json::json!({"imageName": "x"}), "spec.flavorName"),
            (serde_json::json!({"flavorName": "m1", "rootDiskSize": 0}), "spec.rootDiskSize"),
            (serde_json::json!({"flavorName": "m1", "tags": ["a,b"]}), "spec.tags[0]"),
            (serde_json::json!({"flavorName": "m1", "additionalTags": {"a": 1}}), "spec.additionalTags.a"),
        ],
    )
    .await?;
    let served_refs: Vec<&str> = served.iter().map(String::as_str).collect();
    let rendered = helm_template(
        "charts/node-manager-openstack",
        &[
            "region=RegionOne",
            "zones={nova,az2}",
            "connection.authURL=https://keystone:5000/v3",
            "connection.username=u",
            "connection.password=p",
            "connection.domainName=Default",
            "connection.tenantName=t",
            "internalNetworkNames={int}",
            "sshPublicKey=ssh-ed25519 AAA",
        ],
    )
    .map_err(anyhow::Error::msg)?;
    let subtree = check_registration(
        &rendered,
        "openstack",
        "OpenStackInstanceClass",
        &served_refs,
    )?;
    assert_eq!(subtree["connection"]["tenantName"], "t");
    assert_eq!(subtree["internalNetworkNames"], serde_json::json!(["int"]));
    let err =
        helm_template("charts/node-manager-openstack", &["region=r"]).expect_err("no connection");
    assert!(
        err.contains("connection.tenantName or connection.tenantID is required"),
        "{err}"
    );

    check_dvp(&admin).await?;

    let crd = install_crd(
        &admin,
        "charts/node-manager-aws/crds/awsinstanceclasses.yaml",
    )
    .await?;
    let served: Vec<String> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect();
    check_class(
        &admin,
        "AWSInstanceClass",
        "awsinstanceclasses",
        serde_json::json!({"instanceType": "m5.large", "ami": "ami-0123456789abcdef0", "spot": true,
            "diskType": "gp3", "diskSizeGb": 50, "additionalSecurityGroups": ["sg-0abc"],
            "additionalTags": {"team": "x"}}),
        &[
            (
                serde_json::json!({"ami": "ami-01234567"}),
                "spec.instanceType",
            ),
            (
                serde_json::json!({"instanceType": "m5.large", "iops": ["500"]}),
                "spec.iops",
            ),
            (
                serde_json::json!({"instanceType": "m5.large", "spot": "yes"}),
                "spec.spot",
            ),
        ],
    )
    .await?;
    // What Deckhouse's schema accepts is accepted with its meaning: iops as a string, no
    // diskType filled in (gp2 is the machine class's default), status written by a plain patch
    // (node-manager's hook; no status subresource).
    let classes = api(&admin, "AWSInstanceClass", "awsinstanceclasses", "v1");
    let stored = create(
        &classes,
        serde_json::json!({"apiVersion": "deckhouse.io/v1", "kind": "AWSInstanceClass",
            "metadata": {"name": "deckhouse-shaped"},
            "spec": {"instanceType": "m5.large", "iops": "500", "ami": "ami-legacy"}}),
    )
    .await?;
    assert_eq!(stored.data["spec"]["iops"], "500");
    assert!(
        stored.data["spec"].get("diskType").is_none(),
        "{:?}",
        stored.data
    );
    let patched = classes
        .patch(
            "deckhouse-shaped",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"nodeGroupConsumers": ["workers"]}})),
        )
        .await?;
    assert_eq!(
        patched.data["status"]["nodeGroupConsumers"],
        serde_json::json!(["workers"])
    );
    let served_refs: Vec<&str> = served.iter().map(String::as_str).collect();
    let rendered = helm_template(
        "charts/node-manager-aws",
        &[
            "region=eu-central-1",
            "zones={eu-central-1a}",
            "providerAccessKeyId=AKIA",
            "providerSecretAccessKey=s",
            "zoneToSubnetIdMap.eu-central-1a=subnet-1",
        ],
    )
    .map_err(anyhow::Error::msg)?;
    let subtree = check_registration(&rendered, "aws", "AWSInstanceClass", &served_refs)?;
    assert_eq!(
        subtree["internal"]["zoneToSubnetIdMap"]["eu-central-1a"],
        "subnet-1"
    );
    // The rendered Secrets are valid objects for the apiserver.
    for doc in serde_yaml::Deserializer::from_str(&rendered) {
        let value = serde_yaml::Value::deserialize(doc)?;
        if value.is_null() {
            continue;
        }
        let secret: Secret = serde_yaml::from_value(value)?;
        Api::<Secret>::namespaced(admin.clone(), "kube-system")
            .create(
                &PostParams {
                    dry_run: true,
                    ..Default::default()
                },
                &secret,
            )
            .await?;
    }
    Ok(())
}

/// DVPInstanceClass (v1alpha1 only; defaults filled) and the Cluster API registration.
async fn check_dvp(admin: &kube::Client) -> Result<()> {
    let crd = install_crd(
        admin,
        "charts/node-manager-dvp/crds/dvpinstanceclasses.yaml",
    )
    .await?;
    assert_eq!(
        crd.spec.names.categories,
        Some(vec!["cloudinstanceclasses".to_owned()])
    );
    let full = serde_json::json!({
        "virtualMachine": {"cpu": {"cores": 4, "coreFraction": "50%"}, "memory": {"size": "8Gi"},
            "virtualMachineClassName": "generic", "bootloader": "BIOS", "runPolicy": "AlwaysOn",
            "liveMigrationPolicy": "AlwaysSafe", "additionalLabels": {"team": "x"},
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "gpus": [{"gpuClassName": "a100"}]},
        "rootDisk": {"size": "50Gi", "storageClass": "linstor-thin-r1",
                     "image": {"kind": "ClusterVirtualImage", "name": "ubuntu-24-04"}},
        "etcdDisk": {"size": "10Gi", "storageClass": "linstor-thin-r1"},
        "additionalDisks": [{"size": "100Gi"}]});
    let vm = |extra: serde_json::Value| {
        let mut spec = serde_json::json!({
            "virtualMachine": {"cpu": {"cores": 2}, "memory": {"size": "4Gi"}, "virtualMachineClassName": "generic"},
            "rootDisk": {"size": "20Gi", "image": {"kind": "VirtualImage", "name": "ubuntu"}}});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                s.insert(k.clone(), v.clone());
            }
        }
        spec
    };
    check_class_in(
        admin,
        "DVPInstanceClass",
        "dvpinstanceclasses",
        &["v1alpha1"],
        full,
        &[
            (serde_json::json!({"virtualMachine": {"cpu": {"cores": 2}, "memory": {"size": "4Gi"}, "virtualMachineClassName": "g"}}), "spec.rootDisk"),
            (vm(serde_json::json!({"virtualMachine": {"cpu": {"cores": 0}, "memory": {"size": "4Gi"}, "virtualMachineClassName": "g"}})), "spec.virtualMachine.cpu.cores"),
            (vm(serde_json::json!({"virtualMachine": {"cpu": {"cores": 2, "coreFraction": "150%"}, "memory": {"size": "4Gi"}, "virtualMachineClassName": "g"}})), "spec.virtualMachine.cpu.coreFraction"),
            (vm(serde_json::json!({"virtualMachine": {"cpu": {"cores": 2}, "memory": {"size": "4Gi"}, "virtualMachineClassName": "g", "bootloader": "UEFI"}})), "spec.virtualMachine.bootloader"),
            (vm(serde_json::json!({"rootDisk": {"size": "lots", "image": {"kind": "VirtualImage", "name": "u"}}})), "spec.rootDisk.size"),
            (vm(serde_json::json!({"rootDisk": {"size": "1Gi", "image": {"kind": "Snapshot", "name": "u"}}})), "spec.rootDisk.image.kind"),
            (vm(serde_json::json!({"etcdDisk": {"size": "1Gi"}})), "spec.etcdDisk.storageClass"),
        ],
    )
    .await?;
    // Defaults, as Deckhouse's CRD sets them.
    let defaulted = create(
        &api(admin, "DVPInstanceClass", "dvpinstanceclasses", "v1alpha1"),
        serde_json::json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "DVPInstanceClass",
            "metadata": {"name": "defaults"}, "spec": vm(serde_json::json!({}))}),
    )
    .await?;
    let vm_spec = &defaulted.data["spec"]["virtualMachine"];
    assert_eq!(vm_spec["cpu"]["coreFraction"], "100%");
    assert_eq!(vm_spec["bootloader"], "EFI");
    assert_eq!(vm_spec["runPolicy"], "AlwaysOnUnlessStoppedManually");
    assert_eq!(vm_spec["liveMigrationPolicy"], "PreferForced");

    let rendered = helm_template(
        "charts/node-manager-dvp",
        &["additionalVMLabels.team=x", "sshPublicKey=ssh-ed25519 AAA"],
    )
    .map_err(anyhow::Error::msg)?;
    let subtree = check_registration(&rendered, "dvp", "DVPInstanceClass", &["v1alpha1"])?;
    assert_eq!(subtree["additionalVMLabels"]["team"], "x");
    assert!(rendered.contains(&format!("zones: {}", base64_of(r#"["default"]"#))));
    Ok(())
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}
