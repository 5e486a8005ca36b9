//! Every chart in `charts/` rendered with its defaults: built or pinned images, hardened, sized from the benchmarks, probed.
//!
//! The charts are found by listing `charts/`, so a new chart is checked without touching this
//! file; a chart that cannot render without some values gets the least that renders it
//! ([`REQUIRED`]), and a few values switches that add containers or modes are rendered too
//! ([`VARIANTS`]). For every container and init container of every Deployment, DaemonSet,
//! StatefulSet, Job, CronJob and Pod the rules are:
//!
//! - **image**: under [`REPOSITORY_PREFIX`] it is exactly `<repository>:<version>` of an image
//!   `make images` builds (`crates/images/src/table.rs`, tag = the workspace version, no `v`);
//!   anything else is in [`THIRD_PARTY`] at exactly its pinned tag.
//! - **securityContext**: runs as non-root (`runAsNonRoot: true`, from the container or the pod,
//!   and not `runAsUser: 0`), `readOnlyRootFilesystem: true`, `capabilities.drop` holds `ALL` and
//!   nothing is added, `allowPrivilegeEscalation: false`, not privileged. Root and privileged are
//!   allowed only by an [`EXCEPTIONS`] entry whose security context is a key of the chart's
//!   `values.yaml` with a comment saying why; privileged only beside a Bidirectional mount (the
//!   one thing that needs it), and then the capability and escalation rules cannot apply (the
//!   API rejects `allowPrivilegeEscalation: false` on a privileged container).
//! - **resources**: CPU and memory requests and a memory limit no smaller than the request; a
//!   container whose numbers a benchmark measured ([`SIZING`], every container of ours must have
//!   one) requests at least the benchmark's peak RSS and is limited to at least twice it.
//! - **probes**: liveness and readiness on every long-running container (not on Jobs' or
//!   init containers), on a port the container declares when named.
//!
//! Every violation of every chart is listed in one failure, as `chart/Kind/name/container: rule`.
//! Beside it: every chart lints with `helm lint --strict` (given its [`REQUIRED`] values), and a
//! real kube-apiserver accepts every workload rendered (server-side dry run).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Namespace, Pod, PodSpec};
use kube::api::{Api, PostParams};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use stratus_images::table::REPOSITORY_PREFIX;
use stratus_testenv::{repo_root, Identity, KubeCluster};

mod lists;
mod rules;

use lists::{EXCEPTIONS, NO_PROBES, REQUIRED, SIZING, THIRD_PARTY, VARIANTS};
use rules::{
    built_images, check_exception_values, check_image, check_probes, check_resources,
    check_security, exception,
};

/// The namespace charts are rendered into.
const NAMESPACE: &str = "stratus-charts";

/// Every chart directory (one holding a `Chart.yaml`), sorted.
fn charts() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo_root().join("charts"))
        .expect("read charts/")
        .map(|e| e.expect("charts/ entry").path())
        .filter(|p| p.join("Chart.yaml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn helm() -> PathBuf {
    stratus_testenv::ensure_installed()
        .expect("testenv install (builds helm)")
        .helm
}

/// `helm template` of `charts/<chart>` with `sets`; the documents, or helm's error.
fn render(helm: &Path, chart: &str, sets: &[&str]) -> Result<Vec<serde_yaml::Value>, String> {
    let tmp = env!("CARGO_TARGET_TMPDIR");
    let out = Command::new(helm)
        .args(["template", "stratus", "--namespace", NAMESPACE])
        .arg(repo_root().join("charts").join(chart))
        .args(sets.iter().flat_map(|s| ["--set", s]))
        // No user configuration or repositories leak in.
        .env("HELM_CONFIG_HOME", tmp)
        .env("HELM_CACHE_HOME", tmp)
        .env("HELM_DATA_HOME", tmp)
        .output()
        .expect("run helm");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_yaml::Value::deserialize(d).map_err(|e| format!("{chart}: {e}")))
        .filter(|v| !matches!(v, Ok(serde_yaml::Value::Null)))
        .collect()
}

fn required(chart: &str) -> &'static [&'static str] {
    REQUIRED
        .iter()
        .find(|(c, _)| *c == chart)
        .map_or(&[], |(_, sets)| sets)
}

/// One rendering to check: the chart, a label (`""` for the defaults) and its values.
struct Rendering {
    chart: String,
    label: &'static str,
    sets: Vec<&'static str>,
}

impl Rendering {
    fn name(&self) -> String {
        if self.label.is_empty() {
            self.chart.clone()
        } else {
            format!("{}[{}]", self.chart, self.label)
        }
    }
}

/// The defaults of every chart, then every variant.
fn renderings(charts: &[String]) -> Vec<Rendering> {
    let mut all: Vec<Rendering> = charts
        .iter()
        .map(|c| Rendering {
            chart: c.clone(),
            label: "",
            sets: required(c).to_vec(),
        })
        .collect();
    for (chart, label, sets) in VARIANTS {
        let mut values = required(chart).to_vec();
        values.extend_from_slice(sets);
        all.push(Rendering {
            chart: chart.to_string(),
            label,
            sets: values,
        });
    }
    all
}

/// A workload's pod: its kind and name, the pod spec and whether its containers run for good.
pub(crate) struct Workload {
    pub(crate) kind: String,
    pub(crate) name: String,
    pub(crate) pod: PodSpec,
    pub(crate) long_running: bool,
}

fn typed<T: DeserializeOwned>(doc: &serde_yaml::Value) -> Result<T, String> {
    serde_yaml::from_value(doc.clone()).map_err(|e| e.to_string())
}

/// The workload a document is, if it is one.
fn workload(doc: &serde_yaml::Value) -> Option<Result<Workload, String>> {
    let kind = doc["kind"].as_str()?.to_string();
    let name = doc["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let template = |t: Option<k8s_openapi::api::core::v1::PodTemplateSpec>| {
        t.and_then(|t| t.spec)
            .ok_or_else(|| format!("{kind} {name} has no pod template"))
    };
    let pod: Result<(PodSpec, bool), String> = match kind.as_str() {
        "Deployment" => typed::<Deployment>(doc)
            .and_then(|d| template(d.spec.map(|s| s.template)).map(|p| (p, true))),
        "DaemonSet" => typed::<DaemonSet>(doc)
            .and_then(|d| template(d.spec.map(|s| s.template)).map(|p| (p, true))),
        "StatefulSet" => typed::<StatefulSet>(doc)
            .and_then(|d| template(d.spec.map(|s| s.template)).map(|p| (p, true))),
        "Job" => {
            typed::<Job>(doc).and_then(|d| template(d.spec.map(|s| s.template)).map(|p| (p, false)))
        }
        "CronJob" => typed::<CronJob>(doc).and_then(|d| {
            template(d.spec.and_then(|s| s.job_template.spec).map(|s| s.template))
                .map(|p| (p, false))
        }),
        "Pod" => typed::<Pod>(doc).and_then(|p| {
            let spec = p.spec.ok_or_else(|| format!("Pod {name} has no spec"))?;
            let long = !matches!(
                spec.restart_policy.as_deref(),
                Some("Never") | Some("OnFailure")
            );
            Ok((spec, long))
        }),
        _ => return None,
    };
    Some(pod.map(|(pod, long_running)| Workload {
        kind,
        name,
        pod,
        long_running,
    }))
}

#[test]
fn every_chart_runs_built_or_pinned_images_hardened_sized_and_probed() {
    let helm = helm();
    let charts = charts();
    assert!(
        charts.len() >= 11,
        "charts/ holds fewer charts than expected: {charts:?}"
    );
    let built = built_images();
    let mut violations: Vec<String> = Vec::new();
    let mut used = BTreeSet::new();
    let mut seen_containers = BTreeSet::new();
    let mut workloads = 0;

    // The lists name charts that exist, and every REQUIRED entry is still needed.
    let lists = REQUIRED
        .iter()
        .map(|(c, _)| *c)
        .chain(VARIANTS.iter().map(|(c, _, _)| *c))
        .chain(EXCEPTIONS.iter().map(|e| e.chart))
        .chain(SIZING.iter().map(|s| s.chart));
    for chart in lists {
        if !charts.iter().any(|c| c == chart) {
            violations.push(format!("{chart}: named in this test, but not in charts/"));
        }
    }
    for (chart, _) in REQUIRED {
        if render(&helm, chart, &[]).is_ok() {
            violations.push(format!(
                "{chart}: renders without its REQUIRED values; drop the entry"
            ));
        }
    }
    for t in THIRD_PARTY {
        if t.tag.is_empty() || t.tag == "latest" {
            violations.push(format!("THIRD_PARTY {}: not pinned", t.repository));
        }
        if let Some(s) = t.tested {
            match (s.version == t.tag, t.differs) {
                (true, Some(_)) => violations.push(format!(
                    "THIRD_PARTY {}: the test environment runs {} now; drop `differs`",
                    t.repository, s.version
                )),
                (false, None) => violations.push(format!(
                    "THIRD_PARTY {}: the charts pin {} but the test environment runs {}; say why \
                     in `differs` or align them",
                    t.repository, t.tag, s.version
                )),
                _ => {}
            }
        }
    }

    for r in renderings(&charts) {
        let docs = match render(&helm, &r.chart, &r.sets) {
            Ok(d) => d,
            Err(e) => {
                violations.push(format!("{}: helm template fails: {e}", r.name()));
                continue;
            }
        };
        for doc in &docs {
            let w = match workload(doc) {
                None => continue,
                Some(Err(e)) => {
                    violations.push(format!("{}: {e}", r.name()));
                    continue;
                }
                Some(Ok(w)) => w,
            };
            workloads += 1;
            let inits = w.pod.init_containers.iter().flatten().map(|c| (c, true));
            let mains = w.pod.containers.iter().map(|c| (c, false));
            for (c, init) in inits.chain(mains) {
                seen_containers.insert((r.chart.clone(), w.name.clone(), c.name.clone()));
                let image = c.image.clone().unwrap_or_default();
                let ours = image.starts_with(&format!("{REPOSITORY_PREFIX}/"));
                let mut problems: Vec<String> = check_image(&image, &built).into_iter().collect();
                problems.extend(check_security(&r.chart, &w, c, &mut used));
                problems.extend(check_resources(&r.chart, &w, c, ours));
                problems.extend(check_probes(&r.chart, &w, c, init));
                if let Some(e) = exception(&r.chart, &w.name, &c.name) {
                    problems.extend(check_exception_values(e, c.security_context.as_ref()));
                }
                for p in problems {
                    violations.push(format!(
                        "{}/{}/{}/{}: {p}",
                        r.name(),
                        w.kind,
                        w.name,
                        c.name
                    ));
                }
            }
        }
    }

    // No stale entry: every exception allowance and sizing names a container that needs it.
    for e in EXCEPTIONS {
        for a in e.allow {
            let key = (
                e.chart.to_string(),
                e.workload.to_string(),
                e.container.to_string(),
                format!("{a:?}"),
            );
            if !used.contains(&key) {
                violations.push(format!(
                    "EXCEPTIONS {}/{}/{}: {a:?} is no longer needed; drop it",
                    e.chart, e.workload, e.container
                ));
            }
        }
    }
    for s in SIZING {
        let key = (
            s.chart.to_string(),
            s.workload.to_string(),
            s.container.to_string(),
        );
        if !seen_containers.contains(&key) {
            violations.push(format!(
                "SIZING {}/{}/{}: no such container rendered",
                s.chart, s.workload, s.container
            ));
        }
    }
    for (chart, workload, container, _) in NO_PROBES {
        let key = (
            chart.to_string(),
            workload.to_string(),
            container.to_string(),
        );
        if !seen_containers.contains(&key) {
            violations.push(format!(
                "NO_PROBES {chart}/{workload}/{container}: no such container rendered"
            ));
        }
    }

    assert!(workloads > 0, "no workload rendered from {charts:?}");
    assert!(
        violations.is_empty(),
        "{} violation(s) in the charts' defaults:\n  {}",
        violations.len(),
        violations.join("\n  ")
    );
}

#[test]
fn every_chart_lints_strictly() {
    let helm = helm();
    let tmp = env!("CARGO_TARGET_TMPDIR");
    let mut failures = Vec::new();
    for chart in charts() {
        let out = Command::new(&helm)
            .args(["lint", "--strict"])
            .arg(repo_root().join("charts").join(&chart))
            .args(required(&chart).iter().flat_map(|s| ["--set", s]))
            .env("HELM_CONFIG_HOME", tmp)
            .env("HELM_CACHE_HOME", tmp)
            .env("HELM_DATA_HOME", tmp)
            .output()
            .expect("run helm lint");
        if !out.status.success() {
            failures.push(format!(
                "{chart}:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Creates `doc` with a server-side dry run, typed by its kind.
async fn dry_run(client: &kube::Client, doc: &serde_yaml::Value) -> Result<(), String> {
    async fn create<K>(client: &kube::Client, doc: &serde_yaml::Value) -> Result<(), String>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + DeserializeOwned
            + serde::Serialize,
        K::DynamicType: Default,
    {
        let object: K = typed(doc)?;
        let namespace = doc["metadata"]["namespace"].as_str().unwrap_or(NAMESPACE);
        let api: Api<K> = Api::namespaced(client.clone(), namespace);
        let params = PostParams {
            dry_run: true,
            ..Default::default()
        };
        api.create(&params, &object)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    match doc["kind"].as_str().unwrap_or_default() {
        "Deployment" => create::<Deployment>(client, doc).await,
        "DaemonSet" => create::<DaemonSet>(client, doc).await,
        "StatefulSet" => create::<StatefulSet>(client, doc).await,
        "Job" => create::<Job>(client, doc).await,
        "CronJob" => create::<CronJob>(client, doc).await,
        "Pod" => create::<Pod>(client, doc).await,
        _ => Ok(()),
    }
}

#[tokio::test]
async fn every_chart_workload_is_accepted_by_the_apiserver() {
    let helm = helm();
    let renderings = renderings(&charts());
    let rendered: Vec<(String, Result<Vec<serde_yaml::Value>, String>)> = renderings
        .iter()
        .map(|r| (r.name(), render(&helm, &r.chart, &r.sets)))
        .collect();
    let cluster = KubeCluster::start().await.expect("cluster");
    let client = cluster.kube_client(Identity::Admin).await.expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [NAMESPACE, "kube-system"] {
        let object: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
        // kube-system exists already.
        let _ = namespaces.create(&PostParams::default(), &object).await;
    }
    let mut rejected = Vec::new();
    let mut created = 0;
    for (name, docs) in rendered {
        let docs = docs.unwrap_or_else(|e| panic!("{name}: helm template fails: {e}"));
        for doc in &docs {
            if workload(doc).is_none() {
                continue;
            }
            created += 1;
            if let Err(e) = dry_run(&client, doc).await {
                rejected.push(format!(
                    "{name}/{}/{}: {e}",
                    doc["kind"].as_str().unwrap_or_default(),
                    doc["metadata"]["name"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    assert!(created > 0, "no workload rendered");
    assert!(
        rejected.is_empty(),
        "rejected:\n  {}",
        rejected.join("\n  ")
    );
}

/// The CSIDriver objects as Deckhouse's modules render them: no `fsGroupPolicy` (the API
/// default) for EBS and DVP, `ReadWriteOnceWithFSType` for Cinder, each a chart value; and the
/// Cinder topology switch reaching the driver and the provisioner.
#[test]
fn csi_drivers_and_the_cinder_topology_switch() {
    let helm = helm();
    let csidriver = |chart: &str, sets: &[&str]| -> serde_yaml::Value {
        let mut sets_all: Vec<&str> = required(chart).to_vec();
        sets_all.extend(sets);
        let docs = render(&helm, chart, &sets_all).unwrap_or_else(|e| panic!("{chart}: {e}"));
        docs.into_iter()
            .find(|d| d["kind"] == "CSIDriver")
            .unwrap_or_else(|| panic!("{chart}: no CSIDriver"))
    };
    for (chart, want) in [
        ("aws-ebs-csi-driver", None),
        ("dvp-csi-driver", None),
        ("cinder-csi-plugin", Some("ReadWriteOnceWithFSType")),
    ] {
        let d = csidriver(chart, &[]);
        assert_eq!(d["spec"]["attachRequired"], true, "{chart}");
        assert_eq!(d["spec"]["podInfoOnMount"], false, "{chart}");
        assert_eq!(d["spec"]["fsGroupPolicy"].as_str(), want, "{chart}");
        let set = csidriver(chart, &["csiDriver.fsGroupPolicy=File"]);
        assert_eq!(set["spec"]["fsGroupPolicy"], "File", "{chart}");
    }
    let args_of = |sets: &[&str], workload: &str, container: &str| -> Vec<String> {
        let mut sets_all: Vec<&str> = required("cinder-csi-plugin").to_vec();
        sets_all.extend(sets);
        let docs = render(&helm, "cinder-csi-plugin", &sets_all).unwrap();
        let w = docs
            .iter()
            .find(|d| d["metadata"]["name"] == workload)
            .unwrap_or_else(|| panic!("no {workload}"));
        let containers = w["spec"]["template"]["spec"]["containers"]
            .as_sequence()
            .unwrap();
        let c = containers
            .iter()
            .find(|c| c["name"] == container)
            .unwrap_or_else(|| panic!("no {container}"));
        serde_yaml::from_value(c["args"].clone()).unwrap()
    };
    let on = args_of(&[], "csi-cinder-controllerplugin", "csi-provisioner");
    assert!(
        on.contains(&"--feature-gates=Topology=true".to_string())
            && on.contains(&"--strict-topology".to_string()),
        "{on:?}"
    );
    let off = args_of(
        &["topology.enabled=false"],
        "csi-cinder-controllerplugin",
        "csi-provisioner",
    );
    assert!(
        off.contains(&"--feature-gates=Topology=false".to_string()),
        "{off:?}"
    );
    let driver = args_of(
        &["topology.enabled=false"],
        "csi-cinder-controllerplugin",
        "cinder-csi-plugin",
    );
    assert!(
        driver.contains(&"--with-topology=false".to_string()),
        "{driver:?}"
    );
    let node = args_of(
        &["topology.additional.topology\\.kubernetes\\.io/region=RegionOne"],
        "csi-cinder-nodeplugin",
        "cinder-csi-plugin",
    );
    assert!(
        node.contains(&"--with-topology=true".to_string()),
        "{node:?}"
    );
    assert!(
        node.contains(&"--additional-topology=topology.kubernetes.io/region=RegionOne".to_string()),
        "{node:?}"
    );
}
