//! How every Stratus binary reaches the apiserver: the `--kubeconfig` / `--master` flags as a
//! clap group, and the one function that turns a kubeconfig (or the in-cluster settings) into a
//! client configuration.

use std::path::{Path, PathBuf};

use clap::Args;

/// Why no client could be configured. Messages name the flag and the file.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file cannot be read.
    #[error("{flag} {path}: cannot read: {source}")]
    Read {
        /// The flag that named the file.
        flag: String,
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig file is not usable.
    #[error("{flag} {path}: invalid: {source}")]
    Invalid {
        /// The flag that named the file.
        flag: String,
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// Neither a kubeconfig nor in-cluster settings were found.
    #[error("no kubeconfig: pass --kubeconfig or run in a cluster: {0}")]
    NoConfig(kube::config::InferConfigError),
    /// `--master` is not a URL.
    #[error("--master {0:?}: not a URL")]
    BadMaster(String),
    /// The client could not be built from the configuration.
    #[error("cannot build the Kubernetes client: {0}")]
    Build(kube::Error),
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
            None => kube::Config::infer().await.map_err(ClientError::NoConfig)?,
        };
        if let Some(master) = &self.master {
            config.cluster_url = master
                .parse()
                .map_err(|_| ClientError::BadMaster(master.clone()))?;
        }
        Ok(config)
    }
}

/// The client configuration of the kubeconfig at `path` (its current context); `flag` names the
/// flag that gave the path, for messages.
pub async fn from_kubeconfig(path: &Path, flag: &str) -> Result<kube::Config, ClientError> {
    let shown = path.display().to_string();
    let kubeconfig =
        kube::config::Kubeconfig::read_from(path).map_err(|source| ClientError::Read {
            flag: flag.into(),
            path: shown.clone(),
            source,
        })?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|source| ClientError::Invalid {
            flag: flag.into(),
            path: shown,
            source,
        })
}

/// A client for `config`.
pub fn client(config: kube::Config) -> Result<kube::Client, ClientError> {
    kube::Client::try_from(config).map_err(ClientError::Build)
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
