//! Queues seen from the lifecycle layer: reconfiguration, moving an application, application priority, ACL checks and the queue views.

use super::*;

impl RmCore {
    pub fn scheduler_conf(&self) -> &SchedulerConf {
        self.sched.conf()
    }

    /// Whether `caller` may modify (kill, move, reprioritize) an application: its owner, an
    /// administrator of its queue, or a cluster administrator (`yarn.admin.acl`). Everyone
    /// may when `yarn.acl.enable` is false, as in YARN.
    pub(super) fn check_modify(
        &self,
        id: &ApplicationId,
        caller: &Caller,
        what: &'static str,
    ) -> Result<(), CoreError> {
        let app = self.apps.get(id).ok_or(CoreError::AppNotFound(*id))?;
        let conf = self.sched.conf();
        if !conf.acl_enabled
            || app.sub.user == caller.user
            || conf.admin_acl.allows(&caller.user, &caller.groups)
        {
            return Ok(());
        }
        let tree = self.sched.tree();
        if let Some(leaf) = tree.leaf(&app.queue) {
            if tree.acl_allows(leaf, &caller.user, &caller.groups, true) {
                return Ok(());
            }
        }
        Err(CoreError::NotAppAdmin {
            user: caller.user.clone(),
            what,
            app: *id,
            owner: app.sub.user.clone(),
            queue: app.queue.to_string(),
        })
    }

    /// `GET /queues/{queue}/access`: whether `caller` holds `acl` on `queue`.
    pub fn queue_access(
        &self,
        queue: &str,
        caller: &Caller,
        acl: QueueAclType,
    ) -> Result<bool, CoreError> {
        let tree = self.sched.tree();
        let idx = tree
            .find(queue)
            .ok_or_else(|| CoreError::QueueNotFound(queue.to_string()))?;
        let conf = self.sched.conf();
        if !conf.acl_enabled || conf.admin_acl.allows(&caller.user, &caller.groups) {
            return Ok(true);
        }
        let admin = acl == QueueAclType::AdministerQueue;
        // Queue admins may also submit, as in YARN.
        Ok(tree.acl_allows(idx, &caller.user, &caller.groups, admin)
            || (!admin && tree.acl_allows(idx, &caller.user, &caller.groups, true)))
    }

    /// `PUT /apps/{id}/queue`: moves a running or accepted application, with its usage, to
    /// another RUNNING leaf whose limits admit it. Returns the new leaf's path.
    pub fn move_app(
        &mut self,
        id: &ApplicationId,
        queue: &str,
        caller: &Caller,
        now: u64,
    ) -> Result<QueuePath, CoreError> {
        self.check_modify(id, caller, "move")?;
        let app = self.apps.get(id).ok_or(CoreError::AppNotFound(*id))?;
        if app.state.is_final() || app.killing_since.is_some() {
            return Err(CoreError::CannotMove(app.state));
        }
        let tree = self.sched.tree();
        let target = tree
            .find(queue)
            .ok_or_else(|| CoreError::MoveToUnknownQueue {
                app: *id,
                queue: queue.to_string(),
            })?;
        let q = &tree.queues[target];
        if !q.is_leaf() {
            return Err(CoreError::MoveToParentQueue {
                app: *id,
                queue: queue.to_string(),
                path: q.spec.path.clone(),
            });
        }
        if tree
            .path_up(target)
            .any(|x| tree.queues[x].spec.state == QueueState::Stopped)
        {
            return Err(CoreError::MoveToStoppedQueue {
                app: *id,
                path: q.spec.path.clone(),
            });
        }
        let conf = self.sched.conf();
        if conf.acl_enabled
            && !tree.acl_allows(target, &caller.user, &caller.groups, false)
            && !tree.acl_allows(target, &caller.user, &caller.groups, true)
            && !conf.admin_acl.allows(&caller.user, &caller.groups)
        {
            return Err(CoreError::MayNotSubmitTo {
                user: caller.user.clone(),
                queue: q.spec.path.clone(),
            });
        }
        let path = q.spec.path.clone();
        if app.queue.leaf() == Some(&path) {
            return Ok(path);
        }
        let (max_apps, _) = self.app_limits(target);
        if q.apps.len() as u64 >= u64::from(max_apps) {
            return Err(CoreError::MoveToFullQueue {
                app: *id,
                path,
                apps: q.apps.len(),
            });
        }
        let used = self
            .sched
            .app(id)
            .map(|a| a.used.clone())
            .unwrap_or_default();
        let calc = self.sched.calculator();
        for x in tree.path_up(target) {
            let after = tree.queues[x].used.plus(&used);
            if !scheduler::queue_tree::within(calc, &after, &tree.queues[x].maximum) {
                return Err(CoreError::MoveOverMaximum {
                    app: *id,
                    path,
                    used: Box::new(used),
                    over: tree.queues[x].spec.path.clone(),
                });
            }
        }
        let activated = self.sched.move_app(id, target);
        if let Some(a) = self.apps.get_mut(id) {
            a.queue = AppQueue::Leaf(path.clone());
        }
        self.persist(id);
        // The move may have made room where it left: those applications start now.
        self.start_activated(activated, now);
        self.run_scheduler(now);
        self.changed();
        Ok(path)
    }

    /// `PUT /apps/{id}/priority`: the effective priority (clamped to
    /// `[0, yarn.cluster.max-application-priority]`).
    pub fn set_priority(
        &mut self,
        id: &ApplicationId,
        priority: i32,
        caller: &Caller,
        now: u64,
    ) -> Result<i32, CoreError> {
        self.check_modify(id, caller, "update the priority of")?;
        let app = self.apps.get(id).ok_or(CoreError::AppNotFound(*id))?;
        if app.state.is_final() {
            return Err(CoreError::PriorityOfEndedApp {
                app: *id,
                state: app.state,
            });
        }
        let p = priority.clamp(0, self.sched.conf().max_application_priority.max(0));
        if let Some(a) = self.apps.get_mut(id) {
            a.sub.priority = p;
        }
        self.sched.set_priority(id, p);
        self.persist(id);
        self.run_scheduler(now);
        self.changed();
        Ok(p)
    }

    /// Applies a new, parsed and self-consistent scheduler configuration. Refuses, changing
    /// nothing, when live applications forbid it: a queue that holds applications is removed
    /// or turned into a parent.
    pub fn reconfigure(&mut self, conf: SchedulerConf, now: u64) -> Result<(), CoreError> {
        let leaves = self.check_reconfigure(&conf)?;
        let activated = self.sched.reconfigure(conf, &leaves);
        for (id, path) in &leaves {
            if let Some(a) = self.apps.get_mut(id) {
                a.queue = AppQueue::Leaf(path.clone());
            }
        }
        self.start_activated(activated, now);
        self.run_scheduler(now);
        self.changed();
        Ok(())
    }

    /// Whether `conf` may replace the running tree as far as the applications go (a queue
    /// that holds applications may be neither removed nor turned into a parent): the leaf
    /// each scheduled application would be in. The one check a dry run (`sched-conf`
    /// validate) and a real reconfiguration both make, so they never disagree.
    pub fn check_reconfigure(
        &self,
        conf: &SchedulerConf,
    ) -> Result<BTreeMap<ApplicationId, QueuePath>, CoreError> {
        self.check_queue_labels(conf)?;
        let new_tree = scheduler::QueueTree::build(&conf.root);
        let mut leaves = BTreeMap::new();
        for app in self
            .apps
            .values()
            .filter(|a| self.sched.app(&a.id).is_some())
        {
            match new_tree.find(&app.queue) {
                Some(i) if new_tree.queues[i].is_leaf() => {
                    leaves.insert(app.id, new_tree.queues[i].spec.path.clone());
                }
                Some(_) => {
                    return Err(CoreError::Reinit(
                        ReinitRefusal::QueueWithAppsBecomesParent(app.queue.to_string()),
                    ))
                }
                None => {
                    return Err(CoreError::Reinit(ReinitRefusal::QueueWithAppsRemoved {
                        queue: app.queue.to_string(),
                        app: app.id,
                        state: app.state,
                    }))
                }
            }
        }
        Ok(leaves)
    }

    /// YARN's admin check for the scheduler-configuration endpoints and `refreshQueues`:
    /// with `yarn.acl.enable`, only `yarn.admin.acl` may.
    pub fn check_admin(&self, caller: &Caller) -> Result<(), CoreError> {
        let conf = self.sched.conf();
        if !conf.acl_enabled || conf.admin_acl.allows(&caller.user, &caller.groups) {
            Ok(())
        } else {
            Err(CoreError::NotClusterAdmin)
        }
    }

    /// `GET /queues/{queue}/access?user=`: whether `user` holds `acl` on `queue`, asked by
    /// `caller`. As in YARN, only someone who administers the queue may ask about another
    /// user.
    pub fn queue_access_of(
        &self,
        queue: &str,
        caller: &Caller,
        user: &Caller,
        acl: QueueAclType,
    ) -> Result<bool, CoreError> {
        if caller.user != user.user
            && !self.queue_access(queue, caller, QueueAclType::AdministerQueue)?
        {
            return Err(CoreError::MayNotCheckOthers {
                user: caller.user.clone(),
                queue: queue.to_string(),
            });
        }
        self.queue_access(queue, user, acl)
    }

    /// Every queue's configuration, effective capacities and usage, parents before children.
    pub fn queue_views(&self) -> Vec<QueueView> {
        let tree = self.sched.tree();
        let cluster = self.sched.cluster();
        let pending = self.sched.pending_by_queue();
        let calc = self.sched.calculator();
        let monitor = self.monitor_acts();
        let mut fairshare = self.sched.fairshare_view().into_iter();
        let mut out = Vec::with_capacity(tree.queues.len());
        for (i, q) in tree.iter() {
            let (max_apps, max_per_user) = if q.is_leaf() {
                self.app_limits(i)
            } else {
                (0, 0)
            };
            let am_limit = if q.is_leaf() {
                self.sched.am_limit(i)
            } else {
                Resource::zero()
            };
            let (apps, active, pending_apps) = if q.is_leaf() {
                (q.apps.len(), q.active_apps, q.waiting.len())
            } else {
                let leaves: Vec<&scheduler::Queue> = tree
                    .queues
                    .iter()
                    .filter(|l| {
                        l.is_leaf() && l.spec.path.starts_with(&format!("{}.", q.spec.path))
                    })
                    .collect();
                (
                    leaves.iter().map(|l| l.apps.len()).sum(),
                    leaves.iter().map(|l| l.active_apps).sum(),
                    leaves.iter().map(|l| l.waiting.len()).sum(),
                )
            };
            let users = q
                .users
                .iter()
                .map(|(name, u)| UserView {
                    name: name.clone(),
                    used: u.used.clone(),
                    am_used: u.am_used.clone(),
                    active_apps: u.active_apps,
                    pending_apps: u.pending_apps,
                    user_limit: self.sched.user_limit(i, &Resource::zero()),
                    weight: q.spec.fairshare.weight(name),
                })
                .collect();
            let pct = |r: &Resource, base: &Resource| -> f64 {
                let x = scheduler::queue_tree::ratio(calc, r, base);
                if x.is_finite() {
                    x * 100.0
                } else {
                    0.0
                }
            };
            out.push(QueueView {
                accessible_labels: match &q.accessible {
                    super::queue_conf::AccessibleLabels::Any => vec!["*".into()],
                    super::queue_conf::AccessibleLabels::Only(l) => l.iter().cloned().collect(),
                },
                default_label_expression: q.spec.default_label_expression.clone(),
                partitions: q.parts.clone(),
                path: q.spec.path.clone(),
                name: q.spec.name.clone(),
                is_leaf: q.is_leaf(),
                parent: q.parent.map(|p| tree.queues[p].spec.path.clone()),
                state: q.spec.state,
                capacity: q.spec.capacity.clone(),
                max_capacity: q.spec.max_capacity.clone(),
                guaranteed: q.guaranteed.clone(),
                maximum: q.maximum.clone(),
                used: q.used.clone(),
                pending: pending.get(i.index()).cloned().unwrap_or_default(),
                reserved: q.reserved.clone(),
                am_used: q.am_used.clone(),
                user_am_limit: am_limit.clone(),
                am_limit,
                absolute_capacity: q.abs_capacity,
                absolute_max_capacity: q.abs_max_capacity,
                absolute_used_capacity: pct(&q.used, cluster),
                used_capacity: pct(&q.used, &q.guaranteed),
                num_applications: apps,
                num_active_applications: active,
                num_pending_applications: pending_apps,
                num_containers: q.num_containers,
                max_applications: max_apps,
                max_applications_per_user: max_per_user,
                max_parallel_apps: q
                    .spec
                    .max_parallel_apps
                    .or(self.sched.conf().max_parallel_apps),
                user_limit_factor: q.spec.user_limit_factor,
                minimum_user_limit_percent: q.spec.minimum_user_limit_percent,
                users,
                ordering: q.spec.ordering,
                default_application_priority: q.spec.default_application_priority,
                lifetime: q.spec.lifetime,
                priority: q.spec.priority,
                acl_submit: tree.acl_string(i, false),
                acl_admin: tree.acl_string(i, true),
                max_allocation: self.max_allocation_in(Some(i)),
                max_am_resource_percent: q.spec.max_am_resource_percent,
                preemption: PreemptionApplies {
                    inter_queue: monitor && !q.spec.disable_preemption,
                    intra_queue: monitor
                        && self.conf.preemption.intra_queue
                        && !q.spec.intra_queue_disable_preemption,
                },
                fairshare: fairshare
                    .next()
                    .unwrap_or_else(|| scheduler::QueueFairshare {
                        queue: q.spec.path.clone(),
                        policy: None,
                        raw_usage: 0.0,
                        decayed_usage: 0.0,
                        users: Vec::new(),
                    }),
            });
        }
        out
    }
}
