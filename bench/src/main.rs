//! `strata-bench`: the benchmark harness of the seed workload (the TPU tutorial's MLP,
//! 784-128-64-10, Adam, sparse categorical cross-entropy, 10,000 random samples, 5 epochs)
//! and of the `cnn`, `bncnn` and `rnn` workloads (Keras' simple MNIST convnet, the same
//! convnet with batch normalization, and an LSTM reading each image row by row, on
//! Fashion-MNIST) on Strata's backends, beside the Python peers in the same run.
//!
//!     cargo run --release -p strata-bench -- seed --json target/bench/seed.json
//!     cargo run --release -p strata-bench -- cnn --json target/bench/cnn.json
//!     cargo run --release -p strata-bench -- bncnn --json target/bench/bncnn.json
//!     cargo run --release -p strata-bench -- rnn --json target/bench/rnn.json
//!
//! Not a test: it asserts nothing about time. See the README's Performance section.

mod alloc;
mod conv;
mod gemm;
mod peers;
mod report;
mod soak;
mod sys;
mod workload;

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;
use strata::backend::Device;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

const USAGE: &str = "\
usage: strata-bench seed [options]     the seed workload on each backend, beside the peers
       strata-bench gemm [--batches L] [--quick]
                                       only the GEMM line
       strata-bench one --backend B --batch N [--cache-dir DIR] [--steps-per-execution K] [--epochs E]
                                       one configuration, one process (what `seed` spawns;
                                       more epochs give a profiler a longer steady state)
       strata-bench cnn [options]      the convnet on Fashion-MNIST on each backend, beside the peers
       strata-bench cnn-one --backend B [--batch N] [--train-size N] [--epochs E] [--data DIR]
                            [--cache-dir DIR]
                                       one convnet configuration, one process (what `cnn` spawns)
       strata-bench bncnn [options]    the convnet with batch normalization on Fashion-MNIST on each
                                       backend, beside the peers
       strata-bench bncnn-one --backend B [--batch N] [--train-size N] [--epochs E] [--data DIR]
                              [--cache-dir DIR]
                                       one batch-normalized convnet configuration, one process
                                       (what `bncnn` spawns)
       strata-bench rnn [options]      the LSTM on Fashion-MNIST on each backend, beside the peers
       strata-bench rnn-one --backend B [--batch N] [--train-size N] [--epochs E] [--data DIR]
                            [--cache-dir DIR]
                                       one LSTM configuration, one process (what `rnn` spawns)
       strata-bench soak [--minutes M] [--backend B] [--batch N] [--sample-seconds S]
                         [--max-growth PCT] [--json PATH]
                                       trains the tutorial model for M minutes (default 60),
                                       sampling resident memory; fails when its peak after
                                       the first minute exceeds the first minute's by more
                                       than PCT percent (default 5)

seed options:
  --json PATH                 also write the results as JSON
  --backends LIST             native,xla-cpu (default); a backend whose plugin is missing is skipped
  --batches LIST              32,1024 (default)
  --repeats N                 processes per configuration, round-robin with the peers (default 3)
  --peers auto|none|require   run ../shared/bench/peers_seed.py when its venv exists (default auto)
  --peers-script PATH         the peer script (default <workspace>/../shared/bench/peers_seed.py)
  --peers-python PATH         its interpreter (default $STRATA_PEERS_VENV or ~/.cache/strata-peers, bin/python)
  --peer-frameworks LIST      default keras-tf,keras-jax,jax,jax-scan (torch, torch-compile need torch)
  --process auto|none         time the whole `cargo run --release --example seed_tpu` process (default auto)
  --gemm auto|none            the GEMM line (default auto)
  --steps-per-execution LIST  Strata's steps per backend call, each a row (default 1,32: the
                              tutorial's 1, and 32 run as one compiled loop; rows `<backend> k=32`)
  --timeout SECONDS           per child process (default 600)
  --baseline PATH             another strata-bench binary (e.g. built from the commit before a change):
                              its runs join the round-robin as rows `<backend> (baseline)`, and the
                              report gives new / baseline ratios from the same run
  --quick                     one repeat, no peers, no process timing, a short GEMM line (a smoke test)

cnn options (Keras' simple MNIST convnet: Conv2D(32,3,relu) MaxPooling2D(2) Conv2D(64,3,relu)
MaxPooling2D(2) Flatten Dropout(0.5) Dense(10,softmax), Adam, on the first N Fashion-MNIST images):
  --json PATH                 also write the results as JSON
  --backends LIST             native,xla-cpu (default); a backend whose plugin is missing is skipped
  --batch N                   128 (default)
  --train-size N              training images, 1..=60000 (default 5000)
  --epochs E                  4 (default): the first is the cold one, the rest steady
  --repeats N                 processes per configuration, round-robin with the peers (default 2)
  --peers auto|none|require   run bench/peers/peers_cnn.py when the peer venv exists (default auto)
  --peers-script PATH         the peer script (default <workspace>/bench/peers/peers_cnn.py)
  --peers-python PATH         its interpreter (default $STRATA_PEERS_VENV or ~/.cache/strata-peers, bin/python)
  --peer-frameworks LIST      keras-tf,keras-jax,jax (default)
  --conv auto|none            the convolution line: each of the step's convolutions timed alone (default auto)
  --data DIR                  the MNIST-format data, for Strata and the peers (default /usr/share/datasets/fashion-mnist)
  --timeout SECONDS           per child process (default 600)
  --baseline PATH             another strata-bench binary, as seed's --baseline
  --quick                     one repeat, 1024 images, 2 epochs, no peers, a short convolution line

bncnn options (the convnet with each convolution's bias replaced by batch normalization:
Conv2D(32,3,use_bias=false) BatchNormalization Activation(relu) MaxPooling2D(2)
Conv2D(64,3,use_bias=false) BatchNormalization Activation(relu) MaxPooling2D(2) Flatten
Dropout(0.5) Dense(10,softmax), Adam): as cnn's, --conv included (the same convolution
shapes); the peers are bench/peers/peers_bncnn.py's keras-tf,keras-jax (default).

rnn options (examples/lstm_fashion_mnist.rs: each image read row by row, 28 steps of 28 pixels,
LSTM(128) Dense(10,softmax), Adam): as cnn's, without --conv; the peers are
bench/peers/peers_rnn.py's keras-tf,keras-jax (default).";

/// Options of `seed`.
pub struct Opts {
    pub json: Option<PathBuf>,
    pub backends: Vec<String>,
    pub batches: Vec<usize>,
    pub repeats: usize,
    pub peers: String,
    pub peers_script: Option<PathBuf>,
    pub peers_python: Option<PathBuf>,
    pub peer_frameworks: Vec<String>,
    pub process: bool,
    pub gemm: bool,
    pub steps_per_execution: Vec<usize>,
    pub timeout: Duration,
    pub quick: bool,
    pub baseline: Option<PathBuf>,
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn numbers(flag: &str, s: &str) -> Result<Vec<usize>, String> {
    let v = list(s)
        .iter()
        .map(|p| match p.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{flag}: `{p}` is not a positive integer")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if v.is_empty() {
        return Err(format!("{flag}: empty list"));
    }
    Ok(v)
}

pub(crate) fn number(flag: &str, s: &str) -> Result<usize, String> {
    Ok(numbers(flag, s)?[0])
}

fn auto_none(flag: &str, s: &str) -> Result<bool, String> {
    match s {
        "auto" => Ok(true),
        "none" => Ok(false),
        _ => Err(format!("{flag}: expected auto or none, got `{s}`")),
    }
}

/// Options of `cnn`, `bncnn` and `rnn`.
pub struct CnnOpts {
    /// Which network: a convnet or the LSTM.
    pub net: workload::Net,
    pub json: Option<PathBuf>,
    pub backends: Vec<String>,
    pub batch: usize,
    pub train_size: usize,
    pub epochs: usize,
    pub repeats: usize,
    pub peers: String,
    pub peers_script: Option<PathBuf>,
    pub peers_python: Option<PathBuf>,
    pub peer_frameworks: Vec<String>,
    pub conv: bool,
    pub timeout: Duration,
    pub quick: bool,
    /// The MNIST-format directory (Debian's Fashion-MNIST by default).
    pub data: PathBuf,
    /// Another strata-bench binary whose runs join the round-robin (see `Opts::baseline`).
    pub baseline: Option<PathBuf>,
}

fn peers_mode(value: &str) -> Result<String, String> {
    match value {
        "auto" | "none" | "require" => Ok(value.to_string()),
        _ => Err(format!(
            "--peers: expected auto, none or require, got `{value}`"
        )),
    }
}

fn train_size(flag: &str, value: &str) -> Result<usize, String> {
    match number(flag, value)? {
        n if n <= workload::MNIST_TRAIN => Ok(n),
        n => Err(format!(
            "{flag}: Fashion-MNIST has {} training images, asked for {n}",
            workload::MNIST_TRAIN
        )),
    }
}

/// The command line of `cnn`, `bncnn` or `rnn` (`net`): the same flags, but `--conv` (the
/// convolution line) is the convnets' alone, and each has its own peers.
fn parse_mnist(args: &[String], net: workload::Net) -> Result<CnnOpts, String> {
    let known = match net {
        workload::Net::Cnn => peers::CNN_FRAMEWORKS,
        workload::Net::BnCnn => peers::BNCNN_FRAMEWORKS,
        workload::Net::Rnn => peers::RNN_FRAMEWORKS,
    };
    let mut o = CnnOpts {
        net,
        json: None,
        backends: list("native,xla-cpu"),
        batch: 128,
        train_size: 5000,
        epochs: 4,
        repeats: 2,
        peers: "auto".into(),
        peers_script: None,
        peers_python: None,
        peer_frameworks: list(known),
        conv: net.convolutional(),
        timeout: Duration::from_secs(600),
        quick: false,
        data: strata::data::FASHION_MNIST_DIR.into(),
        baseline: None,
    };
    let (mut repeats, mut peers, mut size, mut epochs) = (None, None, None, None);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--quick" => {
                o.quick = true;
                continue;
            }
            "-h" | "--help" => return Err(String::new()),
            _ => {}
        }
        let mut value = || -> Result<&str, String> {
            Ok(it
                .next()
                .ok_or_else(|| format!("{flag} needs a value"))?
                .as_str())
        };
        match flag.as_str() {
            "--json" => o.json = Some(value()?.into()),
            "--backends" => {
                o.backends = list(value()?);
                if o.backends.is_empty() {
                    return Err("--backends: empty list".into());
                }
            }
            "--batch" => o.batch = number(flag, value()?)?,
            "--train-size" => size = Some(train_size(flag, value()?)?),
            "--epochs" => epochs = Some(number(flag, value()?)?),
            "--repeats" => repeats = Some(number(flag, value()?)?),
            "--peers" => peers = Some(peers_mode(value()?)?),
            "--peers-script" => o.peers_script = Some(value()?.into()),
            "--peers-python" => o.peers_python = Some(value()?.into()),
            "--peer-frameworks" => {
                o.peer_frameworks = list(value()?);
                if let Some(bad) = o.peer_frameworks.iter().find(|f| !list(known).contains(f)) {
                    return Err(format!("--peer-frameworks: `{bad}` is not one of {known}"));
                }
            }
            "--conv" if net.convolutional() => o.conv = auto_none(flag, value()?)?,
            "--data" => o.data = value()?.into(),
            "--baseline" => o.baseline = Some(value()?.into()),
            "--timeout" => o.timeout = Duration::from_secs(number(flag, value()?)? as u64),
            _ => return Err(format!("unknown option `{flag}`")),
        }
    }
    // --quick changes the defaults only; an explicit flag still wins.
    o.repeats = repeats.unwrap_or(if o.quick { 1 } else { 2 });
    o.peers = peers.unwrap_or_else(|| if o.quick { "none" } else { "auto" }.into());
    o.train_size = size.unwrap_or(if o.quick { 1024 } else { 5000 });
    o.epochs = epochs.unwrap_or(if o.quick { 2 } else { 4 });
    Ok(o)
}

fn parse_seed(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        json: None,
        backends: list("native,xla-cpu"),
        batches: vec![32, 1024],
        repeats: 3,
        peers: "auto".into(),
        peers_script: None,
        peers_python: None,
        peer_frameworks: list(peers::DEFAULT_FRAMEWORKS),
        process: true,
        gemm: true,
        steps_per_execution: vec![1, 32],
        timeout: Duration::from_secs(600),
        quick: false,
        baseline: None,
    };
    let (mut repeats, mut peers, mut process) = (None, None, None);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--quick" {
            o.quick = true;
            continue;
        }
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        const VALUED: [&str; 13] = [
            "--json",
            "--backends",
            "--batches",
            "--repeats",
            "--peers",
            "--peers-script",
            "--peers-python",
            "--peer-frameworks",
            "--process",
            "--gemm",
            "--steps-per-execution",
            "--timeout",
            "--baseline",
        ];
        if !VALUED.contains(&flag.as_str()) {
            return Err(format!("unknown option `{flag}`"));
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?
            .as_str();
        match flag.as_str() {
            "--json" => o.json = Some(value.into()),
            "--backends" => o.backends = list(value),
            "--batches" => o.batches = numbers(flag, value)?,
            "--repeats" => repeats = Some(number(flag, value)?),
            "--peers" => peers = Some(peers_mode(value)?),
            "--peers-script" => o.peers_script = Some(value.into()),
            "--peers-python" => o.peers_python = Some(value.into()),
            "--peer-frameworks" => o.peer_frameworks = list(value),
            "--process" => process = Some(auto_none(flag, value)?),
            "--gemm" => o.gemm = auto_none(flag, value)?,
            "--steps-per-execution" => o.steps_per_execution = numbers(flag, value)?,
            "--timeout" => o.timeout = Duration::from_secs(number(flag, value)? as u64),
            "--baseline" => o.baseline = Some(value.into()),
            _ => return Err(format!("unknown option `{flag}`")),
        }
    }
    // --quick changes the defaults only; an explicit flag still wins.
    o.repeats = repeats.unwrap_or(if o.quick { 1 } else { 3 });
    o.peers = peers.unwrap_or_else(|| if o.quick { "none" } else { "auto" }.into());
    o.process = process.unwrap_or(!o.quick);
    Ok(o)
}

/// The command line of `one` (the seed workload, `net` none; `--batch` required) or
/// `cnn-one` / `bncnn-one` / `rnn-one` (a network on Fashion-MNIST; batch 128, 5000 images and 4 epochs
/// unless given).
fn parse_one(args: &[String], net: Option<workload::Net>) -> Result<workload::Config, String> {
    let cnn = net.is_some();
    let (mut backend, mut batch, mut cache_dir, mut spe) = (None, None, None, 1);
    let mut epochs = if cnn { 4 } else { workload::EPOCHS };
    let mut size = 5000;
    let mut data = PathBuf::from(strata::data::FASHION_MNIST_DIR);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--backend" => backend = Some(value.clone()),
            "--batch" => batch = Some(number(flag, value)?),
            "--cache-dir" => cache_dir = Some(PathBuf::from(value)),
            "--steps-per-execution" => spe = number(flag, value)?,
            "--epochs" => epochs = number(flag, value)?,
            "--train-size" if cnn => size = train_size(flag, value)?,
            "--data" if cnn => data = PathBuf::from(value),
            _ => return Err(format!("unknown option `{flag}`")),
        }
    }
    let device: Device = backend
        .ok_or("--backend is required")?
        .parse()
        .map_err(|e| format!("{e}"))?;
    let batch = match (batch, cnn) {
        (Some(b), _) => b,
        (None, true) => 128,
        (None, false) => return Err("--batch is required".into()),
    };
    Ok(workload::Config {
        device,
        batch,
        cache_dir,
        steps_per_execution: spe,
        epochs,
        workload: match net {
            Some(net) => workload::Workload::Mnist {
                net,
                train_size: size,
                data,
            },
            None => workload::Workload::Seed,
        },
    })
}

/// `one` / `cnn-one` / `bncnn-one` / `rnn-one`: measure one configuration in this process and print `RESULT {json}`.
fn one(cfg: &workload::Config) -> Result<(), String> {
    let v = workload::run(cfg).map_err(|e| format!("{e}"))?;
    println!("RESULT {v}");
    Ok(())
}

fn gemm_only(args: &[String]) -> Result<(), String> {
    let mut batches = vec![32, 1024];
    let mut quick = false;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--quick" => quick = true,
            "--batches" => {
                batches = numbers(flag, it.next().ok_or("--batches needs a value")?)?;
            }
            _ => return Err(format!("unknown option `{flag}`")),
        }
    }
    let rows = gemm::run(&batches, quick).map_err(|e| e.to_string())?;
    println!("{}", report::gemm_table(&rows, None));
    Ok(())
}

/// The workspace root (where `cargo run --example seed_tpu` runs).
pub fn workspace() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    dir.canonicalize().unwrap_or(dir)
}

/// The short commit hash of the workspace, for the record.
pub fn git_rev() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(workspace())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The network of a `cnn*`, `bncnn*` or `rnn*` command.
fn net_of(cmd: &str) -> workload::Net {
    if cmd.starts_with("rnn") {
        workload::Net::Rnn
    } else if cmd.starts_with("bncnn") {
        workload::Net::BnCnn
    } else {
        workload::Net::Cnn
    }
}

/// Why the program stopped: a mistake on the command line (answered with the usage) or
/// a failure while measuring (answered with the error alone).
enum Stop {
    Usage(String),
    Failed(String),
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or(&[]);
    let result = match args.first().map(String::as_str) {
        Some("seed") => parse_seed(rest)
            .map_err(Stop::Usage)
            .and_then(|o| report::seed(&o).map_err(Stop::Failed)),
        Some("one") => parse_one(rest, None)
            .map_err(Stop::Usage)
            .and_then(|c| one(&c).map_err(Stop::Failed)),
        Some(cmd @ ("cnn" | "bncnn" | "rnn")) => parse_mnist(rest, net_of(cmd))
            .map_err(Stop::Usage)
            .and_then(|o| report::cnn(&o).map_err(Stop::Failed)),
        Some(cmd @ ("cnn-one" | "bncnn-one" | "rnn-one")) => parse_one(rest, Some(net_of(cmd)))
            .map_err(Stop::Usage)
            .and_then(|c| one(&c).map_err(Stop::Failed)),
        Some("gemm") => gemm_only(rest).map_err(Stop::Failed),
        Some("soak") => soak::parse(rest)
            .map_err(Stop::Usage)
            .and_then(|o| match soak::run(&o) {
                Ok(true) => Ok(()),
                Ok(false) => Err(Stop::Failed("memory grew past the limit".into())),
                Err(e) => Err(Stop::Failed(e)),
            }),
        Some("-h") | Some("--help") => Err(Stop::Usage(String::new())),
        None => Err(Stop::Usage("which command?".into())),
        Some(other) => Err(Stop::Usage(format!("unknown command `{other}`"))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Stop::Usage(e)) if e.is_empty() => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Err(Stop::Usage(e)) => {
            eprintln!("strata-bench: {e}\n\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Stop::Failed(e)) => {
            eprintln!("strata-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use workload::Net;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn seed_defaults_are_the_issues() {
        let o = parse_seed(&[]).unwrap();
        assert_eq!(o.backends, ["native", "xla-cpu"]);
        assert_eq!(o.batches, [32, 1024]);
        assert_eq!((o.repeats, o.peers.as_str(), o.process), (3, "auto", true));
        assert_eq!(o.steps_per_execution, [1, 32]);
        let o = parse_seed(&args("--steps-per-execution 8")).unwrap();
        assert_eq!(o.steps_per_execution, [8]);
    }

    #[test]
    fn quick_changes_defaults_but_explicit_flags_win() {
        let o = parse_seed(&args("--quick")).unwrap();
        assert_eq!((o.repeats, o.peers.as_str(), o.process), (1, "none", false));
        let o = parse_seed(&args("--quick --repeats 2 --peers auto")).unwrap();
        assert_eq!((o.repeats, o.peers.as_str()), (2, "auto"));
    }

    #[test]
    fn bad_command_lines_are_errors_not_panics() {
        for bad in [
            "--bogus",
            "--batches 0",
            "--batches x",
            "--repeats",
            "--peers sometimes",
            "--gemm yes",
            "--baseline",
            "--steps-per-execution 0",
            "--steps-per-execution 1,x",
        ] {
            assert!(parse_seed(&args(bad)).is_err(), "{bad}");
        }
        let o = parse_seed(&args("--baseline /tmp/old-bench")).unwrap();
        assert_eq!(
            o.baseline.as_deref(),
            Some(std::path::Path::new("/tmp/old-bench"))
        );
    }

    #[test]
    fn cnn_defaults_are_the_issues() {
        let o = parse_mnist(&[], Net::Cnn).unwrap();
        assert_eq!(o.backends, ["native", "xla-cpu"]);
        assert_eq!(
            (o.batch, o.train_size, o.epochs, o.repeats),
            (128, 5000, 4, 2)
        );
        assert_eq!(o.peers, "auto");
        assert_eq!(o.peer_frameworks, ["keras-tf", "keras-jax", "jax"]);
        assert!(o.conv && !o.quick);
    }

    #[test]
    fn cnn_quick_changes_defaults_but_explicit_flags_win() {
        let o = parse_mnist(&args("--quick"), Net::Cnn).unwrap();
        assert_eq!((o.repeats, o.peers.as_str()), (1, "none"));
        assert_eq!((o.train_size, o.epochs), (1024, 2));
        let o = parse_mnist(
            &args("--train-size 512 --quick --epochs 3 --peers require --peer-frameworks jax"),
            Net::Cnn,
        )
        .unwrap();
        assert_eq!(
            (o.train_size, o.epochs, o.peers.as_str()),
            (512, 3, "require")
        );
        assert_eq!(o.peer_frameworks, ["jax"]);
        let o = parse_mnist(
            &args("--train-size 60000 --backends xla-cpu --conv none"),
            Net::Cnn,
        )
        .unwrap();
        assert_eq!((o.train_size, o.backends.len(), o.conv), (60000, 1, false));
        let o = parse_mnist(&args("--data /tmp/fmnist"), Net::Cnn).unwrap();
        assert_eq!(o.data, std::path::Path::new("/tmp/fmnist"));
    }

    #[test]
    fn bad_cnn_command_lines_are_errors_not_panics() {
        for bad in [
            "--bogus",
            "--batch 0",
            "--batch",
            "--train-size 60001",
            "--train-size -5",
            "--epochs x",
            "--repeats 0",
            "--peers maybe",
            "--peer-frameworks torch",
            "--conv yes",
            "--backends ,",
            "--json",
        ] {
            assert!(parse_mnist(&args(bad), Net::Cnn).is_err(), "{bad}");
        }
    }

    #[test]
    fn one_and_cnn_one_parse_their_own_flags() {
        let c = parse_one(&args("--backend native --train-size 512"), Some(Net::Cnn)).unwrap();
        assert_eq!(
            c.workload,
            workload::Workload::Mnist {
                net: Net::Cnn,
                train_size: 512,
                data: strata::data::FASHION_MNIST_DIR.into()
            }
        );
        assert_eq!((c.batch, c.epochs), (128, 4));
        let c = parse_one(&args("--backend native --batch 32"), None).unwrap();
        assert_eq!((c.workload, c.epochs), (workload::Workload::Seed, 5));
        for (bad, net) in [
            ("--backend native --train-size 512", None),
            ("--backend native --data /tmp", None),
            ("--backend native", None),
            ("--batch 32", Some(Net::Cnn)),
            ("--backend gpu9", Some(Net::Cnn)),
            ("--backend native --train-size 0", Some(Net::Cnn)),
            ("--backend", Some(Net::Cnn)),
            ("--backend native --train-size 60001", Some(Net::Rnn)),
            ("--backend native --conv none", Some(Net::Rnn)),
        ] {
            assert!(parse_one(&args(bad), net).is_err(), "{bad}");
        }
        let c = parse_one(
            &args("--backend xla-cpu --train-size 10000 --epochs 3"),
            Some(Net::Rnn),
        )
        .unwrap();
        assert_eq!(
            c.workload,
            workload::Workload::Mnist {
                net: Net::Rnn,
                train_size: 10000,
                data: strata::data::FASHION_MNIST_DIR.into()
            }
        );
        assert_eq!(
            (c.device.to_string(), c.batch, c.epochs),
            ("xla-cpu".into(), 128, 3)
        );
    }

    #[test]
    fn bncnn_defaults_are_the_issues() {
        let o = parse_mnist(&[], Net::BnCnn).unwrap();
        assert_eq!(o.net, Net::BnCnn);
        assert_eq!(o.backends, ["native", "xla-cpu"]);
        assert_eq!(
            (o.batch, o.train_size, o.epochs, o.repeats),
            (128, 5000, 4, 2)
        );
        assert_eq!(o.peers, "auto");
        assert_eq!(o.peer_frameworks, ["keras-tf", "keras-jax"]);
        assert!(
            o.conv && !o.quick,
            "the same convolutions as cnn's: the line applies"
        );
        let o = parse_mnist(&args("--quick"), Net::BnCnn).unwrap();
        assert_eq!((o.repeats, o.peers.as_str()), (1, "none"));
        assert_eq!((o.train_size, o.epochs), (1024, 2));
        let o = parse_mnist(
            &args("--train-size 10000 --quick --repeats 3 --peer-frameworks keras-jax --conv none"),
            Net::BnCnn,
        )
        .unwrap();
        assert_eq!((o.train_size, o.epochs, o.repeats), (10000, 2, 3));
        assert_eq!(o.peer_frameworks, ["keras-jax"]);
        assert!(!o.conv);
        let o = parse_mnist(&args("--baseline target/old-bench"), Net::BnCnn).unwrap();
        assert_eq!(
            o.baseline.as_deref(),
            Some(std::path::Path::new("target/old-bench"))
        );
    }

    #[test]
    fn bad_bncnn_command_lines_are_errors_not_panics() {
        for bad in [
            "--conv yes",
            "--peer-frameworks jax",
            "--train-size 0",
            "--train-size 60001",
            "--batch",
            "--epochs 0",
            "--baseline",
            "--bogus",
        ] {
            assert!(parse_mnist(&args(bad), Net::BnCnn).is_err(), "{bad}");
        }
    }

    #[test]
    fn bncnn_one_parses_cnn_ones_flags() {
        let c = parse_one(
            &args("--backend xla-cpu --train-size 2048 --epochs 3"),
            Some(Net::BnCnn),
        )
        .unwrap();
        assert_eq!(
            c.workload,
            workload::Workload::Mnist {
                net: Net::BnCnn,
                train_size: 2048,
                data: strata::data::FASHION_MNIST_DIR.into()
            }
        );
        assert_eq!(
            (c.device.to_string(), c.batch, c.epochs),
            ("xla-cpu".into(), 128, 3)
        );
        for bad in [
            "--backend native --train-size 60001",
            "--backend native --conv none",
            "--batch 32",
            "--backend",
        ] {
            assert!(parse_one(&args(bad), Some(Net::BnCnn)).is_err(), "{bad}");
        }
    }

    #[test]
    fn commands_name_their_network() {
        for (cmd, net) in [
            ("cnn", Net::Cnn),
            ("cnn-one", Net::Cnn),
            ("bncnn", Net::BnCnn),
            ("bncnn-one", Net::BnCnn),
            ("rnn", Net::Rnn),
            ("rnn-one", Net::Rnn),
        ] {
            assert_eq!(net_of(cmd), net, "{cmd}");
            if !cmd.ends_with("-one") {
                assert_eq!(net.name(), cmd, "the JSON's workload is the command's name");
            }
        }
    }

    #[test]
    fn rnn_defaults_are_the_issues() {
        let o = parse_mnist(&[], Net::Rnn).unwrap();
        assert_eq!(o.net, Net::Rnn);
        assert_eq!(o.backends, ["native", "xla-cpu"]);
        assert_eq!(
            (o.batch, o.train_size, o.epochs, o.repeats),
            (128, 5000, 4, 2)
        );
        assert_eq!(o.peers, "auto");
        assert_eq!(o.peer_frameworks, ["keras-tf", "keras-jax"]);
        assert!(!o.conv && !o.quick, "no convolution line for the LSTM");
        let o = parse_mnist(&args("--quick"), Net::Rnn).unwrap();
        assert_eq!((o.repeats, o.peers.as_str()), (1, "none"));
        assert_eq!((o.train_size, o.epochs), (1024, 2));
        let o = parse_mnist(
            &args("--train-size 10000 --quick --repeats 3 --peer-frameworks keras-jax"),
            Net::Rnn,
        )
        .unwrap();
        assert_eq!((o.train_size, o.epochs, o.repeats), (10000, 2, 3));
        assert_eq!(o.peer_frameworks, ["keras-jax"]);
        let o = parse_mnist(&args("--baseline target/old-bench"), Net::Rnn).unwrap();
        assert_eq!(
            o.baseline.as_deref(),
            Some(std::path::Path::new("target/old-bench"))
        );
    }

    #[test]
    fn bad_rnn_command_lines_are_errors_not_panics() {
        for bad in [
            "--conv none",
            "--conv auto",
            "--peer-frameworks jax",
            "--train-size 0",
            "--train-size 60001",
            "--batch",
            "--epochs 0",
            "--baseline",
            "--bogus",
        ] {
            assert!(parse_mnist(&args(bad), Net::Rnn).is_err(), "{bad}");
        }
    }
}
