//! AWS: the four default EBS types (class name = type) and `storageClass.provision[]` — a
//! provision entry's name, as an unanchored regex, removes every default it matches — minus the
//! unanchored `storageClass.exclude[]`; gp3 `iops`/`throughput` and io1/io2 `iopsPerGB` checked.

use std::collections::BTreeMap;

use regex::Regex;

use super::{compile_excludes, excluded, Wanted};
use crate::settings::{Provision, StorageClassSettings};
use crate::PlanError;

const DEFAULT_TYPES: [&str; 4] = ["gp3", "gp2", "sc1", "st1"];
const TYPES: [&str; 6] = ["gp3", "gp2", "sc1", "st1", "io1", "io2"];

/// The AWS module's classes.
pub fn plan_aws(settings: &StorageClassSettings) -> Result<Vec<Wanted>, PlanError> {
    let mut provisioned = Vec::with_capacity(settings.provision.len());
    let mut removes = Vec::with_capacity(settings.provision.len());
    for (i, p) in settings.provision.iter().enumerate() {
        let key = format!("storageClass.provision[{i}]");
        provisioned.push(provision(&key, p)?);
        removes.push(Regex::new(&p.name).map_err(|_| {
            PlanError::key(&format!("{key}.name"), "not a valid regular expression")
        })?);
    }
    let excludes = compile_excludes("storageClass.exclude", &settings.exclude, false)?;
    let defaults = DEFAULT_TYPES
        .iter()
        .filter(|t| !removes.iter().any(|r| r.is_match(t)))
        .map(|t| wanted(t, BTreeMap::from([("type".to_string(), t.to_string())])));
    Ok(defaults
        .chain(provisioned)
        .filter(|w| !excluded(&excludes, &w.name))
        .collect())
}

fn wanted(name: &str, parameters: BTreeMap<String, String>) -> Wanted {
    Wanted {
        name: name.to_string(),
        parameters,
        allow_volume_expansion: true,
        reclaim_policy: None,
        labels: BTreeMap::from([("app".to_string(), "ebs-csi-driver".to_string())]),
    }
}

fn provision(key: &str, p: &Provision) -> Result<Wanted, PlanError> {
    if p.name.is_empty() {
        return Err(PlanError::key(&format!("{key}.name"), "required"));
    }
    let t = p.volume_type.as_str();
    if !TYPES.contains(&t) {
        return Err(PlanError::key(
            &format!("{key}.type"),
            format!("must be one of {}", TYPES.join(", ")),
        ));
    }
    let mut parameters = BTreeMap::from([("type".to_string(), t.to_string())]);
    let io = matches!(t, "io1" | "io2");
    match (&p.iops_per_gb, io) {
        (Some(v), true) => {
            number(&format!("{key}.iopsPerGB"), v, 1, 500)?;
            parameters.insert("iopsPerGB".into(), v.clone());
        }
        (None, true) => {
            return Err(PlanError::key(
                &format!("{key}.iopsPerGB"),
                format!("required for {t}"),
            ))
        }
        (Some(_), false) => {
            return Err(PlanError::key(
                &format!("{key}.iopsPerGB"),
                "only for io1 and io2",
            ))
        }
        (None, false) => {}
    }
    for (field, value, low, high) in [
        ("iops", &p.iops, 3000, 16000),
        ("throughput", &p.throughput, 125, 1000),
    ] {
        let Some(v) = value else { continue };
        if t != "gp3" {
            return Err(PlanError::key(&format!("{key}.{field}"), "only for gp3"));
        }
        number(&format!("{key}.{field}"), v, low, high)?;
        parameters.insert(field.to_string(), v.clone());
    }
    Ok(wanted(&p.name, parameters))
}

fn number(key: &str, value: &str, low: u64, high: u64) -> Result<(), PlanError> {
    match value.trim().parse::<u64>() {
        Ok(n) if (low..=high).contains(&n) => Ok(()),
        _ => Err(PlanError::key(
            key,
            format!("must be a whole number from {low} to {high}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, t: &str) -> Provision {
        Provision {
            name: name.into(),
            volume_type: t.into(),
            ..Provision::default()
        }
    }

    fn names(w: &[Wanted]) -> Vec<&str> {
        w.iter().map(|w| w.name.as_str()).collect()
    }

    #[test]
    fn defaults_alone() {
        let w = plan_aws(&StorageClassSettings::default()).unwrap();
        assert_eq!(names(&w), ["gp3", "gp2", "sc1", "st1"]);
        assert_eq!(w[0].parameters["type"], "gp3");
        assert!(w[0].allow_volume_expansion);
    }

    #[test]
    fn provision_overrides_defaults_by_unanchored_regex_and_exclude_is_a_substring_match() {
        let mut fast = p("gp3", "gp3");
        fast.iops = Some("4000".into());
        fast.throughput = Some("500".into());
        let mut io = p("io-fast", "io2");
        io.iops_per_gb = Some("50".into());
        let s = StorageClassSettings {
            provision: vec![fast, io, p("s", "st1")],
            exclude: vec!["t1".into()],
            ..StorageClassSettings::default()
        };
        let w = plan_aws(&s).unwrap();
        // "s" matches sc1 and st1 (unanchored); "t1" excludes st1-named classes, none left.
        assert_eq!(names(&w), ["gp2", "gp3", "io-fast", "s"]);
        let gp3 = w.iter().find(|w| w.name == "gp3").unwrap();
        assert_eq!(gp3.parameters["iops"], "4000");
        assert_eq!(gp3.parameters["throughput"], "500");
        assert_eq!(
            w.iter().find(|w| w.name == "io-fast").unwrap().parameters["iopsPerGB"],
            "50"
        );
    }

    #[test]
    fn bad_provisions_name_their_key() {
        let err = |p: Provision| {
            plan_aws(&StorageClassSettings {
                provision: vec![p],
                ..StorageClassSettings::default()
            })
            .unwrap_err()
            .0
        };
        assert_eq!(
            err(p("x", "io1")),
            "storageClass.provision[0].iopsPerGB: required for io1"
        );
        let mut gp2 = p("x", "gp2");
        gp2.iops = Some("3000".into());
        assert_eq!(err(gp2), "storageClass.provision[0].iops: only for gp3");
        let mut low = p("x", "gp3");
        low.iops = Some("100".into());
        assert_eq!(
            err(low),
            "storageClass.provision[0].iops: must be a whole number from 3000 to 16000"
        );
        assert!(err(p("x", "magnetic")).starts_with("storageClass.provision[0].type"));
        assert_eq!(
            err(p("(", "gp3")),
            "storageClass.provision[0].name: not a valid regular expression"
        );
        let bad_exclude = plan_aws(&StorageClassSettings {
            exclude: vec!["[".into()],
            ..StorageClassSettings::default()
        });
        assert_eq!(
            bad_exclude.unwrap_err().0,
            "storageClass.exclude[0]: not a valid regular expression"
        );
    }
}
