//! Keystone's admin API as the environment uses it (`Setup`): an admin token (renewed when it
//! expires), and the domain, project, user, role assignment and catalog entries each environment
//! makes.

use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::env::{CCM_USER, DOMAIN, PROJECT};
use crate::core::util::HttpClient;
use crate::tools::keystone::{ADMIN, REGION};

/// The ids made for the CCM.
pub(super) struct TenantIds {
    pub(super) project_id: String,
    pub(super) user_id: String,
}

/// Keystone's admin API, with an admin token.
pub(super) struct Setup {
    url: String,
    token: std::sync::Mutex<String>,
    admin_password: String,
    pub(super) admin_project: String,
    http: HttpClient,
}

impl Setup {
    pub(super) async fn new(url: &str, admin_password: &str) -> Result<Setup> {
        let http = HttpClient::new();
        let (token, admin_project) = Setup::login(&http, url, admin_password).await?;
        Ok(Setup {
            url: url.to_owned(),
            token: std::sync::Mutex::new(token),
            admin_password: admin_password.to_owned(),
            admin_project,
            http,
        })
    }

    /// An admin token and the admin project's id.
    async fn login(http: &HttpClient, url: &str, admin_password: &str) -> Result<(String, String)> {
        let body = json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": ADMIN, "domain": {"id": "default"}, "password": admin_password}}},
        "scope": {"project": {"name": ADMIN, "domain": {"id": "default"}}}}});
        let (status, headers, answer) = http
            .exchange(
                http::Method::POST,
                &format!("{url}/auth/tokens?nocatalog"),
                &[],
                Some(body.to_string().into_bytes()),
            )
            .await?;
        anyhow::ensure!(
            status == http::StatusCode::CREATED,
            "keystone admin login: {status}: {}",
            String::from_utf8_lossy(&answer)
        );
        let token = headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .context("keystone admin login: no X-Subject-Token")?
            .to_owned();
        let answer: Value = serde_json::from_slice(&answer)?;
        let project = answer["token"]["project"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        Ok((token, project))
    }

    /// One admin API call; the answer's JSON (null for 204). A 401 (the admin token expired:
    /// environments may ask for tokens of a few seconds) logs in again and retries once.
    pub(super) async fn call(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let url = format!("{}{path}", self.url);
        let body = body.map(|b| b.to_string().into_bytes());
        let mut attempt = 0;
        let (status, answer) = loop {
            let token = self.token.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let (status, _, answer) = self
                .http
                .exchange(
                    method.clone(),
                    &url,
                    &[("x-auth-token", &token)],
                    body.clone(),
                )
                .await?;
            if status == http::StatusCode::UNAUTHORIZED && attempt == 0 {
                attempt += 1;
                let (fresh, _) = Setup::login(&self.http, &self.url, &self.admin_password).await?;
                *self.token.lock().unwrap_or_else(|e| e.into_inner()) = fresh;
                continue;
            }
            break (status, answer);
        };
        anyhow::ensure!(
            status.is_success(),
            "keystone {method} {path}: {status}: {}",
            String::from_utf8_lossy(&answer)
        );
        if answer.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&answer)
            .with_context(|| format!("keystone {method} {path}: unreadable answer"))
    }

    pub(super) async fn tenant(&self, password: &str) -> Result<TenantIds> {
        use http::Method;
        let domain = self
            .call(
                Method::POST,
                "/domains",
                Some(json!({"domain": {"name": DOMAIN, "enabled": true}})),
            )
            .await?;
        let domain_id = domain["domain"]["id"]
            .as_str()
            .context("domain id")?
            .to_owned();
        let project = self
            .call(
                Method::POST,
                "/projects",
                Some(
                    json!({"project": {"name": PROJECT, "domain_id": domain_id, "enabled": true}}),
                ),
            )
            .await?;
        let project_id = project["project"]["id"]
            .as_str()
            .context("project id")?
            .to_owned();
        let user = self
            .call(
                Method::POST,
                "/users",
                Some(json!({"user": {"name": CCM_USER, "domain_id": domain_id,
                "password": password, "default_project_id": project_id, "enabled": true}})),
            )
            .await?;
        let user_id = user["user"]["id"].as_str().context("user id")?.to_owned();
        let roles = self.call(Method::GET, "/roles?name=member", None).await?;
        let role = roles["roles"][0]["id"]
            .as_str()
            .context("role member missing")?
            .to_owned();
        self.call(
            Method::PUT,
            &format!("/projects/{project_id}/users/{user_id}/roles/{role}"),
            None,
        )
        .await?;
        Ok(TenantIds {
            project_id,
            user_id,
        })
    }

    /// Registers the simulated services at `endpoint` and moves Keystone's endpoints to
    /// `identity`.
    pub(super) async fn catalog(&self, endpoint: &str, identity: &str) -> Result<()> {
        use http::Method;
        let services = [
            ("compute", "nova", format!("{endpoint}/compute/v2.1")),
            ("network", "neutron", format!("{endpoint}/network")),
            (
                "load-balancer",
                "octavia",
                format!("{endpoint}/load-balancer"),
            ),
            (
                "block-storage",
                "cinder",
                format!("{endpoint}/volume/v3/$(project_id)s"),
            ),
            (
                "volumev3",
                "cinderv3",
                format!("{endpoint}/volume/v3/$(project_id)s"),
            ),
            ("image", "glance", format!("{endpoint}/image")),
        ];
        for (kind, name, url) in services {
            let service = self
                .call(
                    Method::POST,
                    "/services",
                    Some(json!({"service": {"type": kind, "name": name, "enabled": true}})),
                )
                .await?;
            let id = service["service"]["id"]
                .as_str()
                .context("service id")?
                .to_owned();
            for interface in ["public", "internal", "admin"] {
                self.call(Method::POST, "/endpoints", Some(json!({"endpoint": {
                    "service_id": id, "interface": interface, "region_id": REGION, "url": url, "enabled": true}})))
                    .await?;
            }
        }
        let identity_services = self
            .call(Method::GET, "/services?type=identity", None)
            .await?;
        let service = identity_services["services"][0]["id"]
            .as_str()
            .context("identity service")?
            .to_owned();
        let endpoints = self
            .call(
                Method::GET,
                &format!("/endpoints?service_id={service}"),
                None,
            )
            .await?;
        for e in endpoints["endpoints"].as_array().into_iter().flatten() {
            let id = e["id"].as_str().context("endpoint id")?;
            self.call(
                Method::PATCH,
                &format!("/endpoints/{id}"),
                Some(json!({"endpoint": {"url": identity}})),
            )
            .await?;
        }
        Ok(())
    }
}
