//! The REST error edge of both daemons: every error is YARN's `RemoteException` body with its
//! kind's status ([`ApiError`]), and the extractors a handler uses ([`JsonBody`],
//! [`PathParams`], [`QueryParams`]) and the routers' fallbacks ([`not_found`],
//! [`method_not_allowed`]) answer bad input the same way on the RM and the NM.
//!
//! Rooms: this file (errors, extractors, fallbacks), [`serve`] (the one HTTP serve loop both
//! daemons run, and `raise_nofile_limit`) and [`audit`] (YARN's `RMAuditLogger` lines).
//!
//! Must not: know either daemon's state or commands; each daemon maps its own errors to
//! [`ApiError`] (`From` impls beside its handlers).

#![forbid(unsafe_code)]

pub mod audit;
pub mod serve;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use spindle_common::records::exception::ExceptionKind;

/// A YARN `RemoteException` answer.
#[derive(Debug)]
pub struct ApiError {
    pub kind: ExceptionKind,
    pub message: String,
}

impl ApiError {
    pub fn new(kind: ExceptionKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ExceptionKind::BadRequest, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ExceptionKind::NotFound, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (status, axum::Json(self.kind.body(self.message))).into_response();
        // A 503 is passing (an RM stopping, a deposed active, a store not answering): clients
        // retry, or fail over to another RM, after a second.
        if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        resp
    }
}

/// A JSON body whose every rejection is a 400 `RemoteException`: a body without a JSON
/// `Content-Type` (an XML one is named: Spindle speaks JSON only), an unreadable or malformed
/// one, or one of the wrong shape.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_xml = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("xml"));
        if is_xml {
            return Err(ApiError::bad_request(
                "XML request bodies are not supported by Spindle; send the same document as JSON (Content-Type: application/json)",
            ));
        }
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(JsonBody(v)),
            Err(rej) => Err(ApiError::bad_request(match rej {
                JsonRejection::JsonDataError(e) => {
                    format!("Invalid request body: {}", e.body_text())
                }
                JsonRejection::JsonSyntaxError(e) => {
                    format!("Malformed JSON request body: {}", e.body_text())
                }
                JsonRejection::MissingJsonContentType(_) => {
                    "Expected request with `Content-Type: application/json`".to_string()
                }
                other => other.body_text(),
            })),
        }
    }
}

/// `Path<T>` whose rejections (a parameter that is not UTF-8 once percent-decoded) are 400
/// `RemoteException`s, like every other bad input.
pub struct PathParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| PathParams(v))
            .map_err(|e| rejection(e.status(), e.body_text()))
    }
}

/// `Query<T>` whose rejections (a repeated parameter, `?size=1&size=2`) are 400
/// `RemoteException`s.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| QueryParams(v))
            .map_err(|e| rejection(e.status(), e.body_text()))
    }
}

/// An extractor's rejection as a `RemoteException`: 400, or 500 for a route that lacks the
/// parameters its handler reads (the daemon's own bug).
fn rejection(status: StatusCode, text: String) -> ApiError {
    let kind = if status.is_server_error() {
        ExceptionKind::Internal
    } else {
        ExceptionKind::BadRequest
    };
    ApiError::new(kind, text)
}

/// The routers' fallback for a path nobody serves: 404 with Jersey's words.
pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!(
        "java.lang.Exception: no resource at {}",
        uri.path()
    ))
}

/// The routers' fallback for a method a served path does not take: 405.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        ExceptionKind::MethodNotAllowed,
        format!("HTTP method {method} is not supported by {}", uri.path()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    async fn parse(content_type: Option<&str>, body: &str) -> Result<serde_json::Value, ApiError> {
        let mut req = axum::http::Request::builder().method("POST").uri("/x");
        if let Some(ct) = content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        let req = req.body(Body::from(body.to_string())).expect("request");
        JsonBody::<serde_json::Value>::from_request(req, &())
            .await
            .map(|JsonBody(v)| v)
    }

    #[test]
    fn a_503_says_when_to_try_again_and_no_other_status_does() {
        let unavailable = ApiError::new(ExceptionKind::ServiceUnavailable, "stepping down");
        let resp = unavailable.into_response();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        let internal = ApiError::new(ExceptionKind::Internal, "broken").into_response();
        assert_eq!(internal.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(internal.headers().get(header::RETRY_AFTER).is_none());
    }

    #[tokio::test]
    async fn bodies_are_judged_alike_on_both_daemons() {
        assert!(parse(Some("application/json"), r#"{"a":1}"#).await.is_ok());
        let none = parse(None, r#"{"a":1}"#).await.unwrap_err();
        assert!(none.message.contains("Content-Type"), "{}", none.message);
        let xml = parse(Some("application/xml"), "<a/>").await.unwrap_err();
        assert!(
            xml.message.starts_with("XML request bodies"),
            "{}",
            xml.message
        );
        let bad = parse(Some("application/json"), "{").await.unwrap_err();
        assert_eq!(bad.kind, ExceptionKind::BadRequest);
        assert!(
            bad.message.starts_with("Malformed JSON request body"),
            "{}",
            bad.message
        );
    }
}
