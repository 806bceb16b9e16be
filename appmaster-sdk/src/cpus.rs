//! CPUs per GPU: what `spindle train --cpus-per-gpu` takes (Slurm's `--cpus-per-gpu`, plus a
//! range and `auto`) and the vcores ask it becomes on the wire (`vcoresRange`).
//!
//! A fixed count stays a fixed ask (the capability's vcores, as YARN has it). A range or
//! `auto` lets the RM's CPU policy size the container (`spindle.scheduler.cpu-policy`): the
//! capability carries the range's minimum and the ask its `vcoresRange`, per container.

use spindle_common::resource::{Resource, GPU};

/// What `--cpus-per-gpu` says, per GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpusPerGpu {
    /// Exactly this many per GPU (a fixed ask).
    Fixed(u32),
    /// From `min` to `max` per GPU, as the RM's policy sizes it.
    Range { min: u32, max: u32 },
    /// One per GPU up to the node's CPUs per GPU times the RM's `auto-factor`.
    Auto,
}

/// Why a `--cpus-per-gpu` value or its use is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpusPerGpuError {
    #[error("'{0}' is not a CPU count: use N, MIN..MAX or auto")]
    NotANumber(String),
    #[error("'{0}': CPUs per GPU must be at least 1")]
    Zero(String),
    #[error("'{text}': the minimum ({min}) is above the maximum ({max})")]
    Reversed { text: String, min: u32, max: u32 },
    #[error("--cpus-per-gpu needs GPUs in each worker's resources (yarn.io/gpu=N)")]
    NoGpus,
    #[error("{per_gpu} CPUs per GPU times {gpus} GPUs is too many vcores")]
    TooMany { per_gpu: u32, gpus: u32 },
}

/// An ask's `vcoresRange`, per container (what the RM's core reads back as its vcores ask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VcoresRange {
    /// Anything from `min` to `max` vcores (the capability carries `min`).
    Range { min: u32, max: u32 },
    /// One per GPU up to the node's CPUs per GPU times the RM's `auto-factor`, per GPU.
    Auto,
}

impl VcoresRange {
    /// The wire text: `MIN..MAX` or `auto`.
    pub fn wire(&self) -> String {
        match self {
            Self::Range { min, max } => format!("{min}..{max}"),
            Self::Auto => "auto".into(),
        }
    }
}

impl CpusPerGpu {
    /// `N`, `MIN..MAX` or `auto` (any case); every count at least 1, `MIN <= MAX`.
    pub fn parse(text: &str) -> Result<Self, CpusPerGpuError> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        let count = |s: &str| -> Result<u32, CpusPerGpuError> {
            match s.trim().parse::<u32>() {
                Ok(0) => Err(CpusPerGpuError::Zero(text.to_string())),
                Ok(n) => Ok(n),
                Err(_) => Err(CpusPerGpuError::NotANumber(text.to_string())),
            }
        };
        match t.split_once("..") {
            None => Ok(Self::Fixed(count(t)?)),
            Some((a, b)) => {
                let (min, max) = (count(a)?, count(b)?);
                if min > max {
                    return Err(CpusPerGpuError::Reversed {
                        text: text.to_string(),
                        min,
                        max,
                    });
                }
                Ok(Self::Range { min, max })
            }
        }
    }

    /// A range or `auto`: the RM sizes (and may move) the CPUs.
    pub fn is_ranged(&self) -> bool {
        !matches!(self, Self::Fixed(_))
    }

    /// The text [`CpusPerGpu::parse`] reads.
    pub fn text(&self) -> String {
        match self {
            Self::Fixed(n) => n.to_string(),
            Self::Range { min, max } => format!("{min}..{max}"),
            Self::Auto => "auto".into(),
        }
    }

    /// Applies this to a worker's `resources` (which must hold GPUs): its vcores become the
    /// fixed count or the range's minimum times its GPUs; the answer is the ask's
    /// `vcoresRange` (None for a fixed count).
    pub fn apply(&self, resources: &mut Resource) -> Result<Option<VcoresRange>, CpusPerGpuError> {
        let gpus = u32::try_from(resources.get(GPU)).unwrap_or(0);
        if gpus == 0 {
            return Err(CpusPerGpuError::NoGpus);
        }
        let times = |per_gpu: u32| {
            per_gpu
                .checked_mul(gpus)
                .filter(|v| i32::try_from(*v).is_ok())
                .ok_or(CpusPerGpuError::TooMany { per_gpu, gpus })
        };
        let (vcores, range) = match *self {
            Self::Fixed(n) => (times(n)?, None),
            Self::Range { min, max } => {
                let (lo, hi) = (times(min)?, times(max)?);
                (lo, Some(VcoresRange::Range { min: lo, max: hi }))
            }
            Self::Auto => (gpus, Some(VcoresRange::Auto)),
        };
        resources.vcores = i64::from(vcores);
        Ok(range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(n: i64) -> Resource {
        let mut r = Resource::new(1024, 1);
        r.set(GPU, n);
        r
    }

    #[test]
    fn counts_ranges_and_auto_parse_and_print_back() {
        for (text, want) in [
            ("4", CpusPerGpu::Fixed(4)),
            (" 2..6 ", CpusPerGpu::Range { min: 2, max: 6 }),
            ("3..3", CpusPerGpu::Range { min: 3, max: 3 }),
            ("AUTO", CpusPerGpu::Auto),
        ] {
            let got = CpusPerGpu::parse(text).expect(text);
            assert_eq!(got, want, "{text}");
            assert_eq!(CpusPerGpu::parse(&got.text()), Ok(got));
        }
    }

    #[test]
    fn bad_values_are_named() {
        assert_eq!(
            CpusPerGpu::parse("0"),
            Err(CpusPerGpuError::Zero("0".into()))
        );
        assert_eq!(
            CpusPerGpu::parse("0..4"),
            Err(CpusPerGpuError::Zero("0..4".into()))
        );
        assert_eq!(
            CpusPerGpu::parse("5..2"),
            Err(CpusPerGpuError::Reversed {
                text: "5..2".into(),
                min: 5,
                max: 2
            })
        );
        for bad in ["x", "", "2..", "..4", "-1", "1.5", "2..x", "1..2..3"] {
            assert_eq!(
                CpusPerGpu::parse(bad),
                Err(CpusPerGpuError::NotANumber(bad.into())),
                "{bad}"
            );
        }
        let e = CpusPerGpu::parse("5..2").unwrap_err().to_string();
        assert!(e.contains("minimum (5) is above the maximum (2)"), "{e}");
    }

    #[test]
    fn a_fixed_count_is_a_fixed_ask_and_a_range_is_per_container() {
        let mut r = gpus(2);
        assert_eq!(CpusPerGpu::Fixed(3).apply(&mut r), Ok(None));
        assert_eq!(r.vcores, 6);
        let mut r = gpus(2);
        assert_eq!(
            CpusPerGpu::Range { min: 2, max: 5 }.apply(&mut r),
            Ok(Some(VcoresRange::Range { min: 4, max: 10 }))
        );
        assert_eq!(r.vcores, 4);
        assert_eq!(VcoresRange::Range { min: 4, max: 10 }.wire(), "4..10");
        let mut r = gpus(3);
        assert_eq!(CpusPerGpu::Auto.apply(&mut r), Ok(Some(VcoresRange::Auto)));
        assert_eq!(r.vcores, 3);
        assert_eq!(VcoresRange::Auto.wire(), "auto");
    }

    #[test]
    fn no_gpus_or_too_many_vcores_are_refused() {
        assert_eq!(
            CpusPerGpu::Fixed(2).apply(&mut gpus(0)),
            Err(CpusPerGpuError::NoGpus)
        );
        assert_eq!(
            CpusPerGpu::Fixed(u32::MAX).apply(&mut gpus(2)),
            Err(CpusPerGpuError::TooMany {
                per_gpu: u32::MAX,
                gpus: 2
            })
        );
    }
}
