//! The edge that runs Debian's `perf`: a recording of every CPU around one sample, stopped
//! and read back as `perf script` text. What is recorded and how the text is read belongs to
//! the profile that uses it (`cpu`, `fuse_calls`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `perf record -a` with the caller's event arguments, running until `finish`.
pub struct Recording {
    child: Child,
    data: PathBuf,
}

impl Recording {
    /// Starts perf writing to `data` with `args` (events, filters), and waits until it has
    /// begun recording.
    pub fn start(data: &Path, args: &[String]) -> std::io::Result<Recording> {
        let _ = std::fs::remove_file(data);
        let child = Command::new("perf")
            .args(["record", "-a", "-q"])
            .args(args)
            .arg("-o")
            .arg(data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("starting perf record: {e} (Debian's linux-perf provides perf)"),
                )
            })?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::metadata(data).map_or(0, |m| m.len()) == 0 {
            if Instant::now() > deadline {
                return Err(std::io::Error::other("perf record wrote nothing in 10 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Recording {
            child,
            data: data.to_path_buf(),
        })
    }

    /// Stops perf and returns `perf script -F <fields>` of what it recorded.
    pub fn finish(mut self, fields: &str) -> std::io::Result<String> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT)
            .map_err(std::io::Error::from)?;
        let status = self.child.wait()?;
        // perf writes its data and then raises the signal it was stopped with again.
        let stopped = std::os::unix::process::ExitStatusExt::signal(&status) == Some(2);
        if !status.success() && !stopped {
            return Err(std::io::Error::other(format!("perf record: {status}")));
        }
        let out = Command::new("perf")
            .args(["script", "-F", fields, "-i"])
            .arg(&self.data)
            .output()?;
        if !out.status.success() {
            return Err(std::io::Error::other(format!(
                "perf script: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let _ = std::fs::remove_file(&self.data);
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}
