//! How every Stratus binary reaches the apiserver: the `--kubeconfig` / `--master` flags as a
//! clap group, and the one function that turns a kubeconfig (or the in-cluster settings) into a
//! client configuration, through the environment's proxy ([`crate::proxy`]).

use std::path::{Path, PathBuf};

use clap::Args;

/// Why no client could be configured. Messages name the flag and the file, and never quote the
/// file's content (a kubeconfig holds credentials).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file cannot be read.
    #[error("{flag} {path}: cannot read: {reason}")]
    Read {
        /// The flag that named the file.
        flag: String,
        /// The file.
        path: String,
        /// Why (the OS error).
        reason: String,
    },
    /// The kubeconfig file is not usable.
    #[error("{flag} {path}: invalid: {reason}")]
    Invalid {
        /// The flag that named the file.
        flag: String,
        /// The file.
        path: String,
        /// Why, with the line and column when the file does not parse; no value of the file.
        reason: String,
    },
    /// Neither a kubeconfig nor in-cluster settings were found.
    #[error("no kubeconfig: pass --kubeconfig or run in a cluster ({0})")]
    NoConfig(String),
    /// `--master` is not a URL.
    #[error("--master: not a URL")]
    BadMaster(String),
    /// The client could not be built from the configuration.
    #[error("cannot build the Kubernetes client: {0}")]
    Build(String),
    /// A proxy variable of the environment is not a usable proxy URL.
    #[error("proxy settings: {0}")]
    Proxy(#[from] stratus_runtime::proxy_env::ProxyEnvError),
}

/// `config` with the environment's proxy for its server ([`crate::proxy::with_env_proxy`]):
/// every Stratus client configuration passes here.
pub fn env_proxied(config: kube::Config) -> Result<kube::Config, ClientError> {
    let env = stratus_runtime::proxy_env::ProxyEnv::from_env()?;
    Ok(crate::proxy::with_env_proxy(config, &env))
}

/// Why `kube::Config::infer` found no configuration, without any value of a kubeconfig file it
/// read (`$KUBECONFIG` may name a file that is not a kubeconfig).
pub fn infer_problem(error: &kube::config::InferConfigError) -> String {
    use std::error::Error as _;
    let named = std::env::var_os("KUBECONFIG");
    let kubeconfig = match (
        error
            .source()
            .and_then(|s| s.downcast_ref::<kube::config::KubeconfigError>()),
        &named,
    ) {
        (Some(e), Some(files)) => format!(
            "KUBECONFIG={}: {}",
            files.to_string_lossy(),
            kubeconfig_problem(e)
        ),
        (Some(e @ kube::config::KubeconfigError::ReadConfig(_, path)), None) => {
            format!("{}: {}", path.display(), kubeconfig_problem(e))
        }
        (Some(e), None) => kubeconfig_problem(e),
        (None, _) => String::new(),
    };
    // The in-cluster half never holds file content: it names variables and the token file.
    let text = error.to_string();
    let in_cluster = text
        .strip_prefix("failed to infer config: in-cluster: (")
        .and_then(|rest| rest.split_once("), kubeconfig: ("))
        .map(|(in_cluster, _)| stratus_runtime::redact::scrub(in_cluster))
        .unwrap_or_default();
    format!("in-cluster: {in_cluster}; kubeconfig: {kubeconfig}")
}

/// A kubeconfig error as one short line without any value of the file: the parser's message
/// (without its snippet of the file) and position, or the error's own text, scrubbed.
pub fn kubeconfig_problem(error: &kube::config::KubeconfigError) -> String {
    use kube::config::KubeconfigError;
    use stratus_runtime::redact;
    match error {
        KubeconfigError::ReadConfig(io, _) => redact::scrub(&io.to_string()),
        KubeconfigError::Parse(e) => {
            let position = e
                .location()
                .map(|l| (l.line() as usize, l.column() as usize));
            format!(
                "not a kubeconfig (YAML): {}",
                redact::parse_problem(&e.without_snippet().to_string(), position)
            )
        }
        KubeconfigError::LoadContext(_) => {
            "current-context names no context of the file (or the file has no current-context)"
                .into()
        }
        KubeconfigError::LoadClusterOfContext(_) => {
            "the current context names no cluster of the file".into()
        }
        other => redact::scrub(&other.to_string()),
    }
}

/// `--kubeconfig` and `--master`, as upstream controllers spell them.
#[derive(Debug, Clone, Default, Args)]
pub struct KubeClientArgs {
    /// Path to a kubeconfig; in-cluster config or $KUBECONFIG when unset.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Address of the Kubernetes API server (overrides the kubeconfig's server).
    #[arg(long)]
    pub master: Option<String>,
}

impl KubeClientArgs {
    /// The client configuration these flags select.
    pub async fn config(&self) -> Result<kube::Config, ClientError> {
        let mut config = match &self.kubeconfig {
            Some(path) => from_kubeconfig(path, "--kubeconfig").await?,
            None => kube::Config::infer()
                .await
                .map_err(|e| ClientError::NoConfig(infer_problem(&e)))?,
        };
        if let Some(master) = &self.master {
            config.cluster_url = master
                .parse()
                .map_err(|_| ClientError::BadMaster(master.clone()))?;
        }
        env_proxied(config)
    }
}

/// The client configuration of the kubeconfig at `path` (its current context); `flag` names the
/// flag that gave the path, for messages.
pub async fn from_kubeconfig(path: &Path, flag: &str) -> Result<kube::Config, ClientError> {
    let shown = path.display().to_string();
    let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| match e {
        kube::config::KubeconfigError::ReadConfig(..) => ClientError::Read {
            flag: flag.into(),
            path: shown.clone(),
            reason: kubeconfig_problem(&e),
        },
        _ => ClientError::Invalid {
            flag: flag.into(),
            path: shown.clone(),
            reason: kubeconfig_problem(&e),
        },
    })?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .map_err(|e| ClientError::Invalid {
        flag: flag.into(),
        path: shown,
        reason: kubeconfig_problem(&e),
    })?;
    env_proxied(config)
}

/// A client for `config`.
pub fn client(config: kube::Config) -> Result<kube::Client, ClientError> {
    kube::Client::try_from(config)
        .map_err(|e| ClientError::Build(stratus_runtime::redact::scrub(&e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        client: KubeClientArgs,
    }

    #[tokio::test]
    async fn errors_name_the_flag_and_the_file() {
        let flags = Flags::parse_from(["x", "--kubeconfig", "/nonexistent/kubeconfig"]);
        let e = flags.client.config().await.unwrap_err().to_string();
        assert!(
            e.starts_with("--kubeconfig /nonexistent/kubeconfig: cannot read"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn no_config_is_named_without_the_content_of_kubeconfig() {
        let dir = std::env::temp_dir().join(format!("kube-kit-infer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kubeconfig");
        std::fs::write(&path, "tok-7f3a9c-SECRET: [\n").unwrap();
        // SAFETY of the test: no other test of this binary reads these variables.
        std::env::set_var("KUBECONFIG", &path);
        std::env::remove_var("KUBERNETES_SERVICE_HOST");
        let e = KubeClientArgs::default()
            .config()
            .await
            .unwrap_err()
            .to_string();
        std::env::remove_var("KUBECONFIG");
        assert!(e.starts_with("no kubeconfig: pass --kubeconfig"), "{e}");
        assert!(e.contains("in-cluster: "), "{e}");
        assert!(
            e.contains("kubeconfig: not a kubeconfig (YAML): line "),
            "{e}"
        );
        assert!(!e.contains("7f3a9c"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Files a user passes by mistake: the message names the file and the line, never the content.
    #[tokio::test]
    async fn a_bad_kubeconfig_is_named_without_its_content() {
        const SECRET: &str = "tok-7f3a9c-SECRET";
        let dir = std::env::temp_dir().join(format!("kube-kit-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:1'}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user: {{token: {SECRET}}}\n");
        let base64: String = good
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
            .repeat(4);
        let cases = [
            format!("{SECRET}{base64}"),
            format!("{SECRET}{}", "A".repeat(10 << 20)),
            good.replace(
                "current-context: c",
                &format!("current-context: [{SECRET}]"),
            ),
            good.replace("kind: Config", &format!("kind: Config\nclusters: {SECRET}")),
            format!("\u{0}\u{1}\u{2}{SECRET}\u{7f}\n"),
            good.replace("'https://127.0.0.1:1'", &format!("'{SECRET} not a url'")),
            good.replace("current-context: c", &format!("current-context: {SECRET}")),
        ];
        for (i, text) in cases.iter().enumerate() {
            let path = dir.join(format!("kubeconfig-{i}"));
            std::fs::write(&path, text).unwrap();
            let args = KubeClientArgs {
                kubeconfig: Some(path.clone()),
                master: None,
            };
            let e = args.config().await.unwrap_err().to_string();
            assert!(!e.contains("7f3a9c"), "case {i}: {e}");
            assert!(!e.contains(&base64[..40]), "case {i}: {e}");
            assert!(e.len() < 600, "case {i}: {} bytes: {e}", e.len());
            assert!(
                e.starts_with(&format!("--kubeconfig {}: invalid: ", path.display())),
                "case {i}: {e}"
            );
        }
        std::fs::write(dir.join("one-line"), format!("{SECRET}{base64}")).unwrap();
        let args = KubeClientArgs {
            kubeconfig: Some(dir.join("one-line")),
            master: None,
        };
        let e = args.config().await.unwrap_err().to_string();
        assert!(
            e.contains("not a kubeconfig (YAML): line 1, column 1: "),
            "{e}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn master_overrides_the_server() {
        let dir = std::env::temp_dir().join(format!("kube-kit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n",
        )
        .unwrap();
        let args = KubeClientArgs {
            kubeconfig: Some(path),
            master: Some("https://10.0.0.1:6443".into()),
        };
        let config = args.config().await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://10.0.0.1:6443/");
        let bad = KubeClientArgs {
            master: Some("not a url".into()),
            ..args
        };
        assert!(matches!(bad.config().await, Err(ClientError::BadMaster(_))));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
