//! Crash-safe resume: a fit with `BackupAndRestore` killed with SIGKILL at several moments
//! (inside an epoch, as a backup is written) and started again with the same call ends with
//! the weights of a run never interrupted, bit for bit; the next save removes a dead
//! writer's temporary file; the learning rate a callback set and the step count come back
//! from a checkpoint; a checkpoint path naming a directory is a typed error that says so.
//!
//! The killed runs are this test binary run again as a child (`resume_child`, selected by
//! an environment variable), so the kill is real: nothing of the child runs after it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::optim::Adam;
use strata::train::{BackupAndRestore, Callback, Control, Fit, LearningRateScheduler, Logs};
use strata::{model, random, Error};

/// Set in a child: the directory it trains in.
const CHILD: &str = "STRATA_RESUME_TEST_CHILD";
const EPOCHS: usize = 6;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("strata-resume-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Tells the parent where the child is (one line per event, read as it comes), and slows
/// the batches down so that a kill can land inside an epoch.
struct Report {
    /// Placed after `BackupAndRestore`, so it reports a backup done instead of one starting.
    after_backup: bool,
    epoch: usize,
}

impl Callback for Report {
    fn on_epoch_begin(&mut self, epoch: usize, _c: &mut Control<'_>) -> strata::Result<()> {
        self.epoch = epoch;
        if !self.after_backup {
            println!("@@ begin {epoch}");
        }
        Ok(())
    }
    fn on_batch_end(&mut self, step: usize, _l: &Logs, _c: &mut Control<'_>) -> strata::Result<()> {
        if !self.after_backup {
            println!("@@ batch {}.{step}", self.epoch);
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }
    fn on_epoch_end(
        &mut self,
        epoch: usize,
        _l: &Logs,
        _c: &mut Control<'_>,
    ) -> strata::Result<()> {
        let what = if self.after_backup { "saved" } else { "save" };
        println!("@@ {what} {epoch}");
        Ok(())
    }
}

/// The child's whole program: the same `fit` call every time, with dropout (the random key
/// matters), Adam (slots and step count matter), shuffling (the epoch matters) and a
/// learning rate a callback lowers each epoch (the restored rate matters).
fn train(dir: &Path) -> strata::Result<()> {
    let x = random::normal(&[192, 8], 0.0, 1.0, 3)?;
    let y = random::uniform_int(&[192], 0, 3, 4)?;
    let mut m = model![
        Input(8),
        Dense(96, relu),
        Dropout(0.25),
        Dense(96, relu),
        Dense(3, softmax)
    ]
    .with_seed(7)?;
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )?;
    let fit = Fit::epochs(EPOCHS)
        .batch_size(16)
        .seed(11)
        .verbose(0)
        .callback(LearningRateScheduler::new(|e, lr| {
            if e == 0 {
                lr
            } else {
                lr * 0.8
            }
        }))
        .callback(Report {
            after_backup: false,
            epoch: 0,
        })
        .callback(BackupAndRestore::new(dir.join("backup")))
        .callback(Report {
            after_backup: true,
            epoch: 0,
        });
    m.fit(&x, &y, fit)?;
    let mut bytes = Vec::new();
    for (_, w) in m.weights() {
        for v in w.to_vec::<f32>()? {
            bytes.extend_from_slice(&v.to_bits().to_le_bytes());
        }
    }
    std::fs::write(dir.join("weights.part"), &bytes).unwrap();
    std::fs::rename(dir.join("weights.part"), dir.join("weights.bin")).unwrap();
    println!("@@ done");
    Ok(())
}

/// The child's entry: does nothing in an ordinary test run.
#[test]
fn resume_child() {
    if let Ok(dir) = std::env::var(CHILD) {
        train(Path::new(&dir)).unwrap();
    }
}

fn spawn(dir: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "resume_child", "--nocapture", "--test-threads=1"])
        .env(CHILD, dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// When to kill a child once it reported the event.
#[derive(Clone, Copy)]
enum Kill {
    /// This long after.
    After(Duration),
    /// As soon as its backup's temporary file is there (the write under way), or after a
    /// few milliseconds if the write is too quick to be seen.
    MidWrite,
}

fn wait(dir: &Path, kill: Kill) {
    match kill {
        Kill::After(d) => std::thread::sleep(d),
        Kill::MidWrite => {
            let backup = dir.join("backup");
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_millis(5) {
                let seen = std::fs::read_dir(&backup).into_iter().flatten().flatten();
                if seen
                    .into_iter()
                    .any(|e| e.file_name().to_string_lossy().contains(".tmp-"))
                {
                    return;
                }
            }
        }
    }
}

/// Runs a child until it prints `until` (then kills it with SIGKILL at the moment `Kill`
/// says), or to its end when `until` is `None`. Returns the events it reported.
fn run(dir: &Path, until: Option<(&str, Kill)>) -> Vec<String> {
    let mut child = spawn(dir);
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut events = Vec::new();
    for line in out.lines() {
        let line = line.unwrap();
        let Some(i) = line.find("@@ ") else { continue };
        let event = line[i + 3..].to_string();
        let hit = until.is_some_and(|(u, _)| u == event);
        events.push(event);
        if hit {
            wait(dir, until.unwrap().1);
            child.kill().unwrap();
            break;
        }
    }
    let status = child.wait().unwrap();
    match until {
        Some((u, _)) => assert!(
            !status.success() && events.last().map(String::as_str) == Some(u),
            "the child ended before `{u}`: {events:?}"
        ),
        None => assert!(status.success(), "the child failed: {events:?}"),
    }
    events
}

/// The epoch a run started at, and the last epoch whose backup it reported done.
fn started(events: &[String]) -> usize {
    let first = events.iter().find_map(|e| e.strip_prefix("begin "));
    first.expect("the child began no epoch").parse().unwrap()
}

fn last_saved(events: &[String]) -> Option<usize> {
    events
        .iter()
        .rev()
        .find_map(|e| e.strip_prefix("saved "))
        .map(|e| e.parse().unwrap())
}

#[test]
fn a_fit_killed_at_any_moment_resumes_and_ends_with_the_uninterrupted_weights() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    let straight = scratch("straight");
    run(&straight, None);
    let reference = std::fs::read(straight.join("weights.bin")).unwrap();

    let killed = scratch("killed");
    let backup = killed.join("backup");
    let now = Kill::After(Duration::ZERO);
    // Inside epoch 1 (after epoch 0's backup), as epoch 2's backup starts, during epoch 3's
    // write, at the start of epoch 4, and just after its backup.
    let kills = [
        ("batch 1.5", now),
        ("save 2", now),
        ("save 3", Kill::MidWrite),
        ("begin 4", now),
        ("saved 4", now),
    ];
    let mut done_before = 0; // epochs whose backup a killed run reported done
    let mut leftovers = 0;
    for (i, &(at, kill)) in kills.iter().enumerate() {
        let events = run(&killed, Some((at, kill)));
        let start = started(&events);
        if i == 0 {
            assert_eq!(start, 0, "{events:?}");
        } else {
            // Every reported backup is restored; one being written when the kill came
            // may or may not have made it, never half.
            assert!(
                start >= done_before,
                "resumed at {start}, after {done_before}: {events:?}"
            );
        }
        done_before = last_saved(&events).map_or(start, |e| e + 1);
        leftovers += names(&backup)
            .iter()
            .filter(|n| n.contains(".tmp-"))
            .count();
    }
    // A writer dead mid-write, for certain: its temporary file must not outlive the next save.
    std::fs::write(backup.join(".latest.ckpt.tmp-4000000-0"), vec![0u8; 4096]).unwrap();
    let events = run(&killed, None);
    assert!(started(&events) >= done_before, "{events:?}");
    assert_eq!(events.last().map(String::as_str), Some("done"));
    let resumed = std::fs::read(killed.join("weights.bin")).unwrap();
    let differing = resumed
        .chunks(4)
        .zip(reference.chunks(4))
        .filter(|(a, b)| a != b)
        .count();
    assert!(
        resumed.len() == reference.len() && differing == 0,
        "the resumed run's weights differ from the uninterrupted run's in {differing} of {} values",
        reference.len() / 4
    );
    // The completed fit deleted its backup, and no temporary file is left.
    assert!(names(&backup).is_empty(), "{:?}", names(&backup));
    eprintln!("temporary files left by the kills (then removed): {leftovers}");
    let _ = std::fs::remove_dir_all(&straight);
    let _ = std::fs::remove_dir_all(&killed);
}

fn small() -> strata::Model<impl strata::nn::Architecture> {
    let mut m = model![Input(4), Dense(8, relu), Dense(2, softmax)]
        .with_seed(1)
        .unwrap();
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    m
}

fn small_data() -> (ndarray::ArrayD<f32>, ndarray::ArrayD<i32>) {
    (
        random::normal(&[40, 4], 0.0, 1.0, 5).unwrap(),
        random::uniform_int(&[40], 0, 2, 6).unwrap(),
    )
}

/// Records the learning rate `fit` starts with.
struct Probe(Arc<Mutex<Option<f32>>>);

impl Callback for Probe {
    fn on_train_begin(&mut self, c: &mut Control<'_>) -> strata::Result<()> {
        *self.0.lock().unwrap() = c.learning_rate();
        Ok(())
    }
}

#[test]
fn a_learning_rate_set_by_a_callback_and_the_step_count_come_back_from_a_checkpoint() {
    let d = scratch("lr");
    let path = d.join("m.ckpt");
    let (x, y) = small_data();
    let mut a = small();
    let fit = Fit::epochs(2)
        .batch_size(8)
        .verbose(0)
        .callback(LearningRateScheduler::new(|_, _| 0.0123));
    a.fit(&x, &y, fit).unwrap();
    a.save_checkpoint_at(&path, 2).unwrap();

    let mut b = small();
    let info = b.load_checkpoint(&path).unwrap();
    assert_eq!(info.learning_rate, Some(0.0123));
    assert_eq!(info.iterations, 10);
    assert_eq!(b.iterations(), 10);
    let seen = Arc::new(Mutex::new(None));
    let fit = Fit::epochs(3)
        .initial_epoch(info.epoch)
        .batch_size(8)
        .verbose(0)
        .callback(Probe(seen.clone()));
    b.fit(&x, &y, fit).unwrap();
    assert_eq!(*seen.lock().unwrap(), Some(0.0123));
    assert_eq!(b.iterations(), 15);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_next_save_removes_a_dead_writers_temp_file_and_keeps_a_live_writers() {
    let d = scratch("stale");
    let path = d.join("m.ckpt");
    let dead = d.join(".m.ckpt.tmp-4000000-0");
    std::fs::write(&dead, vec![0u8; 1 << 16]).unwrap();
    // A writer still at work holds a lock on its temporary file.
    let live = d.join(".m.ckpt.tmp-4000000-1");
    let held = std::fs::File::create(&live).unwrap();
    held.lock().unwrap();
    let mut m = small();
    m.save_checkpoint(&path).unwrap();
    assert_eq!(names(&d), [".m.ckpt.tmp-4000000-1", "m.ckpt"]);
    drop(held);
    m.save_checkpoint(&path).unwrap();
    assert_eq!(names(&d), ["m.ckpt"]);
    m.load_checkpoint(&path).unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_checkpoint_path_naming_a_directory_is_refused_with_what_to_give() {
    let d = scratch("dir");
    let mut m = small();
    let slash = format!("{}/", d.join("out").display());
    for (what, path, r) in [
        (
            "save_checkpoint",
            slash.clone(),
            m.save_checkpoint(&slash).err(),
        ),
        (
            "save_checkpoint",
            d.display().to_string(),
            m.save_checkpoint_at(&d, 3).err(),
        ),
        (
            "load_checkpoint",
            slash.clone(),
            m.load_checkpoint(&slash).err(),
        ),
        (
            "load_checkpoint",
            d.display().to_string(),
            m.load_checkpoint(&d).err(),
        ),
    ] {
        match r {
            Some(e @ Error::InvalidArgument { .. }) => {
                let text = e.to_string();
                assert!(
                    text.starts_with(&format!("{what}: `{path}` names a directory")),
                    "{text}"
                );
                assert!(text.contains("model.ckpt"), "{text}");
            }
            other => panic!("{what}({path}): {other:?}"),
        }
    }
    // Nothing was written beside it.
    assert!(names(&d).is_empty(), "{:?}", names(&d));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn backup_and_restore_options_and_bad_arguments() {
    use strata::train::SaveFreq;
    let d = scratch("options");
    let (x, y) = small_data();
    let fit = |epochs: usize, b: BackupAndRestore| {
        let mut m = small();
        m.fit(
            &x,
            &y,
            Fit::epochs(epochs).batch_size(8).verbose(0).callback(b),
        )
    };
    // A backup every second epoch, kept: a second run resumes after epoch 2 of 3.
    let every_2 = || {
        BackupAndRestore::new(d.join("every2"))
            .save_freq(SaveFreq::Epochs(2))
            .delete_checkpoint(false)
    };
    assert_eq!(fit(3, every_2()).unwrap().epochs, [0, 1, 2]);
    assert_eq!(fit(3, every_2()).unwrap().epochs, [2]);

    // With double_checkpoint, a latest backup that cannot be read falls back on the one
    // before; without, it is an error (not a silent restart from scratch).
    let double = || {
        BackupAndRestore::new(d.join("double"))
            .double_checkpoint(true)
            .delete_checkpoint(false)
    };
    fit(3, double()).unwrap();
    std::fs::write(double().latest(), b"not a checkpoint").unwrap();
    assert_eq!(fit(4, double()).unwrap().epochs, [2, 3]);
    std::fs::write(double().latest(), b"not a checkpoint").unwrap();
    let single = BackupAndRestore::new(d.join("double"));
    match fit(4, single) {
        Err(Error::Checkpoint { path, .. }) => assert!(path.ends_with("latest.ckpt"), "{path}"),
        other => panic!("{other:?}"),
    }

    // Bad arguments.
    let file = d.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let e = fit(1, BackupAndRestore::new(&file))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("BackupAndRestore: backup_dir `") && e.contains("is a file"),
        "{e}"
    );
    let e = fit(
        1,
        BackupAndRestore::new(d.join("z")).save_freq(SaveFreq::Epochs(0)),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("BackupAndRestore: save_freq must be at least 1"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
