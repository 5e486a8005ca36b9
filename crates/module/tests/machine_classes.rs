//! The rendered `AWSMachineClass` against its consumer's CRD: machine-controller-manager v0.45.0's
//! `machine.sapcloud.io` schema on a real apiserver. A strict apply names exactly the two fields
//! Deckhouse's machine-controller-manager fork adds (`sourceDestCheck`,
//! `useMachineNameAsNodeName`) as unknown; everything else — types included — is the release's
//! shape, and the stored object (unknown fields pruned) equals what was rendered.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use stratus_module::machine_classes::{
    aws_machine_class, dvp_machine_template, openstack_machine_class, AwsMachine, OpenStackMachine,
    NAMESPACE,
};
use stratus_testenv::core::cluster::wait_established;
use stratus_testenv::tools::module_crds::{install, MACHINE_CONTROLLER_MANAGER};
use stratus_testenv::{Identity, KubeCluster};

#[tokio::test]
async fn aws_machine_class_fits_machine_controller_managers_crd() -> Result<()> {
    let cluster = KubeCluster::start().await?;
    let admin = cluster.kube_client(Identity::Admin).await?;
    install(
        &admin,
        MACHINE_CONTROLLER_MANAGER,
        &[
            "machine.sapcloud.io_awsmachineclasses.yaml",
            "machine.sapcloud.io_openstackmachineclasses.yaml",
        ],
    )
    .await?;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await?;

    let provider = json!({"region": "eu-central-1", "keyName": "k", "tags": {"team": "a"},
        "instances": {"ami": "ami-1", "iamProfileName": "node", "associatePublicIPAddress": true, "additionalSecurityGroups": ["sg-1"]},
        "internal": {"zoneToSubnetIdMap": {"eu-central-1a": "subnet-a"}}});
    let class = json!({"instanceType": "m5.large", "spot": true, "additionalSecurityGroups": ["sg-2"],
        "additionalTags": {"role": "worker"}, "diskType": "gp3", "diskSizeGb": 50, "iops": 4000});
    let rendered = aws_machine_class(&AwsMachine {
        node_group: "worker",
        zone: "eu-central-1a",
        cluster_uuid: "3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b",
        instance_class: &class,
        provider: &provider,
    })?;
    let object: DynamicObject = serde_json::from_value(rendered.clone())?;
    let name = object.metadata.name.clone().context("a name")?;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machine.sapcloud.io", "v1alpha1", "AWSMachineClass"),
        "awsmachineclasses",
    );
    let api = Api::<DynamicObject>::namespaced_with(admin.clone(), NAMESPACE, &resource);

    // A strict create (POST ?fieldValidation=Strict) lists every unknown field at once.
    let request = http::Request::post(format!(
        "/apis/machine.sapcloud.io/v1alpha1/namespaces/{NAMESPACE}/awsmachineclasses?fieldValidation=Strict"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&rendered)?)?;
    let refused = admin
        .request_text(request)
        .await
        .expect_err("the fork's two fields are unknown to v0.45.0");
    let message = match refused {
        kube::Error::Api(status) => status.message,
        other => anyhow::bail!("not the apiserver's refusal: {other}"),
    };
    for field in ["spec.sourceDestCheck", "spec.useMachineNameAsNodeName"] {
        assert!(message.contains(field), "{message}");
    }
    let unknown = message.matches("unknown field").count();
    assert_eq!(unknown, 2, "only the fork's fields are unknown: {message}");

    // Created as the apiserver does by default: the unknown fields pruned, the rest kept.
    api.create(&PostParams::default(), &object).await?;
    let stored = api.get(&name).await?;
    let mut expected = rendered["spec"].clone();
    let spec = expected.as_object_mut().context("spec")?;
    spec.remove("sourceDestCheck");
    spec.remove("useMachineNameAsNodeName");
    assert_eq!(stored.data["spec"], expected);

    // OpenStack: v0.45.0's schema knows every field rendered; it requires two Deckhouse's fork
    // does not (`imageID`, `networkID`: the fork looks both up by name), and nothing else is
    // missing or unknown.
    let tags = json!({"team": "a"});
    let os_provider = json!({"connection": {"region": "RegionOne"}, "internalNetworkNames": ["int"],
        "podNetworkMode": "DirectRoutingWithPortSecurityEnabled",
        "instances": {"imageName": "ubuntu", "mainNetwork": "int", "sshKeyPairName": "kp", "securityGroups": ["default"]}});
    let os_class =
        json!({"flavorName": "m1.large", "rootDiskSize": 30, "additionalNetworks": ["ext"]});
    let os = openstack_machine_class(&OpenStackMachine {
        node_group: "worker",
        zone: "nova",
        cluster_uuid: "3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b",
        instance_class: &os_class,
        provider: &os_provider,
        tags: &tags,
        pod_subnet: "10.111.0.0/16",
    })?;
    let request = http::Request::post(format!(
        "/apis/machine.sapcloud.io/v1alpha1/namespaces/{NAMESPACE}/openstackmachineclasses?fieldValidation=Strict"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&os)?)?;
    let message = match admin.request_text(request).await {
        Err(kube::Error::Api(status)) => status.message,
        other => anyhow::bail!("expected the required-field refusal, got {other:?}"),
    };
    assert!(!message.contains("unknown field"), "{message}");
    let required: Vec<&str> = message.matches("Required value").collect();
    assert_eq!(required.len(), 2, "{message}");
    for field in ["spec.imageID", "spec.networkID"] {
        assert!(message.contains(field), "{message}");
    }

    // DVP: a DVPInstanceClass as the apiserver stores it (its CRD's defaults applied) becomes a
    // DeckhouseMachineTemplate capdvp's CRD accepts strictly, every field as rendered.
    for file in [
        "charts/node-manager-dvp/crds/dvpinstanceclasses.yaml",
        "charts/capdvp-controller-manager/crds/infrastructure.cluster.x-k8s.io_deckhousemachinetemplates.yaml",
    ] {
        let crd: CustomResourceDefinition =
            serde_yaml::from_str(&std::fs::read_to_string(stratus_testenv::repo_root().join(file))?)?;
        let name = crd.metadata.name.clone().context("crd name")?;
        Api::<CustomResourceDefinition>::all(admin.clone())
            .create(&PostParams::default(), &crd)
            .await?;
        wait_established(&admin, &name).await?;
    }
    let class_resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "DVPInstanceClass"),
        "dvpinstanceclasses",
    );
    let classes = Api::<DynamicObject>::all_with(admin.clone(), &class_resource);
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "DVPInstanceClass", "metadata": {"name": "worker"},
        "spec": {"virtualMachine": {"cpu": {"cores": 4, "coreFraction": "50%"}, "memory": {"size": "8Gi"}, "virtualMachineClassName": "generic"},
                 "rootDisk": {"size": "30Gi", "storageClass": "ceph", "image": {"kind": "ClusterVirtualImage", "name": "ubuntu-24"}},
                 "additionalDisks": [{"size": "10Gi", "storageClass": "fast"}]}
    }))?;
    let stored_class = classes.create(&PostParams::default(), &class).await?;
    let template = dvp_machine_template("worker-0f3a1b2c", "worker", &stored_class.data["spec"])?;
    let request = http::Request::post(format!(
        "/apis/infrastructure.cluster.x-k8s.io/v1alpha1/namespaces/{NAMESPACE}/deckhousemachinetemplates?fieldValidation=Strict"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&template)?)?;
    let created: serde_json::Value = serde_json::from_str(&admin.request_text(request).await?)?;
    let stored_spec = &created["spec"]["template"]["spec"];
    for (field, value) in template["spec"]["template"]["spec"]
        .as_object()
        .context("spec")?
    {
        assert_eq!(&stored_spec[field], value, "{field}");
    }
    Ok(())
}
