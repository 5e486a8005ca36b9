//! EC2 `DescribeInstanceTopology`, answered by the proxy: moto does not implement it. The answer
//! follows the EC2 API reference: instances of the supported instance types only (the types
//! [`SUPPORTED_TYPES`] lists, from the reference's "Limitations"), in `instanceSet` items with
//! `instanceId`, `instanceType`, `groupName` (when in a placement group), `networkNodeSet`
//! (three network nodes, four for `p6-b200.48xlarge`; empty unless the instance is `running`),
//! `availabilityZone` and `zoneId`. At most 100 `InstanceId.N`; `MaxResults` (5–100, default
//! 20) pages with `nextToken` only without instance IDs and cannot be combined with them.
//!
//! What moto knows of the instances (type, zone, state, placement group) and the zone IDs come
//! from DescribeInstances and DescribeAvailabilityZones sent to moto directly, with the caller's
//! credentials: these are not counted, only the DescribeInstanceTopology call is. Network node
//! IDs are [`network_nodes`]: stable per zone and instance, shared by the instances of a zone at
//! the top layer.

use std::collections::BTreeMap;

use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Bytes;

use crate::core::proxy::{full, ProxyBody, Upstream};

/// Instance types EC2 describes a topology for, with their number of network-node layers.
pub const SUPPORTED_TYPES: &[(&str, usize)] = &[
    ("hpc6a.48xlarge", 3),
    ("hpc6id.32xlarge", 3),
    ("hpc7a.12xlarge", 3),
    ("hpc7a.24xlarge", 3),
    ("hpc7a.48xlarge", 3),
    ("hpc7a.96xlarge", 3),
    ("hpc7g.4xlarge", 3),
    ("hpc7g.8xlarge", 3),
    ("hpc7g.16xlarge", 3),
    ("p3dn.24xlarge", 3),
    ("p4d.24xlarge", 3),
    ("p4de.24xlarge", 3),
    ("p5.48xlarge", 3),
    ("p5e.48xlarge", 3),
    ("p5en.48xlarge", 3),
    ("trn1.2xlarge", 3),
    ("trn1.32xlarge", 3),
    ("trn1n.32xlarge", 3),
    ("trn2.48xlarge", 3),
    ("trn2u.48xlarge", 3),
    ("p6-b200.48xlarge", 4),
];

/// Most instance IDs in one request.
const MAX_IDS: usize = 100;

/// The network nodes the proxy reports for an instance, farthest first: the top layer is shared
/// by every instance of the zone, the middle one by a block of instances, the last one is the
/// instance's own. `nn-` and 17 hex digits, as EC2 spells them.
pub fn network_nodes(zone: &str, instance_id: &str, layers: usize) -> Vec<String> {
    let own = fnv1a(instance_id.as_bytes());
    (0..layers)
        .map(|layer| {
            let seed = match layer {
                0 => format!("{zone}/spine"),
                l if l + 1 < layers => format!("{zone}/{l}/{}", own % (4 * l as u64)),
                _ => format!("{zone}/{instance_id}"),
            };
            let h = fnv1a(seed.as_bytes());
            format!("nn-{:x}{h:016x}", fnv1a(&h.to_le_bytes()) & 0xf)
        })
        .collect()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What a DescribeInstanceTopology request asks.
#[derive(Debug, Default, PartialEq, Eq)]
struct Query {
    instance_ids: Vec<String>,
    max_results: Option<usize>,
    next_token: Option<usize>,
}

fn parse_query(body: &[u8]) -> Result<Query, (&'static str, String)> {
    let mut q = Query::default();
    for (k, v) in form_urlencoded::parse(body) {
        if k.starts_with("InstanceId.") {
            q.instance_ids.push(v.into_owned());
        } else if k == "MaxResults" {
            let n: usize = v.parse().map_err(|_| {
                (
                    "InvalidParameterValue",
                    format!("MaxResults {v:?} is not a number"),
                )
            })?;
            if !(5..=100).contains(&n) {
                return Err((
                    "InvalidParameterValue",
                    format!("MaxResults must be between 5 and 100, got {n}"),
                ));
            }
            q.max_results = Some(n);
        } else if k == "NextToken" {
            q.next_token = Some(
                v.parse()
                    .map_err(|_| ("InvalidNextToken", format!("the token {v:?} is invalid")))?,
            );
        }
    }
    if q.instance_ids.len() > MAX_IDS {
        return Err((
            "InvalidParameterValue",
            format!(
                "at most {MAX_IDS} instance IDs may be given, got {}",
                q.instance_ids.len()
            ),
        ));
    }
    if !q.instance_ids.is_empty() && q.max_results.is_some() {
        return Err((
            "InvalidParameterCombination",
            "The parameter instanceIds cannot be used with the parameter maxResults".into(),
        ));
    }
    Ok(q)
}

/// One instance as moto describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MotoInstance {
    id: String,
    instance_type: String,
    zone: String,
    state: String,
    group: Option<String>,
}

fn child<'a>(node: roxmltree::Node<'a, 'a>, name: &str) -> Option<roxmltree::Node<'a, 'a>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

fn children<'a>(
    node: roxmltree::Node<'a, 'a>,
    name: &'a str,
) -> impl Iterator<Item = roxmltree::Node<'a, 'a>> {
    node.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

fn text(node: Option<roxmltree::Node>) -> String {
    node.and_then(|n| n.text()).unwrap_or_default().to_string()
}

/// Instances of a DescribeInstances answer.
fn parse_instances(xml: &str) -> Result<Vec<MotoInstance>, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| e.to_string())?;
    let root = doc.root_element();
    let mut out = Vec::new();
    let Some(reservations) = child(root, "reservationSet") else {
        return Ok(out);
    };
    for r in children(reservations, "item") {
        let Some(set) = child(r, "instancesSet") else {
            continue;
        };
        for i in children(set, "item") {
            let placement = child(i, "placement");
            out.push(MotoInstance {
                id: text(child(i, "instanceId")),
                instance_type: text(child(i, "instanceType")),
                zone: text(placement.and_then(|p| child(p, "availabilityZone"))),
                state: text(child(i, "instanceState").and_then(|s| child(s, "name"))),
                group: Some(text(placement.and_then(|p| child(p, "groupName"))))
                    .filter(|g| !g.is_empty()),
            });
        }
    }
    Ok(out)
}

/// Zone name → zone ID of a DescribeAvailabilityZones answer.
fn parse_zone_ids(xml: &str) -> Result<BTreeMap<String, String>, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| e.to_string())?;
    let Some(set) = child(doc.root_element(), "availabilityZoneInfo") else {
        return Ok(BTreeMap::new());
    };
    Ok(children(set, "item")
        .map(|z| (text(child(z, "zoneName")), text(child(z, "zoneId"))))
        .collect())
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The answer body for `instances` (already filtered and paged).
fn render(
    instances: &[MotoInstance],
    zone_ids: &BTreeMap<String, String>,
    next_token: Option<usize>,
) -> String {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstanceTopologyResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\n    <requestId>stratus-topology</requestId>\n    <instanceSet>\n",
    );
    for i in instances {
        let layers = layers_of(&i.instance_type).unwrap_or(3);
        xml.push_str("        <item>\n");
        xml.push_str(&format!(
            "            <instanceId>{}</instanceId>\n            <instanceType>{}</instanceType>\n",
            xml_escape(&i.id),
            xml_escape(&i.instance_type)
        ));
        if let Some(g) = &i.group {
            xml.push_str(&format!(
                "            <groupName>{}</groupName>\n",
                xml_escape(g)
            ));
        }
        xml.push_str("            <networkNodeSet>\n");
        if i.state == "running" {
            for n in network_nodes(&i.zone, &i.id, layers) {
                xml.push_str(&format!("                <item>{n}</item>\n"));
            }
        }
        xml.push_str("            </networkNodeSet>\n");
        xml.push_str(&format!(
            "            <availabilityZone>{}</availabilityZone>\n",
            xml_escape(&i.zone)
        ));
        if let Some(id) = zone_ids.get(&i.zone) {
            xml.push_str(&format!(
                "            <zoneId>{}</zoneId>\n",
                xml_escape(id)
            ));
        }
        xml.push_str("        </item>\n");
    }
    xml.push_str("    </instanceSet>\n");
    if let Some(t) = next_token {
        xml.push_str(&format!("    <nextToken>{t}</nextToken>\n"));
    }
    xml.push_str("</DescribeInstanceTopologyResponse>\n");
    xml
}

fn layers_of(instance_type: &str) -> Option<usize> {
    SUPPORTED_TYPES
        .iter()
        .find(|(t, _)| *t == instance_type)
        .map(|(_, l)| *l)
}

pub(crate) fn ec2_error(status: StatusCode, code: &str, message: &str) -> Response<ProxyBody> {
    let body = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{}</Message></Error></Errors><RequestID>stratus-topology</RequestID></Response>", xml_escape(message));
    xml_response(status, body)
}

fn xml_response(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(full(body.into_bytes()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    response
}

/// Sends a query-protocol EC2 request `form` to moto with the caller's headers (credentials and
/// region); the answer body, or a message.
pub(crate) async fn ask_moto(
    upstream: &Upstream,
    like: &http::request::Parts,
    form: String,
) -> Result<String, String> {
    let mut builder = Request::builder()
        .method(Method::POST)
        .uri(like.uri.clone());
    for (name, value) in &like.headers {
        if name != header::CONTENT_LENGTH {
            builder = builder.header(name, value);
        }
    }
    let (parts, ()) = builder
        .body(())
        .map_err(|e| format!("building the request: {e}"))?
        .into_parts();
    let response = upstream.forward(parts, Bytes::from(form)).await;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading moto's answer: {e}"))?
        .to_bytes();
    let body = String::from_utf8_lossy(&body).into_owned();
    if !status.is_success() {
        return Err(format!("moto answered {status}: {body}"));
    }
    Ok(body)
}

/// Answers one DescribeInstanceTopology request.
pub(crate) async fn answer(
    parts: &http::request::Parts,
    body: &Bytes,
    upstream: &Upstream,
) -> Response<ProxyBody> {
    let query = match parse_query(body) {
        Ok(q) => q,
        Err((code, message)) => return ec2_error(StatusCode::BAD_REQUEST, code, &message),
    };
    let mut form = String::from("Action=DescribeInstances&Version=2016-11-15");
    if !query.instance_ids.is_empty() {
        form.push_str("&Filter.1.Name=instance-id");
        let mut values = form_urlencoded::Serializer::new(String::new());
        for (n, id) in query.instance_ids.iter().enumerate() {
            values.append_pair(&format!("Filter.1.Value.{}", n + 1), id);
        }
        form.push('&');
        form.push_str(&values.finish());
    }
    let described = ask_moto(upstream, parts, form)
        .await
        .and_then(|xml| parse_instances(&xml));
    let zones = ask_moto(
        upstream,
        parts,
        "Action=DescribeAvailabilityZones&Version=2016-11-15".into(),
    )
    .await
    .and_then(|xml| parse_zone_ids(&xml));
    let (instances, zone_ids) = match (described, zones) {
        (Ok(i), Ok(z)) => (i, z),
        (Err(e), _) | (_, Err(e)) => {
            return ec2_error(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &e)
        }
    };
    let mut supported: Vec<MotoInstance> = instances
        .into_iter()
        .filter(|i| layers_of(&i.instance_type).is_some())
        .collect();
    supported.sort_by(|a, b| a.id.cmp(&b.id));
    let (page, next) = if query.instance_ids.is_empty() {
        let start = query.next_token.unwrap_or(0).min(supported.len());
        let size = query.max_results.unwrap_or(20);
        let end = (start + size).min(supported.len());
        (
            supported[start..end].to_vec(),
            (end < supported.len()).then_some(end),
        )
    } else {
        (supported, None)
    };
    xml_response(StatusCode::OK, render(&page, &zone_ids, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_follow_the_api_limits() {
        let q = parse_query(
            b"Action=DescribeInstanceTopology&Version=2016-11-15&InstanceId.1=i-1&InstanceId.2=i-2",
        )
        .unwrap();
        assert_eq!(q.instance_ids, vec!["i-1", "i-2"]);
        let many: String = (1..=101)
            .map(|n| format!("&InstanceId.{n}=i-{n}"))
            .collect();
        assert_eq!(
            parse_query(many.as_bytes()).unwrap_err().0,
            "InvalidParameterValue"
        );
        assert_eq!(
            parse_query(b"InstanceId.1=i-1&MaxResults=10")
                .unwrap_err()
                .0,
            "InvalidParameterCombination"
        );
        assert_eq!(
            parse_query(b"MaxResults=2").unwrap_err().0,
            "InvalidParameterValue"
        );
        let q = parse_query(b"MaxResults=5&NextToken=10").unwrap();
        assert_eq!((q.max_results, q.next_token), (Some(5), Some(10)));
    }

    #[test]
    fn network_nodes_look_like_ec2s() {
        let a = network_nodes("us-east-1a", "i-0123456789abcdef0", 3);
        let b = network_nodes("us-east-1a", "i-0fedcba9876543210", 3);
        assert_eq!(a.len(), 3);
        for n in &a {
            assert!(n.starts_with("nn-") && n.len() == 20, "{n}");
        }
        assert_eq!(a[0], b[0], "one top layer per zone");
        assert_ne!(a[2], b[2], "the last layer is the instance's own");
        assert_eq!(a, network_nodes("us-east-1a", "i-0123456789abcdef0", 3));
        assert_ne!(
            a[0],
            network_nodes("us-east-1b", "i-0123456789abcdef0", 3)[0]
        );
        assert_eq!(network_nodes("us-east-1a", "i-0", 4).len(), 4);
    }

    #[test]
    fn only_supported_types_are_answered_and_only_running_ones_have_nodes() {
        let moto = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <reservationSet><item><instancesSet>
    <item><instanceId>i-01</instanceId><instanceType>p4d.24xlarge</instanceType>
      <placement><availabilityZone>us-east-1a</availabilityZone><groupName>ml</groupName></placement>
      <instanceState><code>16</code><name>running</name></instanceState>
      <networkInterfaceSet><item><attachment><instanceId>i-01</instanceId></attachment></item></networkInterfaceSet></item>
    <item><instanceId>i-02</instanceId><instanceType>m5.large</instanceType>
      <placement><availabilityZone>us-east-1a</availabilityZone></placement>
      <instanceState><name>running</name></instanceState></item>
    <item><instanceId>i-03</instanceId><instanceType>trn1.2xlarge</instanceType>
      <placement><availabilityZone>us-east-1b</availabilityZone></placement>
      <instanceState><name>stopped</name></instanceState></item>
  </instancesSet></item></reservationSet>
</DescribeInstancesResponse>"#;
        let instances = parse_instances(moto).unwrap();
        assert_eq!(instances.len(), 3);
        assert_eq!(instances[0].group.as_deref(), Some("ml"));
        let supported: Vec<MotoInstance> = instances
            .into_iter()
            .filter(|i| layers_of(&i.instance_type).is_some())
            .collect();
        let zones = BTreeMap::from([("us-east-1a".to_string(), "use1-az6".to_string())]);
        let xml = render(&supported, &zones, None);
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let set = child(doc.root_element(), "instanceSet").unwrap();
        let items: Vec<_> = children(set, "item").collect();
        assert_eq!(items.len(), 2, "{xml}");
        let nodes = |item: roxmltree::Node| -> Vec<String> {
            children(child(item, "networkNodeSet").unwrap(), "item")
                .map(|n| n.text().unwrap().to_string())
                .collect()
        };
        assert_eq!(nodes(items[0]), network_nodes("us-east-1a", "i-01", 3));
        assert_eq!(text(child(items[0], "zoneId")), "use1-az6");
        assert_eq!(text(child(items[0], "groupName")), "ml");
        assert!(
            nodes(items[1]).is_empty(),
            "a stopped instance has no nodes"
        );
        assert!(child(doc.root_element(), "nextToken").is_none());
    }
}
