//! The Keras-style progress display:
//! `313/313 ━━━━━━━━━━━━━━━━━━━━ 1s 3ms/step - accuracy: 0.8412 - loss: 0.6311`.

use super::Logs;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

pub(crate) struct Progress {
    verbose: u8,
    bar: Option<ProgressBar>,
}

/// `3ms/step`, `652us/step` or `2s/step`, as Keras prints them.
pub(crate) fn per_step(elapsed: Duration, steps: usize) -> String {
    let t = elapsed.as_secs_f64() / steps.max(1) as f64;
    if t >= 1.0 {
        format!("{t:.0}s/step")
    } else if t >= 1e-3 {
        format!("{:.0}ms/step", t * 1e3)
    } else {
        format!("{:.0}us/step", t * 1e6)
    }
}

fn seconds(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

/// The full bar Keras shows at the end of an epoch.
const FULL_BAR: &str = "━━━━━━━━━━━━━━━━━━━━";

impl Progress {
    /// A live bar only for `verbose == 1` on a terminal; otherwise lines at epoch ends.
    pub fn new(verbose: u8, steps: usize) -> Progress {
        let bar = (verbose == 1 && std::io::stdout().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(Some(steps as u64), ProgressDrawTarget::stdout());
            let style = ProgressStyle::with_template("{pos}/{len} {bar:20.green/dim} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("━━━");
            b.set_style(style);
            b
        });
        Progress { verbose, bar }
    }

    pub fn update(&mut self, done: usize, logs: &Logs, elapsed: Duration) {
        if let Some(b) = &self.bar {
            let total = b.length().unwrap_or(done as u64) as usize;
            let eta = elapsed.mul_f64((total.saturating_sub(done)) as f64 / done.max(1) as f64);
            b.set_position(done as u64);
            b.set_message(format!(
                "{} {} - {logs}",
                seconds(eta),
                per_step(elapsed, done)
            ));
        }
    }

    /// Prints the epoch's final line.
    pub fn finish(&mut self, steps: usize, logs: &Logs, elapsed: Duration) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        match self.verbose {
            1 => println!(
                "{steps}/{steps} {FULL_BAR} {} {} - {logs}",
                seconds(elapsed),
                per_step(elapsed, steps)
            ),
            2 => println!(
                "{steps}/{steps} - {} - {} - {logs}",
                seconds(elapsed),
                per_step(elapsed, steps)
            ),
            _ => {}
        }
    }

    /// Leaves the bar where it stopped (training ended early).
    pub fn abandon(&mut self) {
        if let Some(b) = self.bar.take() {
            b.abandon();
        }
    }
}
