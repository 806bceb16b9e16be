//! `refreshQueues`' check of per-queue keys against the tree: a capacity-scheduler property
//! of a queue that no `<parent>.queues` list declares (`root.prdo.capacity` beside
//! `root.queues = prod,research`) would be silently ignored; the reload refuses it instead.

use std::collections::BTreeSet;

use spindle_common::config::known::{distance, queue_property_status, KeyStatus};
use spindle_common::config::{keys, Configuration, Source};

/// A per-queue property of a queue that is not in the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrayQueueKey {
    pub name: String,
    pub source: Source,
    /// The queue path the key names.
    pub queue: String,
    /// The declared queue closest to it, if one is close.
    pub suggestion: Option<String>,
}

impl std::fmt::Display for StrayQueueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: key '{}' names queue {}, which no '.queues' list declares",
            self.source, self.name, self.queue
        )?;
        match &self.suggestion {
            Some(q) => write!(f, "; did you mean {q}?"),
            None => Ok(()),
        }
    }
}

/// The queues the `.queues` lists declare, from root down.
fn declared_queues(conf: &Configuration) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut todo = vec!["root".to_string()];
    while let Some(path) = todo.pop() {
        if !out.insert(path.clone()) || out.len() > 100_000 {
            continue;
        }
        let list = format!(
            "{}{path}.{}",
            keys::CAPACITY_SCHEDULER_PREFIX,
            keys::CS_QUEUE_QUEUES
        );
        if let Ok(Some(children)) = conf.get(&list) {
            for c in children.split(',').map(str::trim).filter(|c| !c.is_empty()) {
                todo.push(format!("{path}.{c}"));
            }
        }
    }
    out
}

/// The queue path and property a `root...` key splits into: the shortest queue path whose
/// remainder is a known per-queue property.
fn split_queue_key(rest: &str) -> Option<(&str, &str)> {
    let mut dots = rest.match_indices('.').map(|(i, _)| i);
    dots.find_map(|i| {
        let (queue, prop) = (&rest[..i], &rest[i + 1..]);
        (queue_property_status(prop) == KeyStatus::Known).then_some((queue, prop))
    })
}

/// Every per-queue key of `conf` naming a queue outside the tree, in file order.
pub fn stray_queue_keys(conf: &Configuration) -> Vec<StrayQueueKey> {
    let declared = declared_queues(conf);
    let mut out: Vec<StrayQueueKey> = conf
        .names_with_prefix(keys::CAPACITY_SCHEDULER_PREFIX)
        .filter_map(|name| {
            let rest = &name[keys::CAPACITY_SCHEDULER_PREFIX.len()..];
            if !rest.starts_with("root.") {
                return None;
            }
            let (queue, _) = split_queue_key(rest)?;
            if declared.contains(queue) {
                return None;
            }
            let suggestion = declared
                .iter()
                .map(|d| (distance(d, queue), d))
                .filter(|(d, _)| *d <= 2)
                .min()
                .map(|(_, q)| q.clone());
            Some(StrayQueueKey {
                name: name.to_string(),
                source: conf
                    .source(name)
                    .cloned()
                    .unwrap_or_else(Source::commandline),
                queue: queue.to_string(),
                suggestion,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        (&a.source.file, a.source.line, &a.name).cmp(&(&b.source.file, b.source.line, &b.name))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(pairs: &[(&str, &str)]) -> Configuration {
        let mut c = Configuration::new();
        for (k, v) in pairs {
            c.set(&format!("{}{k}", keys::CAPACITY_SCHEDULER_PREFIX), v);
        }
        c
    }

    #[test]
    fn keys_of_undeclared_queues_are_stray_with_the_closest_queue() {
        let c = conf(&[
            ("root.queues", "prod,research"),
            ("root.prod.capacity", "50"),
            ("root.research.capacity", "50"),
            ("root.prdo.maximum-capacity", "80"),
            ("root.research.accessible-node-labels.gpu.capacity", "100"),
            ("root.elsewhere.user-limit-factor", "2"),
            ("queue-mappings", "u:alice:prod"),
        ]);
        let stray = stray_queue_keys(&c);
        let got: Vec<(&str, Option<&str>)> = stray
            .iter()
            .map(|s| (s.queue.as_str(), s.suggestion.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![("root.elsewhere", None), ("root.prdo", Some("root.prod"))]
        );
        assert!(stray[1].to_string().contains("did you mean root.prod?"));
    }

    #[test]
    fn a_tree_whose_keys_all_name_its_queues_has_none() {
        let c = conf(&[
            ("root.queues", "a"),
            ("root.a.queues", "b"),
            ("root.a.b.capacity", "100"),
            ("root.a.capacity", "100"),
            ("root.capacity", "100"),
        ]);
        assert!(stray_queue_keys(&c).is_empty());
    }
}
