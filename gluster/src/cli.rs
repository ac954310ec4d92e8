use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::layout::{create_args, validate_host};
use crate::xml::{parse_peer_status, parse_verdict, parse_volume_info};
use crate::Brick;
use crate::{GlusterError, Peer, Volume, VolumeLayout};

/// What a finished command printed.
#[derive(Debug, Clone, Default)]
pub struct CommandOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the gluster CLI. The edge where this crate touches the machine, so that the
/// operations above it can be tested with canned answers.
pub trait CommandRunner: Send + Sync {
    fn run(
        &self,
        args: &[String],
    ) -> impl std::future::Future<Output = Result<CommandOutput, GlusterError>> + Send;
}

/// Runs the real `gluster` binary with a deadline, so a dead peer cannot hang a caller.
#[derive(Debug, Clone)]
pub struct ProcessRunner {
    /// The command and any fixed leading arguments, for example `["gluster"]`.
    pub program: Vec<String>,
    /// glusterd's unix socket, when it is not at the default path.
    pub glusterd_socket: Option<PathBuf>,
    pub timeout: Duration,
}

impl Default for ProcessRunner {
    fn default() -> Self {
        Self {
            program: vec!["gluster".into()],
            glusterd_socket: None,
            timeout: Duration::from_secs(120),
        }
    }
}

impl CommandRunner for ProcessRunner {
    async fn run(&self, args: &[String]) -> Result<CommandOutput, GlusterError> {
        let (program, fixed) = self
            .program
            .split_first()
            .ok_or_else(|| GlusterError::invalid("program", "is empty"))?;
        let mut cmd = Command::new(program);
        cmd.args(fixed);
        if let Some(sock) = &self.glusterd_socket {
            cmd.arg(format!("--glusterd-sock={}", sock.display()));
        }
        cmd.args(["--mode=script", "--xml"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(|source| GlusterError::Spawn {
            program: program.clone(),
            source,
        })?;
        let out = tokio::time::timeout(self.timeout, child.wait_with_output())
            .await
            .map_err(|_| GlusterError::Timeout {
                command: args.join(" "),
                timeout: self.timeout,
            })?
            .map_err(|source| GlusterError::Spawn {
                program: program.clone(),
                source,
            })?;
        Ok(CommandOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// Whether `stdout` is one of gluster's XML answers.
fn is_xml(stdout: &str) -> bool {
    stdout.trim_start().starts_with("<?xml") || stdout.contains("<cliOutput>")
}

/// A plain-text answer (gluster could not be reached, or a command that answers in text
/// failed) as a command error carrying gluster's words.
pub(crate) fn plain_text_error(command: &str, out: &CommandOutput) -> GlusterError {
    let text = [out.stdout.trim(), out.stderr.trim()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("; ");
    GlusterError::Command {
        command: command.to_string(),
        ret: -1,
        errno: 0,
        message: if text.is_empty() {
            "gluster printed nothing".into()
        } else {
            text
        },
    }
}

/// Turns gluster's refusal with exactly `message`, which means the wanted state is already
/// there, into success.
pub(crate) fn already_done(
    result: Result<(), GlusterError>,
    message: &str,
) -> Result<(), GlusterError> {
    match result {
        Err(GlusterError::Command { message: m, .. }) if m == message => Ok(()),
        other => other,
    }
}

/// How glusterd's refusals begin when another transaction holds the lock it needs.
const LOCK_REFUSALS: [&str; 2] = ["Another transaction is in progress", "Locking failed on "];
/// How glusterd's refusals that mean "try again shortly" begin.
const TRANSIENT_REFUSALS: [&str; 3] = [
    LOCK_REFUSALS[0],
    LOCK_REFUSALS[1],
    "Failed to start aux mount",
];
/// Whether gluster's refusal `message` means "not now" (another transaction holds the
/// volume's lock, say): the same command may pass shortly.
pub fn is_busy(message: &str) -> bool {
    TRANSIENT_REFUSALS.iter().any(|m| message.starts_with(m))
}

/// Whether `text` (an error that may wrap gluster's refusal in words of its own) says
/// another glusterd transaction held the lock the command needed.
pub fn mentions_lock_contention(text: &str) -> bool {
    LOCK_REFUSALS.iter().any(|m| text.contains(m))
}

/// Tries of a command glusterd refuses for now; the pauses between them add up to 7.75 s.
pub(crate) const TRANSIENT_ATTEMPTS: u32 = 6;

/// Typed gluster operations over a [`CommandRunner`].
#[derive(Debug, Clone)]
pub struct Gluster<R = ProcessRunner> {
    runner: R,
}

impl<R: CommandRunner> Gluster<R> {
    pub fn new(runner: R) -> Self {
        Self { runner }
    }

    #[cfg(test)]
    pub(crate) fn runner_for_tests(&self) -> &R {
        &self.runner
    }

    /// Runs one command and returns its XML answer. Output that is not XML (the CLI prints
    /// plain text when it cannot reach glusterd) becomes a command error carrying that text.
    ///
    /// A refusal that glusterd means as "not now" (another transaction holds its lock; the
    /// auxiliary quota mount, unmounted lazily after the last quota command, is still busy)
    /// is retried a few times with growing pauses before it is returned.
    pub(crate) async fn xml(&self, args: Vec<String>) -> Result<String, GlusterError> {
        let mut pause = std::time::Duration::from_millis(250);
        let mut attempt = 1;
        loop {
            let out = self.run_raw(&args).await?;
            if !is_xml(&out.stdout) {
                return Err(plain_text_error(&args.join(" "), &out));
            }
            let transient = TRANSIENT_REFUSALS
                .iter()
                .any(|m| out.stdout.contains(&format!("<opErrstr>{m}")));
            if !transient || attempt == TRANSIENT_ATTEMPTS {
                return Ok(out.stdout);
            }
            tracing::info!(command = %args.join(" "), ?pause, "glusterd is busy; retrying");
            tokio::time::sleep(pause).await;
            pause *= 2;
            attempt += 1;
        }
    }

    /// Runs one command and returns what it printed, for the few answers gluster gives in
    /// plain text even with `--xml`.
    pub(crate) async fn run_raw(&self, args: &[String]) -> Result<CommandOutput, GlusterError> {
        tracing::debug!(command = %args.join(" "), "gluster");
        self.runner.run(args).await
    }

    /// Runs a command whose answer carries only gluster's verdict.
    pub(crate) async fn verdict(&self, args: Vec<String>) -> Result<(), GlusterError> {
        let command = args.join(" ");
        let xml = self.xml(args).await?;
        parse_verdict(&command, &xml)
    }

    /// Adds `host` to the trusted pool. A host already in the pool counts as success (gluster
    /// itself answers success, with "already in peer list").
    pub async fn peer_probe(&self, host: &str) -> Result<(), GlusterError> {
        validate_host("peer host", host)?;
        self.verdict(vec!["peer".into(), "probe".into(), host.into()])
            .await
    }

    /// The other peers of the pool, as the answering glusterd sees them.
    pub async fn peer_status(&self) -> Result<Vec<Peer>, GlusterError> {
        let xml = self.xml(vec!["peer".into(), "status".into()]).await?;
        parse_peer_status(&xml)
    }

    /// Creates a volume of `layout` over `bricks`, checked to make whole sets first.
    pub async fn volume_create(
        &self,
        name: &str,
        layout: VolumeLayout,
        bricks: &[Brick],
        force: bool,
    ) -> Result<(), GlusterError> {
        self.verdict(create_args(name, layout, bricks, force)?)
            .await
    }

    /// Starts the volume. A volume that is already started counts as success.
    pub async fn volume_start(&self, name: &str) -> Result<(), GlusterError> {
        crate::validate_volume_name(name)?;
        let result = self
            .verdict(vec!["volume".into(), "start".into(), name.into()])
            .await;
        already_done(result, &format!("Volume {name} already started"))
    }

    /// The named volume, or `None` when gluster says it does not exist.
    pub async fn volume_info(&self, name: &str) -> Result<Option<Volume>, GlusterError> {
        crate::validate_volume_name(name)?;
        let xml = self
            .xml(vec!["volume".into(), "info".into(), name.into()])
            .await?;
        match parse_volume_info(&xml) {
            Ok(mut vols) => Ok(vols.pop()),
            Err(GlusterError::Command { message, .. }) if message == "Volume does not exist" => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `glusterfs --version`'s first line, as glusterd's own binary reports it.
    pub async fn version(&self) -> Result<String, GlusterError> {
        let out = self.runner.run(&["--version".to_string()]).await?;
        out.stdout
            .lines()
            .next()
            .filter(|l| l.starts_with("glusterfs "))
            .map(str::to_owned)
            .ok_or_else(|| GlusterError::Parse {
                command: "--version".into(),
                reason: format!("unexpected output {:?}", out.stdout),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Answers every command with one canned output and records the arguments.
    struct Canned {
        out: CommandOutput,
        seen: Mutex<Vec<Vec<String>>>,
    }

    impl CommandRunner for Canned {
        async fn run(&self, args: &[String]) -> Result<CommandOutput, GlusterError> {
            self.seen.lock().unwrap().push(args.to_vec());
            Ok(self.out.clone())
        }
    }

    fn canned(stdout: &str, stderr: &str) -> Gluster<Canned> {
        Gluster::new(Canned {
            out: CommandOutput {
                success: true,
                stdout: stdout.into(),
                stderr: stderr.into(),
            },
            seen: Mutex::default(),
        })
    }

    #[tokio::test]
    async fn plain_text_failure_is_a_command_error_with_the_text() {
        let g = canned(
            "",
            "Connection failed. Please check if gluster daemon is operational.\n",
        );
        let err = g.peer_status().await.unwrap_err().to_string();
        assert!(err.contains("Connection failed"), "{err}");
        assert!(err.contains("peer status"), "{err}");
    }

    #[tokio::test]
    async fn missing_volume_is_none() {
        let g = canned(include_str!("../testdata/volume-info-missing.xml"), "");
        assert_eq!(g.volume_info("nope").await.unwrap(), None);
    }

    #[tokio::test]
    async fn bad_input_is_refused_before_running_anything() {
        let g = canned("", "");
        assert!(g.volume_start("bad name").await.is_err());
        assert!(g.peer_probe("host;rm").await.is_err());
        let bricks = [Brick::parse("a:/b").unwrap()];
        let err = g
            .volume_create("v", VolumeLayout::Replicate { replica: 3 }, &bricks, false)
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            GlusterError::Invalid {
                field: "bricks",
                ..
            }
        ));
        assert!(g.runner.seen.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn version_line() {
        let g = canned(
            "glusterfs 10.3\nRepository revision: git://git.gluster.org/glusterfs.git\n",
            "",
        );
        assert_eq!(g.version().await.unwrap(), "glusterfs 10.3");
    }
}
