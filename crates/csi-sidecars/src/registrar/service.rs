//! The kubelet's plugin-registration service as node-driver-registrar serves it: GetInfo names
//! the driver and the socket the kubelet should call it on, NotifyRegistrationStatus records the
//! kubelet's verdict for the rest of the process to act on.

use std::path::Path;

use stratus_kubelet_plugin_spec::v1::registration_server::Registration;
use stratus_kubelet_plugin_spec::v1::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use stratus_kubelet_plugin_spec::CSI_PLUGIN;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

/// The CSI plugin-registration versions this registrar speaks (upstream's `supportedVersions`).
pub const SUPPORTED_VERSIONS: &[&str] = &["1.0.0"];

/// What the kubelet has reported so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reported {
    /// No NotifyRegistrationStatus yet.
    NotYet,
    /// The kubelet registered the driver.
    Registered,
    /// The kubelet refused the driver, with its error.
    Failed(String),
}

/// The answer to GetInfo for `driver`, reachable by the kubelet at `endpoint`.
pub fn plugin_info(driver: &str, endpoint: &Path) -> PluginInfo {
    PluginInfo {
        r#type: CSI_PLUGIN.to_string(),
        name: driver.to_string(),
        endpoint: endpoint.to_string_lossy().into_owned(),
        supported_versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
    }
}

/// What a NotifyRegistrationStatus call reports.
pub fn reported(status: &RegistrationStatus) -> Reported {
    if status.plugin_registered {
        Reported::Registered
    } else {
        Reported::Failed(status.error.clone())
    }
}

/// The `pluginregistration.Registration` service.
#[derive(Debug)]
pub struct RegistrationService {
    info: PluginInfo,
    reported: watch::Sender<Reported>,
}

impl RegistrationService {
    /// Answers GetInfo with `info` and publishes the kubelet's reports on `reported`.
    pub fn new(info: PluginInfo, reported: watch::Sender<Reported>) -> Self {
        Self { info, reported }
    }
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        tracing::info!(driver = %self.info.name, "the kubelet asked GetInfo");
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        match reported(&status) {
            Reported::Failed(error) => {
                tracing::error!(driver = %self.info.name, "the kubelet refused the registration: {error}");
                self.reported.send_replace(Reported::Failed(error));
            }
            other => {
                tracing::info!(driver = %self.info.name, "the kubelet registered the driver");
                self.reported.send_replace(other);
            }
        }
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_info_names_a_csi_plugin_and_the_kubelet_path() {
        let info = plugin_info(
            "ebs.csi.aws.com",
            Path::new("/var/lib/kubelet/csi-plugins/ebs.csi.aws.com/csi.sock"),
        );
        assert_eq!(info.r#type, "CSIPlugin");
        assert_eq!(info.name, "ebs.csi.aws.com");
        assert_eq!(
            info.endpoint,
            "/var/lib/kubelet/csi-plugins/ebs.csi.aws.com/csi.sock"
        );
        assert_eq!(info.supported_versions, vec!["1.0.0".to_string()]);
    }

    #[test]
    fn reports() {
        let ok = RegistrationStatus {
            plugin_registered: true,
            error: String::new(),
        };
        let bad = RegistrationStatus {
            plugin_registered: false,
            error: "boom".into(),
        };
        assert_eq!(reported(&ok), Reported::Registered);
        assert_eq!(reported(&bad), Reported::Failed("boom".into()));
    }
}
