//! Resolving `[Global]`: clouds.yaml fills what the file leaves empty (`use-clouds`, as
//! upstream), then the credentials are combined and checked. Problems keep their lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use stratus_cloud_kit::gcfg::{name, ConfigErrors, ConfigProblem};

use super::validate::{Lined, RawConfig, RawGlobal};
use super::{Credentials, GlobalConfig, Interface, Named, OpenStackConfig, Secret, TlsOptions};

/// Where clouds.yaml is looked for when `clouds-file` and `OS_CLIENT_CONFIG_FILE` are unset
/// (openstacksdk's order; `~` is `$HOME`).
const CLOUDS_PATHS: &[&str] = &[
    "clouds.yaml",
    "~/.config/openstack/clouds.yaml",
    "/etc/openstack/clouds.yaml",
];

#[derive(Debug, Default, Deserialize)]
struct CloudsFile {
    #[serde(default)]
    clouds: BTreeMap<String, Cloud>,
}

#[derive(Debug, Default, Deserialize)]
struct Cloud {
    #[serde(default)]
    auth: CloudAuth,
    region_name: Option<String>,
    interface: Option<String>,
    endpoint_type: Option<String>,
    cacert: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    verify: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct CloudAuth {
    auth_url: Option<String>,
    username: Option<String>,
    user_id: Option<String>,
    password: Option<String>,
    project_id: Option<String>,
    project_name: Option<String>,
    domain_id: Option<String>,
    domain_name: Option<String>,
    project_domain_id: Option<String>,
    project_domain_name: Option<String>,
    user_domain_id: Option<String>,
    user_domain_name: Option<String>,
    application_credential_id: Option<String>,
    application_credential_name: Option<String>,
    application_credential_secret: Option<String>,
}

fn fill(slot: &mut Lined<String>, value: Option<String>, line: usize) {
    if slot.is_none() {
        *slot = value.filter(|v| !v.is_empty()).map(|v| (v, line));
    }
}

impl RawConfig {
    /// The final config, or every problem of `[Global]` (and of clouds.yaml).
    pub(super) fn resolve(
        mut self,
        read_file: &dyn Fn(&Path) -> std::io::Result<String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<OpenStackConfig, ConfigErrors> {
        let mut problems = Vec::new();
        if self.global.use_clouds {
            read_clouds(&mut self.global, read_file, env, &mut problems);
        }
        let global = resolve_global(&self.global, &mut problems);
        match global {
            Some(global) if problems.is_empty() => Ok(OpenStackConfig {
                global,
                networking: self.networking,
                load_balancer: self.load_balancer,
                load_balancer_classes: self.load_balancer_classes,
                router_id: self.router_id,
                metadata: self.metadata,
                block_storage: self.block_storage,
            }),
            _ => {
                problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
                Err(ConfigErrors(problems))
            }
        }
    }
}

fn problem(
    g: &RawGlobal,
    key: &str,
    line: Option<usize>,
    message: impl Into<String>,
) -> ConfigProblem {
    let p = ConfigProblem::new(message)
        .in_section("Global")
        .for_key(key);
    match line.or(g.header_line) {
        Some(l) => p.at_line(l),
        None => p,
    }
}

fn read_clouds(
    g: &mut RawGlobal,
    read_file: &dyn Fn(&Path) -> std::io::Result<String>,
    env: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<ConfigProblem>,
) {
    let line = g
        .clouds_file
        .as_ref()
        .map(|(_, l)| *l)
        .or(g.header_line)
        .unwrap_or(0);
    let candidates: Vec<PathBuf> = match (&g.clouds_file, env("OS_CLIENT_CONFIG_FILE")) {
        (Some((path, _)), _) => vec![path.clone()],
        (None, Some(path)) => vec![PathBuf::from(path)],
        (None, None) => CLOUDS_PATHS
            .iter()
            .map(|p| match (p.strip_prefix("~/"), env("HOME")) {
                (Some(rest), Some(home)) => Path::new(&home).join(rest),
                _ => PathBuf::from(p),
            })
            .collect(),
    };
    let mut unreadable = Vec::new();
    let Some((path, text)) = candidates.iter().find_map(|p| match read_file(p) {
        Ok(text) => Some((p.clone(), text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            unreadable.push(format!("cannot read {}: {e}", p.display()));
            None
        }
    }) else {
        let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        let why = match unreadable.is_empty() {
            true => format!("no clouds.yaml found (tried {})", tried.join(", ")),
            false => unreadable.join("; "),
        };
        problems.push(problem(g, "use-clouds", Some(line), why));
        return;
    };
    let file: CloudsFile = match serde_yaml::from_str(&text) {
        Ok(f) => f,
        Err(e) => {
            problems.push(problem(
                g,
                "clouds-file",
                Some(line),
                format!(
                    "{} is not a clouds.yaml: {}",
                    path.display(),
                    stratus_runtime::redact::yaml(&e)
                ),
            ));
            return;
        }
    };
    let wanted = g
        .cloud
        .as_ref()
        .map(|(c, _)| c.clone())
        .or_else(|| env("OS_CLOUD"));
    let cloud = match (&wanted, file.clouds.len()) {
        (Some(name), _) => file.clouds.get(name),
        (None, 1) => file.clouds.values().next(),
        (None, _) => None,
    };
    let Some(cloud) = cloud else {
        let names: Vec<String> = file.clouds.keys().take(10).map(|n| name(n)).collect();
        let what = match &wanted {
            Some(wanted) => format!("cloud {} is not in {}", name(wanted), path.display()),
            None => format!(
                "{} holds {} clouds; name one with `cloud` or OS_CLOUD",
                path.display(),
                file.clouds.len()
            ),
        };
        problems.push(problem(
            g,
            "cloud",
            Some(line),
            format!("{what} (clouds: {})", names.join(", ")),
        ));
        return;
    };
    let a = &cloud.auth;
    fill(&mut g.auth_url, a.auth_url.clone(), line);
    fill(&mut g.username, a.username.clone(), line);
    fill(&mut g.user_id, a.user_id.clone(), line);
    if g.password.is_none() {
        g.password = a.password.clone().map(|p| (Secret::new(p), line));
    }
    fill(&mut g.tenant_id, a.project_id.clone(), line);
    fill(&mut g.tenant_name, a.project_name.clone(), line);
    fill(&mut g.domain_id, a.domain_id.clone(), line);
    fill(&mut g.domain_name, a.domain_name.clone(), line);
    fill(&mut g.tenant_domain_id, a.project_domain_id.clone(), line);
    fill(
        &mut g.tenant_domain_name,
        a.project_domain_name.clone(),
        line,
    );
    fill(&mut g.user_domain_id, a.user_domain_id.clone(), line);
    fill(&mut g.user_domain_name, a.user_domain_name.clone(), line);
    fill(
        &mut g.app_cred_id,
        a.application_credential_id.clone(),
        line,
    );
    fill(
        &mut g.app_cred_name,
        a.application_credential_name.clone(),
        line,
    );
    if g.app_cred_secret.is_none() {
        g.app_cred_secret = a
            .application_credential_secret
            .clone()
            .map(|s| (Secret::new(s), line));
    }
    fill(&mut g.region, cloud.region_name.clone(), line);
    if g.interface.is_none() {
        g.interface = match cloud
            .interface
            .as_deref()
            .or(cloud.endpoint_type.as_deref())
        {
            Some("internal") | Some("internalURL") => Some(Interface::Internal),
            Some("admin") | Some("adminURL") => Some(Interface::Admin),
            _ => None,
        };
    }
    if g.ca_file.is_none() {
        g.ca_file = cloud.cacert.clone().map(|p| (p, line));
    }
    if g.cert_file.is_none() {
        g.cert_file = cloud.cert.clone().map(|p| (p, line));
    }
    if g.key_file.is_none() {
        g.key_file = cloud.key.clone().map(|p| (p, line));
    }
    if cloud.verify == Some(false) {
        g.tls_insecure = true;
    }
}

fn named(id: &Lined<String>, name: &Lined<String>) -> Option<Named> {
    id.as_ref()
        .map(|(v, _)| Named::Id(v.clone()))
        .or_else(|| name.as_ref().map(|(v, _)| Named::Name(v.clone())))
}

fn resolve_global(g: &RawGlobal, problems: &mut Vec<ConfigProblem>) -> Option<GlobalConfig> {
    let before = problems.len();
    let auth_url = match &g.auth_url {
        Some((url, _)) => Some(url.clone()),
        None => {
            problems.push(problem(
                g,
                "auth-url",
                None,
                "is required (Keystone's URL, e.g. https://keystone.example:5000/v3)",
            ));
            None
        }
    };
    let user = named(&g.user_id, &g.username);
    let user_domain = named(&g.user_domain_id, &g.user_domain_name)
        .or_else(|| named(&g.domain_id, &g.domain_name));
    let project_domain = named(&g.tenant_domain_id, &g.tenant_domain_name)
        .or_else(|| named(&g.domain_id, &g.domain_name));
    let needs_domain = |who: &Option<Named>, domain: &Option<Named>| {
        matches!(who, Some(Named::Name(_))) && domain.is_none()
    };
    let credentials = if let Some((secret, secret_line)) = &g.app_cred_secret {
        let credential = named(&g.app_cred_id, &g.app_cred_name);
        if credential.is_none() {
            problems.push(problem(
                g,
                "application-credential-secret",
                Some(*secret_line),
                "needs application-credential-id, or application-credential-name with the user",
            ));
        }
        if matches!(credential, Some(Named::Name(_))) && user.is_none() {
            problems.push(problem(
                g,
                "application-credential-name",
                g.app_cred_name.as_ref().map(|(_, l)| *l),
                "a named application credential needs its user (username or user-id)",
            ));
        }
        if needs_domain(&user, &user_domain) && matches!(credential, Some(Named::Name(_))) {
            problems.push(problem(g, "username", g.username.as_ref().map(|(_, l)| *l), "a user given by name needs its domain (user-domain-name, user-domain-id, domain-name or domain-id)"));
        }
        credential.map(|credential| Credentials::ApplicationCredential {
            credential,
            user: user.clone(),
            user_domain: user_domain.clone(),
            secret: secret.clone(),
        })
    } else {
        let password = g
            .password
            .as_ref()
            .map(|(p, _)| p.clone())
            .filter(|p| !p.is_empty());
        if password.is_none() {
            problems.push(problem(g, "password", g.password.as_ref().map(|(_, l)| *l), "is required with username or user-id (or use application-credential-id and -secret)"));
        }
        if user.is_none() {
            problems.push(problem(
                g,
                "username",
                None,
                "is required (or user-id, or an application credential)",
            ));
        }
        if needs_domain(&user, &user_domain) {
            problems.push(problem(g, "username", g.username.as_ref().map(|(_, l)| *l), "a user given by name needs its domain (user-domain-name, user-domain-id, domain-name or domain-id)"));
        }
        let project = named(&g.tenant_id, &g.tenant_name);
        if project.is_none() {
            problems.push(problem(g, "tenant-name", None, "is required with a password (or tenant-id): tokens are scoped to the cluster's project"));
        }
        if needs_domain(&project, &project_domain) {
            problems.push(problem(g, "tenant-name", g.tenant_name.as_ref().map(|(_, l)| *l), "a project given by name needs its domain (tenant-domain-name, tenant-domain-id, domain-name or domain-id)"));
        }
        match (user, password, project) {
            (Some(user), Some(password), Some(project)) => Some(Credentials::Password {
                user,
                user_domain,
                password,
                project,
                project_domain,
            }),
            _ => None,
        }
    };
    let client_cert = match (&g.cert_file, &g.key_file) {
        (Some((c, _)), Some((k, _))) => Some((c.clone(), k.clone())),
        (Some((_, l)), None) => {
            problems.push(problem(g, "cert-file", Some(*l), "needs key-file"));
            None
        }
        (None, Some((_, l))) => {
            problems.push(problem(g, "key-file", Some(*l), "needs cert-file"));
            None
        }
        (None, None) => None,
    };
    if problems.len() > before {
        return None;
    }
    Some(GlobalConfig {
        auth_url: auth_url?,
        credentials: credentials?,
        region: g.region.as_ref().map(|(r, _)| r.clone()),
        interface: g.interface.unwrap_or_default(),
        tls: TlsOptions {
            ca_file: g.ca_file.as_ref().map(|(p, _)| p.clone()),
            ca_pem: None,
            client_cert,
            insecure: g.tls_insecure,
        },
    })
}
