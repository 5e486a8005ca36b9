//! Runs a proxy on a dedicated thread with its own runtime, so it keeps serving whatever the
//! caller's runtime does (e.g. a current-thread test runtime blocked in a sync call, or a
//! runtime shutting down before the environment is dropped).

use std::net::TcpListener as StdTcpListener;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{bail, Context, Result};

use super::{serve, Counters, Protocol};

/// A proxy serving on its own thread until stopped or dropped.
pub struct ProxyThread {
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ProxyThread {
    /// Serves `protocol` on `listener`, forwarding to `upstream`.
    pub fn start(
        listener: StdTcpListener,
        upstream: String,
        protocol: Arc<dyn Protocol>,
    ) -> Result<ProxyThread> {
        listener.set_nonblocking(true)?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let (started, startup) = std::sync::mpsc::channel::<std::io::Result<()>>();
        let thread = std::thread::Builder::new()
            .name("stratus-proxy".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = started.send(Err(err));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(err) => {
                            let _ = started.send(Err(err));
                            return;
                        }
                    };
                    let _ = started.send(Ok(()));
                    tokio::select! {
                        result = serve(listener, upstream, Arc::new(Counters::new()), protocol) => {
                            if let Err(err) = result {
                                eprintln!("stratus-testenv: proxy stopped: {err:#}");
                            }
                        }
                        _ = stopped => {}
                    }
                });
            })?;
        let mut proxy = ProxyThread {
            shutdown: Some(shutdown),
            thread: Some(thread),
        };
        match startup.recv() {
            Ok(Ok(())) => Ok(proxy),
            Ok(Err(err)) => Err(err).context("starting the proxy thread"),
            Err(_) => {
                proxy.stop();
                bail!("the proxy thread died while starting")
            }
        }
    }

    /// Stops serving and joins the thread.
    pub fn stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ProxyThread {
    fn drop(&mut self) {
        self.stop();
    }
}
