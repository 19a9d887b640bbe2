//! The peers, run in the same session as Strata so ratios compare like with like:
//! `shared/bench/peers_seed.py` for the seed workload (Keras on TensorFlow, Keras on JAX, a
//! JAX step loop, JAX `lax.scan`, optionally PyTorch) and `bench/peers/peers_cnn.py` for
//! the convnet (Keras on TensorFlow, Keras on JAX, a JAX step loop), `bench/peers/peers_bncnn.py`
//! for the batch-normalized convnet and `bench/peers/peers_rnn.py` for the LSTM (Keras on
//! TensorFlow, Keras on JAX, each), one process per
//! framework, configuration and repeat, each printing `RESULT {json}` as its last line.

use crate::sys;
use crate::workload::Net;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The peer frameworks run by default (torch is opt-in: its wheel is not in the default
/// venv).
pub const DEFAULT_FRAMEWORKS: &str = "keras-tf,keras-jax,jax,jax-scan";

/// The convnet's peers (`peers_cnn.py`).
pub const CNN_FRAMEWORKS: &str = "keras-tf,keras-jax,jax";

/// The batch-normalized convnet's peers (`peers_bncnn.py`).
pub const BNCNN_FRAMEWORKS: &str = "keras-tf,keras-jax";

/// The LSTM's peers (`peers_rnn.py`).
pub const RNN_FRAMEWORKS: &str = "keras-tf,keras-jax";

/// Where the peers' Python and script are.
pub struct Peers {
    pub python: PathBuf,
    pub script: PathBuf,
}

/// The venv `bench/peers/setup` creates.
pub fn default_python() -> PathBuf {
    let venv = std::env::var_os("STRATA_PEERS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache").join("strata-peers")
        });
    venv.join("bin").join("python")
}

/// `../shared/bench/peers_seed.py` beside the workspace.
pub fn default_script(workspace: &Path) -> PathBuf {
    workspace
        .join("..")
        .join("shared")
        .join("bench")
        .join("peers_seed.py")
}

/// `bench/peers/peers_<net>.py` in the workspace (`peers_cnn.py`, `peers_bncnn.py`,
/// `peers_rnn.py`).
pub fn mnist_script(workspace: &Path, net: Net) -> PathBuf {
    workspace
        .join("bench")
        .join("peers")
        .join(format!("peers_{}.py", net.name()))
}

/// The peers to run, by `--peers auto|none|require`: none when asked for none, and when
/// `auto` finds no script or venv (the reason goes to `skip`); an error under `require`.
pub fn choose(
    mode: &str,
    python: Option<PathBuf>,
    script: PathBuf,
    skip: &mut dyn FnMut(String),
) -> Result<Option<Peers>, String> {
    if mode == "none" {
        return Ok(None);
    }
    match Peers::find(python.unwrap_or_else(default_python), script) {
        Ok(p) => Ok(Some(p)),
        Err(e) if mode == "require" => Err(e),
        Err(e) => {
            skip(format!("peers: {e}"));
            Ok(None)
        }
    }
}

impl Peers {
    /// The peers when both the interpreter and the script exist; otherwise why not.
    pub fn find(python: PathBuf, script: PathBuf) -> Result<Peers, String> {
        if !script.is_file() {
            return Err(format!(
                "no peer script at {} (pass --peers-script PATH)",
                script.display()
            ));
        }
        if !python.is_file() {
            return Err(format!(
                "no peer venv at {} (create it with bench/peers/setup, or pass --peers-python PATH)",
                python.display()
            ));
        }
        Ok(Peers { python, script })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.python);
        c.arg(&self.script)
            .args(args)
            .env("TF_CPP_MIN_LOG_LEVEL", "2")
            .env("PYTHONUNBUFFERED", "1");
        c
    }

    /// One framework in one configuration (the script's arguments after `--framework`):
    /// its `RESULT` object, with `process_s` (spawn to exit, interpreter start-up and
    /// imports included) and `peak_rss_mib` (the whole process's, from `wait4`) added.
    pub fn run(&self, framework: &str, args: &[&str], timeout: Duration) -> Result<Value, String> {
        let mut cmd = self.command(&["--framework", framework]);
        cmd.args(args);
        let done = sys::run_child(&mut cmd, timeout)
            .map_err(|e| format!("cannot start {}: {e}", self.python.display()))?;
        let result = done
            .stdout
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("RESULT "))
            .map(serde_json::from_str::<Value>);
        match result {
            Some(Ok(mut v)) if done.ok => {
                v["process_s"] = done.wall_s.into();
                v["peak_rss_mib"] = done.max_rss_mib.into();
                Ok(v)
            }
            Some(Err(e)) => Err(format!("unparsable RESULT line: {e}")),
            _ => Err(format!(
                "{} ({}); last output:\n{}",
                done.status,
                framework,
                sys::tail(&format!("{}{}", done.stdout, done.stderr), 8)
            )),
        }
    }

    /// numpy's sgemm (OpenBLAS) through `peers_seed.py --gemm`: its best GFLOP/s.
    /// OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are cleared, as the script asks, so OpenBLAS
    /// picks its kernels for this CPU.
    pub fn sgemm_peak(&self, timeout: Duration) -> Result<Value, String> {
        let mut cmd = self.command(&["--gemm"]);
        cmd.env_remove("OPENBLAS_CORETYPE")
            .env_remove("OPENBLAS_L2_SIZE");
        let done = sys::run_child(&mut cmd, timeout).map_err(|e| e.to_string())?;
        let line = done
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("GEMM_JSON "))
            .ok_or_else(|| {
                format!(
                    "{}; last output:\n{}",
                    done.status,
                    sys::tail(&format!("{}{}", done.stdout, done.stderr), 8)
                )
            })?;
        serde_json::from_str(line).map_err(|e| e.to_string())
    }
}
