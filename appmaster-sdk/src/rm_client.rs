//! An async client of the ResourceManager REST API v1 (`/ws/v1/cluster/...`), as Hadoop
//! YARN's. Writes carry `?user.name=<user>` (YARN's pseudo authentication).

use reqwest::{Method, StatusCode};
use spindle_common::ids::{ApplicationAttemptId, ApplicationId, NodeId};
use spindle_common::records::cluster::{
    AppAttemptInfo, AppAttemptsBody, AppBody, AppInfo, AppPriorityBody, AppQueueBody, AppStateBody,
    ApplicationSubmissionContext, AppsBody, CapacitySchedulerInfo, ClusterInfo, ClusterInfoBody,
    ClusterMetrics, ClusterMetricsBody, ConfInfo, ConfigVersionInfo, ContainerReportInfo,
    ContainersBody, NewApplication, NodeBody, NodeInfo, NodesBody, RmQueueAclInfo,
    SchedConfUpdateInfo, SchedulerBody,
};
use spindle_common::records::labels::{
    AttributesToNodesInfo, LabelsToNodesInfo, NodeAttributesInfo, NodeLabelInfo,
    NodeLabelsEnvelope, NodeLabelsInfo, NodeToAttributesInfo, NodeToLabelsEntryList,
    NodeToLabelsInfo, NodesToAttributesMappingRequest,
};
use spindle_common::states::{FinalApplicationStatus, NodeState, YarnApplicationState};

use crate::address::{current_user, RmAddress};
use crate::error::ClientError;
use crate::http::{decode, Http, Resend};

mod blobs;
mod ha;

pub use ha::HaTransition;

const CLUSTER: &str = "/ws/v1/cluster";

/// Filters of `GET /apps`, named as YARN's query parameters. Empty fields are not sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppsFilter {
    pub states: Vec<YarnApplicationState>,
    pub final_status: Option<FinalApplicationStatus>,
    pub user: Option<String>,
    pub queue: Option<String>,
    pub limit: Option<u64>,
    pub started_time_begin: Option<u64>,
    pub started_time_end: Option<u64>,
    pub finished_time_begin: Option<u64>,
    pub finished_time_end: Option<u64>,
    pub application_types: Vec<String>,
    pub application_tags: Vec<String>,
    pub name: Option<String>,
}

impl AppsFilter {
    /// The query parameters, in a stable order.
    pub fn to_query(&self) -> Vec<(&'static str, String)> {
        let mut q = Vec::new();
        let join = |v: &[String]| v.join(",");
        if !self.states.is_empty() {
            let s: Vec<String> = self.states.iter().map(|s| s.to_string()).collect();
            q.push(("states", join(&s)));
        }
        if let Some(f) = self.final_status {
            q.push(("finalStatus", f.to_string()));
        }
        let opt = |q: &mut Vec<(&'static str, String)>, k: &'static str, v: &Option<String>| {
            if let Some(v) = v {
                q.push((k, v.clone()));
            }
        };
        opt(&mut q, "user", &self.user);
        opt(&mut q, "queue", &self.queue);
        let num = |q: &mut Vec<(&'static str, String)>, k: &'static str, v: Option<u64>| {
            if let Some(v) = v {
                q.push((k, v.to_string()));
            }
        };
        num(&mut q, "limit", self.limit);
        num(&mut q, "startedTimeBegin", self.started_time_begin);
        num(&mut q, "startedTimeEnd", self.started_time_end);
        num(&mut q, "finishedTimeBegin", self.finished_time_begin);
        num(&mut q, "finishedTimeEnd", self.finished_time_end);
        if !self.application_types.is_empty() {
            q.push(("applicationTypes", join(&self.application_types)));
        }
        if !self.application_tags.is_empty() {
            q.push(("applicationTags", join(&self.application_tags)));
        }
        opt(&mut q, "name", &self.name);
        q
    }
}

/// What `PUT /apps/{id}/state {"state":"KILLED"}` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// 200: the application is killed (or had already finished).
    Done,
    /// 202: the kill is in progress; poll the state.
    InProgress,
}

/// Client of one RM.
#[derive(Debug, Clone)]
pub struct RmClient {
    http: Http,
    address: RmAddress,
    user: String,
}

impl RmClient {
    /// A client that writes as [`current_user`].
    pub fn new(address: &RmAddress) -> Result<Self, ClientError> {
        Ok(Self {
            http: Http::new(&address.base_url())?.for_user(None),
            address: address.clone(),
            user: current_user(),
        })
    }

    /// Sends `token` (`Authorization: Bearer`) on every call, for an RM in `token` mode
    /// (see [`crate::user_token::resolve`]); `None` sends none. A 401 is
    /// [`ClientError::Unauthenticated`], which says how to get a token.
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.http = self.http.for_user(token);
        self
    }

    /// Writes as `user` instead.
    pub fn with_user(mut self, user: impl Into<String>) -> Self {
        self.user = user.into();
        self
    }

    /// Fails over among `all` (HA RMs, this client's own address among them) under
    /// `policy`: a call that finds no RM, or a standby that knows no active, goes to the
    /// next; a standby's redirect is followed. Nothing changes with a single address.
    pub fn with_failover(
        mut self,
        all: &[RmAddress],
        policy: spindle_common::failover::FailoverPolicy,
    ) -> Result<Self, ClientError> {
        let bases: Vec<String> = all.iter().map(RmAddress::base_url).collect();
        self.http = self.http.with_failover(&bases, policy)?;
        Ok(self)
    }

    pub fn address(&self) -> &RmAddress {
        &self.address
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    fn path(p: &str) -> String {
        format!("{CLUSTER}{p}")
    }

    fn user_query(&self) -> [(&'static str, &str); 1] {
        [("user.name", self.user.as_str())]
    }

    /// `GET` of a cluster path with query parameters (none sent when empty).
    async fn get_query<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, ClientError> {
        let (rb, url) = self.http.request(Method::GET, &Self::path(path));
        let rb = if query.is_empty() {
            rb
        } else {
            rb.query(query)
        };
        let resp = self.http.send_ok(rb, &url).await?;
        decode(resp, &url).await
    }

    /// An admin write, as `refresh_queues` sends it: `POST` with `?user.name=<user>`, the
    /// extra query parameters and an optional JSON body. Answers the response (status
    /// checked; a refusal is a `Remote` error carrying the RM's message) and its URL.
    async fn admin_post<B: serde::Serialize + ?Sized>(
        &self,
        path: &str,
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> Result<(reqwest::Response, String), ClientError> {
        let (rb, url) = self.http.request(Method::POST, &Self::path(path));
        let mut rb = rb.query(&self.user_query());
        if !query.is_empty() {
            rb = rb.query(query);
        }
        if let Some(b) = body {
            rb = rb.json(b);
        }
        let resp = self.http.send_ok(rb, &url).await?;
        Ok((resp, url))
    }

    pub async fn cluster_info(&self) -> Result<ClusterInfo, ClientError> {
        let b: ClusterInfoBody = self.http.get_json(&Self::path("/info")).await?;
        Ok(b.cluster_info)
    }

    pub async fn metrics(&self) -> Result<ClusterMetrics, ClientError> {
        let b: ClusterMetricsBody = self.http.get_json(&Self::path("/metrics")).await?;
        Ok(b.cluster_metrics)
    }

    /// `GET /apps` with the filter; `{"apps":null}` is an empty list.
    pub async fn apps(&self, filter: &AppsFilter) -> Result<Vec<AppInfo>, ClientError> {
        let (rb, url) = self.http.request(Method::GET, &Self::path("/apps"));
        let resp = self
            .http
            .send_ok(rb.query(&filter.to_query()), &url)
            .await?;
        let b: AppsBody = decode(resp, &url).await?;
        Ok(b.apps.map(|a| a.app.0).unwrap_or_default())
    }

    pub async fn app(&self, id: &ApplicationId) -> Result<AppInfo, ClientError> {
        let b: AppBody = self
            .http
            .get_json(&Self::path(&format!("/apps/{id}")))
            .await?;
        Ok(b.app)
    }

    pub async fn app_attempts(
        &self,
        id: &ApplicationId,
    ) -> Result<Vec<AppAttemptInfo>, ClientError> {
        let b: AppAttemptsBody = self
            .http
            .get_json(&Self::path(&format!("/apps/{id}/appattempts")))
            .await?;
        Ok(b.app_attempts.app_attempt.0)
    }

    /// The containers the RM knows for one attempt (`{"containers":null}` is empty).
    pub async fn attempt_containers(
        &self,
        attempt: &ApplicationAttemptId,
    ) -> Result<Vec<ContainerReportInfo>, ClientError> {
        let app = attempt.application_id;
        let b: ContainersBody = self
            .http
            .get_json(&Self::path(&format!(
                "/apps/{app}/appattempts/{attempt}/containers"
            )))
            .await?;
        Ok(b.containers.map(|c| c.container.0).unwrap_or_default())
    }

    /// `GET /nodes?states=...`; no states means the RM's default (all nodes).
    pub async fn nodes(&self, states: &[NodeState]) -> Result<Vec<NodeInfo>, ClientError> {
        let (rb, url) = self.http.request(Method::GET, &Self::path("/nodes"));
        let rb = if states.is_empty() {
            rb
        } else {
            let s: Vec<String> = states.iter().map(|s| s.to_string()).collect();
            rb.query(&[("states", s.join(","))])
        };
        let resp = self.http.send_ok(rb, &url).await?;
        let b: NodesBody = decode(resp, &url).await?;
        Ok(b.nodes.map(|n| n.node.0).unwrap_or_default())
    }

    pub async fn node(&self, id: &NodeId) -> Result<NodeInfo, ClientError> {
        let b: NodeBody = self
            .http
            .get_json(&Self::path(&format!("/nodes/{id}")))
            .await?;
        Ok(b.node)
    }

    /// `POST /apps/new-application`.
    pub async fn new_application(&self) -> Result<NewApplication, ClientError> {
        let (rb, url) = self
            .http
            .request(Method::POST, &Self::path("/apps/new-application"));
        // A lost answer costs one unused id: asked again of the next RM (YARN's
        // `getNewApplication` is `@Idempotent`).
        let rb = rb.query(&self.user_query());
        let resp = self.http.send_ok_with(rb, &url, Resend::Always).await?;
        decode(resp, &url).await
    }

    /// `POST /images/prefetch` (Spindle's): `nodes` (every RUNNING node when empty) pull
    /// `image` ahead of jobs; the answer names the image as nodes will and the nodes asked.
    pub async fn prefetch_image(
        &self,
        image: &str,
        nodes: &[String],
    ) -> Result<spindle_common::records::cluster::ImagePrefetchInfo, ClientError> {
        let body = spindle_common::records::cluster::ImagePrefetchRequest {
            image: image.to_string(),
            nodes: nodes.to_vec(),
        };
        let (resp, url) = self
            .admin_post("/images/prefetch", &[], Some(&body))
            .await?;
        decode(resp, &url).await
    }

    /// `POST /apps`; YARN answers 202 with a `Location` header naming the new app, which is
    /// returned.
    pub async fn submit(&self, ctx: &ApplicationSubmissionContext) -> Result<String, ClientError> {
        let (rb, url) = self.http.request(Method::POST, &Self::path("/apps"));
        // Idempotent by application id (the RM takes the same submission again without a
        // second application), so a submission whose answer was lost in a failover is sent
        // again to the next RM, as YARN's `@Idempotent` `submitApplication` is.
        let rb = rb.query(&self.user_query()).json(ctx);
        let resp = self.http.send_ok_with(rb, &url, Resend::Always).await?;
        if resp.status() != StatusCode::ACCEPTED {
            return Err(ClientError::Protocol {
                url,
                message: format!(
                    "submission answered {} instead of 202 Accepted",
                    resp.status()
                ),
            });
        }
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        location.ok_or(ClientError::Protocol {
            url,
            message: "submission answered 202 without a Location header".into(),
        })
    }

    /// `PUT /apps/{id}/state {"state":"KILLED"}`.
    pub async fn kill(&self, id: &ApplicationId) -> Result<KillOutcome, ClientError> {
        let (rb, url) = self
            .http
            .request(Method::PUT, &Self::path(&format!("/apps/{id}/state")));
        let body = AppStateBody {
            state: YarnApplicationState::KILLED.to_string(),
        };
        let resp = self
            .http
            .send_ok(rb.query(&self.user_query()).json(&body), &url)
            .await?;
        match resp.status() {
            StatusCode::OK => Ok(KillOutcome::Done),
            StatusCode::ACCEPTED => Ok(KillOutcome::InProgress),
            s => Err(ClientError::Protocol {
                url,
                message: format!("kill answered {s} instead of 200 or 202"),
            }),
        }
    }

    /// `GET /apps/{id}/state`.
    pub async fn app_state(&self, id: &ApplicationId) -> Result<YarnApplicationState, ClientError> {
        let path = Self::path(&format!("/apps/{id}/state"));
        let b: AppStateBody = self.http.get_json(&path).await?;
        b.state.parse().map_err(|e: String| ClientError::Decode {
            url: self.http.url(&path),
            message: e,
        })
    }

    /// `GET /scheduler`: the capacity scheduler's queue tree.
    pub async fn scheduler(&self) -> Result<CapacitySchedulerInfo, ClientError> {
        let b: SchedulerBody = self.http.get_json(&Self::path("/scheduler")).await?;
        Ok(b.scheduler.scheduler_info)
    }

    /// `POST /delegation-token {"renewer": R}`: a new token for the caller (an RM in `token`
    /// mode, called with a token), valid no longer than the token that asks.
    pub async fn delegation_token(
        &self,
        renewer: Option<&str>,
    ) -> Result<spindle_common::records::auth::DelegationToken, ClientError> {
        let body = spindle_common::records::auth::DelegationToken {
            renewer: renewer.map(str::to_string),
            ..Default::default()
        };
        self.http
            .post_json(&Self::path("/delegation-token"), &body)
            .await
    }

    /// `DELETE /delegation-token` with `Hadoop-YARN-RM-Delegation-Token: <token>`: cancels
    /// `token` (the caller must be its owner or renewer).
    pub async fn cancel_delegation_token(&self, token: &str) -> Result<(), ClientError> {
        let (rb, url) = self
            .http
            .request(Method::DELETE, &Self::path("/delegation-token"));
        self.http
            .send_ok(rb.header("Hadoop-YARN-RM-Delegation-Token", token), &url)
            .await?;
        Ok(())
    }

    /// `POST /refresh-queues` (`rmadmin -refreshQueues`): the RM re-reads
    /// `capacity-scheduler.xml`. Answers the configuration version now in effect, what
    /// changed and the unknown keys the RM ignored.
    pub async fn refresh_queues(&self) -> Result<ConfigVersionInfo, ClientError> {
        let (resp, url) = self.admin_post::<()>("/refresh-queues", &[], None).await?;
        decode(resp, &url).await
    }

    /// `POST /refresh-nodes` (`rmadmin -refreshNodes [-g [timeout]]`): the RM re-reads its
    /// include and exclude host files and decommissions the nodes they now keep out, as
    /// `kind` says (`timeout_secs` only with GRACEFUL; none: the RM's default). Answers what
    /// changed.
    pub async fn refresh_nodes(
        &self,
        kind: spindle_common::records::admin::DecommissionType,
        timeout_secs: Option<i64>,
    ) -> Result<spindle_common::records::admin::RefreshNodesInfo, ClientError> {
        let mut query = vec![("decommissionType", format!("{kind:?}"))];
        if let Some(t) = timeout_secs {
            query.push(("decommissionTimeout", t.to_string()));
        }
        let (resp, url) = self
            .admin_post::<()>("/refresh-nodes", &query, None)
            .await?;
        decode(resp, &url).await
    }

    /// `GET /users/{user}/groups` (`rmadmin -getGroups`): the user's groups as the RM
    /// resolves them, primary first.
    pub async fn user_groups(&self, user: &str) -> Result<Vec<String>, ClientError> {
        let encoded: String = user
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let b: spindle_common::records::admin::UserGroupsInfo = self
            .get_query(&format!("/users/{encoded}/groups"), &[])
            .await?;
        Ok(b.groups)
    }

    // ---- Node labels (YARN's `rmadmin -addToClusterNodeLabels` and friends) ----

    /// `GET /get-node-labels`: the cluster's labels.
    pub async fn node_labels(&self) -> Result<Vec<NodeLabelInfo>, ClientError> {
        let b: NodeLabelsEnvelope = self.get_query("/get-node-labels", &[]).await?;
        Ok(b.node_labels_info.node_label_info)
    }

    /// `POST /add-node-labels` (admin): adds labels to the cluster.
    pub async fn add_node_labels(&self, labels: &[NodeLabelInfo]) -> Result<(), ClientError> {
        let body = NodeLabelsEnvelope {
            node_labels_info: NodeLabelsInfo {
                node_label_info: labels.to_vec(),
            },
        };
        self.admin_post("/add-node-labels", &[], Some(&body))
            .await?;
        Ok(())
    }

    /// `POST /remove-node-labels?labels=a&labels=b` (admin).
    pub async fn remove_node_labels(&self, labels: &[String]) -> Result<(), ClientError> {
        let q = repeated("labels", labels);
        self.admin_post::<()>("/remove-node-labels", &q, None)
            .await?;
        Ok(())
    }

    /// `POST /replace-node-to-labels` (admin): each named node's labels become the given ones.
    pub async fn replace_node_to_labels(
        &self,
        mapping: &NodeToLabelsEntryList,
    ) -> Result<(), ClientError> {
        self.admin_post("/replace-node-to-labels", &[], Some(mapping))
            .await?;
        Ok(())
    }

    /// `GET /get-node-to-labels`: node id to its labels.
    pub async fn node_to_labels(&self) -> Result<NodeToLabelsInfo, ClientError> {
        self.get_query("/get-node-to-labels", &[]).await
    }

    /// `GET /label-mappings[?labels=x&labels=y]`: label to its nodes (every label when
    /// `labels` is empty).
    pub async fn labels_to_nodes(
        &self,
        labels: &[String],
    ) -> Result<LabelsToNodesInfo, ClientError> {
        self.get_query("/label-mappings", &repeated("labels", labels))
            .await
    }

    /// `GET /nodes/{nodeId}/get-labels`.
    pub async fn labels_of_node(&self, node_id: &str) -> Result<Vec<NodeLabelInfo>, ClientError> {
        let b: NodeLabelsInfo = self
            .get_query(&format!("/nodes/{node_id}/get-labels"), &[])
            .await?;
        Ok(b.node_label_info)
    }

    /// `POST /nodes/{nodeId}/replace-labels?labels=x` (admin); no labels clears the node's.
    pub async fn replace_labels_on_node(
        &self,
        node_id: &str,
        labels: &[String],
    ) -> Result<(), ClientError> {
        let q = repeated("labels", labels);
        self.admin_post::<()>(&format!("/nodes/{node_id}/replace-labels"), &q, None)
            .await?;
        Ok(())
    }

    // ---- Node attributes (YARN's `yarn nodeattributes`) ----

    /// `GET /get-node-attributes`: the attribute keys known in the cluster (prefix, name,
    /// type; no values).
    pub async fn node_attributes(&self) -> Result<NodeAttributesInfo, ClientError> {
        self.get_query("/get-node-attributes", &[]).await
    }

    /// `GET /get-attributes-to-nodes[?attributes=prefix/name,...]`.
    pub async fn attributes_to_nodes(
        &self,
        attributes: &[String],
    ) -> Result<AttributesToNodesInfo, ClientError> {
        self.get_query(
            "/get-attributes-to-nodes",
            &joined("attributes", attributes),
        )
        .await
    }

    /// `GET /get-node-to-attributes[?hostnames=h1,h2]`.
    pub async fn node_to_attributes(
        &self,
        hostnames: &[String],
    ) -> Result<NodeToAttributesInfo, ClientError> {
        self.get_query("/get-node-to-attributes", &joined("hostnames", hostnames))
            .await
    }

    /// `POST /node-attributes-mapping` (admin): adds, removes or replaces centrally set
    /// (`rm.yarn.io/`) attributes of nodes.
    pub async fn map_node_attributes(
        &self,
        request: &NodesToAttributesMappingRequest,
    ) -> Result<(), ClientError> {
        self.admin_post("/node-attributes-mapping", &[], Some(request))
            .await?;
        Ok(())
    }

    /// `GET /scheduler-conf`: the live capacity-scheduler properties, `(name, value)`.
    pub async fn scheduler_conf(&self) -> Result<Vec<(String, String)>, ClientError> {
        let (rb, url) = self
            .http
            .request(Method::GET, &Self::path("/scheduler-conf"));
        let resp = self
            .http
            .send_ok(rb.query(&self.user_query()), &url)
            .await?;
        let b: ConfInfo = decode(resp, &url).await?;
        Ok(b.property.into_iter().map(|p| (p.name, p.value)).collect())
    }

    /// `PUT /scheduler-conf`: applies a `sched-conf` mutation (a refusal is a `Remote`
    /// error whose message names queue, property and rule). Answers the RM's text: YARN's
    /// sentence, then a `changed: ` line per property changed and a `warning: ` line per
    /// key Spindle stores without reading.
    pub async fn update_scheduler_conf(
        &self,
        update: &SchedConfUpdateInfo,
    ) -> Result<String, ClientError> {
        let (rb, url) = self
            .http
            .request(Method::PUT, &Self::path("/scheduler-conf"));
        let resp = self
            .http
            .send_ok(rb.query(&self.user_query()).json(update), &url)
            .await?;
        Ok(resp.text().await.unwrap_or_default())
    }

    /// `POST /scheduler-conf/validate`: the properties the mutation would produce.
    pub async fn validate_scheduler_conf(
        &self,
        update: &SchedConfUpdateInfo,
    ) -> Result<Vec<(String, String)>, ClientError> {
        let (rb, url) = self
            .http
            .request(Method::POST, &Self::path("/scheduler-conf/validate"));
        let resp = self
            .http
            .send_ok(rb.query(&self.user_query()).json(update), &url)
            .await?;
        let b: ConfInfo = decode(resp, &url).await?;
        Ok(b.property.into_iter().map(|p| (p.name, p.value)).collect())
    }

    /// `GET /scheduler-conf/version`.
    pub async fn scheduler_conf_version(&self) -> Result<u64, ClientError> {
        let (rb, url) = self
            .http
            .request(Method::GET, &Self::path("/scheduler-conf/version"));
        let resp = self
            .http
            .send_ok(rb.query(&self.user_query()), &url)
            .await?;
        let b: ConfigVersionInfo = decode(resp, &url).await?;
        Ok(b.version_id)
    }

    /// `PUT /apps/{id}/queue`: moves the application; answers its new queue (leaf name).
    pub async fn move_app(&self, id: &ApplicationId, queue: &str) -> Result<String, ClientError> {
        let (rb, url) = self
            .http
            .request(Method::PUT, &Self::path(&format!("/apps/{id}/queue")));
        let body = AppQueueBody {
            queue: queue.to_string(),
        };
        let resp = self
            .http
            .send_ok(rb.query(&self.user_query()).json(&body), &url)
            .await?;
        let b: AppQueueBody = decode(resp, &url).await?;
        Ok(b.queue)
    }

    /// `PUT /apps/{id}/priority`: answers the effective priority.
    pub async fn set_priority(
        &self,
        id: &ApplicationId,
        priority: i32,
    ) -> Result<i32, ClientError> {
        let (rb, url) = self
            .http
            .request(Method::PUT, &Self::path(&format!("/apps/{id}/priority")));
        let resp = self
            .http
            .send_ok(
                rb.query(&self.user_query())
                    .json(&AppPriorityBody { priority }),
                &url,
            )
            .await?;
        let b: AppPriorityBody = decode(resp, &url).await?;
        Ok(b.priority)
    }

    /// `GET /queues/{queue}/access`: whether `user` holds the ACL (`SUBMIT_APPLICATIONS` or
    /// `ADMINISTER_QUEUE`) on the queue.
    pub async fn queue_access(
        &self,
        queue: &str,
        user: &str,
        acl_type: &str,
    ) -> Result<RmQueueAclInfo, ClientError> {
        let path = Self::path(&format!("/queues/{}/access", urlencoding::encode(queue)));
        let (rb, url) = self.http.request(Method::GET, &path);
        let resp = self
            .http
            .send_ok(
                rb.query(&self.user_query())
                    .query(&[("user", user), ("queue-acl-type", acl_type)]),
                &url,
            )
            .await?;
        decode(resp, &url).await
    }

    /// `GET /apps/{id}/appattempts/{attemptId}`: one attempt.
    pub async fn app_attempt(
        &self,
        attempt: &ApplicationAttemptId,
    ) -> Result<AppAttemptInfo, ClientError> {
        let app = attempt.application_id;
        let b: spindle_common::records::cluster::AppAttemptBody = self
            .get_query(&format!("/apps/{app}/appattempts/{attempt}"), &[])
            .await?;
        Ok(b.app_attempt)
    }

    /// `GET /apps/{id}/appattempts/{attemptId}/containers/{containerId}`: one container of
    /// the attempt its id names.
    pub async fn container(
        &self,
        container: &spindle_common::ids::ContainerId,
    ) -> Result<ContainerReportInfo, ClientError> {
        let attempt = container.attempt_id;
        let app = attempt.application_id;
        let b: spindle_common::records::cluster::ContainerReportBody = self
            .get_query(
                &format!("/apps/{app}/appattempts/{attempt}/containers/{container}"),
                &[],
            )
            .await?;
        Ok(b.container)
    }

    /// `GET /accounting`: usage per group over a period. `from` and `to` are passed as given
    /// (ms since the epoch or ISO 8601; the RM's defaults when `None`), `group_by` is
    /// `queue`, `user` or `application` (`queue` when `None`).
    pub async fn accounting(
        &self,
        from: Option<&str>,
        to: Option<&str>,
        group_by: Option<&str>,
    ) -> Result<spindle_common::records::cluster::AccountingInfo, ClientError> {
        let query: Vec<(&str, String)> = [("from", from), ("to", to), ("groupBy", group_by)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v.to_string())))
            .collect();
        let b: spindle_common::records::cluster::AccountingBody =
            self.get_query("/accounting", &query).await?;
        Ok(b.accounting)
    }

    /// `GET /apps/{id}/timeouts`: the application's timeouts (`LIFETIME`).
    pub async fn app_timeouts(
        &self,
        id: &ApplicationId,
    ) -> Result<Vec<spindle_common::records::cluster::AppTimeoutInfo>, ClientError> {
        let b: spindle_common::records::cluster::AppTimeoutsBody =
            self.get_query(&format!("/apps/{id}/timeouts"), &[]).await?;
        Ok(b.timeouts.timeout)
    }

    /// `PUT /apps/{id}/timeout`: sets the application's `LIFETIME` to end at `expiry_time`
    /// (ISO 8601, `yyyy-MM-dd'T'HH:mm:ss.SSSZ`); answers the timeout in effect.
    pub async fn update_lifetime(
        &self,
        id: &ApplicationId,
        expiry_time: &str,
    ) -> Result<spindle_common::records::cluster::AppTimeoutInfo, ClientError> {
        use spindle_common::records::cluster::{AppTimeoutBody, AppTimeoutInfo};
        let (rb, url) = self
            .http
            .request(Method::PUT, &Self::path(&format!("/apps/{id}/timeout")));
        let body = AppTimeoutBody {
            timeout: AppTimeoutInfo {
                timeout_type: "LIFETIME".into(),
                expiry_time: expiry_time.to_string(),
                remaining_time_in_seconds: 0,
            },
        };
        let resp = self
            .http
            .send_ok(rb.query(&self.user_query()).json(&body), &url)
            .await?;
        let b: AppTimeoutBody = decode(resp, &url).await?;
        Ok(b.timeout)
    }

    /// The base URL, `http://host:port`.
    pub fn base_url(&self) -> &str {
        self.http.base()
    }
}

/// `name=a&name=b`, as JAX-RS reads a `Set<String>` query parameter.
fn repeated(name: &'static str, values: &[String]) -> Vec<(&'static str, String)> {
    values.iter().map(|v| (name, v.clone())).collect()
}

/// `name=a,b` (nothing when empty).
fn joined(name: &'static str, values: &[String]) -> Vec<(&'static str, String)> {
    if values.is_empty() {
        Vec::new()
    } else {
        vec![(name, values.join(","))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_query_uses_yarn_names() {
        let f = AppsFilter {
            states: vec![
                YarnApplicationState::RUNNING,
                YarnApplicationState::ACCEPTED,
            ],
            application_types: vec!["DISTRIBUTEDSHELL".into(), "SPARK".into()],
            limit: Some(5),
            ..Default::default()
        };
        assert_eq!(
            f.to_query(),
            vec![
                ("states", "RUNNING,ACCEPTED".to_string()),
                ("limit", "5".to_string()),
                ("applicationTypes", "DISTRIBUTEDSHELL,SPARK".to_string()),
            ]
        );
        assert!(AppsFilter::default().to_query().is_empty());
    }
}
