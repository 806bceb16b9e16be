//! Distributed node labels and attributes through a real NM and a fake RM: the `config`
//! providers' partition and attributes arrive at registration (merged with nothing else on a
//! node without devices) and are not repeated in heartbeats; a `script` provider whose output
//! changes is re-read and the change arrives once, in a heartbeat; a refusal by the RM is
//! survived without resending the refused value.

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::config::keys;
use support::*;

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A provider script that prints the file `out` next to it.
fn provider_script(dir: &Path) -> PathBuf {
    let p = dir.join("describe.sh");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\necho 'describing this node'\ncat {}\n",
            dir.join("out").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Replaces what the provider script prints (atomically: a run never sees half a file).
fn set_output(dir: &Path, text: &str) {
    let tmp = dir.join("out.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join("out")).unwrap();
}

#[tokio::test]
async fn config_providers_report_at_registration_only() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let conf = nm_config_with(
        dirs.path(),
        rm.addr,
        false,
        &[
            (keys::NM_NODE_LABELS_PROVIDER, "config"),
            (
                keys::NM_NODE_LABELS_PROVIDER_CONFIGURED_NODE_PARTITION,
                "gpu",
            ),
            (keys::NM_NODE_ATTRIBUTES_PROVIDER, "config"),
            (
                keys::NM_NODE_ATTRIBUTES_PROVIDER_CONFIGURED_NODE_ATTRIBUTES,
                "os,STRING,ubuntu22.04:nm.yarn.io/zone,STRING,z1",
            ),
        ],
    );
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;
    wait_until("three heartbeats", || {
        (rm.state.lock().unwrap().heartbeats.len() >= 3).then_some(())
    })
    .await;
    {
        let st = rm.state.lock().unwrap();
        let reg = &st.registrations[0];
        assert_eq!(reg.node_labels, Some(vec!["gpu".to_string()]));
        assert_eq!(
            reg.node_attributes,
            attrs(&[("nm.yarn.io/os", "ubuntu22.04"), ("nm.yarn.io/zone", "z1")])
        );
        assert!(
            st.heartbeats
                .iter()
                .all(|h| h.node_labels.is_none() && h.node_attributes.is_none()),
            "unchanged values are not repeated"
        );
    }
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn an_empty_partition_is_the_default_partition_and_no_provider_sends_none() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let conf = nm_config_with(
        dirs.path(),
        rm.addr,
        false,
        &[(keys::NM_NODE_LABELS_PROVIDER, "config")],
    );
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;
    assert_eq!(
        rm.state.lock().unwrap().registrations[0].node_labels,
        Some(vec![])
    );
    nm.stop().await.unwrap();

    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;
    let reg = rm.state.lock().unwrap().registrations[0].clone();
    assert_eq!(reg.node_labels, None);
    assert!(reg.node_attributes.is_empty());
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn script_providers_are_re_read_and_changes_arrive_in_a_heartbeat() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let script = provider_script(dirs.path());
    set_output(
        dirs.path(),
        "NODE_PARTITION:cpu\nNODE_PARTITION:a\nNODE_ATTRIBUTE:os,STRING,v1\n",
    );
    let path = script.display().to_string();
    let conf = nm_config_with(
        dirs.path(),
        rm.addr,
        false,
        &[
            (keys::NM_NODE_LABELS_PROVIDER, "script"),
            (keys::NM_NODE_LABELS_PROVIDER_SCRIPT_PATH, &path),
            (keys::NM_NODE_LABELS_PROVIDER_FETCH_INTERVAL_MS, "100"),
            (keys::NM_NODE_LABELS_PROVIDER_FETCH_TIMEOUT_MS, "5000"),
            (keys::NM_NODE_ATTRIBUTES_PROVIDER, "script"),
            (keys::NM_NODE_ATTRIBUTES_PROVIDER_SCRIPT_PATH, &path),
            (keys::NM_NODE_ATTRIBUTES_PROVIDER_FETCH_INTERVAL_MS, "100"),
            (keys::NM_NODE_ATTRIBUTES_PROVIDER_FETCH_TIMEOUT_MS, "5000"),
        ],
    );
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;
    {
        let st = rm.state.lock().unwrap();
        // The scripts ran before registration: the last partition line wins.
        assert_eq!(st.registrations[0].node_labels, Some(vec!["a".to_string()]));
        assert_eq!(
            st.registrations[0].node_attributes,
            attrs(&[("nm.yarn.io/os", "v1")])
        );
    }

    set_output(
        dirs.path(),
        "NODE_PARTITION:b\nNODE_ATTRIBUTE:os,STRING,v2\nNODE_ATTRIBUTE:zone,STRING,z9\n",
    );
    let want_attrs = attrs(&[("nm.yarn.io/os", "v2"), ("nm.yarn.io/zone", "z9")]);
    wait_until("the new partition and attributes in a heartbeat", || {
        let st = rm.state.lock().unwrap();
        let labels = st
            .heartbeats
            .iter()
            .any(|h| h.node_labels == Some(vec!["b".into()]));
        let attributes = st
            .heartbeats
            .iter()
            .any(|h| h.node_attributes.as_ref() == Some(&want_attrs));
        (labels && attributes).then_some(())
    })
    .await;
    // Several more fetches and heartbeats: the change was sent once.
    tokio::time::sleep(Duration::from_millis(500)).await;
    {
        let st = rm.state.lock().unwrap();
        let label_reports: Vec<_> = st
            .heartbeats
            .iter()
            .filter_map(|h| h.node_labels.clone())
            .collect();
        assert_eq!(label_reports, vec![vec!["b".to_string()]]);
        let attribute_reports = st
            .heartbeats
            .iter()
            .filter(|h| h.node_attributes.is_some())
            .count();
        assert!(
            attribute_reports <= 2,
            "{attribute_reports} attribute reports"
        );
        assert_eq!(
            st.heartbeats
                .iter()
                .rev()
                .find_map(|h| h.node_attributes.clone()),
            Some(want_attrs.clone())
        );
    }

    // A failing script keeps the previous value: nothing new is reported.
    std::fs::remove_file(dirs.path().join("out")).unwrap();
    let before = rm.state.lock().unwrap().heartbeats.len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    {
        let st = rm.state.lock().unwrap();
        assert!(st.heartbeats.len() > before + 1, "heartbeats go on");
        assert!(st.heartbeats[before..]
            .iter()
            .all(|h| h.node_labels.is_none() && h.node_attributes.is_none()));
    }
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn refused_labels_are_not_resent_until_they_change() {
    let rm = FakeRm::start().await;
    rm.state.lock().unwrap().refuse_labels = Some("label 'a' does not exist".into());
    let dirs = tempfile::tempdir().unwrap();
    let script = provider_script(dirs.path());
    set_output(dirs.path(), "NODE_PARTITION:a\n");
    let path = script.display().to_string();
    let conf = nm_config_with(
        dirs.path(),
        rm.addr,
        false,
        &[
            (keys::NM_NODE_LABELS_PROVIDER, "script"),
            (keys::NM_NODE_LABELS_PROVIDER_SCRIPT_PATH, &path),
            (keys::NM_NODE_LABELS_PROVIDER_FETCH_INTERVAL_MS, "100"),
        ],
    );
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;
    wait_until("five heartbeats", || {
        (rm.state.lock().unwrap().heartbeats.len() >= 5).then_some(())
    })
    .await;
    assert!(rm
        .state
        .lock()
        .unwrap()
        .heartbeats
        .iter()
        .all(|h| h.node_labels.is_none()));
    set_output(dirs.path(), "NODE_PARTITION:c\n");
    wait_until("the changed partition", || {
        let st = rm.state.lock().unwrap();
        st.heartbeats
            .iter()
            .any(|h| h.node_labels == Some(vec!["c".into()]))
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    {
        let st = rm.state.lock().unwrap();
        assert_eq!(
            st.registrations.len(),
            1,
            "the NM neither crashed nor re-registered"
        );
        assert_eq!(
            st.heartbeats
                .iter()
                .filter(|h| h.node_labels.is_some())
                .count(),
            1
        );
    }
    nm.stop().await.unwrap();
}
