//! The reaper: load balancers and target groups this cluster's Ingress groups and NLB Services
//! made (tagged `elbv2.k8s.aws/cluster` = `--cluster-name` and a stack tag) whose owner no
//! longer exists in Kubernetes — removed while the controller was down — are deleted at start-up
//! and every `--sync-period`. The decision is [`plan::plan_reap`]; the I/O is in
//! [`driver`] and [`inventory`].

pub mod driver;
pub mod inventory;
pub mod plan;
