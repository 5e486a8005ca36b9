//! capdvp's CRDs (the chart's `crds/`) in a real apiserver: the Rust types' every field is
//! accepted by a strict server-side dry run and an unknown one refused; the schema applies
//! Deckhouse's defaults (4 cores at 100 %, 8Gi, EFI, VirtualImage); a cpuFraction outside the
//! pattern is refused; the CRDs carry both Cluster API contract labels. And the chart renders
//! the parent configuration as Deckhouse passes it.

use std::process::Command;

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde::Deserialize;
use stratus_capdvp::api::infra::{AdditionalDisk, DiskImageRef, MachineCpu};
use stratus_capdvp::api::{DeckhouseMachine, DeckhouseMachineSpec};
use stratus_scenarios::kube_fixture::repo_root;
use stratus_testenv::core::capi::install_crds;
use stratus_testenv::{Identity, KubeCluster};

fn full_spec() -> DeckhouseMachineSpec {
    DeckhouseMachineSpec {
        provider_id: Some("dvp://w-1".into()),
        vm_class_name: "generic".into(),
        cpu: MachineCpu {
            cores: 2,
            cpu_fraction: "50%".into(),
        },
        memory: "4Gi".into(),
        root_disk_size: "20Gi".into(),
        root_disk_storage_class: "fast".into(),
        additional_disks: vec![AdditionalDisk {
            size: "5Gi".into(),
            storage_class: "slow".into(),
        }],
        boot_disk_image_ref: DiskImageRef {
            kind: "ClusterVirtualImage".into(),
            name: "ubuntu".into(),
        },
        bootloader: Some("BIOS".into()),
        run_policy: Some("AlwaysOn".into()),
        live_migration_policy: Some("PreferSafe".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crds_take_every_field_apply_deckhouse_defaults_and_refuse_unknown_ones() {
    let cluster = KubeCluster::start().await.unwrap();
    let admin = cluster.kube_client(Identity::Admin).await.unwrap();
    let names = install_crds(
        &admin,
        &repo_root().join("charts/capdvp-controller-manager/crds"),
    )
    .await
    .unwrap();
    assert_eq!(names.len(), 3);
    let api: Api<DeckhouseMachine> = Api::namespaced(admin.clone(), "default");

    let strict = PatchParams::apply("capdvp-test")
        .validation_strict()
        .dry_run();
    let machine = DeckhouseMachine::new("w-1", "default", full_spec());
    api.patch("w-1", &strict, &Patch::Apply(&machine))
        .await
        .expect("every field accepted");
    let mut unknown = serde_json::to_value(&machine).unwrap();
    unknown["spec"]["cores"] = 3.into();
    let err = api
        .patch("w-1", &strict, &Patch::Apply(&unknown))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cores"), "{err}");
    let mut bad = machine.clone();
    bad.spec.cpu.cpu_fraction = "150%".into();
    assert!(
        api.patch("w-1", &strict, &Patch::Apply(&bad))
            .await
            .is_err(),
        "150% refused"
    );

    // Defaults as Deckhouse's CRD has them.
    let minimal: DeckhouseMachine = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "DeckhouseMachine",
        "metadata": {"name": "w-2", "namespace": "default"},
        "spec": {"vmClassName": "generic", "rootDiskSize": "10Gi", "bootDiskImageRef": {"name": "ubuntu"}}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &minimal).await.unwrap();
    assert_eq!(
        (
            created.spec.cpu.cores,
            created.spec.cpu.cpu_fraction.as_str()
        ),
        (4, "100%")
    );
    assert_eq!(created.spec.memory, "8Gi");
    assert_eq!(created.spec.bootloader.as_deref(), Some("EFI"));
    assert_eq!(created.spec.boot_disk_image_ref.kind, "VirtualImage");
    api.delete("w-2", &DeleteParams::default()).await.unwrap();

    for name in names {
        let crd = Api::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>::all(admin.clone())
            .get(&name)
            .await
            .unwrap();
        let labels = crd.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get("cluster.x-k8s.io/v1beta2").map(String::as_str),
            Some("v1alpha1"),
            "{name}"
        );
        assert_eq!(
            labels.get("cluster.x-k8s.io/v1beta1").map(String::as_str),
            Some("v1alpha1"),
            "{name}"
        );
    }
}

fn render(sets: &[&str]) -> Result<Vec<serde_yaml::Value>, String> {
    let helm = stratus_testenv::ensure_installed()
        .expect("testenv install (builds helm)")
        .helm;
    let out = Command::new(helm)
        .args(["template", "capdvp", "--namespace", "d8-cloud-provider-dvp"])
        .arg(repo_root().join("charts/capdvp-controller-manager"))
        .args(sets.iter().flat_map(|s| ["--set", s]))
        .env("HELM_CONFIG_HOME", env!("CARGO_TARGET_TMPDIR"))
        .env("HELM_CACHE_HOME", env!("CARGO_TARGET_TMPDIR"))
        .env("HELM_DATA_HOME", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("run helm");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok(serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect())
}

#[test]
fn the_chart_renders_the_deckhouse_environment_and_scoped_rbac() {
    let docs = render(&[
        "dvp.parentKubeconfigSecret.name=dvp-parent",
        "dvp.namespace=tenant-project",
        "clusterUUID=u-1",
    ])
    .unwrap();
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let env = container["env"].as_sequence().unwrap();
    assert!(env
        .iter()
        .any(|e| e["name"] == "DVP_KUBERNETES_CONFIG_BASE64"
            && e["valueFrom"]["secretKeyRef"]["name"] == "dvp-parent"));
    assert!(env
        .iter()
        .any(|e| e["name"] == "DVP_NAMESPACE" && e["value"] == "tenant-project"));
    let args: Vec<&str> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.contains(&"--cluster-uuid=u-1")
            && args.contains(&"--namespace=d8-cloud-instance-manager"),
        "{args:?}"
    );
    let role = docs
        .iter()
        .find(|d| d["kind"] == "Role" && d["metadata"]["name"] == "capdvp-controller-manager")
        .expect("a namespaced Role");
    assert_eq!(role["metadata"]["namespace"], "d8-cloud-instance-manager");
    let err = render(&["dvp.namespace=tenant-project"]).unwrap_err();
    assert!(
        err.contains("dvp.parentKubeconfigSecret.name is required"),
        "{err}"
    );
}
