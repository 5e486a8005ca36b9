//! The DVP provider's configuration as Deckhouse passes it: the parent cluster's kubeconfig
//! (base64) and the tenant namespace, from the environment (`DVP_KUBERNETES_CONFIG_BASE64`,
//! `DVP_NAMESPACE`) or from the `--cloud-config` file (JSON or YAML keys
//! `kubernetes_config_base64`, `namespace`); the environment wins. Checked at start, every
//! problem reported at once; no message quotes a value of the file, the environment or the
//! kubeconfig (they hold the parent cluster's credentials), and the kubeconfig never appears in
//! logs.

use std::path::Path;

use base64::Engine as _;
use kube::config::Kubeconfig;
use serde::Deserialize;

/// Environment variable carrying the parent kubeconfig, base64-encoded.
pub const ENV_KUBECONFIG: &str = "DVP_KUBERNETES_CONFIG_BASE64";
/// Environment variable naming the tenant namespace in the parent.
pub const ENV_NAMESPACE: &str = "DVP_NAMESPACE";

/// A checked configuration.
#[derive(Clone)]
pub struct DvpConfig {
    /// The parsed parent kubeconfig (holds credentials: never logged).
    pub kubeconfig: Kubeconfig,
    /// The parent API server URL (for logs).
    pub server: String,
    /// The tenant namespace in the parent.
    pub namespace: String,
}

impl std::fmt::Debug for DvpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DvpConfig")
            .field("kubeconfig", &"<redacted>")
            .field("server", &self.server)
            .field("namespace", &self.namespace)
            .finish()
    }
}

/// The `--cloud-config` file's keys (Deckhouse's `CloudConfig`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    kubernetes_config_base64: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

/// Why the configuration is unusable: every problem, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid DVP configuration:\n{}", .0.join("\n"))]
pub struct ConfigError(pub Vec<String>);

impl DvpConfig {
    /// Reads the configuration from `env` (a variable lookup) and the optional file text.
    pub fn load(
        env: impl Fn(&str) -> Option<String>,
        file: Option<(&Path, &str)>,
    ) -> Result<DvpConfig, ConfigError> {
        let mut problems = Vec::new();
        let from_file = match file {
            Some((path, text)) => match serde_yaml::from_str::<Option<FileConfig>>(text) {
                Ok(parsed) => parsed.unwrap_or_default(),
                Err(e) => {
                    problems.push(format!(
                        "--cloud-config {}: {} (the file is a YAML or JSON mapping with the keys kubernetes_config_base64 and namespace)",
                        path.display(),
                        stratus_runtime::redact::yaml(&e)
                    ));
                    FileConfig::default()
                }
            },
            None => FileConfig::default(),
        };
        let pick = |var: &str, key: Option<String>| {
            env(var)
                .filter(|v| !v.trim().is_empty())
                .or(key.filter(|v| !v.trim().is_empty()))
        };
        let encoded = pick(ENV_KUBECONFIG, from_file.kubernetes_config_base64);
        let namespace = pick(ENV_NAMESPACE, from_file.namespace);

        let kubeconfig = match encoded {
            None => {
                problems.push(format!(
                    "{ENV_KUBECONFIG} (or kubernetes_config_base64 in --cloud-config) is required: the parent cluster's kubeconfig, base64-encoded"
                ));
                None
            }
            Some(encoded) => parse_kubeconfig(encoded.trim())
                .map_err(|p| problems.push(p))
                .ok(),
        };
        let namespace = match namespace {
            None => {
                problems.push(format!(
                    "{ENV_NAMESPACE} (or namespace in --cloud-config) is required: the tenant's namespace in the parent cluster"
                ));
                None
            }
            Some(ns) if !is_dns_label(ns.trim()) => {
                problems.push(format!(
                    "{ENV_NAMESPACE} (or namespace in --cloud-config) is not a namespace name (lowercase letters, digits and '-', at most 63)"
                ));
                None
            }
            Some(ns) => Some(ns.trim().to_string()),
        };
        match (kubeconfig, namespace) {
            (Some((kubeconfig, server)), Some(namespace)) if problems.is_empty() => Ok(DvpConfig {
                kubeconfig,
                server,
                namespace,
            }),
            _ => Err(ConfigError(problems)),
        }
    }
}

impl DvpConfig {
    /// A client of the parent cluster. Errors name the setting and never quote the kubeconfig.
    pub async fn client(&self) -> Result<kube::Client, String> {
        let config = kube::Config::from_custom_kubeconfig(
            self.kubeconfig.clone(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| {
            format!(
                "{ENV_KUBECONFIG}: the parent kubeconfig is not usable: {}",
                stratus_runtime::redact::scrub(&e.to_string())
            )
        })?;
        // HTTPS_PROXY / NO_PROXY as client-go honours them: the parent is usually outside.
        let config = stratus_kube_kit::client::env_proxied(config)
            .map_err(|e| format!("{ENV_KUBECONFIG}: {e}"))?;
        kube::Client::try_from(config).map_err(|e| {
            format!(
                "{ENV_KUBECONFIG}: no client for the parent cluster: {}",
                stratus_runtime::redact::scrub(&e.to_string())
            )
        })
    }
}

/// Decodes and parses the kubeconfig; returns it with the server URL of its current context.
fn parse_kubeconfig(encoded: &str) -> Result<(Kubeconfig, String), String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| format!("{ENV_KUBECONFIG} is not valid base64: {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("{ENV_KUBECONFIG} does not decode to UTF-8 text"))?;
    // The parser's messages may quote the text: never include them (credentials).
    let kubeconfig = Kubeconfig::from_yaml(&text)
        .map_err(|_| format!("{ENV_KUBECONFIG} does not decode to a kubeconfig (YAML)"))?;
    let context_name = kubeconfig
        .current_context
        .clone()
        .or_else(|| kubeconfig.contexts.first().map(|c| c.name.clone()))
        .ok_or_else(|| format!("{ENV_KUBECONFIG}: the kubeconfig has no context"))?;
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| {
            format!(
                "{ENV_KUBECONFIG}: context {} is not defined",
                shown_name(&context_name)
            )
        })?;
    let server = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .ok_or_else(|| {
            format!(
                "{ENV_KUBECONFIG}: cluster {} of context {} has no server",
                shown_name(&context.cluster),
                shown_name(&context_name)
            )
        })?;
    if !(server.starts_with("https://") || server.starts_with("http://")) {
        return Err(format!(
            "{ENV_KUBECONFIG}: the server of the current context is not an http(s) URL"
        ));
    }
    Ok((kubeconfig, server))
}

/// A kubeconfig's name (context, cluster) for a message: short names as written, others cut.
fn shown_name(name: &str) -> String {
    stratus_runtime::redact::bounded(name, 64)
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: dvp
  cluster: {server: 'https://10.0.0.1:6443', insecure-skip-tls-verify: true}
users:
- name: t
  user: {token: secret-token-123}
contexts:
- name: dvp
  context: {cluster: dvp, user: t, namespace: proj}
current-context: dvp
";

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn env(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn env_config_is_read_and_debug_redacts_credentials() {
        let c = DvpConfig::load(
            env(&[
                (ENV_KUBECONFIG, b64(KUBECONFIG)),
                (ENV_NAMESPACE, "proj".into()),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(c.namespace, "proj");
        assert_eq!(c.server, "https://10.0.0.1:6443");
        let shown = format!("{c:?}");
        assert!(!shown.contains("secret-token-123"), "{shown}");
    }

    #[test]
    fn file_keys_work_and_env_wins() {
        let text = format!(
            "{{\"kubernetes_config_base64\": \"{}\", \"namespace\": \"from-file\"}}",
            b64(KUBECONFIG)
        );
        let path = Path::new("/etc/cloud.json");
        let c = DvpConfig::load(env(&[]), Some((path, &text))).unwrap();
        assert_eq!(c.namespace, "from-file");
        let c = DvpConfig::load(
            env(&[(ENV_NAMESPACE, "from-env".into())]),
            Some((path, &text)),
        )
        .unwrap();
        assert_eq!(c.namespace, "from-env");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        /// Environment, then the problems expected (one substring each).
        type Case<'a> = (Vec<(&'a str, String)>, &'a [&'a str]);
        let table: &[Case] = &[
            (vec![], &[ENV_KUBECONFIG, ENV_NAMESPACE]),
            (
                vec![
                    (ENV_KUBECONFIG, "%%%".into()),
                    (ENV_NAMESPACE, "Bad_NS".into()),
                ],
                &["not valid base64", "not a namespace name"],
            ),
            (
                vec![
                    (ENV_KUBECONFIG, b64("clusters: 5")),
                    (ENV_NAMESPACE, "ok".into()),
                ],
                &["does not decode to a kubeconfig"],
            ),
            (
                vec![
                    (
                        ENV_KUBECONFIG,
                        b64(&KUBECONFIG.replace("https://10.0.0.1:6443", "ftp://x")),
                    ),
                    (ENV_NAMESPACE, "ok".into()),
                ],
                &["not an http(s) URL"],
            ),
            (
                vec![
                    (
                        ENV_KUBECONFIG,
                        b64(&KUBECONFIG.replace("current-context: dvp", "current-context: nope")),
                    ),
                    (ENV_NAMESPACE, "ok".into()),
                ],
                &["context nope is not defined"],
            ),
        ];
        for (vars, wants) in table {
            let err = DvpConfig::load(env(vars), None).unwrap_err();
            assert_eq!(err.0.len(), wants.len(), "{err}");
            for want in *wants {
                assert!(err.to_string().contains(want), "{err} lacks {want}");
            }
            assert!(!err.to_string().contains("secret-token-123"));
        }
        let err = DvpConfig::load(env(&[]), Some((Path::new("/c"), "bogus_key: 1"))).unwrap_err();
        assert!(
            err.to_string().contains("--cloud-config /c: line 1"),
            "{err}"
        );
    }

    /// The file shapes a user gets wrong: never quoted, always short.
    #[test]
    fn a_wrong_file_is_named_without_its_content() {
        let encoded = b64(KUBECONFIG);
        let files = [
            encoded.clone(),
            format!("{encoded}{}", "A".repeat(10 << 20)),
            "namespace: [1]\nkubernetes_config_base64: {a: 1}\nsecret-token-123: 1\n".to_string(),
            "namespace: secret-token-123\nkubernetes_config_base64: secret-token-123\n".to_string(),
            "{\"namespace\": 5, \"kubernetes_config_base64\": \"secret-token-123\"}".to_string(),
            "\u{0}\u{1}secret-token-123\u{7f}".to_string(),
        ];
        for text in &files {
            let err = DvpConfig::load(env(&[]), Some((Path::new("/c"), text)))
                .unwrap_err()
                .to_string();
            assert!(!err.contains("secret-token-123"), "{err}");
            assert!(!err.contains(&encoded[..40]), "{err}");
            assert!(err.len() < 1024, "{}", err.len());
        }
        let err = DvpConfig::load(env(&[]), Some((Path::new("/c"), &encoded))).unwrap_err();
        assert!(
            err.to_string().contains(
                "--cloud-config /c: line 1, column 1: invalid type: a string, expected struct FileConfig"
            ),
            "{err}"
        );
    }
}
