//! The JSON documents of an image: an index (or Docker manifest list), an image manifest,
//! and the image config, parsed into the few fields the store uses, with their media types
//! checked before any layer is fetched.
//!
//! Parsing only: what these documents are fetched from is [`super::registry`] or
//! [`super::layout`]; every byte given here has already passed its digest check.

use serde::{Deserialize, Serialize};

use super::digest::Digest;
use super::error::ImageError;

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// What a manifest request accepts.
pub const MANIFEST_TYPES: &[&str] = &[OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];
/// The largest manifest or config accepted (containerd's limit for manifests).
pub const MAX_DOCUMENT_BYTES: u64 = 4 << 20;

/// The node's platform: an index entry for it is the one pulled.
pub const NODE_OS: &str = "linux";
pub const NODE_ARCH: &str = "amd64";

/// How a layer blob is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Compression {
    None,
    Gzip,
}

/// A content descriptor (only the fields used; `urls` is deliberately not read, so a
/// manifest can never send the node to another host).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default)]
    pub platform: Option<Platform>,
    #[serde(default)]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
}

/// A checked layer or config descriptor.
#[derive(Debug, Clone)]
pub struct Blob {
    pub digest: Digest,
    pub size: u64,
    pub compression: Compression,
}

/// A manifest document: either an image or an index of images.
#[derive(Debug)]
pub enum Document {
    Index(Vec<Descriptor>),
    Image(ImageManifest),
}

/// An image manifest's config and layers (lowest first).
#[derive(Debug, Clone)]
pub struct ImageManifest {
    pub config: Blob,
    pub layers: Vec<Blob>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDocument {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
}

/// What the container runs by default, from the image config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ImageConfig {
    #[serde(default, deserialize_with = "null_as_default")]
    pub env: Vec<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub entrypoint: Vec<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub cmd: Vec<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub user: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub working_dir: String,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    config: Option<ImageConfig>,
    #[serde(default)]
    rootfs: Option<RootFs>,
}

#[derive(Deserialize)]
struct RootFs {
    #[serde(default)]
    diff_ids: Vec<String>,
}

/// The parsed image config: what to run and the layers' uncompressed digests.
#[derive(Debug, Clone)]
pub struct ParsedConfig {
    pub config: ImageConfig,
    pub diff_ids: Vec<Digest>,
}

fn bad(reference: &str, what: &'static str, detail: impl ToString) -> ImageError {
    ImageError::BadManifest {
        reference: reference.to_string(),
        what,
        detail: detail.to_string(),
    }
}

/// Parses a manifest or index (`reference` names it in errors).
pub fn parse_document(reference: &str, bytes: &[u8]) -> Result<Document, ImageError> {
    let raw: RawDocument =
        serde_json::from_slice(bytes).map_err(|e| bad(reference, "manifest", e))?;
    match (raw.manifests, raw.config, raw.layers) {
        (Some(m), None, None) => Ok(Document::Index(m)),
        (None, Some(config), Some(layers)) => {
            if let Some(mt) = raw.media_type.as_deref() {
                if mt != OCI_MANIFEST && mt != DOCKER_MANIFEST {
                    return Err(ImageError::UnsupportedMediaType {
                        what: "manifest",
                        media_type: mt.to_string(),
                    });
                }
            }
            let config = Blob {
                digest: descriptor_digest(reference, &config)?,
                size: config.size,
                compression: Compression::None,
            };
            let layers = layers
                .iter()
                .map(|l| {
                    Ok(Blob {
                        digest: descriptor_digest(reference, l)?,
                        size: l.size,
                        compression: layer_compression(&l.media_type)?,
                    })
                })
                .collect::<Result<Vec<_>, ImageError>>()?;
            Ok(Document::Image(ImageManifest { config, layers }))
        }
        _ => Err(bad(
            reference,
            "manifest",
            "neither an image manifest nor an index",
        )),
    }
}

fn descriptor_digest(reference: &str, d: &Descriptor) -> Result<Digest, ImageError> {
    d.digest
        .parse()
        .map_err(|e| bad(reference, "descriptor digest", e))
}

/// The compression of a layer media type; zstd and foreign types are refused by name.
pub fn layer_compression(media_type: &str) -> Result<Compression, ImageError> {
    match media_type {
        "application/vnd.oci.image.layer.v1.tar"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar" => Ok(Compression::None),
        "application/vnd.oci.image.layer.v1.tar+gzip"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
        | "application/vnd.docker.image.rootfs.diff.tar.gzip"
        | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => Ok(Compression::Gzip),
        other => Err(ImageError::UnsupportedMediaType {
            what: "layer",
            media_type: other.to_string(),
        }),
    }
}

/// The linux/amd64 entry of an index.
pub fn select_platform(reference: &str, entries: &[Descriptor]) -> Result<Digest, ImageError> {
    let entry = entries
        .iter()
        .find(|e| {
            e.platform
                .as_ref()
                .is_some_and(|p| p.os == NODE_OS && p.architecture == NODE_ARCH)
        })
        .ok_or_else(|| ImageError::NoMatchingPlatform {
            reference: reference.to_string(),
        })?;
    descriptor_digest(reference, entry)
}

/// Parses an image config blob.
pub fn parse_config(reference: &str, bytes: &[u8]) -> Result<ParsedConfig, ImageError> {
    let raw: RawConfig =
        serde_json::from_slice(bytes).map_err(|e| bad(reference, "image config", e))?;
    let diff_ids = raw
        .rootfs
        .map(|r| r.diff_ids)
        .unwrap_or_default()
        .iter()
        .map(|d| {
            d.parse()
                .map_err(|e| bad(reference, "image config diff_ids", e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ParsedConfig {
        config: raw.config.unwrap_or_default(),
        diff_ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    #[test]
    fn image_manifest_and_media_types() {
        let m = format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{}","size":10}},
            "layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{}","size":5,"urls":["http://elsewhere/"]}}]}}"#,
            d('a'),
            d('b')
        );
        let Document::Image(im) = parse_document("r", m.as_bytes()).unwrap() else {
            panic!("not an image")
        };
        assert_eq!(im.layers[0].compression, Compression::Gzip);
        let z = m.replace("tar+gzip", "tar+zstd");
        assert!(matches!(
            parse_document("r", z.as_bytes()),
            Err(ImageError::UnsupportedMediaType { what: "layer", .. })
        ));
        assert!(matches!(
            parse_document("r", b"{\"layers\":1}"),
            Err(ImageError::BadManifest { .. })
        ));
    }

    #[test]
    fn index_selects_linux_amd64() {
        let idx = format!(
            r#"{{"manifests":[{{"digest":"{}","size":1,"platform":{{"os":"linux","architecture":"arm64"}}}},
            {{"digest":"{}","size":1,"platform":{{"os":"linux","architecture":"amd64"}}}}]}}"#,
            d('a'),
            d('c')
        );
        let Document::Index(e) = parse_document("r", idx.as_bytes()).unwrap() else {
            panic!()
        };
        assert_eq!(select_platform("r", &e).unwrap().to_string(), d('c'));
        assert!(matches!(
            select_platform("r", &e[..1]),
            Err(ImageError::NoMatchingPlatform { .. })
        ));
    }

    #[test]
    fn config_fields_and_nulls() {
        let c = format!(
            r#"{{"config":{{"Env":["A=1"],"Entrypoint":null,"Cmd":["sh"],"User":"1000","WorkingDir":"/w"}},"rootfs":{{"type":"layers","diff_ids":["{}"]}}}}"#,
            d('e')
        );
        let p = parse_config("r", c.as_bytes()).unwrap();
        assert_eq!(p.config.env, vec!["A=1"]);
        assert!(p.config.entrypoint.is_empty());
        assert_eq!(p.config.working_dir, "/w");
        assert_eq!(p.diff_ids.len(), 1);
    }
}
