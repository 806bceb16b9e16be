//! Fetching from a registry over the OCI distribution protocol, with `oci-client`.
//!
//! HTTPS always, except plain HTTP for the registries named in
//! `spindle.nodemanager.runtime.oci.insecure-registries`; Basic or token auth from the auth
//! file ([`super::auth`]). A fresh client per pull, so a rewritten auth file or a refused
//! token is never remembered. `oci-client`'s errors become [`ImageError`] variants by their
//! types and HTTP statuses. Descriptors are handed to the client without their `urls`, so a
//! manifest can never send the node to another host.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use oci_client::client::BlobResponse;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::auth::credentials_for;
use super::digest::Digest;
use super::error::ImageError;
use super::manifest::{Blob, MANIFEST_TYPES};
use super::pull::BlobWriter;
use super::reference::RegistryRef;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// One registry reference's source of manifests and blobs.
pub(crate) struct RegistrySource {
    client: Client,
    reference: Reference,
    auth: RegistryAuth,
    registry: String,
    name: String,
}

impl RegistrySource {
    pub(crate) fn new(
        r: &RegistryRef,
        insecure: &[String],
        auth_file: Option<&Path>,
    ) -> Result<RegistrySource, ImageError> {
        let auth = match auth_file {
            Some(p) => match credentials_for(p, &r.registry)? {
                Some(c) => RegistryAuth::Basic(c.username, c.password),
                None => RegistryAuth::Anonymous,
            },
            None => RegistryAuth::Anonymous,
        };
        let reference = match (&r.digest, &r.tag) {
            (Some(d), _) => {
                Reference::with_digest(r.registry.clone(), r.repository.clone(), d.to_string())
            }
            (None, tag) => Reference::with_tag(
                r.registry.clone(),
                r.repository.clone(),
                tag.clone()
                    .unwrap_or_else(|| super::reference::DEFAULT_TAG.into()),
            ),
        };
        let client = Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(insecure.to_vec()),
            platform_resolver: None,
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            ..ClientConfig::default()
        });
        Ok(RegistrySource {
            client,
            reference,
            auth,
            registry: r.registry.clone(),
            name: r.to_string(),
        })
    }

    pub(crate) async fn manifest(&self, digest: Option<&Digest>) -> Result<Vec<u8>, ImageError> {
        let reference = match digest {
            Some(d) => self.reference.clone_with_digest(d.to_string()),
            None => self.reference.clone(),
        };
        let (bytes, _) = self
            .client
            .pull_manifest_raw(&reference, &self.auth, MANIFEST_TYPES)
            .await
            .map_err(|e| self.error(e))?;
        Ok(bytes)
    }

    pub(crate) async fn blob(
        &self,
        blob: &Blob,
        out: &mut BlobWriter<'_>,
    ) -> Result<(), ImageError> {
        let desc = OciDescriptor {
            digest: blob.digest.to_string(),
            size: i64::try_from(blob.size).unwrap_or(i64::MAX),
            ..OciDescriptor::default()
        };
        // Authenticates the client for this repository when no manifest call did.
        self.client
            .store_auth_if_needed(self.reference.resolve_registry(), &self.auth)
            .await;
        // The whole blob asked for as a range: a 206 answer is streamed as it comes and the
        // `BlobWriter` (which every blob goes through) is its one size and sha256 check; a
        // 200 (a registry that ignores ranges) is also checked by the client as it streams.
        // An empty blob has no range to ask for.
        let mut stream = if blob.size == 0 {
            self.client.pull_blob_stream(&self.reference, &desc).await
        } else {
            self.client
                .pull_blob_stream_partial(&self.reference, &desc, 0, Some(blob.size))
                .await
                .map(|r| match r {
                    BlobResponse::Full(s) | BlobResponse::Partial(s) => s,
                })
        }
        .map_err(|e| self.error(e))?;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.stream_error(e, out))?;
            out.write(&chunk).await?;
        }
        Ok(())
    }

    fn unreachable(&self, detail: impl ToString) -> ImageError {
        ImageError::RegistryUnreachable {
            registry: self.registry.clone(),
            detail: detail.to_string(),
        }
    }

    fn by_status(&self, status: u16, detail: String) -> ImageError {
        match status {
            401 | 403 => ImageError::CredentialsRefused {
                registry: self.registry.clone(),
                reference: self.name.clone(),
                status,
            },
            404 => ImageError::NotFound {
                reference: self.name.clone(),
                detail,
            },
            _ => self.protocol(format!("HTTP {status}: {detail}")),
        }
    }

    fn protocol(&self, detail: impl ToString) -> ImageError {
        ImageError::RegistryProtocol {
            registry: self.registry.clone(),
            reference: self.name.clone(),
            detail: detail.to_string(),
        }
    }

    fn request_error(&self, e: &reqwest::Error) -> ImageError {
        match e.status() {
            Some(s) => self.by_status(s.as_u16(), e.to_string()),
            None if e.is_connect() || e.is_timeout() => self.unreachable(e),
            None => self.unreachable(e),
        }
    }

    fn error(&self, e: OciDistributionError) -> ImageError {
        use OciDistributionError as O;
        match e {
            O::RequestError(ref r) => self.request_error(r),
            O::UnauthorizedError { .. } | O::AuthenticationFailure(_) => {
                self.by_status(401, String::new())
            }
            O::ImageManifestNotFoundError(d) => self.by_status(404, d),
            O::ServerError { code, message, .. } => self.by_status(code, message),
            O::RegistryError { ref envelope, .. } => {
                let code = envelope.errors.first().map(|e| &e.code);
                match code {
                    Some(OciErrorCode::Unauthorized) => self.by_status(401, e.to_string()),
                    Some(OciErrorCode::Denied) => self.by_status(403, e.to_string()),
                    Some(
                        OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::BlobUnknown
                        | OciErrorCode::NotFound,
                    ) => self.by_status(404, e.to_string()),
                    _ => self.protocol(e),
                }
            }
            O::DigestError(DigestError::VerificationError { expected, actual }) => {
                ImageError::DigestMismatch {
                    kind: super::error::BlobKind::Manifest,
                    expected,
                    actual,
                }
            }
            other => self.protocol(other),
        }
    }

    /// An error in the middle of a blob's body: the client's own digest check, a dropped
    /// connection, or a bad status.
    fn stream_error(&self, e: std::io::Error, out: &BlobWriter<'_>) -> ImageError {
        if let Some(inner) = e.get_ref() {
            if let Some(DigestError::VerificationError { actual, .. }) =
                inner.downcast_ref::<DigestError>()
            {
                return out.digest_mismatch(actual.clone());
            }
            if let Some(r) = inner.downcast_ref::<reqwest::Error>() {
                return self.request_error(r);
            }
        }
        self.unreachable(e)
    }
}
