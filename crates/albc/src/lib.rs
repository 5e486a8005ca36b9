//! aws-load-balancer-controller as a library: the `elbv2.k8s.aws/v1beta1` kinds, the
//! TargetGroupBinding controller and the Ingress → ALB driver (`ingress`).
//!
//! Watches TargetGroupBindings, Services, EndpointSlices (labelled `kubernetes.io/service-name`)
//! and Nodes; writes the bindings' finalizer and `status.observedGeneration`, Events, and the
//! leader Lease; calls ELBv2 (DescribeTargetGroups, DescribeTargetHealth, RegisterTargets,
//! DeregisterTargets) through the shared AWS call guard. The Ingress driver (with
//! `--aws-vpc-id`) watches Ingresses, reads IngressClasses, writes Ingress finalizers and status
//! and internal TargetGroupBindings, and calls ELBv2 and EC2 (subnets) as listed in
//! `deploy/albc-iam-policy.json`. The Service driver (`service`, also with `--aws-vpc-id`)
//! watches Services of class `service.k8s.aws/nlb` (or the `external` type annotation), writes
//! their finalizer and status and internal TargetGroupBindings, and makes NLBs the same way.
//! The reaper (`reaper`, also with `--aws-vpc-id`) lists ELBv2 load balancers and target groups
//! with their tags, Ingresses, Services and TargetGroupBindings, and deletes this cluster's
//! stacks whose owner is gone (and the bindings of their target groups). The admission webhooks
//! (`webhook`, every replica) watch TargetGroupBindings and Services into caches and call nothing.

pub mod app;
pub mod crd;
pub mod ingress;
pub mod metrics;
pub mod options;
pub mod reaper;
pub mod service;
pub mod tgb;
pub mod webhook;
