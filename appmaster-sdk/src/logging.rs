//! An AM's log: the SDK reports through `tracing` (resyncs, preemption notices, refused
//! updates, idle GPUs), which says nothing until a subscriber is installed.

/// Installs a `tracing` subscriber writing to stderr (the container's `stderr` log), at the
/// level `RUST_LOG` names (tracing-subscriber's `EnvFilter` syntax), else `info`. Call it
/// first in `main`; a second call (or one after another subscriber was installed) changes
/// nothing. Returns whether this call installed it.
pub fn init_logging() -> bool {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init()
        .is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_second_call_changes_nothing() {
        let first = super::init_logging();
        assert!(!super::init_logging(), "the second call installs nothing");
        // Another test of this binary may have installed it first.
        let _ = first;
    }
}
