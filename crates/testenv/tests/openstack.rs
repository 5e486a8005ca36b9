//! The OpenStack test cloud: real Keystone, the simulators behind the counting/fault proxy.
//! The official openstacksdk drives every simulator (conformance); raw requests check token
//! validation, Keystone's catalog, microversion headers, paging over a thousand fixture
//! servers, injected faults in OpenStack's error formats, and token expiry.

use std::time::Duration;

use anyhow::{Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use stratus_openstack_sim::{ServerSpec, ServerStatus};
use stratus_testenv::{repo_root, OpenStackEnv, OpenStackOptions};
use stratus_testenv::{Fault, FaultKind};
use tokio::time::Instant;

struct Answer {
    status: http::StatusCode,
    headers: http::HeaderMap,
    body: Value,
}

async fn call(
    method: http::Method,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Result<Answer> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut request = http::Request::builder().method(method).uri(url);
    if let Some(token) = token {
        request = request.header("x-auth-token", token);
    }
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let response = client
        .request(request.body(Full::new(Bytes::from(bytes)))?)
        .await?;
    let status = response.status();
    let headers = response.headers().clone();
    let raw = response.into_body().collect().await?.to_bytes();
    let body =
        serde_json::from_slice(&raw).unwrap_or_else(|_| json!(String::from_utf8_lossy(&raw)));
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// A token of the CCM user, scoped to its project, with the catalog.
async fn login(env: &OpenStackEnv) -> Result<(String, Value)> {
    let c = env.credentials();
    let body = json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": c.username, "domain": {"name": c.user_domain_name}, "password": c.password}}},
        "scope": {"project": {"name": c.project_name, "domain": {"name": c.project_domain_name}}}}});
    let answer = call(
        http::Method::POST,
        &format!("{}/auth/tokens", env.auth_url()),
        None,
        Some(body),
    )
    .await?;
    anyhow::ensure!(
        answer.status == http::StatusCode::CREATED,
        "login: {} {}",
        answer.status,
        answer.body
    );
    let token = answer.headers["x-subject-token"].to_str()?.to_owned();
    Ok((token, answer.body))
}

fn endpoint(catalog: &Value, kind: &str) -> String {
    catalog["token"]["catalog"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["type"] == kind)
        .and_then(|s| {
            s["endpoints"]
                .as_array()?
                .iter()
                .find(|e| e["interface"] == "public")
        })
        .and_then(|e| e["url"].as_str())
        .unwrap_or_else(|| panic!("no public {kind} endpoint in {catalog}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstacksdk_drives_the_simulators() -> Result<()> {
    let env = OpenStackEnv::start().await?;
    let script = repo_root().join("crates/testenv/python/conformance.py");
    let python = env.keystone_tool().python.clone();
    let vars = env.env_vars();
    let started = Instant::now();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .envs(vars)
            .output()
    })
    .await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!(
        "conformance ({:.1}s):\n{stdout}",
        started.elapsed().as_secs_f64()
    );
    assert!(
        output.status.success(),
        "openstacksdk conformance failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let steps = stdout
        .lines()
        .filter(|l| l.contains("\"ok\": true"))
        .count();
    assert_eq!(steps, 18, "every step ran: {stdout}");
    let counts = env.request_counts().await?;
    for key in [
        "identity:POST /v3/auth/tokens",
        "compute:POST /servers",
        "compute:GET /servers/detail",
        "compute:POST /servers/{id}/action",
        "network:POST /floatingips",
        "network:PUT /floatingips/{id}",
        "block-storage:POST /volumes",
        "block-storage:POST /volumes/{id}/action",
        "compute:POST /servers/{id}/os-volume_attachments",
        "compute:DELETE /servers/{id}/os-volume_attachments/{id}",
        "image:GET /images",
        "load-balancer:POST /lbaas/loadbalancers",
        "load-balancer:PUT /lbaas/pools/{id}/members",
        "network:PUT /routers/{id}/add_extraroutes",
    ] {
        assert!(
            counts.get(key).is_some_and(|n| *n > 0),
            "{key} not counted: {counts:?}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_catalog_paging_and_faults() -> Result<()> {
    let started = Instant::now();
    let env = OpenStackEnv::start().await?;
    eprintln!(
        "OpenStackEnv::start took {:.2}s; keystone RSS {} MiB; venv installed in {:?}, template in {:?}",
        started.elapsed().as_secs_f64(),
        env.keystone_rss_bytes().unwrap_or(0) / (1 << 20),
        env.keystone_tool().installed_in,
        env.keystone_tool().bootstrapped_in,
    );
    assert!(format!("{:?}", env.credentials()).contains("<redacted>"));
    assert!(!format!("{:?}", env.credentials()).contains(&env.credentials().password));
    let conf = std::fs::read_to_string(env.cloud_conf_path())?;
    assert!(
        conf.starts_with("[Global]\nauth-url = ") && conf.contains("tenant-name = stratus-cluster"),
        "{conf}"
    );
    let vars: Vec<String> = env.env_vars().into_iter().map(|(k, _)| k).collect();
    for k in [
        "OS_AUTH_URL",
        "OS_USERNAME",
        "OS_PASSWORD",
        "OS_PROJECT_NAME",
        "OS_USER_DOMAIN_NAME",
        "OS_PROJECT_DOMAIN_NAME",
        "OS_REGION_NAME",
        "OS_INTERFACE",
    ] {
        assert!(vars.iter().any(|v| v == k), "{k} missing from {vars:?}");
    }

    // Without a token, or with a bad one: Keystone's 401.
    let compute_root = format!("{}/compute/v2.1", env.endpoint());
    let denied = call(
        http::Method::GET,
        &format!("{compute_root}/servers"),
        None,
        None,
    )
    .await?;
    assert_eq!(denied.status, 401, "{}", denied.body);
    assert_eq!(denied.body["error"]["title"], "Unauthorized");
    assert!(denied.headers.contains_key("www-authenticate"));
    let bad = call(
        http::Method::GET,
        &format!("{compute_root}/servers"),
        Some("gAAAAAnope"),
        None,
    )
    .await?;
    assert_eq!(bad.status, 401);

    // The catalog points every service at the proxy, Cinder with the project in its URL.
    let (token, catalog) = login(&env).await?;
    assert_eq!(endpoint(&catalog, "compute"), compute_root);
    assert_eq!(
        endpoint(&catalog, "network"),
        format!("{}/network", env.endpoint())
    );
    assert_eq!(
        endpoint(&catalog, "block-storage"),
        format!(
            "{}/volume/v3/{}",
            env.endpoint(),
            env.credentials().project_id
        )
    );
    assert_eq!(
        endpoint(&catalog, "volumev3"),
        endpoint(&catalog, "block-storage")
    );
    assert_eq!(endpoint(&catalog, "identity"), env.auth_url());
    for kind in ["image", "load-balancer"] {
        endpoint(&catalog, kind);
    }

    // A thousand fixture servers, paged by 1000 with a next link, then an empty page.
    let sim = env.sim().context("in-process simulator")?;
    let specs: Vec<ServerSpec> = (0..1000)
        .map(|i| ServerSpec {
            floating_ip: i % 10 == 0,
            ..ServerSpec::active(format!("node-{i:04}"))
        })
        .collect();
    let made = Instant::now();
    let ids = sim.create_servers(&specs)?;
    eprintln!("1000 fixture servers in {:?}", made.elapsed());
    env.reset_request_counts().await?;
    let page = call(
        http::Method::GET,
        &format!("{compute_root}/servers/detail?limit=1000"),
        Some(&token),
        None,
    )
    .await?;
    assert_eq!(page.status, 200);
    assert_eq!(page.body["servers"].as_array().map(Vec::len), Some(1000));
    assert_eq!(page.headers["openstack-api-version"], "compute 2.1");
    let next = page.body["servers_links"][0]["href"]
        .as_str()
        .context("next link")?
        .to_owned();
    assert!(
        next.starts_with(&compute_root) && next.contains("marker="),
        "{next}"
    );
    let rest = call(http::Method::GET, &next, Some(&token), None).await?;
    assert_eq!(rest.body["servers"], json!([]));
    assert!(rest.body.get("servers_links").is_none());

    // Microversion 2.47 embeds the flavor; floating IPs show in addresses.
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let request = http::Request::get(format!("{compute_root}/servers/{}", ids[0]))
        .header("x-auth-token", &token)
        .header("openstack-api-version", "compute 2.47")
        .body(Full::new(Bytes::new()))?;
    let server: Value = serde_json::from_slice(
        &client
            .request(request)
            .await?
            .into_body()
            .collect()
            .await?
            .to_bytes(),
    )?;
    assert_eq!(server["server"]["flavor"]["original_name"], "m1.small");
    let types: Vec<&str> = server["server"]["addresses"]["stratus-internal"]
        .as_array()
        .context("addresses")?
        .iter()
        .filter_map(|a| a["OS-EXT-IPS:type"].as_str())
        .collect();
    assert_eq!(types, ["fixed", "fixed", "floating"], "{server}");
    let ports = call(
        http::Method::GET,
        &format!("{}/network/v2.0/ports?device_id={}", env.endpoint(), ids[0]),
        Some(&token),
        None,
    )
    .await?;
    assert_eq!(ports.body["ports"].as_array().map(Vec::len), Some(1));

    // Status set by the handle; a deleted server is a 404 in Nova's format.
    sim.set_server_status(&ids[1], ServerStatus::Shutoff)?;
    let one = call(
        http::Method::GET,
        &format!("{compute_root}/servers/{}", ids[1]),
        Some(&token),
        None,
    )
    .await?;
    assert_eq!(one.body["server"]["status"], "SHUTOFF");
    sim.delete_server(&ids[2])?;
    let gone = call(
        http::Method::GET,
        &format!("{compute_root}/servers/{}", ids[2]),
        Some(&token),
        None,
    )
    .await?;
    assert_eq!(gone.status, 404);
    assert_eq!(gone.body["itemNotFound"]["code"], 404);

    let counts = env.request_counts().await?;
    assert_eq!(
        counts.get("compute:GET /servers/detail"),
        Some(&2),
        "{counts:?}"
    );
    assert_eq!(
        counts.get("compute:GET /servers/{id}"),
        Some(&3),
        "{counts:?}"
    );
    assert_eq!(counts.get("network:GET /ports"), Some(&1), "{counts:?}");

    // Faults: Nova 503 in its format, Neutron throttled with Retry-After, Keystone untouched.
    env.set_faults(&[
        Fault {
            service: Some("compute".into()),
            action: None,
            kind: FaultKind::ServerError { status: 503 },
            rate: 1.0,
        },
        Fault {
            service: Some("network".into()),
            action: None,
            kind: FaultKind::Throttle,
            rate: 1.0,
        },
    ])
    .await?;
    let down = call(
        http::Method::GET,
        &format!("{compute_root}/servers"),
        Some(&token),
        None,
    )
    .await?;
    assert_eq!(down.status, 503);
    assert_eq!(down.body["serviceUnavailable"]["code"], 503);
    let throttled = call(
        http::Method::GET,
        &format!("{}/network/v2.0/networks", env.endpoint()),
        Some(&token),
        None,
    )
    .await?;
    assert_eq!(throttled.status, 429);
    assert_eq!(throttled.headers["retry-after"], "1");
    assert!(
        throttled.body["NeutronError"]["message"].is_string(),
        "{}",
        throttled.body
    );
    login(&env).await?;
    env.set_faults(&[]).await?;
    let up = call(
        http::Method::GET,
        &format!("{compute_root}/servers"),
        Some(&token),
        None,
    )
    .await?;
    assert_eq!(up.status, 200);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_lived_tokens_expire_and_are_refused() -> Result<()> {
    let env = OpenStackEnv::start_with(OpenStackOptions {
        token_expiration: Duration::from_secs(5),
        ..OpenStackOptions::default()
    })
    .await?;
    let (token, catalog) = login(&env).await?;
    let url = format!("{}/servers", endpoint(&catalog, "compute"));
    let first = call(http::Method::GET, &url, Some(&token), None).await?;
    assert_eq!(first.status, 200, "{}", first.body);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = call(http::Method::GET, &url, Some(&token), None).await?;
        if answer.status == 401 {
            assert_eq!(answer.body["error"]["code"], 401);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a 5 s token was still accepted after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (fresh, _) = login(&env).await?;
    assert_eq!(
        call(http::Method::GET, &url, Some(&fresh), None)
            .await?
            .status,
        200
    );
    Ok(())
}
