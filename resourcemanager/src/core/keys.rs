//! The RM's token keys (YARN's `AMRMTokenSecretManager` and `RMContainerTokenSecretManager`):
//! the AM-RM master key, which never leaves the RM, and the container-token master keys,
//! which authenticated NMs receive.
//!
//! Container-token master keys roll as YARN's do: the driver hands a fresh random key in
//! ([`RmCore::roll_container_key`]) every
//! `yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs`; it is the *next*
//! key at once (sent to every NM at its next heartbeat) and becomes the *current* key, the
//! one new tokens are signed with, after the activation delay, 1.5 x the NM liveness expiry
//! interval, so that every live NM holds a key before a token names it. The key it replaces
//! stays *previous*, still accepted (NMs keep it too) until the next activation. The core
//! draws no randomness and reads no clock: keys and times are arguments.
//!
//! Must not: persist the container keys (a new one is made at every RM start), or hand the
//! AM-RM key to anything but the AM-RM token functions.

use spindle_common::token::{AmRmKey, ContainerKey, ContainerKeys, MasterKeyId};

use super::RmCore;

/// YARN's activation delay: 1.5 x the NM liveness expiry interval.
pub fn activation_delay_ms(nm_expiry_ms: u64) -> u64 {
    nm_expiry_ms.saturating_mul(3) / 2
}

/// The RM's keys.
#[derive(Debug, Clone)]
pub(super) struct TokenKeys {
    pub(super) amrm: AmRmKey,
    /// Current (signs) and previous (still accepted).
    pub(super) container: ContainerKeys,
    /// A rolled key not active yet, and when it becomes current.
    pub(super) next: Option<(ContainerKey, u64)>,
}

impl TokenKeys {
    pub(super) fn new(amrm: AmRmKey, container: ContainerKey) -> Self {
        Self {
            amrm,
            container: ContainerKeys::new(container),
            next: None,
        }
    }

    /// The key new container tokens are signed with.
    pub(super) fn signing(&self) -> &ContainerKey {
        self.container
            .current()
            .expect("the RM's container keys always have a current key")
    }
}

impl RmCore {
    /// The AM-RM master key (the state store keeps it; nothing else may see it).
    pub fn amrm_key(&self) -> &AmRmKey {
        &self.keys.amrm
    }

    /// The container-token master keys that verify: current and previous.
    pub fn container_keys(&self) -> &ContainerKeys {
        &self.keys.container
    }

    /// The key NMs must hold: the next key once rolled, else the current one. A node whose
    /// last known key id differs is sent this one (registration, heartbeats).
    pub fn newest_container_key(&self) -> &ContainerKey {
        self.keys
            .next
            .as_ref()
            .map(|(k, _)| k)
            .unwrap_or_else(|| self.keys.signing())
    }

    /// YARN's `rollMasterKey`: `key` (fresh, random, from the driver) is the next key, sent
    /// to NMs from now on and used for new tokens `activation_delay_ms` after `now`. A next
    /// key still pending is activated first. A key with the id of a held one is ignored
    /// (returns false).
    pub fn roll_container_key(&mut self, key: ContainerKey, now: u64) -> bool {
        let taken = |id: MasterKeyId| {
            self.keys.container.get(id).is_some()
                || self.keys.next.as_ref().is_some_and(|(k, _)| k.id() == id)
        };
        if taken(key.id()) {
            return false;
        }
        if let Some((pending, _)) = self.keys.next.take() {
            self.keys.container.install(pending);
        }
        let at = now.saturating_add(activation_delay_ms(self.conf.nm_expiry_ms));
        self.keys.next = Some((key, at));
        self.version += 1;
        true
    }

    /// YARN's `activateNextMasterKey`, when its time came: the next key signs from now on,
    /// the current one turns previous. Run by `tick`; returns the activated id.
    pub fn activate_container_key(&mut self, now: u64) -> Option<MasterKeyId> {
        match &self.keys.next {
            Some((_, at)) if *at <= now => {
                let (key, _) = self.keys.next.take()?;
                let id = key.id();
                self.keys.container.install(key);
                self.version += 1;
                Some(id)
            }
            _ => None,
        }
    }
}
