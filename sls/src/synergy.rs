//! Synergy's model mix (OSDI'22, `msr-fiddle/synergy` `simulator/jobs/model.py`): ten
//! models in three classes (image 34%, language 33%, speech 33%) with their throughput per
//! GPU by CPUs per GPU, normalized to 1.0 at the GPU-proportional 3 CPUs per GPU of an
//! 8-GPU/24-CPU server. The published points are each model's speed-up at its best CPU
//! count (AlexNet 2.94x at 12, ShuffleNet 2.89x at 12, ResNet-18 2.4x at 9, MobileNet 1.55x
//! at 6, ResNet-50 1.15x at 4, DeepSpeech and M5 1x at 3 and 6, Transformer, GNMT and LSTM
//! 1x with one CPU); the points between (and below 3) are this module's linear reading of
//! them, not Synergy's measurements.

use std::collections::BTreeMap;

use crate::generate::Rng;
use crate::trace::Job;

/// (model, weight in the mix, throughput per GPU by CPUs per GPU).
/// A model of the mix: its name, its weight, its curve.
pub type Model = (&'static str, f64, &'static [(u32, f64)]);

pub const MODELS: &[Model] = &[
    (
        "alexnet",
        0.068,
        &[(1, 0.40), (3, 1.0), (6, 1.90), (9, 2.55), (12, 2.94)],
    ),
    (
        "shufflenet",
        0.068,
        &[(1, 0.40), (3, 1.0), (6, 1.88), (9, 2.50), (12, 2.89)],
    ),
    (
        "resnet18",
        0.068,
        &[(1, 0.45), (3, 1.0), (6, 1.85), (9, 2.40)],
    ),
    ("mobilenet", 0.068, &[(1, 0.50), (3, 1.0), (6, 1.55)]),
    ("resnet50", 0.068, &[(1, 0.60), (3, 1.0), (4, 1.15)]),
    ("deepspeech", 0.165, &[(1, 0.60), (3, 1.0)]),
    ("m5", 0.165, &[(1, 0.60), (3, 1.0), (6, 1.0)]),
    ("transformer", 0.11, &[(1, 1.0)]),
    ("gnmt", 0.11, &[(1, 1.0)]),
    ("lstm", 0.11, &[(1, 1.0)]),
];

/// The curve of model `name`, if it is one of the mix.
pub fn curve(name: &str) -> Option<BTreeMap<u32, f64>> {
    MODELS
        .iter()
        .find(|(m, _, _)| *m == name)
        .map(|(_, _, c)| c.iter().copied().collect())
}

/// A model drawn from the mix.
pub(crate) fn draw(rng: &mut Rng) -> &'static str {
    let items: Vec<(&'static str, f64)> = MODELS.iter().map(|(m, w, _)| (*m, *w)).collect();
    let picked: &&'static str = rng.pick(&items);
    picked
}

/// Gives every GPU job without a `cpu_throughput` table one drawn from the mix (seeded: the
/// same seed gives the same models on every machine). Returns how many jobs got one.
pub fn assign(jobs: &mut [Job], seed: u64) -> usize {
    let mut rng = Rng(seed ^ 0x5EED_C0DE);
    let mut n = 0;
    for j in jobs.iter_mut() {
        let model = draw(&mut rng);
        if j.gpus() > 0 && j.cpu_throughput.is_none() {
            j.cpu_throughput = curve(model);
            n += 1;
        }
    }
    n
}

/// The table of `model` as the trace writes it (`1:0.4;3:1;...`).
pub fn table_text(model: &str) -> String {
    curve(model)
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect::<Vec<_>>()
        .join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_sums_to_one_and_its_peaks_are_synergys() {
        let total: f64 = MODELS.iter().map(|(_, w, _)| w).sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
        let peak = |m: &str| curve(m).unwrap().values().copied().fold(0.0, f64::max);
        assert!((peak("alexnet") - 2.94).abs() < 1e-9);
        assert!((peak("resnet18") - 2.4).abs() < 1e-9);
        assert!((peak("lstm") - 1.0).abs() < 1e-9);
        for (m, _, c) in MODELS {
            let at3 = c.iter().find(|(k, _)| *k == 3).map_or(1.0, |(_, v)| *v);
            assert!(
                (at3 - 1.0).abs() < 1e-9,
                "{m} is 1.0 at the proportional share"
            );
            assert!(c.windows(2).all(|w| w[1].1 >= w[0].1), "{m} never drops");
        }
    }
}
