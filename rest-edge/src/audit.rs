//! The audit log both daemons write, in the shape of Hadoop YARN's `RMAuditLogger`: one line
//! per audited call, `USER=.. IP=.. OPERATION=.. TARGET=.. RESULT=SUCCESS|FAILURE` (plus
//! `DESCRIPTION=..` and `PERMISSIONS=..` on a failure, `APPID=..`/`CONTAINERID=..` when the
//! call names one), tab-separated, on the tracing target [`TARGET`]. Every refused call
//! (401/403) is written here; the logging setup of each binary decides where the target goes
//! (the daemon's log, or its own file).
//!
//! Must not: decide whether a call is allowed (the caller has decided; this only records).

use std::fmt::Write as _;
use std::net::IpAddr;

/// The tracing target of audit lines (YARN's logger name).
pub const TARGET: &str = "RMAuditLogger";

/// How an audited call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
}

/// One audited call. `user` is who the caller said or proved they are (`dr.who` when
/// nobody); `ip` the peer's address when the transport knows it.
#[derive(Debug, Clone)]
pub struct AuditEvent<'a> {
    pub user: &'a str,
    pub ip: Option<IpAddr>,
    pub operation: &'a str,
    pub target: &'a str,
    pub outcome: Outcome,
    /// Why it failed (YARN's `DESCRIPTION`); ignored on success.
    pub description: &'a str,
    /// What the caller lacked (YARN's `PERMISSIONS`), e.g. `Unauthenticated` or an ACL name.
    pub permissions: &'a str,
    pub app_id: Option<&'a str>,
    pub container_id: Option<&'a str>,
}

impl<'a> AuditEvent<'a> {
    /// A refused call.
    pub fn failure(
        user: &'a str,
        ip: Option<IpAddr>,
        operation: &'a str,
        target: &'a str,
        description: &'a str,
        permissions: &'a str,
    ) -> Self {
        Self {
            user,
            ip,
            operation,
            target,
            outcome: Outcome::Failure,
            description,
            permissions,
            app_id: None,
            container_id: None,
        }
    }

    /// A call that was allowed and done.
    pub fn success(user: &'a str, ip: Option<IpAddr>, operation: &'a str, target: &'a str) -> Self {
        Self {
            user,
            ip,
            operation,
            target,
            outcome: Outcome::Success,
            description: "",
            permissions: "",
            app_id: None,
            container_id: None,
        }
    }

    pub fn app(mut self, id: &'a str) -> Self {
        self.app_id = Some(id);
        self
    }

    pub fn container(mut self, id: &'a str) -> Self {
        self.container_id = Some(id);
        self
    }

    /// The line as YARN's `RMAuditLogger` writes it: `KEY=value` pairs joined by tabs.
    /// Tabs and line breaks in values are replaced by spaces, so one call is one line.
    pub fn line(&self) -> String {
        let mut s = String::new();
        let mut put = |k: &str, v: &str| {
            if !s.is_empty() {
                s.push('\t');
            }
            let _ = write!(s, "{k}={}", v.replace(['\t', '\n', '\r'], " "));
        };
        put("USER", self.user);
        if let Some(ip) = self.ip {
            put("IP", &ip.to_string());
        }
        put("OPERATION", self.operation);
        put("TARGET", self.target);
        match self.outcome {
            Outcome::Success => put("RESULT", "SUCCESS"),
            Outcome::Failure => {
                put("RESULT", "FAILURE");
                put("DESCRIPTION", self.description);
                put("PERMISSIONS", self.permissions);
            }
        }
        if let Some(a) = self.app_id {
            put("APPID", a);
        }
        if let Some(c) = self.container_id {
            put("CONTAINERID", c);
        }
        s
    }
}

/// Writes the event on the audit target: failures at WARN, successes at INFO.
pub fn log(e: &AuditEvent<'_>) {
    let line = e.line();
    match e.outcome {
        Outcome::Success => tracing::info!(target: "RMAuditLogger", "{line}"),
        Outcome::Failure => tracing::warn!(target: "RMAuditLogger", "{line}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_reads_as_yarns_audit_line() {
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        let e = AuditEvent::failure(
            "mallory",
            Some(ip),
            "Register Node",
            "ResourceTrackerService",
            "no valid node signature\tforged",
            "Unauthenticated",
        );
        assert_eq!(
            e.line(),
            "USER=mallory\tIP=10.0.0.7\tOPERATION=Register Node\tTARGET=ResourceTrackerService\tRESULT=FAILURE\tDESCRIPTION=no valid node signature forged\tPERMISSIONS=Unauthenticated"
        );
        let ok = AuditEvent::success("alice", None, "Kill Application Request", "ClientRMService")
            .app("application_1_0001");
        assert_eq!(
            ok.line(),
            "USER=alice\tOPERATION=Kill Application Request\tTARGET=ClientRMService\tRESULT=SUCCESS\tAPPID=application_1_0001"
        );
    }
}
