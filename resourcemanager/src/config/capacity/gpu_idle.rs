//! A queue's idle-GPU policy: `<qp>.gpu-idle-timeout-ms` (0 is off),
//! `<qp>.gpu-idle-action` (`report`, `notify`, `release`) and
//! `<qp>.gpu-idle-threshold-percent` (0..=100). Each is inherited from the parent when unset.

use spindle_common::config::keys;

use super::error::Result;
use super::props::key;
use super::{CsProps, Rule};
use crate::core::queue_conf::{GpuIdleAction, GpuIdlePolicy};

/// The queue's policy, its parent's where a property is unset.
pub(super) fn policy(props: &CsProps, path: &str, parent: GpuIdlePolicy) -> Result<GpuIdlePolicy> {
    let t_key = key(path, keys::CS_QUEUE_GPU_IDLE_TIMEOUT_MS);
    let timeout_ms = match props.int(&t_key)? {
        None => parent.timeout_ms,
        Some(n) => u64::try_from(n).map_err(|_| {
            props
                .err(
                    Rule::LimitRange,
                    &t_key,
                    format!(
                        "gpu-idle-timeout-ms must be 0 (off) or a positive number of milliseconds, got {}",
                        props.written(&t_key)
                    ),
                )
                .queue(path)
        })?,
    };
    let a_key = key(path, keys::CS_QUEUE_GPU_IDLE_ACTION);
    let action = match props.trimmed(&a_key) {
        None => parent.action,
        Some(raw) => match raw.to_ascii_lowercase().as_str() {
            "report" => GpuIdleAction::Report,
            "notify" => GpuIdleAction::Notify,
            "release" => GpuIdleAction::Release,
            _ => {
                return Err(props
                    .err(
                        Rule::InvalidGpuIdleAction,
                        &a_key,
                        format!("gpu-idle-action '{raw}' is not one of report, notify, release"),
                    )
                    .queue(path))
            }
        },
    };
    let p_key = key(path, keys::CS_QUEUE_GPU_IDLE_THRESHOLD_PERCENT);
    let threshold_percent = match props.f64(&p_key)? {
        None => parent.threshold_percent,
        Some(v) if (0.0..=100.0).contains(&v) => v,
        Some(_) => {
            return Err(props
                .err(
                    Rule::LimitRange,
                    &p_key,
                    format!(
                        "gpu-idle-threshold-percent must be from 0 to 100, got {}",
                        props.written(&p_key)
                    ),
                )
                .queue(path))
        }
    };
    Ok(GpuIdlePolicy {
        timeout_ms,
        action,
        threshold_percent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<crate::core::queue_conf::SchedulerConf> {
        let mut all = vec![
            ("yarn.scheduler.capacity.root.queues", "a,b"),
            ("yarn.scheduler.capacity.root.a.capacity", "50"),
            ("yarn.scheduler.capacity.root.b.capacity", "50"),
            ("yarn.scheduler.capacity.root.b.queues", "c"),
            ("yarn.scheduler.capacity.root.b.c.capacity", "100"),
        ];
        all.extend_from_slice(pairs);
        let props = CsProps::from_pairs(all.iter().map(|(k, v)| (*k, *v)), None);
        super::super::parse_props(&props, &super::super::SiteSettings::for_tests())
    }

    fn of<'a>(
        c: &'a crate::core::queue_conf::SchedulerConf,
        path: &str,
    ) -> &'a crate::core::queue_conf::QueueSpec {
        c.root.find(path).unwrap()
    }

    #[test]
    fn off_by_default_and_inherited_by_children() {
        let c = parse(&[]).unwrap();
        assert_eq!(of(&c, "root.a").gpu_idle, GpuIdlePolicy::default());
        assert_eq!(of(&c, "root.a").gpu_idle.timeout_ms, 0);
        let c = parse(&[
            ("yarn.scheduler.capacity.root.b.gpu-idle-timeout-ms", "2000"),
            ("yarn.scheduler.capacity.root.b.gpu-idle-action", "release"),
            (
                "yarn.scheduler.capacity.root.b.gpu-idle-threshold-percent",
                "10",
            ),
        ])
        .unwrap();
        let p = of(&c, "root.b.c").gpu_idle;
        assert_eq!(
            p,
            GpuIdlePolicy {
                timeout_ms: 2000,
                action: GpuIdleAction::Release,
                threshold_percent: 10.0
            }
        );
        assert_eq!(of(&c, "root.a").gpu_idle, GpuIdlePolicy::default());
        // A child overrides one property and keeps the others.
        let c = parse(&[
            ("yarn.scheduler.capacity.root.b.gpu-idle-timeout-ms", "2000"),
            ("yarn.scheduler.capacity.root.b.c.gpu-idle-action", "notify"),
        ])
        .unwrap();
        let p = of(&c, "root.b.c").gpu_idle;
        assert_eq!((p.timeout_ms, p.action), (2000, GpuIdleAction::Notify));
    }

    #[test]
    fn bad_values_are_named() {
        let e = parse(&[("yarn.scheduler.capacity.root.a.gpu-idle-action", "kill")]).unwrap_err();
        assert_eq!(e.rule, Rule::InvalidGpuIdleAction);
        assert!(e.to_string().contains("'kill'"), "{e}");
        let e = parse(&[("yarn.scheduler.capacity.root.a.gpu-idle-timeout-ms", "-5")]).unwrap_err();
        assert_eq!(e.rule, Rule::LimitRange);
        assert!(e.to_string().contains("gpu-idle-timeout-ms"), "{e}");
        let e =
            parse(&[("yarn.scheduler.capacity.root.a.gpu-idle-timeout-ms", "soon")]).unwrap_err();
        assert_eq!(e.rule, Rule::BadValue);
        let e = parse(&[(
            "yarn.scheduler.capacity.root.a.gpu-idle-threshold-percent",
            "101",
        )])
        .unwrap_err();
        assert_eq!(e.rule, Rule::LimitRange);
    }
}
