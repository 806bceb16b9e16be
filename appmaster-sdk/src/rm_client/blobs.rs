//! The RM's blob store, as a client ships files through it (`crate::ship::upload`): claim a
//! digest for an application (nothing is sent when the caller holds it), else upload the
//! file, streamed from disk.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use spindle_common::ids::ApplicationId;
use spindle_common::image_ref::Digest;
use spindle_common::records::blob::{BlobBody, BlobInfo};
use spindle_common::resource_url::CLUSTER_BLOBS_PATH;

use super::RmClient;
use crate::error::ClientError;
use crate::http::{check_status, decode};

/// How long one upload may take in all (a large `--src-dir` on a slow link).
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(6 * 3600);
/// The bytes of one read of the file being uploaded.
const CHUNK: usize = 256 * 1024;

impl RmClient {
    /// `PUT /blobs/{digest}/apps/{app}?size=`: `Some` when the caller holds the blob (the
    /// application now uses it; nothing to upload), `None` when it must be uploaded. A 413
    /// (an upload of `size` would pass a limit) is an error naming the limit.
    pub async fn claim_blob(
        &self,
        digest: &Digest,
        app: &ApplicationId,
        size: u64,
    ) -> Result<Option<BlobInfo>, ClientError> {
        let path = format!("{CLUSTER_BLOBS_PATH}/{digest}/apps/{app}");
        let (rb, url) = self.http.request(Method::PUT, &path);
        let rb = rb
            .query(&self.user_query())
            .query(&[("size", size.to_string())]);
        let resp = self.http.send(rb, &url).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let resp = check_status(resp, &url).await?;
        Ok(Some(decode::<BlobBody>(resp, &url).await?.blob))
    }

    /// `PUT /blobs/{digest}?applicationId=`: uploads `file` (`size` bytes, read from its
    /// current position), streamed from disk a chunk at a time.
    pub async fn upload_blob(
        &self,
        digest: &Digest,
        app: &ApplicationId,
        file: tokio::fs::File,
        size: u64,
    ) -> Result<BlobInfo, ClientError> {
        let path = format!("{CLUSTER_BLOBS_PATH}/{digest}");
        let f = file;
        let stream = futures::stream::unfold(Some(f), |f| async move {
            use tokio::io::AsyncReadExt;
            let mut f = f?;
            let mut buf = vec![0u8; CHUNK];
            match f.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok::<_, std::io::Error>(buf), Some(f)))
                }
                Err(e) => Some((Err(e), None)),
            }
        });
        let (rb, url) = self.http.request(Method::PUT, &path);
        let rb = rb
            .query(&self.user_query())
            .query(&[("applicationId", app.to_string())])
            .header(reqwest::header::CONTENT_LENGTH, size)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .timeout(UPLOAD_TIMEOUT)
            .body(reqwest::Body::wrap_stream(stream));
        let resp = self.http.send_ok(rb, &url).await?;
        Ok(decode::<BlobBody>(resp, &url).await?.blob)
    }
}
