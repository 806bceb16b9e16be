//! Submission made idempotent by application id, as YARN's `submitApplication` is: which ids
//! this RM takes as issued, and whether a submission under an id it already holds is the same
//! one again (a client resending a submission whose answer was lost when an RM died or
//! failed over: accepted, with no second application) or another (refused, naming the field).
//!
//! Must not: change an application (a resubmission is answered from what is held).

use super::*;

impl RmCore {
    /// Whether `id` was handed out by `new-application`: by this incarnation (below its next
    /// id), or by an earlier incarnation of this RM whose applications the store holds (after
    /// a failover a client resends, to the new active, a submission the old one never wrote).
    pub(super) fn issued(&self, id: &ApplicationId) -> bool {
        if id.id == 0 {
            return false;
        }
        if id.cluster_timestamp == self.cluster_ts {
            return id.id < self.next_app;
        }
        self.earlier_incarnations.contains(&id.cluster_timestamp)
    }

    /// The first field in which `sub` differs from the submission `app` was made of, as the
    /// core normalized it (the AM resource rounded in its queue); None: the same submission.
    /// The priority is not compared (an admin may have changed it since, and the queue's
    /// default fills a zero), nor the groups (the RM resolves them, they are not sent).
    pub(super) fn resubmission_differs(&self, app: &App, sub: &Submission) -> Option<&'static str> {
        let held = &app.sub;
        let leaf = app
            .queue
            .leaf()
            .and_then(|p| self.sched.tree().find(p.as_str()));
        let am_resource = self.normalize_in(&sub.am_resource, leaf).ok();
        let fields: [(&'static str, bool); 13] = [
            ("user", held.user == sub.user),
            ("queue", held.queue == sub.queue),
            ("application-name", held.name == sub.name),
            (
                "application-type",
                held.application_type == sub.application_type,
            ),
            ("application-tags", held.tags == sub.tags),
            ("resource", am_resource.as_ref() == Some(&held.am_resource)),
            ("am-container-spec", held.am_launch == sub.am_launch),
            (
                "max-app-attempts",
                held.max_app_attempts == sub.max_app_attempts,
            ),
            (
                "keep-containers-across-application-attempts",
                held.keep_containers == sub.keep_containers,
            ),
            ("unmanaged-AM", held.unmanaged_am == sub.unmanaged_am),
            (
                "app-node-label-expression",
                held.node_label_expression == sub.node_label_expression,
            ),
            (
                "am-container-node-label-expression",
                held.am_node_label_expression == sub.am_node_label_expression,
            ),
            (
                "application-timeouts",
                held.lifetime_secs == sub.lifetime_secs,
            ),
        ];
        fields
            .into_iter()
            .find(|(_, same)| !same)
            .map(|(name, _)| name)
            .or_else(|| (held.dependencies != sub.dependencies).then_some("dependencies"))
    }
}
