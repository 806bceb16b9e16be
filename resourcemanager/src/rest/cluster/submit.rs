//! `/ws/v1/cluster/apps/new-application` and `POST /ws/v1/cluster/apps`: a new application id and a submission.

use super::*;

pub(super) async fn new_application(
    State(st): State<AppState>,
) -> Result<Json<NewApplication>, ApiError> {
    let (id, max) = st.driver.call(AppCommand::NewApplication).await?;
    Ok(Json(NewApplication {
        application_id: id,
        maximum_resource_capability: ResourceInfo::from(&max),
    }))
}

/// Converts YARN's submission context into the core's [`Submission`], refusing what
/// cannot be run with a 400 that says which field is wrong.
pub(super) fn submission(
    ctx: ApplicationSubmissionContext,
    user: String,
) -> Result<(ApplicationId, Submission), ApiError> {
    if ctx.application_id.trim().is_empty() {
        return Err(ApiError::bad_request(
            "application-id is required; get one from POST /ws/v1/cluster/apps/new-application",
        ));
    }
    let id = app_id(ctx.application_id.trim())?;
    let spec = ctx.am_container_spec;
    let command = spec.commands.map(|c| c.command).unwrap_or_default();
    let mut env = std::collections::BTreeMap::new();
    for e in spec.environment.map(|e| e.entry.0).unwrap_or_default() {
        if e.key.is_empty() || e.key.contains('=') || e.key.contains('\0') {
            return Err(ApiError::bad_request(format!(
                "invalid environment variable name '{}'",
                e.key
            )));
        }
        env.insert(e.key, e.value);
    }
    let mut local = std::collections::BTreeMap::new();
    for e in spec.local_resources.map(|l| l.entry.0).unwrap_or_default() {
        if e.key.is_empty() || e.key.contains('/') || e.key == ".." || e.key == "." {
            return Err(ApiError::bad_request(format!(
                "invalid local resource name '{}'",
                e.key
            )));
        }
        local.insert(e.key, e.value);
    }
    let resource = ctx
        .resource
        .map(|r| r.to_resource())
        .unwrap_or_else(|| Resource::new(1024, 1));
    check_resource("resource", &resource)?;
    let attempts = ctx.max_app_attempts.unwrap_or(0);
    if attempts < 0 {
        return Err(ApiError::bad_request(format!(
            "max-app-attempts must not be negative, got {attempts}"
        )));
    }
    let lifetime_secs = lifetime(ctx.application_timeouts)?;
    let dependencies = dependencies(ctx.dependencies)?;
    let name = ctx
        .application_name
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "N/A".into());
    Ok((
        id,
        Submission {
            name,
            queue: ctx
                .queue
                .filter(|q| !q.trim().is_empty())
                .unwrap_or_else(|| "default".into())
                .trim()
                .to_string(),
            user,
            priority: ctx.priority.unwrap_or(0),
            application_type: ctx
                .application_type
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| "YARN".into()),
            tags: ctx
                .application_tags
                .map(|t| t.tag.0)
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.trim().to_lowercase())
                .filter(|t| !t.is_empty())
                .collect(),
            am_resource: resource,
            am_launch: spindle_common::records::node::ContainerLaunchContext {
                commands: vec![command],
                environment: env,
                local_resources: local,
            }
            .into(),
            max_app_attempts: attempts as u32,
            keep_containers: ctx.keep_containers_across_application_attempts,
            unmanaged_am: ctx.unmanaged_am,
            groups: Vec::new(),
            node_label_expression: label_expression(ctx.app_node_label_expression),
            am_node_label_expression: label_expression(ctx.am_container_node_label_expression),
            lifetime_secs,
            dependencies,
        },
    ))
}

/// `application-timeouts`: only `LIFETIME`, a positive number of seconds, at most once.
fn lifetime(t: Option<SubmissionTimeouts>) -> Result<Option<u64>, ApiError> {
    let mut secs = None;
    for t in t.map(|t| t.timeout.0).unwrap_or_default() {
        if !t.timeout_type.trim().eq_ignore_ascii_case("LIFETIME") {
            return Err(ApiError::bad_request(format!(
                "application-timeouts: unknown timeout type '{}'; the only type is LIFETIME",
                t.timeout_type
            )));
        }
        if t.seconds <= 0 {
            return Err(ApiError::bad_request(format!(
                "application-timeouts: LIFETIME must be a positive number of seconds, got {}",
                t.seconds
            )));
        }
        if secs.replace(t.seconds as u64).is_some() {
            return Err(ApiError::bad_request(
                "application-timeouts: LIFETIME is given twice",
            ));
        }
    }
    Ok(secs)
}

/// `dependencies`: application ids with `afterany` or `afterok`.
fn dependencies(d: Option<SubmissionDependencies>) -> Result<Vec<Dependency>, ApiError> {
    d.map(|d| d.dependency.0)
        .unwrap_or_default()
        .into_iter()
        .map(|d| {
            let kind = match d.dependency_type.trim().to_ascii_lowercase().as_str() {
                "afterany" => DependencyKind::AfterAny,
                "afterok" => DependencyKind::AfterOk,
                other => {
                    return Err(ApiError::bad_request(format!(
                        "dependencies: unknown type '{other}'; use afterany or afterok"
                    )))
                }
            };
            Ok(Dependency {
                app: app_id(d.application_id.trim())?,
                kind,
            })
        })
        .collect()
}

/// A label expression as given: trimmed, empty meaning none.
fn label_expression(e: Option<String>) -> Option<String> {
    e.map(|x| x.trim().to_string()).filter(|x| !x.is_empty())
}

pub(super) async fn submit(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Q,
    JsonBody(ctx): JsonBody<ApplicationSubmissionContext>,
) -> Result<Response, ApiError> {
    let who = st.caller(&q).await;
    let (id, mut sub) = submission(ctx, who.user.clone())?;
    sub.groups = who.groups;
    crate::rest::auth::check_submit_acl(&st, &id, &sub).await?;
    st.driver
        .call(|r| AppCommand::Submit(id, Box::new(sub), r))
        .await?;
    let location = format!(
        "{}://{}/ws/v1/cluster/apps/{id}",
        st.info.conf.http.scheme(),
        rm_host(&headers)
    );
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)]).into_response())
}
