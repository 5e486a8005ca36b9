//! gRPC channels over unix sockets, for the driver's socket and the registration socket alike.

use std::fmt::Write as _;
use std::path::Path;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint};

/// Connects a gRPC channel to the unix socket at `path` (one attempt). The error carries its
/// causes (tonic's own text is only "transport error").
pub async fn channel(path: &Path) -> Result<Channel, String> {
    let socket = path.to_path_buf();
    // The URI is never dialled: the connector opens the unix socket.
    Endpoint::from_static("http://unix-socket.invalid")
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move {
                tokio::net::UnixStream::connect(socket)
                    .await
                    .map(TokioIo::new)
            }
        }))
        .await
        .map_err(|e| with_causes(&e))
}

/// An error with its chain of causes, `outer: inner: …`.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        // hyper repeats the io error as its own text and as its source: say it once.
        let said = c.to_string();
        if !text.ends_with(&said) {
            let _ = write!(text, ": {said}");
        }
        cause = c.source();
    }
    text
}
