//! Dependencies (Slurm's `afterany`/`afterok`): a dependent application stays ACCEPTED,
//! outside the scheduler, saying what it waits for, until its dependencies end; a failed
//! `afterok` dependency fails it; unknown dependencies are refused; holds survive a restart.

use spindle_common::states::{FinalApplicationStatus, YarnApplicationState as AppState};

use super::TestEnv;
use crate::core::*;

fn submit_after(env: &mut TestEnv, deps: &[(ApplicationId, DependencyKind)]) -> ApplicationId {
    let id = env.core.new_application();
    let mut sub = env.submission("default");
    sub.dependencies = deps
        .iter()
        .map(|&(app, kind)| Dependency { app, kind })
        .collect();
    env.core.submit(id, sub, env.now).expect("submit");
    env.step();
    id
}

fn end(env: &mut TestEnv, app: &ApplicationId, state: AppState, status: FinalApplicationStatus) {
    env.core.finish_app(app, state, status, None, env.now);
    env.step();
}

fn has_attempt(env: &TestEnv, app: &ApplicationId) -> bool {
    !env.app(app).attempts.is_empty()
}

#[test]
fn an_afterok_application_waits_then_runs_after_its_dependency_succeeds() {
    let mut env = TestEnv::new();
    env.add_node("h1", 1, 81920, 80);
    let first = env.submit("default");
    let second = submit_after(&mut env, &[(first, DependencyKind::AfterOk)]);
    let a = env.app(&second);
    assert_eq!(a.state, AppState::ACCEPTED);
    assert!(!has_attempt(&env, &second), "held: no AM is started");
    assert_eq!(a.diagnostics_kind, DiagnosticsKind::Dependency);
    assert!(
        a.diagnostics.contains(&first.to_string()),
        "{}",
        a.diagnostics
    );
    assert!(a.diagnostics.contains("afterok"), "{}", a.diagnostics);
    end(
        &mut env,
        &first,
        AppState::FINISHED,
        FinalApplicationStatus::SUCCEEDED,
    );
    assert!(
        has_attempt(&env, &second),
        "admitted once its dependency succeeded"
    );
    assert_ne!(
        env.app(&second).diagnostics_kind,
        DiagnosticsKind::Dependency
    );
}

#[test]
fn a_failed_afterok_dependency_fails_the_application_and_afterany_runs() {
    let mut env = TestEnv::new();
    env.add_node("h1", 1, 81920, 80);
    let first = env.submit("default");
    let ok = submit_after(&mut env, &[(first, DependencyKind::AfterOk)]);
    let any = submit_after(&mut env, &[(first, DependencyKind::AfterAny)]);
    // A chain: failing `ok` fails what waits for its success too.
    let chained = submit_after(&mut env, &[(ok, DependencyKind::AfterOk)]);
    end(
        &mut env,
        &first,
        AppState::FAILED,
        FinalApplicationStatus::FAILED,
    );
    let a = env.app(&ok);
    assert_eq!(a.state, AppState::FAILED);
    assert!(
        a.diagnostics.contains(&first.to_string()),
        "{}",
        a.diagnostics
    );
    assert!(a.diagnostics.contains("FAILED"), "{}", a.diagnostics);
    assert_eq!(env.app(&chained).state, AppState::FAILED);
    assert!(has_attempt(&env, &any), "afterany runs whatever the end");
}

#[test]
fn a_dependency_already_ended_is_judged_at_submission() {
    let mut env = TestEnv::new();
    env.add_node("h1", 1, 81920, 80);
    let done = env.submit("default");
    end(
        &mut env,
        &done,
        AppState::KILLED,
        FinalApplicationStatus::KILLED,
    );
    let any = submit_after(&mut env, &[(done, DependencyKind::AfterAny)]);
    assert!(has_attempt(&env, &any));
    let ok = submit_after(&mut env, &[(done, DependencyKind::AfterOk)]);
    assert_eq!(env.app(&ok).state, AppState::FAILED);
}

#[test]
fn unknown_dependencies_are_refused_and_a_held_application_can_be_killed() {
    let mut env = TestEnv::new();
    env.add_node("h1", 1, 81920, 80);
    let id = env.core.new_application();
    let ghost = ApplicationId::new(1_000, 999);
    let mut sub = env.submission("default");
    sub.dependencies = vec![Dependency {
        app: ghost,
        kind: DependencyKind::AfterAny,
    }];
    assert_eq!(
        env.core.submit(id, sub.clone(), env.now),
        Err(CoreError::UnknownDependency(ghost))
    );
    sub.dependencies[0].app = id;
    assert_eq!(
        env.core.submit(id, sub, env.now),
        Err(CoreError::UnknownDependency(id))
    );
    let first = env.submit("default");
    let held = submit_after(&mut env, &[(first, DependencyKind::AfterOk)]);
    env.core
        .kill(&held, &Caller::new("alice", vec![]), env.now)
        .unwrap();
    env.step();
    env.advance(1);
    assert_eq!(env.app(&held).state, AppState::KILLED);
    end(
        &mut env,
        &first,
        AppState::FINISHED,
        FinalApplicationStatus::SUCCEEDED,
    );
    assert!(
        !has_attempt(&env, &held),
        "a killed application is never admitted"
    );
}

#[test]
fn a_hold_survives_a_restart() {
    let mut env = TestEnv::new();
    env.add_node("h1", 1, 81920, 80);
    let first = env.submit("default");
    let second = submit_after(&mut env, &[(first, DependencyKind::AfterOk)]);
    let records: Vec<AppRecord> = [second, first]
        .iter()
        .map(|id| {
            env.effects
                .iter()
                .rev()
                .find_map(|e| match e {
                    Effect::PersistApp(r) if r.id == *id => Some((**r).clone()),
                    _ => None,
                })
                .expect("persisted")
        })
        .collect();
    // Recovered in the wrong order on purpose: the dependent first.
    let secret =
        spindle_common::token::TokenSecret::from_hex("00112233445566778899aabbccddeeff").unwrap();
    let mut env2 = TestEnv::new();
    env2.core = RmCore::new(CoreConfig::for_tests(), 2_000, 1, secret);
    env2.now = env.now + 1_000;
    for r in records {
        env2.core.recover_app(r, env2.now);
    }
    env2.step();
    env2.add_node("h1", 1, 81920, 80);
    env2.advance(1);
    assert_eq!(env2.app(&second).state, AppState::ACCEPTED);
    assert_eq!(
        env2.app(&second).diagnostics_kind,
        DiagnosticsKind::Dependency
    );
    assert_eq!(env2.app(&second).sub.dependencies.len(), 1);
    end(
        &mut env2,
        &first,
        AppState::FINISHED,
        FinalApplicationStatus::SUCCEEDED,
    );
    assert!(
        has_attempt(&env2, &second),
        "admitted after the restart once its dependency succeeded"
    );
    assert_ne!(
        env2.app(&second).diagnostics_kind,
        DiagnosticsKind::Dependency
    );
}
