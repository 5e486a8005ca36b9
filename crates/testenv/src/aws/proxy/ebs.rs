//! EC2 volume behaviour moto 5.2.5 lacks, switched on per knob (`POST /__stratus/ebs` with an
//! [`EbsKnobs`] body; `GET` answers the knobs in force). Every knob defaults off, and posting
//! `{}` turns everything off and forgets what the proxy tracked, so a proxy without knobs passes
//! volume calls through unchanged.
//!
//! - `volume_in_use`: `AttachVolume` of a volume that already has an attachment and is not
//!   multi-attach is answered `VolumeInUse` (400), as EC2 does; moto accepts it silently.
//! - `client_token`: `CreateVolume` is idempotent by `ClientToken`: the same token with the
//!   same parameters answers the volume created first (while it exists), with other parameters
//!   `IdempotentParameterMismatch` (400). Calls with one token are serialized.
//! - `attaching_millis` / `attaching_stuck`: an attachment stays `attaching` in
//!   `DescribeVolumes` for that long after its `AttachVolume`, or until `attaching_stuck` is
//!   posted false again ("stuck"); `DetachVolume` ends it.
//! - `modifying_millis`: a `ModifyVolume` stays `modifying` (progress 0) in its answer and in
//!   `DescribeVolumesModifications` for that long, `DescribeVolumes` keeps showing the original
//!   size meanwhile, and another `ModifyVolume` of the volume is `IncorrectModificationState`.
//!
//! The proxy's own describes (to check attachments and find a token's volume) go to moto
//! uncounted.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Bytes;
use tokio::time::Instant;

use super::paging::items_of;
use super::topology::{ask_moto, ec2_error};
use crate::core::proxy::{error_response, full, json_response, ProxyBody, Upstream};

/// Path of the EBS knobs endpoint.
pub const EBS_PATH: &str = "/__stratus/ebs";

/// The EC2 volume knobs (see the module doc); all off by default.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EbsKnobs {
    /// `AttachVolume` of an attached, non-multi-attach volume fails with `VolumeInUse`.
    pub volume_in_use: bool,
    /// `CreateVolume` is idempotent by `ClientToken`.
    pub client_token: bool,
    /// New attachments stay `attaching` this long.
    pub attaching_millis: Option<u64>,
    /// New attachments stay `attaching` until this is posted false (wins over the millis).
    pub attaching_stuck: bool,
    /// Volume modifications stay `modifying` this long.
    pub modifying_millis: Option<u64>,
}

/// Until when a tracked attachment or modification shows its pending state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    At(Instant),
    Stuck,
}

impl Until {
    fn pending(self, now: Instant) -> bool {
        match self {
            Until::At(t) => now < t,
            Until::Stuck => true,
        }
    }
}

/// A modification kept `modifying`.
#[derive(Debug, Clone)]
struct Modifying {
    original_size: String,
    target_size: String,
    until: Instant,
}

#[derive(Debug, Default)]
struct State {
    knobs: EbsKnobs,
    /// (volume, instance) → until when it shows `attaching`.
    attaching: HashMap<(String, String), Until>,
    /// volume → its modification in progress.
    modifying: HashMap<String, Modifying>,
    /// ClientToken → (parameter digest, volume).
    tokens: HashMap<String, (String, String)>,
}

/// The knobs and what the proxy tracks for them.
#[derive(Debug, Default)]
pub struct EbsState {
    state: Mutex<State>,
    /// Serializes `CreateVolume` calls carrying a token.
    creating: tokio::sync::Mutex<()>,
}

/// The EC2 actions this module may answer or rewrite.
const ACTIONS: [&str; 6] = [
    "CreateVolume",
    "AttachVolume",
    "DetachVolume",
    "ModifyVolume",
    "DescribeVolumes",
    "DescribeVolumesModifications",
];

impl EbsState {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether an EC2 `action` goes through [`EbsState::exchange`]: only while some knob is on.
    pub fn handles(&self, action: &str) -> bool {
        let s = self.lock();
        s.knobs != EbsKnobs::default() && ACTIONS.contains(&action)
    }

    /// Serves [`EBS_PATH`].
    pub fn control(&self, method: &Method, body: &Bytes) -> Option<Response<ProxyBody>> {
        match *method {
            Method::GET => {
                let knobs = self.lock().knobs.clone();
                Some(json_response(
                    StatusCode::OK,
                    serde_json::to_vec(&knobs).unwrap_or_default(),
                ))
            }
            Method::POST => Some(match serde_json::from_slice::<EbsKnobs>(body) {
                Ok(knobs) => {
                    self.set(knobs);
                    json_response(StatusCode::OK, b"{}".to_vec())
                }
                Err(e) => error_response(StatusCode::BAD_REQUEST, &format!("ebs knobs: {e}")),
            }),
            _ => None,
        }
    }

    fn set(&self, knobs: EbsKnobs) {
        let mut s = self.lock();
        if knobs == EbsKnobs::default() {
            *s = State::default();
            return;
        }
        if !knobs.attaching_stuck {
            // Unstuck: attachments held so far complete now.
            s.attaching.retain(|_, until| *until != Until::Stuck);
        }
        if !knobs.client_token {
            s.tokens.clear();
        }
        s.knobs = knobs;
    }

    /// Carries one EC2 volume call (see [`EbsState::handles`]).
    pub async fn exchange(
        &self,
        action: &str,
        parts: http::request::Parts,
        body: Bytes,
        upstream: &Upstream,
    ) -> Response<ProxyBody> {
        let form: BTreeMap<String, String> = form_urlencoded::parse(&body)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let knobs = self.lock().knobs.clone();
        match action {
            "CreateVolume" if knobs.client_token && form.contains_key("ClientToken") => {
                let _one = self.creating.lock().await;
                self.create_volume(&form, parts, body, upstream).await
            }
            "AttachVolume" => {
                let volume = form.get("VolumeId").cloned().unwrap_or_default();
                if knobs.volume_in_use {
                    if let Some(refused) = in_use(&volume, &parts, upstream).await {
                        return refused;
                    }
                }
                let instance = form.get("InstanceId").cloned().unwrap_or_default();
                let (answer, ok) = forward_text(parts, body, upstream).await;
                let until = if knobs.attaching_stuck {
                    Some(Until::Stuck)
                } else {
                    knobs
                        .attaching_millis
                        .map(|ms| Until::At(Instant::now() + Duration::from_millis(ms)))
                };
                if let (true, Some(until)) = (ok, until) {
                    self.lock().attaching.insert((volume, instance), until);
                }
                answer
            }
            "DetachVolume" => {
                let (answer, ok) = forward_text(parts, body, upstream).await;
                if ok {
                    let volume = form.get("VolumeId").cloned().unwrap_or_default();
                    let instance = form.get("InstanceId");
                    self.lock().attaching.retain(|(v, i), _| {
                        !(*v == volume && instance.is_none_or(|want| want == i))
                    });
                }
                answer
            }
            "ModifyVolume" => {
                self.modify_volume(&form, &knobs, parts, body, upstream)
                    .await
            }
            "DescribeVolumes" | "DescribeVolumesModifications" => {
                let (answer, ok) = forward_text(parts, body, upstream).await;
                if !ok {
                    return answer;
                }
                let text = text_of(answer).await;
                let now = Instant::now();
                let s = self.lock();
                let rewritten = if action == "DescribeVolumes" {
                    describe_volumes(&text, &s, now)
                } else {
                    rewrite_items(&text, "volumeModificationSet", |item| {
                        modification_item(item, &s, now)
                    })
                };
                xml_ok(rewritten.unwrap_or(text))
            }
            _ => upstream.forward(parts, body).await,
        }
    }

    async fn create_volume(
        &self,
        form: &BTreeMap<String, String>,
        parts: http::request::Parts,
        body: Bytes,
        upstream: &Upstream,
    ) -> Response<ProxyBody> {
        let token = form.get("ClientToken").cloned().unwrap_or_default();
        let digest = parameter_digest(form);
        let known = self.lock().tokens.get(&token).cloned();
        if let Some((known_digest, volume)) = known {
            if known_digest != digest {
                return ec2_error(
                    StatusCode::BAD_REQUEST,
                    "IdempotentParameterMismatch",
                    &format!("ClientToken {token} was used with other parameters"),
                );
            }
            let described = ask_moto(upstream, &parts, describe_form(&volume)).await;
            match described
                .ok()
                .and_then(|xml| first_item_content(&xml, "volumeSet"))
            {
                Some(content) => {
                    return xml_ok(format!(
                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CreateVolumeResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">{content}<requestId>stratus-ebs</requestId></CreateVolumeResponse>"
                    ))
                }
                // The volume is gone: the token starts over.
                None => {
                    self.lock().tokens.remove(&token);
                }
            }
        }
        let (answer, ok) = forward_text(parts, body, upstream).await;
        if !ok {
            return answer;
        }
        let text = text_of(answer).await;
        if let Some(volume) = tag_value(&text, "volumeId") {
            self.lock()
                .tokens
                .insert(token, (digest, volume.to_string()));
        }
        xml_ok(text)
    }

    async fn modify_volume(
        &self,
        form: &BTreeMap<String, String>,
        knobs: &EbsKnobs,
        parts: http::request::Parts,
        body: Bytes,
        upstream: &Upstream,
    ) -> Response<ProxyBody> {
        let volume = form.get("VolumeId").cloned().unwrap_or_default();
        let Some(millis) = knobs.modifying_millis else {
            return upstream.forward(parts, body).await;
        };
        let busy = self
            .lock()
            .modifying
            .get(&volume)
            .is_some_and(|m| Instant::now() < m.until);
        if busy {
            return ec2_error(
                StatusCode::BAD_REQUEST,
                "IncorrectModificationState",
                &format!("Volume {volume} is already being modified"),
            );
        }
        let (answer, ok) = forward_text(parts, body, upstream).await;
        if !ok {
            return answer;
        }
        let text = text_of(answer).await;
        let (Some(original), Some(target)) = (
            tag_value(&text, "originalSize").map(str::to_string),
            tag_value(&text, "targetSize").map(str::to_string),
        ) else {
            return xml_ok(text);
        };
        let mut s = self.lock();
        s.modifying.insert(
            volume,
            Modifying {
                original_size: original,
                target_size: target,
                until: Instant::now() + Duration::from_millis(millis),
            },
        );
        xml_ok(modifying(&text))
    }
}

/// `VolumeInUse` when moto shows `volume` attached and not multi-attach; `None` lets it on.
async fn in_use(
    volume: &str,
    parts: &http::request::Parts,
    upstream: &Upstream,
) -> Option<Response<ProxyBody>> {
    let xml = ask_moto(upstream, parts, describe_form(volume))
        .await
        .ok()?;
    let item = first_item_content(&xml, "volumeSet")?;
    if tag_value(&item, "multiAttachEnabled") == Some("true") {
        return None;
    }
    let (_, attachments) = items_of(&item, "attachmentSet")?;
    let attached_to = attachments.iter().find_map(|range| {
        let a = &item[range.clone()];
        (tag_value(a, "status") != Some("detached"))
            .then(|| tag_value(a, "instanceId").unwrap_or_default().to_string())
    })?;
    Some(ec2_error(
        StatusCode::BAD_REQUEST,
        "VolumeInUse",
        &format!("{volume} is already attached to an instance ({attached_to})"),
    ))
}

fn describe_form(volume: &str) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("Action", "DescribeVolumes")
        .append_pair("Version", "2016-11-15")
        .append_pair("Filter.1.Name", "volume-id")
        .append_pair("Filter.1.Value.1", volume)
        .finish()
}

/// A digest of every parameter but the token, in name order (stable within the process).
fn parameter_digest(form: &BTreeMap<String, String>) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for (k, v) in form.iter().filter(|(k, _)| *k != "ClientToken") {
        (k, v).hash(&mut hasher);
    }
    format!("{:016x}", hasher.finish())
}

/// Forwards; the answer and whether it succeeded.
async fn forward_text(
    parts: http::request::Parts,
    body: Bytes,
    upstream: &Upstream,
) -> (Response<ProxyBody>, bool) {
    let answer = upstream.forward(parts, body).await;
    let ok = answer.status().is_success();
    (answer, ok)
}

async fn text_of(answer: Response<ProxyBody>) -> String {
    match answer.into_body().collect().await {
        Ok(c) => String::from_utf8_lossy(&c.to_bytes()).into_owned(),
        Err(_) => String::new(),
    }
}

fn xml_ok(text: String) -> Response<ProxyBody> {
    let mut response = Response::new(full(text.into_bytes()));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/xml"),
    );
    response
}

/// The text of the first `<tag>` element.
pub fn tag_value<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{tag}>"))?;
    Some(&xml[start..end])
}

/// The content of the first top-level `<item>` of `<set>`.
fn first_item_content(xml: &str, set: &str) -> Option<String> {
    let (_, items) = items_of(xml, set)?;
    let item = &xml[items.first()?.clone()];
    Some(item["<item>".len()..item.len() - "</item>".len()].to_string())
}

/// `xml` with each top-level item of `<set>` passed through `rewrite`.
fn rewrite_items(xml: &str, set: &str, rewrite: impl Fn(&str) -> String) -> Option<String> {
    let (_, items) = items_of(xml, set)?;
    let mut out = String::with_capacity(xml.len() + 64);
    let mut at = 0;
    for range in items {
        out.push_str(&xml[at..range.start]);
        out.push_str(&rewrite(&xml[range.clone()]));
        at = range.end;
    }
    out.push_str(&xml[at..]);
    Some(out)
}

/// A `DescribeVolumes` answer with pending attachments `attaching` and sizes under
/// modification at their original value.
fn describe_volumes(xml: &str, s: &State, now: Instant) -> Option<String> {
    rewrite_items(xml, "volumeSet", |item| {
        let Some(volume) = tag_value(item, "volumeId").map(str::to_string) else {
            return item.to_string();
        };
        let mut item = item.to_string();
        if let Some(m) = s.modifying.get(&volume).filter(|m| now < m.until) {
            item = item.replacen(
                &format!("<size>{}</size>", m.target_size),
                &format!("<size>{}</size>", m.original_size),
                1,
            );
        }
        rewrite_items(&item, "attachmentSet", |a| {
            let instance = tag_value(a, "instanceId").unwrap_or_default().to_string();
            let pending = s
                .attaching
                .get(&(volume.clone(), instance))
                .is_some_and(|u| u.pending(now));
            if pending {
                a.replace("<status>attached</status>", "<status>attaching</status>")
            } else {
                a.to_string()
            }
        })
        .unwrap_or(item)
    })
}

/// A modification item kept `modifying` while its volume is tracked.
fn modification_item(item: &str, s: &State, now: Instant) -> String {
    let volume = tag_value(item, "volumeId").unwrap_or_default();
    match s.modifying.get(volume) {
        Some(m) if now < m.until && tag_value(item, "targetSize") == Some(&m.target_size) => {
            modifying(item)
        }
        _ => item.to_string(),
    }
}

/// A modification (item or answer) shown `modifying` at progress 0.
fn modifying(xml: &str) -> String {
    let mut out = xml.replacen(
        "<modificationState>completed</modificationState>",
        "<modificationState>modifying</modificationState>",
        1,
    );
    if let Some(p) = tag_value(&out, "progress").map(str::to_string) {
        out = out.replacen(
            &format!("<progress>{p}</progress>"),
            "<progress>0</progress>",
            1,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const VOLUMES: &str = "<DescribeVolumesResponse><volumeSet><item><volumeId>vol-1</volumeId><size>4</size><status>in-use</status><attachmentSet><item><volumeId>vol-1</volumeId><instanceId>i-1</instanceId><device>/dev/xvdba</device><status>attached</status></item></attachmentSet></item><item><volumeId>vol-2</volumeId><size>4</size><attachmentSet><item><volumeId>vol-2</volumeId><instanceId>i-1</instanceId><status>attached</status></item></attachmentSet></item></volumeSet></DescribeVolumesResponse>";

    #[test]
    fn pending_attachments_show_attaching_until_their_time() {
        let now = Instant::now();
        let mut s = State::default();
        s.attaching
            .insert(("vol-1".into(), "i-1".into()), Until::Stuck);
        s.attaching.insert(
            ("vol-2".into(), "i-1".into()),
            Until::At(now - Duration::from_millis(1)),
        );
        let out = describe_volumes(VOLUMES, &s, now).unwrap();
        assert!(
            out.contains(
                "<instanceId>i-1</instanceId><device>/dev/xvdba</device><status>attaching</status>"
            ),
            "{out}"
        );
        assert_eq!(out.matches("<status>attached</status>").count(), 1, "{out}");
    }

    #[test]
    fn sizes_under_modification_stay_original() {
        let now = Instant::now();
        let mut s = State::default();
        s.modifying.insert(
            "vol-2".into(),
            Modifying {
                original_size: "2".into(),
                target_size: "4".into(),
                until: now + Duration::from_secs(5),
            },
        );
        let out = describe_volumes(VOLUMES, &s, now).unwrap();
        assert!(
            out.contains("<volumeId>vol-2</volumeId><size>2</size>"),
            "{out}"
        );
        assert!(
            out.contains("<volumeId>vol-1</volumeId><size>4</size>"),
            "{out}"
        );
        let item = "<item><volumeId>vol-2</volumeId><modificationState>completed</modificationState><targetSize>4</targetSize><originalSize>2</originalSize><progress>100</progress></item>";
        let shown = modification_item(item, &s, now);
        assert!(shown.contains("<modificationState>modifying</modificationState>"));
        assert!(shown.contains("<progress>0</progress>"));
        assert_eq!(
            modification_item(item, &s, now + Duration::from_secs(6)),
            item
        );
    }

    #[test]
    fn token_digests_ignore_the_token_only() {
        let form = |token: &str, size: &str| -> BTreeMap<String, String> {
            [("ClientToken", token), ("Size", size)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            parameter_digest(&form("a", "2")),
            parameter_digest(&form("b", "2"))
        );
        assert_ne!(
            parameter_digest(&form("a", "2")),
            parameter_digest(&form("a", "3"))
        );
    }

    #[test]
    fn knobs_default_off_and_unstick() {
        let ebs = EbsState::default();
        assert!(!ebs.handles("AttachVolume"));
        ebs.set(EbsKnobs {
            attaching_stuck: true,
            ..Default::default()
        });
        assert!(ebs.handles("DescribeVolumes") && !ebs.handles("DescribeInstances"));
        ebs.lock()
            .attaching
            .insert(("v".into(), "i".into()), Until::Stuck);
        ebs.set(EbsKnobs {
            volume_in_use: true,
            ..Default::default()
        });
        assert!(ebs.lock().attaching.is_empty());
        ebs.set(EbsKnobs::default());
        assert!(!ebs.handles("AttachVolume"));
        let parsed: Result<EbsKnobs, _> = serde_json::from_str(r#"{"attaching_stuk": true}"#);
        assert!(parsed.is_err(), "unknown knobs are refused");
    }
}
