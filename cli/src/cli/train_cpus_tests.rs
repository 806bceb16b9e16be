//! `spindle train --cpus-per-gpu`: a fixed count, a range, `auto`, and the refusals.

use spindle_appmaster_sdk::cpus::{CpusPerGpu, VcoresRange};
use spindle_appmaster_sdk::train::ENV_CPUS_PER_GPU;
use spindle_common::resource::GPU;

use super::*;

fn options(resources: &str, cpus: &str) -> Result<TrainOptions, UsageError> {
    let p = super::super::parse_with_common(
        OPTS,
        &[
            "--workers",
            "2",
            "--worker-resources",
            resources,
            "--cpus-per-gpu",
            cpus,
            "--",
            "python",
            "train.py",
        ],
    )?;
    options_from(&p)
}

#[test]
fn a_fixed_count_is_a_fixed_ask_of_n_per_gpu() {
    let o = options("yarn.io/gpu=2,vcores=1", "3").expect("good");
    assert_eq!(o.am.worker_resources.vcores, 6);
    assert_eq!(o.am.worker_resources.get(GPU), 2);
    assert_eq!(o.am.cpus_per_gpu, Some(CpusPerGpu::Fixed(3)));
}

#[test]
fn a_range_and_auto_are_ranged_asks_at_their_minimum() {
    let o = options("yarn.io/gpu=2", "2..5").expect("good");
    assert_eq!(o.am.worker_resources.vcores, 4);
    let mut r = o.am.worker_resources.clone();
    assert_eq!(
        o.am.cpus_per_gpu.expect("set").apply(&mut r),
        Ok(Some(VcoresRange::Range { min: 4, max: 10 }))
    );
    let env: BTreeMap<String, String> = o.am.to_env().into_iter().collect();
    assert_eq!(env[ENV_CPUS_PER_GPU], "2..5");
    let o = options("yarn.io/gpu=1", "auto").expect("good");
    assert_eq!(o.am.worker_resources.vcores, 1);
    assert_eq!(o.am.cpus_per_gpu, Some(CpusPerGpu::Auto));
}

#[test]
fn bad_counts_are_named_errors() {
    for (cpus, says) in [
        ("0", "at least 1"),
        ("5..2", "minimum (5) is above the maximum (2)"),
        ("x", "not a CPU count"),
    ] {
        let e = options("yarn.io/gpu=1", cpus).expect_err(cpus).to_string();
        assert!(e.contains("cpus") && e.contains(says), "{cpus}: {e}");
    }
    let e = options("vcores=2", "2").expect_err("no GPUs").to_string();
    assert!(e.contains("needs GPUs"), "{e}");
}

#[test]
fn the_option_is_completed_and_in_the_help() {
    assert!(USAGE.contains("--cpus-per-gpu N|MIN..MAX|auto"));
    let words = crate::cli::completion::bash();
    assert!(words.contains(" -cpus_per_gpu "), "bash completion");
}

fn table_options(cpus: &str, table: &str) -> Result<TrainOptions, UsageError> {
    let p = super::super::parse_with_common(
        OPTS,
        &[
            "--workers",
            "1",
            "--worker-resources",
            "yarn.io/gpu=1",
            "--cpus-per-gpu",
            cpus,
            "--cpu-throughput",
            table,
            "--",
            "w",
        ],
    )?;
    options_from(&p)
}

#[test]
fn a_cpu_throughput_table_needs_a_ranged_ask() {
    let o = table_options("1..4", "1:100;2:190").expect("good");
    assert_eq!(
        o.am.cpu_throughput,
        BTreeMap::from([(1, 100.0), (2, 190.0)])
    );
    for (cpus, table, says) in [
        ("2", "1:100", "only with a range"),
        ("1..4", "1:x", "must be a number"),
    ] {
        let e = table_options(cpus, table).expect_err(table).to_string();
        assert!(e.contains(says), "{e}");
    }
}
