//! The seam for resource plugins (GPUs, FPGAs, pluggable devices).
//!
//! None exist yet. A plugin is told when a container of its resource type is about to start
//! and when it is complete, and may add environment variables (for example
//! `CUDA_VISIBLE_DEVICES`) to the launch. The [`crate::manager`] actor owns the plugins, so a
//! plugin's device table needs no locking. Isolation (cgroups, device lists) belongs to a
//! [`crate::launcher::ContainerExecutor`], not here.

use std::collections::BTreeMap;

use spindle_common::ids::ContainerId;
use spindle_common::resource::Resource;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource plugin {plugin}: {message}")]
pub struct PluginError {
    pub plugin: String,
    pub message: String,
}

/// What a plugin gives a container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Added to the container's environment (after the launch context's, before NM's own).
    pub env: BTreeMap<String, String>,
}

pub trait ResourcePlugin: Send + 'static {
    /// The resource type it manages, e.g. `yarn.io/gpu`.
    fn resource_name(&self) -> &str;
    /// How many units this node offers; added to what the NM registers.
    fn capacity(&self) -> i64;
    /// Picks the units for a container about to start. An error fails the container.
    fn assign(&mut self, container: ContainerId, ask: &Resource)
        -> Result<Assignment, PluginError>;
    /// The container is complete: its units are free again.
    fn release(&mut self, container: ContainerId);
}

/// The plugins of this node.
#[derive(Default)]
pub struct Plugins {
    plugins: Vec<Box<dyn ResourcePlugin>>,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.plugins.iter().map(|p| p.resource_name()))
            .finish()
    }
}

impl Plugins {
    pub fn new(plugins: Vec<Box<dyn ResourcePlugin>>) -> Self {
        Self { plugins }
    }

    /// Adds every plugin's capacity to the node's base resource.
    pub fn node_resource(&self, base: &Resource) -> Resource {
        let mut r = base.clone();
        for p in &self.plugins {
            r.set(p.resource_name(), p.capacity());
        }
        r
    }

    /// Asks every plugin whose type the container wants; on failure, releases what was given.
    pub fn assign(&mut self, id: ContainerId, ask: &Resource) -> Result<Assignment, PluginError> {
        let mut all = Assignment::default();
        for i in 0..self.plugins.len() {
            if ask.get(self.plugins[i].resource_name()) <= 0 {
                continue;
            }
            match self.plugins[i].assign(id, ask) {
                Ok(a) => all.env.extend(a.env),
                Err(e) => {
                    for p in &mut self.plugins[..i] {
                        p.release(id);
                    }
                    return Err(e);
                }
            }
        }
        Ok(all)
    }

    pub fn release(&mut self, id: ContainerId) {
        for p in &mut self.plugins {
            p.release(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spindle_common::ids::{ApplicationAttemptId, ApplicationId};
    use spindle_common::resource::GPU;

    struct FakeGpus {
        free: Vec<u32>,
        given: BTreeMap<ContainerId, Vec<u32>>,
    }

    impl ResourcePlugin for FakeGpus {
        fn resource_name(&self) -> &str {
            GPU
        }
        fn capacity(&self) -> i64 {
            2
        }
        fn assign(&mut self, c: ContainerId, ask: &Resource) -> Result<Assignment, PluginError> {
            let n = ask.get(GPU) as usize;
            if n > self.free.len() {
                return Err(PluginError {
                    plugin: GPU.into(),
                    message: "not enough free devices".into(),
                });
            }
            let got: Vec<u32> = self.free.drain(..n).collect();
            let list = got.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            self.given.insert(c, got);
            Ok(Assignment {
                env: [("CUDA_VISIBLE_DEVICES".to_string(), list)].into(),
            })
        }
        fn release(&mut self, c: ContainerId) {
            if let Some(g) = self.given.remove(&c) {
                self.free.extend(g);
            }
        }
    }

    #[test]
    fn the_seam_carries_env_and_releases() {
        let mut p = Plugins::new(vec![Box::new(FakeGpus {
            free: vec![0, 1],
            given: BTreeMap::new(),
        })]);
        assert_eq!(p.node_resource(&Resource::new(1, 1)).get(GPU), 2);
        let att = ApplicationAttemptId::new(ApplicationId::new(1, 1), 1);
        let (a, b) = (ContainerId::new(att, 0, 1), ContainerId::new(att, 0, 2));
        let ask = Resource::new(1, 1).with(GPU, 2);
        let got = p.assign(a, &ask).unwrap();
        assert_eq!(got.env["CUDA_VISIBLE_DEVICES"], "0,1");
        assert!(p.assign(b, &ask).is_err());
        // A container that asks for no GPU is not the plugin's business.
        assert_eq!(
            p.assign(b, &Resource::new(1, 1)).unwrap(),
            Assignment::default()
        );
        p.release(a);
        assert!(p.assign(b, &ask).is_ok());
    }
}
