//! Octavia's listeners, pools, members (one by one and the batch update), health monitors,
//! flavors and availability zones. Every change needs its load balancer ACTIVE (409 "immutable"
//! otherwise), makes it PENDING_UPDATE and queues its transition back to ACTIVE; the fully
//! populated create of a load balancer builds its tree here too.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use http::StatusCode;
use hyper::body::Bytes;
use serde_json::{json, Map, Value};
use tokio::time::Instant;

use crate::auth::Caller;
use crate::errors::{ApiError, Service};
use crate::model::{Change, State as Model};
use crate::octavia_model::lb_of;
use crate::util::{first, iso_plain, new_id, now_secs, values};
use crate::{json_answer, json_body, Query, Sim};

/// The flavor every simulated cloud offers.
pub const FLAVOR_ID: &str = "5d6d6f1a-6c1e-4bb9-9d3e-000000000001";
/// Its name.
pub const FLAVOR_NAME: &str = "amphora-single";

fn err(status: StatusCode, message: impl Into<String>) -> ApiError {
    ApiError::new(Service::LoadBalancer, status, message)
}

fn bad(message: impl Into<String>) -> ApiError {
    err(StatusCode::BAD_REQUEST, message)
}

/// One kind of child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Listener,
    Pool,
    Member,
    Monitor,
}

impl Kind {
    fn plural(self) -> &'static str {
        match self {
            Kind::Listener => "listeners",
            Kind::Pool => "pools",
            Kind::Member => "members",
            Kind::Monitor => "healthmonitors",
        }
    }
    fn one(self) -> &'static str {
        match self {
            Kind::Listener => "listener",
            Kind::Pool => "pool",
            Kind::Member => "member",
            Kind::Monitor => "healthmonitor",
        }
    }
    fn label(self) -> &'static str {
        match self {
            Kind::Listener => "Listener",
            Kind::Pool => "Pool",
            Kind::Member => "Member",
            Kind::Monitor => "Health Monitor",
        }
    }
    fn updatable(self) -> &'static [&'static str] {
        match self {
            Kind::Listener => &[
                "name",
                "description",
                "admin_state_up",
                "connection_limit",
                "default_pool_id",
                "timeout_client_data",
                "timeout_member_connect",
                "timeout_member_data",
                "timeout_tcp_inspect",
                "insert_headers",
                "allowed_cidrs",
                "default_tls_container_ref",
                "tags",
            ],
            Kind::Pool => &[
                "name",
                "description",
                "admin_state_up",
                "lb_algorithm",
                "session_persistence",
                "tags",
            ],
            Kind::Member => &[
                "name",
                "admin_state_up",
                "weight",
                "backup",
                "monitor_port",
                "monitor_address",
                "tags",
            ],
            Kind::Monitor => &[
                "name",
                "admin_state_up",
                "delay",
                "timeout",
                "max_retries",
                "max_retries_down",
                "http_method",
                "url_path",
                "expected_codes",
                "tags",
            ],
        }
    }
}

fn coll(state: &mut Model, kind: Kind) -> &mut std::collections::BTreeMap<String, Value> {
    let t = &mut state.octavia;
    match kind {
        Kind::Listener => &mut t.listeners,
        Kind::Pool => &mut t.pools,
        Kind::Member => &mut t.members,
        Kind::Monitor => &mut t.monitors,
    }
}

fn not_found(kind: Kind, id: &str) -> ApiError {
    err(
        StatusCode::NOT_FOUND,
        format!("{} {id} not found.", kind.label()),
    )
}

/// The API routes (under `/v2` and `/v2.0`).
pub(crate) fn routes() -> Router<Arc<Sim>> {
    let mut router = Router::new();
    for base in ["/load-balancer/v2", "/load-balancer/v2.0"] {
        for kind in [Kind::Listener, Kind::Pool, Kind::Monitor] {
            router = router
                .route(
                    &format!("{base}/lbaas/{}", kind.plural()),
                    get(move |s: State<Arc<Sim>>, c: Extension<Caller>, q: Query| {
                        list(kind, None, s, c, q)
                    })
                    .post(
                        move |s: State<Arc<Sim>>, c: Extension<Caller>, b: Bytes| {
                            create(kind, None, s, c, b)
                        },
                    ),
                )
                .route(
                    &format!("{base}/lbaas/{}/{{id}}", kind.plural()),
                    get(
                        move |s: State<Arc<Sim>>, c: Extension<Caller>, Path(id): Path<String>| {
                            show(kind, id, s, c)
                        },
                    )
                    .put(
                        move |s: State<Arc<Sim>>,
                              c: Extension<Caller>,
                              Path(id): Path<String>,
                              b: Bytes| { update(kind, id, s, c, b) },
                    )
                    .delete(
                        move |s: State<Arc<Sim>>, c: Extension<Caller>, Path(id): Path<String>| {
                            delete(kind, id, s, c)
                        },
                    ),
                );
        }
        router = router
            .route(
                &format!("{base}/lbaas/pools/{{pool}}/members"),
                get(
                    |s: State<Arc<Sim>>,
                     c: Extension<Caller>,
                     Path(pool): Path<String>,
                     q: Query| list(Kind::Member, Some(pool), s, c, q),
                )
                .post(
                    |s: State<Arc<Sim>>,
                     c: Extension<Caller>,
                     Path(pool): Path<String>,
                     b: Bytes| { create(Kind::Member, Some(pool), s, c, b) },
                )
                .put(batch_members),
            )
            .route(
                &format!("{base}/lbaas/pools/{{pool}}/members/{{id}}"),
                get(
                    |s: State<Arc<Sim>>,
                     c: Extension<Caller>,
                     Path((_, id)): Path<(String, String)>| {
                        show(Kind::Member, id, s, c)
                    },
                )
                .put(
                    |s: State<Arc<Sim>>,
                     c: Extension<Caller>,
                     Path((_, id)): Path<(String, String)>,
                     b: Bytes| update(Kind::Member, id, s, c, b),
                )
                .delete(
                    |s: State<Arc<Sim>>,
                     c: Extension<Caller>,
                     Path((_, id)): Path<(String, String)>| {
                        delete(Kind::Member, id, s, c)
                    },
                ),
            )
            .route(&format!("{base}/lbaas/flavors"), get(flavors))
            .route(&format!("{base}/lbaas/availabilityzones"), get(zones));
    }
    router
}

async fn flavors() -> Response {
    json_answer(
        StatusCode::OK,
        json!({"flavors": [{"id": FLAVOR_ID, "name": FLAVOR_NAME, "description": "single amphora",
            "enabled": true, "flavor_profile_id": FLAVOR_ID}]}),
    )
}

async fn zones(State(sim): State<Arc<Sim>>) -> Response {
    let zones: Vec<Value> = sim
        .state()
        .zones
        .iter()
        .map(|z| json!({"name": z, "description": "", "enabled": true, "availability_zone_profile_id": z}))
        .collect();
    json_answer(StatusCode::OK, json!({ "availability_zones": zones }))
}

fn owned(object: &Value, caller: &Caller) -> bool {
    caller.is_admin || object["project_id"] == caller.project_id.as_str()
}

async fn list(
    kind: Kind,
    pool: Option<String>,
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Query(query): Query,
) -> Result<Response, ApiError> {
    let mut state = sim.state();
    if let Some(pool) = &pool {
        if !state.octavia.pools.contains_key(pool) {
            return Err(not_found(Kind::Pool, pool));
        }
    }
    let tags = values(&query, "tags");
    let lb_filter = first(&query, "loadbalancer_id");
    let items: Vec<Value> = coll(&mut state, kind)
        .values()
        .filter(|c| owned(c, &caller))
        .filter(|c| pool.as_deref().is_none_or(|p| c["pool_id"] == p))
        .filter(|c| lb_filter.is_none_or(|lb| lb_of(c) == Some(lb)))
        .filter(|c| {
            [
                "id",
                "name",
                "pool_id",
                "protocol",
                "address",
                "provisioning_status",
            ]
            .iter()
            .all(|k| first(&query, k).is_none_or(|want| c[*k].as_str() == Some(want)))
                && first(&query, "protocol_port")
                    .is_none_or(|want| want.parse::<u64>().ok() == c["protocol_port"].as_u64())
                && tags.iter().flat_map(|t| t.split(',')).all(|t| {
                    c["tags"]
                        .as_array()
                        .is_some_and(|have| have.iter().any(|h| h == t))
                })
        })
        .cloned()
        .collect();
    Ok(json_answer(StatusCode::OK, json!({ kind.plural(): items })))
}

async fn show(
    kind: Kind,
    id: String,
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let mut state = sim.state();
    let object = coll(&mut state, kind)
        .get(&id)
        .filter(|c| owned(c, &caller))
        .cloned()
        .ok_or_else(|| not_found(kind, &id))?;
    Ok(json_answer(StatusCode::OK, json!({ kind.one(): object })))
}

/// Checks that a load balancer may change now (it exists, is ACTIVE, and no 409 is injected).
pub(crate) fn mutable_lb(state: &mut Model, lb: &str) -> Result<(), ApiError> {
    let status = state
        .load_balancers
        .get(lb)
        .map(|l| {
            l["provisioning_status"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .ok_or_else(|| bad(format!("Validation failure: Load Balancer {lb} not found.")))?;
    if status != "ACTIVE" || state.octavia.take_conflict() {
        return Err(err(
            StatusCode::CONFLICT,
            format!("Load Balancer {lb} is immutable and cannot be updated."),
        ));
    }
    Ok(())
}

/// Marks a load balancer PENDING_UPDATE and queues its return to ACTIVE.
pub(crate) fn touch_lb(state: &mut Model, lb: &str) {
    if let Some(l) = state.load_balancers.get_mut(lb) {
        l["provisioning_status"] = json!("PENDING_UPDATE");
        l["updated_at"] = json!(iso_plain(now_secs()));
    }
    let delay = state.knobs.lb_delay;
    state.schedule(lb, Change::LoadBalancer("ACTIVE"), Instant::now(), delay);
}

fn field<'a>(input: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    input.get(key).filter(|v| !v.is_null())
}

fn text<'a>(input: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    input.get(key).and_then(|v| v.as_str())
}

const PROTOCOLS: &[&str] = &[
    "TCP",
    "UDP",
    "SCTP",
    "HTTP",
    "HTTPS",
    "TERMINATED_HTTPS",
    "PROXY",
    "PROXYV2",
];

fn base(lb: &str, project: &str, input: &Map<String, Value>, status: &str) -> Value {
    let now = iso_plain(now_secs());
    json!({
        "id": new_id(), "name": field(input, "name").cloned().unwrap_or(json!("")),
        "description": field(input, "description").cloned().unwrap_or(json!("")),
        "admin_state_up": field(input, "admin_state_up").cloned().unwrap_or(json!(true)),
        "provisioning_status": status, "operating_status": "OFFLINE",
        "project_id": project, "tenant_id": project, "created_at": now, "updated_at": Value::Null,
        "tags": field(input, "tags").cloned().unwrap_or(json!([])),
        "loadbalancers": [{"id": lb}],
    })
}

/// Builds a listener from `input` (no I/O on the load balancer's status).
fn new_listener(
    state: &mut Model,
    lb: &str,
    project: &str,
    input: &Map<String, Value>,
    status: &str,
) -> Result<Value, ApiError> {
    let protocol = text(input, "protocol")
        .filter(|p| PROTOCOLS[..6].contains(p))
        .ok_or_else(|| bad("Invalid input for field/attribute protocol."))?;
    let port = field(input, "protocol_port")
        .and_then(|p| p.as_u64())
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| bad("Invalid input for field/attribute protocol_port."))?;
    if state
        .octavia
        .listeners
        .values()
        .any(|l| lb_of(l) == Some(lb) && l["protocol_port"] == port && l["protocol"] == protocol)
    {
        return Err(err(
            StatusCode::CONFLICT,
            format!("Another Listener on this Load Balancer is already using protocol_port {port}"),
        ));
    }
    let mut l = base(lb, project, input, status);
    l["protocol"] = json!(protocol);
    l["protocol_port"] = json!(port);
    for (key, default) in [
        ("connection_limit", json!(-1)),
        ("default_pool_id", Value::Null),
        ("timeout_client_data", json!(50000)),
        ("timeout_member_connect", json!(5000)),
        ("timeout_member_data", json!(50000)),
        ("timeout_tcp_inspect", json!(0)),
        ("insert_headers", json!({})),
        ("allowed_cidrs", Value::Null),
        ("default_tls_container_ref", Value::Null),
    ] {
        l[key] = field(input, key).cloned().unwrap_or(default);
    }
    l["l7policies"] = json!([]);
    Ok(l)
}

fn new_pool(
    lb: &str,
    listener: Option<&str>,
    project: &str,
    input: &Map<String, Value>,
    status: &str,
) -> Result<Value, ApiError> {
    let protocol = text(input, "protocol")
        .filter(|p| PROTOCOLS.contains(p))
        .ok_or_else(|| bad("Invalid input for field/attribute protocol."))?;
    let method = text(input, "lb_algorithm")
        .filter(|m| {
            [
                "ROUND_ROBIN",
                "LEAST_CONNECTIONS",
                "SOURCE_IP",
                "SOURCE_IP_PORT",
            ]
            .contains(m)
        })
        .ok_or_else(|| bad("Invalid input for field/attribute lb_algorithm."))?;
    let mut p = base(lb, project, input, status);
    p["protocol"] = json!(protocol);
    p["lb_algorithm"] = json!(method);
    p["session_persistence"] = field(input, "session_persistence")
        .cloned()
        .unwrap_or(Value::Null);
    p["listeners"] = json!(listener.map(|l| vec![json!({"id": l})]).unwrap_or_default());
    p["members"] = json!([]);
    p["healthmonitor_id"] = Value::Null;
    Ok(p)
}

fn new_member(
    lb: &str,
    pool: &str,
    project: &str,
    input: &Map<String, Value>,
    status: &str,
) -> Result<Value, ApiError> {
    let address = text(input, "address")
        .filter(|a| a.parse::<std::net::IpAddr>().is_ok())
        .ok_or_else(|| bad("Invalid input for field/attribute address."))?;
    let port = field(input, "protocol_port")
        .and_then(|p| p.as_u64())
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| bad("Invalid input for field/attribute protocol_port."))?;
    let mut m = base(lb, project, input, status);
    m["address"] = json!(address);
    m["protocol_port"] = json!(port);
    m["pool_id"] = json!(pool);
    for (key, default) in [
        ("subnet_id", Value::Null),
        ("weight", json!(1)),
        ("backup", json!(false)),
        ("monitor_port", Value::Null),
        ("monitor_address", Value::Null),
    ] {
        m[key] = field(input, key).cloned().unwrap_or(default);
    }
    Ok(m)
}

fn new_monitor(
    lb: &str,
    pool: &str,
    project: &str,
    input: &Map<String, Value>,
    status: &str,
) -> Result<Value, ApiError> {
    let kind = text(input, "type")
        .filter(|t| {
            [
                "TCP",
                "UDP-CONNECT",
                "HTTP",
                "HTTPS",
                "PING",
                "SCTP",
                "TLS-HELLO",
            ]
            .contains(t)
        })
        .ok_or_else(|| bad("Invalid input for field/attribute type."))?;
    let number = |key: &str| {
        field(input, key)
            .and_then(|v| v.as_u64())
            .ok_or_else(|| bad(format!("Invalid input for field/attribute {key}.")))
    };
    let mut h = base(lb, project, input, status);
    h["type"] = json!(kind);
    h["delay"] = json!(number("delay")?);
    h["timeout"] = json!(number("timeout")?);
    h["max_retries"] = json!(number("max_retries")?);
    h["max_retries_down"] = field(input, "max_retries_down")
        .cloned()
        .unwrap_or(json!(3));
    h["pools"] = json!([{"id": pool}]);
    h["pool_id"] = json!(pool);
    Ok(h)
}

fn insert(state: &mut Model, kind: Kind, object: &Value) -> String {
    let id = object["id"].as_str().unwrap_or_default().to_owned();
    coll(state, kind).insert(id.clone(), object.clone());
    id
}

/// Attaches a monitor to its pool and a member to its pool's `members`.
fn link(state: &mut Model, kind: Kind, object: &Value) {
    let pool = object["pool_id"].as_str().unwrap_or_default().to_owned();
    if let Some(p) = state.octavia.pools.get_mut(&pool) {
        match kind {
            Kind::Monitor => p["healthmonitor_id"] = object["id"].clone(),
            Kind::Member => {
                if let Some(members) = p["members"].as_array_mut() {
                    members.push(json!({"id": object["id"]}));
                }
            }
            _ => {}
        }
    }
}

/// Builds the tree of a fully populated load-balancer create (`listeners` with `default_pool`,
/// and `pools`), every child PENDING_CREATE; nothing is stored when any part is invalid.
pub(crate) fn populate(
    state: &mut Model,
    lb: &str,
    project: &str,
    input: &Map<String, Value>,
) -> Result<(), ApiError> {
    let mut made: Vec<(Kind, Value)> = Vec::new();
    let status = "PENDING_CREATE";
    for l in input
        .get("listeners")
        .and_then(|l| l.as_array())
        .into_iter()
        .flatten()
    {
        let l = l.as_object().ok_or_else(|| bad("Invalid listener"))?;
        let mut listener = new_listener(state, lb, project, l, status)?;
        if made.iter().any(|(k, o)| {
            *k == Kind::Listener
                && o["protocol_port"] == listener["protocol_port"]
                && o["protocol"] == listener["protocol"]
        }) {
            return Err(bad("Duplicate listener protocol_port"));
        }
        if let Some(pool) = l.get("default_pool").and_then(|p| p.as_object()) {
            let lid = listener["id"].as_str().unwrap_or_default().to_owned();
            let pool_id = pool_tree(lb, project, &mut made, Some(&lid), pool)?;
            listener["default_pool_id"] = json!(pool_id);
        }
        made.push((Kind::Listener, listener));
    }
    for p in input
        .get("pools")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
    {
        let p = p.as_object().ok_or_else(|| bad("Invalid pool"))?;
        pool_tree(lb, project, &mut made, None, p)?;
    }
    for (kind, object) in made {
        insert(state, kind, &object);
    }
    Ok(())
}

/// A pool with its members and monitor, for a fully populated create.
fn pool_tree(
    lb: &str,
    project: &str,
    made: &mut Vec<(Kind, Value)>,
    listener: Option<&str>,
    input: &Map<String, Value>,
) -> Result<String, ApiError> {
    let status = "PENDING_CREATE";
    let mut pool = new_pool(lb, listener, project, input, status)?;
    let pool_id = pool["id"].as_str().unwrap_or_default().to_owned();
    for m in input
        .get("members")
        .and_then(|m| m.as_array())
        .into_iter()
        .flatten()
    {
        let m = m.as_object().ok_or_else(|| bad("Invalid member"))?;
        let m = new_member(lb, &pool_id, project, m, status)?;
        if let Some(list) = pool["members"].as_array_mut() {
            list.push(json!({"id": m["id"]}));
        }
        made.push((Kind::Member, m));
    }
    if let Some(h) = input.get("healthmonitor").and_then(|h| h.as_object()) {
        let h = new_monitor(lb, &pool_id, project, h, status)?;
        pool["healthmonitor_id"] = h["id"].clone();
        made.push((Kind::Monitor, h));
    }
    made.push((Kind::Pool, pool));
    Ok(pool_id)
}

async fn create(
    kind: Kind,
    pool_in_path: Option<String>,
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_body(Service::LoadBalancer, &body)?;
    let input = body
        .get(kind.one())
        .and_then(|v| v.as_object())
        .cloned()
        .ok_or_else(|| bad(format!("Invalid input for field/attribute {}.", kind.one())))?;
    let mut state = sim.state();
    let project = caller.project_id.clone();
    // Which load balancer (and pool) the new child hangs on.
    let (lb, pool, listener) = match kind {
        Kind::Listener => (
            text(&input, "loadbalancer_id")
                .ok_or_else(|| bad("Invalid input for field/attribute loadbalancer_id."))?
                .to_owned(),
            None,
            None,
        ),
        Kind::Pool => {
            if let Some(l) = text(&input, "listener_id") {
                let listener =
                    state.octavia.listeners.get(l).ok_or_else(|| {
                        bad(format!("Validation failure: Listener {l} not found."))
                    })?;
                if !listener["default_pool_id"].is_null() {
                    return Err(err(
                        StatusCode::CONFLICT,
                        format!("Listener {l} is already using a default pool."),
                    ));
                }
                (
                    lb_of(listener).unwrap_or_default().to_owned(),
                    None,
                    Some(l.to_owned()),
                )
            } else {
                (
                    text(&input, "loadbalancer_id")
                        .ok_or_else(|| bad("Invalid input: listener_id or loadbalancer_id."))?
                        .to_owned(),
                    None,
                    None,
                )
            }
        }
        Kind::Member | Kind::Monitor => {
            let pool = pool_in_path
                .or_else(|| text(&input, "pool_id").map(str::to_owned))
                .ok_or_else(|| bad("Invalid input for field/attribute pool_id."))?;
            let p = state
                .octavia
                .pools
                .get(&pool)
                .ok_or_else(|| not_found(Kind::Pool, &pool))?;
            if kind == Kind::Monitor && !p["healthmonitor_id"].is_null() {
                return Err(err(
                    StatusCode::CONFLICT,
                    format!("This pool {pool} already has a health monitor."),
                ));
            }
            (lb_of(p).unwrap_or_default().to_owned(), Some(pool), None)
        }
    };
    if !state
        .load_balancers
        .get(&lb)
        .is_some_and(|l| owned(l, &caller))
    {
        return Err(bad(format!(
            "Validation failure: Load Balancer {lb} not found."
        )));
    }
    mutable_lb(&mut state, &lb)?;
    let status = "PENDING_CREATE";
    let object = match kind {
        Kind::Listener => new_listener(&mut state, &lb, &project, &input, status)?,
        Kind::Pool => new_pool(&lb, listener.as_deref(), &project, &input, status)?,
        Kind::Member => new_member(
            &lb,
            pool.as_deref().unwrap_or_default(),
            &project,
            &input,
            status,
        )?,
        Kind::Monitor => new_monitor(
            &lb,
            pool.as_deref().unwrap_or_default(),
            &project,
            &input,
            status,
        )?,
    };
    let id = insert(&mut state, kind, &object);
    link(&mut state, kind, &object);
    if let Some(l) = listener {
        if let Some(l) = state.octavia.listeners.get_mut(&l) {
            l["default_pool_id"] = json!(id);
        }
    }
    touch_lb(&mut state, &lb);
    Ok(json_answer(
        StatusCode::CREATED,
        json!({ kind.one(): object }),
    ))
}

async fn update(
    kind: Kind,
    id: String,
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_body(Service::LoadBalancer, &body)?;
    let input = body
        .get(kind.one())
        .and_then(|v| v.as_object())
        .cloned()
        .ok_or_else(|| bad(format!("Invalid input for field/attribute {}.", kind.one())))?;
    let mut state = sim.state();
    let lb = coll(&mut state, kind)
        .get(&id)
        .filter(|c| owned(c, &caller))
        .and_then(|c| lb_of(c).map(str::to_owned))
        .ok_or_else(|| not_found(kind, &id))?;
    mutable_lb(&mut state, &lb)?;
    let object = coll(&mut state, kind).get_mut(&id).expect("checked");
    for (k, v) in &input {
        if kind.updatable().contains(&k.as_str()) {
            object[k.as_str()] = v.clone();
        }
    }
    object["provisioning_status"] = json!("PENDING_UPDATE");
    object["updated_at"] = json!(iso_plain(now_secs()));
    let answer = object.clone();
    touch_lb(&mut state, &lb);
    Ok(json_answer(StatusCode::OK, json!({ kind.one(): answer })))
}

async fn delete(
    kind: Kind,
    id: String,
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let mut state = sim.state();
    let object = coll(&mut state, kind)
        .get(&id)
        .filter(|c| owned(c, &caller))
        .cloned()
        .ok_or_else(|| not_found(kind, &id))?;
    let lb = lb_of(&object).unwrap_or_default().to_owned();
    mutable_lb(&mut state, &lb)?;
    remove(&mut state, kind, &id);
    touch_lb(&mut state, &lb);
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Removes a child and what hangs on it (a pool's members and monitor), unlinking it.
fn remove(state: &mut Model, kind: Kind, id: &str) {
    let Some(object) = coll(state, kind).remove(id) else {
        return;
    };
    let t = &mut state.octavia;
    match kind {
        Kind::Listener => {
            for p in t.pools.values_mut() {
                if let Some(ls) = p["listeners"].as_array_mut() {
                    ls.retain(|l| l["id"] != id);
                }
            }
        }
        Kind::Pool => {
            t.members.retain(|_, m| m["pool_id"] != id);
            t.monitors.retain(|_, h| h["pool_id"] != id);
            for l in t.listeners.values_mut() {
                if l["default_pool_id"] == id {
                    l["default_pool_id"] = Value::Null;
                }
            }
        }
        Kind::Member => {
            if let Some(p) = t
                .pools
                .get_mut(object["pool_id"].as_str().unwrap_or_default())
            {
                if let Some(ms) = p["members"].as_array_mut() {
                    ms.retain(|m| m["id"] != id);
                }
            }
        }
        Kind::Monitor => {
            if let Some(p) = t
                .pools
                .get_mut(object["pool_id"].as_str().unwrap_or_default())
            {
                p["healthmonitor_id"] = Value::Null;
            }
        }
    }
}

/// `PUT /pools/{pool}/members`: the pool's members become exactly the list (matched by address
/// and port: kept ones updated, missing ones removed, new ones created), in one change.
async fn batch_members(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(pool): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_body(Service::LoadBalancer, &body)?;
    let wanted = body
        .get("members")
        .and_then(|m| m.as_array())
        .cloned()
        .ok_or_else(|| bad("Invalid input for field/attribute members."))?;
    let mut state = sim.state();
    let lb = state
        .octavia
        .pools
        .get(&pool)
        .filter(|p| owned(p, &caller))
        .and_then(|p| lb_of(p).map(str::to_owned))
        .ok_or_else(|| not_found(Kind::Pool, &pool))?;
    let project = caller.project_id.clone();
    let mut fresh = Vec::new();
    for m in &wanted {
        let m = m.as_object().ok_or_else(|| bad("Invalid member"))?;
        fresh.push(new_member(&lb, &pool, &project, m, "PENDING_CREATE")?);
    }
    mutable_lb(&mut state, &lb)?;
    let key = |m: &Value| {
        (
            m["address"].clone().to_string(),
            m["protocol_port"].to_string(),
        )
    };
    let existing: Vec<(String, Value)> = state
        .octavia
        .members
        .iter()
        .filter(|(_, m)| m["pool_id"] == pool.as_str())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (id, m) in &existing {
        if !fresh.iter().any(|f| key(f) == key(m)) {
            remove(&mut state, Kind::Member, id);
        }
    }
    for f in fresh {
        match existing.iter().find(|(_, m)| key(m) == key(&f)) {
            Some((id, _)) => {
                if let Some(m) = state.octavia.members.get_mut(id) {
                    for k in Kind::Member.updatable() {
                        if !f[*k].is_null() {
                            m[*k] = f[*k].clone();
                        }
                    }
                    m["provisioning_status"] = json!("PENDING_UPDATE");
                }
            }
            None => {
                insert(&mut state, Kind::Member, &f);
                link(&mut state, Kind::Member, &f);
            }
        }
    }
    touch_lb(&mut state, &lb);
    Ok(StatusCode::ACCEPTED.into_response())
}
