//! `seed`, `cnn`, `bncnn` and `rnn`: run every configuration and peer round-robin, then print the markdown
//! table, the ratios to the best peer (and, for `seed`, the targets), and write the
//! JSON. The pieces both share (child runs, rows, ratios, the header, the JSON file) are
//! defined once here.

use crate::workload::{steps_per_epoch, Net, SAMPLES};
use crate::{conv, gemm, peers, sys, workspace, CnnOpts, Opts};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use std::process::Command;
use strata::backend::Device;

/// Training FLOPs per sample by the 6×(matmul weights) rule of thumb, as the peers' table
/// counts them: 6 × 109,184.
const FLOP_PER_SAMPLE: f64 = 655_104.0;

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn min(v: impl IntoIterator<Item = f64>) -> Option<f64> {
    v.into_iter().filter(|x| x.is_finite()).reduce(f64::min)
}

fn max(v: impl IntoIterator<Item = f64>) -> Option<f64> {
    v.into_iter().filter(|x| x.is_finite()).reduce(f64::max)
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

/// The epochs after the first (the steady state) of every run.
fn steady(runs: &[Value]) -> Vec<f64> {
    runs.iter()
        .filter_map(|r| r.get("epoch_s").and_then(Value::as_array))
        .flat_map(|e| e.iter().skip(1).filter_map(Value::as_f64))
        .collect()
}

/// The time inside `execute` during the fastest steady epoch of all runs, so that it
/// splits the same epoch as `us_per_step` (the minimum) does.
fn fastest_execute(runs: &[Value]) -> Option<f64> {
    let nums = |r: &Value, k: &str| -> Vec<f64> {
        r.get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    runs.iter()
        .flat_map(|r| {
            let (e, x) = (nums(r, "epoch_s"), nums(r, "epoch_execute_s"));
            e.into_iter().zip(x).skip(1).collect::<Vec<_>>()
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, x)| x)
}

/// Median over runs of one numeric field.
fn med(runs: &[Value], key: &str) -> Option<f64> {
    median(runs.iter().filter_map(|r| num(r, key)).collect())
}

/// The first epoch of each run (compiles included).
fn cold(runs: &[Value]) -> Vec<f64> {
    runs.iter()
        .filter_map(|r| r.get("epoch_s").and_then(Value::as_array))
        .filter_map(|e| e.first().and_then(Value::as_f64))
        .collect()
}

/// One row of the table: a Strata backend or a peer at one batch size, over its runs of
/// `samples` per epoch at `flop_per_sample` training FLOPs each.
fn summarize(
    name: &str,
    batch: usize,
    samples: usize,
    flop_per_sample: f64,
    runs: &[Value],
) -> Value {
    let st = steady(runs);
    let steps = steps_per_epoch(samples, batch) as f64;
    let smin = min(st.iter().copied());
    let smed = median(st.clone());
    let cached: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.get("compile_cached").and_then(|c| num(c, "compile_s")))
        .collect();
    json!({
        "backend": name,
        "batch": batch,
        "runs": runs.len(),
        "steady_epoch_s_min": smin,
        "steady_epoch_s_median": smed,
        "steady_epochs": st.len(),
        "fit_s": med(runs, "fit_s"),
        "cold_epoch_s": median(cold(runs)),
        "fit_s_min": min(runs.iter().filter_map(|r| num(r, "fit_s"))),
        "compile_s": med(runs, "compile_s"),
        "compile_cached_s": median(cached),
        "us_per_step": smin.map(|s| s / steps * 1e6),
        "us_per_step_median": smed.map(|s| s / steps * 1e6),
        "execute_us_per_step": fastest_execute(runs).map(|s| s / steps * 1e6),
        "allocs_per_step": med(runs, "allocs_per_step"),
        "execute_allocs_per_step": med(runs, "execute_allocs_per_step"),
        "epoch_allocs": med(runs, "epoch_allocs"),
        "alloc_bytes_per_step": med(runs, "alloc_bytes_per_step"),
        "minor_faults_per_step": med(runs, "minor_faults_per_step"),
        "first_epoch_extra_s": med(runs, "first_epoch_extra_s"),
        "backend_init_s": med(runs, "backend_init_s"),
        "process_s": med(runs, "process_s"),
        "peak_rss_mib": max(runs.iter().filter_map(|r| num(r, "peak_rss_mib"))),
        "train_gflops": smin.map(|s| flop_per_sample * samples as f64 / s * 1e-9),
        "loss": med(runs, "loss"),
        "accuracy": med(runs, "accuracy").or_else(|| med(runs, "acc")),
    })
}

fn f(v: &Value, key: &str, digits: usize) -> String {
    match num(v, key) {
        Some(x) => format!("{x:.digits$}"),
        None => "—".into(),
    }
}

/// `a / b` as two cells: `0.061 / 0.064`.
fn pair(v: &Value, a: &str, b: &str, digits: usize) -> String {
    match (num(v, a), num(v, b)) {
        (None, None) => "—".into(),
        _ => format!("{} / {}", f(v, a, digits), f(v, b, digits)),
    }
}

/// Allocation counts: integers shown as such, fractions with one decimal.
fn count(v: &Value, key: &str) -> String {
    match num(v, key) {
        Some(x) if x == x.round() => format!("{x:.0}"),
        Some(x) if x < 0.1 => format!("{x:.3}"),
        Some(x) => format!("{x:.1}"),
        None => "—".into(),
    }
}

/// The markdown table of Strata's rows and the peers' rows.
pub fn table(ours: &[Value], peers: &[Value]) -> String {
    let mut s = String::new();
    s.push_str(
        "| backend | batch | runs | steady epoch s (min / med) | fit s (cold, med) | compile s (cold / cached) \
         | µs/step (min) | execute µs/step | allocs/step (fit / execute), per epoch | minor faults/step | peak RSS MiB \
         | loss ep. 5 | × best peer |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in ours.iter().chain(peers) {
        let ratio = match (
            num(r, "ratio_to_best_peer"),
            r.get("best_peer").and_then(Value::as_str),
        ) {
            (Some(x), Some(p)) => format!("{x:.2}× ({p})"),
            _ => "—".into(),
        };
        let allocs = match (num(r, "allocs_per_step"), num(r, "execute_allocs_per_step")) {
            (None, None) => "—".into(),
            _ => format!(
                "{} / {}, {}",
                count(r, "allocs_per_step"),
                count(r, "execute_allocs_per_step"),
                count(r, "epoch_allocs")
            ),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r["backend"].as_str().unwrap_or("?"),
            r["batch"],
            r["runs"],
            pair(r, "steady_epoch_s_min", "steady_epoch_s_median", 3),
            f(r, "fit_s", 2),
            pair(r, "compile_s", "compile_cached_s", 3),
            f(r, "us_per_step", 0),
            f(r, "execute_us_per_step", 0),
            allocs,
            count(r, "minor_faults_per_step"),
            f(r, "peak_rss_mib", 0),
            f(r, "loss", 3),
            ratio,
        );
    }
    s.push_str(
        "\nexecute µs/step: time inside `Backend::execute`. Native returns when the step is \
         done; XLA once the run is launched and the previous run has finished, so the device \
         always has the next step queued (fit reads the logs only every 50 ms).\n",
    );
    s
}

pub fn gemm_table(rows: &[Value], sgemm: Option<&Value>) -> String {
    let mut s = String::from("| GEMM (runtime path: one-op dot_general graph, native backend) | GFLOP/s best / median | µs/call |\n|---|---|---|\n");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            r["shape"].as_str().unwrap_or("?"),
            pair(r, "gflops", "gflops_median", 1),
            f(r, "us_per_call", 1)
        );
    }
    if let Some(peak) = sgemm.and_then(|v| num(v, "peak_gflops")) {
        let _ = writeln!(
            s,
            "| numpy sgemm (OpenBLAS), best shape and thread count | {peak:.1} | |"
        );
    }
    s
}

/// Whether a backend can run here; the reason to skip it otherwise.
fn available(name: &str) -> Result<Device, String> {
    let d: Device = name.parse().map_err(|e| format!("{e}"))?;
    if let Some(kind) = d.plugin_kind() {
        strata::backend::pjrt::find_plugin(kind, None).map_err(|e| format!("{e}"))?;
    }
    Ok(d)
}

/// The row name of `device` run with `k` steps per execution: the backend's own name
/// for the tutorial's 1, `<backend> k=<k>` otherwise.
fn with_k(device: &Device, k: usize) -> String {
    match k {
        1 => device.to_string(),
        k => format!("{device} k={k}"),
    }
}

/// Runs one seed configuration in a child process of `exe` (this program, or the
/// `--baseline` binary).
fn run_ours(
    o: &Opts,
    exe: &Path,
    device: &Device,
    (batch, k): (usize, usize),
) -> Result<Value, String> {
    let args = [
        "one".to_string(),
        "--backend".into(),
        device.to_string(),
        "--batch".into(),
        batch.to_string(),
        "--steps-per-execution".into(),
        k.to_string(),
    ];
    run_strata(exe, &args, device, o.timeout)
}

/// Runs `exe args` (a `one` or `cnn-one` child), with a fresh XLA cache for an XLA
/// device, and reads its `RESULT` line.
fn run_strata(
    exe: &Path,
    args: &[String],
    device: &Device,
    timeout: std::time::Duration,
) -> Result<Value, String> {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    // A fresh, empty compilation cache per run: the fit's compile is a cold one.
    let cache = match device {
        Device::Native => None,
        _ => Some(sys::fresh_dir("xla-cache").map_err(|e| format!("temp dir: {e}"))?),
    };
    if let Some(c) = &cache {
        cmd.arg("--cache-dir").arg(c);
    }
    let done = sys::run_child(&mut cmd, timeout).map_err(|e| e.to_string());
    if let Some(c) = &cache {
        let _ = std::fs::remove_dir_all(c);
    }
    let done = done?;
    let parsed = done
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .map(serde_json::from_str::<Value>);
    match parsed {
        Some(Ok(mut v)) if done.ok => {
            v["process_s"] = done.wall_s.into();
            Ok(v)
        }
        _ => Err(format!(
            "{}; last output:\n{}",
            done.status,
            sys::tail(&format!("{}{}", done.stdout, done.stderr), 8)
        )),
    }
}

/// The whole tutorial process, `cargo run --release --example seed_tpu`, if the example
/// exists (it is built first, so the timing is of a built program).
struct SeedProcess {
    runs: Vec<f64>,
    binary_runs: Vec<f64>,
}

fn seed_tpu_example(root: &Path) -> Option<std::path::PathBuf> {
    let p = root.join("examples").join("seed_tpu.rs");
    p.is_file().then_some(p)
}

fn build_seed_tpu(root: &Path) -> Result<(), String> {
    let out = Command::new("cargo")
        .args(["build", "--release", "--example", "seed_tpu"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build --release --example seed_tpu failed:\n{}",
            sys::tail(&String::from_utf8_lossy(&out.stderr), 12)
        ));
    }
    Ok(())
}

fn time_seed_tpu(o: &Opts, root: &Path, p: &mut SeedProcess) -> Result<(), String> {
    let mut cmd = Command::new("cargo");
    cmd.args(["run", "--release", "--example", "seed_tpu"])
        .current_dir(root)
        .env_remove("STRATA_DEVICE");
    let done = sys::run_child(&mut cmd, o.timeout).map_err(|e| e.to_string())?;
    if !done.ok {
        return Err(format!(
            "cargo run --release --example seed_tpu: {}\n{}",
            done.status,
            sys::tail(&done.stderr, 8)
        ));
    }
    p.runs.push(done.wall_s);
    let bin = root
        .join("target")
        .join("release")
        .join("examples")
        .join("seed_tpu");
    let mut cmd = Command::new(bin);
    cmd.current_dir(root).env_remove("STRATA_DEVICE");
    let done = sys::run_child(&mut cmd, o.timeout).map_err(|e| e.to_string())?;
    if done.ok {
        p.binary_runs.push(done.wall_s);
    }
    Ok(())
}

fn load_line() -> String {
    match sys::loadavg() {
        Some([a, b, c]) => format!("{a:.2} {b:.2} {c:.2}"),
        None => "unknown".into(),
    }
}

/// The machine in one line, with the load now.
fn machine_line() -> String {
    format!(
        "{} ({} cores{}), load {} at start",
        sys::cpu_model(),
        sys::cpus(),
        if sys::has_avx512() { ", AVX-512" } else { "" },
        load_line()
    )
}

/// The report's first two lines: the command, the commit, the machine, the time taken.
fn header(machine: &str, started: std::time::Instant) -> String {
    let cmdline: Vec<String> = std::env::args().skip(1).collect();
    format!(
        "`strata-bench {}` at {}\n{machine}, {} at end; {:.0} s in all.\n\n",
        cmdline.join(" "),
        crate::git_rev().unwrap_or_else(|| "?".into()),
        load_line(),
        started.elapsed().as_secs_f64()
    )
}

/// The machine as the JSON records it.
fn machine_json(load_start: Option<[f64; 3]>) -> Value {
    json!({
        "cpu": sys::cpu_model(),
        "cores": sys::cpus(),
        "avx512": sys::has_avx512(),
        "load_start": load_start,
        "load_end": sys::loadavg(),
    })
}

fn write_json(path: &Path, doc: &Value) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// The best peer at each batch by `key` (the smallest): its name and value.
fn best_peers(peer_rows: &[Value], batches: &[usize], key: &str) -> BTreeMap<usize, (String, f64)> {
    batches
        .iter()
        .filter_map(|&b| {
            peer_rows
                .iter()
                .filter(|r| r["batch"].as_u64() == Some(b as u64))
                .filter_map(|r| Some((r["backend"].as_str()?.to_string(), num(r, key)?)))
                .min_by(|x, y| x.1.total_cmp(&y.1))
                .map(|x| (b, x))
        })
        .collect()
}

/// Adds to `r` its ratio by `key` to the best peer at its batch (`ratio_to_best_peer`,
/// with `best_peer` and the peer's value), and, when `each`, to every peer
/// (`ratio_to_peers`).
fn add_ratios(
    r: &mut Value,
    best: &BTreeMap<usize, (String, f64)>,
    peer_rows: &[Value],
    key: &str,
    each: bool,
) {
    let b = r["batch"].as_u64().unwrap_or(0) as usize;
    if let (Some((who, t)), Some(s)) = (best.get(&b), num(r, key)) {
        r["best_peer"] = who.clone().into();
        r[format!("best_peer_{key}")] = (*t).into();
        r["ratio_to_best_peer"] = (s / t).into();
    }
    if each {
        let by_peer: serde_json::Map<String, Value> = peer_rows
            .iter()
            .filter(|p| p["batch"].as_u64() == Some(b as u64))
            .filter_map(|p| {
                let ratio = num(r, key)? / num(p, key)?;
                Some((p["backend"].as_str()?.to_string(), ratio.into()))
            })
            .collect();
        r["ratio_to_peers"] = by_peer.into();
    }
}

pub fn seed(o: &Opts) -> Result<(), String> {
    let root = workspace();
    let started = std::time::Instant::now();
    let load_start = sys::loadavg();
    let machine = machine_line();
    eprintln!("strata-bench seed: {machine}");
    let mut skipped: Vec<String> = Vec::new();
    let mut skip = |what: String| {
        eprintln!("skip: {what}");
        skipped.push(what);
    };

    let binaries = binaries(o.baseline.as_deref())?;

    let mut devices = Vec::new();
    for b in &o.backends {
        match available(b) {
            Ok(d) => devices.push(d),
            Err(e) => skip(format!("backend {b}: {e}")),
        }
    }
    if devices.is_empty() {
        return Err("no backend to measure".into());
    }

    let peers = peers::choose(
        &o.peers,
        o.peers_python.clone(),
        o.peers_script
            .clone()
            .unwrap_or_else(|| peers::default_script(&root)),
        &mut skip,
    )?;
    let frameworks: &[String] = if peers.is_some() {
        &o.peer_frameworks
    } else {
        &[]
    };

    let mut seed_process = None;
    if o.process {
        match seed_tpu_example(&root) {
            None => skip(format!(
                "whole-process timing: {} does not exist yet",
                root.join("examples/seed_tpu.rs").display()
            )),
            Some(_) => match build_seed_tpu(&root) {
                Ok(()) => {
                    seed_process = Some(SeedProcess {
                        runs: Vec::new(),
                        binary_runs: Vec::new(),
                    })
                }
                Err(e) => skip(format!("whole-process timing: {e}")),
            },
        }
    }

    // Round-robin: every configuration once per repeat, so drift in the machine's load
    // spreads over all of them instead of landing on one.
    let mut ours: BTreeMap<(String, usize), Vec<Value>> = BTreeMap::new();
    let mut theirs: BTreeMap<(String, usize), Vec<Value>> = BTreeMap::new();
    let mut failures: Vec<String> = Vec::new();
    for rep in 0..o.repeats {
        for &batch in &o.batches {
            for (d, &k) in devices
                .iter()
                .flat_map(|d| o.steps_per_execution.iter().map(move |k| (d, k)))
            {
                for (exe, suffix) in &binaries {
                    let name = format!("{}{suffix}", with_k(d, k));
                    match run_ours(o, exe, d, (batch, k)) {
                        Ok(v) => {
                            eprintln!(
                                "[rep {rep}] strata {name:<9} b={batch:<5} fit {:.2}s  epochs {}  compile {:.3}s  allocs/step {}",
                                num(&v, "fit_s").unwrap_or(f64::NAN),
                                epochs_line(&v),
                                num(&v, "compile_s").unwrap_or(f64::NAN),
                                count(&v, "allocs_per_step"),
                            );
                            ours.entry((name, batch)).or_default().push(v);
                        }
                        Err(e) => {
                            eprintln!("[rep {rep}] strata {name} b={batch} FAILED: {e}");
                            failures.push(format!("strata {name} batch {batch}: {e}"));
                        }
                    }
                }
            }
            if let Some(p) = &peers {
                for fw in frameworks {
                    let b = batch.to_string();
                    match p.run(fw, &["--batch", &b, "--epochs", "5"], o.timeout) {
                        Ok(v) => {
                            eprintln!(
                                "[rep {rep}] peer   {fw:<9} b={batch:<5} fit {:.2}s  epochs {}  process {:.1}s",
                                num(&v, "fit_s").unwrap_or(f64::NAN),
                                epochs_line(&v),
                                num(&v, "process_s").unwrap_or(f64::NAN),
                            );
                            theirs.entry((fw.clone(), batch)).or_default().push(v);
                        }
                        Err(e) => {
                            eprintln!("[rep {rep}] peer {fw} b={batch} FAILED: {e}");
                            failures.push(format!("peer {fw} batch {batch}: {e}"));
                        }
                    }
                }
            }
        }
        if let Some(sp) = &mut seed_process {
            match time_seed_tpu(o, &root, sp) {
                Ok(()) => eprintln!(
                    "[rep {rep}] process cargo run --release --example seed_tpu {:.2}s",
                    sp.runs.last().copied().unwrap_or(f64::NAN)
                ),
                Err(e) => failures.push(e),
            }
        }
    }

    let (gemm_rows, sgemm) = if o.gemm {
        let rows = gemm::run(&o.batches, o.quick).map_err(|e| format!("gemm: {e}"))?;
        let sgemm = match (&peers, o.quick) {
            (Some(p), false) => match p.sgemm_peak(o.timeout) {
                Ok(v) => Some(v),
                Err(e) => {
                    failures.push(format!("numpy sgemm: {e}"));
                    None
                }
            },
            _ => None,
        };
        (rows, sgemm)
    } else {
        (Vec::new(), None)
    };

    // Rows, then ratios to the best peer at each batch.
    let mut peer_rows: Vec<Value> = theirs
        .iter()
        .map(|((fw, b), runs)| summarize(fw, *b, SAMPLES, FLOP_PER_SAMPLE, runs))
        .collect();
    peer_rows.sort_by_key(|r| (r["batch"].as_u64(), peer_order(r["backend"].as_str())));
    let key = "steady_epoch_s_min";
    let best = best_peers(&peer_rows, &o.batches, key);
    let mut rows: Vec<Value> = Vec::new();
    for &b in &o.batches {
        let names = devices.iter().flat_map(|d| {
            let binaries = &binaries;
            o.steps_per_execution.iter().flat_map(move |&k| {
                binaries
                    .iter()
                    .map(move |(_, suffix)| format!("{}{suffix}", with_k(d, k)))
            })
        });
        for name in names {
            let Some(runs) = ours.get(&(name.clone(), b)) else {
                continue;
            };
            let mut r = summarize(&name, b, SAMPLES, FLOP_PER_SAMPLE, runs);
            add_ratios(&mut r, &best, &peer_rows, key, true);
            rows.push(r);
        }
    }
    for r in &mut peer_rows {
        add_ratios(r, &best, &[], key, false);
        if let Some(m) = r.as_object_mut() {
            m.remove("best_peer_steady_epoch_s_min");
        }
    }

    let gemm_peak = gemm_rows
        .iter()
        .find(|r| r["shape"] == "1024³")
        .and_then(|r| num(r, "gflops"));
    let sgemm_peak = sgemm.as_ref().and_then(|v| num(v, "peak_gflops"));
    let process = seed_process.as_ref().map(|sp| {
        let keras_tf = theirs
            .get(&("keras-tf".to_string(), 32))
            .map(|runs| median(runs.iter().filter_map(|r| num(r, "process_s")).collect()));
        let ours = median(sp.runs.clone());
        json!({
            "command": "cargo run --release --example seed_tpu",
            "process_s": ours,
            "process_s_runs": sp.runs,
            "binary_process_s": median(sp.binary_runs.clone()),
            "keras_tf_process_s": keras_tf.flatten(),
            "ratio_to_keras_tf": match (ours, keras_tf.flatten()) {
                (Some(a), Some(b)) => Some(a / b),
                _ => None,
            },
        })
    });
    let targets = targets(
        &rows,
        &peer_rows,
        max(gemm_peak.into_iter().chain(sgemm_peak)),
        process.as_ref(),
    );

    // The report: markdown on stdout.
    let mut out = header(&machine, started);
    let cmdline: Vec<String> = std::env::args().skip(1).collect();
    out.push_str(&table(&rows, &peer_rows));
    out.push('\n');
    if !gemm_rows.is_empty() {
        out.push_str(&gemm_table(&gemm_rows, sgemm.as_ref()));
        out.push('\n');
    }
    if let Some(p) = &process {
        let _ = writeln!(
            out,
            "Whole process, `cargo run --release --example seed_tpu` (built): {} s (the binary alone {} s); \
             Keras-on-TF tutorial process (peers_seed.py keras-tf, batch 32): {} s; ratio {}.\n",
            f(p, "process_s", 2),
            f(p, "binary_process_s", 2),
            f(p, "keras_tf_process_s", 2),
            f(p, "ratio_to_keras_tf", 3),
        );
    }
    let versus = versus_baseline(&rows);
    out.push_str(&versus_table(&versus));
    if !targets.is_empty() {
        out.push_str("| target (issues 7, 15) | measured | met |\n|---|---|---|\n");
        for t in &targets {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                t["target"].as_str().unwrap_or(""),
                t["measured"].as_str().unwrap_or(""),
                match t["met"].as_bool() {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "n/a",
                }
            );
        }
        out.push('\n');
    }
    for s in &skipped {
        let _ = writeln!(out, "- skipped: {s}");
    }
    for e in &failures {
        let _ = writeln!(out, "- failed: {}", e.lines().next().unwrap_or(""));
    }
    print!("{out}");

    if let Some(path) = &o.json {
        let doc = json!({
            "command": format!("strata-bench {}", cmdline.join(" ")),
            "git_rev": crate::git_rev(),
            "machine": machine_json(load_start),
            "workload": {
                "model": "784-128-64-10 relu/relu/softmax", "optimizer": "adam",
                "loss": "sparse_categorical_crossentropy", "samples": SAMPLES, "epochs": 5,
                "steps_per_execution": o.steps_per_execution,
            },
            "results": rows,
            "peers": peer_rows,
            "gemm_gflops": gemm_peak,
            "gemm": gemm_rows,
            "sgemm_openblas": sgemm,
            "process": process,
            "targets": targets,
            "versus_baseline": versus,
            "baseline": o.baseline.as_ref().map(|b| b.display().to_string()),
            "skipped": skipped,
            "failures": failures,
            "runs": {
                "strata": ours.iter().map(|((b, n), v)| json!({"backend": b, "batch": n, "runs": v})).collect::<Vec<_>>(),
                "peers": theirs.iter().map(|((b, n), v)| json!({"framework": b, "batch": n, "runs": v})).collect::<Vec<_>>(),
            },
        });
        write_json(path, &doc)?;
    }
    Ok(())
}

/// The suffix of the rows measured with the `--baseline` binary.
const BASELINE: &str = " (baseline)";

/// Every Strata binary a run measures (this program, then the `--baseline` one), with the
/// suffix its rows carry.
fn binaries(baseline: Option<&Path>) -> Result<Vec<(std::path::PathBuf, &'static str)>, String> {
    let mut binaries = vec![(
        std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?,
        "",
    )];
    if let Some(b) = baseline {
        if !b.is_file() {
            return Err(format!("--baseline: {} is not a file", b.display()));
        }
        binaries.push((b.to_path_buf(), BASELINE));
    }
    Ok(binaries)
}

/// The markdown of [`versus_baseline`]'s rows (nothing without a baseline).
fn versus_table(versus: &[Value]) -> String {
    if versus.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| this build / baseline (same run) | steady epoch min | steady epoch median | × best peer, this / baseline |\n|---|---|---|---|\n",
    );
    for v in versus {
        let _ = writeln!(
            out,
            "| {} batch {} | {} | {} | {} / {} |",
            v["backend"].as_str().unwrap_or("?"),
            v["batch"],
            f(v, "ratio_min", 3),
            f(v, "ratio_median", 3),
            f(v, "to_best_peer", 2),
            f(v, "baseline_to_best_peer", 2),
        );
    }
    out.push('\n');
    out
}

/// For each row with a baseline twin, this build's steady epoch over the baseline's (min
/// and median), and both rows' ratios to the best peer.
fn versus_baseline(rows: &[Value]) -> Vec<Value> {
    rows.iter()
        .filter_map(|r| {
            let name = r["backend"].as_str()?;
            if name.ends_with(BASELINE) {
                return None;
            }
            let batch = r["batch"].as_u64()? as usize;
            let base = find(rows, &format!("{name}{BASELINE}"), batch)?;
            let ratio = |k: &str| Some(num(r, k)? / num(base, k)?);
            Some(json!({
                "backend": name,
                "batch": batch,
                "ratio_min": ratio("steady_epoch_s_min"),
                "ratio_median": ratio("steady_epoch_s_median"),
                "to_best_peer": num(r, "ratio_to_best_peer"),
                "baseline_to_best_peer": num(base, "ratio_to_best_peer"),
            }))
        })
        .collect()
}

/// The peers in the order the issue lists them.
fn peer_order(name: Option<&str>) -> usize {
    let order = [
        "keras-tf",
        "keras-jax",
        "jax",
        "jax-scan",
        "torch",
        "torch-compile",
    ];
    name.and_then(|n| order.iter().position(|o| *o == n))
        .unwrap_or(order.len())
}

fn epochs_line(v: &Value) -> String {
    v.get("epoch_s")
        .and_then(Value::as_array)
        .map(|e| {
            e.iter()
                .filter_map(Value::as_f64)
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

fn find<'a>(rows: &'a [Value], backend: &str, batch: usize) -> Option<&'a Value> {
    rows.iter()
        .find(|r| r["backend"] == backend && r["batch"].as_u64() == Some(batch as u64))
}

/// The targets, each with what this run measured. Informational: the harness
/// never fails on them (these machines are too noisy for a timing assertion).
fn targets(
    rows: &[Value],
    peers: &[Value],
    peak: Option<f64>,
    process: Option<&Value>,
) -> Vec<Value> {
    let mut t = Vec::new();
    let mut push = |target: String, measured: String, met: Option<bool>| {
        t.push(json!({"target": target, "measured": measured, "met": met}));
    };
    for (b, limit) in [(32usize, 0.7), (1024, 0.9)] {
        if let Some(r) = find(rows, "native", b) {
            if let Some(x) = num(r, "ratio_to_best_peer") {
                push(
                    format!("native batch {b} steady epoch ≤ {limit}× the best peer's"),
                    format!(
                        "{x:.2}× ({} s vs {} {} s)",
                        f(r, "steady_epoch_s_min", 3),
                        r["best_peer"].as_str().unwrap_or("?"),
                        f(r, "best_peer_steady_epoch_s_min", 3)
                    ),
                    Some(x <= limit),
                );
            }
        }
    }
    if let (Some(r), Some(p)) = (find(rows, "native", 1024), peak) {
        if let Some(g) = num(r, "train_gflops") {
            push(
                "native batch 1024 ≥ 70% of the measured sgemm peak".into(),
                format!("{g:.0} GFLOP/s = {:.0}% of {p:.0}", 100.0 * g / p),
                Some(g >= 0.7 * p),
            );
        }
    }
    if let Some(x) = process.and_then(|p| num(p, "ratio_to_keras_tf")) {
        push(
            "whole seed_tpu process ≤ 1/10 of the Keras-on-TF tutorial process".into(),
            format!("{x:.3}×"),
            Some(x <= 0.1),
        );
    }
    for r in rows.iter().filter(|r| r["backend"] == "native") {
        if let Some(a) = num(r, "allocs_per_step") {
            push(
                format!(
                    "zero allocations per steady-state step (native, batch {})",
                    r["batch"]
                ),
                format!(
                    "{} per step in the fit loop, {} in execute ({} per epoch outside its steps)",
                    count(r, "allocs_per_step"),
                    count(r, "execute_allocs_per_step"),
                    count(r, "epoch_allocs")
                ),
                Some(a == 0.0),
            );
        }
    }
    for r in rows.iter().filter(|r| r["backend"] == "xla-cpu") {
        let b = r["batch"].as_u64().unwrap_or(0) as usize;
        if let (Some(ours), Some(jax)) = (
            num(r, "us_per_step"),
            find(peers, "jax", b).and_then(|p| num(p, "us_per_step")),
        ) {
            push(
                format!("xla-cpu time per step within 10% of JAX's (step loop, batch {b})"),
                format!("{ours:.0} vs {jax:.0} µs = {:.2}×", ours / jax),
                Some(ours <= 1.1 * jax),
            );
        }
    }
    // Issue 15: `steps_per_execution` as one compiled loop, at batch 32.
    let epoch = |r: &Value| num(r, "steady_epoch_s_min");
    for r in rows.iter().filter(|r| r["batch"] == 32) {
        let Some((device, k)) = r["backend"].as_str().and_then(|n| n.split_once(" k=")) else {
            continue;
        };
        let (limit, of) = match device {
            "xla-cpu" => (0.75, "0.75×"),
            "native" => (1.0, "no slower than"),
            _ => continue,
        };
        if let (Some(ours), Some(one)) = (epoch(r), find(rows, device, 32).and_then(epoch)) {
            push(
                format!("{device} batch 32, k = {k}: steady epoch {of} its own k = 1"),
                format!("{ours:.3} vs {one:.3} s = {:.2}×", ours / one),
                Some(ours <= limit * one),
            );
        }
        if device != "xla-cpu" {
            continue;
        }
        if let (Some(ours), Some(scan)) = (epoch(r), find(peers, "jax-scan", 32).and_then(epoch)) {
            push(
                format!("xla-cpu batch 32, k = {k}: steady epoch ≤ 1.0× JAX lax.scan's"),
                format!("{ours:.3} vs {scan:.3} s = {:.2}×", ours / scan),
                Some(ours <= scan),
            );
        }
    }
    t
}

/// The `cnn`, `bncnn` or `rnn` table: Strata's rows, then the peers'.
pub fn cnn_table(net: Net, ours: &[Value], peers: &[Value]) -> String {
    // bncnn's step holds batch normalization too, whose FLOPs are not counted: the column
    // says that its rate is the convolutions' alone.
    let products = match net {
        Net::Cnn => "conv",
        Net::BnCnn => "conv-only",
        Net::Rnn => "matmul",
    };
    let mut s = format!(
        "| backend | batch | train size | runs | steady epoch s (min / med) | cold epoch s (epoch 1, compile incl.) \
         | compile s | ms/step (med) | {products} GFLOP/s over the step (med) | peak RSS MiB | train accuracy | × best peer (median steady) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in ours.iter().chain(peers) {
        let ratio = match (
            num(r, "ratio_to_best_peer"),
            r.get("best_peer").and_then(Value::as_str),
        ) {
            (Some(x), Some(p)) => format!("{x:.2}× ({p})"),
            _ => "—".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r["backend"].as_str().unwrap_or("?"),
            r["batch"],
            r["samples"],
            r["runs"],
            pair(r, "steady_epoch_s_min", "steady_epoch_s_median", 3),
            f(r, "cold_epoch_s", 2),
            f(r, "compile_s", 2),
            match num(r, "us_per_step_median") {
                Some(us) => format!("{:.1}", us * 1e-3),
                None => "—".into(),
            },
            f(r, "train_gflops_median", 1),
            f(r, "peak_rss_mib", 0),
            f(r, "accuracy", 3),
            ratio,
        );
    }
    s
}

/// The convolution line: each of the step's convolutions as a one-op graph on native,
/// their sum against native's median steady step of `net`, and the 1024³ GEMM beside them.
fn conv_table(net: Net, rows: &[Value], gemm_rows: &[Value], native: Option<&Value>) -> String {
    let mut s = String::from(
        "| convolution (one-op graph, native backend) | MFLOP | GFLOP/s best / median | µs/call |\n|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            r["shape"].as_str().unwrap_or("?"),
            f(r, "mflop", 1),
            pair(r, "gflops", "gflops_median", 1),
            f(r, "us_per_call", 0)
        );
    }
    let us: f64 = rows.iter().filter_map(|r| num(r, "us_per_call")).sum();
    let mflop: f64 = rows.iter().filter_map(|r| num(r, "mflop")).sum();
    if !rows.is_empty() {
        let _ = writeln!(
            s,
            "| all of the step's convolutions | {mflop:.1} | {:.1} | {us:.0} |",
            mflop / us * 1e3
        );
    }
    for g in gemm_rows {
        let _ = writeln!(
            s,
            "| GEMM {} (dot_general, native), the machine's sgemm rate | | {} | {} |",
            g["shape"].as_str().unwrap_or("?"),
            pair(g, "gflops", "gflops_median", 1),
            f(g, "us_per_call", 0)
        );
    }
    if let Some(step) = native.and_then(|r| num(r, "us_per_step_median")) {
        let norm = match net {
            Net::BnCnn => "batch normalization (forward and gradient), the ReLUs, ",
            Net::Cnn | Net::Rnn => "",
        };
        let _ = writeln!(
            s,
            "\nnative's median steady step: {:.1} ms, of which the convolutions timed alone would take \
             {:.1} ms ({:.0}%); the rest is {norm}pooling, the dense layer, dropout, the optimizer and the fit loop.",
            step * 1e-3,
            us * 1e-3,
            100.0 * us / step
        );
    }
    s
}

/// `cnn` / `bncnn` / `rnn`: Keras' simple MNIST convnet, the same with batch normalization,
/// or the LSTM on Fashion-MNIST on each backend, beside the peers of
/// `bench/peers/peers_<net>.py`, round-robin, then (the convnets) the convolution line.
pub fn cnn(o: &CnnOpts) -> Result<(), String> {
    let root = workspace();
    let started = std::time::Instant::now();
    let load_start = sys::loadavg();
    let machine = machine_line();
    let cmd = o.net.name();
    eprintln!("strata-bench {cmd}: {machine}");
    let mut skipped: Vec<String> = Vec::new();
    let mut skip = |what: String| {
        eprintln!("skip: {what}");
        skipped.push(what);
    };
    let binaries = binaries(o.baseline.as_deref())?;
    let mut devices = Vec::new();
    for b in &o.backends {
        match available(b) {
            Ok(d) => devices.push(d),
            Err(e) => skip(format!("backend {b}: {e}")),
        }
    }
    if devices.is_empty() {
        return Err("no backend to measure".into());
    }
    let peers = peers::choose(
        &o.peers,
        o.peers_python.clone(),
        o.peers_script
            .clone()
            .unwrap_or_else(|| peers::mnist_script(&root, o.net)),
        &mut skip,
    )?;
    let frameworks: &[String] = if peers.is_some() {
        &o.peer_frameworks
    } else {
        &[]
    };

    let (b, n, e) = (
        o.batch.to_string(),
        o.train_size.to_string(),
        o.epochs.to_string(),
    );
    let data = o.data.display().to_string();
    let config = [
        "--batch",
        &b,
        "--train-size",
        &n,
        "--epochs",
        &e,
        "--data",
        &data,
    ];
    let mut ours: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut theirs: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut failures: Vec<String> = Vec::new();
    for rep in 0..o.repeats {
        for (d, (exe, suffix)) in devices
            .iter()
            .flat_map(|d| binaries.iter().map(move |b| (d, b)))
        {
            let name = format!("{d}{suffix}");
            let mut args = vec![format!("{cmd}-one"), "--backend".into(), d.to_string()];
            args.extend(config.iter().map(|s| s.to_string()));
            match run_strata(exe, &args, d, o.timeout) {
                Ok(v) => {
                    eprintln!(
                        "[rep {rep}] strata {name:<9} fit {:.2}s  epochs {}  compile {:.3}s  acc {}",
                        num(&v, "fit_s").unwrap_or(f64::NAN),
                        epochs_line(&v),
                        num(&v, "compile_s").unwrap_or(f64::NAN),
                        f(&v, "accuracy", 3),
                    );
                    ours.entry(name).or_default().push(v);
                }
                Err(e) => {
                    eprintln!("[rep {rep}] strata {name} FAILED: {e}");
                    failures.push(format!("strata {name}: {e}"));
                }
            }
        }
        if let Some(p) = &peers {
            for fw in frameworks {
                match p.run(fw, &config, o.timeout) {
                    Ok(v) => {
                        eprintln!(
                            "[rep {rep}] peer   {fw:<9} fit {:.2}s  epochs {}  acc {}",
                            num(&v, "fit_s").unwrap_or(f64::NAN),
                            epochs_line(&v),
                            f(&v, "accuracy", 3),
                        );
                        theirs.entry(fw.clone()).or_default().push(v);
                    }
                    Err(e) => {
                        eprintln!("[rep {rep}] peer {fw} FAILED: {e}");
                        failures.push(format!("peer {fw}: {e}"));
                    }
                }
            }
        }
    }

    // Rows, then ratios of the median steady epochs to the best peer's.
    let flop = o.net.flop_per_example();
    let row = |name: &str, runs: &[Value]| {
        let mut r = summarize(name, o.batch, o.train_size, flop, runs);
        r["samples"] = o.train_size.into();
        r["train_gflops_median"] = num(&r, "steady_epoch_s_median")
            .map(|s| flop * o.train_size as f64 / s * 1e-9)
            .into();
        r
    };
    let mut peer_rows: Vec<Value> = theirs.iter().map(|(fw, runs)| row(fw, runs)).collect();
    peer_rows.sort_by_key(|r| peer_order(r["backend"].as_str()));
    let key = "steady_epoch_s_median";
    let best = best_peers(&peer_rows, &[o.batch], key);
    let mut rows = Vec::new();
    for (d, (_, suffix)) in devices
        .iter()
        .flat_map(|d| binaries.iter().map(move |b| (d, b)))
    {
        let name = format!("{d}{suffix}");
        if let Some(runs) = ours.get(&name) {
            let mut r = row(&name, runs);
            add_ratios(&mut r, &best, &peer_rows, key, true);
            rows.push(r);
        }
    }
    for r in &mut peer_rows {
        add_ratios(r, &best, &[], key, false);
    }

    let (conv_rows, gemm_rows) = if o.conv {
        let c = conv::run(o.batch, o.quick).map_err(|e| format!("conv: {e}"))?;
        let g = gemm::run(&[], o.quick).map_err(|e| format!("gemm: {e}"))?;
        (c, g)
    } else {
        (Vec::new(), Vec::new())
    };

    let mut out = header(&machine, started);
    out.push_str(&cnn_table(o.net, &rows, &peer_rows));
    let versus = versus_baseline(&rows);
    if !versus.is_empty() {
        out.push('\n');
        out.push_str(&versus_table(&versus));
    }
    let step_gflop = flop * o.batch as f64 * 1e-9;
    let _ = match o.net {
        Net::Cnn => writeln!(
            out,
            "\nconv GFLOP/s over the step: the step's convolution FLOPs ({step_gflop:.2} GFLOP at batch {}: both \
             forwards, conv2's input gradient, both kernel gradients, 2·MACs each) over the median steady step.\n",
            o.batch
        ),
        Net::BnCnn => writeln!(
            out,
            "\nconv-only GFLOP/s over the step: the convolutions' rate alone, their FLOPs ({step_gflop:.2} GFLOP at \
             batch {}: both forwards, conv2's input gradient, both kernel gradients, 2·MACs each; the same \
             convolutions as cnn's) over the median steady step, which also holds batch normalization \
             (not counted).\n",
            o.batch
        ),
        Net::Rnn => writeln!(
            out,
            "\nmatmul GFLOP/s over the step: the step's product FLOPs ({step_gflop:.2} GFLOP at batch {}: the \
             LSTM's input and recurrent products over 28 steps and the dense layer's, forward and both \
             gradients, 2·MACs each) over the median steady step.\n",
            o.batch
        ),
    };
    if !conv_rows.is_empty() {
        out.push_str(&conv_table(
            o.net,
            &conv_rows,
            &gemm_rows,
            rows.iter().find(|r| r["backend"] == "native"),
        ));
        out.push('\n');
    }
    for s in &skipped {
        let _ = writeln!(out, "- skipped: {s}");
    }
    for e in &failures {
        let _ = writeln!(out, "- failed: {}", e.lines().next().unwrap_or(""));
    }
    print!("{out}");

    if let Some(path) = &o.json {
        let cmdline: Vec<String> = std::env::args().skip(1).collect();
        let doc = json!({
            "command": format!("strata-bench {}", cmdline.join(" ")),
            "git_rev": crate::git_rev(),
            "machine": machine_json(load_start),
            "workload": {
                "name": cmd,
                "model": match o.net {
                    Net::Cnn => "Conv2D(32,3,relu) MaxPool(2) Conv2D(64,3,relu) MaxPool(2) Flatten Dropout(0.5) Dense(10,softmax)",
                    Net::BnCnn => "Conv2D(32,3,use_bias=false) BatchNormalization Activation(relu) MaxPool(2) \
                                   Conv2D(64,3,use_bias=false) BatchNormalization Activation(relu) MaxPool(2) \
                                   Flatten Dropout(0.5) Dense(10,softmax)",
                    Net::Rnn => "Input((28,28)) LSTM(128) Dense(10,softmax): each image's 28 rows as 28 steps",
                },
                "data": format!("{}: the first train_size training images", o.data.display()),
                "optimizer": "adam", "loss": "sparse_categorical_crossentropy",
                "batch": o.batch, "train_size": o.train_size, "epochs": o.epochs,
                "flop_per_step": flop * o.batch as f64,
            },
            "results": rows,
            "peers": peer_rows,
            "versus_baseline": versus,
            "baseline": o.baseline.as_ref().map(|b| b.display().to_string()),
            "conv": conv_rows,
            "gemm": gemm_rows,
            "skipped": skipped,
            "failures": failures,
            "runs": {
                "strata": ours.iter().map(|(b, v)| json!({"backend": b, "runs": v})).collect::<Vec<_>>(),
                "peers": theirs.iter().map(|(b, v)| json!({"framework": b, "runs": v})).collect::<Vec<_>>(),
            },
        });
        write_json(path, &doc)?;
    }
    if !failures.is_empty() && rows.is_empty() {
        return Err("every Strata run failed".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_rows_pair_with_this_builds() {
        let row = |name: &str, batch: usize, min: f64, med: f64| {
            json!({"backend": name, "batch": batch, "steady_epoch_s_min": min,
                   "steady_epoch_s_median": med, "ratio_to_best_peer": min / 0.1})
        };
        let rows = [
            row("native", 32, 0.05, 0.06),
            row("native (baseline)", 32, 0.04, 0.06),
            row("xla-cpu", 32, 0.2, 0.2),
        ];
        let v = versus_baseline(&rows);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0]["backend"], "native");
        assert!((num(&v[0], "ratio_min").unwrap() - 1.25).abs() < 1e-12);
        assert!((num(&v[0], "ratio_median").unwrap() - 1.0).abs() < 1e-12);
        assert!((num(&v[0], "baseline_to_best_peer").unwrap() - 0.4).abs() < 1e-12);
    }

    #[test]
    fn steady_epochs_skip_the_first_of_each_run() {
        let runs = [
            json!({"epoch_s": [2.0, 0.3, 0.1, 0.2], "fit_s": 2.6}),
            json!({"epoch_s": [1.0, 0.4, 0.5], "fit_s": 1.9}),
        ];
        let r = summarize("native", 32, SAMPLES, FLOP_PER_SAMPLE, &runs);
        assert_eq!(num(&r, "steady_epoch_s_min"), Some(0.1));
        assert_eq!(num(&r, "steady_epoch_s_median"), Some(0.3));
        assert_eq!(num(&r, "steady_epochs"), Some(5.0));
        assert_eq!(num(&r, "fit_s"), Some(2.25));
        // 313 steps of batch 32 make the 10,000 samples.
        let us = num(&r, "us_per_step").unwrap();
        assert!((us - 0.1 / 313.0 * 1e6).abs() < 1e-9);
    }

    #[test]
    fn the_conv_line_sums_the_steps_convolutions() {
        let rows = [
            json!({"shape": "a", "mflop": 100.0, "us_per_call": 1000.0}),
            json!({"shape": "b", "mflop": 300.0, "us_per_call": 1000.0}),
        ];
        let native = json!({"us_per_step_median": 4000.0});
        let t = conv_table(Net::Cnn, &rows, &[], Some(&native));
        // 400 MFLOP in 2 ms: 200 GFLOP/s, half of a 4 ms step.
        assert!(
            t.contains("| all of the step's convolutions | 400.0 | 200.0 | 2000 |"),
            "{t}"
        );
        assert!(t.contains("would take 2.0 ms (50%)"), "{t}");
    }

    #[test]
    fn bncnn_says_its_rate_is_the_convolutions_alone() {
        let t = cnn_table(Net::BnCnn, &[], &[]);
        assert!(
            t.contains("| conv-only GFLOP/s over the step (med) |"),
            "{t}"
        );
        assert!(cnn_table(Net::Cnn, &[], &[]).contains("| conv GFLOP/s over the step (med) |"));
        let rows = [json!({"shape": "a", "mflop": 100.0, "us_per_call": 1000.0})];
        let native = json!({"us_per_step_median": 4000.0});
        let t = conv_table(Net::BnCnn, &rows, &[], Some(&native));
        assert!(t.contains("the rest is batch normalization"), "{t}");
        assert!(!conv_table(Net::Cnn, &rows, &[], Some(&native)).contains("normalization"));
    }

    #[test]
    fn missing_fields_give_dashes_not_panics() {
        let r = summarize(
            "jax",
            1024,
            SAMPLES,
            FLOP_PER_SAMPLE,
            &[json!({"framework": "jax"})],
        );
        assert_eq!(num(&r, "steady_epoch_s_min"), None);
        assert!(table(&[], &[r]).contains("| jax | 1024 | 1 | — |"));
    }
}
