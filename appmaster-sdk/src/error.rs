//! The error every HTTP client of this crate returns.

use spindle_common::records::exception::RemoteException;

/// Why a call to the RM or an NM failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The peer answered with YARN's `RemoteException` body.
    #[error("{exception}: {message} (HTTP {status} from {url})")]
    Remote {
        status: u16,
        exception: String,
        message: String,
        java_class_name: String,
        url: String,
    },
    /// The peer answered with an error status and no `RemoteException` body.
    #[error("HTTP {status} from {url}: {body}")]
    Http {
        status: u16,
        url: String,
        body: String,
    },
    /// Nothing answered at the address (refused, unreachable, timed out).
    #[error("cannot reach {address}: {}", causes(cause))]
    Connect {
        address: String,
        cause: reqwest::Error,
    },
    /// The request failed after the connection was made (reset, body read error, ...).
    #[error("request to {url} failed: {}", causes(cause))]
    Request { url: String, cause: reqwest::Error },
    /// The body is not the JSON record we expected.
    #[error("unexpected answer from {url}: {message}")]
    Decode { url: String, message: String },
    /// The answer is well-formed but breaks the protocol (wrong status, missing header, ...).
    #[error("protocol error from {url}: {message}")]
    Protocol { url: String, message: String },
    /// An NM refused to start, stop, release or signal a container.
    #[error("{operation} of container {container_id} refused: {exception}: {message}")]
    ContainerRequest {
        operation: &'static str,
        container_id: String,
        exception: String,
        message: String,
    },
    /// A call by container id alone for a container this client neither started nor
    /// remembered: it does not know the container's node.
    #[error("container {container_id} was not started or remembered by this client: its node is unknown (pass the node's address, or NmClient::remember its Container first)")]
    UnknownContainer { container_id: String },
    /// The RM refused to tell who the caller is (401 on its cluster REST): no token, or one
    /// it does not accept. The message says how to get one.
    #[error("{message} (HTTP 401 from {url}); {}", if *had_token {
        "the token sent was refused: ask an operator for a new one (`spindle token -issue -user USER`), or fetch one with a valid token (`spindle token -fetch`)"
    } else {
        "this ResourceManager requires a token: set SPINDLE_TOKEN, or SPINDLE_TOKEN_FILE (or spindle.client.token-file in yarn-site.xml) to a file holding one; an operator mints one with `spindle token -issue -user USER`"
    })]
    Unauthenticated {
        url: String,
        message: String,
        /// Whether the call carried a token.
        had_token: bool,
    },
    /// The HTTP client itself could not be built.
    #[error("cannot build the HTTP client: {}", causes(.0))]
    Build(reqwest::Error),
    /// `yarn.http.policy` or `spindle.ssl.client.ca-file` in the configuration directory
    /// cannot be used (the error names the property and file).
    #[error("cannot build the HTTP client: {0}")]
    Tls(#[from] spindle_common::tls::TlsConfError),
}

/// The messages of an error's causes, innermost last, without reqwest's outer
/// "error sending request for url (...)" (the URL is in our own message). The reqwest error
/// is kept out of `source()` so that `anyhow`'s `{:#}` does not print it twice.
fn causes(e: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(c) = cur {
        let m = c.to_string();
        if parts.last() != Some(&m) {
            parts.push(m);
        }
        cur = c.source();
    }
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
    }
}

impl ClientError {
    /// The HTTP status the peer answered with, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Remote { status, .. } | Self::Http { status, .. } => Some(*status),
            Self::Unauthenticated { .. } => Some(401),
            _ => None,
        }
    }

    /// The peer's `RemoteException` as YARN sends it, if it sent one.
    pub fn remote_exception(&self) -> Option<RemoteException> {
        match self {
            Self::Remote {
                exception,
                message,
                java_class_name,
                ..
            } => Some(RemoteException {
                exception: exception.clone(),
                message: message.clone(),
                java_class_name: java_class_name.clone(),
            }),
            _ => None,
        }
    }

    /// 404, or a `NotFoundException` body.
    pub fn is_not_found(&self) -> bool {
        match self {
            Self::Remote {
                status, exception, ..
            } => *status == 404 || exception == "NotFoundException",
            Self::Http { status, .. } => *status == 404,
            _ => false,
        }
    }

    /// True when the peer could not be reached at all; worth retrying while it restarts.
    pub fn is_connect(&self) -> bool {
        matches!(self, Self::Connect { .. })
    }

    /// True when the connection broke under a request the peer had not answered (reset,
    /// aborted, closed mid-answer): the peer went away, as a crashing RM does. Worth retrying
    /// for a read; a write may or may not have been applied.
    pub fn is_peer_gone(&self) -> bool {
        let Self::Request { cause, .. } = self else {
            return false;
        };
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(cause);
        while let Some(e) = source {
            // Closed before the answer was complete (a killed RM's socket closed with a FIN,
            // not a reset), or the request dropped before it went out.
            if let Some(h) = e.downcast_ref::<hyper::Error>() {
                if h.is_incomplete_message() || h.is_canceled() {
                    return true;
                }
            }
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                use std::io::ErrorKind::*;
                if matches!(
                    io.kind(),
                    ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
                ) {
                    return true;
                }
            }
            source = e.source();
        }
        false
    }

    /// True when the exception name (e.g. `ApplicationMasterNotRegisteredException`) matches.
    pub fn is_exception(&self, name: &str) -> bool {
        match self {
            Self::Remote {
                exception,
                java_class_name,
                message,
                ..
            } => exception == name || java_class_name.ends_with(name) || message.contains(name),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::address::RmAddress;
    use crate::rm_client::RmClient;
    use spindle_common::ApplicationId;
    use tokio::io::AsyncReadExt;

    /// The error of a status read from a server that reads the request and then `close`s
    /// the connection without answering.
    async fn read_cut_by(close: fn(tokio::net::TcpStream)) -> super::ClientError {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            close(s);
        });
        let rm = RmClient::new(&RmAddress::parse(&addr.to_string()).unwrap()).unwrap();
        let e = rm.app(&ApplicationId::new(1, 1)).await.unwrap_err();
        server.await.unwrap();
        e
    }

    /// An RM killed under a request resets its connection (a zero linger makes the close a
    /// reset, as a killed process's socket gives), or closes it without answering: either
    /// way the client error says the peer went away (a status read is retried), while a
    /// refused connection stays `is_connect`.
    #[tokio::test]
    async fn a_connection_reset_or_closed_under_a_request_is_the_peer_gone() {
        for e in [read_cut_by(socket_reset).await, read_cut_by(drop).await] {
            assert!(e.is_peer_gone(), "{e}");
            assert!(!e.is_connect(), "{e}");
        }
    }

    #[allow(deprecated)]
    fn socket_reset(s: tokio::net::TcpStream) {
        s.set_linger(Some(std::time::Duration::ZERO)).unwrap();
        drop(s);
    }
}
