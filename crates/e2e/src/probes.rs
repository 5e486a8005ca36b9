//! Whether a container's probes really pass, from the kubelet's own counters
//! (`prober_probe_total` of `/metrics/probes`, read through the apiserver's node proxy): a
//! Ready pod proves its readiness probe once, but only these counters show the liveness probe
//! ran and never failed.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::time::Instant;

/// One `prober_probe_total` sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeCount {
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// `Liveness`, `Readiness` or `Startup`.
    pub probe_type: String,
    /// `successful`, `failed` or `unknown`.
    pub result: String,
    /// How many probes ended so.
    pub count: u64,
}

/// The `prober_probe_total` samples of a Prometheus text exposition (other metrics and
/// comments are skipped; a malformed sample of this metric is an error naming its line).
pub fn parse_probe_totals(text: &str) -> Result<Vec<ProbeCount>> {
    let mut counts = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("prober_probe_total{") else {
            continue;
        };
        let (labels, value) = rest
            .rsplit_once('}')
            .with_context(|| format!("no closing brace in {line:?}"))?;
        let labels = parse_labels(labels).with_context(|| format!("bad labels in {line:?}"))?;
        let label = |name: &str| {
            labels
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .with_context(|| format!("no {name} label in {line:?}"))
        };
        let count = value
            .trim()
            .parse::<f64>()
            .with_context(|| format!("bad value in {line:?}"))?;
        counts.push(ProbeCount {
            pod: label("pod")?,
            container: label("container")?,
            probe_type: label("probe_type")?,
            result: label("result")?,
            count: count as u64,
        });
    }
    Ok(counts)
}

/// `name="value",…` pairs (values may hold escaped quotes and commas).
fn parse_labels(text: &str) -> Option<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => value.push(chars.next()?.1),
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        pairs.push((name.trim().to_owned(), value));
        rest = after[end + 1..].trim_start_matches(',').trim();
    }
    Some(pairs)
}

/// The counts of one container's probes of one type, as `(successful, failed)`.
pub fn tally(counts: &[ProbeCount], pod: &str, container: &str, probe_type: &str) -> (u64, u64) {
    let sum = |result: &str| {
        counts
            .iter()
            .filter(|c| c.pod == pod && c.container == container)
            .filter(|c| c.probe_type == probe_type && c.result == result)
            .map(|c| c.count)
            .sum()
    };
    (sum("successful"), sum("failed"))
}

/// The kubelet's probe counters on `node`.
pub async fn probe_totals(client: &kube::Client, node: &str) -> Result<Vec<ProbeCount>> {
    let request =
        http::Request::get(format!("/api/v1/nodes/{node}/proxy/metrics/probes")).body(Vec::new())?;
    let text = client
        .request_text(request)
        .await
        .with_context(|| format!("reading node {node}'s /metrics/probes"))?;
    parse_probe_totals(&text)
}

/// Waits until the kubelet on `node` has run `container`'s liveness and readiness probes
/// successfully at least once each; fails when a liveness probe has failed, or at `deadline`.
pub async fn wait_passing(
    client: &kube::Client,
    node: &str,
    pod: &str,
    container: &str,
    deadline: Duration,
) -> Result<()> {
    let until = Instant::now() + deadline;
    loop {
        let counts = probe_totals(client, node).await?;
        let (live, dead) = tally(&counts, pod, container, "Liveness");
        let (ready, _) = tally(&counts, pod, container, "Readiness");
        if dead > 0 {
            bail!("{pod}/{container}: {dead} liveness probes failed ({live} passed)");
        }
        if live > 0 && ready > 0 {
            return Ok(());
        }
        if Instant::now() >= until {
            bail!(
                "{pod}/{container}: after {deadline:?} liveness passed {live} times, readiness {ready} times; counters: {counts:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP prober_probe_total [ALPHA] Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="ccm",namespace="kube-system",pod="ccm-x",pod_uid="u1",probe_type="Liveness",result="successful"} 3
prober_probe_total{container="ccm",namespace="kube-system",pod="ccm-x",pod_uid="u1",probe_type="Readiness",result="failed"} 2
prober_probe_total{container="ccm",namespace="kube-system",pod="ccm-x",pod_uid="u1",probe_type="Readiness",result="successful"} 7
prober_probe_duration_seconds_bucket{container="ccm",le="0.005"} 1
"#;

    #[test]
    fn samples_of_the_counter_are_read_and_tallied() {
        let counts = parse_probe_totals(TEXT).unwrap();
        assert_eq!(counts.len(), 3);
        assert_eq!(tally(&counts, "ccm-x", "ccm", "Liveness"), (3, 0));
        assert_eq!(tally(&counts, "ccm-x", "ccm", "Readiness"), (7, 2));
        assert_eq!(tally(&counts, "other", "ccm", "Liveness"), (0, 0));
    }

    #[test]
    fn label_values_may_hold_escapes_and_commas() {
        let pairs = parse_labels(r#"a="x,\"y\"", b="""#).unwrap();
        assert_eq!(
            pairs,
            [("a".into(), "x,\"y\"".into()), ("b".into(), String::new())]
        );
    }

    #[test]
    fn a_malformed_sample_names_its_line() {
        for bad in [
            "prober_probe_total{pod=\"p\" 3",
            "prober_probe_total{pod=\"p\",container=\"c\",probe_type=\"Liveness\"} 3",
            "prober_probe_total{pod=\"p\",container=\"c\",probe_type=\"Liveness\",result=\"ok\"} x",
        ] {
            let err = format!("{:#}", parse_probe_totals(bad).unwrap_err());
            assert!(err.contains("prober_probe_total"), "{err}");
        }
    }
}
