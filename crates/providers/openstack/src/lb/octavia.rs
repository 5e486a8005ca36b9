//! The Octavia seam: load balancers (find, create fully populated, delete with cascade, list
//! statuses), the children read back as one tree, and every single-change call a plan step
//! makes. A 409 (the load balancer is busy) becomes "pending", a 404 "gone".

use http::Method;
use serde_json::{json, Value};
use stratus_cloud::CloudError;

use super::spec::{member_body, ActualListener, ActualPool, ActualTree, MemberSpec, Step};
use crate::compute::encode;
use stratus_openstack_api::client::errors::is_not_found;
use stratus_openstack_api::client::ServiceClient;

const BASE: &str = "/v2/lbaas";

/// Whether the cloud answered 409 (the load balancer is immutable right now).
pub fn is_conflict(e: &CloudError) -> bool {
    matches!(e, CloudError::Rejected { code, .. } if code == "409")
}

/// Octavia.
#[derive(Debug, Clone)]
pub struct Octavia {
    client: ServiceClient,
}

fn id(v: &Value) -> &str {
    v["id"].as_str().unwrap_or_default()
}

impl Octavia {
    /// Octavia through `client`.
    pub fn new(client: ServiceClient) -> Octavia {
        Octavia { client }
    }

    /// The load balancer named `name` (the first, if several).
    pub async fn find(&self, name: &str) -> Result<Option<Value>, CloudError> {
        let path = format!("{BASE}/loadbalancers?name={}", encode(name));
        let list: Vec<Value> = self
            .client
            .list("ListLoadBalancers", &path, "loadbalancers")
            .await?;
        Ok(list.into_iter().next())
    }

    /// The load balancer tagged with `tag` (a shared one a Service joined), if any.
    pub async fn find_tagged(&self, tag: &str) -> Result<Option<Value>, CloudError> {
        let path = format!("{BASE}/loadbalancers?tags={}", encode(tag));
        let list: Vec<Value> = self
            .client
            .list("ListLoadBalancers", &path, "loadbalancers")
            .await?;
        Ok(list.into_iter().next())
    }

    /// Replaces a load balancer's tags.
    pub async fn set_tags(&self, lb: &str, tags: &[String]) -> Result<(), CloudError> {
        self.client
            .send(
                "UpdateLoadBalancer",
                Method::PUT,
                &format!("{BASE}/loadbalancers/{}", encode(lb)),
                Some(&json!({"loadbalancer": {"tags": tags}})),
            )
            .await
            .map(drop)
    }

    /// A load balancer by id (None: gone).
    pub async fn get(&self, lb: &str) -> Result<Option<Value>, CloudError> {
        match self
            .client
            .get::<Value>(
                "GetLoadBalancer",
                &format!("{BASE}/loadbalancers/{}", encode(lb)),
            )
            .await
        {
            Ok(v) => Ok(Some(v["loadbalancer"].clone())),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every load balancer of the project.
    pub async fn list(&self) -> Result<Vec<Value>, CloudError> {
        self.client
            .list(
                "ListLoadBalancers",
                &format!("{BASE}/loadbalancers?limit=1000"),
                "loadbalancers",
            )
            .await
    }

    /// Creates a load balancer from a fully populated body.
    pub async fn create(&self, body: &Value) -> Result<Value, CloudError> {
        let r = self
            .client
            .send(
                "CreateLoadBalancer",
                Method::POST,
                &format!("{BASE}/loadbalancers"),
                Some(body),
            )
            .await?;
        let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        Ok(v["loadbalancer"].clone())
    }

    /// Deletes a load balancer and everything in it (a missing one is fine).
    pub async fn delete(&self, lb: &str) -> Result<(), CloudError> {
        match self
            .client
            .send(
                "DeleteLoadBalancer",
                Method::DELETE,
                &format!("{BASE}/loadbalancers/{}?cascade=true", encode(lb)),
                None,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn list_of(
        &self,
        operation: &'static str,
        path: &str,
        key: &str,
    ) -> Result<Vec<Value>, CloudError> {
        self.client.list(operation, path, key).await
    }

    /// The pools of a load balancer.
    pub async fn pools(&self, lb: &str) -> Result<Vec<Value>, CloudError> {
        self.list_of(
            "ListPools",
            &format!("{BASE}/pools?loadbalancer_id={}", encode(lb)),
            "pools",
        )
        .await
    }

    /// Reads the listeners, pools, members and monitors of a load balancer.
    pub async fn tree(&self, lb: &str) -> Result<ActualTree, CloudError> {
        let listeners = self
            .list_of(
                "ListListeners",
                &format!("{BASE}/listeners?loadbalancer_id={}", encode(lb)),
                "listeners",
            )
            .await?;
        let pools = self.pools(lb).await?;
        let mut tree = ActualTree::default();
        let mut read = Vec::new();
        for pool in &pools {
            let members = self
                .list_of(
                    "ListMembers",
                    &format!("{BASE}/pools/{}/members", encode(id(pool))),
                    "members",
                )
                .await?;
            let monitor = match pool["healthmonitor_id"].as_str() {
                Some(m) => match self
                    .client
                    .get::<Value>(
                        "GetHealthMonitor",
                        &format!("{BASE}/healthmonitors/{}", encode(m)),
                    )
                    .await
                {
                    Ok(v) => Some(v["healthmonitor"].clone()),
                    Err(e) if is_not_found(&e) => None,
                    Err(e) => return Err(e),
                },
                None => None,
            };
            read.push(ActualPool {
                pool: pool.clone(),
                members,
                monitor,
            });
        }
        for listener in listeners {
            let pool = listener["default_pool_id"]
                .as_str()
                .and_then(|p| read.iter().find(|a| id(&a.pool) == p))
                .cloned();
            tree.listeners.push(ActualListener { listener, pool });
        }
        tree.loose_pools = read
            .iter()
            .filter(|a| {
                !tree
                    .listeners
                    .iter()
                    .any(|l| l.pool.as_ref().is_some_and(|p| id(&p.pool) == id(&a.pool)))
            })
            .map(|a| a.pool.clone())
            .collect();
        Ok(tree)
    }

    /// Replaces a pool's members in one call.
    pub async fn set_members(&self, pool: &str, members: &[MemberSpec]) -> Result<(), CloudError> {
        let body = json!({"members": members.iter().map(member_body).collect::<Vec<_>>()});
        self.client
            .send(
                "UpdateMembers",
                Method::PUT,
                &format!("{BASE}/pools/{}/members", encode(pool)),
                Some(&body),
            )
            .await
            .map(drop)
    }

    /// Applies one plan step to load balancer `lb`.
    pub async fn apply(&self, lb: &str, step: &Step) -> Result<(), CloudError> {
        let c = &self.client;
        let result = match step {
            Step::DeleteListener(l) => {
                c.send(
                    "DeleteListener",
                    Method::DELETE,
                    &format!("{BASE}/listeners/{}", encode(l)),
                    None,
                )
                .await
            }
            Step::DeletePool(p) => {
                c.send(
                    "DeletePool",
                    Method::DELETE,
                    &format!("{BASE}/pools/{}", encode(p)),
                    None,
                )
                .await
            }
            Step::UpdateListener(l, body) => {
                c.send(
                    "UpdateListener",
                    Method::PUT,
                    &format!("{BASE}/listeners/{}", encode(l)),
                    Some(&json!({ "listener": body })),
                )
                .await
            }
            Step::CreateListener(body) => {
                let mut body = body.clone();
                body["loadbalancer_id"] = json!(lb);
                c.send(
                    "CreateListener",
                    Method::POST,
                    &format!("{BASE}/listeners"),
                    Some(&json!({ "listener": body })),
                )
                .await
            }
            Step::CreatePool { listener_id, body } => {
                let mut body = body.clone();
                body["listener_id"] = json!(listener_id);
                c.send(
                    "CreatePool",
                    Method::POST,
                    &format!("{BASE}/pools"),
                    Some(&json!({ "pool": body })),
                )
                .await
            }
            Step::UpdatePool(p, body) => {
                c.send(
                    "UpdatePool",
                    Method::PUT,
                    &format!("{BASE}/pools/{}", encode(p)),
                    Some(&json!({ "pool": body })),
                )
                .await
            }
            Step::SetMembers(p, members) => return self.set_members(p, members).await,
            Step::CreateMonitor(body) => {
                c.send(
                    "CreateHealthMonitor",
                    Method::POST,
                    &format!("{BASE}/healthmonitors"),
                    Some(&json!({ "healthmonitor": body })),
                )
                .await
            }
            Step::UpdateMonitor(m, body) => {
                c.send(
                    "UpdateHealthMonitor",
                    Method::PUT,
                    &format!("{BASE}/healthmonitors/{}", encode(m)),
                    Some(&json!({ "healthmonitor": body })),
                )
                .await
            }
            Step::DeleteMonitor(m) => {
                c.send(
                    "DeleteHealthMonitor",
                    Method::DELETE,
                    &format!("{BASE}/healthmonitors/{}", encode(m)),
                    None,
                )
                .await
            }
        };
        match result {
            Ok(_) => Ok(()),
            // Deleting what is already gone is done.
            Err(e)
                if is_not_found(&e)
                    && matches!(
                        step,
                        Step::DeleteListener(_) | Step::DeletePool(_) | Step::DeleteMonitor(_)
                    ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}
