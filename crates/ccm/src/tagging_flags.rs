//! cloud-provider-aws's extra controller flags, provider-neutral here: the `tagging`
//! controller's (`--tags`, `--resources`, its queue limits) and the `nodeipam` controller's
//! (`--nodeipam-controller-*`, `--dualstack`), with their checks.

use clap::{ArgAction, Args};
use stratus_cloud::TagSet;

use crate::pod_network::ClusterCidrs;

/// Parses one `key=value` of `--tags` (upstream's string-to-string flag: the value may be
/// empty, the `=` may not be missing).
fn parse_tag(text: &str) -> Result<(String, String), String> {
    let (k, v) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} must be formatted as key=value"))?;
    if k.trim().is_empty() {
        return Err(format!("{text:?}: the key is empty"));
    }
    Ok((k.trim().to_string(), v.to_string()))
}

/// A non-negative rate (upstream's float flags refuse negatives).
fn parse_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if r >= 0.0 && r.is_finite() => Ok(r),
        _ => Err(format!("{text:?} is not a non-negative number")),
    }
}

/// The tagging controller's flags.
#[derive(Debug, Clone, Default, Args)]
pub struct TaggingArgs {
    /// Tags the tagging controller applies to the nodes' resources: key=value, comma-separated.
    #[arg(id = "tagging_tags", long = "tags", value_parser = parse_tag, value_delimiter = ',')]
    pub tags: Vec<(String, String)>,
    /// Resource kinds the tagging controller tags (repeatable; `instance` on AWS).
    #[arg(id = "tagging_resources", long = "resources", action = ArgAction::Append)]
    pub resources: Vec<String>,
    /// Nodes the tagging controller processes per second (0: no limit; needs the burst limit).
    #[arg(id = "tagging_rate_limit", long = "tagging-controller-rate-limit", default_value = "0", value_parser = parse_rate)]
    pub rate_limit: f64,
    /// Nodes the tagging controller processes at once (0: no limit; needs the rate limit).
    #[arg(
        id = "tagging_burst_limit",
        long = "tagging-controller-burst-limit",
        default_value_t = 0
    )]
    pub burst_limit: u32,
}

impl TaggingArgs {
    /// The tag set (a key given twice takes the last value, as upstream's map flag).
    pub fn tag_set(&self) -> TagSet {
        self.tags.iter().cloned().collect()
    }

    /// Checks the flags of an enabled tagging controller (upstream's newest checks).
    pub fn check(&self) -> Result<(), String> {
        if self.tags.is_empty() {
            return Err(
                "--tags must not be empty and must be a form of key=value when the tagging controller runs".into(),
            );
        }
        if self.resources.is_empty() {
            return Err("--resources must not be empty when the tagging controller runs (e.g. --resources=instance)".into());
        }
        Ok(())
    }
}

/// The nodeipam controller's flags (cloud-provider-aws). Stratus's node-ipam is the range
/// allocator, run with `--allocate-node-cidrs`; these are checked against it.
#[derive(Debug, Clone, Default, Args)]
pub struct NodeIpamArgs {
    /// Work-queue rate of upstream's nodeipam controller; Stratus allocates in coalesced passes
    /// over the Node store, without a per-node queue: only 0 (upstream's default) is accepted.
    #[arg(id = "nodeipam_rate_limit", long = "nodeipam-controller-rate-limit", default_value = "0", value_parser = parse_rate)]
    pub rate_limit: f64,
    /// Work-queue burst of upstream's nodeipam controller; only 0 is accepted (see the rate).
    #[arg(
        id = "nodeipam_burst_limit",
        long = "nodeipam-controller-burst-limit",
        default_value_t = 0
    )]
    pub burst_limit: u32,
    /// Dual-stack pod CIDRs: needs an IPv4 and an IPv6 --cluster-cidr (Stratus's allocator takes
    /// the families from --cluster-cidr; upstream's IPv6-only prefix allocator is not provided).
    #[arg(long = "dualstack", action = ArgAction::Set, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub dualstack: bool,
}

impl NodeIpamArgs {
    /// Checks the flags against the pod network flags, naming the flag refused and why.
    pub fn check(&self, cluster_cidr: &ClusterCidrs) -> Result<(), String> {
        if self.rate_limit != 0.0 || self.burst_limit != 0 {
            return Err("--nodeipam-controller-rate-limit / --nodeipam-controller-burst-limit: only 0 (no limit) is supported: Stratus's node-ipam allocates in coalesced passes over the Node store, with no per-node work queue to limit".into());
        }
        let families = cluster_cidr
            .0
            .iter()
            .map(|c| c.is_ipv6())
            .collect::<std::collections::BTreeSet<bool>>();
        if self.dualstack && families.len() != 2 {
            return Err("--dualstack needs --cluster-cidr with an IPv4 and an IPv6 CIDR (Stratus allocates pod CIDRs from --cluster-cidr; upstream's IPv6 prefix allocator is not provided)".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Options::try_parse_from(
            ["ccm", "--cloud-provider=aws"]
                .into_iter()
                .chain(args.iter().copied()),
        )
    }

    #[test]
    fn tagging_flags_table() {
        let t = |k: &str, v: &str| (k.to_string(), v.to_string());
        /// (args, tags, resources, rate, burst)
        type Row<'a> = (Vec<&'a str>, TagSet, Vec<&'a str>, f64, u32);
        let ok: Vec<Row> = vec![
            (vec![], TagSet::new(), vec![], 0.0, 0),
            (
                vec!["--tags=a=1,b=", "--resources=instance"],
                [t("a", "1"), t("b", "")].into(),
                vec!["instance"],
                0.0,
                0,
            ),
            (
                vec![
                    "--tags",
                    "a=1",
                    "--tags=a=2,c=x=y",
                    "--resources=instance",
                    "--resources=volume",
                ],
                [t("a", "2"), t("c", "x=y")].into(),
                vec!["instance", "volume"],
                0.0,
                0,
            ),
            (
                vec![
                    "--tagging-controller-rate-limit=2.5",
                    "--tagging-controller-burst-limit=10",
                ],
                TagSet::new(),
                vec![],
                2.5,
                10,
            ),
        ];
        for (args, tags, resources, rate, burst) in ok {
            let o = parse(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert_eq!(o.tagging.tag_set(), tags, "{args:?}");
            assert_eq!(o.tagging.resources, resources, "{args:?}");
            assert_eq!(o.tagging.rate_limit, rate, "{args:?}");
            assert_eq!(o.tagging.burst_limit, burst, "{args:?}");
        }
        for bad in [
            "--tags=novalue",
            "--tags==x",
            "--tagging-controller-rate-limit=-1",
            "--tagging-controller-burst-limit=-1",
            "--nodeipam-controller-rate-limit=x",
        ] {
            let e = parse(&[bad]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(
                e.to_string().contains(bad.split('=').next().unwrap()),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn an_enabled_tagging_controller_needs_tags_and_resources() {
        let o = parse(&["--resources=instance"]).unwrap();
        assert!(o.tagging.check().unwrap_err().contains("--tags"));
        let o = parse(&["--tags=a=1"]).unwrap();
        assert!(o.tagging.check().unwrap_err().contains("--resources"));
        let o = parse(&["--tags=a=1", "--resources=instance"]).unwrap();
        assert!(o.tagging.check().is_ok());
    }

    #[test]
    fn nodeipam_flags_are_checked_against_the_allocator() {
        let o = parse(&["--dualstack=false", "--nodeipam-controller-rate-limit=0"]).unwrap();
        assert!(o.nodeipam.check(&o.cluster_cidr).is_ok());
        let o = parse(&["--nodeipam-controller-burst-limit=5"]).unwrap();
        assert!(o
            .nodeipam
            .check(&o.cluster_cidr)
            .unwrap_err()
            .contains("work queue"));
        let o = parse(&["--dualstack", "--cluster-cidr=10.0.0.0/16"]).unwrap();
        assert!(o
            .nodeipam
            .check(&o.cluster_cidr)
            .unwrap_err()
            .starts_with("--dualstack"));
        let o = parse(&["--dualstack", "--cluster-cidr=10.0.0.0/16,fd00::/56"]).unwrap();
        assert!(o.nodeipam.dualstack);
        assert!(o.nodeipam.check(&o.cluster_cidr).is_ok());
    }
}
