//! The small JSON-over-HTTP layer the RM, AM and NM clients share: status and
//! `RemoteException` mapping, connection errors that name the address.

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;
use spindle_common::failover::{FailoverPolicy, Next, Rotation};
use spindle_common::records::exception::RemoteExceptionBody;

use crate::error::ClientError;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of an unexpected body an error message quotes.
const BODY_QUOTE: usize = 500;

/// A reqwest client bound to one base URL (`http://host:port`).
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    base: String,
    /// The user's token, sent as `Authorization: Bearer` on every request (the RM client's,
    /// for an RM in `token` mode); a 401 then reads as [`ClientError::Unauthenticated`].
    user_token: Option<UserToken>,
    /// The RMs of an HA cluster and which one is in use (absent with one RM): a call that
    /// finds no one there, or a standby with no active (503), is sent to the next in turn
    /// under the shared policy ([`spindle_common::failover`]); a standby's 307 is followed
    /// and remembered.
    failover: Option<Arc<Rotation>>,
}

/// When a request whose answer was lost (the connection closed after it was sent, or the
/// read timed out) may be sent again, to the next RM under failover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resend {
    /// Only a `GET` or `HEAD`; any other call fails with the transport error (a
    /// submission or a kill is not repeated blind).
    IfSafeMethod,
    /// Always: the protocol makes a repeat harmless, as YARN's `@Idempotent` and
    /// `@AtMostOnce` calls its failover proxy repeats (the AM-RM protocol: a register is
    /// idempotent, an allocate carries the whole ask table and its responseId, a finish is
    /// repeated until the RM says it is unregistered).
    Always,
}

/// A user's token and whether the peer is told it (kept out of `Debug`).
#[derive(Clone)]
struct UserToken(Option<String>);

impl std::fmt::Debug for UserToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "UserToken(..)"
        } else {
            "UserToken(none)"
        })
    }
}

/// Normalizes `host:port`, `http://host:port` or `http://host:port/` to `http://host:port`;
/// under `yarn.http.policy` `HTTPS_ONLY` to `https://host:port` (such a client never dials
/// plain HTTP, whatever scheme a report wrote). `https://` is kept.
pub(crate) fn base_url(address: &str) -> String {
    let a = address.trim().trim_end_matches('/');
    if a.starts_with("https://") {
        return a.to_string();
    }
    let a = a.strip_prefix("http://").unwrap_or(a);
    format!("{}://{a}", crate::tls::scheme())
}

/// A client trusting the system roots and `spindle.ssl.client.ca-file` ([`crate::tls`]).
pub(crate) fn build_client() -> Result<reqwest::Client, ClientError> {
    build_client_with(reqwest::redirect::Policy::default())
}

/// [`build_client`] with its redirect policy (an HA client follows a standby's 307 itself,
/// so that the token goes with it to the active).
fn build_client_with(redirect: reqwest::redirect::Policy) -> Result<reqwest::Client, ClientError> {
    let builder = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .redirect(redirect);
    spindle_common::tls::with_roots(builder, crate::tls::client_tls()?)
        .and_then(|b| b.build())
        .map_err(ClientError::Build)
}

impl Http {
    pub(crate) fn new(base: &str) -> Result<Self, ClientError> {
        Ok(Self {
            client: build_client()?,
            base: base_url(base),
            user_token: None,
            failover: None,
        })
    }

    /// Fails over among `bases` (the RMs' `host:port` or URLs, this client's own first)
    /// under `policy`; nothing changes with a single one.
    pub(crate) fn with_failover(
        mut self,
        bases: &[String],
        policy: FailoverPolicy,
    ) -> Result<Self, ClientError> {
        if bases.len() > 1 {
            let urls = bases.iter().map(|b| base_url(b)).collect();
            let rotation = Rotation::new(urls, policy);
            self.base = rotation.current().to_string();
            self.failover = Some(Arc::new(rotation));
            self.client = build_client_with(reqwest::redirect::Policy::none())?;
        }
        Ok(self)
    }

    /// The RM's cluster REST as a user: `token` (if any) on every request, a 401 mapped to
    /// [`ClientError::Unauthenticated`].
    pub(crate) fn for_user(mut self, token: Option<String>) -> Self {
        self.user_token = Some(UserToken(token));
        self
    }

    /// The same client, aimed at another peer.
    pub(crate) fn with_client(client: reqwest::Client, base: &str) -> Self {
        Self {
            client,
            base: base_url(base),
            user_token: None,
            failover: None,
        }
    }

    /// The base URL calls go to now (under failover, the RM in use).
    pub(crate) fn base(&self) -> &str {
        match &self.failover {
            Some(r) => r.current(),
            None => &self.base,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}", self.base(), path)
    }

    pub(crate) fn request(&self, method: Method, path: &str) -> (RequestBuilder, String) {
        let url = self.url(path);
        let mut rb = self
            .client
            .request(method, &url)
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(UserToken(Some(t))) = &self.user_token {
            rb = rb.bearer_auth(t);
        }
        (rb, url)
    }

    /// Sends, mapping transport failures; does not look at the status.
    pub(crate) async fn send(
        &self,
        rb: RequestBuilder,
        url: &str,
    ) -> Result<Response, ClientError> {
        self.send_with(rb, url, Resend::IfSafeMethod).await
    }

    /// [`Self::send`], a request whose answer was lost sent again as `resend` allows.
    pub(crate) async fn send_with(
        &self,
        rb: RequestBuilder,
        url: &str,
        resend: Resend,
    ) -> Result<Response, ClientError> {
        tracing::debug!(%url, "http request");
        match &self.failover {
            None => rb.send().await.map_err(|e| self.transport_error(e, url)),
            Some(rotation) => self.send_failing_over(rotation, rb, url, resend).await,
        }
    }

    /// [`Self::send`] among HA RMs: each try goes to the RM in use; no answer at all, or a
    /// 503 (a standby that knows no active, an RM stopping), sends it to the next after the
    /// policy's pause, until the policy gives up; so does an answer lost after the request
    /// went out (the RM killed mid-call, a read timed out) where `resend` allows. A success
    /// on an RM reached through a standby's 307 makes that RM the one in use.
    async fn send_failing_over(
        &self,
        rotation: &Rotation,
        rb: RequestBuilder,
        url: &str,
        resend: Resend,
    ) -> Result<Response, ClientError> {
        let req = rb.build().map_err(|e| self.transport_error(e, url))?;
        let path = match req.url().query() {
            Some(q) => format!("{}?{q}", req.url().path()),
            None => req.url().path().to_string(),
        };
        let repeatable =
            resend == Resend::Always || req.method() == Method::GET || req.method() == Method::HEAD;
        let mut redirects = 0;
        loop {
            let base = rotation.current().to_string();
            let target = format!("{base}{path}");
            let Some(mut attempt) = req.try_clone() else {
                // A streamed body cannot be sent twice: one try, on the RM in use.
                return self
                    .client
                    .execute(req)
                    .await
                    .map_err(|e| self.transport_error(e, &target));
            };
            *attempt.url_mut() = target.parse().map_err(|e| ClientError::Protocol {
                url: target.clone(),
                message: format!("not a URL: {e}"),
            })?;
            let failed = match self.client.execute(attempt).await {
                Ok(resp) if resp.status() == StatusCode::SERVICE_UNAVAILABLE => Ok(resp),
                // A standby names the active: go there at once (a few times in a row at
                // most, so two confused standbys cannot loop). Past that, or without a
                // location, the redirect is a failed try, paused and sent on as a 503 is: a
                // standby's view of the active is stale for a moment after the active died.
                Ok(resp) if resp.status() == StatusCode::TEMPORARY_REDIRECT => {
                    let to = resp
                        .headers()
                        .get(reqwest::header::LOCATION)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|l| l.parse::<reqwest::Url>().ok())
                        .map(|u| u.origin().ascii_serialization());
                    match to {
                        Some(to) if redirects < 3 => {
                            redirects += 1;
                            tracing::debug!(from = %base, %to, "a standby ResourceManager redirected");
                            rotation.follow(&to);
                            continue;
                        }
                        _ => Ok(resp),
                    }
                }
                Ok(resp) => {
                    rotation.succeeded();
                    return Ok(resp);
                }
                Err(e) if e.is_connect() || repeatable => Err(e),
                Err(e) => return Err(self.transport_error(e, &target)),
            };
            match rotation.failed(&base) {
                Next::Retry { address, pause } => {
                    tracing::info!(from = %base, to = %address, ?pause, "ResourceManager failover");
                    tokio::time::sleep(pause).await;
                    redirects = 0;
                }
                Next::GiveUp { failovers } => {
                    tracing::warn!(failovers, "no ResourceManager answered; giving up");
                    return failed.map_err(|e| self.transport_error(e, &target));
                }
            }
        }
    }

    fn transport_error(&self, e: reqwest::Error, url: &str) -> ClientError {
        if e.is_connect() || e.is_timeout() {
            ClientError::Connect {
                address: self.base.clone(),
                cause: e,
            }
        } else {
            ClientError::Request {
                url: url.to_string(),
                cause: e,
            }
        }
    }

    /// Sends and returns the response if its status is a success, else the mapped error.
    pub(crate) async fn send_ok(
        &self,
        rb: RequestBuilder,
        url: &str,
    ) -> Result<Response, ClientError> {
        self.send_ok_with(rb, url, Resend::IfSafeMethod).await
    }

    /// [`Self::send_ok`], a request whose answer was lost sent again as `resend` allows.
    pub(crate) async fn send_ok_with(
        &self,
        rb: RequestBuilder,
        url: &str,
        resend: Resend,
    ) -> Result<Response, ClientError> {
        let resp = self.send_with(rb, url, resend).await?;
        match (&self.user_token, check_status(resp, url).await) {
            (Some(UserToken(token)), Err(e)) if e.status() == Some(401) => {
                Err(ClientError::Unauthenticated {
                    url: url.to_string(),
                    message: e
                        .remote_exception()
                        .map(|r| r.message)
                        .unwrap_or_else(|| e.to_string()),
                    had_token: token.is_some(),
                })
            }
            (_, r) => r,
        }
    }

    pub(crate) async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let (rb, url) = self.request(Method::GET, path);
        let resp = self.send_ok(rb, &url).await?;
        decode(resp, &url).await
    }

    pub(crate) async fn get_text(&self, path: &str) -> Result<String, ClientError> {
        let (rb, url) = self.request(Method::GET, path);
        let resp = self.send_ok(rb, &url).await?;
        resp.text().await.map_err(|e| ClientError::Request {
            url: url.clone(),
            cause: e,
        })
    }

    pub(crate) async fn post_json<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let (rb, url) = self.request(Method::POST, path);
        let resp = self.send_ok(rb.json(body), &url).await?;
        decode(resp, &url).await
    }
}

/// Maps a non-success status to [`ClientError::Remote`] (when the body is a YARN
/// `RemoteException`) or [`ClientError::Http`].
pub(crate) async fn check_status(resp: Response, url: &str) -> Result<Response, ClientError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let body = resp.text().await.unwrap_or_default();
    Err(error_from_body(status, url, &body))
}

pub(crate) fn error_from_body(status: StatusCode, url: &str, body: &str) -> ClientError {
    if let Ok(b) = serde_json::from_str::<RemoteExceptionBody>(body) {
        let r = b.remote_exception;
        return ClientError::Remote {
            status: status.as_u16(),
            exception: r.exception,
            message: r.message,
            java_class_name: r.java_class_name,
            url: url.to_string(),
        };
    }
    ClientError::Http {
        status: status.as_u16(),
        url: url.to_string(),
        body: quote(body),
    }
}

pub(crate) async fn decode<T: DeserializeOwned>(
    resp: Response,
    url: &str,
) -> Result<T, ClientError> {
    let bytes = resp.bytes().await.map_err(|e| ClientError::Request {
        url: url.to_string(),
        cause: e,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode {
        url: url.to_string(),
        message: format!("{e}; body: {}", quote(&String::from_utf8_lossy(&bytes))),
    })
}

fn quote(body: &str) -> String {
    let t = body.trim();
    if t.len() <= BODY_QUOTE {
        return t.to_string();
    }
    let mut end = BODY_QUOTE;
    while !t.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &t[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalized() {
        assert_eq!(base_url("h:1"), "http://h:1");
        assert_eq!(base_url("http://h:1/"), "http://h:1");
        assert_eq!(base_url(" h:1 "), "http://h:1");
    }

    #[test]
    fn remote_exceptions_are_recognized() {
        let body = r#"{"RemoteException":{"exception":"NotFoundException","message":"app with id: application_1_0001 not found","javaClassName":"org.apache.hadoop.yarn.webapp.NotFoundException"}}"#;
        let e = error_from_body(StatusCode::NOT_FOUND, "http://h:1/x", body);
        assert!(e.is_not_found());
        assert_eq!(e.status(), Some(404));
        assert_eq!(
            e.remote_exception().map(|r| r.exception),
            Some("NotFoundException".to_string())
        );
        assert!(e.to_string().contains("app with id"));
        let e = error_from_body(StatusCode::BAD_GATEWAY, "u", &"x".repeat(2000));
        assert!(matches!(e, ClientError::Http { status: 502, ref body, .. } if body.len() < 600));
    }

    /// A one-connection-at-a-time HTTP server answering every request with `status` and
    /// `body`; its address.
    async fn answering(status: u16, body: &'static str) -> String {
        answering_with(status, String::new(), body).await
    }

    /// [`answering`] with extra header lines (each ending in `\r\n`).
    async fn answering_with(status: u16, headers: String, body: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = s.read(&mut buf).await;
                let resp = format!(
                    "HTTP/1.1 {status} X\r\n{headers}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            }
        });
        addr
    }

    /// A server that reads each request and closes the connection without an answer (an RM
    /// killed mid-call); its address.
    async fn hanging_up() -> String {
        use tokio::io::AsyncReadExt;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = s.read(&mut buf).await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_lost_answer_is_sent_again_to_the_next_rm_only_where_a_repeat_is_harmless() {
        let (dying, active) = (hanging_up().await, answering(200, r#"{"ok":true}"#).await);
        let http = || {
            Http::new(&dying)
                .unwrap()
                .with_failover(&[dying.clone(), active.clone()], fast(3))
                .unwrap()
        };
        // The AM-RM protocol's calls go on at the other RM.
        let h = http();
        let (rb, url) = h.request(Method::POST, "/ws/v1/am/register");
        let resp = h.send_ok_with(rb.json(&serde_json::json!({})), &url, Resend::Always);
        assert_eq!(resp.await.unwrap().status(), 200);
        assert_eq!(h.base(), format!("http://{active}"));
        // A GET too; a plain POST (a submission) is not repeated blind.
        let v: serde_json::Value = http().get_json("/ws/v1/cluster/info").await.unwrap();
        assert_eq!(v["ok"], true);
        let h = http();
        let e = h
            .post_json::<_, serde_json::Value>("/ws/v1/cluster/apps", &serde_json::json!({}))
            .await
            .unwrap_err();
        assert!(!e.is_connect(), "{e}");
        assert_eq!(h.base(), format!("http://{dying}"));
    }

    #[tokio::test]
    async fn a_submission_whose_answer_was_lost_is_sent_again_to_the_next_rm() {
        use crate::address::RmAddress;
        use crate::rm_client::RmClient;
        let dying = hanging_up().await;
        let location = "http://active/ws/v1/cluster/apps/application_1_0001";
        let active = answering_with(202, format!("location: {location}\r\n"), "").await;
        let at = |a: &str| RmAddress::parse(a).unwrap();
        let rm = RmClient::new(&at(&dying))
            .unwrap()
            .with_failover(&[at(&dying), at(&active)], fast(3))
            .unwrap();
        let ctx = spindle_common::records::cluster::ApplicationSubmissionContext::default();
        assert_eq!(rm.submit(&ctx).await.unwrap(), location);
    }

    /// A standby that redirects its first `stale` requests to `to` (an active that died),
    /// then answers 200 (it became the active); its address.
    async fn stale_standby(stale: usize, to: String) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let mut n = 0;
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = vec![0u8; 4096];
                let _ = s.read(&mut buf).await;
                n += 1;
                let resp = if n <= stale {
                    format!("HTTP/1.1 307 X\r\nlocation: http://{to}/x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                } else {
                    "HTTP/1.1 200 X\r\ncontent-type: application/json\r\ncontent-length: 11\r\nconnection: close\r\n\r\n{\"ok\":true}".to_string()
                };
                let _ = s.write_all(resp.as_bytes()).await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_standby_still_naming_a_dead_active_is_tried_again_until_it_serves() {
        let dead = closed();
        let standby = stale_standby(6, dead.clone()).await;
        let http = Http::new(&dead)
            .unwrap()
            .with_failover(&[dead.clone(), standby.clone()], fast(15))
            .unwrap();
        let v: serde_json::Value = http.post_json("/x", &serde_json::json!({})).await.unwrap();
        assert_eq!(v["ok"], true);
        assert_eq!(http.base(), format!("http://{standby}"));
    }

    /// An address where nothing listens.
    fn closed() -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    }

    fn fast(max_attempts: u32) -> FailoverPolicy {
        FailoverPolicy {
            max_attempts,
            sleep_base: Duration::from_millis(10),
            sleep_max: Duration::from_millis(20),
        }
    }

    #[tokio::test]
    async fn a_call_fails_over_past_a_dead_rm_and_a_standby_without_active_and_stays() {
        let (dead, standby) = (closed(), answering(503, "no active").await);
        let active = answering(200, r#"{"ok":true}"#).await;
        let http = Http::new(&dead)
            .unwrap()
            .with_failover(&[dead.clone(), standby, active.clone()], fast(5))
            .unwrap();
        let v: serde_json::Value = http.get_json("/ws/v1/cluster/info").await.unwrap();
        assert_eq!(v["ok"], true);
        assert_eq!(
            http.base(),
            format!("http://{active}"),
            "the active stays in use"
        );
        // A write is failed over too when nobody answered it.
        let v: serde_json::Value = http.post_json("/x", &serde_json::json!({})).await.unwrap();
        assert_eq!(v["ok"], true);
    }

    #[tokio::test]
    async fn a_standbys_redirect_is_followed_with_the_token_and_the_active_kept() {
        let active = answering(200, r#"{"ok":true}"#).await;
        let standby = answering_with(
            307,
            format!("location: http://{active}/ws/v1/cluster/info\r\n"),
            "",
        )
        .await;
        let http = Http::new(&standby)
            .unwrap()
            .for_user(Some("tok".into()))
            .with_failover(&[standby.clone(), active.clone()], fast(2))
            .unwrap();
        let v: serde_json::Value = http.get_json("/ws/v1/cluster/info").await.unwrap();
        assert_eq!(v["ok"], true);
        assert_eq!(http.base(), format!("http://{active}"));
    }

    #[tokio::test]
    async fn failover_gives_up_after_max_attempts_with_the_last_error() {
        let (a, b) = (closed(), closed());
        let http = Http::new(&a)
            .unwrap()
            .with_failover(&[a, b], fast(3))
            .unwrap();
        let e = http
            .get_json::<serde_json::Value>("/ws/v1/cluster/info")
            .await
            .unwrap_err();
        assert!(e.is_connect(), "{e}");
        // A single address keeps the old behaviour: one try.
        let one = Http::new(&closed())
            .unwrap()
            .with_failover(&[closed()], fast(3))
            .unwrap();
        assert!(one.failover.is_none());
    }
}
