//! Pods on the pod network cannot reach a test's servers on loopback (a pod's `127.0.0.1` is
//! its own); [`NodeForward`] listens on the node IP and relays each connection to such a
//! server, byte for byte, inside the test's network namespace.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::node::netns::NODE_IP;

/// A relay from a port of the node IP to a loopback server; stops when dropped.
pub struct NodeForward {
    address: SocketAddr,
    task: JoinHandle<()>,
}

impl NodeForward {
    /// Listens on a free port of the node IP and relays to `target`.
    pub async fn start(target: SocketAddr) -> Result<NodeForward> {
        let listener = TcpListener::bind((NODE_IP, 0))
            .await
            .context("listening on the node IP")?;
        let address = listener.local_addr()?;
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Ok(NodeForward { address, task })
    }

    /// `NODE_IP:port`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://NODE_IP:port`.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for NodeForward {
    fn drop(&mut self) {
        self.task.abort();
    }
}
