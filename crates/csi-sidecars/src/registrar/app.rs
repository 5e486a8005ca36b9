//! node-driver-registrar's process, start to stop: in probe mode, look for the registration probe
//! file; otherwise ask the driver its name, bind the registration socket, serve the kubelet (and
//! `/healthz`) until SIGTERM or until the kubelet refuses the driver, then remove the socket.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use stratus_kubelet_plugin_spec::v1::registration_server::RegistrationServer;
use tokio::sync::{oneshot, watch, Notify};
use tokio_stream::wrappers::UnixListenerStream;
use tokio_stream::StreamExt as _;
use tonic::transport::Server;

use super::authority;
use super::flags::{Config, Mode};
use super::health::{self, Health};
use super::service::{plugin_info, RegistrationService, Reported};
use super::socket::{
    probe_file, remove_probe_file, socket_path, touch_probe_file, RegistrationSocket,
};
use crate::http;
use crate::identity::wait_for_name;

/// How long a stopping server may take to finish the calls in flight.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Why serving stopped.
#[derive(Debug)]
enum Stop {
    /// SIGTERM or SIGINT.
    Signal,
    /// The kubelet refused the registration, with its error.
    Refused(String),
}

/// Runs the registrar until `shutdown` completes (Ok) or something fails (the error says what).
pub async fn run(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    if config.mode == Mode::KubeletRegistrationProbe {
        return registration_probe(&config.kubelet_registration_path);
    }
    let http = match config.http {
        Some((addr, flag)) => Some(http::bind(addr, flag).await?),
        None => None,
    };
    tracing::info!(
        "asking the CSI driver at {} for its name",
        config.csi_socket.display()
    );
    let driver = wait_for_name(&config.csi_socket, config.timeout)
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!("CSI driver name: {driver}");

    // A probe file left by a killed container would claim a registration that has not happened.
    let probe = probe_file(&config.kubelet_registration_path);
    remove_probe_file(&probe);
    let (socket, listener) =
        RegistrationSocket::bind(&socket_path(&config.plugin_registration_dir, &driver))?;
    let (reported_tx, reported_rx) = watch::channel(Reported::NotYet);
    let service = RegistrationService::new(
        plugin_info(&driver, &config.kubelet_registration_path),
        reported_tx,
    );

    let http_stop = Arc::new(Notify::new());
    if let Some(bound) = http {
        if let Some(addr) = bound.local_addr() {
            tracing::info!("serving /healthz on {addr}");
        }
        let router = health::router(Health {
            socket: socket.path().to_path_buf(),
            driver: driver.clone(),
            timeout: config.timeout,
            reported: reported_rx.clone(),
        });
        let stop = http_stop.clone();
        tokio::spawn(bound.serve(router, async move { stop.notified().await }));
    }

    let (why_tx, why_rx) = oneshot::channel();
    let stopping = Arc::new(Notify::new());
    let stop = {
        let stopping = stopping.clone();
        let probe = probe.clone();
        async move {
            let why = tokio::select! {
                () = shutdown => Stop::Signal,
                error = follow_reports(reported_rx, &probe) => Stop::Refused(error),
            };
            stopping.notify_one();
            let _ = why_tx.send(why);
        }
    };
    tracing::info!("registration server started at {}", socket.path().display());
    let server = Server::builder()
        .add_service(RegistrationServer::new(service))
        .serve_with_incoming_shutdown(
            // The kubelet's connections, with their `:authority` made acceptable to h2.
            UnixListenerStream::new(listener).map(|accepted| accepted.and_then(authority::relay)),
            stop,
        );
    let served = tokio::select! {
        served = server => served.map_err(|e| format!("serving the registration socket: {e}")),
        () = async { stopping.notified().await; tokio::time::sleep(STOP_GRACE).await } => Ok(()),
    };
    http_stop.notify_one();
    remove_probe_file(&probe);
    drop(socket);
    served?;
    match why_rx.await {
        Ok(Stop::Refused(error)) => Err(format!(
            "the kubelet refused the registration of {driver}: {error}; exiting so the container restarts"
        )),
        Ok(Stop::Signal) | Err(_) => Ok(()),
    }
}

/// Acts on the kubelet's reports: a success writes the probe file, a refusal ends the wait with
/// the kubelet's error.
async fn follow_reports(mut reported: watch::Receiver<Reported>, probe: &Path) -> String {
    loop {
        if reported.changed().await.is_err() {
            return std::future::pending().await;
        }
        let now = reported.borrow_and_update().clone();
        match now {
            Reported::Registered => touch_probe_file(probe),
            Reported::Failed(error) => return error,
            Reported::NotYet => {}
        }
    }
}

/// `--mode=kubelet-registration-probe`: Ok when the probe file says the kubelet registered us.
fn registration_probe(kubelet_registration_path: &Path) -> Result<(), String> {
    let probe = probe_file(kubelet_registration_path);
    match std::fs::metadata(&probe) {
        Ok(_) => {
            tracing::info!("kubelet plugin registration succeeded");
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "kubelet plugin registration hasn't succeeded yet, file={} doesn't exist",
            probe.display()
        )),
        Err(e) => Err(format!("checking {}: {e}", probe.display())),
    }
}
