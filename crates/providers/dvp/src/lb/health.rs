//! `externalTrafficPolicy: Local` target filtering, as Deckhouse's DVP CCM does it: a node
//! receives traffic only if kube-proxy on it answers `GET http://<vm ip>:<healthCheckNodePort>/healthz`
//! with 200 within the timeout (it answers 503 when the node has no local endpoint). A plain
//! HTTP/1.0 request over a TCP stream: one status line is all that is read.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one probe may take (upstream: 3 s).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Whether `ip:port/healthz` answers 200 within [`PROBE_TIMEOUT`].
pub async fn healthy(ip: &str, port: u16) -> bool {
    tokio::time::timeout(PROBE_TIMEOUT, probe(ip, port))
        .await
        .unwrap_or(false)
}

async fn probe(ip: &str, port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect((ip, port)).await else {
        return false;
    };
    let request = format!("GET /healthz HTTP/1.0\r\nHost: {ip}:{port}\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 32];
    let mut read = 0;
    while read < head.len() {
        match stream.read(&mut head[read..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    status_is_ok(&head[..read])
}

/// Whether an HTTP response starts with a 200 status line.
pub fn status_is_ok(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let mut parts = text.split_whitespace();
    matches!(
        (parts.next(), parts.next()),
        (Some(version), Some("200")) if version.starts_with("HTTP/")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_200_status_line_is_healthy() {
        for (head, want) in [
            (&b"HTTP/1.1 200 OK\r\n"[..], true),
            (b"HTTP/1.0 200 OK", true),
            (b"HTTP/1.1 503 Service Unavailable", false),
            (b"", false),
            (b"SSH-2.0-OpenSSH", false),
        ] {
            assert_eq!(
                status_is_ok(head),
                want,
                "{:?}",
                String::from_utf8_lossy(head)
            );
        }
    }

    #[tokio::test]
    async fn probes_a_real_listener() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            for answer in [
                "HTTP/1.1 200 OK\r\n\r\n",
                "HTTP/1.1 503 Service Unavailable\r\n\r\n",
            ] {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 256];
                let _ = s.read(&mut buf).await;
                s.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        assert!(healthy("127.0.0.1", port).await);
        assert!(!healthy("127.0.0.1", port).await);
        server.await.unwrap();
        assert!(
            !healthy("127.0.0.1", port).await,
            "nothing listens any more"
        );
    }
}
