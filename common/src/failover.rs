//! Clients of an HA cluster follow the active ResourceManager: where the RMs are
//! ([`ha_rm_addresses`]: `yarn.resourcemanager.ha.rm-ids` with each id's
//! `yarn.resourcemanager.webapp.address.<id>`, else `yarn.resourcemanager.hostname.<id>`
//! and port 8088, as YARN's `HAUtil`), and the one retry policy every client (the CLI, the
//! SDK's RM and AM-RM clients, the NodeManager) uses to go from one to the next
//! ([`FailoverPolicy`], YARN's `yarn.client.failover-*` keys, shaped as Hadoop's
//! `RetryPolicies.failoverOnNetworkException`): round-robin over the addresses, the first
//! failover at once, then pauses doubling from the base up to the maximum, each with ±50%
//! jitter (so a fleet of NodeManagers does not stampede the new active), for at most
//! `max_attempts` failovers.
//!
//! [`Rotation`] is the state of one client: which address it uses now and how many
//! failovers it made since the last success. The clients decide what counts as a reason to
//! fail over (connection refused or reset, a timeout, a 503 from an RM with no active, a
//! 307 from a standby that they could not follow) and call [`Rotation::failed`].

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use crate::config::{keys, ConfigError, Configuration};

/// How a client fails over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailoverPolicy {
    /// `yarn.client.failover-max-attempts`: failovers of one call before it gives up.
    pub max_attempts: u32,
    /// `yarn.client.failover-sleep-base-ms`.
    pub sleep_base: Duration,
    /// `yarn.client.failover-sleep-max-ms`.
    pub sleep_max: Duration,
}

impl Default for FailoverPolicy {
    fn default() -> Self {
        Self {
            max_attempts: keys::DEFAULT_CLIENT_FAILOVER_MAX_ATTEMPTS,
            sleep_base: Duration::from_millis(keys::DEFAULT_CLIENT_FAILOVER_SLEEP_BASE_MS),
            sleep_max: Duration::from_millis(keys::DEFAULT_CLIENT_FAILOVER_SLEEP_MAX_MS),
        }
    }
}

impl FailoverPolicy {
    pub fn from_conf(conf: &Configuration) -> Result<Self, ConfigError> {
        Ok(Self {
            max_attempts: conf.get_u32(
                keys::CLIENT_FAILOVER_MAX_ATTEMPTS,
                keys::DEFAULT_CLIENT_FAILOVER_MAX_ATTEMPTS,
            )?,
            sleep_base: Duration::from_millis(conf.get_duration_ms(
                keys::CLIENT_FAILOVER_SLEEP_BASE_MS,
                keys::DEFAULT_CLIENT_FAILOVER_SLEEP_BASE_MS,
            )?),
            sleep_max: Duration::from_millis(conf.get_duration_ms(
                keys::CLIENT_FAILOVER_SLEEP_MAX_MS,
                keys::DEFAULT_CLIENT_FAILOVER_SLEEP_MAX_MS,
            )?),
        })
    }

    /// The pause before failover number `n` (1-based), before jitter: none for the first,
    /// then the base doubling each time, at most the maximum.
    pub fn nominal_pause(&self, n: u32) -> Duration {
        if n <= 1 {
            return Duration::ZERO;
        }
        let factor = 1u32.checked_shl(n - 2).unwrap_or(u32::MAX);
        self.sleep_base
            .checked_mul(factor)
            .unwrap_or(self.sleep_max)
            .min(self.sleep_max)
    }

    /// [`Self::nominal_pause`] with ±50% jitter.
    pub fn pause(&self, n: u32) -> Duration {
        let nominal = self.nominal_pause(n);
        let mut b = [0u8; 2];
        let r = match getrandom::getrandom(&mut b) {
            Ok(()) => f64::from(u16::from_le_bytes(b)) / f64::from(u16::MAX),
            Err(_) => 0.5,
        };
        nominal.mul_f64(0.5 + r)
    }
}

/// One client's place among the RMs.
#[derive(Debug)]
pub struct Rotation {
    addresses: Vec<String>,
    policy: FailoverPolicy,
    current: AtomicUsize,
    /// Failovers since the last success.
    failovers: AtomicU32,
}

/// What a client does after a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Try `address` after `pause`.
    Retry { address: String, pause: Duration },
    /// `yarn.client.failover-max-attempts` failovers were made: give up.
    GiveUp { failovers: u32 },
}

impl Rotation {
    /// Over `addresses` (at least one; with one, a failure retries it within the policy).
    pub fn new(addresses: Vec<String>, policy: FailoverPolicy) -> Self {
        Self {
            addresses,
            policy,
            current: AtomicUsize::new(0),
            failovers: AtomicU32::new(0),
        }
    }

    pub fn addresses(&self) -> &[String] {
        &self.addresses
    }

    /// Whether there is another RM to go to.
    pub fn is_ha(&self) -> bool {
        self.addresses.len() > 1
    }

    /// The address in use.
    pub fn current(&self) -> &str {
        let i = self.current.load(Ordering::Relaxed) % self.addresses.len().max(1);
        self.addresses.get(i).map_or("", String::as_str)
    }

    /// A call on the current address succeeded.
    pub fn succeeded(&self) {
        self.failovers.store(0, Ordering::Relaxed);
    }

    /// A call on `address` failed in a way another RM may answer: the next address in
    /// turn and the pause before it, or give up. (A failure on an address other than the
    /// current one, from a call that raced a failover, moves nothing.)
    pub fn failed(&self, address: &str) -> Next {
        let n = self.failovers.fetch_add(1, Ordering::Relaxed) + 1;
        if n > self.policy.max_attempts {
            self.failovers.store(0, Ordering::Relaxed);
            return Next::GiveUp { failovers: n - 1 };
        }
        if self.current() == address && !self.addresses.is_empty() {
            self.current.fetch_add(1, Ordering::Relaxed);
        }
        Next::Retry {
            address: self.current().to_string(),
            pause: self.policy.pause(n),
        }
    }

    /// A standby named the active (its 307's `Location`): use `address` if it is one of
    /// the RMs.
    pub fn follow(&self, address: &str) {
        if let Some(i) = self.addresses.iter().position(|a| a == address) {
            self.current.store(i, Ordering::Relaxed);
        }
    }
}

/// Why the HA addresses could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HaAddressError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("neither {webapp}.{id} nor {hostname}.{id} is set: with HA every RM's web address must be configured")]
    NoAddressFor {
        id: String,
        webapp: &'static str,
        hostname: &'static str,
    },
    #[error("property '{name}': expected host:port, got '{value}'")]
    BadAddress { name: String, value: String },
    #[error("property '{name}' lists no RM id")]
    NoRmIds { name: &'static str },
}

/// The web address (`host:port`) of the RM `id`: `yarn.resourcemanager.webapp.address.<id>`,
/// else `yarn.resourcemanager.hostname.<id>` with port 8088.
pub fn rm_webapp_address(conf: &Configuration, id: &str) -> Result<String, HaAddressError> {
    let key = format!("{}.{id}", keys::RM_WEBAPP_ADDRESS);
    if let Some(v) = conf.get_nonempty(&key)? {
        let port_ok = v
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !port_ok {
            return Err(HaAddressError::BadAddress {
                name: key,
                value: v,
            });
        }
        return Ok(v);
    }
    let host_key = format!("{}.{id}", keys::RM_HOSTNAME);
    match conf.get_nonempty(&host_key)? {
        Some(h) => Ok(format!("{h}:8088")),
        None => Err(HaAddressError::NoAddressFor {
            id: id.to_string(),
            webapp: keys::RM_WEBAPP_ADDRESS,
            hostname: keys::RM_HOSTNAME,
        }),
    }
}

/// Every RM's id and web address, in `rm-ids` order; None when HA is off.
pub fn ha_rm_addresses(
    conf: &Configuration,
) -> Result<Option<Vec<(String, String)>>, HaAddressError> {
    if !conf.get_bool(keys::RM_HA_ENABLED, keys::DEFAULT_RM_HA_ENABLED)? {
        return Ok(None);
    }
    let ids = conf.get_strings(keys::RM_HA_RM_IDS)?;
    if ids.is_empty() {
        return Err(HaAddressError::NoRmIds {
            name: keys::RM_HA_RM_IDS,
        });
    }
    let mut out = Vec::new();
    for id in ids {
        let a = rm_webapp_address(conf, &id)?;
        out.push((id, a));
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max: u32) -> FailoverPolicy {
        FailoverPolicy {
            max_attempts: max,
            sleep_base: Duration::from_millis(100),
            sleep_max: Duration::from_millis(1000),
        }
    }

    #[test]
    fn pauses_double_from_the_base_to_the_max_and_the_first_failover_is_at_once() {
        let p = policy(15);
        let ms: Vec<u128> = (1..=7).map(|n| p.nominal_pause(n).as_millis()).collect();
        assert_eq!(ms, [0, 100, 200, 400, 800, 1000, 1000]);
        assert_eq!(
            p.nominal_pause(200),
            Duration::from_millis(1000),
            "no overflow"
        );
        for n in 2..8 {
            let j = p.pause(n);
            let nominal = p.nominal_pause(n);
            assert!(j >= nominal / 2 && j <= nominal.mul_f64(1.5), "{n}: {j:?}");
        }
    }

    #[test]
    fn a_rotation_goes_round_robin_and_gives_up_after_max_attempts() {
        let r = Rotation::new(vec!["a:1".into(), "b:2".into()], policy(3));
        assert_eq!(r.current(), "a:1");
        assert!(
            matches!(r.failed("a:1"), Next::Retry { ref address, pause } if address == "b:2" && pause.is_zero())
        );
        assert!(matches!(r.failed("b:2"), Next::Retry { ref address, .. } if address == "a:1"));
        // A late failure of an address no longer in use moves nothing.
        assert!(matches!(r.failed("b:2"), Next::Retry { ref address, .. } if address == "a:1"));
        assert_eq!(r.failed("a:1"), Next::GiveUp { failovers: 3 });
        // A success starts the count again; a 307 names the active.
        r.succeeded();
        r.follow("b:2");
        assert_eq!(r.current(), "b:2");
        r.follow("elsewhere:1");
        assert_eq!(r.current(), "b:2");
    }

    #[test]
    fn ha_addresses_come_from_rm_ids_as_yarn_reads_them() {
        let mut c = Configuration::new();
        assert!(ha_rm_addresses(&c).unwrap().is_none());
        c.set("yarn.resourcemanager.ha.enabled", "true");
        assert!(matches!(
            ha_rm_addresses(&c),
            Err(HaAddressError::NoRmIds { .. })
        ));
        c.set("yarn.resourcemanager.ha.rm-ids", "rm1,rm2");
        c.set("yarn.resourcemanager.webapp.address.rm1", "h1:18088");
        assert!(matches!(
            ha_rm_addresses(&c),
            Err(HaAddressError::NoAddressFor { ref id, .. }) if id == "rm2"
        ));
        c.set("yarn.resourcemanager.hostname.rm2", "h2");
        assert_eq!(
            ha_rm_addresses(&c).unwrap().unwrap(),
            [
                ("rm1".to_string(), "h1:18088".to_string()),
                ("rm2".to_string(), "h2:8088".to_string())
            ]
        );
        c.set("yarn.resourcemanager.webapp.address.rm1", "h1");
        assert!(matches!(
            ha_rm_addresses(&c),
            Err(HaAddressError::BadAddress { .. })
        ));
    }
}
