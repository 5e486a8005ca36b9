//! Which cloud to ask: `--cloud-provider` when given, else the one whose settings the
//! environment holds. Deckhouse runs one image per module and passes no provider flag, only the
//! cloud's own variables (AWS: `AWS_REGION` and keys; OpenStack: `OS_*`; DVP:
//! `DVP_KUBERNETES_CONFIG_BASE64`), so those variables choose.

use clap::ValueEnum;

/// Which cloud to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CloudProvider {
    /// Amazon EC2.
    Aws,
    /// OpenStack (settings from `OS_*`, `CLUSTER_UUID`, `MODULE_CONFIG`).
    Openstack,
    /// DVP (settings from `DVP_KUBERNETES_CONFIG_BASE64`, `DVP_NAMESPACE`, `CLUSTER_UUID`).
    Dvp,
}

impl CloudProvider {
    /// The `--cloud-provider` value.
    pub fn name(self) -> &'static str {
        match self {
            CloudProvider::Aws => "aws",
            CloudProvider::Openstack => "openstack",
            CloudProvider::Dvp => "dvp",
        }
    }
}

/// The variables that tell each cloud, in the order they are looked at.
pub const SIGNS: &[(CloudProvider, &[&str])] = &[
    (
        CloudProvider::Aws,
        &[
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_ACCESS_KEY_ID",
            "AWS_ROLE_ARN",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
        ],
    ),
    (CloudProvider::Openstack, &["OS_AUTH_URL", "OS_CLOUD"]),
    (CloudProvider::Dvp, &["DVP_KUBERNETES_CONFIG_BASE64"]),
];

/// The cloud and how it was chosen (for the log and for error messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// The cloud.
    pub cloud: CloudProvider,
    /// `--cloud-provider=aws`, or `aws (from AWS_REGION)`.
    pub how: String,
}

/// The cloud `flag` names, or the only one whose variables `lookup` finds (set and not blank).
pub fn choose(
    flag: Option<CloudProvider>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Chosen, String> {
    if let Some(cloud) = flag {
        return Ok(Chosen {
            cloud,
            how: format!("--cloud-provider={}", cloud.name()),
        });
    }
    let set = |name: &str| lookup(name).is_some_and(|v| !v.trim().is_empty());
    let found: Vec<(CloudProvider, &str)> = SIGNS
        .iter()
        .filter_map(|(cloud, names)| {
            names
                .iter()
                .find(|name| set(name))
                .map(|name| (*cloud, *name))
        })
        .collect();
    match found.as_slice() {
        [(cloud, variable)] => Ok(Chosen {
            cloud: *cloud,
            how: format!("{} (from {variable})", cloud.name()),
        }),
        [] => Err(format!(
            "no cloud to ask: pass --cloud-provider (aws, openstack or dvp) or set the variables \
             of one cloud ({})",
            SIGNS
                .iter()
                .map(|(cloud, names)| format!("{}: {}", cloud.name(), names.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        )),
        many => Err(format!(
            "the environment holds the settings of more than one cloud ({}); pass \
             --cloud-provider to choose",
            many.iter()
                .map(|(cloud, variable)| format!("{} from {variable}", cloud.name()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn each_module_environment_chooses_its_cloud() {
        // What Deckhouse gives each module's discoverer (credentials elided).
        type Case = (
            &'static [(&'static str, &'static str)],
            CloudProvider,
            &'static str,
        );
        let cases: &[Case] = &[
            (
                &[
                    ("AWS_ACCESS_KEY_ID", "k"),
                    ("AWS_SECRET_ACCESS_KEY", "s"),
                    ("AWS_REGION", "eu-central-1"),
                ],
                CloudProvider::Aws,
                "aws (from AWS_REGION)",
            ),
            (
                &[
                    ("OS_AUTH_URL", "https://keystone/v3"),
                    ("OS_USERNAME", "u"),
                    ("CLUSTER_UUID", "c"),
                ],
                CloudProvider::Openstack,
                "openstack (from OS_AUTH_URL)",
            ),
            (
                &[
                    ("DVP_KUBERNETES_CONFIG_BASE64", "YQ=="),
                    ("DVP_NAMESPACE", "ns"),
                ],
                CloudProvider::Dvp,
                "dvp (from DVP_KUBERNETES_CONFIG_BASE64)",
            ),
        ];
        for (vars, cloud, how) in cases {
            let lookup = |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            };
            let chosen = choose(None, &lookup).unwrap();
            assert_eq!(chosen.cloud, *cloud);
            assert_eq!(chosen.how, *how);
        }
    }

    #[test]
    fn the_flag_wins_over_the_environment() {
        let chosen = choose(
            Some(CloudProvider::Dvp),
            &env(&[("AWS_REGION", "us-east-1")]),
        )
        .unwrap();
        assert_eq!(chosen.cloud, CloudProvider::Dvp);
        assert_eq!(chosen.how, "--cloud-provider=dvp");
    }

    #[test]
    fn none_or_two_clouds_are_refused_with_the_variables_named() {
        let err = choose(None, &env(&[("AWS_REGION", " ")])).unwrap_err();
        for name in [
            "--cloud-provider",
            "AWS_REGION",
            "OS_AUTH_URL",
            "DVP_KUBERNETES_CONFIG_BASE64",
        ] {
            assert!(err.contains(name), "{name}: {err}");
        }
        let err = choose(
            None,
            &env(&[("AWS_ACCESS_KEY_ID", "k"), ("OS_AUTH_URL", "u")]),
        )
        .unwrap_err();
        assert!(err.contains("aws from AWS_ACCESS_KEY_ID"), "{err}");
        assert!(err.contains("openstack from OS_AUTH_URL"), "{err}");
        assert!(err.contains("--cloud-provider"), "{err}");
    }
}
