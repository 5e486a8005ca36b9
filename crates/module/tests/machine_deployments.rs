//! The rendered `AWSMachineClass` driven by its real consumer: machine-controller-manager v0.45.0
//! (node-manager's VM controller, in-tree AWS driver) turns a `MachineDeployment` over the class
//! into EC2 instances in moto with the subnet, security groups, tags, key and image the class
//! says (and requests the disk, instance profile and spot market it says, which moto does not
//! keep), records their provider IDs on the Machines, and terminates one when the deployment
//! scales down. Its aws-sdk-go v1.23 cannot be pointed at an endpoint, so it reaches moto through
//! an intercepting proxy on loopback (its CA trusted via `SSL_CERT_FILE` and `AWS_CA_BUNDLE`).
//! Likewise its in-tree OpenStack driver boots servers in the simulators (through real Keystone)
//! from the rendered `OpenStackMachineClass`: flavor, zone, key, security groups, the cluster's
//! and the class's metadata, the internal network as the pod network (its port admits the pod
//! subnet), from a volume for the class's root disk; and deletes one on scale-down.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, Result};
use aws_sdk_ec2::types::{Filter, InstanceStateName};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::json;
use stratus_module::machine_classes::{
    aws_machine_class, openstack_machine_class, AwsMachine, OpenStackMachine, NAMESPACE,
};
use stratus_scenarios::{ec2_fixture, iam_fixture, wait_for};
use stratus_testenv::core::intercept::InterceptProxy;
use stratus_testenv::tools::machine_controller_manager::MachineControllerManager;
use stratus_testenv::tools::module_crds::{install, MACHINE_CONTROLLER_MANAGER};
use stratus_testenv::{Identity, KubeCluster, OpenStackEnv, TestEnv};

const CLUSTER_UUID: &str = "3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";
const ZONE: &str = "us-east-1a";
const WAIT: Duration = Duration::from_secs(120);

/// Every kind machine-controller-manager v0.45.0 watches (it waits for all their informers).
const CRDS: [&str; 11] = [
    "machine.sapcloud.io_alicloudmachineclasses.yaml",
    "machine.sapcloud.io_awsmachineclasses.yaml",
    "machine.sapcloud.io_azuremachineclasses.yaml",
    "machine.sapcloud.io_gcpmachineclasses.yaml",
    "machine.sapcloud.io_machineclasses.yaml",
    "machine.sapcloud.io_machinedeployments.yaml",
    "machine.sapcloud.io_machines.yaml",
    "machine.sapcloud.io_machinesets.yaml",
    "machine.sapcloud.io_openstackmachineclasses.yaml",
    "machine.sapcloud.io_packetmachineclasses.yaml",
    "machine.sapcloud.io_scales.yaml",
];

fn machine_api(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machine.sapcloud.io", "v1alpha1", kind),
        plural,
    );
    Api::namespaced_with(client.clone(), NAMESPACE, &resource)
}

/// The MachineDeployment `worker` of two over the class `kind`/`name`.
fn deployment(kind: &str, name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "machine.sapcloud.io/v1alpha1", "kind": "MachineDeployment",
        "metadata": {"name": "worker", "namespace": NAMESPACE},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"node-group": "worker"}},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                 "template": {"metadata": {"labels": {"node-group": "worker"}},
                              "spec": {"class": {"kind": kind, "name": name}}}}
    }))
    .expect("a MachineDeployment")
}

/// Waits until the Machines carry exactly the provider IDs `expected`.
async fn wait_provider_ids(admin: &kube::Client, expected: &BTreeSet<String>) -> Result<()> {
    let machines = machine_api(admin, "Machine", "machines");
    wait_for("the Machines' provider IDs", WAIT, || async {
        let ids: BTreeSet<String> = machines
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter_map(|m| m.data["spec"]["providerID"].as_str().map(str::to_string))
            .collect();
        Ok((&ids == expected).then_some(()))
    })
    .await
}

/// Scales MachineDeployment `worker` to `replicas`.
async fn scale(deployments: &Api<DynamicObject>, replicas: i32) -> Result<()> {
    deployments
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await?;
    Ok(())
}

async fn security_group(ec2: &aws_sdk_ec2::Client, vpc: &str, name: &str) -> Result<String> {
    let created = ec2
        .create_security_group()
        .group_name(name)
        .description(name)
        .vpc_id(vpc)
        .send()
        .await?;
    created.group_id().map(str::to_string).context("group id")
}

/// The running (or pending) instances tagged as the cluster's.
async fn cluster_instances(ec2: &aws_sdk_ec2::Client) -> Result<Vec<aws_sdk_ec2::types::Instance>> {
    let answer = ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag-key")
                .values(format!("kubernetes.io/cluster/{CLUSTER_UUID}"))
                .build(),
        )
        .filters(
            Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .build(),
        )
        .send()
        .await?;
    Ok(answer
        .reservations()
        .iter()
        .flat_map(|r| r.instances().iter().cloned())
        .collect())
}

#[tokio::test]
async fn machine_controller_manager_runs_instances_from_the_rendered_aws_class() -> Result<()> {
    let env = TestEnv::start().await?;
    let admin = env.kube_client(Identity::Admin).await?;
    install(&admin, MACHINE_CONTROLLER_MANAGER, &CRDS).await?;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await?;

    // The cloud as Deckhouse's layouts leave it: a subnet per zone, the cluster's security
    // group, the nodes' instance profile.
    let ec2 = ec2_fixture::client(env.aws_endpoint()).await;
    let subnet = ec2_fixture::subnet(&ec2, ZONE).await?;
    let vpc = ec2
        .describe_subnets()
        .subnet_ids(&subnet)
        .send()
        .await?
        .subnets()
        .first()
        .and_then(|s| s.vpc_id())
        .context("the subnet's VPC")?
        .to_string();
    let cluster_group = security_group(&ec2, &vpc, "cluster").await?;
    let class_group = security_group(&ec2, &vpc, "workers-extra").await?;
    iam_fixture::create_instance_profile(env.aws_endpoint(), "stratus-node").await?;
    let ami = ec2
        .describe_images()
        .owners("amazon")
        .send()
        .await?
        .images()
        .iter()
        .find_map(|i| i.image_id().map(str::to_string))
        .context("moto holds no Amazon image")?;

    let provider = json!({"region": "us-east-1", "keyName": "stratus", "tags": {"team": "platform"},
        "instances": {"ami": ami, "iamProfileName": "stratus-node", "associatePublicIPAddress": false,
                      "additionalSecurityGroups": [cluster_group]},
        "internal": {"zoneToSubnetIdMap": {ZONE: subnet}}});
    // io1 rather than gp3: v0.45.0's validation knows gp2, io1, st1, sc1 and standard only.
    let instance_class = json!({"instanceType": "m5.large", "spot": true,
        "additionalSecurityGroups": [class_group], "additionalTags": {"role": "worker"},
        "diskType": "io1", "diskSizeGb": 50, "iops": 500});
    let rendered = aws_machine_class(&AwsMachine {
        node_group: "worker",
        zone: ZONE,
        cluster_uuid: CLUSTER_UUID,
        instance_class: &instance_class,
        provider: &provider,
    })?;
    let class: DynamicObject = serde_json::from_value(rendered.clone())?;
    let class_name = class.metadata.name.clone().context("class name")?;
    machine_api(&admin, "AWSMachineClass", "awsmachineclasses")
        .create(&PostParams::default(), &class)
        .await?;
    // The class's secretRef: node-manager's bootstrap user data and the cloud credentials.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": class_name, "namespace": NAMESPACE},
        "stringData": {"userData": "#!/bin/bash\necho bootstrap\n",
                       "providerAccessKeyId": "testing", "providerSecretAccessKey": "testing"}
    }))?;
    Api::<Secret>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await?;
    let deployments = machine_api(&admin, "MachineDeployment", "machinedeployments");
    deployments
        .create(
            &PostParams::default(),
            &deployment("AWSMachineClass", &class_name),
        )
        .await?;

    let intercept = InterceptProxy::start(
        env.aws_endpoint()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()?,
        env.dir(),
    )
    .await?;
    let mcm = MachineControllerManager::start(
        &env.kubeconfig(Identity::Admin),
        NAMESPACE,
        intercept.env(),
        env.dir(),
    )
    .await?;

    let instances = wait_for("two instances from the deployment", WAIT, || async {
        let found = cluster_instances(&ec2).await?;
        Ok((found.len() == 2).then_some(found))
    })
    .await
    .with_context(|| format!("machine-controller-manager log:\n{}", mcm.log_tail()))?;

    let groups: BTreeSet<String> = [cluster_group.clone(), class_group.clone()].into();
    for instance in &instances {
        let id = instance.instance_id().context("id")?;
        assert_eq!(instance.subnet_id(), Some(subnet.as_str()), "{id}");
        assert_eq!(instance.image_id(), Some(ami.as_str()), "{id}");
        assert_eq!(
            instance.instance_type().map(|t| t.as_str()),
            Some("m5.large")
        );
        assert_eq!(instance.key_name(), Some("stratus"), "{id}");
        // The class puts the groups on the primary network interface, in the zone's subnet.
        let interface = instance
            .network_interfaces()
            .first()
            .context("a network interface")?;
        assert_eq!(interface.subnet_id(), Some(subnet.as_str()), "{id}");
        let attached: BTreeSet<String> = interface
            .groups()
            .iter()
            .filter_map(|g| g.group_id().map(str::to_string))
            .collect();
        assert_eq!(
            attached, groups,
            "{id}: the cluster's and the class's groups"
        );
        let tags: BTreeMap<&str, &str> = instance
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?, t.value()?)))
            .collect();
        for (key, value) in [
            ("team", "platform"),
            ("role", "worker"),
            (&*format!("kubernetes.io/cluster/{CLUSTER_UUID}"), "1"),
            (&*format!("kubernetes.io/role/{CLUSTER_UUID}"), "1"),
        ] {
            assert_eq!(
                tags.get(key).copied(),
                Some(value),
                "{id}: tag {key} in {tags:?}"
            );
        }
    }

    // Spot, the instance profile and the root disk: moto's answers carry none of them (it keeps
    // no market type or profile in DescribeInstances and makes no volume for this mapping), so
    // the requests themselves show them — every RunInstances asked for a one-time spot instance
    // with no maximum price, the nodes' profile (which moto checked exists) and an io1 root disk
    // of the class's size and IOPS on the image's root device.
    let sent = intercept.sent();
    let runs: Vec<&str> = sent
        .split("Action=RunInstances")
        .skip(1)
        .map(|rest| rest.split(" HTTP/1.1").next().unwrap_or(rest))
        .collect();
    assert_eq!(runs.len(), 2, "two RunInstances calls");
    for run in &runs {
        assert!(
            run.contains("IamInstanceProfile.Name=stratus-node")
                && run.contains("BlockDeviceMapping.1.DeviceName=%2Fdev%2Fsda1")
                && run.contains("BlockDeviceMapping.1.Ebs.VolumeType=io1")
                && run.contains("BlockDeviceMapping.1.Ebs.VolumeSize=50")
                && run.contains("BlockDeviceMapping.1.Ebs.Iops=500")
                && run.contains("InstanceMarketOptions.MarketType=spot")
                && run.contains("InstanceMarketOptions.SpotOptions.SpotInstanceType=one-time")
                && !run.contains("MaxPrice"),
            "{run}"
        );
    }

    // The Machines carry the instances' provider IDs.
    let expected: BTreeSet<String> = instances
        .iter()
        .filter_map(|i| i.instance_id())
        .map(|id| format!("aws:///us-east-1/{id}"))
        .collect();
    wait_provider_ids(&admin, &expected).await?;

    // Scaled down, one instance is terminated.
    scale(&deployments, 1).await?;
    wait_for("one instance left", WAIT, || async {
        Ok((cluster_instances(&ec2).await?.len() == 1).then_some(()))
    })
    .await
    .with_context(|| format!("machine-controller-manager log:\n{}", mcm.log_tail()))?;
    let terminated = ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("instance-state-name")
                .values("terminated")
                .values("shutting-down")
                .build(),
        )
        .send()
        .await?;
    let gone: Vec<_> = terminated
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| i.state().and_then(|s| s.name()) != Some(&InstanceStateName::Running))
        .collect();
    assert_eq!(gone.len(), 1, "exactly one instance terminated");

    // Every cloud call went to moto through the intercepting proxy, as EC2 of the class's region.
    let tunnels = intercept.tunnels();
    assert!(!tunnels.is_empty());
    assert!(
        tunnels
            .iter()
            .all(|t| t == "ec2.us-east-1.amazonaws.com:443"),
        "{tunnels:?}"
    );
    Ok(())
}

#[tokio::test]
async fn machine_controller_manager_boots_servers_from_the_rendered_openstack_class() -> Result<()>
{
    let cluster = KubeCluster::start().await?;
    let admin = cluster.kube_client(Identity::Admin).await?;
    let cloud = OpenStackEnv::start().await?;
    let sim = cloud.sim().context("the simulators run in-process")?;
    let (internal, _) = sim.create_network("int", "10.20.0.0/24", false)?;
    sim.add_images("ubuntu", 1);
    install(&admin, MACHINE_CONTROLLER_MANAGER, &CRDS).await?;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await?;

    let creds = cloud.credentials();
    let provider = json!({"connection": {"region": creds.region},
        "internalNetworkNames": ["int"], "podNetworkMode": "DirectRoutingWithPortSecurityEnabled",
        "instances": {"imageName": "ubuntu-0", "mainNetwork": "int", "sshKeyPairName": "stratus",
                      "securityGroups": ["default"]}});
    let instance_class = json!({"flavorName": "m1.small", "rootDiskSize": 30,
        "additionalTags": {"role": "worker"}});
    let tags = json!({"team": "platform"});
    let mut rendered = openstack_machine_class(&OpenStackMachine {
        node_group: "worker",
        zone: "nova",
        cluster_uuid: CLUSTER_UUID,
        instance_class: &instance_class,
        provider: &provider,
        tags: &tags,
        pod_subnet: "10.111.0.0/16",
    })?;
    // v0.45.0's CRD requires `imageID` and `networkID` (Deckhouse's fork dropped both): empty,
    // the release's driver resolves the class's image and networks by name, as the fork does.
    rendered["spec"]["imageID"] = json!("");
    rendered["spec"]["networkID"] = json!("");
    let class: DynamicObject = serde_json::from_value(rendered)?;
    let class_name = class.metadata.name.clone().context("class name")?;
    machine_api(&admin, "OpenStackMachineClass", "openstackmachineclasses")
        .create(&PostParams::default(), &class)
        .await?;
    // The class's secretRef: the registration's connection keys, which are the driver's.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": class_name, "namespace": NAMESPACE},
        "stringData": {"userData": "#cloud-config\n", "authURL": creds.auth_url,
            "username": creds.username, "password": creds.password,
            "domainName": creds.user_domain_name, "tenantName": creds.project_name}
    }))?;
    Api::<Secret>::namespaced(admin.clone(), NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await?;
    let deployments = machine_api(&admin, "MachineDeployment", "machinedeployments");
    deployments
        .create(
            &PostParams::default(),
            &deployment("OpenStackMachineClass", &class_name),
        )
        .await?;
    cloud.reset_request_counts().await?;
    let mcm = MachineControllerManager::start(
        &cluster.kubeconfig(Identity::Admin),
        NAMESPACE,
        Vec::new(),
        cluster.dir(),
    )
    .await?;

    let cluster_tag = format!("kubernetes.io-cluster-deckhouse-{CLUSTER_UUID}");
    let servers = wait_for("two active servers from the deployment", WAIT, || async {
        let servers: Vec<_> = sim
            .servers()
            .into_iter()
            .filter(|s| s.metadata.contains_key(&cluster_tag))
            .collect();
        // Done once both run and their ports admit the pod subnet (the driver's last step).
        let admitted = |id: &str| {
            sim.ports_of(id).iter().any(|p| {
                p["allowed_address_pairs"]
                    .as_array()
                    .is_some_and(|pairs| pairs.iter().any(|a| a["ip_address"] == "10.111.0.0/16"))
            })
        };
        Ok((servers.len() == 2
            && servers.iter().all(|s| {
                s.status == stratus_openstack_sim::model::ServerStatus::Active && admitted(&s.id)
            }))
        .then_some(servers))
    })
    .await
    .with_context(|| format!("machine-controller-manager log:\n{}", mcm.log_tail()))?;
    for server in &servers {
        let id = &server.id;
        assert_eq!(server.flavor_id, "2", "{id}: m1.small");
        assert_eq!(server.az, "nova");
        assert_eq!(server.key_name.as_deref(), Some("stratus"));
        assert_eq!(server.security_groups, ["default"]);
        for (key, value) in [
            ("team", "platform"),
            ("role", "worker"),
            (cluster_tag.as_str(), "1"),
            ("kubernetes.io-role-deckhouse-worker-nova", "1"),
        ] {
            assert_eq!(server.metadata.get(key), Some(&json!(value)), "{id}: {key}");
        }
        // The main network is the internal one, marked the pod network (its port admits the pod
        // subnet, waited for above).
        let ports = sim.ports_of(id);
        assert_eq!(ports.len(), 1, "{id}: {ports:?}");
        assert_eq!(ports[0]["network_id"], internal.as_str());
    }
    // A root disk of the class's size means booting from a volume, never from the image alone.
    // Under load MCM may replace a machine whose boot outlived its health timeout, so more than
    // two boots can happen; every one of them goes through os-volumes_boot.
    let counts = cloud.request_counts().await?;
    let volume_boots = counts
        .get("compute:POST /os-volumes_boot")
        .copied()
        .unwrap_or(0);
    assert!(volume_boots >= 2, "{counts:?}");
    assert!(!counts.contains_key("compute:POST /servers"), "{counts:?}");

    let expected: BTreeSet<String> = servers
        .iter()
        .map(|s| format!("openstack:///{}/{}", creds.region, s.id))
        .collect();
    wait_provider_ids(&admin, &expected).await?;

    scale(&deployments, 1).await?;
    wait_for("one server left", WAIT, || async {
        let left = sim
            .servers()
            .into_iter()
            .filter(|s| s.metadata.contains_key(&cluster_tag))
            .count();
        Ok((left == 1).then_some(()))
    })
    .await
    .with_context(|| format!("machine-controller-manager log:\n{}", mcm.log_tail()))?;
    Ok(())
}
