//! `/ws/v1/cluster/apps/...`: the application list and one application, its state, queue,
//! priority and lifetime timeout (read and change), and `appstatistics`; its attempts are in
//! `attempts`, new applications and submissions in `submit`.

use super::*;
use spindle_common::resource::GPU;

pub(super) fn app_id(raw: &str) -> Result<ApplicationId, ApiError> {
    raw.parse().map_err(|e: spindle_common::ids::IdParseError| {
        ApiError::bad_request(format!("Invalid ApplicationId: {raw} ({e})"))
    })
}

pub(super) fn find_app<'a>(s: &'a Snapshot, raw: &str) -> Result<&'a App, ApiError> {
    let id = app_id(raw)?;
    s.apps.get(&id).ok_or_else(|| {
        ApiError::not_found(format!("java.lang.Exception: app with id: {raw} not found"))
    })
}

pub(super) fn logs_url(scheme: &str, c: &RmContainer, user: &str) -> String {
    format!(
        "{scheme}://{}/node/containerlogs/{}/{}",
        c.node_http, c.id, user
    )
}

pub(in crate::rest) fn app_info(
    s: &Snapshot,
    a: &App,
    now: u64,
    rm: &str,
    with_requests: bool,
) -> AppInfo {
    let att = a.current_attempt();
    let am = att
        .and_then(Attempt::am_container)
        .and_then(|c| s.containers.get(&c));
    let final_ = a.state.is_final();
    // Its attempts name their containers: no walk over every container the RM keeps.
    let live: Vec<&RmContainer> = a
        .attempts
        .iter()
        .flat_map(|t| t.containers.iter())
        .filter_map(|c| s.containers.get(c))
        .filter(|c| c.is_live())
        .collect();
    let used = s.app_usage.get(&a.id).cloned().unwrap_or_default();
    let (mut mem_ms, mut vc_ms) = (a.memory_ms, a.vcore_ms);
    for c in &live {
        let held = now.saturating_sub(c.allocated_time) as i64;
        mem_ms += c.resource.memory_mb * held;
        vc_ms += c.resource.vcores * held;
    }
    let usage = a
        .usage
        .with_live(live.iter().map(|c| (&c.resource, c.allocated_time)), now);
    let cluster_mb: i64 = s.node_usage.values().map(|(t, _)| t.memory_mb).sum();
    let registered = att.is_some_and(|t| t.am_protocol() == AmProtocol::Registered);
    let tracking_ui = if final_ {
        "History"
    } else if registered {
        "ApplicationMaster"
    } else {
        "UNASSIGNED"
    };
    let tracking_url = if !a.tracking_url.is_empty() {
        a.tracking_url.clone()
    } else {
        format!("{}://{rm}/cluster/app/{}", s.scheme, a.id)
    };
    let resource_requests = if with_requests {
        s.app_asks
            .get(&a.id)
            .map(|asks| {
                asks.iter()
                    .map(|(k, ask)| AppResourceRequestInfo {
                        capability: RequestCapabilityInfo {
                            memory: ask.capability.memory_mb,
                            virtual_cores: ask.capability.vcores,
                            resource_informations: ResourceInfo::from(&ask.capability)
                                .resource_informations,
                        },
                        node_label_expression: String::new(),
                        num_containers: i64::from(ask.any),
                        priority: PriorityInfo {
                            priority: k.priority,
                        },
                        relax_locality: ask.relax_locality,
                        resource_name: "*".into(),
                        allocation_request_id: k.allocation_request_id,
                    })
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    AppInfo {
        id: a.id.to_string(),
        user: a.sub.user.clone(),
        name: a.sub.name.clone(),
        queue: a.queue.rsplit('.').next().unwrap_or(&a.queue).to_string(),
        state: a.state,
        final_status: a.final_status,
        progress: if final_ { 100.0 } else { a.progress },
        tracking_ui: tracking_ui.into(),
        tracking_url: Some(tracking_url),
        // An application whose AM container waits for queue room says which queues hold it.
        diagnostics: match s.am_waits.get(&a.id) {
            Some(why) if a.diagnostics.is_empty() => why.clone(),
            _ => a.diagnostics.clone(),
        },
        cluster_id: s.cluster_ts,
        application_type: a.sub.application_type.clone(),
        application_tags: a.sub.tags.join(","),
        priority: a.sub.priority,
        started_time: a.submit_time,
        launch_time: a.launch_time,
        finished_time: a.finish_time,
        elapsed_time: if a.finish_time > 0 {
            a.finish_time.saturating_sub(a.submit_time)
        } else {
            now.saturating_sub(a.submit_time)
        },
        am_container_logs: am.map(|c| logs_url(s.scheme, c, &a.sub.user)),
        am_host_http_address: am.map(|c| c.node_http.clone()),
        am_rpc_address: att
            .filter(|t| t.has_registered())
            .map(|t| format!("{}:{}", t.host, t.rpc_port)),
        master_node_id: am.map(|c| c.node.to_string()),
        allocated_mb: if final_ { -1 } else { used.memory_mb },
        allocated_v_cores: if final_ { -1 } else { used.vcores },
        reserved_mb: if final_ { -1 } else { 0 },
        reserved_v_cores: if final_ { -1 } else { 0 },
        running_containers: if final_ { -1 } else { live.len() as i64 },
        memory_seconds: mem_ms / 1000,
        vcore_seconds: vc_ms / 1000,
        queue_usage_percentage: 0.0,
        cluster_usage_percentage: if cluster_mb > 0 && !final_ {
            used.memory_mb as f32 * 100.0 / cluster_mb as f32
        } else {
            0.0
        },
        resource_requests,
        gangs: s.app_gangs.get(&a.id).cloned().unwrap_or_default(),
        preempted_resource_mb: a.preemption.resource.memory_mb,
        preempted_resource_v_cores: a.preemption.resource.vcores,
        num_non_am_container_preempted: i64::from(a.preemption.containers),
        num_am_container_preempted: i64::from(a.preemption.am_containers),
        preempted_memory_seconds: a.preemption.memory_ms / 1000,
        preempted_vcore_seconds: a.preemption.vcore_ms / 1000,
        preemption: crate::wire::app_preemption(
            &a.preemption,
            s.notices.get(&a.id).copied().unwrap_or(0),
        ),
        timeouts: Some(AppTimeoutsInfo {
            timeout: vec![lifetime_info(a.lifetime, now)],
        }),
        gpu_utilization: s.app_gpu.get(&a.id).and_then(|g| g.utilization),
        idle_gpu_seconds: s.app_gpu.get(&a.id).map(|g| g.idle_gpu_ms / 1000),
        allocated_gpus: if final_ { -1 } else { used.get(GPU) },
        pending_gpus: if final_ {
            0
        } else {
            s.app_asks.get(&a.id).map_or(0, |asks| {
                asks.iter()
                    .map(|(_, ask)| ask.capability.get(GPU) * i64::from(ask.any))
                    .sum()
            })
        },
        resource_seconds_map: seconds_map(&usage.resource_ms),
        preempted_resource_seconds_map: seconds_map(&usage.preempted_ms),
        fair_share_priority: s.app_places.get(&a.id).map(AppFairSharePriorityInfo::from),
        ..Default::default()
    }
}

/// Resource-milliseconds as YARN's `resourceSecondsMap` (whole seconds, rounded down):
/// memory and vcores always, `yarn.io/gpu` always, then every other type the application
/// held.
pub(in crate::rest) fn seconds_map(ms: &Resource) -> ResourceSecondsMap {
    let mut entry: Vec<ResourceSecondsEntry> = ms
        .entries()
        .map(|(k, v)| ResourceSecondsEntry {
            key: k.to_string(),
            value: v / 1000,
        })
        .collect();
    if !entry.iter().any(|e| e.key == GPU) {
        entry.push(ResourceSecondsEntry {
            key: GPU.into(),
            value: 0,
        });
    }
    ResourceSecondsMap {
        entry: OneOrMany(entry),
    }
}

/// YARN's only application timeout type.
const LIFETIME: &str = "LIFETIME";

/// YARN's `AppTimeoutInfo` of a `LIFETIME` deadline: `UNLIMITED` and -1 when none is set,
/// else the ISO 8601 time and the whole seconds left (0 once passed).
pub(super) fn lifetime_info(deadline: Option<u64>, now: u64) -> AppTimeoutInfo {
    match deadline {
        None => AppTimeoutInfo {
            timeout_type: LIFETIME.into(),
            expiry_time: "UNLIMITED".into(),
            remaining_time_in_seconds: -1,
        },
        Some(at) => AppTimeoutInfo {
            timeout_type: LIFETIME.into(),
            expiry_time: spindle_common::time::format_iso8601(at),
            remaining_time_in_seconds: (at.saturating_sub(now) / 1000) as i64,
        },
    }
}

fn check_timeout_type(t: &str) -> Result<(), ApiError> {
    if t.trim().eq_ignore_ascii_case(LIFETIME) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Invalid application timeout type '{t}': the only type is LIFETIME"
        )))
    }
}

/// `GET /apps/{id}/timeouts`: the application's timeouts (its `LIFETIME`, `UNLIMITED` when
/// none is set, as YARN answers).
#[tracing::instrument(skip_all, fields(app_id = %id))]
pub(super) async fn app_timeouts(
    State(st): State<AppState>,
    PathParams(id): PathParams<String>,
) -> Result<Json<AppTimeoutsBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    Ok(Json(AppTimeoutsBody {
        timeouts: AppTimeoutsInfo {
            timeout: vec![lifetime_info(a.lifetime, now_ms())],
        },
    }))
}

/// `GET /apps/{id}/timeouts/{type}`: one timeout (only `LIFETIME` exists).
#[tracing::instrument(skip_all, fields(app_id = %id))]
pub(super) async fn app_timeout(
    State(st): State<AppState>,
    PathParams((id, kind)): PathParams<(String, String)>,
) -> Result<Json<AppTimeoutBody>, ApiError> {
    check_timeout_type(&kind)?;
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    Ok(Json(AppTimeoutBody {
        timeout: lifetime_info(a.lifetime, now_ms()),
    }))
}

/// `PUT /apps/{id}/timeout {"timeout":{"type":"LIFETIME","expiryTime":"<ISO 8601>"}}`: the
/// application is killed at that time (owner, queue admin or cluster admin only). Answers
/// the timeout now in effect.
#[tracing::instrument(skip_all, fields(app_id = %id))]
pub(super) async fn put_app_timeout(
    State(st): State<AppState>,
    Query(q): Q,
    PathParams(id): PathParams<String>,
    JsonBody(body): JsonBody<AppTimeoutBody>,
) -> Result<Json<AppTimeoutBody>, ApiError> {
    let aid = app_id(&id)?;
    let t = body.timeout;
    if t.timeout_type.trim().is_empty() {
        return Err(ApiError::bad_request(
            "Timeout type is null: give \"type\":\"LIFETIME\"",
        ));
    }
    check_timeout_type(&t.timeout_type)?;
    if t.expiry_time.trim().is_empty() {
        return Err(ApiError::bad_request(
            "Expiry time is null: give \"expiryTime\" as yyyy-MM-dd'T'HH:mm:ss.SSSZ",
        ));
    }
    let expiry = spindle_common::time::parse_iso8601(&t.expiry_time)
        .map_err(|e| ApiError::bad_request(format!("Invalid expiryTime: {e}")))?;
    let caller = st.caller(&q).await;
    let at = st
        .driver
        .call(|r| AppCommand::UpdateLifetime {
            id: aid,
            expiry,
            caller,
            reply: r,
        })
        .await?;
    Ok(Json(AppTimeoutBody {
        timeout: lifetime_info(Some(at), now_ms()),
    }))
}

pub(super) fn time_range(
    q: &HashMap<String, String>,
    begin: &str,
    end: &str,
) -> Result<(u64, u64), ApiError> {
    let parse = |k: &str, default: u64| -> Result<u64, ApiError> {
        match q.get(k) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .map(|n| n as u64)
                .ok_or_else(|| ApiError::bad_request(format!("{k} must be greater than 0"))),
        }
    };
    let b = parse(begin, 0)?;
    let e = parse(end, u64::MAX)?;
    if b > e {
        return Err(ApiError::bad_request(format!(
            "{end} must be greater than {begin}"
        )));
    }
    Ok((b, e))
}

pub(super) async fn apps(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Q,
) -> Result<Response, ApiError> {
    let s = st.driver.snapshot().await;
    let mut states = parse_list::<YarnApplicationState>(&q, "states")?;
    if states.is_none() {
        states = parse_list::<YarnApplicationState>(&q, "state")?;
    }
    let final_status = match q.get("finalStatus") {
        Some(v) => Some(
            v.parse::<FinalApplicationStatus>()
                .map_err(ApiError::bad_request)?,
        ),
        None => None,
    };
    let limit = match q.get("limit") {
        Some(v) => {
            let n: i64 = v
                .trim()
                .parse()
                .map_err(|_| ApiError::bad_request(format!("limit must be a number, got {v}")))?;
            if n <= 0 {
                return Err(ApiError::bad_request("limit value must be greater then 0"));
            }
            n as usize
        }
        None => usize::MAX,
    };
    let started = time_range(&q, "startedTimeBegin", "startedTimeEnd")?;
    let finished = time_range(&q, "finishedTimeBegin", "finishedTimeEnd")?;
    let has_finished_filter =
        q.contains_key("finishedTimeBegin") || q.contains_key("finishedTimeEnd");
    let lower_set = |k: &str| -> Option<BTreeSet<String>> {
        q.get(k)
            .map(|v| {
                v.split(',')
                    .map(|t| t.trim().to_lowercase())
                    .filter(|t| !t.is_empty())
                    .collect::<BTreeSet<_>>()
            })
            .filter(|s| !s.is_empty())
    };
    let types = lower_set("applicationTypes");
    let tags = lower_set("applicationTags");
    let user = q.get("user").filter(|u| !u.is_empty());
    let queue = q.get("queue").filter(|u| !u.is_empty());
    let name = q.get("name").filter(|u| !u.is_empty());
    let with_requests = !q
        .get("deSelects")
        .is_some_and(|d| d.split(',').any(|x| x.trim() == "resourceRequests"));
    let offset = paging_offset(&q)?;
    let order = AppOrder::parse(q.get("sort").map(String::as_str))?;
    let now = now_ms();
    let rm = rm_host(&headers);
    // Newest first (`sort=-id`, the web UI's default) walks the map backwards: no sort.
    let newest_first = order.is_some_and(|o| o.key == AppSortKey::Id && o.descending);
    let order = order.filter(|_| !newest_first);
    let all: Box<dyn Iterator<Item = &App>> = if newest_first {
        Box::new(s.apps.values().rev())
    } else {
        Box::new(s.apps.values())
    };
    let matching = all
        .filter(|a| states.as_ref().is_none_or(|v| v.contains(&a.state)))
        .filter(|a| final_status.is_none_or(|f| f == a.final_status))
        .filter(|a| user.is_none_or(|u| *u == a.sub.user))
        .filter(|a| {
            queue.is_none_or(|qn| {
                !a.state.is_final()
                    && (**qn == *a.queue || a.queue.rsplit('.').next() == Some(qn.as_str()))
            })
        })
        .filter(|a| name.is_none_or(|n| *n == a.sub.name))
        .filter(|a| a.submit_time >= started.0 && a.submit_time <= started.1)
        .filter(|a| {
            !has_finished_filter
                || (a.finish_time > 0 && a.finish_time >= finished.0 && a.finish_time <= finished.1)
        })
        .filter(|a| {
            types
                .as_ref()
                .is_none_or(|t| t.contains(&a.sub.application_type.to_lowercase()))
        })
        .filter(|a| {
            tags.as_ref()
                .is_none_or(|t| a.sub.tags.iter().any(|x| t.contains(&x.to_lowercase())))
        });
    // The id order (either way) streams; another sort needs them all.
    let (total, page): (usize, Vec<&App>) = match order {
        None => {
            let mut total = 0;
            let mut page = Vec::new();
            for a in matching {
                if total >= offset && page.len() < limit {
                    page.push(a);
                }
                total += 1;
            }
            (total, page)
        }
        Some(order) => {
            let mut all: Vec<&App> = matching.collect();
            order.sort(&mut all, now);
            let total = all.len();
            (total, all.into_iter().skip(offset).take(limit).collect())
        }
    };
    let list: Vec<AppInfo> = page
        .into_iter()
        .map(|a| app_info(&s, a, now, &rm, with_requests))
        .collect();
    let body = Json(AppsBody {
        apps: if list.is_empty() {
            None
        } else {
            Some(Apps {
                app: OneOrMany(list),
            })
        },
    });
    Ok(([(TOTAL_COUNT, total.to_string())], body).into_response())
}

/// Spindle's paging extension: the response header naming how many items matched the
/// filters before `offset` and `limit` cut the page (`/apps`, `/nodes`).
pub(super) const TOTAL_COUNT: &str = "x-total-count";

/// `?offset=`: how many matching items to skip (default 0).
pub(super) fn paging_offset(q: &HashMap<String, String>) -> Result<usize, ApiError> {
    match q.get("offset") {
        None => Ok(0),
        Some(v) => v
            .trim()
            .parse::<usize>()
            .map_err(|_| ApiError::bad_request(format!("offset must be a number >= 0, got {v}"))),
    }
}

/// The application list's `?sort=` (Spindle's extension): a field, `-` first for descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AppOrder {
    key: AppSortKey,
    descending: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AppSortKey {
    Id,
    User,
    Name,
    Queue,
    State,
    Priority,
    StartedTime,
    FinishedTime,
    ElapsedTime,
}

impl AppOrder {
    const KEYS: [(&'static str, AppSortKey); 9] = [
        ("id", AppSortKey::Id),
        ("user", AppSortKey::User),
        ("name", AppSortKey::Name),
        ("queue", AppSortKey::Queue),
        ("state", AppSortKey::State),
        ("priority", AppSortKey::Priority),
        ("startedTime", AppSortKey::StartedTime),
        ("finishedTime", AppSortKey::FinishedTime),
        ("elapsedTime", AppSortKey::ElapsedTime),
    ];

    /// `None` (or absent) keeps the id order without sorting.
    fn parse(raw: Option<&str>) -> Result<Option<Self>, ApiError> {
        let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else {
            return Ok(None);
        };
        let (descending, name) = match raw.strip_prefix('-') {
            Some(n) => (true, n),
            None => (false, raw),
        };
        let key = Self::KEYS
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, key)| *key)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::KEYS.iter().map(|(k, _)| *k).collect();
                ApiError::bad_request(format!(
                    "sort must be one of {} (with - first for descending), got {raw}",
                    names.join(", ")
                ))
            })?;
        if key == AppSortKey::Id && !descending {
            return Ok(None);
        }
        Ok(Some(Self { key, descending }))
    }

    fn sort(self, apps: &mut [&App], now: u64) {
        let elapsed = |a: &App| {
            if a.finish_time > 0 {
                a.finish_time.saturating_sub(a.submit_time)
            } else {
                now.saturating_sub(a.submit_time)
            }
        };
        // Stable, with the id as the tie-break, so pages do not shuffle between refreshes.
        apps.sort_by(|x, y| {
            let o = match self.key {
                AppSortKey::Id => std::cmp::Ordering::Equal,
                AppSortKey::User => x.sub.user.cmp(&y.sub.user),
                AppSortKey::Name => x.sub.name.cmp(&y.sub.name),
                AppSortKey::Queue => x.queue.cmp(&y.queue),
                AppSortKey::State => x.state.as_str().cmp(y.state.as_str()),
                AppSortKey::Priority => x.sub.priority.cmp(&y.sub.priority),
                AppSortKey::StartedTime => x.submit_time.cmp(&y.submit_time),
                AppSortKey::FinishedTime => x.finish_time.cmp(&y.finish_time),
                AppSortKey::ElapsedTime => elapsed(x).cmp(&elapsed(y)),
            }
            .then(x.id.cmp(&y.id));
            if self.descending {
                o.reverse()
            } else {
                o
            }
        });
    }
}

#[tracing::instrument(skip_all, fields(app_id = %id))]
pub(super) async fn app(
    State(st): State<AppState>,
    headers: HeaderMap,
    PathParams(id): PathParams<String>,
) -> Result<Json<AppBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    Ok(Json(AppBody {
        app: app_info(&s, a, now_ms(), &rm_host(&headers), true),
    }))
}

#[tracing::instrument(skip_all, fields(app_id = %id))]
pub(super) async fn app_state(
    State(st): State<AppState>,
    PathParams(id): PathParams<String>,
) -> Result<Json<AppStateBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    Ok(Json(AppStateBody {
        state: a.state.to_string(),
    }))
}

#[tracing::instrument(skip_all, fields(app_id = %id))]
pub(super) async fn put_app_state(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Q,
    PathParams(id): PathParams<String>,
    JsonBody(body): JsonBody<AppStateBody>,
) -> Result<Response, ApiError> {
    let aid = app_id(&id)?;
    if !body.state.trim().eq_ignore_ascii_case("KILLED") {
        return Err(ApiError::bad_request(
            "Only 'KILLED' is allowed as a target state.",
        ));
    }
    let who = st.caller(&q).await;
    let out = st.driver.call(|r| AppCommand::Kill(aid, who, r)).await?;
    Ok(match out {
        KillOutcome::Done(state) => (
            StatusCode::OK,
            Json(AppStateBody {
                state: state.to_string(),
            }),
        )
            .into_response(),
        KillOutcome::InProgress => (
            StatusCode::ACCEPTED,
            [(
                header::LOCATION,
                format!(
                    "{}://{}/ws/v1/cluster/apps/{aid}/state",
                    st.info.conf.http.scheme(),
                    rm_host(&headers)
                ),
            )],
            Json(AppStateBody {
                state: "ACCEPTED".into(),
            }),
        )
            .into_response(),
    })
}

#[tracing::instrument(skip_all, fields(app_id = %id))]
pub(super) async fn app_queue(
    State(st): State<AppState>,
    PathParams(id): PathParams<String>,
) -> Result<Json<AppQueueBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    Ok(Json(AppQueueBody {
        queue: a.queue.rsplit('.').next().unwrap_or(&a.queue).to_string(),
    }))
}

/// The short leaf name, as `GET /apps/{id}/queue` and `AppInfo.queue` show a queue.
pub(super) fn leaf_name(path: &str) -> String {
    path.rsplit('.').next().unwrap_or(path).to_string()
}

/// `PUT /apps/{id}/queue {"queue":"b"}`: moves the application (owner, queue admin or
/// cluster admin only); answers the queue it is now in.
#[tracing::instrument(skip_all, fields(app_id = %id))]
pub(super) async fn put_app_queue(
    State(st): State<AppState>,
    Query(q): Q,
    PathParams(id): PathParams<String>,
    JsonBody(body): JsonBody<AppQueueBody>,
) -> Result<Json<AppQueueBody>, ApiError> {
    let aid = app_id(&id)?;
    let queue = body.queue.trim().to_string();
    if queue.is_empty() {
        return Err(ApiError::bad_request("Target Queue cannot be empty"));
    }
    let caller = st.caller(&q).await;
    let path = st
        .driver
        .call(|r| AppCommand::MoveApp {
            id: aid,
            queue,
            caller,
            reply: r,
        })
        .await?;
    Ok(Json(AppQueueBody {
        queue: leaf_name(&path),
    }))
}

/// `PUT /apps/{id}/priority {"priority":N}`: answers the effective priority (clamped to
/// `[0, yarn.cluster.max-application-priority]`, as YARN does).
#[tracing::instrument(skip_all, fields(app_id = %id))]
pub(super) async fn put_app_priority(
    State(st): State<AppState>,
    Query(q): Q,
    PathParams(id): PathParams<String>,
    JsonBody(body): JsonBody<AppPriorityBody>,
) -> Result<Json<AppPriorityBody>, ApiError> {
    let aid = app_id(&id)?;
    let caller = st.caller(&q).await;
    let priority = st
        .driver
        .call(|r| AppCommand::SetPriority {
            id: aid,
            priority: body.priority,
            caller,
            reply: r,
        })
        .await?;
    Ok(Json(AppPriorityBody { priority }))
}

#[tracing::instrument(skip_all, fields(app_id = %id))]
pub(super) async fn app_priority(
    State(st): State<AppState>,
    PathParams(id): PathParams<String>,
) -> Result<Json<AppPriorityBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    Ok(Json(AppPriorityBody {
        priority: a.sub.priority,
    }))
}

pub(super) async fn app_statistics(
    State(st): State<AppState>,
    Query(q): Q,
) -> Result<Json<AppStatisticsBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let states = parse_list::<YarnApplicationState>(&q, "states")?
        .unwrap_or_else(|| YarnApplicationState::ALL.to_vec());
    let types: Vec<String> = q
        .get("applicationTypes")
        .map(|v| {
            v.split(',')
                .map(|t| t.trim().to_lowercase())
                .filter(|t| !t.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if types.len() > 1 {
        return Err(ApiError::bad_request(format!(
            "# of applicationTypes = {}, we temporarily support at most one applicationType",
            types.len()
        )));
    }
    let kind = types.first().cloned().unwrap_or_else(|| "*".into());
    let items = states
        .into_iter()
        .map(|state| StatItem {
            state,
            kind: kind.clone(),
            count: s
                .apps
                .values()
                .filter(|a| {
                    a.state == state
                        && (kind == "*" || a.sub.application_type.to_lowercase() == kind)
                })
                .count() as u64,
        })
        .collect();
    Ok(Json(AppStatisticsBody {
        app_stat_info: AppStatInfo { stat_item: items },
    }))
}
#[cfg(test)]
mod paging_tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn offset_defaults_to_zero_and_refuses_what_is_not_a_count() {
        assert_eq!(paging_offset(&q(&[])).ok(), Some(0));
        assert_eq!(paging_offset(&q(&[("offset", " 50 ")])).ok(), Some(50));
        for bad in ["-1", "x", "1.5", ""] {
            assert!(paging_offset(&q(&[("offset", bad)])).is_err(), "{bad}");
        }
    }

    #[test]
    fn sort_names_a_field_with_an_optional_minus() {
        assert_eq!(AppOrder::parse(None).ok(), Some(None));
        assert_eq!(
            AppOrder::parse(Some("id")).ok(),
            Some(None),
            "id order: no sort"
        );
        assert_eq!(
            AppOrder::parse(Some("-startedTime")).ok(),
            Some(Some(AppOrder {
                key: AppSortKey::StartedTime,
                descending: true
            }))
        );
        assert_eq!(
            AppOrder::parse(Some("user")).ok(),
            Some(Some(AppOrder {
                key: AppSortKey::User,
                descending: false
            }))
        );
        assert!(AppOrder::parse(Some("memory")).is_err());
        assert!(AppOrder::parse(Some("--id")).is_err());
    }
}
