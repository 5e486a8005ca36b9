//! Moving one interface of the catalog off the proxy's loopback address: a pod on the pod network
//! cannot reach `127.0.0.1`, so a test points the `internal` endpoints (Keystone's own included)
//! at a relay on the node IP and gives the pod's client `os-endpoint-type = internalURL`, while
//! host-network clients keep the `public` endpoints.

use anyhow::{Context, Result};
use http::Method;

use super::admin::Setup;
use super::env::OpenStackEnv;

impl OpenStackEnv {
    /// Points every endpoint of `interface` (`public`, `internal` or `admin`) at `base`
    /// (`http://HOST:PORT`, same paths) instead of the proxy; returns how many endpoints moved.
    pub async fn move_interface(&self, interface: &str, base: &str) -> Result<usize> {
        let setup = Setup::new(self.keystone_url(), &self.admin_credentials().password).await?;
        let listed = setup
            .call(
                Method::GET,
                &format!("/endpoints?interface={interface}"),
                None,
            )
            .await?;
        let mut moved = 0;
        for endpoint in listed["endpoints"].as_array().into_iter().flatten() {
            let id = endpoint["id"].as_str().context("endpoint id")?;
            let url = endpoint["url"].as_str().context("endpoint url")?;
            let Some(path) = url.strip_prefix(self.endpoint()) else {
                continue;
            };
            setup
                .call(
                    Method::PATCH,
                    &format!("/endpoints/{id}"),
                    Some(serde_json::json!({"endpoint": {"url": format!("{base}{path}")}})),
                )
                .await
                .with_context(|| format!("moving the {interface} endpoint {url} to {base}"))?;
            moved += 1;
        }
        anyhow::ensure!(moved > 0, "no {interface} endpoint points at the proxy");
        Ok(moved)
    }
}
