//! Every Kubernetes API access the cloud-controller-manager's code makes (the controllers are
//! shared by every provider), so that least-privilege tests of the shipped RBAC (the
//! SubjectAccessReview test of each verb, and the audit-log tests of each provider's run) check
//! one list.

use crate::core::rbac_check::{access, Access};

/// Every Kubernetes API call the CCM makes, from the code (`crates/controllers/src`,
/// `bins/cloud-controller-manager/src`). Reads go through list+watch caches only: there is no
/// `get` of nodes or Services anywhere.
pub const REQUIRED: &[Access] = &[
    access("list", "", "nodes", None,
        "informer.rs: watcher(Api::<Node>::all) feeds every node controller (initial list, relists)"),
    access("watch", "", "nodes", None,
        "informer.rs: watcher(Api::<Node>::all)"),
    access("patch", "", "nodes", None,
        "node/driver.rs initialise (providerID, labels, taint removal); node_lifecycle/driver.rs \
         (shutdown taint); node_ipam/driver.rs write (spec.podCIDRs)"),
    access("delete", "", "nodes", None,
        "node_lifecycle/driver.rs check_node: nodes.delete of a node whose instance is gone"),
    access("patch", "", "nodes/status", None,
        "node/driver.rs patch_status (addresses); route/driver.rs patch_status (NetworkUnavailable)"),
    access("list", "", "services", None,
        "service/driver.rs: Controller::new(Api::<Service>::all) (initial list, relists)"),
    access("watch", "", "services", None,
        "service/driver.rs: Controller::new(Api::<Service>::all)"),
    access("patch", "", "services/status", Some("default"),
        "service/driver.rs: patch_status sets and clears status.loadBalancer.ingress and adds and \
         removes the load-balancer-cleanup finalizer"),
    access("list", "discovery.k8s.io", "endpointslices", None,
        "service/endpoint_trigger.rs: metadata_watcher(Api::<EndpointSlice>::all) where the \
         provider's Local targets follow endpoints (DVP)"),
    access("watch", "discovery.k8s.io", "endpointslices", None,
        "service/endpoint_trigger.rs: metadata_watcher(Api::<EndpointSlice>::all)"),
    access("create", "events.k8s.io", "events", Some("default"),
        "events.rs EventPublisher::publish -> kube Recorder: the first Event of a series"),
    access("patch", "events.k8s.io", "events", Some("default"),
        "events.rs EventPublisher::publish -> kube Recorder: repeats update the series"),
    access("get", "coordination.k8s.io", "leases", Some("kube-system"),
        "election/elector.rs: read the lock (main and leader-migration Leases)"),
    access("create", "coordination.k8s.io", "leases", Some("kube-system"),
        "election/elector.rs: create the lock when absent"),
    access("update", "coordination.k8s.io", "leases", Some("kube-system"),
        "election/elector.rs: acquire, renew and release the lock"),
    access("get", "", "serviceaccounts", Some("kube-system"),
        "controller_clients.rs (--use-service-account-credentials): find the controller's account"),
    access("create", "", "serviceaccounts", Some("kube-system"),
        "controller_clients.rs: create the controller's account when absent"),
    access("create", "", "serviceaccounts/token", Some("kube-system"),
        "controller_clients.rs: TokenRequest for the controller's short-lived token"),
];
