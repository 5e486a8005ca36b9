//! The OpenStack API layer beneath every Stratus application of OpenStack (the CCM provider,
//! the Cinder CSI driver, the discoverer): it speaks OpenStack's shapes and no caller's
//! vocabulary.
//!
//! - [`config`]: the `cloud.conf` of openstack-cloud-controller-manager and cinder-csi-plugin
//!   (and `clouds.yaml`), parsed and validated with every problem reported at once; the
//!   credentials and TLS settings every application authenticates with.
//! - [`client`]: one HTTP/TLS seam, one Keystone session (a token renewed before it expires and
//!   after a 401, the catalog's endpoints), and a guarded client per service (rate limiter,
//!   metrics with `cloud="openstack"`, idempotent retries, paging inside).
//!
//! It reads and writes nothing in Kubernetes.

pub mod client;
pub mod config;
