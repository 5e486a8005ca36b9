//! Volume attachments (Nova `os-volume_attachments` over Cinder volumes): the attach, detach
//! and extend rules as pure checks, device names per server, the volume status attachments
//! imply, and the timed transitions attaching → attached, detaching → gone, extending → done.
//! Deleting a server drops its attachments at once.

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::model::{Change, ModelError, ServerStatus, State};
use crate::util::{iso_micro, new_id, now_secs};

/// Where an attachment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachState {
    /// Nova accepted it; the volume is `attaching`.
    Attaching,
    /// Attached; the volume is `in-use`.
    Attached,
    /// Being detached; the volume is `detaching`.
    Detaching,
}

/// One volume attached (or being attached) to one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The attachment's UUID (`attachment_id`).
    pub id: String,
    /// The volume.
    pub volume_id: String,
    /// The server.
    pub server_id: String,
    /// The guest device (`/dev/vdb`…).
    pub device: String,
    /// The device tag (2.49+).
    pub tag: Option<String>,
    /// Delete the volume with the server (2.79+).
    pub delete_on_termination: bool,
    /// Its state.
    pub state: AttachState,
    /// When it was made (Unix seconds).
    pub created: i64,
    /// Nova's block-device-mapping UUID (2.89+).
    pub bdm_uuid: String,
}

/// What a caller may ask of an attachment beyond volume and server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttachOptions {
    /// The device tag (2.49+).
    pub tag: Option<String>,
    /// Delete the volume with the server (2.79+).
    pub delete_on_termination: bool,
    /// Whether the microversion allows multi-attach volumes (2.60+).
    pub multiattach_allowed: bool,
}

/// The volume type extra spec that allows multi-attach.
pub const MULTIATTACH_SPEC: &str = "multiattach";

/// Whether a volume type's extra specs allow multi-attach (`<is> True`).
pub fn type_is_multiattach(volume_type: &Value) -> bool {
    volume_type["extra_specs"][MULTIATTACH_SPEC]
        .as_str()
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("<is> true"))
}

/// The status a volume's attachments imply (`available` when there are none).
pub fn implied_status(states: &[AttachState]) -> &'static str {
    if states.contains(&AttachState::Attaching) {
        "attaching"
    } else if states.contains(&AttachState::Detaching) {
        "detaching"
    } else if states.is_empty() {
        "available"
    } else {
        "in-use"
    }
}

/// Statuses that attachments own (others — creating, extending, deleting, error… — win).
fn attachment_status(status: &str) -> bool {
    matches!(status, "available" | "attaching" | "in-use" | "detaching")
}

/// The first free guest device after the root disk (`/dev/vdb` … `/dev/vdz`).
pub fn next_device(used: &[&str]) -> Option<String> {
    (b'b'..=b'z')
        .map(|c| format!("/dev/vd{}", c as char))
        .find(|d| !used.contains(&d.as_str()))
}

/// Nova's checks before attaching `volume` to a server in `status`/`task`: `existing` are the
/// volume's attachments (as server ids), `multiattach_allowed` whether the microversion is 2.60+.
pub fn check_attach(
    volume: &Value,
    server_id: &str,
    status: ServerStatus,
    task: Option<&str>,
    existing: &[&str],
    multiattach_allowed: bool,
) -> Result<(), ModelError> {
    if let Some(task) = task {
        return Err(ModelError::Conflict(format!(
            "Cannot 'attach_volume' instance {server_id} while it is in task_state {task}"
        )));
    }
    if !matches!(status, ServerStatus::Active | ServerStatus::Shutoff) {
        return Err(ModelError::Conflict(format!(
            "Cannot 'attach_volume' instance {server_id} while it is in vm_state {}",
            status.vm_state()
        )));
    }
    let id = volume["id"].as_str().unwrap_or_default();
    let multiattach = volume["multiattach"] == json!(true);
    if multiattach && !multiattach_allowed {
        return Err(ModelError::Invalid(
            "Multiattach volumes are only supported starting with compute API version 2.60.".into(),
        ));
    }
    if existing.contains(&server_id) {
        return Err(ModelError::Invalid(format!(
            "Invalid volume: volume {id} already attached"
        )));
    }
    let status = volume["status"].as_str().unwrap_or_default();
    let free = status == "available" || (multiattach && status == "in-use");
    if !free {
        return Err(ModelError::Invalid(format!(
            "Invalid volume: Volume {id} status must be available or downloading to reserve, but the current status is {status}."
        )));
    }
    Ok(())
}

/// Cinder's checks before extending `volume` to `new_size`; `in_use_allowed` whether the
/// microversion is 3.42+.
pub fn check_extend(volume: &Value, new_size: u64, in_use_allowed: bool) -> Result<(), ModelError> {
    let status = volume["status"].as_str().unwrap_or_default();
    if !(status == "available" || (in_use_allowed && status == "in-use")) {
        let allowed = if in_use_allowed {
            "'available' or 'in-use'"
        } else {
            "'available'"
        };
        return Err(ModelError::Invalid(format!(
            "Invalid volume: Volume status must be {allowed} to extend, currently {status}."
        )));
    }
    let size = volume["size"].as_u64().unwrap_or_default();
    if new_size <= size {
        return Err(ModelError::Invalid(format!(
            "Invalid input received: New size for extend must be greater than current size. (current: {size}, extended: {new_size})."
        )));
    }
    Ok(())
}

impl State {
    /// The attachments of one volume.
    pub fn volume_attachments(&self, volume_id: &str) -> Vec<&Attachment> {
        self.attachments
            .values()
            .filter(|a| a.volume_id == volume_id)
            .collect()
    }

    /// The attachments of one server, oldest first.
    pub fn server_attachments(&self, server_id: &str) -> Vec<&Attachment> {
        let mut out: Vec<&Attachment> = self
            .attachments
            .values()
            .filter(|a| a.server_id == server_id)
            .collect();
        out.sort_by(|a, b| a.device.cmp(&b.device));
        out
    }

    /// Starts attaching a volume of `project` (None: any) to a server: the attachment is
    /// `attaching` until its transition is due.
    pub fn attach_volume(
        &mut self,
        server_id: &str,
        volume_id: &str,
        project: Option<&str>,
        options: AttachOptions,
        now: Instant,
    ) -> Result<Attachment, ModelError> {
        let server = self
            .servers
            .get(server_id)
            .ok_or_else(|| ModelError::NotFound("Instance", server_id.to_owned()))?;
        let volume = self
            .volumes
            .get(volume_id)
            .filter(|v| project.is_none_or(|p| v["os-vol-tenant-attr:tenant_id"] == p))
            .ok_or_else(|| ModelError::NotFound("Volume", volume_id.to_owned()))?;
        let existing: Vec<&str> = self
            .volume_attachments(volume_id)
            .iter()
            .map(|a| a.server_id.as_str())
            .collect();
        check_attach(
            volume,
            server_id,
            server.status,
            server.task_state,
            &existing,
            options.multiattach_allowed,
        )?;
        let used: Vec<&str> = self
            .server_attachments(server_id)
            .iter()
            .map(|a| a.device.as_str())
            .collect();
        let device = next_device(&used).ok_or_else(|| {
            ModelError::Invalid(format!("No free device name on instance {server_id}"))
        })?;
        let attachment = Attachment {
            id: new_id(),
            volume_id: volume_id.to_owned(),
            server_id: server_id.to_owned(),
            device,
            tag: options.tag,
            delete_on_termination: options.delete_on_termination,
            state: AttachState::Attaching,
            created: now_secs(),
            bdm_uuid: new_id(),
        };
        self.attachments
            .insert(attachment.id.clone(), attachment.clone());
        self.sync_volume(volume_id);
        let delay = self.knobs.attach_delay;
        self.schedule(&attachment.id, Change::Attached, now, delay);
        Ok(attachment)
    }

    /// Starts detaching a volume from a server: the attachment is `detaching` until gone.
    pub fn detach_volume(
        &mut self,
        server_id: &str,
        volume_id: &str,
        now: Instant,
    ) -> Result<(), ModelError> {
        let attachment = self
            .attachments
            .values_mut()
            .find(|a| a.server_id == server_id && a.volume_id == volume_id)
            .ok_or_else(|| ModelError::NotFound("volume_id", volume_id.to_owned()))?;
        if attachment.state != AttachState::Attached {
            return Err(ModelError::Invalid("Invalid volume: Unable to detach volume. Volume status must be 'in-use' and attach_status must be 'attached' to detach.".into()));
        }
        attachment.state = AttachState::Detaching;
        let id = attachment.id.clone();
        self.sync_volume(volume_id);
        let delay = self.knobs.attach_delay;
        self.schedule(&id, Change::Detached, now, delay);
        Ok(())
    }

    /// Starts extending a volume (`extending` until its transition is due).
    pub fn extend_volume(
        &mut self,
        volume_id: &str,
        new_size: u64,
        in_use_allowed: bool,
        now: Instant,
    ) -> Result<(), ModelError> {
        let volume = self
            .volumes
            .get_mut(volume_id)
            .ok_or_else(|| ModelError::NotFound("Volume", volume_id.to_owned()))?;
        check_extend(volume, new_size, in_use_allowed)?;
        volume["status"] = json!("extending");
        let change = if self.knobs.fail {
            Change::Volume("error_extending")
        } else {
            Change::Extended(new_size)
        };
        let delay = self.knobs.volume_delay;
        self.schedule(volume_id, change, now, delay);
        Ok(())
    }

    /// Applies an attachment's or an extension's transition.
    pub(crate) fn apply_volume_change(&mut self, id: &str, change: Change) {
        match change {
            Change::Attached => {
                if let Some(a) = self.attachments.get_mut(id) {
                    a.state = AttachState::Attached;
                    let volume = a.volume_id.clone();
                    self.sync_volume(&volume);
                }
            }
            Change::Detached => {
                if let Some(a) = self.attachments.remove(id) {
                    self.sync_volume(&a.volume_id);
                }
            }
            Change::Extended(size) => {
                if let Some(volume) = self.volumes.get_mut(id) {
                    volume["size"] = json!(size);
                    volume["status"] = json!("available");
                    self.sync_volume(id);
                }
            }
            _ => {}
        }
    }

    /// Drops a server's attachments at once (the server is gone); volumes marked
    /// delete-on-termination go too.
    pub(crate) fn drop_server_attachments(&mut self, server_id: &str) {
        let gone: Vec<Attachment> = self
            .attachments
            .values()
            .filter(|a| a.server_id == server_id)
            .cloned()
            .collect();
        for a in gone {
            self.attachments.remove(&a.id);
            self.timed.retain(|t| t.id != a.id);
            self.sync_volume(&a.volume_id);
            if a.delete_on_termination && self.volume_attachments(&a.volume_id).is_empty() {
                self.volumes.remove(&a.volume_id);
            }
        }
    }

    /// Writes a volume's `attachments` and (unless another status owns it) its `status`.
    fn sync_volume(&mut self, volume_id: &str) {
        let mut mine: Vec<&Attachment> = self.volume_attachments(volume_id);
        mine.sort_by_key(|a| a.created);
        let states: Vec<AttachState> = mine.iter().map(|a| a.state).collect();
        let listed: Vec<Value> = mine
            .iter()
            .filter(|a| a.state != AttachState::Attaching)
            .map(|a| {
                json!({"id": a.volume_id, "attachment_id": a.id, "volume_id": a.volume_id,
                       "server_id": a.server_id, "host_name": null, "device": a.device,
                       "attached_at": iso_micro(a.created)})
            })
            .collect();
        if let Some(volume) = self.volumes.get_mut(volume_id) {
            volume["attachments"] = json!(listed);
            if volume["status"].as_str().is_some_and(attachment_status) {
                volume["status"] = json!(implied_status(&states));
            }
            volume["updated_at"] = json!(iso_micro(now_secs()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::NewServer;

    #[test]
    fn statuses_devices_and_refusals() {
        use AttachState::*;
        for (states, want) in [
            (vec![], "available"),
            (vec![Attached], "in-use"),
            (vec![Attached, Attaching], "attaching"),
            (vec![Attached, Detaching], "detaching"),
        ] {
            assert_eq!(implied_status(&states), want, "{states:?}");
        }
        assert_eq!(next_device(&[]).as_deref(), Some("/dev/vdb"));
        assert_eq!(
            next_device(&["/dev/vdb", "/dev/vdd"]).as_deref(),
            Some("/dev/vdc")
        );
        let vol = |status: &str, multi: bool| json!({"id": "v", "status": status, "multiattach": multi, "size": 1});
        let active = ServerStatus::Active;
        assert!(check_attach(&vol("available", false), "s", active, None, &[], false).is_ok());
        assert!(matches!(
            check_attach(&vol("in-use", false), "s", active, None, &["t"], true),
            Err(ModelError::Invalid(m)) if m.contains("current status is in-use")
        ));
        assert!(check_attach(&vol("in-use", true), "s", active, None, &["t"], true).is_ok());
        assert!(check_attach(&vol("in-use", true), "s", active, None, &["t"], false).is_err());
        assert!(check_attach(&vol("in-use", true), "s", active, None, &["s"], true).is_err());
        assert!(matches!(
            check_attach(
                &vol("available", false),
                "s",
                active,
                Some("deleting"),
                &[],
                true
            ),
            Err(ModelError::Conflict(_))
        ));
        assert!(matches!(
            check_attach(
                &vol("available", false),
                "s",
                ServerStatus::Build,
                None,
                &[],
                true
            ),
            Err(ModelError::Conflict(_))
        ));
        assert!(check_extend(&vol("available", false), 2, false).is_ok());
        assert!(check_extend(&vol("available", false), 1, false).is_err());
        assert!(check_extend(&vol("in-use", false), 2, false).is_err());
        assert!(check_extend(&vol("in-use", false), 2, true).is_ok());
        assert!(type_is_multiattach(
            &json!({"extra_specs": {"multiattach": "<is> True"}})
        ));
        assert!(!type_is_multiattach(&json!({"extra_specs": {}})));
    }

    fn multi() -> AttachOptions {
        AttachOptions {
            multiattach_allowed: true,
            ..AttachOptions::default()
        }
    }

    #[test]
    fn attach_detach_and_server_deletion() {
        let mut state = State::new("p", "u", vec![]);
        let now = Instant::now();
        let server = state
            .create_server(
                NewServer {
                    name: "s".into(),
                    project_id: "p".into(),
                    user_id: "u".into(),
                    flavor_id: "2".into(),
                    image_id: None,
                    az: "nova".into(),
                    networks: vec![],
                    metadata: Default::default(),
                    tags: vec![],
                    key_name: None,
                    security_groups: vec![],
                    description: None,
                    status: Some(ServerStatus::Active),
                },
                now,
            )
            .unwrap();
        state
            .volumes
            .insert("v".into(), json!({"id": "v", "status": "available", "size": 1, "attachments": [], "os-vol-tenant-attr:tenant_id": "p"}));
        let a = state
            .attach_volume(&server.id, "v", Some("p"), multi(), now)
            .unwrap();
        assert_eq!(a.device, "/dev/vdb");
        assert_eq!(state.volumes["v"]["status"], "attaching");
        assert!(state
            .attach_volume(&server.id, "v", Some("p"), multi(), now)
            .is_err());
        assert!(state.detach_volume(&server.id, "v", now).is_err());
        state.settle(now + Duration::from_secs(5));
        assert_eq!(state.volumes["v"]["status"], "in-use");
        assert_eq!(state.volumes["v"]["attachments"][0]["server_id"], server.id);
        assert!(matches!(
            state.attach_volume(&server.id, "nope", Some("p"), multi(), now),
            Err(ModelError::NotFound(..))
        ));
        state.extend_volume("v", 3, true, now).unwrap();
        assert_eq!(state.volumes["v"]["status"], "extending");
        state.settle(now + Duration::from_secs(10));
        assert_eq!(state.volumes["v"]["size"], 3);
        assert_eq!(state.volumes["v"]["status"], "in-use");
        state.detach_volume(&server.id, "v", now).unwrap();
        assert_eq!(state.volumes["v"]["status"], "detaching");
        state.settle(now + Duration::from_secs(15));
        assert_eq!(state.volumes["v"]["status"], "available");
        assert!(state.attachments.is_empty());

        state
            .attach_volume(&server.id, "v", Some("p"), multi(), now)
            .unwrap();
        state.remove_server(&server.id);
        assert!(state.attachments.is_empty());
        assert_eq!(state.volumes["v"]["status"], "available");
        assert_eq!(state.volumes["v"]["attachments"], json!([]));
    }
}
