//! The administrators' family (labels, refreshes, scheduler-configuration changes, token
//! cancellations) and the queries, with the live capacity-scheduler configuration they
//! edit.

use tracing::{error, info, warn};

use super::command::{AdminCommand, Mutated, QueryCommand};
use super::{Driver, Durability, RmError};
use crate::config::capacity::{self, CsProps, SchedConfMutation};
use crate::core::queue_conf::SchedulerConf;
use crate::core::{Caller, CoreError, QueueAclType};
use crate::store::{SchedConfSource, StoredSchedConf};

impl Driver {
    pub(super) fn admin(&mut self, cmd: AdminCommand, now: u64) {
        match cmd {
            AdminCommand::ChangeLabels {
                change,
                caller,
                reply,
            } => {
                let r = self
                    .core
                    .check_admin(&caller)
                    .and_then(|()| self.core.plan_labels(change))
                    .map_err(RmError::from)
                    .and_then(|next| {
                        self.store.put_labels(&next)?;
                        info!(user = %caller.user, "node labels changed");
                        self.core.set_labels(next, now);
                        Ok(())
                    });
                self.settle_and_reply(r, Durability::Logged, reply);
            }
            AdminCommand::RefreshNodes {
                hosts,
                how,
                caller,
                reply,
            } => {
                let r = self.core.check_admin(&caller).map(|()| {
                    let done = self.core.refresh_nodes(hosts, how, now);
                    info!(
                        user = %caller.user,
                        ?how,
                        decommissioned = ?done.decommissioned,
                        decommissioning = ?done.decommissioning,
                        recommissioned = ?done.recommissioned,
                        "nodes refreshed"
                    );
                    done
                });
                if let Err(e) = &r {
                    warn!(user = %caller.user, "refreshNodes refused: {e}");
                }
                self.settle_and_reply(r.map_err(RmError::from), Durability::Logged, reply);
            }
            AdminCommand::RefreshQueues {
                props,
                caller,
                reply,
            } => {
                let r = self
                    .core
                    .check_admin(&caller)
                    .map_err(RmError::from)
                    .and_then(|()| {
                        self.apply_scheduler_props(*props, SchedConfSource::Refresh, &caller, now)
                    });
                self.settle_and_reply(r, Durability::Logged, reply);
            }
            AdminCommand::MutateSchedulerConf {
                mutation,
                caller,
                dry_run,
                reply,
            } => {
                let r = self
                    .core
                    .check_admin(&caller)
                    .map_err(RmError::from)
                    .and_then(|()| self.mutate(&mutation, &caller, dry_run, now));
                self.settle_and_reply(r, Durability::Logged, reply);
            }
            AdminCommand::CancelUserToken {
                seq,
                max_date,
                reply,
            } => {
                let r = self.store.cancel_user_token(seq, max_date, now);
                self.settle_and_reply(r.map_err(RmError::from), Durability::Logged, reply);
            }
        }
    }

    pub(super) fn query(&mut self, cmd: QueryCommand, now: u64) {
        match cmd {
            QueryCommand::QueueAccess {
                queue,
                caller,
                user,
                acl,
                reply,
            } => {
                let r = self.core.queue_access_of(&queue, &caller, &user, acl);
                self.settle_and_reply(r.map_err(RmError::from), Durability::Logged, reply);
            }
            QueryCommand::SubmitAccess { submission, reply } => {
                let queue = self.core.mapped_queue(&submission);
                let submitter = Caller::new(submission.user.clone(), submission.groups.clone());
                let r = match self.core.queue_access(
                    &queue,
                    &submitter,
                    QueueAclType::SubmitApplications,
                ) {
                    Ok(allowed) => Ok(Some((queue, allowed))),
                    Err(CoreError::QueueNotFound(_)) => Ok(None),
                    Err(e) => Err(RmError::from(e)),
                };
                self.settle_and_reply(r, Durability::Logged, reply);
            }
            QueryCommand::CheckAdmin(caller, reply) => {
                let r = self.core.check_admin(&caller);
                self.settle_and_reply(r.map_err(RmError::from), Durability::Logged, reply);
            }
            QueryCommand::GetSchedulerConf(caller, reply) => {
                let r = self
                    .core
                    .check_admin(&caller)
                    .map(|()| (self.sched.version, self.sched.props.clone()));
                self.settle_and_reply(r.map_err(RmError::from), Durability::Logged, reply);
            }
            QueryCommand::Accounting { from, to, reply } => {
                let r = self.store.usage_between(from, to).map(|(rows, skipped)| {
                    for s in skipped {
                        warn!("accounting: skipped a corrupt record: {s}");
                    }
                    (rows, self.current_snapshot())
                });
                self.settle_and_reply(r.map_err(RmError::from), Durability::Logged, reply);
            }
            QueryCommand::UserTokenCancelled { seq, reply } => {
                let r = self.store.is_user_token_cancelled(seq, now);
                self.settle_and_reply(r.map_err(RmError::from), Durability::Logged, reply);
            }
            QueryCommand::OpenContainerToken { token, reply } => {
                use spindle_common::token::{open_container_token, ContainerKeys, TokenError};
                // A key rolled but not yet active is one NMs already hold and sign with.
                let r = match open_container_token(self.core.container_keys(), &token) {
                    Err(TokenError::UnknownMasterKey { .. }) => open_container_token(
                        &ContainerKeys::new(self.core.newest_container_key().clone()),
                        &token,
                    ),
                    r => r,
                };
                self.settle_and_reply(Ok(r), Durability::Logged, reply);
            }
        }
    }
}

impl Driver {
    /// Applies a `sched-conf` mutation to the live set, or (dry run) only says whether it
    /// would be accepted.
    fn mutate(
        &mut self,
        m: &SchedConfMutation,
        caller: &Caller,
        dry_run: bool,
        now: u64,
    ) -> Result<Mutated, RmError> {
        let new_props = capacity::apply_mutation(&self.sched.props, m)?;
        let changes = self.sched.props.changes_to(&new_props);
        if dry_run {
            let conf = self.check_scheduler_props(&new_props)?;
            self.core.check_reconfigure(&conf)?;
            return Ok(Mutated {
                version: self.sched.version,
                props: new_props,
                changes,
            });
        }
        let version =
            self.apply_scheduler_props(new_props, SchedConfSource::Mutation, caller, now)?;
        Ok(Mutated {
            version,
            props: self.sched.props.clone(),
            changes,
        })
    }

    /// Parses `props` and checks the move from the running tree (everything but the
    /// applications, which the core checks).
    fn check_scheduler_props(&self, props: &CsProps) -> Result<SchedulerConf, RmError> {
        let conf = capacity::parse_props(props, &self.sched.site)?;
        capacity::validate_transition(self.core.scheduler_conf(), &conf)
            .map_err(|e| e.locate(props))?;
        Ok(conf)
    }

    /// Validates `props` as a whole, applies them to the core, and makes them durable, in
    /// that order; any refusal leaves the running tree, the live set and the store as they
    /// were. A set equal to the live one changes nothing (and keeps the version).
    fn apply_scheduler_props(
        &mut self,
        props: CsProps,
        source: SchedConfSource,
        caller: &Caller,
        now: u64,
    ) -> Result<u64, RmError> {
        let conf = self.check_scheduler_props(&props)?;
        if props.values() == self.sched.props.values() {
            return Ok(self.sched.version);
        }
        let old = self.core.scheduler_conf().clone();
        if let Err(e) = self.core.reconfigure(conf, now) {
            let _ = self.settle();
            return Err(e.into());
        }
        let version = self.sched.version + 1;
        let stored = StoredSchedConf {
            version,
            source,
            user: caller.user.clone(),
            time: now,
            props: props.values(),
        };
        if let Err(e) = self.store.put_sched_conf(&stored) {
            // Not durable, so not applied: put the old tree back.
            error!("state store write of scheduler configuration version {version} failed: {e}");
            if let Err(re) = self.core.reconfigure(old, now) {
                error!("restoring the previous scheduler configuration failed: {re}");
            }
            let _ = self.settle();
            return Err(RmError::Store(e));
        }
        info!(
            version,
            user = %caller.user,
            source = ?source,
            "scheduler configuration applied ({} properties)",
            props.len()
        );
        self.sched.props = props;
        self.sched.version = version;
        self.settle()?;
        Ok(version)
    }
}
