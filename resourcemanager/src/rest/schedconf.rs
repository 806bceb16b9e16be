//! Live capacity-scheduler reconfiguration and queue ACL checks:
//! `POST /ws/v1/cluster/refresh-queues` (Spindle's REST form of `yarn rmadmin
//! -refreshQueues`), YARN's mutation API `GET|PUT /scheduler-conf`,
//! `POST /scheduler-conf/validate`, `GET /scheduler-conf/version`, and
//! `GET /queues/{queue}/access`.
//!
//! Every change goes through the driver, which validates the whole resulting configuration
//! against YARN's rules and the running applications before anything changes; a refusal is
//! a 400 naming the queue, property and rule, and leaves the running tree untouched. A
//! refused refresh or mutation is also written to the RM's log as YARN's `RMAuditLogger`
//! writes a failure: who asked, from where, what and why ([`audit_failure`]).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, Extensions, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::Value;
use spindle_common::records::cluster::{
    ConfInfo, ConfItem, ConfigVersionInfo, RmQueueAclInfo, SchedConfUpdateInfo,
};
use spindle_common::records::exception::ExceptionKind;

use super::{ApiError, AppState, JsonBody, PathParams};
use crate::config::capacity::{CsProps, QueueParams, SchedConfMutation};
use crate::core::{Caller, QueueAclType};
use crate::driver::{AdminCommand, QueryCommand, RmError};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ws/v1/cluster/refresh-queues", post(refresh_queues))
        .route(
            "/ws/v1/cluster/scheduler-conf",
            get(get_sched_conf).put(put_sched_conf),
        )
        .route("/ws/v1/cluster/scheduler-conf/validate", post(validate))
        .route("/ws/v1/cluster/scheduler-conf/version", get(version))
        .route("/ws/v1/cluster/queues/{queue}/access", get(queue_access))
}

type Q = Query<HashMap<String, String>>;

/// YARN's success text for `PUT /scheduler-conf` (a plain-text body, as YARN sends it).
pub(super) const MUTATION_APPLIED: &str = "Configuration change successfully applied.";
/// YARN's prefix for a refused `validate`.
pub(super) const VALIDATION_FAILED: &str = "CapacityScheduler configuration validation failed:";

fn conf_info(props: &CsProps) -> ConfInfo {
    ConfInfo {
        property: props
            .pairs()
            .map(|(name, value)| ConfItem {
                name: name.to_string(),
                value: value.to_string(),
            })
            .collect(),
    }
}

/// YARN's audit operation and target of `refreshQueues`.
pub(super) const AUDIT_REFRESH_QUEUES: (&str, &str) = ("refreshQueues", "AdminService");
/// The audit operation and target of `refreshNodes`.
pub(super) const AUDIT_REFRESH_NODES: (&str, &str) = ("refreshNodes", "AdminService");
/// The audit operation and target of `PUT /scheduler-conf`.
pub(super) const AUDIT_UPDATE_SCHED_CONF: (&str, &str) =
    ("updateSchedulerConfiguration", "RMWebService");

/// The caller's address, when the server was started with connection info (the daemon's
/// always is).
pub(super) fn remote_ip(ext: &Extensions) -> Option<IpAddr> {
    ext.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip())
}

/// Writes a refused admin operation to the audit log as YARN's `RMAuditLogger.logFailure`
/// does (`spindle_rest_edge::audit`): `USER=<u>\tIP=<addr>\tOPERATION=<op>\tTARGET=<t>\t
/// RESULT=FAILURE\tDESCRIPTION=<why>...`. A 401 or 403 is left to the cluster routes'
/// authentication middleware (`auth::authenticate`), which audits every one of them.
pub(super) fn audit_failure(
    user: &str,
    ip: Option<IpAddr>,
    (operation, target): (&str, &str),
    error: &ApiError,
) {
    if matches!(
        error.kind,
        ExceptionKind::Authorization | ExceptionKind::Forbidden
    ) {
        return;
    }
    spindle_rest_edge::audit::log(&spindle_rest_edge::audit::AuditEvent::failure(
        user,
        ip,
        operation,
        target,
        &error.message,
        "",
    ));
}

/// `refreshQueues`: re-reads `capacity-scheduler.xml` (and the `-D` overrides) from the
/// RM's configuration directory and applies it. The admin check comes first, so nobody
/// else makes the RM read files. A refusal is audited.
async fn refresh_queues(
    State(st): State<AppState>,
    Query(q): Q,
    ext: Extensions,
) -> Result<Json<ConfigVersionInfo>, ApiError> {
    let caller = st.caller(&q).await;
    let user = caller.user.clone();
    let r = refresh(&st, caller).await;
    if let Err(e) = &r {
        audit_failure(&user, remote_ip(&ext), AUDIT_REFRESH_QUEUES, e);
    }
    r
}

async fn refresh(st: &AppState, caller: Caller) -> Result<Json<ConfigVersionInfo>, ApiError> {
    let who = caller.clone();
    st.driver.call(|r| QueryCommand::CheckAdmin(who, r)).await?;
    let conf = st.info.conf.clone();
    let reloaded = tokio::task::spawn_blocking(move || conf.reload_scheduler_props())
        .await
        .map_err(|e| ApiError::new(ExceptionKind::Internal, format!("reload failed: {e}")))?
        .map_err(|e| ApiError::bad_request(format!("Failed to re-init queues : {e}")))?;
    let who = caller.clone();
    let (_, before) = st
        .driver
        .call(|r| QueryCommand::GetSchedulerConf(who, r))
        .await?;
    let changes = before.changes_to(&reloaded.props);
    let version = st
        .driver
        .call(|r| AdminCommand::RefreshQueues {
            props: Box::new(reloaded.props),
            caller,
            reply: r,
        })
        .await?;
    Ok(Json(ConfigVersionInfo {
        version_id: version,
        changes,
        warnings: reloaded.warnings.iter().map(ToString::to_string).collect(),
    }))
}

async fn get_sched_conf(
    State(st): State<AppState>,
    Query(q): Q,
) -> Result<Json<ConfInfo>, ApiError> {
    let caller = st.caller(&q).await;
    let (_, props) = st
        .driver
        .call(|r| QueryCommand::GetSchedulerConf(caller, r))
        .await?;
    Ok(Json(conf_info(&props)))
}

async fn version(
    State(st): State<AppState>,
    Query(q): Q,
) -> Result<Json<ConfigVersionInfo>, ApiError> {
    let caller = st.caller(&q).await;
    let (version, _) = st
        .driver
        .call(|r| QueryCommand::GetSchedulerConf(caller, r))
        .await?;
    Ok(Json(ConfigVersionInfo {
        version_id: version,
        ..Default::default()
    }))
}

/// YARN's `sched-conf` body, root-wrapped (`{"sched-conf":{...}}`, as Spindle's other
/// bodies) or bare (`{"add-queue":...}`, as YARN's JSON provider reads it), to the domain
/// mutation.
fn mutation(body: Value) -> Result<SchedConfMutation, ApiError> {
    let inner = match body {
        Value::Object(mut o) if o.len() == 1 && o.contains_key("sched-conf") => {
            o.remove("sched-conf").unwrap_or(Value::Null)
        }
        other => other,
    };
    let info: SchedConfUpdateInfo = serde_json::from_value(inner)
        .map_err(|e| ApiError::bad_request(format!("Invalid sched-conf body: {e}")))?;
    let params = |queue: &str, p: Option<spindle_common::records::cluster::ConfEntries>| {
        let mut out = Vec::new();
        for e in p.map(|p| p.entry.0).unwrap_or_default() {
            if e.key.trim().is_empty() {
                return Err(ApiError::bad_request(format!(
                    "Invalid sched-conf body: a parameter of queue {queue} has an empty key"
                )));
            }
            out.push((e.key, e.value.unwrap_or_default()));
        }
        Ok(out)
    };
    let mut m = SchedConfMutation {
        remove_queues: info.remove_queue.0,
        ..Default::default()
    };
    for (list, target) in [
        (info.add_queue.0, &mut m.add_queues),
        (info.update_queue.0, &mut m.update_queues),
    ] {
        for q in list {
            if q.queue_name.trim().is_empty() {
                return Err(ApiError::bad_request(
                    "Invalid sched-conf body: queue-name is required",
                ));
            }
            target.push(QueueParams {
                params: params(&q.queue_name, q.params)?,
                queue: q.queue_name,
            });
        }
    }
    m.global = params("(global-updates)", info.global_updates)?;
    Ok(m)
}

/// `PUT /scheduler-conf`. A refusal (a malformed body, an unknown property, a broken rule,
/// a caller who is not an admin) is audited.
async fn put_sched_conf(
    State(st): State<AppState>,
    Query(q): Q,
    ext: Extensions,
    JsonBody(body): JsonBody<Value>,
) -> Result<Response, ApiError> {
    let caller = st.caller(&q).await;
    let user = caller.user.clone();
    let mut warnings = Vec::new();
    let r = match mutation(body) {
        Ok(m) => {
            warnings = m.ignored_keys();
            st.driver
                .call(|r| AdminCommand::MutateSchedulerConf {
                    mutation: Box::new(m),
                    caller,
                    dry_run: false,
                    reply: r,
                })
                .await
                .map_err(ApiError::from)
        }
        Err(e) => Err(e),
    };
    if let Err(e) = &r {
        audit_failure(&user, remote_ip(&ext), AUDIT_UPDATE_SCHED_CONF, e);
    }
    let done = r?;
    // YARN's sentence first (what its clients look for), then what changed and the
    // warnings, a line each (a Spindle extension of the text).
    let mut text = MUTATION_APPLIED.to_string();
    for c in &done.changes {
        text.push_str(&format!("\nchanged: {c}"));
    }
    for w in &warnings {
        text.push_str(&format!("\nwarning: {w}"));
    }
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response())
}

/// A dry run: the would-be configuration, or why it would be refused.
async fn validate(
    State(st): State<AppState>,
    Query(q): Q,
    JsonBody(body): JsonBody<Value>,
) -> Result<Json<ConfInfo>, ApiError> {
    let m = mutation(body)?;
    let caller = st.caller(&q).await;
    let r = st
        .driver
        .call(|r| AdminCommand::MutateSchedulerConf {
            mutation: Box::new(m),
            caller,
            dry_run: true,
            reply: r,
        })
        .await;
    match r {
        Ok(m) => Ok(Json(conf_info(&m.props))),
        Err(RmError::SchedulerConf(e)) => {
            Err(ApiError::bad_request(format!("{VALIDATION_FAILED} {e}")))
        }
        Err(RmError::Core(crate::core::CoreError::Reinit(why))) => {
            Err(ApiError::bad_request(format!("{VALIDATION_FAILED} {why}")))
        }
        Err(e) => Err(e.into()),
    }
}

/// `GET /queues/{queue}/access?user=U&queue-acl-type=SUBMIT_APPLICATIONS|ADMINISTER_QUEUE`.
async fn queue_access(
    State(st): State<AppState>,
    PathParams(queue): PathParams<String>,
    Query(q): Q,
) -> Result<Json<RmQueueAclInfo>, ApiError> {
    let user = q
        .get("user")
        .map(|u| u.trim())
        .filter(|u| !u.is_empty() && u.len() <= 256 && !u.contains(['/', '\0']))
        .ok_or_else(|| ApiError::bad_request("Parameter user is required (the user to check)"))?
        .to_string();
    let acl_type = q
        .get("queue-acl-type")
        .map(|t| t.trim())
        .unwrap_or("SUBMIT_APPLICATIONS");
    let acl = match acl_type {
        "SUBMIT_APPLICATIONS" => QueueAclType::SubmitApplications,
        "ADMINISTER_QUEUE" => QueueAclType::AdministerQueue,
        other => {
            return Err(ApiError::bad_request(format!(
                "Specified queueAclType={other} is not a valid type, valid queue acl types={{SUBMIT_APPLICATIONS/ADMINISTER_QUEUE}}"
            )))
        }
    };
    let caller = st.caller(&q).await;
    let target = Caller::new(user.clone(), st.groups.of(&user).await);
    let allowed = st
        .driver
        .call(|r| QueryCommand::QueueAccess {
            queue: queue.clone(),
            caller,
            user: target,
            acl,
            reply: r,
        })
        .await?;
    Ok(Json(RmQueueAclInfo {
        allowed,
        diagnostics: if allowed {
            String::new()
        } else {
            format!("User={user} doesn't have access to queue={queue} with acl-type={acl_type}")
        },
        user,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sched_conf_bodies_wrapped_or_bare() {
        let body = json!({"add-queue": {"queue-name": "root.c", "params": {"entry": [
            {"key": "capacity", "value": "10"}, {"key": "state", "value": null}]}},
            "update-queue": [{"queue-name": "root.a", "params": {"entry": {"key": "capacity", "value": "60"}}}],
            "remove-queue": ["root.b"],
            "global-updates": {"entry": {"key": "yarn.scheduler.capacity.maximum-applications", "value": "5"}}});
        let m = mutation(body.clone()).unwrap();
        assert_eq!(m.add_queues[0].queue, "root.c");
        assert_eq!(
            m.add_queues[0].params,
            vec![
                ("capacity".to_string(), "10".to_string()),
                ("state".to_string(), String::new())
            ]
        );
        assert_eq!(m.update_queues[0].params[0].1, "60");
        assert_eq!(m.remove_queues, vec!["root.b"]);
        assert_eq!(m.global.len(), 1);
        assert_eq!(mutation(json!({"sched-conf": body})).unwrap(), m);
        assert!(mutation(json!({})).unwrap().is_empty());
        for bad in [
            json!({"addqueue": []}),
            json!({"add-queue": {"params": {}}}),
            json!({"update-queue": {"queue-name": "root.a", "params": {"entry": {"key": " ", "value": "1"}}}}),
            json!([1, 2]),
        ] {
            let e = mutation(bad.clone()).unwrap_err();
            assert_eq!(e.kind, ExceptionKind::BadRequest, "{bad}");
        }
    }
}
