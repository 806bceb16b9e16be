//! The web UI at `/ui`: a single-page application (hash routes: `#/overview`, `#/queues`,
//! `#/apps`, `#/app/{id}`, `#/nodes`, `#/node/{id}`) whose HTML, CSS and JavaScript are
//! embedded in the binary (no CDN: clusters are often offline). The script reads only the
//! public REST API (`/ws/v1/cluster/...`, documented in `docs/rest-api.md`), pages lists on
//! the server (`offset`/`limit`, the `X-Total-Count` header), and refreshes the page shown
//! every few seconds by fetching and updating the DOM.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::AppState;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(index))
        .route("/ui/", get(index))
        .route("/ui/app.js", get(script))
        .route("/ui/app.css", get(style))
}

/// The assets change with the binary only: a browser revalidates them on every load.
const NO_CACHE: (header::HeaderName, &str) = (header::CACHE_CONTROL, "no-cache");

async fn index() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8"), NO_CACHE],
        INDEX,
    )
}

async fn script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            NO_CACHE,
        ],
        SCRIPT,
    )
}

async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8"), NO_CACHE],
        STYLE,
    )
}
