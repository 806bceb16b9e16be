//! The RM's REST API as a test drives it: [`Rm`], a borrowed view (an HTTP client and the
//! RM's base URL) that the 127.0.0.1 [`crate::Cluster`] and the cluster of hosts
//! ([`crate::hosts::Hosts`]) both hand out, so each REST helper is written once.

use std::time::Duration;

use serde_json::Value;

use crate::{bin, wait_until};

/// The RM at `base` (`http://host:port`), reached with `http`.
pub struct Rm<'a> {
    pub http: &'a reqwest::blocking::Client,
    pub base: String,
}

/// A distributed shell to submit ([`Rm::submit_dshell_spec`]): one worker running `command`.
#[derive(Clone, Debug)]
pub struct DshellSpec<'s> {
    pub name: &'s str,
    pub queue: &'s str,
    /// Submitted as this user (`?user.name=`) when set.
    pub user: Option<&'s str>,
    pub command: &'s str,
    /// The AM container's memory (MB).
    pub am_mb: u64,
    /// The worker's resources, as `DISTRIBUTEDSHELL_CONTAINER_RESOURCES` says them.
    pub worker_resources: &'s str,
    /// `max-app-attempts`.
    pub max_attempts: u32,
}

impl<'s> DshellSpec<'s> {
    /// One attempt, a 256 MB AM and a 256 MB, 1-vcore worker running `command`.
    pub fn new(name: &'s str, command: &'s str) -> Self {
        DshellSpec {
            name,
            queue: "default",
            user: None,
            command,
            am_mb: 256,
            worker_resources: "memory-mb=256,vcores=1",
            max_attempts: 1,
        }
    }
}

impl Rm<'_> {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The value of the RM's metric `name` (a sample without labels) in its `/metrics`.
    pub fn metric(&self, name: &str) -> f64 {
        let body = self
            .http
            .get(self.url("/metrics"))
            .send()
            .expect("metrics")
            .text()
            .expect("text");
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{name} not in /metrics"))
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.try_get(path)
            .unwrap_or_else(|| panic!("GET {} got no answer", self.url(path)))
    }

    /// [`Rm::get`], or None when the RM does not answer (a killed or paused RM of an HA
    /// pair).
    pub fn try_get(&self, path: &str) -> Option<(u16, Value)> {
        let r = self.http.get(self.url(path)).send().ok()?;
        let s = r.status().as_u16();
        Some((s, r.json().unwrap_or(Value::Null)))
    }

    pub fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Value,
    ) -> (u16, Value, Option<String>) {
        let r = self
            .http
            .request(method, self.url(path))
            .json(body)
            .send()
            .expect("send");
        let s = r.status().as_u16();
        let loc = r
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        (s, r.json().unwrap_or(Value::Null), loc)
    }

    /// Submits `spec` as a YARN REST client would (`new-application`, then `POST /apps`);
    /// returns its id once the RM accepted it (202). The AM is the `spindle` binary of this
    /// build, localized from its path (`file://`).
    pub fn submit_dshell_spec(&self, spec: &DshellSpec) -> String {
        let (s, v, _) = self.send(
            reqwest::Method::POST,
            "/ws/v1/cluster/apps/new-application",
            &serde_json::json!({}),
        );
        assert_eq!(s, 200, "{v}");
        let id = v["application-id"].as_str().expect("id").to_string();
        let ctx = serde_json::json!({
            "application-id": id,
            "application-name": spec.name,
            "application-type": "DISTRIBUTEDSHELL",
            "queue": spec.queue,
            "max-app-attempts": spec.max_attempts,
            "am-container-spec": {
                "local-resources": {"entry": [{"key": "spindle", "value": {
                    "resource": format!("file://{}", bin("spindle").display()), "type": "FILE", "visibility": "APPLICATION"}}]},
                "environment": {"entry": [
                    {"key": "DISTRIBUTEDSHELL_NUM_CONTAINERS", "value": "1"},
                    {"key": "DISTRIBUTEDSHELL_CONTAINER_RESOURCES", "value": spec.worker_resources},
                    {"key": "DISTRIBUTEDSHELL_SHELL_COMMAND", "value": spec.command}
                ]},
                "commands": {"command": "./spindle distributed-shell-am"}
            },
            "resource": {"memory": spec.am_mb, "vCores": 1}
        });
        let path = match spec.user {
            Some(u) => format!("/ws/v1/cluster/apps?user.name={u}"),
            None => "/ws/v1/cluster/apps".to_string(),
        };
        let (s, v, _) = self.send(reqwest::Method::POST, &path, &ctx);
        assert_eq!(s, 202, "{v}");
        id
    }

    /// [`Rm::submit_dshell_spec`] of a distributed shell `name` into `queue` whose one worker
    /// (256 MB, 1 vcore) runs `command`.
    pub fn submit_dshell(
        &self,
        name: &str,
        queue: &str,
        user: Option<&str>,
        command: &str,
    ) -> String {
        self.submit_dshell_spec(&DshellSpec {
            queue,
            user,
            ..DshellSpec::new(name, command)
        })
    }

    /// The nodes the RM lists (`/ws/v1/cluster/nodes`, every state).
    pub fn nodes(&self) -> Vec<Value> {
        let (_, v) = self.get("/ws/v1/cluster/nodes");
        v["nodes"]["node"].as_array().cloned().unwrap_or_default()
    }

    /// The RM's view of node `id` (`host:port`), if it lists it.
    pub fn node(&self, id: &str) -> Option<Value> {
        self.nodes().into_iter().find(|n| n["id"] == id)
    }

    pub fn running_nodes(&self) -> usize {
        let (_, v) = self.get("/ws/v1/cluster/nodes?states=RUNNING");
        v["nodes"]["node"].as_array().map(Vec::len).unwrap_or(0)
    }

    pub fn wait_nodes_running(&self, n: usize) {
        wait_until(
            &format!("{n} RUNNING nodes"),
            Duration::from_secs(20),
            || (self.running_nodes() >= n).then_some(()),
        );
    }

    /// The attempts the RM lists for `app`, first first.
    pub fn attempts_of(&self, app: &str) -> Vec<Value> {
        let (_, atts) = self.get(&format!("/ws/v1/cluster/apps/{app}/appattempts"));
        atts["appAttempts"]["appAttempt"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Every container the RM lists for every attempt of `app`, AM first.
    pub fn containers_of(&self, app: &str) -> Vec<Value> {
        let mut out = vec![];
        for a in self.attempts_of(app) {
            let att = a["appAttemptId"].as_str().unwrap_or_default().to_string();
            let (_, cs) = self.get(&format!(
                "/ws/v1/cluster/apps/{app}/appattempts/{att}/containers"
            ));
            out.extend(
                cs["containers"]["container"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
            );
        }
        out
    }

    /// The application's containers that are not an attempt's AM container.
    pub fn workers_of(&self, app: &str) -> Vec<Value> {
        let ams: Vec<Value> = self
            .attempts_of(app)
            .iter()
            .map(|a| a["containerId"].clone())
            .collect();
        self.containers_of(app)
            .into_iter()
            .filter(|x| !ams.contains(&x["containerId"]))
            .collect()
    }

    pub fn app(&self, id: &str) -> Value {
        self.get(&format!("/ws/v1/cluster/apps/{id}")).1["app"].clone()
    }

    /// Waits until the app reaches one of `states`; returns the app object.
    pub fn wait_app_state(&self, id: &str, states: &[&str], timeout: Duration) -> Value {
        wait_until(&format!("{id} to reach {states:?}"), timeout, || {
            let a = self.app(id);
            a["state"]
                .as_str()
                .filter(|s| states.contains(s))
                .map(|_| a.clone())
        })
    }

    /// The text of a container's log file (`stdout`, `stderr`) from its NM (`nm_http`, its
    /// HTTP address); empty if the NM does not answer.
    pub fn container_log(&self, nm_http: &str, container_id: &str, file: &str) -> String {
        self.http
            .get(format!(
                "http://{}/ws/v1/node/containerlogs/{container_id}/{file}",
                nm_http.trim_start_matches("http://")
            ))
            .send()
            .and_then(|r| r.text())
            .unwrap_or_default()
    }

    /// What the NM says of a container: (state, exit code). Once complete, the state is
    /// `EXITED_WITH_*`, or `DONE` after the application finished; ("", i64::MIN) if unknown.
    pub fn nm_container_state(&self, nm_http: &str, container_id: &str) -> (String, i64) {
        let v: Value = self
            .http
            .get(format!(
                "http://{}/ws/v1/node/containers/{container_id}",
                nm_http.trim_start_matches("http://")
            ))
            .send()
            .and_then(|r| r.json())
            .unwrap_or(Value::Null);
        (
            v["container"]["state"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            v["container"]["exitCode"].as_i64().unwrap_or(i64::MIN),
        )
    }

    /// The AM container's `stdout` of the application's attempt `n` (1 first; empty if
    /// unknown).
    pub fn am_stdout(&self, app_id: &str, n: usize) -> String {
        let Some(a) = self.attempts_of(app_id).get(n.saturating_sub(1)).cloned() else {
            return String::new();
        };
        let cid = a["containerId"].as_str().unwrap_or_default();
        let node = a["nodeHttpAddress"].as_str().unwrap_or_default();
        self.container_log(node, cid, "stdout")
    }
}
