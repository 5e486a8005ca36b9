//! The three CSI charts, alone and inside their module charts, run Stratus' own sidecars.
//!
//! - The node DaemonSet's `node-driver-registrar` is `make images`' registrar image; its
//!   arguments, with the container's variables filled in, are accepted by the registrar's own
//!   flag parser and point at the driver's socket in the plugin directory the kubelet sees, the
//!   registration directory is the kubelet's, a volume takes its probe file (the root file system
//!   is read-only), and its probes ask `/healthz` on its endpoint.
//! - A `liveness-probe` container (our livenessprobe image, its flags accepted by its parser)
//!   reaches the driver's socket and listens on the port the driver container's liveness probe
//!   names `healthz`, in every pod where upstream's chart has one.
//! - Both images follow their values (repository, tag), and every image a CSI chart names is
//!   built by `make images` or is one of the upstream controller sidecars we build in the test
//!   environment (provisioner, attacher, resizer, snapshotter).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser as _;
use serde::Deserialize;
use serde_yaml::Value;
use stratus_csi_sidecars::{livenessprobe, registrar};
use stratus_images::table::{self, Kind, BINARIES};
use stratus_runtime::build_info::BUILD;
use stratus_testenv::repo_root;

/// A CSI chart: its directory, driver, workloads and where upstream's chart has a livenessprobe.
struct CsiChart {
    chart: &'static str,
    /// The values every rendering needs.
    required: &'static [&'static str],
    driver: &'static str,
    driver_container: &'static str,
    controller: &'static str,
    node: &'static str,
    /// Whether the node pod has a liveness-probe (the controller pod always has).
    node_livenessprobe: bool,
}

const DVP_REQUIRED: &[&str] = &[
    "dvp.parentKubeconfigSecret.name=dvp-parent",
    "dvp.namespace=tenant",
];

const CHARTS: &[CsiChart] = &[
    CsiChart {
        chart: "aws-ebs-csi-driver",
        required: &[],
        driver: "ebs.csi.aws.com",
        driver_container: "ebs-plugin",
        controller: "ebs-csi-controller",
        node: "ebs-csi-node",
        node_livenessprobe: true,
    },
    CsiChart {
        chart: "cinder-csi-plugin",
        required: &[],
        driver: "cinder.csi.openstack.org",
        driver_container: "cinder-csi-plugin",
        controller: "csi-cinder-controllerplugin",
        node: "csi-cinder-nodeplugin",
        node_livenessprobe: true,
    },
    // Deckhouse's module template has a livenessprobe in the controller pod only.
    CsiChart {
        chart: "dvp-csi-driver",
        required: DVP_REQUIRED,
        driver: "csi.dvp.deckhouse.io",
        driver_container: "dvp-csi-driver",
        controller: "csi-dvp-controllerplugin",
        node: "csi-dvp-nodeplugin",
        node_livenessprobe: false,
    },
];

/// The module charts holding each CSI chart, and the values they need.
const MODULES: &[(&str, &str, &[&str])] = &[
    ("cloud-provider-aws", "aws-ebs-csi-driver", &[]),
    ("cloud-provider-openstack", "cinder-csi-plugin", &[]),
    (
        "cloud-provider-dvp",
        "dvp-csi-driver",
        &[
            "dvp-csi-driver.dvp.parentKubeconfigSecret.name=dvp-parent",
            "dvp-csi-driver.dvp.namespace=tenant",
            "capdvp-controller-manager.dvp.parentKubeconfigSecret.name=dvp-parent",
            "capdvp-controller-manager.dvp.namespace=tenant",
        ],
    ),
];

/// The upstream controller sidecars the CSI charts may name (the test environment builds them,
/// `crates/testenv/src/tools/csi_sidecars.rs`); the node sidecars are ours.
const UPSTREAM_SIDECARS: &[&str] = &[
    "registry.k8s.io/sig-storage/csi-provisioner",
    "registry.k8s.io/sig-storage/csi-attacher",
    "registry.k8s.io/sig-storage/csi-resizer",
    "registry.k8s.io/sig-storage/csi-snapshotter",
];

fn helm() -> PathBuf {
    stratus_testenv::ensure_installed()
        .expect("testenv install (builds helm)")
        .helm
}

/// `helm template` of `charts/<chart>` with `sets`: the documents.
fn render(helm: &Path, chart: &str, sets: &[&str]) -> Vec<Value> {
    let tmp = env!("CARGO_TARGET_TMPDIR");
    let out = Command::new(helm)
        .args(["template", "stratus", "--namespace", "kube-system"])
        .arg(repo_root().join("charts").join(chart))
        .args(sets.iter().flat_map(|s| ["--set", s]))
        .env("HELM_CONFIG_HOME", tmp)
        .env("HELM_CACHE_HOME", tmp)
        .env("HELM_DATA_HOME", tmp)
        .output()
        .expect("run helm");
    assert!(
        out.status.success(),
        "{chart} {sets:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("rendered YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

/// The pod spec of workload `name` of `kind`.
fn pod<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let w = docs
        .iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"));
    &w["spec"]["template"]["spec"]
}

/// Container `name` of a pod spec, if there is one.
fn container<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    pod["containers"]
        .as_sequence()?
        .iter()
        .find(|c| c["name"] == name)
}

fn strs(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The container's arguments with `$(NAME)` filled from its literal variables, as the kubelet
/// does, behind the program name.
fn argv(c: &Value, program: &str) -> Vec<String> {
    let env: Vec<(String, String)> = c["env"]
        .as_sequence()
        .map(|e| {
            e.iter()
                .filter_map(|v| {
                    Some((
                        v["name"].as_str()?.to_owned(),
                        v["value"].as_str()?.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    std::iter::once(program.to_owned())
        .chain(strs(&c["args"]).into_iter().map(|a| {
            env.iter()
                .fold(a, |a, (k, v)| a.replace(&format!("$({k})"), v))
        }))
        .collect()
}

/// The image `make images` tags for `binary`.
fn our_image(binary: &str) -> String {
    let b = table::find(binary).unwrap_or_else(|| panic!("{binary} is not in the images table"));
    assert_eq!(b.kind, Kind::Image, "{binary}");
    format!("{}:{}", b.repository(), BUILD.version)
}

/// The container port named `name`.
fn named_port(c: &Value, name: &str) -> Option<u64> {
    c["ports"]
        .as_sequence()?
        .iter()
        .find(|p| p["name"] == name)?["containerPort"]
        .as_u64()
}

/// Where volume `volume` is mounted in `c`, without a trailing slash.
fn mount_of(c: &Value, volume: &str) -> Option<PathBuf> {
    let m = c["volumeMounts"]
        .as_sequence()?
        .iter()
        .find(|m| m["name"] == volume)?;
    Some(PathBuf::from(
        m["mountPath"].as_str()?.trim_end_matches('/'),
    ))
}

/// The host path of volume `volume` of the pod, without a trailing slash.
fn host_path(pod: &Value, volume: &str) -> Option<PathBuf> {
    let v = pod["volumes"]
        .as_sequence()?
        .iter()
        .find(|v| v["name"] == volume)?;
    Some(PathBuf::from(
        v["hostPath"]["path"].as_str()?.trim_end_matches('/'),
    ))
}

/// Which mounted volume of `c` holds `path`.
fn volume_holding(c: &Value, path: &Path) -> Option<String> {
    c["volumeMounts"].as_sequence()?.iter().find_map(|m| {
        let at = Path::new(m["mountPath"].as_str()?);
        path.starts_with(at)
            .then(|| m["name"].as_str().map(str::to_owned))?
    })
}

/// Problems with a pod's registrar, as `what: problem`.
fn check_registrar(what: &str, pod: &Value, driver: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Some(c) = container(pod, "node-driver-registrar") else {
        return vec![format!("{what}: no node-driver-registrar container")];
    };
    if c["image"].as_str() != Some(our_image("csi-node-driver-registrar").as_str()) {
        out.push(format!("{what}: registrar image {:?}", c["image"]));
    }
    let argv = argv(c, "csi-node-driver-registrar");
    for flag in [
        "--csi-address=",
        "--kubelet-registration-path=",
        "--http-endpoint=",
    ] {
        if !argv.iter().any(|a| a.starts_with(flag)) {
            out.push(format!("{what}: registrar has no {flag}… ({argv:?})"));
        }
    }
    let config = match registrar::flags::Args::try_parse_from(&argv)
        .map_err(|e| e.to_string())
        .and_then(|a| a.config())
    {
        Ok(config) => config,
        Err(e) => {
            out.push(format!("{what}: the registrar refuses {argv:?}: {e}"));
            return out;
        }
    };
    // The kubelet connects to the socket the driver serves: the plugin directory on the node.
    let plugin_dir = PathBuf::from(format!("/var/lib/kubelet/plugins/{driver}"));
    if config.kubelet_registration_path != plugin_dir.join("csi.sock") {
        out.push(format!(
            "{what}: --kubelet-registration-path {:?}",
            config.kubelet_registration_path
        ));
    }
    match volume_holding(c, &config.csi_socket) {
        Some(v) if host_path(pod, &v).as_deref() == Some(plugin_dir.as_path()) => {}
        other => out.push(format!(
            "{what}: the registrar's --csi-address {:?} is not in the plugin directory (volume {other:?})",
            config.csi_socket
        )),
    }
    // The root file system is read-only: the probe file beside the registration path needs a
    // volume there.
    let probe_dir = config
        .kubelet_registration_path
        .parent()
        .unwrap_or(Path::new("/"));
    if volume_holding(c, &probe_dir.join("registration")).is_none() {
        out.push(format!(
            "{what}: the registrar cannot write its probe file in {probe_dir:?} (no volume there)"
        ));
    }
    let registry = Path::new("/var/lib/kubelet/plugins_registry");
    let mounted = mount_of(c, "registration-dir");
    if mounted.as_deref() != Some(config.plugin_registration_dir.as_path())
        || host_path(pod, "registration-dir").as_deref() != Some(registry)
    {
        out.push(format!(
            "{what}: the registration directory {:?} is not the kubelet's {registry:?}",
            config.plugin_registration_dir
        ));
    }
    let port = config.http.map(|(addr, _)| addr.port());
    for probe in ["livenessProbe", "readinessProbe"] {
        let get = &c[probe]["httpGet"];
        let probed = get["port"]
            .as_str()
            .and_then(|name| named_port(c, name))
            .or(get["port"].as_u64());
        if get["path"] != "/healthz" || probed != port.map(u64::from) {
            out.push(format!(
                "{what}: registrar {probe} {get:?} is not /healthz on --http-endpoint's {port:?}"
            ));
        }
    }
    let sc = &c["securityContext"];
    if sc["runAsUser"] != 0
        || sc["readOnlyRootFilesystem"] != true
        || !strs(&sc["capabilities"]["drop"]).contains(&"ALL".to_owned())
    {
        out.push(format!(
            "{what}: the registrar runs as root with a read-only root and no capability, not {sc:?}"
        ));
    }
    out
}

/// Problems with a pod's liveness-probe and the driver container's liveness probe.
fn check_livenessprobe(what: &str, pod: &Value, driver_container: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Some(c) = container(pod, "liveness-probe") else {
        return vec![format!("{what}: no liveness-probe container")];
    };
    if c["image"].as_str() != Some(our_image("csi-livenessprobe").as_str()) {
        out.push(format!("{what}: liveness-probe image {:?}", c["image"]));
    }
    let argv = argv(c, "csi-livenessprobe");
    let config = match livenessprobe::flags::Args::try_parse_from(&argv)
        .map_err(|e| e.to_string())
        .and_then(|a| a.config())
    {
        Ok(config) => config,
        Err(e) => return vec![format!("{what}: the livenessprobe refuses {argv:?}: {e}")],
    };
    let driver = container(pod, driver_container).expect("the driver container");
    // The driver serves its socket in the volume the liveness-probe reaches it through.
    let driver_socket = driver["env"]
        .as_sequence()
        .and_then(|e| e.iter().find(|v| v["name"] == "CSI_ENDPOINT"))
        .and_then(|v| v["value"].as_str())
        .map(|v| {
            PathBuf::from(
                v.trim_start_matches("unix://")
                    .trim_start_matches("unix:")
                    .to_owned(),
            )
        });
    let same_volume = driver_socket
        .as_deref()
        .and_then(|s| volume_holding(driver, s))
        == volume_holding(c, &config.csi_socket);
    if driver_socket.is_none()
        || !same_volume
        || driver_socket.as_deref().map(Path::file_name) != Some(config.csi_socket.file_name())
    {
        out.push(format!(
            "{what}: the liveness-probe's --csi-address {:?} is not the driver's socket {driver_socket:?}",
            config.csi_socket
        ));
    }
    let (addr, _): (SocketAddr, _) = config.http;
    let get = &driver["livenessProbe"]["httpGet"];
    if get["path"] != "/healthz"
        || get["port"] != "healthz"
        || named_port(driver, "healthz") != Some(u64::from(addr.port()))
    {
        out.push(format!(
            "{what}: the driver's livenessProbe {get:?} is not /healthz on port healthz = the liveness-probe's {}",
            addr.port()
        ));
    }
    out
}

#[test]
fn node_daemonsets_run_our_registrar_and_controllers_and_nodes_our_livenessprobe() {
    let helm = helm();
    let mut problems = Vec::new();
    let mut checked = 0;
    let renderings = CHARTS
        .iter()
        .map(|c| (c, c.chart, c.required))
        .chain(MODULES.iter().map(|(module, chart, sets)| {
            let c = CHARTS.iter().find(|c| c.chart == *chart).unwrap();
            (c, *module, *sets)
        }));
    for (c, rendered, sets) in renderings {
        let docs = render(&helm, rendered, sets);
        let node = pod(&docs, "DaemonSet", c.node);
        let controller = pod(&docs, "Deployment", c.controller);
        problems.extend(check_registrar(
            &format!("{rendered}/{}", c.node),
            node,
            c.driver,
        ));
        problems.extend(check_livenessprobe(
            &format!("{rendered}/{}", c.controller),
            controller,
            c.driver_container,
        ));
        let node_what = format!("{rendered}/{}", c.node);
        if c.node_livenessprobe {
            problems.extend(check_livenessprobe(&node_what, node, c.driver_container));
        } else if container(node, "liveness-probe").is_some() {
            problems.push(format!(
                "{node_what}: a liveness-probe upstream does not have"
            ));
        }
        checked += 1;
    }
    assert_eq!(checked, CHARTS.len() + MODULES.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checks_catch_upstream_images_and_wrong_wiring() {
    // The checks must be able to fail: the registrar's upstream image, a wrong registration
    // path, no volume for the probe file, a liveness-probe without a socket, a driver probing
    // its own port.
    let helm = helm();
    let docs = render(
        &helm,
        "aws-ebs-csi-driver",
        &[
            "sidecars.nodeDriverRegistrar.image.repository=registry.k8s.io/sig-storage/csi-node-driver-registrar",
            "sidecars.nodeDriverRegistrar.image.tag=v2.13.0",
            "sidecars.livenessProbe.httpPort=9900",
        ],
    );
    let node = pod(&docs, "DaemonSet", "ebs-csi-node");
    let registrar = check_registrar("node", node, "ebs.csi.aws.com");
    assert!(
        registrar.iter().any(|p| p.contains("registrar image")),
        "{registrar:?}"
    );
    assert!(
        !check_registrar("node", node, "other.csi.example").is_empty(),
        "a registration path of another driver passes"
    );
    let mut no_probe_dir = node.clone();
    for c in no_probe_dir["containers"].as_sequence_mut().unwrap() {
        if c["name"] == "node-driver-registrar" {
            c["image"] = Value::from(our_image("csi-node-driver-registrar"));
            let mounts = c["volumeMounts"].as_sequence_mut().unwrap();
            mounts.retain(|m| m["name"] != "probe-dir");
        }
    }
    let registrar = check_registrar("node", &no_probe_dir, "ebs.csi.aws.com");
    assert!(
        registrar.len() == 1 && registrar[0].contains("probe file"),
        "{registrar:?}"
    );
    // The liveness-probe moved to 9900 with the driver's `healthz` port: still consistent.
    assert!(check_livenessprobe("node", node, "ebs-plugin").is_empty());
    let mut broken = node.clone();
    for c in broken["containers"].as_sequence_mut().unwrap() {
        if c["name"] == "ebs-plugin" {
            c["livenessProbe"]["httpGet"]["port"] = Value::from("http");
        }
        if c["name"] == "liveness-probe" {
            c["args"] = serde_yaml::from_str("[--csi-address=/elsewhere/csi.sock]").unwrap();
        }
    }
    let problems = check_livenessprobe("node", &broken, "ebs-plugin");
    assert_eq!(problems.len(), 2, "{problems:?}");
}

#[test]
fn sidecar_images_follow_their_values() {
    let helm = helm();
    for c in CHARTS {
        let mut sets = c.required.to_vec();
        sets.extend([
            "sidecars.nodeDriverRegistrar.image.repository=mirror.example/registrar",
            "sidecars.nodeDriverRegistrar.image.tag=pinned-1",
            "sidecars.nodeDriverRegistrar.image.pullPolicy=Always",
            "sidecars.livenessProbe.image.repository=mirror.example/livenessprobe",
            "sidecars.livenessProbe.image.tag=pinned-2",
        ]);
        let docs = render(&helm, c.chart, &sets);
        let node = pod(&docs, "DaemonSet", c.node);
        let r = container(node, "node-driver-registrar").unwrap();
        assert_eq!(
            r["image"], "mirror.example/registrar:pinned-1",
            "{}",
            c.chart
        );
        assert_eq!(r["imagePullPolicy"], "Always", "{}", c.chart);
        let controller = pod(&docs, "Deployment", c.controller);
        let l = container(controller, "liveness-probe").unwrap();
        assert_eq!(
            l["image"], "mirror.example/livenessprobe:pinned-2",
            "{}",
            c.chart
        );
    }
}

#[test]
fn csi_charts_name_only_our_images_or_upstream_controller_sidecars() {
    let helm = helm();
    let built: Vec<String> = BINARIES
        .iter()
        .filter(|b| b.kind == Kind::Image)
        .map(|b| format!("{}:{}", b.repository(), BUILD.version))
        .collect();
    let mut renderings: Vec<(String, Vec<&str>)> = CHARTS
        .iter()
        .map(|c| (c.chart.to_owned(), c.required.to_vec()))
        .collect();
    renderings.push((
        "aws-ebs-csi-driver".into(),
        vec!["sidecars.snapshotter.enabled=true"],
    ));
    let mut problems = Vec::new();
    let mut images = 0;
    for (chart, sets) in &renderings {
        for doc in render(&helm, chart, sets) {
            let spec = &doc["spec"]["template"]["spec"];
            let containers = ["initContainers", "containers"]
                .iter()
                .flat_map(|k| spec[*k].as_sequence().cloned().unwrap_or_default());
            for c in containers {
                let image = c["image"].as_str().unwrap_or_default().to_owned();
                images += 1;
                let repository = image.rsplit_once(':').map_or(image.as_str(), |(r, _)| r);
                if !built.contains(&image) && !UPSTREAM_SIDECARS.contains(&repository) {
                    problems.push(format!(
                        "{chart}/{}/{}: {image} is neither built by `make images` nor an upstream controller sidecar",
                        doc["metadata"]["name"].as_str().unwrap_or_default(),
                        c["name"].as_str().unwrap_or_default()
                    ));
                }
            }
        }
    }
    assert!(images > 0, "no container rendered");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Upstream's `node.additionalArgs`/`node.env` and `controller.additionalArgs`/`controller.env`
/// reach the driver's container, after the chart's own flags and variables (which stay).
#[test]
fn additional_args_and_env_reach_the_driver_containers() {
    let helm = helm();
    for c in CHARTS {
        let mut sets = c.required.to_vec();
        sets.extend([
            "node.additionalArgs[0]=--loop-devices-dir=/var/lib/kubelet/loops",
            "node.env[0].name=CSI_NODE_ID",
            "node.env[0].value=node-a",
            "controller.additionalArgs[0]=--v=5",
            "controller.env[0].name=EXTRA",
            "controller.env[0].value=on",
        ]);
        let docs = render(&helm, c.chart, &sets);
        let defaults = render(&helm, c.chart, c.required);
        for (kind, name, arg, var) in [
            (
                "DaemonSet",
                c.node,
                "--loop-devices-dir=/var/lib/kubelet/loops",
                ("CSI_NODE_ID", "node-a"),
            ),
            ("Deployment", c.controller, "--v=5", ("EXTRA", "on")),
        ] {
            let what = format!("{}/{kind}/{name}", c.chart);
            let driver = container(pod(&docs, kind, name), c.driver_container).unwrap();
            let plain = container(pod(&defaults, kind, name), c.driver_container).unwrap();
            let args = strs(&driver["args"]);
            let mut expected = strs(&plain["args"]);
            expected.push(arg.to_owned());
            assert_eq!(args, expected, "{what}");
            let env = driver["env"].as_sequence().unwrap();
            let plain_env = plain["env"].as_sequence().unwrap();
            assert_eq!(env[..plain_env.len()], plain_env[..], "{what}");
            assert_eq!(env.len(), plain_env.len() + 1, "{what}");
            let added = env.last().unwrap();
            assert_eq!(
                (added["name"].as_str(), added["value"].as_str()),
                (Some(var.0), Some(var.1)),
                "{what}"
            );
        }
    }
}
