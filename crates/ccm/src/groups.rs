//! Controller groups: the controllers that start together once their Lease is held — one group
//! under the main Lease, and with `--enable-leader-migration` the migrated ones under the
//! migration Lease shared with kube-controller-manager.

use anyhow::{bail, Context};

use crate::migration;
use crate::options::Options;

/// Controllers that start together, once their lease (if any) is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerGroup {
    /// The Lease to hold first; `None` without leader election.
    pub lease: Option<String>,
    /// The controllers.
    pub controllers: Vec<&'static str>,
}

/// Splits the enabled controllers by lease.
pub fn controller_groups(
    opts: &Options,
    controllers: &[&'static str],
) -> anyhow::Result<Vec<ControllerGroup>> {
    if !opts.enable_leader_migration {
        if opts.leader_migration_config.is_some() {
            tracing::warn!(
                "--leader-migration-config has no effect without --enable-leader-migration"
            );
        }
        return Ok(vec![ControllerGroup {
            lease: opts.election.leader_elect.then(|| opts.lease_name()),
            controllers: controllers.to_vec(),
        }]);
    }
    if !opts.election.leader_elect {
        bail!("--enable-leader-migration needs leader election: drop --leader-elect=false");
    }
    let config = match &opts.leader_migration_config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| {
                format!("--leader-migration-config {}: cannot read", path.display())
            })?;
            migration::parse(&text)
                .map_err(|e| anyhow::anyhow!("--leader-migration-config {}: {e}", path.display()))?
        }
        None => migration::default_config(),
    };
    if config.leader_name == opts.lease_name() {
        bail!("leader migration: leaderName must differ from --leader-elect-resource-name");
    }
    let assignment = migration::assign(controllers, &config);
    for name in &assignment.unknown {
        tracing::warn!(controller = %name, "leader migration lists a controller this cloud-controller-manager does not have");
    }
    for name in &assignment.elsewhere {
        tracing::info!(
            controller = name,
            "leader migration assigns this controller to another component: not started"
        );
    }
    tracing::info!(
        lease = %config.leader_name,
        migrated = ?assignment.migrated,
        main = ?assignment.main,
        "leader migration enabled"
    );
    Ok(vec![
        ControllerGroup {
            lease: Some(opts.lease_name()),
            controllers: assignment.main,
        },
        ControllerGroup {
            lease: Some(config.leader_name),
            controllers: assignment.migrated,
        },
    ])
}
