//! YARN's REST resource object: `{"memory":4096,"vCores":4,"resourceInformations":{...}}`.

use serde::{Deserialize, Serialize};

use super::OneOrMany;
use crate::resource::{Resource, GPU, MEMORY_MB, VCORES};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceInfo {
    pub memory: i64,
    #[serde(rename = "vCores")]
    pub v_cores: i64,
    #[serde(
        rename = "resourceInformations",
        skip_serializing_if = "Option::is_none"
    )]
    pub resource_informations: Option<ResourceInformations>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceInformations {
    #[serde(rename = "resourceInformation")]
    pub resource_information: OneOrMany<ResourceInformation>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceInformation {
    pub attributes: serde_json::Map<String, serde_json::Value>,
    pub maximum_allocation: i64,
    pub minimum_allocation: i64,
    pub name: String,
    pub resource_type: String,
    pub units: String,
    pub value: i64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// Units YARN reports for the built-in and well-known types.
pub fn default_units(name: &str) -> &'static str {
    if name == MEMORY_MB {
        "Mi"
    } else {
        ""
    }
}

impl From<&Resource> for ResourceInfo {
    fn from(r: &Resource) -> Self {
        let infos = r
            .entries()
            .map(|(name, value)| ResourceInformation {
                attributes: Default::default(),
                maximum_allocation: i64::MAX,
                minimum_allocation: 0,
                name: name.to_string(),
                resource_type: "COUNTABLE".to_string(),
                units: default_units(name).to_string(),
                value,
                tags: Vec::new(),
            })
            .collect::<Vec<_>>();
        ResourceInfo {
            memory: r.memory_mb,
            v_cores: r.vcores,
            resource_informations: Some(ResourceInformations {
                resource_information: OneOrMany(infos),
            }),
        }
    }
}

impl ResourceInfo {
    /// The plain `{memory, vCores}` form used where YARN has no `resourceInformations`.
    pub fn plain(r: &Resource) -> Self {
        ResourceInfo {
            memory: r.memory_mb,
            v_cores: r.vcores,
            resource_informations: None,
        }
    }

    /// The smallest form [`Self::to_resource`] reads back exactly: `{memory, vCores}` and,
    /// only for extended types, `resourceInformations` entries (what a container token
    /// carries: it is signed and sent with every container, so its size is paid per
    /// allocation).
    pub fn compact(r: &Resource) -> Self {
        let infos: Vec<ResourceInformation> = r
            .extended()
            .map(|(name, value)| ResourceInformation {
                name: name.to_string(),
                resource_type: "COUNTABLE".to_string(),
                units: default_units(name).to_string(),
                value,
                maximum_allocation: i64::MAX,
                ..Default::default()
            })
            .collect();
        ResourceInfo {
            memory: r.memory_mb,
            v_cores: r.vcores,
            resource_informations: (!infos.is_empty()).then_some(ResourceInformations {
                resource_information: OneOrMany(infos),
            }),
        }
    }

    /// Converts to the domain vector. Extended types come from `resourceInformations`;
    /// `memory`/`vCores` win over their duplicate entries there.
    pub fn to_resource(&self) -> Resource {
        let mut r = Resource::new(self.memory, self.v_cores);
        if let Some(infos) = &self.resource_informations {
            for i in &infos.resource_information.0 {
                if i.name != MEMORY_MB && i.name != VCORES && i.name != "memory" {
                    r.set(&i.name, i.value);
                }
            }
        }
        r
    }
}

/// Parses YARN's `name=value,...` resource list as used by distributed shell's
/// `-container_resources memory-mb=3072,vcores=1,yarn.io/gpu=2`. Memory accepts a
/// `Mi`/`Gi`/`M`/`G` suffix.
pub fn parse_resource_list(s: &str) -> Result<Resource, String> {
    let mut r = Resource::zero();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("'{part}' is not name=value"))?;
        let k = k.trim();
        let v = v.trim();
        let (digits, mult) = match k {
            MEMORY_MB | "memory" => {
                if let Some(d) = v.strip_suffix("Gi").or_else(|| v.strip_suffix('G')) {
                    (d, 1024)
                } else if let Some(d) = v.strip_suffix("Mi").or_else(|| v.strip_suffix('M')) {
                    (d, 1)
                } else {
                    (v, 1)
                }
            }
            _ => (v, 1),
        };
        let n: i64 = digits
            .parse()
            .map_err(|_| format!("value of '{k}' must be a non-negative integer, got '{v}'"))?;
        if n < 0 {
            return Err(format!(
                "value of '{k}' must be a non-negative integer, got '{v}'"
            ));
        }
        if k.is_empty() {
            return Err(format!("'{part}' has an empty resource name"));
        }
        r.set(k, n * mult);
    }
    Ok(r)
}

/// Shorthand used in tests and docs.
pub fn gpu(n: i64) -> Resource {
    Resource::zero().with(GPU, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compact_form_reads_back_exactly_and_is_smaller() {
        for r in [
            Resource::new(2048, 2).with(GPU, 3).with("yarn.io/fpga", 1),
            Resource::new(512, 1),
        ] {
            let compact = ResourceInfo::compact(&r);
            let json = serde_json::to_string(&compact).expect("serializes");
            let back: ResourceInfo = serde_json::from_str(&json).expect("parses");
            assert_eq!(back.to_resource(), r, "{json}");
            let full = serde_json::to_string(&ResourceInfo::from(&r)).expect("serializes");
            assert!(json.len() < full.len(), "{json} vs {full}");
        }
        assert!(ResourceInfo::compact(&Resource::new(1, 1))
            .resource_informations
            .is_none());
    }

    #[test]
    fn round_trips_extended_types() {
        let r = Resource::new(2048, 2).with(GPU, 3);
        let info = ResourceInfo::from(&r);
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(json["memory"], 2048);
        assert_eq!(json["vCores"], 2);
        let back: ResourceInfo = serde_json::from_value(json).unwrap();
        assert_eq!(back.to_resource(), r);
        let plain: ResourceInfo = serde_json::from_str(r#"{"memory":10,"vCores":1}"#).unwrap();
        assert_eq!(plain.to_resource(), Resource::new(10, 1));
    }

    #[test]
    fn parses_distributed_shell_lists() {
        let r = parse_resource_list("memory-mb=3072,vcores=1,yarn.io/gpu=2").unwrap();
        assert_eq!(r, Resource::new(3072, 1).with(GPU, 2));
        assert_eq!(parse_resource_list("memory=2G").unwrap().memory_mb, 2048);
        assert!(parse_resource_list("vcores").is_err());
        assert!(parse_resource_list("vcores=x").is_err());
        assert!(parse_resource_list("vcores=-1").is_err());
    }
}
