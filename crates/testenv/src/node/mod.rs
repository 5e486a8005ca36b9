//! A real one-node Kubernetes cluster for the end-to-end suites: a real kubelet on containerd
//! runs the charts' pods from Stratus's images, inside a network namespace the test creates.
//!
//! ```no_run
//! use stratus_testenv::node::{netns, RealCluster};
//! #[test]
//! fn a_pod_runs() {
//!     netns::run(|| async {
//!         let cluster = RealCluster::start(&[]).await.unwrap();
//!         // ... helm install, wait for pods ...
//!         cluster.teardown().await.unwrap();
//!     })
//! }
//! ```

pub mod agents;
pub mod cluster;
pub mod containerd;
pub mod control_plane;
pub mod forward;
pub mod host_state;
pub mod image_cache;
pub mod images;
pub(crate) mod loops;
pub mod netns;
pub mod pki;
pub mod teardown;

pub use cluster::{RealCluster, NODE_NAME};
pub use images::ImageArchive;
