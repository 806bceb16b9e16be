//! The container-token master keys the NM holds and who a bearer token speaks for.
//!
//! The RM sends its container-token master key at registration and, after each roll, in a
//! heartbeat answer; the NM keeps the current and the previous one (YARN's
//! `NMContainerTokenSecretManager`) and checks a start token with the one whose id it names.
//! The calls that act on running containers (stop, release, signal, re-initialize, update)
//! carry `Authorization: Bearer <container token>`; [`Manager::authorize`] answers which
//! application (and user) that token proves: a token this NM verified at a container's start
//! or update (compared by SHA-256 digest, so it keeps working after its key rolled out), or
//! any token a held key signed for this node. Expiry does not apply: a container token
//! expires with its allocation, but it proves its application for the container's life.
//! The REST edge compares that application with every container the call names.

use spindle_common::ids::{ApplicationId, ContainerId};
use spindle_common::token::{
    open_container_token, token_digest, ContainerKey, ContainerTokenIdentifier, TokenError,
};
use tracing::info;

use super::Manager;

/// Whose a verified bearer token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    /// The container the token was issued for.
    pub container: ContainerId,
    /// The token's `appSubmitter`.
    pub user: String,
}

impl TokenOwner {
    pub fn application(&self) -> ApplicationId {
        self.container.application_id()
    }
}

/// Why a call acting on containers was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContainerAuthError {
    /// No `Authorization: Bearer` header (401).
    #[error("no container token: calls that act on containers need 'Authorization: Bearer <container token>' of the application that owns them")]
    Missing,
    /// The header is not a bearer token (401).
    #[error("Authorization header is not 'Bearer <container token>'")]
    NotBearer,
    /// The token does not verify (401).
    #[error("container token refused: {0}")]
    Invalid(TokenError),
    /// A genuine token, for a container on another node (401).
    #[error("container token is for node {token_node}, but this is node {this_node}")]
    OtherNode {
        token_node: String,
        this_node: String,
    },
    /// A genuine token of another application (403).
    #[error("container {container} belongs to application {owner}, but the container token is application {token_app}'s")]
    OtherApplication {
        container: ContainerId,
        owner: ApplicationId,
        token_app: ApplicationId,
    },
}

impl ContainerAuthError {
    /// 403 for a genuine token of another application; 401 for everything else.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Self::OtherApplication { .. })
    }
}

/// Digests kept beyond the table's size before the ones of forgotten containers are dropped.
const SPARE_DIGESTS: usize = 1024;

impl Manager {
    /// A key from the RM becomes current (the current one previous).
    pub(super) fn install_key(&mut self, key: ContainerKey) {
        let id = key.id();
        if self.keys.install(key) {
            info!(
                key_id = id,
                previous = ?self.keys.previous().map(ContainerKey::id),
                "container-token master key received"
            );
        }
    }

    /// Remembers a token this NM just verified for `ident`'s container.
    pub(super) fn remember_token(&mut self, token: &str, ident: &ContainerTokenIdentifier) {
        if self.start_tokens.len() >= self.table.iter().count() + SPARE_DIGESTS {
            let table = &self.table;
            self.start_tokens
                .retain(|_, o| table.get(&o.container).is_some());
        }
        self.start_tokens.insert(
            token_digest(token),
            TokenOwner {
                container: ident.container_id,
                user: ident.app_submitter.clone(),
            },
        );
    }

    /// Whose application `token` proves (see the module doc).
    pub(super) fn authorize(&self, token: &str) -> Result<TokenOwner, ContainerAuthError> {
        if let Some(owner) = self.start_tokens.get(&token_digest(token)) {
            return Ok(owner.clone());
        }
        let ident = open_container_token(&self.keys, token).map_err(ContainerAuthError::Invalid)?;
        if ident.node_id != self.ctx.node_id {
            return Err(ContainerAuthError::OtherNode {
                token_node: ident.node_id.to_string(),
                this_node: self.ctx.node_id.to_string(),
            });
        }
        Ok(TokenOwner {
            container: ident.container_id,
            user: ident.app_submitter,
        })
    }
}
