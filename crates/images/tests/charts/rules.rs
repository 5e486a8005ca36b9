//! The rules each rendered container is judged by: image, security context, resources, probes,
//! and the values key of each security exception.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Probe, ResourceRequirements, SecurityContext};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use stratus_images::table::{Kind, BINARIES, REPOSITORY_PREFIX};
use stratus_runtime::build_info::BUILD;
use stratus_testenv::repo_root;

use crate::lists::{Allow, Exception, Sizing, EXCEPTIONS, NO_PROBES, SIZING, THIRD_PARTY};
use crate::Workload;

/// The images `make images` builds, as the charts must name them.
pub(crate) fn built_images() -> Vec<String> {
    BINARIES
        .iter()
        .filter(|b| b.kind == Kind::Image)
        .map(|b| format!("{}:{}", b.repository(), BUILD.version))
        .collect()
}

pub(crate) fn check_image(image: &str, built: &[String]) -> Option<String> {
    if image.starts_with(&format!("{REPOSITORY_PREFIX}/")) {
        if built.iter().any(|b| b == image) {
            return None;
        }
        let (repository, tag) = image.rsplit_once(':').unwrap_or((image, ""));
        let same_repo = built
            .iter()
            .find(|b| b.rsplit_once(':').map(|(r, _)| r) == Some(repository));
        return Some(match same_repo {
            Some(b) => format!(
                "image: {image} has tag {tag:?}, but `make images` tags it {b} (crates/images)"
            ),
            None => format!("image: {image} is no image `make images` builds ({built:?})"),
        });
    }
    let (repository, tag) = match image.rsplit_once(':') {
        Some((r, t)) if !r.is_empty() && !t.contains('/') => (r, t),
        _ => return Some(format!("image: {image} has no tag")),
    };
    if tag == "latest" {
        return Some(format!("image: {image} is not pinned (latest)"));
    }
    match THIRD_PARTY.iter().find(|t| t.repository == repository) {
        Some(t) if t.tag == tag => None,
        Some(t) => Some(format!(
            "image: {image}, but the charts pin {repository}:{} (THIRD_PARTY)",
            t.tag
        )),
        None => Some(format!(
            "image: {image} is neither built by `make images` nor listed in THIRD_PARTY"
        )),
    }
}

pub(crate) fn exception(
    chart: &str,
    workload: &str,
    container: &str,
) -> Option<&'static Exception> {
    EXCEPTIONS
        .iter()
        .find(|e| judged_as(chart, e.chart) && e.workload == workload && e.container == container)
}

/// Whether a list entry of `entry_chart` speaks for a container rendered by `chart`: its own, or
/// a module chart's (`charts/cloud-provider-*`) whose `charts/` links that component chart — a
/// component's containers are judged alike alone and inside its module.
pub(crate) fn judged_as(chart: &str, entry_chart: &str) -> bool {
    entry_chart == chart || subcharts(chart).iter().any(|s| s == entry_chart)
}

/// The component charts a module chart links under its `charts/` (their directories' names).
pub(crate) fn subcharts(chart: &str) -> Vec<String> {
    let dir = repo_root().join("charts").join(chart).join("charts");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|target| Some(target.file_name()?.to_string_lossy().into_owned()))
        .collect()
}

/// The security rules; `used` collects which exception allowances were needed.
pub(crate) fn check_security(
    chart: &str,
    w: &Workload,
    c: &Container,
    used: &mut BTreeSet<(String, String, String, String)>,
) -> Vec<String> {
    let mut out = Vec::new();
    let sc = c.security_context.clone().unwrap_or_default();
    let pod_sc = w.pod.security_context.clone().unwrap_or_default();
    let exc = exception(chart, &w.name, &c.name);
    let allows = |a: Allow| exc.is_some_and(|e| e.allow.contains(&a));
    let mut need = |a: Allow| {
        used.insert((
            chart.to_string(),
            w.name.clone(),
            c.name.clone(),
            format!("{a:?}"),
        ));
    };

    let non_root = sc.run_as_non_root.or(pod_sc.run_as_non_root) == Some(true);
    let uid = sc.run_as_user.or(pod_sc.run_as_user);
    if !non_root || uid == Some(0) {
        need(Allow::Root);
        if !allows(Allow::Root) {
            out.push(format!(
                "securityContext: may run as root (runAsNonRoot {:?}, runAsUser {uid:?})",
                sc.run_as_non_root.or(pod_sc.run_as_non_root)
            ));
        }
    }
    let privileged = sc.privileged == Some(true);
    if privileged {
        need(Allow::Privileged);
        if !allows(Allow::Privileged) {
            out.push("securityContext: privileged".into());
        }
        let bidirectional = c
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_propagation.as_deref() == Some("Bidirectional"));
        if !bidirectional {
            out.push(
                "securityContext: privileged without a Bidirectional mount, the one thing that \
                 needs it"
                    .into(),
            );
        }
    }
    if sc.read_only_root_filesystem != Some(true) {
        out.push("securityContext: readOnlyRootFilesystem is not true".into());
    }
    // A privileged container holds every capability whatever it drops, and the API rejects
    // allowPrivilegeEscalation: false beside privileged: true.
    if !privileged {
        let caps = sc.capabilities.clone().unwrap_or_default();
        if !caps.drop.iter().flatten().any(|d| d == "ALL") {
            out.push("securityContext: capabilities.drop does not hold ALL".into());
        }
        if let Some(add) = caps.add.filter(|a| !a.is_empty()) {
            out.push(format!("securityContext: capabilities.add {add:?}"));
        }
        if sc.allow_privilege_escalation != Some(false) {
            out.push("securityContext: allowPrivilegeEscalation is not false".into());
        }
    }
    out
}

/// A quantity in bytes (`64Mi`, `1G`, `128974848`, `500m`).
pub(crate) fn bytes(q: &str) -> Option<f64> {
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("m", 1e-3),
    ];
    for (suffix, factor) in SUFFIXES {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<f64>().ok().map(|n| n * factor);
        }
    }
    q.parse::<f64>().ok()
}

pub(crate) const MIB: f64 = 1024.0 * 1024.0;

/// The largest peak RSS (MiB) of a sizing entry, or why it cannot be read.
pub(crate) fn bench_peak(s: &Sizing) -> Result<f64, String> {
    let mut peak: f64 = 0.0;
    for (file, pointer) in s.peaks {
        let path = repo_root().join("bench/results").join(file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{file}: {e}"))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{file}: {e}"))?;
        let value = json
            .pointer(pointer)
            .and_then(|v| v.as_f64())
            .ok_or_else(|| format!("{file} has no number at {pointer}"))?;
        peak = peak.max(value);
    }
    Ok(peak)
}

pub(crate) fn check_resources(chart: &str, w: &Workload, c: &Container, ours: bool) -> Vec<String> {
    let mut out = Vec::new();
    let r: ResourceRequirements = c.resources.clone().unwrap_or_default();
    let get = |m: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
               key: &str| {
        m.as_ref().and_then(|m| m.get(key)).map(|q| q.0.clone())
    };
    let cpu = get(&r.requests, "cpu");
    let memory = get(&r.requests, "memory").and_then(|q| bytes(&q));
    let limit = get(&r.limits, "memory").and_then(|q| bytes(&q));
    if cpu.is_none() {
        out.push("resources: no CPU request".into());
    }
    if memory.is_none() {
        out.push("resources: no memory request".into());
    }
    if limit.is_none() {
        out.push("resources: no memory limit".into());
    }
    if let (Some(m), Some(l)) = (memory, limit) {
        if l < m {
            out.push("resources: the memory limit is below the request".into());
        }
    }
    let sizing = SIZING
        .iter()
        .find(|s| judged_as(chart, s.chart) && s.workload == w.name && s.container == c.name);
    match sizing {
        None if ours => out
            .push("resources: no benchmark behind its memory (add the container to SIZING)".into()),
        None => {}
        Some(s) => match bench_peak(s) {
            Err(e) => out.push(format!("resources: {e}")),
            Ok(peak) => {
                if memory.is_some_and(|m| m < peak * MIB) {
                    out.push(format!(
                        "resources: the memory request {:.1} MiB is below the benchmarks' peak RSS {peak} MiB",
                        memory.unwrap() / MIB
                    ));
                }
                if limit.is_some_and(|l| l < 2.0 * peak * MIB) {
                    out.push(format!(
                        "resources: the memory limit {:.1} MiB is below twice the benchmarks' peak RSS {peak} MiB",
                        limit.unwrap() / MIB
                    ));
                }
            }
        },
    }
    out
}

/// A named probe port must be one the container declares (kubelet resolves names only there).
pub(crate) fn probe_port_problem(c: &Container, which: &str, p: &Probe) -> Option<String> {
    let port = p
        .http_get
        .as_ref()
        .map(|h| &h.port)
        .or(p.tcp_socket.as_ref().map(|t| &t.port))?;
    let IntOrString::String(name) = port else {
        return None;
    };
    let declared = c
        .ports
        .iter()
        .flatten()
        .any(|p| p.name.as_deref() == Some(name.as_str()));
    (!declared).then(|| format!("{which}: port {name:?} is not declared by the container"))
}

pub(crate) fn check_probes(chart: &str, w: &Workload, c: &Container, init: bool) -> Vec<String> {
    let mut out = Vec::new();
    let sidecar = init && c.restart_policy.as_deref() == Some("Always");
    let long_running = w.long_running && (!init || sidecar);
    let excused = NO_PROBES
        .iter()
        .any(|(ch, wl, co, _)| judged_as(chart, ch) && *wl == w.name && *co == c.name);
    if long_running && !excused {
        if c.liveness_probe.is_none() {
            out.push("probes: no livenessProbe".into());
        }
        if c.readiness_probe.is_none() {
            out.push("probes: no readinessProbe".into());
        }
    }
    for (which, p) in [
        ("livenessProbe", &c.liveness_probe),
        ("readinessProbe", &c.readiness_probe),
        ("startupProbe", &c.startup_probe),
    ] {
        if let Some(problem) = p.as_ref().and_then(|p| probe_port_problem(c, which, p)) {
            out.push(problem);
        }
    }
    out
}

/// The line of the key `path` (dotted) in a block-style YAML text.
pub(crate) fn key_line(text: &str, path: &[&str]) -> Option<usize> {
    let mut stack: Vec<(usize, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('-') {
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else {
            continue;
        };
        let indent = line.len() - trimmed.len();
        while stack.last().is_some_and(|(d, _)| *d >= indent) {
            stack.pop();
        }
        stack.push((indent, key.trim().to_string()));
        if stack.len() == path.len() && stack.iter().zip(path).all(|((_, k), p)| k == p) {
            return Some(i);
        }
    }
    None
}

/// An exception's values key: present, holding the container's rendered security context, with
/// a comment right above it.
pub(crate) fn check_exception_values(
    e: &Exception,
    rendered: Option<&SecurityContext>,
) -> Vec<String> {
    let file = repo_root().join("charts").join(e.chart).join("values.yaml");
    let text = std::fs::read_to_string(&file).expect("values.yaml");
    let path: Vec<&str> = e.values_key.split('.').collect();
    let mut out = Vec::new();
    let here = format!("{}/values.yaml {}", e.chart, e.values_key);
    match key_line(&text, &path) {
        None => out.push(format!("{here}: no such key")),
        Some(line) => {
            let above = line
                .checked_sub(1)
                .and_then(|l| text.lines().nth(l))
                .unwrap_or_default();
            if !above.trim_start().starts_with('#') {
                out.push(format!(
                    "{here}: no comment above the key saying why {} needs {:?}",
                    e.container, e.allow
                ));
            }
        }
    }
    let values: serde_yaml::Value = serde_yaml::from_str(&text).expect("values.yaml parses");
    let node = path.iter().fold(&values, |v, k| &v[*k]);
    match serde_yaml::from_value::<SecurityContext>(node.clone()) {
        Ok(sc) if Some(&sc) == rendered => {}
        Ok(_) => out.push(format!(
            "{here}: is not the security context {}/{} renders",
            e.workload, e.container
        )),
        Err(err) => out.push(format!("{here}: not a security context: {err}")),
    }
    out
}
