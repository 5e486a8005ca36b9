//! Validation: raw gcfg sections to the checked (not yet resolved) config, every problem with its
//! line. Credentials are resolved afterwards (`clouds.rs`), since clouds.yaml may fill them in.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use stratus_cloud::Cidr;
use stratus_cloud_kit::gcfg::schema::section_label;
use stratus_cloud_kit::gcfg::{
    enum_value, group, ConfigProblem, KeySchema, RawSection, Section, SectionKind,
};
use stratus_runtime::duration::parse_go_duration;

use super::{
    BlockStorageConfig, Interface, LbMethod, LoadBalancerClass, LoadBalancerConfig, MetadataConfig,
    MetadataSource, NetworkingConfig, Secret,
};

const GLOBAL: &str = "Global";
const NETWORKING: &str = "Networking";
const LOAD_BALANCER: &str = "LoadBalancer";
const LOAD_BALANCER_CLASS: &str = "LoadBalancerClass";
const ROUTE: &str = "Route";
const METADATA: &str = "Metadata";
const BLOCK_STORAGE: &str = "BlockStorage";

const KINDS: &[SectionKind] = &[
    SectionKind {
        name: GLOBAL,
        named: false,
    },
    SectionKind {
        name: NETWORKING,
        named: false,
    },
    SectionKind {
        name: LOAD_BALANCER,
        named: false,
    },
    SectionKind {
        name: LOAD_BALANCER_CLASS,
        named: true,
    },
    SectionKind {
        name: ROUTE,
        named: false,
    },
    SectionKind {
        name: METADATA,
        named: false,
    },
    SectionKind {
        name: BLOCK_STORAGE,
        named: false,
    },
];

/// Keys of `[Global]`, spelled as upstream.
pub(super) const GLOBAL_KEYS: &[&str] = &[
    "auth-url",
    "username",
    "user-id",
    "password",
    "tenant-id",
    "tenant-name",
    "domain-id",
    "domain-name",
    "tenant-domain-id",
    "tenant-domain-name",
    "user-domain-id",
    "user-domain-name",
    "region",
    "os-endpoint-type",
    "ca-file",
    "cert-file",
    "key-file",
    "tls-insecure",
    "use-clouds",
    "clouds-file",
    "cloud",
    "application-credential-id",
    "application-credential-name",
    "application-credential-secret",
    "trust-id",
    "trustee-id",
    "trustee-password",
];

pub(super) const NETWORKING_KEYS: &[&str] = &[
    "ipv6-support-disabled",
    "public-network-name",
    "internal-network-name",
    "address-sort-order",
];

pub(super) const LOAD_BALANCER_KEYS: &[&str] = &[
    "enabled",
    "lb-version",
    "use-octavia",
    "subnet-id",
    "member-subnet-id",
    "network-id",
    "floating-network-id",
    "floating-subnet-id",
    "floating-subnet",
    "floating-subnet-tags",
    "lb-method",
    "lb-provider",
    "create-monitor",
    "monitor-delay",
    "monitor-timeout",
    "monitor-max-retries",
    "monitor-max-retries-down",
    "manage-security-groups",
    "internal-lb",
    "node-selector",
    "cascade-delete",
    "flavor-id",
    "availability-zone",
    "enable-ingress-hostname",
    "ingress-hostname-suffix",
    "max-shared-lb",
    "container-store",
    "provider-requires-serial-api-calls",
    "default-tls-container-ref",
];

pub(super) const LOAD_BALANCER_CLASS_KEYS: &[&str] = &[
    "floating-network-id",
    "floating-subnet-id",
    "floating-subnet",
    "floating-subnet-tags",
    "network-id",
    "subnet-id",
    "member-subnet-id",
];

pub(super) const ROUTE_KEYS: &[&str] = &["router-id"];
pub(super) const METADATA_KEYS: &[&str] = &["search-order", "request-timeout"];
pub(super) const BLOCK_STORAGE_KEYS: &[&str] = &[
    "node-volume-attach-limit",
    "rescan-on-resize",
    "ignore-volume-az",
    "ignore-volume-microversion",
];

/// Keys that may be given more than once (each adds a value).
const REPEATABLE: &[&str] = &["public-network-name", "internal-network-name"];

/// Every key of every section, for "it belongs in [X]" hints.
const ALL: &[(&str, &[&str])] = &[
    (GLOBAL, GLOBAL_KEYS),
    (NETWORKING, NETWORKING_KEYS),
    (LOAD_BALANCER, LOAD_BALANCER_KEYS),
    (ROUTE, ROUTE_KEYS),
    (METADATA, METADATA_KEYS),
    (BLOCK_STORAGE, BLOCK_STORAGE_KEYS),
];

/// A value with the line it is on.
pub(super) type Lined<T> = Option<(T, usize)>;

/// `[Global]` as written: credentials are combined and checked once clouds.yaml was read.
#[derive(Debug, Clone, Default)]
pub(super) struct RawGlobal {
    pub header_line: Option<usize>,
    pub auth_url: Lined<String>,
    pub username: Lined<String>,
    pub user_id: Lined<String>,
    pub password: Option<(Secret, usize)>,
    pub tenant_id: Lined<String>,
    pub tenant_name: Lined<String>,
    pub domain_id: Lined<String>,
    pub domain_name: Lined<String>,
    pub tenant_domain_id: Lined<String>,
    pub tenant_domain_name: Lined<String>,
    pub user_domain_id: Lined<String>,
    pub user_domain_name: Lined<String>,
    pub region: Lined<String>,
    pub interface: Option<Interface>,
    pub ca_file: Lined<PathBuf>,
    pub cert_file: Lined<PathBuf>,
    pub key_file: Lined<PathBuf>,
    pub tls_insecure: bool,
    pub use_clouds: bool,
    pub clouds_file: Lined<PathBuf>,
    pub cloud: Lined<String>,
    pub app_cred_id: Lined<String>,
    pub app_cred_name: Lined<String>,
    pub app_cred_secret: Option<(Secret, usize)>,
}

/// The config with every section checked; `[Global]` still to be resolved.
#[derive(Debug, Clone)]
pub(super) struct RawConfig {
    pub global: RawGlobal,
    pub networking: NetworkingConfig,
    pub load_balancer: LoadBalancerConfig,
    pub load_balancer_classes: BTreeMap<String, LoadBalancerClass>,
    pub router_id: Option<String>,
    pub metadata: MetadataConfig,
    pub block_storage: BlockStorageConfig,
}

fn hint(key: &str, schema: &[&str]) -> String {
    ALL.iter()
        .find(|(_, keys)| *keys != schema && keys.iter().any(|k| k.eq_ignore_ascii_case(key)))
        .map(|(section, _)| format!(" (it belongs in [{section}])"))
        .unwrap_or_default()
}

fn keyed<'a>(
    label: String,
    raws: &[&'a RawSection],
    schema: &[&'static str],
    problems: &mut Vec<ConfigProblem>,
) -> Section<'a> {
    let keys = KeySchema {
        keys: schema,
        repeatable: REPEATABLE,
    };
    Section::keyed(label, raws, keys, |k| hint(k, schema), problems)
}

/// The sections of one unnamed kind, merged.
fn section<'a>(
    groups: &[stratus_cloud_kit::gcfg::Group<'a>],
    kind: &'static str,
    schema: &[&'static str],
    problems: &mut Vec<ConfigProblem>,
) -> Section<'a> {
    let raws: Vec<&RawSection> = groups
        .iter()
        .filter(|g| g.kind.name == kind)
        .flat_map(|g| g.raws.iter().copied())
        .collect();
    keyed(kind.to_owned(), &raws, schema, problems)
}

/// Turns raw sections into the checked config, appending every problem to `problems`.
pub(super) fn validate(sections: &[RawSection], problems: &mut Vec<ConfigProblem>) -> RawConfig {
    let groups = group(sections, KINDS, problems);
    let global = global(&section(&groups, GLOBAL, GLOBAL_KEYS, problems), problems);
    let networking = networking(
        &section(&groups, NETWORKING, NETWORKING_KEYS, problems),
        problems,
    );
    let load_balancer = load_balancer(
        &section(&groups, LOAD_BALANCER, LOAD_BALANCER_KEYS, problems),
        problems,
    );
    let mut load_balancer_classes = BTreeMap::new();
    for g in groups.iter().filter(|g| g.kind.name == LOAD_BALANCER_CLASS) {
        let name = g.name.clone().unwrap_or_default();
        let s = keyed(
            section_label(LOAD_BALANCER_CLASS, Some(&name)),
            &g.raws,
            LOAD_BALANCER_CLASS_KEYS,
            problems,
        );
        if name.trim().is_empty() {
            problems.push(s.problem(
                "",
                s.header_line,
                "a load balancer class needs a name: [LoadBalancerClass \"name\"]",
            ));
        }
        load_balancer_classes.insert(name, load_balancer_class(&s, problems));
    }
    let route = section(&groups, ROUTE, ROUTE_KEYS, problems);
    let router_id = route.string("router-id", problems);
    let metadata = metadata(
        &section(&groups, METADATA, METADATA_KEYS, problems),
        problems,
    );
    let block_storage = block_storage(
        &section(&groups, BLOCK_STORAGE, BLOCK_STORAGE_KEYS, problems),
        problems,
    );
    RawConfig {
        global,
        networking,
        load_balancer,
        load_balancer_classes,
        router_id,
        metadata,
        block_storage,
    }
}

fn lined(s: &Section<'_>, key: &'static str, problems: &mut Vec<ConfigProblem>) -> Lined<String> {
    s.text(key, problems)
        .map(|(v, line)| (v.trim().to_owned(), line))
        .filter(|(v, _)| !v.is_empty())
}

fn global(s: &Section<'_>, problems: &mut Vec<ConfigProblem>) -> RawGlobal {
    for key in ["trust-id", "trustee-id", "trustee-password"] {
        if let Some(entry) = s.first(key) {
            problems.push(s.problem(
                key,
                Some(entry.line),
                "trust-based authentication is not supported: use a password or an application credential",
            ));
        }
    }
    let auth_url = lined(s, "auth-url", problems).and_then(|(url, line)| {
        if url.starts_with("http://") || url.starts_with("https://") {
            Some((url, line))
        } else {
            problems.push(s.problem("auth-url", Some(line), "not an http:// or https:// URL"));
            None
        }
    });
    let secret = |key: &'static str, problems: &mut Vec<ConfigProblem>| {
        // Not trimmed: a password may start or end with spaces.
        s.text(key, problems)
            .map(|(v, line)| (Secret::new(v), line))
    };
    let path = |key: &'static str, problems: &mut Vec<ConfigProblem>| {
        lined(s, key, problems).map(|(v, line)| (PathBuf::from(v), line))
    };
    let interface = s.checked("os-endpoint-type", problems, |v| {
        enum_value(
            v.trim().trim_end_matches("URL"),
            &[
                ("public", Interface::Public),
                ("internal", Interface::Internal),
                ("admin", Interface::Admin),
            ],
        )
    });
    RawGlobal {
        header_line: s.header_line,
        auth_url,
        username: lined(s, "username", problems),
        user_id: lined(s, "user-id", problems),
        password: secret("password", problems),
        tenant_id: lined(s, "tenant-id", problems),
        tenant_name: lined(s, "tenant-name", problems),
        domain_id: lined(s, "domain-id", problems),
        domain_name: lined(s, "domain-name", problems),
        tenant_domain_id: lined(s, "tenant-domain-id", problems),
        tenant_domain_name: lined(s, "tenant-domain-name", problems),
        user_domain_id: lined(s, "user-domain-id", problems),
        user_domain_name: lined(s, "user-domain-name", problems),
        region: lined(s, "region", problems),
        interface,
        ca_file: path("ca-file", problems),
        cert_file: path("cert-file", problems),
        key_file: path("key-file", problems),
        tls_insecure: s.boolean("tls-insecure", problems),
        use_clouds: s.boolean("use-clouds", problems),
        clouds_file: path("clouds-file", problems),
        cloud: lined(s, "cloud", problems),
        app_cred_id: lined(s, "application-credential-id", problems),
        app_cred_name: lined(s, "application-credential-name", problems),
        app_cred_secret: secret("application-credential-secret", problems),
    }
}

/// Every value of a repeatable key; values may also be comma-separated.
fn names(s: &Section<'_>, key: &'static str) -> Vec<String> {
    s.all(key)
        .iter()
        .filter_map(|e| e.value.as_deref())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

fn networking(s: &Section<'_>, problems: &mut Vec<ConfigProblem>) -> NetworkingConfig {
    let address_sort_order = s
        .checked("address-sort-order", problems, |v| {
            v.split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(|c| {
                    Cidr::parse(c).map_err(|_| {
                        "not a comma-separated list of CIDRs (want address/prefix, e.g. 10.244.0.0/16 or fd00:10:244::/56)".to_owned()
                    })
                })
                .collect::<Result<Vec<Cidr>, String>>()
        })
        .unwrap_or_default();
    NetworkingConfig {
        ipv6_support_disabled: s.boolean("ipv6-support-disabled", problems),
        public_network_names: names(s, "public-network-name"),
        internal_network_names: names(s, "internal-network-name"),
        address_sort_order,
    }
}

fn duration(
    s: &Section<'_>,
    key: &'static str,
    problems: &mut Vec<ConfigProblem>,
) -> Option<Duration> {
    s.checked(key, problems, |v| {
        parse_go_duration(v.trim()).map_err(|_| {
            "not a duration (a number with a unit: ns, us, ms, s, m or h, e.g. 5s)".to_owned()
        })
    })
}

fn number(
    s: &Section<'_>,
    key: &'static str,
    max: u32,
    problems: &mut Vec<ConfigProblem>,
) -> Option<u32> {
    s.checked(key, problems, |v| match v.trim().parse::<u32>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!("not a whole number from 0 to {max}")),
    })
}

fn one_of(
    s: &Section<'_>,
    key: &'static str,
    choices: &[&'static str],
    problems: &mut Vec<ConfigProblem>,
) -> Option<String> {
    s.checked(key, problems, |v| {
        let pairs: Vec<(&str, &str)> = choices.iter().map(|c| (*c, *c)).collect();
        enum_value(v.trim(), &pairs).map(str::to_owned)
    })
}

fn load_balancer(s: &Section<'_>, problems: &mut Vec<ConfigProblem>) -> LoadBalancerConfig {
    let d = LoadBalancerConfig::default();
    if let Some((v, line)) = lined(s, "lb-version", problems) {
        if v != "v2" {
            problems.push(s.problem(
                "lb-version",
                Some(line),
                "not supported: only v2 (Octavia) is",
            ));
        }
    }
    let lb_method = s
        .checked("lb-method", problems, |v| {
            enum_value(
                v.trim(),
                &[
                    ("ROUND_ROBIN", LbMethod::RoundRobin),
                    ("LEAST_CONNECTIONS", LbMethod::LeastConnections),
                    ("SOURCE_IP", LbMethod::SourceIp),
                    ("SOURCE_IP_PORT", LbMethod::SourceIpPort),
                ],
            )
        })
        .unwrap_or(d.lb_method);
    let node_selector = s
        .checked("node-selector", problems, |v| {
            v.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|pair| {
                    let (k, val) = pair.split_once('=').unwrap_or((pair, ""));
                    if k.trim().is_empty() {
                        Err("a label has an empty key (write key=value,key2=value2)".to_owned())
                    } else {
                        Ok((k.trim().to_owned(), val.trim().to_owned()))
                    }
                })
                .collect::<Result<BTreeMap<String, String>, String>>()
        })
        .unwrap_or_default();
    let monitor_delay = duration(s, "monitor-delay", problems).unwrap_or(d.monitor_delay);
    let monitor_timeout = duration(s, "monitor-timeout", problems).unwrap_or(d.monitor_timeout);
    if monitor_timeout > monitor_delay {
        let line = s
            .first("monitor-timeout")
            .or(s.first("monitor-delay"))
            .map(|e| e.line);
        problems.push(s.problem(
            "monitor-timeout",
            line,
            "is longer than monitor-delay; Octavia refuses such a monitor",
        ));
    }
    LoadBalancerConfig {
        enabled: s.boolean_or("enabled", d.enabled, problems),
        subnet_id: s.string("subnet-id", problems),
        member_subnet_id: s.string("member-subnet-id", problems),
        network_id: s.string("network-id", problems),
        floating_network_id: s.string("floating-network-id", problems),
        floating_subnet_id: s.string("floating-subnet-id", problems),
        floating_subnet: s.string("floating-subnet", problems),
        floating_subnet_tags: s.string("floating-subnet-tags", problems),
        lb_method,
        lb_provider: one_of(s, "lb-provider", &["amphora", "octavia", "ovn"], problems)
            .unwrap_or(d.lb_provider),
        create_monitor: s.boolean("create-monitor", problems),
        monitor_delay,
        monitor_timeout,
        monitor_max_retries: number(s, "monitor-max-retries", 10, problems)
            .unwrap_or(d.monitor_max_retries),
        monitor_max_retries_down: number(s, "monitor-max-retries-down", 10, problems)
            .unwrap_or(d.monitor_max_retries_down),
        manage_security_groups: s.boolean("manage-security-groups", problems),
        internal_lb: s.boolean("internal-lb", problems),
        node_selector,
        cascade_delete: s.boolean_or("cascade-delete", d.cascade_delete, problems),
        flavor_id: s.string("flavor-id", problems),
        availability_zone: s.string("availability-zone", problems),
        enable_ingress_hostname: s.boolean("enable-ingress-hostname", problems),
        ingress_hostname_suffix: s
            .string("ingress-hostname-suffix", problems)
            .unwrap_or(d.ingress_hostname_suffix),
        max_shared_lb: number(s, "max-shared-lb", 1000, problems).unwrap_or(d.max_shared_lb),
        container_store: one_of(s, "container-store", &["barbican", "external"], problems)
            .unwrap_or(d.container_store),
        provider_requires_serial_api_calls: s
            .boolean("provider-requires-serial-api-calls", problems),
        default_tls_container_ref: s.string("default-tls-container-ref", problems),
    }
}

fn load_balancer_class(s: &Section<'_>, problems: &mut Vec<ConfigProblem>) -> LoadBalancerClass {
    LoadBalancerClass {
        floating_network_id: s.string("floating-network-id", problems),
        floating_subnet_id: s.string("floating-subnet-id", problems),
        floating_subnet: s.string("floating-subnet", problems),
        floating_subnet_tags: s.string("floating-subnet-tags", problems),
        network_id: s.string("network-id", problems),
        subnet_id: s.string("subnet-id", problems),
        member_subnet_id: s.string("member-subnet-id", problems),
    }
}

fn metadata(s: &Section<'_>, problems: &mut Vec<ConfigProblem>) -> MetadataConfig {
    let d = MetadataConfig::default();
    let search_order = s
        .checked("search-order", problems, |v| {
            let order = v
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| {
                    enum_value(
                        p,
                        &[
                            ("configDrive", MetadataSource::ConfigDrive),
                            ("metadataService", MetadataSource::MetadataService),
                        ],
                    )
                })
                .collect::<Result<Vec<_>, String>>()?;
            match order.len() {
                1 | 2 if order.first() != order.get(1) => Ok(order),
                _ => Err("must name configDrive and/or metadataService once each".to_owned()),
            }
        })
        .unwrap_or(d.search_order);
    let request_timeout = duration(s, "request-timeout", problems)
        .filter(|d| !d.is_zero())
        .unwrap_or(d.request_timeout);
    MetadataConfig {
        search_order,
        request_timeout,
    }
}

fn block_storage(s: &Section<'_>, problems: &mut Vec<ConfigProblem>) -> BlockStorageConfig {
    let limit = s.checked("node-volume-attach-limit", problems, |v| {
        match v.trim().parse::<u32>() {
            Ok(n) if (1..=256).contains(&n) => Ok(n),
            _ => Err("not a whole number from 1 to 256".to_owned()),
        }
    });
    BlockStorageConfig {
        node_volume_attach_limit: limit,
        rescan_on_resize: s.boolean("rescan-on-resize", problems),
        ignore_volume_az: s.boolean("ignore-volume-az", problems),
        ignore_volume_microversion: s.boolean("ignore-volume-microversion", problems),
    }
}
