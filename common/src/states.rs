//! YARN's public state enums and exit statuses, shared by the RM, the NM and the SDK.
//!
//! They serialize as YARN's upper-case words, which is also their text form in the CLI.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

macro_rules! word_enum {
    ($(#[$m:meta])* $name:ident { $($v:ident),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[allow(non_camel_case_types)]
        pub enum $name { $($v),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            pub fn as_str(&self) -> &'static str {
                match self { $($name::$v => stringify!($v)),+ }
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }
        impl FromStr for $name {
            type Err = String;
            /// Case-insensitive, as YARN's REST filters are.
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let up = s.trim().to_ascii_uppercase();
                $(if up == stringify!($v) { return Ok($name::$v); })+
                Err(format!(
                    "Invalid {} '{}': expected one of {}",
                    stringify!($name), s,
                    [$(stringify!($v)),+].join(", ")
                ))
            }
        }
    };
}

word_enum!(
    /// `YarnApplicationState`.
    YarnApplicationState { NEW, NEW_SAVING, SUBMITTED, ACCEPTED, RUNNING, FINISHED, FAILED, KILLED }
);

impl YarnApplicationState {
    pub fn is_final(&self) -> bool {
        matches!(self, Self::FINISHED | Self::FAILED | Self::KILLED)
    }
}

word_enum!(
    /// `FinalApplicationStatus`.
    FinalApplicationStatus { UNDEFINED, SUCCEEDED, FAILED, KILLED, ENDED }
);

word_enum!(
    /// `NodeState`.
    NodeState { NEW, RUNNING, UNHEALTHY, DECOMMISSIONED, LOST, REBOOTED, DECOMMISSIONING, SHUTDOWN }
);

impl NodeState {
    /// States in which a node takes no new containers and is not counted active.
    pub fn is_inactive(&self) -> bool {
        matches!(
            self,
            Self::DECOMMISSIONED | Self::LOST | Self::REBOOTED | Self::SHUTDOWN
        )
    }
}

word_enum!(
    /// `YarnApplicationAttemptState`.
    YarnApplicationAttemptState {
        NEW, SUBMITTED, SCHEDULED, ALLOCATED_SAVING, ALLOCATED, LAUNCHED, FAILED, RUNNING,
        FINISHING, FINISHED, KILLED
    }
);

word_enum!(
    /// The public `ContainerState` as AMs and the NM heartbeat see it.
    ContainerState { NEW, RUNNING, COMPLETE }
);

word_enum!(
    /// The NM's detailed container state, as its REST API reports it.
    NmContainerState {
        NEW, LOCALIZING, LOCALIZATION_FAILED, SCHEDULED, RUNNING, RELAUNCHING, REINITIALIZING,
        PAUSING, PAUSED, RESUMING, EXITED_WITH_SUCCESS, EXITED_WITH_FAILURE, KILLING,
        CONTAINER_CLEANEDUP_AFTER_KILL, CONTAINER_RESOURCES_CLEANINGUP, DONE
    }
);

word_enum!(
    /// `RMContainerState`, the RM's view of a container's life.
    RmContainerState { NEW, RESERVED, ALLOCATED, ACQUIRED, RUNNING, COMPLETED, EXPIRED, RELEASED, KILLED }
);

/// YARN's `ContainerExitStatus` values.
pub mod exit_status {
    pub const SUCCESS: i32 = 0;
    pub const INVALID: i32 = -1000;
    pub const ABORTED: i32 = -100;
    pub const DISKS_FAILED: i32 = -101;
    pub const PREEMPTED: i32 = -102;
    pub const KILLED_EXCEEDED_VMEM: i32 = -103;
    pub const KILLED_EXCEEDED_PMEM: i32 = -104;
    pub const KILLED_BY_APPMASTER: i32 = -105;
    pub const KILLED_BY_RESOURCEMANAGER: i32 = -106;
    pub const KILLED_AFTER_APP_COMPLETION: i32 = -107;
    pub const KILLED_BY_CONTAINER_SCHEDULER: i32 = -108;
    pub const KILLED_FOR_EXCESS_LOGS: i32 = -109;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_case_insensitively() {
        for s in YarnApplicationState::ALL {
            assert_eq!(
                s.as_str()
                    .to_lowercase()
                    .parse::<YarnApplicationState>()
                    .unwrap(),
                *s
            );
        }
        let e = "RUNING".parse::<YarnApplicationState>().unwrap_err();
        assert!(e.contains("NEW_SAVING"));
        assert_eq!(serde_json::to_string(&NodeState::LOST).unwrap(), "\"LOST\"");
    }
}
