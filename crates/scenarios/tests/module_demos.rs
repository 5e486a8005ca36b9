//! `make demo MODULE=…` stays true: each module demo runs to its end and shows the module
//! controller's StorageClasses and the registration Secret it derived.

use std::process::Command;

fn run_demo(module: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_stratus-demo-module"))
        .arg(module)
        .output()
        .expect("the demo starts");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "MODULE={module} failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The row of the StorageClass table that starts with `name`.
fn class_row<'a>(stdout: &'a str, name: &str) -> &'a str {
    stdout
        .lines()
        .find(|line| line.trim_start().starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no StorageClass row {name}:\n{stdout}"))
}

#[test]
fn the_aws_module_demo_shows_classes_a_bound_and_attached_claim_and_a_load_balancer() {
    let out = run_demo("aws");
    assert!(class_row(&out, "gp3").ends_with("yes"), "{out}");
    assert!(class_row(&out, "io2-fast").contains(r#""iopsPerGB":"50""#));
    assert!(!out.contains("\n    sc1 "), "sc1 is excluded:\n{out}");
    assert!(
        out.contains(r#""providerSecretAccessKey":"(hidden)""#),
        "{out}"
    );
    assert!(out.contains("storageClassName: gp3"), "{out}");
    assert!(
        out.contains("aws:///us-east-1a/i-"),
        "the Node initialised:\n{out}"
    );
    assert!(
        out.contains("10 GiB gp3 in us-east-1a, iops 4000 throughput 250"),
        "the claim bound to a volume of the default class:\n{out}"
    );
    let attached = out
        .lines()
        .find(|l| l.contains("attached in"))
        .unwrap_or_else(|| panic!("no attachment:\n{out}"));
    assert!(attached.ends_with("(attached)"), "{out}");
    assert!(
        out.contains(".elb.amazonaws.com"),
        "the Service's ingress:\n{out}"
    );
    assert!(out.contains("TCP:80->"), "{out}");
}

#[test]
fn the_openstack_module_demo_shows_discovery_classes_a_bound_and_attached_claim_and_a_load_balancer(
) {
    let out = run_demo("openstack");
    assert!(
        out.contains(r#"volumeTypes ["__DEFAULT__", "multiattach", "ssd"]"#),
        "{out}"
    );
    let default = class_row(&out, "default");
    assert!(
        default.contains("true") && default.ends_with("yes"),
        "{out}"
    );
    for name in ["multiattach", "ssd"] {
        assert!(class_row(&out, name).contains("WaitForFirstConsumer"));
    }
    assert!(out.contains(r#""password":"(hidden)""#), "{out}");
    assert!(out.contains("OpenStackMachineClass"), "{out}");
    assert!(
        out.contains("worker-0  openstack:///"),
        "the Node initialised:\n{out}"
    );
    assert!(
        out.contains("2 GiB of type __DEFAULT__ in nova"),
        "the claim bound through the default class:\n{out}"
    );
    let attached = out
        .lines()
        .find(|l| l.contains("attached in"))
        .unwrap_or_else(|| panic!("no attachment:\n{out}"));
    assert!(attached.ends_with("(in-use)"), "{out}");
    assert!(
        out.contains("\"kube_service_demo_default_web\", ACTIVE"),
        "{out}"
    );
    assert!(out.contains("    member 10.0.0."), "{out}");
}

#[test]
fn the_dvp_module_demo_shows_parent_classes_a_node_group_a_bound_and_attached_claim_and_a_load_balancer(
) {
    let out = run_demo("dvp");
    assert!(
        out.contains(r#"storageClasses ["ceph-rbd", "linstor-thin-r1 (default)", "local-path"]"#),
        "{out}"
    );
    assert!(class_row(&out, "linstor-thin-r1").ends_with("yes"), "{out}");
    assert!(class_row(&out, "ceph-rbd").contains(r#""dvpStorageClass":"ceph-rbd""#));
    assert!(
        !out.contains("\n    local-path "),
        "local-path is excluded:\n{out}"
    );
    assert!(
        out.contains("capiMachineTemplateKind  DeckhouseMachineTemplate"),
        "{out}"
    );
    assert!(out.contains("3 VM(s) running in the parent"), "{out}");
    let running = out
        .lines()
        .filter(|l| l.contains(" 2      2Gi     generic  Running"))
        .count();
    assert_eq!(
        running,
        1 + 3,
        "one VM listed after the first step, three after the second:\n{out}"
    );
    assert!(out.contains("disks in the parent: 6"), "{out}");
    assert!(
        out.contains("  dvp://workers-"),
        "a VM's Node initialised:\n{out}"
    );
    assert!(
        out.contains("storageClassName: linstor-thin-r1"),
        "the parent's default is the module's:\n{out}"
    );
    assert!(out.contains("parent class linstor-thin-r1"), "{out}");
    assert!(
        out.contains("VirtualMachineBlockDeviceAttachment vmbda-pvc-"),
        "{out}"
    );
    let ingress = out
        .lines()
        .find(|l| l.contains("ingress after"))
        .unwrap_or_else(|| panic!("no ingress:\n{out}"));
    assert!(ingress.contains(": \"loadbalancer\"}"), "{out}");
}
