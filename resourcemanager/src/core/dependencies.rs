//! An application's dependencies (Slurm's `--dependency=afterany:/afterok:`): it is
//! ACCEPTED but held out of the scheduler until the applications it names end (or
//! succeed); a failed `afterok` dependency fails it with that reason.
//!
//! Must not: admit a held application before every dependency is met, or keep one held
//! after a dependency can no longer be met.

use super::*;
use scheduler::QueueIdx;

/// Where an application's dependencies stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum DependencyState {
    /// All met: it may be admitted.
    Met,
    /// It waits for this dependency (the first one not met).
    Waiting(Dependency),
    /// This `afterok` dependency ended without success (its final state), or is no longer
    /// known to the RM (None).
    Broken(Dependency, Option<(AppState, FinalApplicationStatus)>),
}

impl DependencyState {
    /// The application's diagnostic for this state (Met has none).
    pub(super) fn diagnostic(&self) -> String {
        match self {
            DependencyState::Met => String::new(),
            DependencyState::Waiting(d) => format!(
                "Waiting for dependency {} to {} before it is scheduled ({}).",
                d.app,
                match d.kind {
                    DependencyKind::AfterAny => "end",
                    DependencyKind::AfterOk => "finish successfully",
                },
                d.kind.as_str()
            ),
            DependencyState::Broken(d, Some((state, status))) => format!(
                "Dependency {} ended {state}/{status}; {} needs it to succeed.",
                d.app,
                d.kind.as_str()
            ),
            DependencyState::Broken(d, None) => format!(
                "Dependency {} is no longer known to the ResourceManager; {} cannot be met.",
                d.app,
                d.kind.as_str()
            ),
        }
    }
}

impl RmCore {
    /// Refuses a submission naming an application the RM does not know, or itself.
    pub(super) fn check_dependencies(
        &self,
        id: &ApplicationId,
        deps: &[Dependency],
    ) -> Result<(), CoreError> {
        for d in deps {
            if d.app == *id || !self.apps.contains_key(&d.app) {
                return Err(CoreError::UnknownDependency(d.app));
            }
        }
        Ok(())
    }

    /// Where `id`'s dependencies stand; a dependency the RM does not hold counts as ended
    /// (how is not known) when `missing_ended`, else as not ended yet (while recovering).
    pub(super) fn dependency_state(
        &self,
        id: &ApplicationId,
        missing_ended: bool,
    ) -> DependencyState {
        let Some(app) = self.apps.get(id) else {
            return DependencyState::Met;
        };
        for d in &app.sub.dependencies {
            match self.apps.get(&d.app) {
                None if !missing_ended => return DependencyState::Waiting(*d),
                None if d.kind == DependencyKind::AfterOk => {
                    return DependencyState::Broken(*d, None)
                }
                None => {}
                Some(dep) if !dep.state.is_final() => return DependencyState::Waiting(*d),
                Some(dep) => {
                    let ok = dep.state == AppState::FINISHED
                        && dep.final_status == FinalApplicationStatus::SUCCEEDED;
                    if d.kind == DependencyKind::AfterOk && !ok {
                        return DependencyState::Broken(*d, Some((dep.state, dep.final_status)));
                    }
                }
            }
        }
        DependencyState::Met
    }

    /// Admits an ACCEPTED application in `leaf`, or holds it for its dependencies, or fails
    /// it when one cannot be met.
    pub(super) fn admit_or_hold(
        &mut self,
        id: ApplicationId,
        leaf: QueueIdx,
        missing_ended: bool,
        now: u64,
    ) {
        match self.dependency_state(&id, missing_ended) {
            DependencyState::Met => {
                self.held.remove(&id);
                if let Some(a) = self.apps.get_mut(&id) {
                    a.clear_diagnostics(DiagnosticsKind::Dependency);
                }
                self.admit(id, leaf, now);
            }
            waiting @ DependencyState::Waiting(_) => {
                self.held.insert(id);
                if let Some(a) = self.apps.get_mut(&id) {
                    a.set_diagnostics(DiagnosticsKind::Dependency, waiting.diagnostic());
                }
            }
            broken @ DependencyState::Broken(..) => {
                self.held.remove(&id);
                self.finish_app(
                    &id,
                    AppState::FAILED,
                    FinalApplicationStatus::FAILED,
                    Some(broken.diagnostic()),
                    now,
                );
            }
        }
    }

    /// Looks again at every held application (after an application ended, or once after
    /// recovery): admits those whose dependencies are now met, fails those that cannot be.
    pub(super) fn release_held(&mut self, now: u64) {
        let held: Vec<ApplicationId> = self.held.iter().copied().collect();
        for id in held {
            // A nested release (a failed dependent ends, and looks again) may have settled it.
            if !self.held.contains(&id) {
                continue;
            }
            let leaf = self
                .apps
                .get(&id)
                .filter(|a| a.state == AppState::ACCEPTED)
                .and_then(|a| self.sched.tree().leaf(&a.queue));
            match leaf {
                Some(leaf) => {
                    let before = self.apps.get(&id).map(|a| a.diagnostics.clone());
                    self.admit_or_hold(id, leaf, true, now);
                    let after = self.apps.get(&id).map(|a| a.diagnostics.clone());
                    if before != after {
                        self.persist(&id);
                    }
                }
                None => {
                    self.held.remove(&id);
                }
            }
        }
    }
}
