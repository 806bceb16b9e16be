//! Newtype identifiers with Hadoop YARN's text forms.
//!
//! Ids are parsed once, at the edge (REST path, JSON body, environment), and travel typed
//! everywhere else. Their `Display` is exactly YARN's, so logs, REST bodies and directory
//! names match what YARN tooling expects.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why an id string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} id '{text}': expected {expected}")]
pub struct IdParseError {
    pub kind: &'static str,
    pub text: String,
    pub expected: &'static str,
}

fn bad(kind: &'static str, text: &str, expected: &'static str) -> IdParseError {
    IdParseError {
        kind,
        text: text.to_string(),
        expected,
    }
}

/// `application_<clusterTimestamp>_<seq:04>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApplicationId {
    pub cluster_timestamp: u64,
    pub id: u32,
}

impl ApplicationId {
    pub fn new(cluster_timestamp: u64, id: u32) -> Self {
        Self {
            cluster_timestamp,
            id,
        }
    }
}

impl fmt::Display for ApplicationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "application_{}_{:04}", self.cluster_timestamp, self.id)
    }
}

const APP_EXPECTED: &str = "application_<clusterTimestamp>_<sequence>";

impl FromStr for ApplicationId {
    type Err = IdParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let rest = s
            .strip_prefix("application_")
            .ok_or_else(|| bad("application", s, APP_EXPECTED))?;
        let (ts, seq) = rest
            .split_once('_')
            .ok_or_else(|| bad("application", s, APP_EXPECTED))?;
        let cluster_timestamp =
            parse_digits(ts).ok_or_else(|| bad("application", s, APP_EXPECTED))?;
        let id = parse_digits(seq)
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| bad("application", s, APP_EXPECTED))?;
        Ok(Self {
            cluster_timestamp,
            id,
        })
    }
}

/// `appattempt_<clusterTimestamp>_<seq:04>_<attempt:06>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApplicationAttemptId {
    pub application_id: ApplicationId,
    pub attempt_id: u32,
}

impl ApplicationAttemptId {
    pub fn new(application_id: ApplicationId, attempt_id: u32) -> Self {
        Self {
            application_id,
            attempt_id,
        }
    }
}

impl fmt::Display for ApplicationAttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "appattempt_{}_{:04}_{:06}",
            self.application_id.cluster_timestamp, self.application_id.id, self.attempt_id
        )
    }
}

const ATTEMPT_EXPECTED: &str = "appattempt_<clusterTimestamp>_<sequence>_<attempt>";

impl FromStr for ApplicationAttemptId {
    type Err = IdParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let rest = s
            .strip_prefix("appattempt_")
            .ok_or_else(|| bad("application attempt", s, ATTEMPT_EXPECTED))?;
        let parts: Vec<&str> = rest.split('_').collect();
        if parts.len() != 3 {
            return Err(bad("application attempt", s, ATTEMPT_EXPECTED));
        }
        let nums: Option<Vec<u64>> = parts.iter().map(|p| parse_digits(p)).collect();
        let nums = nums.ok_or_else(|| bad("application attempt", s, ATTEMPT_EXPECTED))?;
        let id =
            u32::try_from(nums[1]).map_err(|_| bad("application attempt", s, ATTEMPT_EXPECTED))?;
        let attempt_id =
            u32::try_from(nums[2]).map_err(|_| bad("application attempt", s, ATTEMPT_EXPECTED))?;
        Ok(Self {
            application_id: ApplicationId::new(nums[0], id),
            attempt_id,
        })
    }
}

/// `container_[e<epoch>_]<clusterTimestamp>_<app:04>_<attempt:02>_<seq:06>`.
///
/// The epoch is the RM restart count; it keeps ids unique across work-preserving restarts,
/// as YARN's does, and is omitted from the text when zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerId {
    pub attempt_id: ApplicationAttemptId,
    pub epoch: u32,
    pub seq: u64,
}

impl ContainerId {
    pub fn new(attempt_id: ApplicationAttemptId, epoch: u32, seq: u64) -> Self {
        Self {
            attempt_id,
            epoch,
            seq,
        }
    }
    pub fn application_id(&self) -> ApplicationId {
        self.attempt_id.application_id
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Written by hand rather than with `write!`'s padding: every container token the RM
        // signs carries this id, and the formatting machinery was most of its cost.
        let app = self.attempt_id.application_id;
        f.write_str("container_")?;
        if self.epoch > 0 {
            f.write_str("e")?;
            padded(f, u64::from(self.epoch), 2)?;
            f.write_str("_")?;
        }
        padded(f, app.cluster_timestamp, 0)?;
        f.write_str("_")?;
        padded(f, u64::from(app.id), 4)?;
        f.write_str("_")?;
        padded(f, u64::from(self.attempt_id.attempt_id), 2)?;
        f.write_str("_")?;
        padded(f, self.seq, 6)
    }
}

/// `n` in decimal, zero-padded to at least `width` digits (`{:0width$}` for unsigned).
fn padded(f: &mut fmt::Formatter<'_>, n: u64, width: usize) -> fmt::Result {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    let mut v = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let start = i.min(buf.len().saturating_sub(width));
    // Only ASCII digits were written.
    f.write_str(std::str::from_utf8(&buf[start..]).unwrap_or_default())
}

const CONTAINER_EXPECTED: &str =
    "container_[e<epoch>_]<clusterTimestamp>_<app>_<attempt>_<sequence>";

impl FromStr for ContainerId {
    type Err = IdParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || bad("container", s, CONTAINER_EXPECTED);
        let rest = s.strip_prefix("container_").ok_or_else(err)?;
        let mut parts: Vec<&str> = rest.split('_').collect();
        let mut epoch = 0u32;
        if let Some(first) = parts.first() {
            if let Some(e) = first.strip_prefix('e') {
                epoch = parse_digits(e)
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(err)?;
                parts.remove(0);
            }
        }
        if parts.len() != 4 {
            return Err(err());
        }
        let nums: Option<Vec<u64>> = parts.iter().map(|p| parse_digits(p)).collect();
        let nums = nums.ok_or_else(err)?;
        let app = u32::try_from(nums[1]).map_err(|_| err())?;
        let attempt = u32::try_from(nums[2]).map_err(|_| err())?;
        Ok(Self {
            attempt_id: ApplicationAttemptId::new(ApplicationId::new(nums[0], app), attempt),
            epoch,
            seq: nums[3],
        })
    }
}

/// A NodeManager's identity, `host:port` (the port is the NM's web port in Spindle, since
/// every protocol is HTTP).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId {
    pub host: String,
    pub port: u16,
}

impl NodeId {
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl FromStr for NodeId {
    type Err = IdParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || bad("node", s, "<host>:<port>");
        let (host, port) = s.rsplit_once(':').ok_or_else(err)?;
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        {
            return Err(err());
        }
        let port = port.parse::<u16>().map_err(|_| err())?;
        Ok(Self::new(host, port))
    }
}

/// A full queue path such as `root.default`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueuePath(String);

impl QueuePath {
    pub fn root() -> Self {
        Self("root".to_string())
    }
    /// Parses a path; each dot-separated part must be a non-empty YARN queue name.
    pub fn parse(s: &str) -> Result<Self, IdParseError> {
        let err = || bad("queue", s, "dot-separated queue names such as root.default");
        if s.is_empty()
            || s.split('.')
                .any(|p| p.is_empty() || p.contains(char::is_whitespace))
        {
            return Err(err());
        }
        Ok(Self(s.to_string()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// The last component, YARN's `queueName`.
    pub fn leaf_name(&self) -> &str {
        self.0.rsplit('.').next().unwrap_or(&self.0)
    }
    pub fn child(&self, name: &str) -> Self {
        Self(format!("{}.{}", self.0, name))
    }
    pub fn parent(&self) -> Option<Self> {
        self.0.rsplit_once('.').map(|(p, _)| Self(p.to_string()))
    }
}

/// A path reads as the string it is (it is only ever made by [`QueuePath::parse`] or from
/// another path), so code that formats, compares or looks it up needs no conversion.
impl std::ops::Deref for QueuePath {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for QueuePath {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for QueuePath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for QueuePath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for QueuePath {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<QueuePath> for String {
    fn eq(&self, other: &QueuePath) -> bool {
        *self == other.0
    }
}

impl fmt::Display for QueuePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn parse_digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

macro_rules! string_serde {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
string_serde!(ApplicationId);
string_serde!(ApplicationAttemptId);
string_serde!(ContainerId);
string_serde!(NodeId);

impl FromStr for QueuePath {
    type Err = IdParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}
string_serde!(QueuePath);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids_print_as_yarns_padded_form() {
        let edges = [
            0u64,
            1,
            9,
            10,
            99,
            100,
            9_999,
            10_000,
            999_999,
            1_000_000,
            u64::MAX,
        ];
        for &n in &edges {
            let small = u32::try_from(n).unwrap_or(u32::MAX);
            let c = ContainerId::new(
                ApplicationAttemptId {
                    application_id: ApplicationId {
                        cluster_timestamp: n,
                        id: small,
                    },
                    attempt_id: small,
                },
                small,
                n,
            );
            let epoch = if small > 0 {
                format!("e{small:02}_")
            } else {
                String::new()
            };
            let want = format!("container_{epoch}{n}_{small:04}_{small:02}_{n:06}");
            assert_eq!(c.to_string(), want);
        }
    }

    #[test]
    fn yarn_text_forms_round_trip() {
        let app: ApplicationId = "application_1404198295326_0003".parse().unwrap();
        assert_eq!(app, ApplicationId::new(1404198295326, 3));
        assert_eq!(app.to_string(), "application_1404198295326_0003");
        let att = ApplicationAttemptId::new(app, 1);
        assert_eq!(att.to_string(), "appattempt_1404198295326_0003_000001");
        assert_eq!(
            att.to_string().parse::<ApplicationAttemptId>().unwrap(),
            att
        );
        let c = ContainerId::new(att, 0, 2);
        assert_eq!(c.to_string(), "container_1404198295326_0003_01_000002");
        assert_eq!(c.to_string().parse::<ContainerId>().unwrap(), c);
        let e = ContainerId::new(att, 3, 12);
        assert_eq!(e.to_string(), "container_e03_1404198295326_0003_01_000012");
        assert_eq!(e.to_string().parse::<ContainerId>().unwrap(), e);
        // Sequences past the padding width still round-trip.
        let big = ApplicationId::new(1, 123456);
        assert_eq!(big.to_string().parse::<ApplicationId>().unwrap(), big);
    }

    #[test]
    fn garbage_is_refused_with_the_expected_form() {
        for s in [
            "",
            "application_",
            "application_x_1",
            "application_1_",
            "app_1_1",
            "application_1_2_3",
            "application_-1_2",
        ] {
            let e = s.parse::<ApplicationId>().unwrap_err();
            assert!(
                e.to_string().contains("application_<clusterTimestamp>"),
                "{s}"
            );
        }
        assert!("container_1_2_3".parse::<ContainerId>().is_err());
        assert!("container_ex_1_2_3_4".parse::<ContainerId>().is_err());
        assert!("host".parse::<NodeId>().is_err());
        assert!("host:99999".parse::<NodeId>().is_err());
        assert!("a b:1".parse::<NodeId>().is_err());
        assert_eq!("h:1".parse::<NodeId>().unwrap(), NodeId::new("h", 1));
    }

    #[test]
    fn queue_paths() {
        let q = QueuePath::parse("root.a.b").unwrap();
        assert_eq!(q.leaf_name(), "b");
        assert_eq!(q.parent().unwrap().as_str(), "root.a");
        assert!(QueuePath::parse("root..a").is_err());
        assert!(QueuePath::parse("").is_err());
    }
}
