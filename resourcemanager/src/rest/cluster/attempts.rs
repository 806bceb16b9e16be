//! `/ws/v1/cluster/apps/{appid}/appattempts/...`: an application's attempts and their containers.

use super::*;

pub(super) fn attempt_info(s: &Snapshot, a: &App, t: &Attempt) -> AppAttemptInfo {
    let am = t.am_container().and_then(|c| s.containers.get(&c));
    AppAttemptInfo {
        id: t.id.attempt_id,
        start_time: t.start_time,
        finished_time: t.finish_time,
        container_id: t.am_container().map(|c| c.to_string()).unwrap_or_default(),
        node_http_address: t.am_node_http().unwrap_or_default().to_string(),
        node_id: t.am_node().map(|n| n.to_string()).unwrap_or_default(),
        logs_link: am
            .map(|c| logs_url(s.scheme, c, &a.sub.user))
            .unwrap_or_default(),
        blacklisted_nodes: String::new(),
        nodes_blacklisted_by_system: String::new(),
        app_attempt_id: t.id.to_string(),
        app_attempt_state: t.state().to_string(),
        diagnostics_info: t.diagnostics.clone(),
    }
}

#[tracing::instrument(skip_all, fields(app_id = %id))]
pub(super) async fn attempts(
    State(st): State<AppState>,
    PathParams(id): PathParams<String>,
) -> Result<Json<AppAttemptsBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    let list = a.attempts.iter().map(|t| attempt_info(&s, a, t)).collect();
    Ok(Json(AppAttemptsBody {
        app_attempts: AppAttempts {
            app_attempt: OneOrMany(list),
        },
    }))
}

pub(super) fn find_attempt<'a>(a: &'a App, raw: &str) -> Result<&'a Attempt, ApiError> {
    let id: ApplicationAttemptId =
        raw.parse()
            .map_err(|e: spindle_common::ids::IdParseError| {
                ApiError::bad_request(format!("Invalid AppAttemptId: {raw} ({e})"))
            })?;
    a.attempt(&id).ok_or_else(|| {
        ApiError::not_found(format!(
            "java.lang.Exception: appattempt with id: {raw} not found"
        ))
    })
}

#[tracing::instrument(skip_all, fields(app_id = %id, attempt_id = %att))]
pub(super) async fn attempt(
    State(st): State<AppState>,
    PathParams((id, att)): PathParams<(String, String)>,
) -> Result<Json<AppAttemptBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    let t = find_attempt(a, &att)?;
    Ok(Json(AppAttemptBody {
        app_attempt: attempt_info(&s, a, t),
    }))
}

pub(super) fn container_report(
    scheme: &str,
    c: &RmContainer,
    user: &str,
    now: u64,
) -> ContainerReportInfo {
    let end = if c.finish_time > 0 {
        c.finish_time
    } else {
        now
    };
    ContainerReportInfo {
        container_id: c.id.to_string(),
        allocated_mb: c.resource.memory_mb,
        allocated_v_cores: c.resource.vcores,
        assigned_node_id: c.node.to_string(),
        priority: c.priority,
        started_time: c.allocated_time,
        finished_time: c.finish_time,
        elapsed_time: end.saturating_sub(c.allocated_time),
        diagnostics_info: c.diagnostics.clone(),
        log_url: logs_url(scheme, c, user),
        container_exit_status: c.exit_status,
        container_state: match c.state {
            spindle_common::states::RmContainerState::COMPLETED
            | spindle_common::states::RmContainerState::KILLED
            | spindle_common::states::RmContainerState::RELEASED
            | spindle_common::states::RmContainerState::EXPIRED => "COMPLETE".into(),
            spindle_common::states::RmContainerState::RUNNING => "RUNNING".into(),
            _ => "NEW".into(),
        },
        node_http_address: format!("{scheme}://{}", c.node_http),
        node_id: c.node.to_string(),
        allocated_resources: c
            .resource
            .entries()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    }
}

#[tracing::instrument(skip_all, fields(app_id = %id, attempt_id = %att))]
pub(super) async fn attempt_containers(
    State(st): State<AppState>,
    PathParams((id, att)): PathParams<(String, String)>,
) -> Result<Json<ContainersBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    let t = find_attempt(a, &att)?;
    let now = now_ms();
    let list: Vec<ContainerReportInfo> = t
        .containers
        .iter()
        .filter_map(|c| s.containers.get(c))
        .map(|c| container_report(s.scheme, c, &a.sub.user, now))
        .collect();
    Ok(Json(ContainersBody {
        containers: if list.is_empty() {
            None
        } else {
            Some(Containers {
                container: OneOrMany(list),
            })
        },
    }))
}

#[tracing::instrument(skip_all, fields(app_id = %id, attempt_id = %att, container_id = %cid))]
pub(super) async fn attempt_container(
    State(st): State<AppState>,
    PathParams((id, att, cid)): PathParams<(String, String, String)>,
) -> Result<Json<ContainerReportBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    let t = find_attempt(a, &att)?;
    let c: ContainerId = cid
        .parse()
        .map_err(|e: spindle_common::ids::IdParseError| ApiError::bad_request(e.to_string()))?;
    let rc = t
        .containers
        .contains(&c)
        .then(|| s.containers.get(&c))
        .flatten()
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "java.lang.Exception: container with id: {cid} not found"
            ))
        })?;
    Ok(Json(ContainerReportBody {
        container: container_report(s.scheme, rc, &a.sub.user, now_ms()),
    }))
}
