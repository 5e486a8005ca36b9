//! Which controllers start, and why the others do not: a pure function of the enabled
//! controllers, the flags that gate them and the provider's capabilities.

use crate::controllers::{CLOUD_NODE, CLOUD_NODE_LIFECYCLE, NODE_IPAM, ROUTE, SERVICE, TAGGING};

/// The flags that decide whether an enabled controller can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartFlags {
    /// `--configure-cloud-routes`.
    pub configure_cloud_routes: bool,
    /// `--cluster-cidr` was given.
    pub cluster_cidr_set: bool,
}

/// What the provider can do: each capability present, or absent with the provider's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilitySet {
    /// Instance questions (node and node-lifecycle controllers).
    pub instances: Result<(), String>,
    /// Load balancers (service controller).
    pub load_balancer: Result<(), String>,
    /// Routes (route controller).
    pub routes: Result<(), String>,
    /// Tags on nodes' resources (tagging controller).
    pub node_tags: Result<(), String>,
}

/// The decision for one controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// Start it.
    Run,
    /// Do not start it; `warn` when the operator likely wants to know (a setting is missing),
    /// not when they asked for it.
    Skip {
        /// Why, for the log.
        reason: String,
        /// Whether this is worth a warning.
        warn: bool,
    },
}

fn skip(reason: impl Into<String>, warn: bool) -> Start {
    Start::Skip {
        reason: reason.into(),
        warn,
    }
}

fn needs(capability: &Result<(), String>, controller: &str) -> Start {
    match capability {
        Ok(()) => Start::Run,
        Err(why) => skip(
            format!("the {controller} controller is not started: {why}"),
            true,
        ),
    }
}

/// The decision for each of `controllers`, in order.
pub fn plan_start(
    controllers: &[&'static str],
    flags: StartFlags,
    caps: &CapabilitySet,
) -> Vec<(&'static str, Start)> {
    controllers
        .iter()
        .map(|&name| {
            let decision = match name {
                CLOUD_NODE | CLOUD_NODE_LIFECYCLE => needs(&caps.instances, name),
                SERVICE => needs(&caps.load_balancer, name),
                ROUTE if !flags.configure_cloud_routes => skip(
                    "--configure-cloud-routes=false: the route controller is not started",
                    false,
                ),
                ROUTE if !flags.cluster_cidr_set => skip(
                    "--configure-cloud-routes is true but --cluster-cidr is not set: the route controller is not started (pass --cluster-cidr, or --configure-cloud-routes=false to silence this)",
                    true,
                ),
                ROUTE => needs(&caps.routes, name),
                NODE_IPAM => Start::Run,
                TAGGING => needs(&caps.node_tags, name),
                other => skip(
                    format!("controller {other} is not available in this build"),
                    true,
                ),
            };
            (name, decision)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> CapabilitySet {
        CapabilitySet {
            instances: Ok(()),
            load_balancer: Ok(()),
            routes: Ok(()),
            node_tags: Ok(()),
        }
    }

    const ON: StartFlags = StartFlags {
        configure_cloud_routes: true,
        cluster_cidr_set: true,
    };

    fn run_all(flags: StartFlags, caps: &CapabilitySet) -> Vec<(&'static str, Start)> {
        plan_start(
            &[CLOUD_NODE, CLOUD_NODE_LIFECYCLE, SERVICE, ROUTE, NODE_IPAM],
            flags,
            caps,
        )
    }

    #[test]
    fn everything_runs_when_the_cloud_can_do_everything() {
        assert!(run_all(ON, &all()).iter().all(|(_, s)| *s == Start::Run));
    }

    #[test]
    fn missing_capabilities_skip_with_the_providers_reason() {
        let caps = CapabilitySet {
            routes: Err("routes need RouteTableID".into()),
            load_balancer: Err("no cluster ID".into()),
            ..all()
        };
        let plan = run_all(ON, &caps);
        assert_eq!(
            plan[2].1,
            skip("the service controller is not started: no cluster ID", true)
        );
        assert_eq!(
            plan[3].1,
            skip(
                "the route controller is not started: routes need RouteTableID",
                true
            )
        );
        assert_eq!(plan[0].1, Start::Run);
        assert_eq!(plan[4].1, Start::Run);
    }

    #[test]
    fn route_flags_come_before_capabilities() {
        let caps = CapabilitySet {
            routes: Err("x".into()),
            ..all()
        };
        let off = StartFlags {
            configure_cloud_routes: false,
            cluster_cidr_set: false,
        };
        assert!(matches!(
            &plan_start(&[ROUTE], off, &caps)[0].1,
            Start::Skip { warn: false, reason } if reason.starts_with("--configure-cloud-routes=false")
        ));
        let no_cidr = StartFlags {
            cluster_cidr_set: false,
            ..ON
        };
        assert!(matches!(
            &plan_start(&[ROUTE], no_cidr, &caps)[0].1,
            Start::Skip { warn: true, reason } if reason.contains("--cluster-cidr is not set")
        ));
    }
}
