//! The tagging controller (`--controllers=…,tagging`) against a real kube-apiserver and moto:
//! joining nodes' instances are tagged in shared calls, a changed tag set is applied with the
//! dropped keys removed, a deleted node's instance is untagged, and an idle cluster costs no tag
//! call.

mod common;

use std::collections::BTreeMap;

use common::{setup, WAIT};
use stratus_scenarios::kube_fixture::{self, get_node, label};
use stratus_scenarios::wait_for;

const RECORD_LABEL: &str = "k8s.io/cloud-provider-aws";

async fn instance_tags(s: &common::Setup, id: &str) -> BTreeMap<String, String> {
    let out = s
        .ec2
        .describe_tags()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("resource-id")
                .values(id)
                .build(),
        )
        .send()
        .await
        .expect("describe tags");
    out.tags()
        .iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
        .collect()
}

/// Waits until `check` holds for the tags of every instance of `ids`.
async fn wait_tags(
    s: &common::Setup,
    what: &str,
    ids: &[String],
    check: impl Fn(&BTreeMap<String, String>) -> bool,
) {
    wait_for(what, WAIT, || async {
        for id in ids {
            if !check(&instance_tags(s, id).await) {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
    .unwrap();
}

fn count(counts: &BTreeMap<String, u64>, op: &str) -> u64 {
    counts.get(op).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_joining_nodes_retags_on_change_and_untags_deleted_nodes() {
    let s = setup("tagging", true).await;
    let ids: Vec<String> = s.launch(3).await.into_iter().map(|i| i.id).collect();
    for id in &ids {
        kube_fixture::create_uninitialized_node(&s.admin, id, &[], BTreeMap::new())
            .await
            .unwrap();
    }
    s.env.reset_aws_request_counts().await.unwrap();
    let mut ccm = s.start_ccm(&[
        "--controllers=*,tagging",
        "--tags=team=a,env=dev",
        "--resources=instance",
    ]);

    // Joined: every instance carries the tags, every node the upstream checksum label.
    wait_tags(&s, "instances tagged", &ids, |t| {
        t.get("team").map(String::as_str) == Some("a")
            && t.get("env").map(String::as_str) == Some("dev")
    })
    .await;
    let labelled = wait_for("nodes labelled", WAIT, || async {
        let mut sums = Vec::new();
        for id in &ids {
            let node = get_node(&s.admin, id).await?.unwrap();
            match label(&node, RECORD_LABEL) {
                Some(v) => sums.push(v.to_string()),
                None => return Ok(None),
            }
        }
        Ok(Some(sums))
    })
    .await
    .unwrap();
    // md5("env=dev,team=a"), as upstream's controller computes it.
    assert!(
        labelled
            .iter()
            .all(|v| v == "b6b0974dbee5ecff672ce47be6c0a78b"),
        "{labelled:?}"
    );
    let counts = s.env.aws_request_counts().await.unwrap();
    let creates = count(&counts, "ec2:CreateTags");
    assert!(
        (1..=3).contains(&creates),
        "at most one CreateTags per join wave, got {creates}: {counts:?}\n{}",
        ccm.log()
    );
    assert_eq!(count(&counts, "ec2:DeleteTags"), 0, "{counts:?}");

    // Idle: a node change and two cache refreshes later, no tag call.
    s.env.reset_aws_request_counts().await.unwrap();
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(s.admin.clone());
    nodes
        .patch(
            &ids[0],
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({"metadata": {"labels": {"touched": "yes"}}}),
            ),
        )
        .await
        .unwrap();
    wait_for("two instance-cache refreshes", WAIT, || async {
        let c = s.env.aws_request_counts().await?;
        Ok((count(&c, "ec2:DescribeInstances") >= 2).then_some(()))
    })
    .await
    .unwrap();
    let counts = s.env.aws_request_counts().await.unwrap();
    assert_eq!(count(&counts, "ec2:CreateTags"), 0, "idle: {counts:?}");
    assert_eq!(count(&counts, "ec2:DeleteTags"), 0, "idle: {counts:?}");

    // Changed tag set (restart): one CreateTags and one DeleteTags for all three nodes.
    ccm.kill();
    s.env.reset_aws_request_counts().await.unwrap();
    let ccm = s.start_ccm(&[
        "--controllers=*,tagging",
        "--tags=team=b,owner=x",
        "--resources=instance",
    ]);
    wait_tags(&s, "instances re-tagged", &ids, |t| {
        t.get("team").map(String::as_str) == Some("b")
            && t.get("owner").map(String::as_str) == Some("x")
            && !t.contains_key("env")
    })
    .await;
    let counts = s.env.aws_request_counts().await.unwrap();
    assert_eq!(
        (
            count(&counts, "ec2:CreateTags"),
            count(&counts, "ec2:DeleteTags")
        ),
        (1, 1),
        "one shared call each: {counts:?}\n{}",
        ccm.log()
    );

    // A deleted node's instance loses our tags; the others keep them, and the cluster tag stays.
    kube_fixture::delete_node(&s.admin, &ids[2]).await.unwrap();
    wait_tags(&s, "deleted node's instance untagged", &ids[2..], |t| {
        !t.contains_key("team") && !t.contains_key("owner")
    })
    .await;
    let rest = instance_tags(&s, &ids[0]).await;
    assert_eq!(rest.get("team").map(String::as_str), Some("b"), "{rest:?}");
    let gone = instance_tags(&s, &ids[2]).await;
    assert!(
        gone.keys().any(|k| k.starts_with("kubernetes.io/cluster/")),
        "only our tags are removed: {gone:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_unsupported_resources_and_missing_tags_by_name() {
    let s = setup("tagging-flags", true).await;
    let mut ccm = s.start_ccm(&["--controllers=*,tagging", "--resources=instance"]);
    let status = ccm.wait().expect("exit status");
    assert_eq!(status.code(), Some(2), "{}", ccm.log());
    assert!(
        ccm.log().contains("--tags must not be empty"),
        "{}",
        ccm.log()
    );

    let mut ccm = s.start_ccm(&[
        "--controllers=*,tagging",
        "--tags=a=1",
        "--resources=volume",
        "--leader-elect=false",
    ]);
    // Without leader election the controllers start at once, and the tagging one refuses.
    let status = ccm.wait().expect("exit status");
    assert!(!status.success(), "{}", ccm.log());
    assert!(
        ccm.log().contains("\"volume\" is not a supported resource"),
        "{}",
        ccm.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_and_burst_limits_spread_the_nodes_over_calls() {
    let s = setup("tagging-rate", true).await;
    let ids: Vec<String> = s.launch(3).await.into_iter().map(|i| i.id).collect();
    for id in &ids {
        kube_fixture::create_uninitialized_node(&s.admin, id, &[], BTreeMap::new())
            .await
            .unwrap();
    }
    // Nodes initialised first, without tagging: then all three need tags at once.
    let mut ccm = s.start_ccm(&[]);
    wait_for("nodes initialised", WAIT, || async {
        for id in &ids {
            let node = get_node(&s.admin, id).await?.unwrap();
            if node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.as_ref())
                .is_none()
            {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
    .unwrap();
    ccm.kill();
    s.env.reset_aws_request_counts().await.unwrap();
    // One node at a time, one more per second: three calls instead of one.
    let ccm = s.start_ccm(&[
        "--controllers=*,tagging",
        "--tags=team=a",
        "--resources=instance",
        "--tagging-controller-rate-limit=1",
        "--tagging-controller-burst-limit=1",
    ]);
    wait_tags(&s, "instances tagged", &ids, |t| {
        t.get("team").map(String::as_str) == Some("a")
    })
    .await;
    let counts = s.env.aws_request_counts().await.unwrap();
    assert_eq!(
        count(&counts, "ec2:CreateTags"),
        3,
        "one node per call under the limit: {counts:?}\n{}",
        ccm.log()
    );
}
