//! `strata-bench soak`: the tutorial model trained, evaluated and used for prediction
//! over and over for a given time, with the process's resident memory sampled on a side
//! thread. A leak anywhere on that path (the fit loop, the step runner, the backend's
//! buffers, the allocator handing memory back) shows as memory that keeps growing after
//! the first minute, which holds every one-time cost (compiles, plans, thread pools).

use crate::sys;
use crate::workload::{self, Config, CLASSES, FEATURES, SAMPLES};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strata::backend::Device;
use strata::train::Fit;

/// What `soak` was asked to do.
pub struct SoakOpts {
    pub device: Device,
    pub batch: usize,
    pub minutes: f64,
    pub sample: Duration,
    /// The largest growth over the first minute's peak accepted, as a fraction.
    pub max_growth: f64,
    pub json: Option<PathBuf>,
}

/// The reference window: everything the first minute allocates is a one-time cost.
const REFERENCE: Duration = Duration::from_secs(60);

/// One memory sample: seconds since the start, resident MiB.
type Sample = (f64, f64);

/// Runs the soak; `Err` says why it could not run, `Ok(false)` that memory grew past
/// `max_growth`.
pub fn run(o: &SoakOpts) -> Result<bool, String> {
    let err = |e: strata::Error| e.to_string();
    let cfg = Config {
        device: o.device,
        batch: o.batch,
        cache_dir: None,
        steps_per_execution: 1,
        epochs: 1,
        workload: workload::Workload::Seed,
    };
    let (backend, _) = workload::backend_for(&cfg).map_err(err)?;
    let x = strata::random::normal(&[SAMPLES, FEATURES], 0.0, 1.0, 0).map_err(err)?;
    let y = strata::random::uniform_int(&[SAMPLES], 0, CLASSES, 1).map_err(err)?;
    let test_x = strata::random::normal(&[2_000, FEATURES], 0.0, 1.0, 2).map_err(err)?;
    let test_y = strata::random::uniform_int(&[2_000], 0, CLASSES, 3).map_err(err)?;
    let mut m = workload::tutorial_model(backend, 1).map_err(err)?;

    let start = Instant::now();
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (samples, done, every) = (samples.clone(), done.clone(), o.sample);
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let (Some(rss), Ok(mut v)) = (sys::rss_mib(), samples.lock()) {
                    v.push((start.elapsed().as_secs_f64(), rss));
                }
                std::thread::sleep(every);
            }
        })
    };

    let until = Duration::from_secs_f64(o.minutes * 60.0);
    let (mut rounds, mut last_loss, mut last_acc) = (0usize, f64::NAN, f64::NAN);
    let result = (|| -> strata::Result<()> {
        while start.elapsed() < until {
            // A new fit call each round: its set-up (staging, validation split, the
            // history) is part of what must not leak.
            let h = m.fit(
                &x,
                &y,
                Fit::epochs(1)
                    .batch_size(o.batch)
                    .validation_split(0.1)
                    .verbose(0),
            )?;
            last_loss = h
                .get("loss")
                .and_then(|v| v.last().copied())
                .unwrap_or(f64::NAN);
            let logs = m.evaluate(&test_x, &test_y)?;
            last_acc = logs.get("accuracy").unwrap_or(f64::NAN);
            m.predict(&test_x)?;
            rounds += 1;
        }
        Ok(())
    })();
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    result.map_err(err)?;
    let elapsed = start.elapsed().as_secs_f64();
    let samples = samples.lock().map(|v| v.clone()).unwrap_or_default();

    let reference = peak(&samples, |t| t <= REFERENCE.as_secs_f64())
        .ok_or("no memory sample in the first minute (is /proc mounted?)")?;
    let later = peak(&samples, |t| t > REFERENCE.as_secs_f64());
    let last = samples.last().map(|s| s.1);
    let growth = later.map(|l| l / reference - 1.0);

    println!(
        "soak: {} batch {}, {rounds} rounds (fit 1 epoch + evaluate + predict) in {:.1} min; \
         last loss {last_loss:.4}, test accuracy {last_acc:.4}",
        o.device,
        o.batch,
        elapsed / 60.0
    );
    println!("| minute | peak RSS MiB | last RSS MiB |");
    println!("|---|---|---|");
    for (minute, peak, last) in per_minute(&samples) {
        println!("| {minute} | {peak:.1} | {last:.1} |");
    }
    let verdict = match growth {
        None => "the run was too short to compare with its first minute".to_string(),
        Some(g) => format!(
            "after the first minute the peak was {:.1} MiB, {:+.2}% of the first minute's {reference:.1} MiB (limit {:+.1}%)",
            later.unwrap_or(reference),
            g * 100.0,
            o.max_growth * 100.0
        ),
    };
    println!("soak: {verdict}");
    if let Some(path) = &o.json {
        let v = json!({
            "backend": o.device.to_string(),
            "batch": o.batch,
            "minutes": elapsed / 60.0,
            "rounds": rounds,
            "first_minute_peak_rss_mib": reference,
            "later_peak_rss_mib": later,
            "last_rss_mib": last,
            "growth": growth,
            "max_growth": o.max_growth,
            "last_loss": last_loss,
            "test_accuracy": last_acc,
            "samples": samples,
            "rev": crate::git_rev(),
        });
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(path, format!("{v:#}\n")).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(growth.is_none_or(|g| g <= o.max_growth))
}

/// The largest resident size among the samples taken at times `when` accepts.
fn peak(samples: &[Sample], when: impl Fn(f64) -> bool) -> Option<f64> {
    samples
        .iter()
        .filter(|s| when(s.0))
        .map(|s| s.1)
        .reduce(f64::max)
}

/// Per started minute: its number (1-based), its peak and its last sample.
fn per_minute(samples: &[Sample]) -> Vec<(usize, f64, f64)> {
    let mut out: Vec<(usize, f64, f64)> = Vec::new();
    for &(t, rss) in samples {
        let minute = (t / 60.0) as usize + 1;
        match out.last_mut() {
            Some(row) if row.0 == minute => {
                row.1 = row.1.max(rss);
                row.2 = rss;
            }
            _ => out.push((minute, rss, rss)),
        }
    }
    out
}

/// Parses `soak`'s options.
pub fn parse(args: &[String]) -> Result<SoakOpts, String> {
    let mut o = SoakOpts {
        device: Device::Native,
        batch: 32,
        minutes: 60.0,
        sample: Duration::from_secs(2),
        max_growth: 0.05,
        json: None,
    };
    let positive = |flag: &str, v: &str| match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("{flag}: `{v}` is not a positive number")),
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--backend" => o.device = value.parse().map_err(|e| format!("--backend: {e}"))?,
            "--batch" => o.batch = crate::number(flag, value)?,
            "--minutes" => o.minutes = positive(flag, value)?,
            "--sample-seconds" => o.sample = Duration::from_secs_f64(positive(flag, value)?),
            "--max-growth" => o.max_growth = positive(flag, value)? / 100.0,
            "--json" => o.json = Some(PathBuf::from(value)),
            _ => return Err(format!("unknown option `{flag}`")),
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_group_samples_and_keep_their_peak() {
        let s = [(1.0, 10.0), (59.0, 12.0), (61.0, 11.0), (130.0, 13.0)];
        assert_eq!(
            per_minute(&s),
            [(1, 12.0, 12.0), (2, 11.0, 11.0), (3, 13.0, 13.0)]
        );
        assert_eq!(peak(&s, |t| t <= 60.0), Some(12.0));
        assert_eq!(peak(&s, |t| t > 60.0), Some(13.0));
        assert_eq!(peak(&s, |t| t > 1000.0), None);
    }

    #[test]
    fn bad_options_are_errors() {
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        for bad in [
            "--minutes 0",
            "--minutes x",
            "--minutes",
            "--batch 0",
            "--backend banana",
            "--max-growth -1",
            "--bogus 1",
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad}");
        }
        let o = parse(&args("--minutes 1.5 --max-growth 5 --backend xla-cpu")).unwrap();
        assert_eq!(o.minutes, 1.5);
        assert!((o.max_growth - 0.05).abs() < 1e-12);
    }
}
