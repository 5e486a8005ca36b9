//! Which route tables hold the cluster's routes, as server-side DescribeRouteTables filters.

use aws_sdk_ec2::types::Filter;

use crate::config::CloudConfig;
use stratus_aws_api::ec2::filter;

/// The route tables the route controller keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableScope {
    /// `RouteTableID` from `[Global]`: only that table, as upstream.
    Id(String),
    /// Every table tagged `kubernetes.io/cluster/<id>` (any value) and, with the legacy tag,
    /// every table tagged `KubernetesCluster=<id>`; only in `vpc` when `VPC` is configured.
    ClusterTag {
        /// The cluster ID.
        id: String,
        /// Also the legacy `KubernetesCluster` tag.
        legacy: bool,
        /// Only tables of this VPC.
        vpc: Option<String>,
    },
}

impl TableScope {
    /// The scope a config gives; `None` when it names neither a table nor a cluster ID (listing
    /// every table of the account or VPC would adopt tables that are not the cluster's).
    pub fn from_config(config: &CloudConfig) -> Option<TableScope> {
        if let Some(id) = config.global.route_table_id.as_deref() {
            return Some(TableScope::Id(id.to_string()));
        }
        Some(TableScope::ClusterTag {
            id: config.cluster_id()?.to_string(),
            legacy: config.uses_legacy_cluster_tag(),
            vpc: config.global.vpc.clone(),
        })
    }

    /// The filter sets, one DescribeRouteTables listing each (two only with the legacy tag).
    pub fn listings(&self) -> Vec<Vec<Filter>> {
        match self {
            TableScope::Id(id) => vec![vec![filter("route-table-id", [id.clone()])]],
            TableScope::ClusterTag { id, legacy, vpc } => {
                let vpc: Vec<Filter> = vpc.iter().map(|v| filter("vpc-id", [v.clone()])).collect();
                let mut tag = vec![filter(
                    "tag-key",
                    [stratus_cloud::tags::cluster_tag_key(id)],
                )];
                tag.extend(vpc.iter().cloned());
                let mut out = vec![tag];
                if *legacy {
                    let mut legacy = vec![filter("tag:KubernetesCluster", [id.clone()])];
                    legacy.extend(vpc);
                    out.push(legacy);
                }
                out
            }
        }
    }

    /// The scope in words, for errors.
    pub fn describe(&self) -> String {
        match self {
            TableScope::Id(id) => format!("route table {id} (RouteTableID) does not exist"),
            TableScope::ClusterTag { id, legacy, vpc } => format!(
                "no route table is tagged kubernetes.io/cluster/{id}{}{}",
                if *legacy {
                    format!(" or KubernetesCluster={id}")
                } else {
                    String::new()
                },
                vpc.as_ref()
                    .map(|v| format!(" in VPC {v}"))
                    .unwrap_or_default()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(text: &str) -> Option<TableScope> {
        TableScope::from_config(&CloudConfig::parse(text).unwrap())
    }

    fn names(filters: &[Filter]) -> Vec<(String, Vec<String>)> {
        filters
            .iter()
            .map(|f| (f.name().unwrap().to_string(), f.values().to_vec()))
            .collect()
    }

    #[test]
    fn configured_table_wins() {
        let s = scope("[Global]\nKubernetesClusterID = c1\nRouteTableID = rtb-1\n").unwrap();
        assert_eq!(s, TableScope::Id("rtb-1".into()));
        let l = s.listings();
        assert_eq!(l.len(), 1);
        assert_eq!(
            names(&l[0]),
            vec![("route-table-id".to_string(), vec!["rtb-1".to_string()])]
        );
        assert!(s.describe().contains("rtb-1"));
    }

    #[test]
    fn cluster_tag_with_vpc_and_legacy() {
        let s = scope("[Global]\nKubernetesClusterID = c1\nVPC = vpc-9\n").unwrap();
        let l = s.listings();
        assert_eq!(l.len(), 1);
        assert_eq!(
            names(&l[0]),
            vec![
                (
                    "tag-key".to_string(),
                    vec!["kubernetes.io/cluster/c1".to_string()]
                ),
                ("vpc-id".to_string(), vec!["vpc-9".to_string()]),
            ]
        );
        let s = scope("[Global]\nKubernetesClusterTag = old\n").unwrap();
        let l = s.listings();
        assert_eq!(l.len(), 2);
        assert_eq!(
            names(&l[1]),
            vec![("tag:KubernetesCluster".to_string(), vec!["old".to_string()])]
        );
        assert!(
            s.describe().contains("KubernetesCluster=old"),
            "{}",
            s.describe()
        );
    }

    #[test]
    fn nothing_to_scope_by_means_no_routes() {
        assert_eq!(scope("[Global]\nVPC = vpc-1\n"), None);
        assert_eq!(scope(""), None);
    }
}
