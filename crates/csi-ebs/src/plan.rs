//! What ControllerPublish and ControllerUnpublish do next, decided from a volume's attachments
//! as EC2 describes them (pure). A publish repeated by the attacher is answered from the live
//! attachment, waited for while it is under way, or attached again when it is gone; an
//! AttachVolume that EC2 refused is judged by where the volume is attached: here (fine), on
//! another node (FailedPrecondition) or nowhere yet (retry). An unpublish detaches from the
//! nodes the volume names and waits until none of them holds it.

use crate::ec2::{Attachment, VolumeInfo};

/// The next step of a publish this process attached before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepeatStep {
    /// Attached to the node at this device: answer.
    Attached(String),
    /// Under way at this device: wait for `attached`.
    Wait(String),
    /// No live attachment to the node: attach again.
    Attach,
}

/// What a refused AttachVolume means, from the volume's attachments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Attached or attaching to the node at this device: fine.
    Here(String),
    /// Attached (in this state) to another instance.
    Elsewhere {
        /// The other instance.
        instance: String,
        /// Its attachment state.
        state: String,
    },
    /// Still detaching from the node, or not attachable yet: retry.
    NotYet,
}

fn live(a: &Attachment) -> bool {
    a.state == "attached" || a.state == "attaching"
}

/// The step of a repeated publish to `node`, given the volume as described (None: gone).
pub fn plan_repeat(volume: Option<&VolumeInfo>, node: &str) -> RepeatStep {
    let mine = volume.and_then(|v| {
        v.attachments
            .iter()
            .find(|a| a.instance_id == node && a.state != "detached")
    });
    match mine {
        Some(a) if a.state == "attached" => RepeatStep::Attached(a.device.clone()),
        Some(a) => RepeatStep::Wait(a.device.clone()),
        None => RepeatStep::Attach,
    }
}

/// What EC2's refusal to attach the volume to `node` means.
pub fn plan_refused(volume: &VolumeInfo, node: &str) -> Refused {
    if let Some(a) = volume
        .attachments
        .iter()
        .filter(|a| live(a))
        .find(|a| a.instance_id == node)
    {
        return Refused::Here(a.device.clone());
    }
    match volume
        .attachments
        .iter()
        .find(|a| a.instance_id != node && a.state != "detached")
    {
        Some(other) => Refused::Elsewhere {
            instance: other.instance_id.clone(),
            state: other.state.clone(),
        },
        None => Refused::NotYet,
    }
}

/// Whether the volume is attached to `node` (a publish's wait is over).
pub fn attached_to(volume: Option<&VolumeInfo>, node: &str) -> bool {
    volume.is_some_and(|v| {
        v.attachments
            .iter()
            .any(|a| a.instance_id == node && a.state == "attached")
    })
}

/// The instances an unpublish from every node (`node` empty) detaches the volume from.
pub fn detach_targets(volume: &VolumeInfo) -> Vec<String> {
    volume
        .attachments
        .iter()
        .filter(|a| live(a))
        .map(|a| a.instance_id.clone())
        .collect()
}

/// Whether the volume still hangs on `node` (any node when empty): an unpublish waits on.
pub fn still_attached(volume: &VolumeInfo, node: &str) -> bool {
    volume
        .attachments
        .iter()
        .any(|a| (node.is_empty() || a.instance_id == node) && a.state != "detached")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (instance, device, state) of each attachment.
    type Attached<'a> = &'a [(&'a str, &'a str, &'a str)];

    fn volume(attachments: Attached<'_>) -> VolumeInfo {
        VolumeInfo {
            id: "vol-1".into(),
            size_gib: 1,
            zone: "z".into(),
            state: "in-use".into(),
            attachments: attachments
                .iter()
                .map(|(i, d, s)| Attachment {
                    instance_id: i.to_string(),
                    device: d.to_string(),
                    state: s.to_string(),
                })
                .collect(),
            tags: Default::default(),
            snapshot_id: None,
        }
    }

    #[test]
    fn a_repeated_publish_follows_the_live_attachment() {
        let cases: &[(Attached<'_>, RepeatStep)] = &[
            (
                &[("i-a", "/dev/xvdba", "attached")],
                RepeatStep::Attached("/dev/xvdba".into()),
            ),
            (
                &[("i-a", "/dev/xvdba", "attaching")],
                RepeatStep::Wait("/dev/xvdba".into()),
            ),
            (&[("i-a", "/dev/xvdba", "detached")], RepeatStep::Attach),
            (&[("i-b", "/dev/xvdba", "attached")], RepeatStep::Attach),
            (&[], RepeatStep::Attach),
        ];
        for (attachments, want) in cases {
            let v = volume(attachments);
            assert_eq!(&plan_repeat(Some(&v), "i-a"), want, "{attachments:?}");
        }
        assert_eq!(plan_repeat(None, "i-a"), RepeatStep::Attach);
    }

    #[test]
    fn a_refused_attach_is_judged_by_where_the_volume_is() {
        let here = volume(&[("i-a", "/dev/xvdbb", "attaching")]);
        assert_eq!(
            plan_refused(&here, "i-a"),
            Refused::Here("/dev/xvdbb".into())
        );
        let other = volume(&[("i-b", "/dev/xvdbb", "attached")]);
        assert_eq!(
            plan_refused(&other, "i-a"),
            Refused::Elsewhere {
                instance: "i-b".into(),
                state: "attached".into()
            }
        );
        let detaching = volume(&[("i-a", "/dev/xvdbb", "detaching")]);
        assert_eq!(plan_refused(&detaching, "i-a"), Refused::NotYet);
        assert_eq!(plan_refused(&volume(&[]), "i-a"), Refused::NotYet);
    }

    #[test]
    fn unpublish_targets_and_waits() {
        let v = volume(&[
            ("i-a", "/dev/xvdba", "attached"),
            ("i-b", "/dev/xvdbb", "attaching"),
            ("i-c", "/dev/xvdbc", "detaching"),
        ]);
        assert_eq!(
            detach_targets(&v),
            vec!["i-a".to_string(), "i-b".to_string()]
        );
        assert!(still_attached(&v, "i-c"));
        assert!(still_attached(&v, ""));
        assert!(!still_attached(&volume(&[("i-a", "d", "detached")]), ""));
        assert!(attached_to(Some(&v), "i-a"));
        assert!(!attached_to(Some(&v), "i-b"));
        assert!(!attached_to(None, "i-a"));
    }
}
