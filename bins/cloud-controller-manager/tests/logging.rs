//! `--logging-format=json`: every log line of a running CCM is one JSON object with a level and
//! a message; other formats are refused.

mod common;

use common::{setup, WAIT};
use stratus_scenarios::wait_for;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line() {
    let s = setup("json-logs", true).await;
    let ccm = s.start_ccm(&["--controllers=cloud-node", "--logging-format=json"]);
    wait_for("the lease", WAIT, || async {
        Ok(ccm.log().contains("acquired the lease").then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    let log = ccm.log();
    let mut messages = Vec::new();
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON object ({e}): {line:?}"));
        assert!(v["level"].is_string(), "{line}");
        assert!(v["timestamp"].is_string(), "{line}");
        messages.push(
            v["fields"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    assert!(
        messages.iter().any(|m| m == "acquired the lease"),
        "{messages:?}"
    );
}

#[test]
fn unknown_logging_formats_are_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
        .args(["--cloud-provider=aws", "--logging-format=xml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid value 'xml' for '--logging-format"),
        "{err}"
    );
}
