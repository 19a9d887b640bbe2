//! What the operating system says about this process and machine (Linux `/proc`), and
//! child processes run with a deadline and their peak memory.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The peak resident set size of this process so far, in MiB (`VmHWM`).
pub fn peak_rss_mib() -> Option<f64> {
    status_kib("VmHWM:").map(|kib| kib / 1024.0)
}

/// The resident set size of this process now, in MiB (`VmRSS`).
pub fn rss_mib() -> Option<f64> {
    status_kib("VmRSS:").map(|kib| kib / 1024.0)
}

/// A `/proc/self/status` line's value in KiB (`VmHWM:`, `VmRSS:`, …).
fn status_kib(key: &str) -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Minor page faults of this process so far: glibc handing freed buffers back to the OS
/// and faulting them in again shows up here (see shared/notes/performance.md).
pub fn minor_faults() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // The command name (field 2) may hold spaces; the fields after its `)` are fixed.
    s.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(7))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

pub fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Whether the CPU has AVX-512F (the `gemm` crate's fastest kernels need it).
pub fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// What a finished child process did.
pub struct Finished {
    pub ok: bool,
    /// How it ended: `exit 0`, `exit 1`, `signal 9`, `timed out after 600 s`.
    pub status: String,
    pub stdout: String,
    pub stderr: String,
    pub wall_s: f64,
    /// Peak resident set of the child (`ru_maxrss`), in MiB.
    pub max_rss_mib: f64,
}

/// Runs `cmd` to completion (killing it after `timeout`), capturing its output, timing it
/// from spawn to exit, and reading its peak memory from `wait4`.
pub fn run_child(cmd: &mut Command, timeout: Duration) -> std::io::Result<Finished> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    // Drained on their own threads so a chatty child never blocks on a full pipe.
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut s);
            }
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as _));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as _));
    let pid = child.id() as libc::pid_t;
    let mut timed_out = false;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: plain FFI on our own child's pid, with valid out-pointers. std's `wait`
        // does not report the child's rusage, which is why this reaps it directly.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break (status, usage);
        }
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if !timed_out && started.elapsed() > timeout {
            timed_out = true;
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall_s = started.elapsed().as_secs_f64();
    let (ok, status) = if timed_out {
        (false, format!("timed out after {} s", timeout.as_secs()))
    } else if libc::WIFEXITED(status) {
        let code = libc::WEXITSTATUS(status);
        (code == 0, format!("exit {code}"))
    } else if libc::WIFSIGNALED(status) {
        (false, format!("signal {}", libc::WTERMSIG(status)))
    } else {
        (false, format!("wait status {status}"))
    };
    Ok(Finished {
        ok,
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        wall_s,
        max_rss_mib: usage.ru_maxrss as f64 / 1024.0,
    })
}

/// A fresh, empty directory under the system temp dir.
pub fn fresh_dir(tag: &str) -> std::io::Result<std::path::PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir =
        std::env::temp_dir().join(format!("strata-bench-{}-{nanos}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The last `n` lines of `s`, for error messages about a failed child.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
