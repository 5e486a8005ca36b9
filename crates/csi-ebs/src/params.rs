//! StorageClass parameters of `ebs.csi.aws.com` as a pure function: parameters + PVC metadata +
//! size → the EC2 volume to create (type, IOPS, throughput, encryption, tags), or a list of
//! every problem. Keys are matched case-insensitively, as upstream does.

use std::collections::BTreeMap;

/// Volume types EBS offers.
pub const VOLUME_TYPES: &[&str] = &["gp3", "gp2", "io1", "io2", "sc1", "st1", "standard"];
/// The type used when none is given.
pub const DEFAULT_TYPE: &str = "gp3";

/// The EC2 volume a request becomes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VolumeSpec {
    /// The EBS type.
    pub volume_type: String,
    /// Size in GiB.
    pub size_gib: i32,
    /// Provisioned IOPS.
    pub iops: Option<i32>,
    /// Provisioned throughput in MiB/s (gp3).
    pub throughput: Option<i32>,
    /// Encrypted at rest.
    pub encrypted: bool,
    /// The KMS key.
    pub kms_key_id: Option<String>,
    /// Tags from `tagSpecification_N`, after templating.
    pub tags: BTreeMap<String, String>,
    /// The formatting parameters (`blockSize`, `inodeSize`, …) under their volume-context keys,
    /// for the node plugin's `mkfs`.
    pub format_context: BTreeMap<String, String>,
}

struct IopsLimits {
    min: i32,
    max: i32,
    per_gib: i32,
}

fn iops_limits(volume_type: &str, block_express: bool) -> Option<IopsLimits> {
    match volume_type {
        "io1" => Some(IopsLimits {
            min: 100,
            max: 64_000,
            per_gib: 50,
        }),
        "io2" if block_express => Some(IopsLimits {
            min: 100,
            max: 256_000,
            per_gib: 1000,
        }),
        "io2" => Some(IopsLimits {
            min: 100,
            max: 64_000,
            per_gib: 500,
        }),
        "gp3" => Some(IopsLimits {
            min: 3000,
            max: 16_000,
            per_gib: 500,
        }),
        _ => None,
    }
}

fn parse_bool(key: &str, value: &str, problems: &mut Vec<String>) -> bool {
    match value.to_ascii_lowercase().as_str() {
        "true" => true,
        "false" => false,
        _ => {
            problems.push(format!("{key}: {value:?} is not true or false"));
            false
        }
    }
}

fn parse_int(key: &str, value: &str, problems: &mut Vec<String>) -> Option<i32> {
    match value.parse::<i32>() {
        Ok(v) if v > 0 => Some(v),
        _ => {
            problems.push(format!("{key}: {value:?} is not a positive integer"));
            None
        }
    }
}

/// Fills `{{ .PVCName }}`, `{{ .PVCNamespace }}`, `{{ .PVName }}` from the provisioner's
/// metadata (`pvc/name`, `pvc/namespace`, `pv/name`).
pub fn render_template(text: &str, metadata: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find("}}")
            .ok_or_else(|| format!("unclosed template in {text:?}"))?;
        let field = rest[start + 2..start + end].trim();
        let key = match field {
            ".PVCName" => "pvc/name",
            ".PVCNamespace" => "pvc/namespace",
            ".PVName" => "pv/name",
            other => return Err(format!("unknown template field {other:?} in {text:?}")),
        };
        out.push_str(metadata.get(key).map(String::as_str).unwrap_or_default());
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Longest tag key EC2 takes.
const MAX_TAG_KEY: usize = 128;
/// Longest tag value EC2 takes.
const MAX_TAG_VALUE: usize = 256;

/// Why EC2 would refuse the tag `key`=`value`, if it would: an empty or too long key, a too
/// long value, or the `aws:` prefix AWS keeps for itself.
pub fn tag_problem(key: &str, value: &str) -> Option<String> {
    if key.is_empty() {
        Some("a tag key is empty".into())
    } else if key.chars().count() > MAX_TAG_KEY {
        Some(format!(
            "tag key {key:?} is longer than {MAX_TAG_KEY} characters"
        ))
    } else if value.chars().count() > MAX_TAG_VALUE {
        Some(format!(
            "the value of tag {key:?} is longer than {MAX_TAG_VALUE} characters"
        ))
    } else if key.to_ascii_lowercase().starts_with("aws:") {
        Some(format!(
            "tag key {key:?}: the aws: prefix is reserved by AWS"
        ))
    } else {
        None
    }
}

/// What becomes of a tag that cannot be used (`--warn-on-invalid-tag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InvalidTags {
    /// The request fails, naming the tag (upstream's default).
    #[default]
    Refuse,
    /// The tag is left out and a warning logged.
    Warn,
}

/// Keeps the tags of `tags` EC2 would take; the others fail (every one named) or, with
/// [`InvalidTags::Warn`], are dropped with a warning naming `what` they were given by.
pub fn usable_tags(
    tags: BTreeMap<String, String>,
    policy: InvalidTags,
    what: &str,
) -> Result<BTreeMap<String, String>, Vec<String>> {
    let mut problems = Vec::new();
    let mut kept = BTreeMap::new();
    for (k, v) in tags {
        match tag_problem(&k, &v) {
            None => {
                kept.insert(k, v);
            }
            Some(p) if policy == InvalidTags::Warn => {
                tracing::warn!(problem = %p, "{what}: tag left out (--warn-on-invalid-tag)");
            }
            Some(p) => problems.push(format!("{what}: {p}")),
        }
    }
    if problems.is_empty() {
        Ok(kept)
    } else {
        Err(problems)
    }
}

/// The volume to create for `parameters` of `size_gib`, or every problem found; a tag that
/// cannot be used fails the request.
pub fn volume_spec(
    parameters: &BTreeMap<String, String>,
    metadata: &BTreeMap<String, String>,
    size_gib: i32,
) -> Result<VolumeSpec, Vec<String>> {
    volume_spec_with(parameters, metadata, size_gib, InvalidTags::Refuse)
}

/// [`volume_spec`] with `invalid_tags` deciding what a `tagSpecification_N` that cannot be
/// templated or used does.
pub fn volume_spec_with(
    parameters: &BTreeMap<String, String>,
    metadata: &BTreeMap<String, String>,
    size_gib: i32,
    invalid_tags: InvalidTags,
) -> Result<VolumeSpec, Vec<String>> {
    let mut problems = Vec::new();
    let mut tag_problems = Vec::new();
    let mut spec = VolumeSpec {
        volume_type: DEFAULT_TYPE.into(),
        size_gib,
        ..Default::default()
    };
    let mut iops_per_gb = None;
    let mut auto_increase = false;
    let mut block_express = false;
    for (key, value) in parameters {
        let lower = key.to_ascii_lowercase();
        match lower.as_str() {
            "type" => {
                let t = value.to_ascii_lowercase();
                if VOLUME_TYPES.contains(&t.as_str()) {
                    spec.volume_type = t;
                } else {
                    problems.push(format!(
                        "type: {value:?} is not one of {}",
                        VOLUME_TYPES.join(", ")
                    ));
                }
            }
            "iopspergb" => iops_per_gb = parse_int(key, value, &mut problems),
            "iops" => spec.iops = parse_int(key, value, &mut problems),
            "throughput" => spec.throughput = parse_int(key, value, &mut problems),
            "encrypted" => spec.encrypted = parse_bool(key, value, &mut problems),
            "kmskeyid" => spec.kms_key_id = Some(value.clone()),
            "blockexpress" => block_express = parse_bool(key, value, &mut problems),
            "allowautoiopspergbincrease" => auto_increase = parse_bool(key, value, &mut problems),
            // Formatting parameters: checked here, handed to the node plugin in the context.
            _ if stratus_csi::format::KEYS.contains(&lower.as_str()) => {
                match stratus_csi::format::check_parameter(&lower, value) {
                    Ok(v) => {
                        spec.format_context.insert(lower.clone(), v);
                    }
                    Err(e) => problems.push(e),
                }
            }
            _ if lower.starts_with("tagspecification_") => match value.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => match (
                    render_template(k.trim(), metadata),
                    render_template(v.trim(), metadata),
                ) {
                    (Ok(k), Ok(v)) => match tag_problem(&k, &v) {
                        None => {
                            spec.tags.insert(k, v);
                        }
                        Some(p) => tag_problems.push(format!("{key}: {p}")),
                    },
                    (Err(e), _) | (_, Err(e)) => tag_problems.push(format!("{key}: {e}")),
                },
                _ => tag_problems.push(format!("{key}: {value:?} is not key=value")),
            },
            _ => problems.push(format!("unknown parameter {key:?}")),
        }
    }
    match invalid_tags {
        InvalidTags::Refuse => problems.append(&mut tag_problems),
        InvalidTags::Warn => {
            for p in &tag_problems {
                tracing::warn!(problem = %p, "tag left out (--warn-on-invalid-tag)");
            }
        }
    }
    if spec.iops.is_some() && iops_per_gb.is_some() {
        problems.push("iops and iopsPerGB are exclusive".into());
    }
    if spec.throughput.is_some() && spec.volume_type != "gp3" {
        problems.push(format!(
            "throughput applies to gp3 only, not {}",
            spec.volume_type
        ));
    }
    if spec.kms_key_id.is_some() && !spec.encrypted {
        problems.push("kmsKeyId needs encrypted: \"true\"".into());
    }
    if block_express && spec.volume_type != "io2" {
        problems.push("blockExpress applies to io2 only".into());
    }
    let limits = iops_limits(&spec.volume_type, block_express);
    if let Some(per_gb) = iops_per_gb {
        match &limits {
            None => problems.push(format!("iopsPerGB does not apply to {}", spec.volume_type)),
            Some(l) => {
                let mut iops = per_gb.saturating_mul(size_gib).min(l.max);
                if iops < l.min {
                    if auto_increase {
                        iops = l.min;
                    } else {
                        problems.push(format!(
                            "iopsPerGB {per_gb} × {size_gib} GiB = {iops} IOPS, below the {} minimum of {} (set allowAutoIOPSPerGBIncrease)",
                            spec.volume_type, l.min
                        ));
                    }
                }
                spec.iops = Some(iops);
            }
        }
    }
    if let (Some(iops), Some(l)) = (spec.iops, &limits) {
        let by_size = l.per_gib.saturating_mul(size_gib);
        // gp3 always allows its 3000 IOPS baseline, whatever the size.
        let allowed = if spec.volume_type == "gp3" {
            by_size.max(l.min)
        } else {
            by_size
        };
        if iops > l.max {
            problems.push(format!(
                "iops {iops} above the {} maximum {}",
                spec.volume_type, l.max
            ));
        } else if iops > allowed {
            problems.push(format!(
                "iops {iops} above {} per GiB for {size_gib} GiB",
                l.per_gib
            ));
        }
    } else if spec.iops.is_some() && limits.is_none() {
        problems.push(format!("iops does not apply to {}", spec.volume_type));
    }
    if matches!(spec.volume_type.as_str(), "io1" | "io2") && spec.iops.is_none() {
        problems.push(format!("{} needs iops or iopsPerGB", spec.volume_type));
    }
    if problems.is_empty() {
        Ok(spec)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_to_gp3() {
        let spec = volume_spec(&BTreeMap::new(), &BTreeMap::new(), 10).unwrap();
        assert_eq!(spec.volume_type, "gp3");
        assert_eq!(spec.iops, None);
        assert!(!spec.encrypted);
    }

    /// Parameters, size in GiB, and the IOPS expected (or an error fragment).
    type ParamCase<'a> = (Vec<(&'a str, &'a str)>, i32, Result<Option<i32>, &'a str>);

    #[test]
    fn parameter_table() {
        let md = params(&[("pvc/name", "data"), ("pvc/namespace", "apps")]);
        let cases: Vec<ParamCase> = vec![
            (
                vec![("type", "io1"), ("iopsPerGB", "10")],
                20,
                Ok(Some(200)),
            ),
            (
                vec![("type", "io1"), ("iopsPerGB", "10")],
                5,
                Err("below the io1 minimum"),
            ),
            (
                vec![
                    ("type", "io1"),
                    ("iopsPerGB", "10"),
                    ("allowAutoIOPSPerGBIncrease", "true"),
                ],
                5,
                Ok(Some(100)),
            ),
            (
                vec![("type", "io2"), ("iopsPerGB", "1000")],
                1000,
                Ok(Some(64_000)),
            ),
            (
                vec![
                    ("type", "io2"),
                    ("iopsPerGB", "1000"),
                    ("blockExpress", "true"),
                ],
                1000,
                Ok(Some(256_000)),
            ),
            (
                vec![("type", "gp3"), ("iops", "4000"), ("throughput", "250")],
                10,
                Ok(Some(4000)),
            ),
            (
                vec![("type", "gp2"), ("throughput", "250")],
                10,
                Err("gp3 only"),
            ),
            (vec![("type", "nvme")], 10, Err("is not one of")),
            (vec![("Type", "IO1")], 10, Err("needs iops")),
            (vec![("encrypted", "yes")], 10, Err("not true or false")),
            (vec![("kmsKeyId", "arn:k")], 10, Err("needs encrypted")),
            (vec![("color", "blue")], 10, Err("unknown parameter")),
            (
                vec![("type", "sc1"), ("iops", "100")],
                10,
                Err("does not apply"),
            ),
        ];
        for (i, (p, size, want)) in cases.into_iter().enumerate() {
            let got = volume_spec(&params(&p), &md, size);
            match (got, want) {
                (Ok(spec), Ok(iops)) => assert_eq!(spec.iops, iops, "case {i}"),
                (Err(problems), Err(text)) => assert!(
                    problems.iter().any(|p| p.contains(text)),
                    "case {i}: {problems:?} lacks {text:?}"
                ),
                (got, want) => panic!("case {i}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn tag_specifications_are_templated() {
        let md = params(&[
            ("pvc/name", "data"),
            ("pvc/namespace", "apps"),
            ("pv/name", "pv-1"),
        ]);
        let p = params(&[
            (
                "tagSpecification_1",
                "owner={{ .PVCNamespace }}/{{ .PVCName }}",
            ),
            ("tagSpecification_2", "pv = {{.PVName}}"),
        ]);
        let spec = volume_spec(&p, &md, 1).unwrap();
        assert_eq!(spec.tags["owner"], "apps/data");
        assert_eq!(spec.tags["pv"], "pv-1");
        let bad = params(&[("tagSpecification_1", "x={{ .Secret }}")]);
        assert!(volume_spec(&bad, &md, 1).is_err());
        let bad = params(&[("tagSpecification_1", "novalue")]);
        assert!(volume_spec(&bad, &md, 1).is_err());
    }

    #[test]
    fn unusable_tags_fail_or_are_left_out_with_warn_on_invalid_tag() {
        let md = params(&[("pvc/name", "data")]);
        let long = "k".repeat(129);
        let p = params(&[
            ("tagSpecification_1", "aws:owner=x"),
            ("tagSpecification_2", &format!("{long}=x")),
            ("tagSpecification_3", "x={{ .Secret }}"),
            ("tagSpecification_4", "novalue"),
            ("tagSpecification_5", "team={{ .PVCName }}"),
        ]);
        let problems = volume_spec(&p, &md, 1).unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("reserved")));
        assert!(problems.iter().any(|p| p.contains("longer than 128")));
        let spec = volume_spec_with(&p, &md, 1, InvalidTags::Warn).unwrap();
        assert_eq!(spec.tags, params(&[("team", "data")]));
        // Other problems still fail in warn mode.
        let typo = params(&[("type", "gp9"), ("tagSpecification_1", "aws:x=y")]);
        assert_eq!(
            volume_spec_with(&typo, &md, 1, InvalidTags::Warn)
                .unwrap_err()
                .len(),
            1
        );
    }

    #[test]
    fn formatting_parameters_are_checked_and_handed_on() {
        let md = params(&[]);
        let spec = volume_spec(
            &params(&[("blockSize", "2048"), ("ext4BigAlloc", "True")]),
            &md,
            1,
        )
        .unwrap();
        assert_eq!(
            spec.format_context,
            params(&[("blocksize", "2048"), ("ext4bigalloc", "true")])
        );
        let problems = volume_spec(&params(&[("inodeSize", "-1")]), &md, 1).unwrap_err();
        assert!(problems[0].contains("inodesize"), "{problems:?}");
    }

    #[test]
    fn extra_tags_are_checked_like_ec2() {
        let tags = params(&[("team", "a"), ("aws:x", "b"), ("v", &"x".repeat(257))]);
        assert_eq!(
            usable_tags(tags.clone(), InvalidTags::Refuse, "--extra-tags")
                .unwrap_err()
                .len(),
            2
        );
        assert_eq!(
            usable_tags(tags, InvalidTags::Warn, "--extra-tags").unwrap(),
            params(&[("team", "a")])
        );
        assert!(tag_problem("", "x").is_some());
        assert!(tag_problem(&"k".repeat(128), &"v".repeat(256)).is_none());
    }
}
