//! `spindle sls generate`: a seeded synthetic trace in Spindle's CSV. Poisson arrivals
//! (exponential gaps with a given mean), a weighted mix of GPU counts, exponential or
//! log-normal run times, and users and queues drawn by weight. The same seed gives the
//! same file, on every machine.

use std::fmt::Write;

use crate::SlsError;

#[derive(Debug, Clone, PartialEq)]
pub enum Durations {
    /// Exponential with this mean, in seconds.
    Exponential { mean_s: f64 },
    /// Log-normal: the logarithm of seconds is normal with this mean and deviation.
    LogNormal { mu: f64, sigma: f64 },
    /// Every job runs this many seconds.
    Fixed { s: f64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct GenSpec {
    pub jobs: usize,
    pub mean_interarrival_s: f64,
    /// (GPUs, weight).
    pub gpu_mix: Vec<(u32, f64)>,
    pub durations: Durations,
    pub users: usize,
    /// (queue, weight).
    pub queues: Vec<(String, f64)>,
    pub seed: u64,
}

impl Default for GenSpec {
    fn default() -> Self {
        Self {
            jobs: 1000,
            mean_interarrival_s: 60.0,
            gpu_mix: vec![(1, 0.6), (2, 0.1), (4, 0.1), (8, 0.15), (16, 0.05)],
            durations: Durations::LogNormal {
                mu: 7.5,
                sigma: 1.5,
            },
            users: 20,
            queues: vec![("default".into(), 1.0)],
            seed: 42,
        }
    }
}

fn bad(option: &'static str, expected: &'static str, value: &str) -> SlsError {
    SlsError::BadOption {
        option,
        expected,
        value: value.into(),
    }
}

/// `1:0.6,8:0.4` (weights need not sum to 1).
pub fn parse_gpu_mix(s: &str) -> Result<Vec<(u32, f64)>, SlsError> {
    let expected = "GPUS:WEIGHT pairs such as 1:0.6,8:0.4";
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (g, w) = part
            .split_once(':')
            .ok_or_else(|| bad("--gpu-mix", expected, s))?;
        let g: u32 = g
            .trim()
            .parse()
            .map_err(|_| bad("--gpu-mix", expected, s))?;
        let w: f64 = w
            .trim()
            .parse()
            .map_err(|_| bad("--gpu-mix", expected, s))?;
        if !(w.is_finite() && w >= 0.0) {
            return Err(bad("--gpu-mix", expected, s));
        }
        out.push((g, w));
    }
    if out.iter().map(|(_, w)| w).sum::<f64>() <= 0.0 {
        return Err(bad("--gpu-mix", expected, s));
    }
    Ok(out)
}

/// `a,b` (equal weights) or `a:0.7,b:0.3`.
pub fn parse_queues(s: &str) -> Result<Vec<(String, f64)>, SlsError> {
    let expected = "queue names, optionally weighted: a,b or a:0.7,b:0.3";
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (q, w): (&str, f64) = match part.split_once(':') {
            Some((q, w)) => (
                q,
                w.trim().parse().map_err(|_| bad("--queues", expected, s))?,
            ),
            None => (part, 1.0),
        };
        if !(w.is_finite() && w >= 0.0) || q.trim().is_empty() {
            return Err(bad("--queues", expected, s));
        }
        out.push((q.trim().to_string(), w));
    }
    if out.iter().map(|(_, w)| w).sum::<f64>() <= 0.0 {
        return Err(bad("--queues", expected, s));
    }
    Ok(out)
}

/// `exp:MEAN_S` or `lognormal:MU,SIGMA`.
pub fn parse_durations(s: &str) -> Result<Durations, SlsError> {
    let expected = "exp:MEAN_SECONDS, lognormal:MU,SIGMA (of ln seconds) or fixed:SECONDS";
    let (kind, args) = s
        .split_once(':')
        .ok_or_else(|| bad("--duration", expected, s))?;
    let nums: Vec<f64> = args
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad("--duration", expected, s))?;
    match (kind.trim(), nums.as_slice()) {
        ("exp" | "exponential", [m]) if m.is_finite() && *m > 0.0 => {
            Ok(Durations::Exponential { mean_s: *m })
        }
        ("lognormal" | "log-normal", [mu, sigma])
            if mu.is_finite() && sigma.is_finite() && *sigma >= 0.0 =>
        {
            Ok(Durations::LogNormal {
                mu: *mu,
                sigma: *sigma,
            })
        }
        ("fixed", [v]) if v.is_finite() && *v > 0.0 => Ok(Durations::Fixed { s: *v }),
        _ => Err(bad("--duration", expected, s)),
    }
}

/// SplitMix64: small, fast, and the same sequence everywhere for a seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1].
    pub(crate) fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
    fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.unit().ln()
    }
    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.unit(), self.unit());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [(T, f64)]) -> &'a T {
        let total: f64 = items.iter().map(|(_, w)| w).sum();
        let mut x = self.unit() * total;
        for (t, w) in items {
            if x <= *w {
                return t;
            }
            x -= w;
        }
        &items[items.len() - 1].0
    }
}

/// The trace as CSV text.
pub fn generate(spec: &GenSpec) -> Result<String, SlsError> {
    if spec.jobs == 0 {
        return Err(bad("--jobs", "a positive count", "0"));
    }
    if !(spec.mean_interarrival_s.is_finite() && spec.mean_interarrival_s >= 0.0) {
        return Err(bad(
            "--interarrival",
            "a non-negative number of seconds",
            &spec.mean_interarrival_s.to_string(),
        ));
    }
    let mut rng = Rng(spec.seed);
    let mut out = String::from("job_id,submit_time,num_gpus,duration,user,queue\n");
    let mut t = 0.0f64;
    for i in 0..spec.jobs {
        if i > 0 {
            t += rng.exp(spec.mean_interarrival_s);
        }
        let gpus = *rng.pick(&spec.gpu_mix);
        let d = match spec.durations {
            Durations::Exponential { mean_s } => rng.exp(mean_s),
            Durations::LogNormal { mu, sigma } => (mu + sigma * rng.normal()).exp(),
            Durations::Fixed { s } => s,
        };
        // Whole seconds, at least one, at most 30 days.
        let d = d.round().clamp(1.0, 2_592_000.0) as u64;
        let user = 1 + (rng.next() % spec.users.max(1) as u64);
        let queue = rng.pick(&spec.queues);
        let _ = writeln!(
            out,
            "job{:07},{:.3},{gpus},{d},user{user},{queue}",
            i + 1,
            t
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_trace() {
        let spec = GenSpec {
            jobs: 500,
            ..GenSpec::default()
        };
        let a = generate(&spec).expect("test");
        assert_eq!(a, generate(&spec).expect("test"));
        let b = generate(&GenSpec {
            seed: 7,
            ..spec.clone()
        })
        .expect("test");
        assert_ne!(a, b);
        let jobs = crate::trace::parse_csv(
            std::path::Path::new("gen.csv"),
            &a,
            &crate::trace::Defaults::default(),
        )
        .expect("test");
        assert_eq!(jobs.len(), 500);
        // The mean gap is near the asked mean (60 s), within a generous margin.
        let span = jobs.last().expect("test").submit_ms as f64 / 1000.0;
        assert!((span / 499.0 - 60.0).abs() < 12.0, "{span}");
    }

    #[test]
    fn options_are_parsed_or_named() {
        assert_eq!(
            parse_gpu_mix("1:3,8:1").expect("test"),
            vec![(1, 3.0), (8, 1.0)]
        );
        assert!(parse_gpu_mix("1:x").is_err());
        assert_eq!(
            parse_durations("exp:600").expect("test"),
            Durations::Exponential { mean_s: 600.0 }
        );
        assert!(parse_durations("uniform:1").is_err());
        assert_eq!(parse_queues("a,b").expect("test").len(), 2);
    }
}
