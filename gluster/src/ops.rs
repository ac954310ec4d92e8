//! Day-two operations on peers, volumes, options, self-heal, quotas, bricks and rebalance.
//! Each one checks its input before anything runs and keeps gluster's refusals word for word,
//! except the few refusals that mean the wanted state is already there.

use crate::cli::already_done;
use crate::heal::{
    heal_start_verdict, parse_heal_count, parse_heal_entries, parse_heal_info_summary,
    BrickHealCount,
};
use crate::layout::{add_brick_args, check_distinct, validate_host};
use crate::options::{parse_volume_get, validate_option_key, validate_option_value};
use crate::profile::{parse_profile_info, BrickProfile};
use crate::quota::{parse_quota_list, validate_quota_bytes, validate_quota_path};
use crate::rebalance::{parse_rebalance_status, parse_remove_brick_status};
use crate::status::parse_volume_status;
use crate::xml::{parse_volume_info, parse_volume_list};
use crate::{
    validate_volume_name, Brick, BrickHeal, BrickHealEntries, CommandOutput, CommandRunner,
    Gluster, GlusterError, QuotaEntry, RebalanceStatus, Volume, VolumeLayout, VolumeStatus,
};

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// `volume remove-brick NAME BRICK... ACTION`, after checking the volume and bricks.
fn remove_brick_args(
    name: &str,
    bricks: &[Brick],
    action: &str,
) -> Result<Vec<String>, GlusterError> {
    validate_volume_name(name)?;
    check_distinct(bricks)?;
    let mut args = words(&["volume", "remove-brick", name]);
    args.extend(bricks.iter().map(Brick::to_string));
    args.push(action.into());
    Ok(args)
}

impl<R: CommandRunner> Gluster<R> {
    /// Removes `host` from the trusted pool. A host that is not in the pool counts as success.
    pub async fn peer_detach(&self, host: &str) -> Result<(), GlusterError> {
        validate_host("peer host", host)?;
        let result = self.verdict(words(&["peer", "detach", host])).await;
        already_done(result, &format!("{host} is not part of cluster"))
    }

    /// Removes `host` from the trusted pool although it does not answer (a machine that is
    /// gone). Gluster still refuses while the host holds a brick of any volume. A host that is
    /// not in the pool counts as success.
    pub async fn peer_detach_force(&self, host: &str) -> Result<(), GlusterError> {
        validate_host("peer host", host)?;
        let result = self
            .verdict(words(&["peer", "detach", host, "force"]))
            .await;
        already_done(result, &format!("{host} is not part of cluster"))
    }

    /// `volume start NAME force`: starts brick processes that are down, for example after
    /// one was killed or its disk replaced, without touching the running ones.
    pub async fn volume_start_force(&self, name: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        self.verdict(words(&["volume", "start", name, "force"]))
            .await
    }

    /// Stops the volume; `force` stops it even when gluster would refuse (for example while
    /// a task runs). A volume that is not started counts as success.
    pub async fn volume_stop(&self, name: &str, force: bool) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        let mut args = words(&["volume", "stop", name]);
        if force {
            args.push("force".into());
        }
        let result = self.verdict(args).await;
        already_done(
            result,
            &format!("Volume {name} is not in the started state"),
        )
    }

    /// Deletes a stopped volume's definition (brick directories stay on disk). A volume that
    /// does not exist counts as success.
    pub async fn volume_delete(&self, name: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        let result = self.verdict(words(&["volume", "delete", name])).await;
        already_done(result, &format!("Volume {name} does not exist"))
    }

    /// The names of all volumes.
    pub async fn volume_list(&self) -> Result<Vec<String>, GlusterError> {
        parse_volume_list(&self.xml(words(&["volume", "list"])).await?)
    }

    /// Every volume with its bricks and options.
    pub async fn volume_info_all(&self) -> Result<Vec<Volume>, GlusterError> {
        parse_volume_info(&self.xml(words(&["volume", "info"])).await?)
    }

    /// A started volume's bricks (online, port, pid, filesystem and free space) and daemons,
    /// from `volume status NAME detail` completed by plain `volume status NAME`.
    pub async fn volume_status(&self, name: &str) -> Result<VolumeStatus, GlusterError> {
        validate_volume_name(name)?;
        let pick = |all: Vec<VolumeStatus>, command: &str| {
            all.into_iter()
                .find(|v| v.volume == name)
                .ok_or_else(|| GlusterError::Parse {
                    command: command.to_string(),
                    reason: format!("the answer does not mention volume {name}"),
                })
        };
        let detail = parse_volume_status(
            &self
                .xml(words(&["volume", "status", name, "detail"]))
                .await?,
        )?;
        let mut status = pick(detail, "volume status detail")?;
        let plain = parse_volume_status(&self.xml(words(&["volume", "status", name])).await?)?;
        status.merge(pick(plain, "volume status")?);
        Ok(status)
    }

    /// Sets one volume option.
    pub async fn volume_set(&self, name: &str, key: &str, value: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        validate_option_key(key)?;
        validate_option_value(value)?;
        self.verdict(words(&["volume", "set", name, key, value]))
            .await
    }

    /// Turns gluster's barrier on or off. Its command has no XML answer: success is its
    /// sentence. The bricks refuse to turn it off when it is off already (its timeout
    /// lifted it), and gluster's answer does not say that was why.
    pub async fn volume_barrier(&self, name: &str, enable: bool) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        let word = if enable { "enable" } else { "disable" };
        let args = words(&["volume", "barrier", name, word]);
        let out = self.run_raw(&args).await?;
        barrier_verdict(&args, &out)
    }

    /// Returns one volume option to its default.
    pub async fn volume_reset(&self, name: &str, key: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        validate_option_key(key)?;
        self.verdict(words(&["volume", "reset", name, key])).await
    }

    /// The option's effective value, set or default (without gluster's `(DEFAULT)` mark);
    /// `None` when gluster has no value for it (`(null)`) or does not list the key in its
    /// answer. Keys gluster does not know are its error ("Did you mean ...?").
    pub async fn volume_get(&self, name: &str, key: &str) -> Result<Option<String>, GlusterError> {
        validate_volume_name(name)?;
        validate_option_key(key)?;
        let opts = parse_volume_get(&self.xml(words(&["volume", "get", name, key])).await?)?;
        Ok(opts
            .into_iter()
            .find(|o| o.name == key)
            .and_then(|o| o.value))
    }

    /// Per brick: what self-heal still has to do, from `volume heal NAME info summary`.
    ///
    /// Gluster runs its `glfsheal` helper for this, which reaches glusterd only at the default
    /// socket (`/var/run/glusterd.socket`) and must reach the bricks over the network.
    pub async fn heal_info_summary(&self, name: &str) -> Result<Vec<BrickHeal>, GlusterError> {
        validate_volume_name(name)?;
        parse_heal_info_summary(
            &self
                .xml(words(&["volume", "heal", name, "info", "summary"]))
                .await?,
        )
    }

    /// Per brick: the entries self-heal still has to do, with their paths
    /// (`volume heal NAME info`). Like the summary, it runs `glfsheal`.
    pub async fn heal_entries(&self, name: &str) -> Result<Vec<BrickHealEntries>, GlusterError> {
        validate_volume_name(name)?;
        let args = words(&["volume", "heal", name, "info"]);
        parse_heal_entries(&args.join(" "), &self.xml(args.clone()).await?)
    }

    /// Per brick: the entries in split-brain (`volume heal NAME info split-brain`).
    pub async fn split_brain_entries(
        &self,
        name: &str,
    ) -> Result<Vec<BrickHealEntries>, GlusterError> {
        validate_volume_name(name)?;
        let args = words(&["volume", "heal", name, "info", "split-brain"]);
        parse_heal_entries(&args.join(" "), &self.xml(args.clone()).await?)
    }

    /// Each brick's heal index as the self-heal daemons count it
    /// (`volume heal NAME statistics heal-count`): unlike the summary, no `glfsheal` client
    /// is started and no brick is connected to anew.
    pub async fn heal_count(&self, name: &str) -> Result<Vec<BrickHealCount>, GlusterError> {
        validate_volume_name(name)?;
        let args = words(&["volume", "heal", name, "statistics", "heal-count"]);
        let out = self.run_raw(&args).await?;
        parse_heal_count(&args.join(" "), &out)
    }

    /// Asks the self-heal daemons to heal the entries in their index now (`volume heal NAME`).
    pub async fn heal_start(&self, name: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        let args = words(&["volume", "heal", name]);
        let out = self.run_raw(&args).await?;
        heal_start_verdict(&args.join(" "), &out)
    }

    /// Starts counting each brick's calls (`volume profile NAME start`); already counting
    /// counts as success. Counting costs the bricks a little on every call.
    pub async fn profile_start(&self, name: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        let result = self
            .verdict(words(&["volume", "profile", name, "start"]))
            .await;
        already_done(
            result,
            &format!("Profile on Volume {name} is already started"),
        )
    }

    /// Stops counting; not counting counts as success.
    pub async fn profile_stop(&self, name: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        let result = self
            .verdict(words(&["volume", "profile", name, "stop"]))
            .await;
        already_done(result, &format!("Profile on Volume {name} is not started"))
    }

    /// Sets every brick's counters back to zero (`volume profile NAME info clear`).
    pub async fn profile_clear(&self, name: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        self.verdict(words(&["volume", "profile", name, "info", "clear"]))
            .await
    }

    /// Every brick's calls since counting started or was cleared
    /// (`volume profile NAME info cumulative`).
    pub async fn profile_info(&self, name: &str) -> Result<Vec<BrickProfile>, GlusterError> {
        validate_volume_name(name)?;
        let args = words(&["volume", "profile", name, "info", "cumulative"]);
        parse_profile_info(&args.join(" "), &self.xml(args.clone()).await?)
    }

    /// Turns quota accounting on. Quota already enabled counts as success.
    pub async fn quota_enable(&self, name: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        let result = self
            .verdict(words(&["volume", "quota", name, "enable"]))
            .await;
        already_done(result, "Quota is already enabled")
    }

    /// Turns quota accounting off (gluster then removes its attributes from every file in the
    /// background). Quota already off counts as success.
    pub async fn quota_disable(&self, name: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        let result = self
            .verdict(words(&["volume", "quota", name, "disable"]))
            .await;
        already_done(result, "Quota is already disabled")
    }

    /// Limits the space used below directory `path` (which must exist) to `bytes`.
    pub async fn quota_limit_usage(
        &self,
        name: &str,
        path: &str,
        bytes: u64,
        soft_limit_percent: Option<u8>,
    ) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        validate_quota_path(path)?;
        validate_quota_bytes(bytes)?;
        let mut args = words(&[
            "volume",
            "quota",
            name,
            "limit-usage",
            path,
            &bytes.to_string(),
        ]);
        if let Some(p) = soft_limit_percent {
            if !(1..=100).contains(&p) {
                return Err(GlusterError::Invalid {
                    field: "quota soft limit",
                    reason: format!("{p}% must be 1 to 100"),
                });
            }
            args.push(format!("{p}%"));
        }
        self.verdict(args).await
    }

    /// Every usage limit with its current use. No limits at all is an empty list.
    ///
    /// The CLI reads usage through an auxiliary mount that glusterd makes in its own mount
    /// namespace, so this must run where glusterd's `/var/run/gluster` is visible.
    pub async fn quota_list(&self, name: &str) -> Result<Vec<QuotaEntry>, GlusterError> {
        validate_volume_name(name)?;
        match parse_quota_list(&self.xml(words(&["volume", "quota", name, "list"])).await?) {
            Err(GlusterError::Command { message, .. })
                if message == format!("No quota configured on volume {name}") =>
            {
                Ok(Vec::new())
            }
            other => other,
        }
    }

    /// Removes the usage limit on `path`. Nothing to remove counts as success: no limit on
    /// the directory ("removexattr failed on ... Reason : No data available"), a limit glusterd
    /// never registered ("Error. gfid ... not found in store"; gluster still removes the
    /// directory's limit attribute, as seen on 10.3), or no such directory.
    pub async fn quota_remove(&self, name: &str, path: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        validate_quota_path(path)?;
        match self
            .verdict(words(&["volume", "quota", name, "remove", path]))
            .await
        {
            Err(GlusterError::Command { message, .. })
                if (message.starts_with("removexattr failed on ")
                    && message.ends_with(". Reason : No data available"))
                    || (message.starts_with("Error. gfid ")
                        && message.ends_with(&format!(" for path {path} not found in store")))
                    || message == format!("Failed to get trusted.gfid attribute on path {path}. Reason : No such file or directory") =>
            {
                Ok(())
            }
            other => other,
        }
    }

    /// Sets how old a brick's figure of a limited directory's usage may be when it checks a
    /// write against the limit: `soft_seconds` while the usage is below the directory's soft
    /// limit, `hard_seconds` above it (`features.soft-timeout`, `features.hard-timeout`;
    /// gluster's defaults are 60 and 5). 0 re-reads the usage, through quotad, on every write.
    pub async fn quota_check_timeouts(
        &self,
        name: &str,
        soft_seconds: u32,
        hard_seconds: u32,
    ) -> Result<(), GlusterError> {
        self.volume_set(name, "features.soft-timeout", &soft_seconds.to_string())
            .await?;
        self.volume_set(name, "features.hard-timeout", &hard_seconds.to_string())
            .await
    }

    /// Adds whole sets of `layout` (the volume's own layout) to a volume. For replicated
    /// layouts gluster is told the replica count; dispersed volumes take sets of their size.
    pub async fn add_brick(
        &self,
        name: &str,
        layout: VolumeLayout,
        bricks: &[Brick],
        force: bool,
    ) -> Result<(), GlusterError> {
        self.verdict(add_brick_args(name, layout, bricks, force)?)
            .await
    }

    /// Starts moving data off `bricks` (whole sets) before they are removed.
    pub async fn remove_brick_start(
        &self,
        name: &str,
        bricks: &[Brick],
    ) -> Result<(), GlusterError> {
        self.verdict(remove_brick_args(name, bricks, "start")?)
            .await
    }

    /// Progress of the migration started by [`Gluster::remove_brick_start`].
    pub async fn remove_brick_status(
        &self,
        name: &str,
        bricks: &[Brick],
    ) -> Result<RebalanceStatus, GlusterError> {
        parse_remove_brick_status(&self.xml(remove_brick_args(name, bricks, "status")?).await?)
    }

    /// Ends a remove-brick task that is not committed: gluster forgets it, keeps `bricks` in
    /// the volume (files already moved stay where they went) and a new start may follow.
    pub async fn remove_brick_stop(
        &self,
        name: &str,
        bricks: &[Brick],
    ) -> Result<(), GlusterError> {
        self.verdict(remove_brick_args(name, bricks, "stop")?).await
    }

    /// Removes `bricks` from the volume once their data has moved. Gluster refuses while
    /// the migration runs ("use 'force' option as migration is in progress").
    pub async fn remove_brick_commit(
        &self,
        name: &str,
        bricks: &[Brick],
    ) -> Result<(), GlusterError> {
        self.verdict(remove_brick_args(name, bricks, "commit")?)
            .await
    }

    /// Puts brick `new` in the place of `old` at once; self-heal then fills `new` from the
    /// other bricks of its set.
    pub async fn replace_brick_commit_force(
        &self,
        name: &str,
        old: &Brick,
        new: &Brick,
    ) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        check_distinct(&[old.clone(), new.clone()])?;
        self.verdict(words(&[
            "volume",
            "replace-brick",
            name,
            &old.to_string(),
            &new.to_string(),
            "commit",
            "force",
        ]))
        .await
    }

    /// Starts spreading the volume's files over all its bricks, after add-brick. A rebalance
    /// already running counts as success.
    pub async fn rebalance_start(&self, name: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        let result = self
            .verdict(words(&["volume", "rebalance", name, "start"]))
            .await;
        already_done(result, &format!("Rebalance on {name} is already started"))
    }

    /// Ends the volume's rebalance: gluster forgets the task (its status reads "not
    /// started" again) and a new start may follow. One not started counts as stopped.
    pub async fn rebalance_stop(&self, name: &str) -> Result<(), GlusterError> {
        validate_volume_name(name)?;
        let result = self
            .verdict(words(&["volume", "rebalance", name, "stop"]))
            .await;
        already_done(result, &format!("Rebalance not started for volume {name}."))
    }

    /// Progress of the volume's rebalance, per peer and overall.
    pub async fn rebalance_status(&self, name: &str) -> Result<RebalanceStatus, GlusterError> {
        validate_volume_name(name)?;
        parse_rebalance_status(
            &self
                .xml(words(&["volume", "rebalance", name, "status"]))
                .await?,
        )
    }
}

/// What `volume barrier` answered: its CLI has no XML output, so its plain words are read
/// ("volume barrier: command successful" on stdout, or "command unsuccessful : WHY" on
/// stderr).
fn barrier_verdict(args: &[String], out: &CommandOutput) -> Result<(), GlusterError> {
    if out.success && out.stdout.contains("command successful") {
        return Ok(());
    }
    let said = [out.stderr.trim(), out.stdout.trim()]
        .into_iter()
        .find(|t| !t.is_empty())
        .unwrap_or("no answer");
    Err(GlusterError::Command {
        command: args.join(" "),
        ret: -1,
        errno: 0,
        message: said.lines().next().unwrap_or(said).to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CommandOutput;
    use std::sync::Mutex;

    /// Answers each command with the fixture registered for its leading words, and records
    /// every command it is asked to run.
    #[derive(Default)]
    struct Script {
        answers: Vec<(&'static str, CommandOutput)>,
        seen: Mutex<Vec<String>>,
    }

    impl CommandRunner for Script {
        async fn run(&self, args: &[String]) -> Result<CommandOutput, GlusterError> {
            let command = args.join(" ");
            self.seen.lock().unwrap().push(command.clone());
            let answer = self
                .answers
                .iter()
                .filter(|(prefix, _)| command.starts_with(prefix))
                .max_by_key(|(prefix, _)| prefix.len())
                .map(|(_, out)| out.clone());
            Ok(answer.unwrap_or_else(|| CommandOutput {
                success: false,
                stdout: String::new(),
                stderr: format!("no answer scripted for {command}"),
            }))
        }
    }

    fn xml(stdout: &str) -> CommandOutput {
        CommandOutput {
            success: true,
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }

    fn script(answers: Vec<(&'static str, CommandOutput)>) -> Gluster<Script> {
        Gluster::new(Script {
            answers,
            seen: Mutex::default(),
        })
    }

    fn seen(g: &Gluster<Script>) -> Vec<String> {
        g.runner_for_tests().seen.lock().unwrap().clone()
    }

    fn field(err: GlusterError) -> &'static str {
        match err {
            GlusterError::Invalid { field, .. } => field,
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    fn b(s: &str) -> Brick {
        Brick::parse(s).unwrap()
    }

    #[tokio::test]
    async fn a_barrier_succeeds_only_on_the_cli_saying_so() {
        let ok = script(vec![(
            "volume barrier pool enable",
            xml("volume barrier: command successful\n"),
        )]);
        ok.volume_barrier("pool", true).await.unwrap();
        assert_eq!(seen(&ok), ["volume barrier pool enable"]);

        let refused = script(vec![(
            "volume barrier pool disable",
            CommandOutput {
                success: false,
                stdout: String::new(),
                stderr: "volume barrier: command unsuccessful : Failed to reconfigure barrier.\n"
                    .into(),
            },
        )]);
        match refused.volume_barrier("pool", false).await.unwrap_err() {
            GlusterError::Command {
                command, message, ..
            } => {
                assert_eq!(command, "volume barrier pool disable");
                assert!(
                    message.contains("Failed to reconfigure barrier"),
                    "{message}"
                );
            }
            other => panic!("expected the CLI's refusal, got {other:?}"),
        }

        // A zero exit without the words is not taken as done.
        let silent = script(vec![("volume barrier pool enable", xml(""))]);
        assert!(silent.volume_barrier("pool", true).await.is_err());
        assert_eq!(
            field(silent.volume_barrier("bad name", true).await.unwrap_err()),
            "volume name"
        );
    }

    #[tokio::test]
    async fn every_operation_checks_input_before_running_anything() {
        let g = script(vec![]);
        let bad = "bad name";
        let three = [b("h1:/b"), b("h2:/b"), b("h3:/b")];
        let r3 = VolumeLayout::Replicate { replica: 3 };
        assert_eq!(field(g.peer_detach("h;x").await.unwrap_err()), "peer host");
        assert_eq!(field(g.peer_detach("-h").await.unwrap_err()), "peer host");
        assert_eq!(
            field(g.peer_detach_force("a b").await.unwrap_err()),
            "peer host"
        );
        assert_eq!(field(g.peer_probe("").await.unwrap_err()), "peer host");
        assert_eq!(
            field(g.volume_start_force(bad).await.unwrap_err()),
            "volume name"
        );
        assert_eq!(
            field(g.volume_stop(bad, true).await.unwrap_err()),
            "volume name"
        );
        assert_eq!(
            field(g.volume_delete("-v").await.unwrap_err()),
            "volume name"
        );
        assert_eq!(
            field(g.volume_status(bad).await.unwrap_err()),
            "volume name"
        );
        assert_eq!(
            field(g.volume_set(bad, "a.b", "1").await.unwrap_err()),
            "volume name"
        );
        assert_eq!(
            field(g.volume_set("v", "A.b", "1").await.unwrap_err()),
            "option key"
        );
        assert_eq!(
            field(g.volume_set("v", "a.b", "1\n2").await.unwrap_err()),
            "option value"
        );
        assert_eq!(
            field(g.volume_set("v", "a.b", "--xml").await.unwrap_err()),
            "option value"
        );
        assert_eq!(
            field(g.volume_reset("v", "ab").await.unwrap_err()),
            "option key"
        );
        assert_eq!(
            field(g.volume_get("v", "a b").await.unwrap_err()),
            "option key"
        );
        assert_eq!(
            field(g.heal_info_summary(bad).await.unwrap_err()),
            "volume name"
        );
        assert_eq!(field(g.heal_start(bad).await.unwrap_err()), "volume name");
        assert_eq!(field(g.quota_enable(bad).await.unwrap_err()), "volume name");
        assert_eq!(
            field(g.quota_limit_usage("v", "pv1", 1, None).await.unwrap_err()),
            "quota path"
        );
        assert_eq!(
            field(
                g.quota_limit_usage("v", "/a/../b", 1, None)
                    .await
                    .unwrap_err()
            ),
            "quota path"
        );
        assert_eq!(
            field(g.quota_limit_usage("v", "/pv1", 0, None).await.unwrap_err()),
            "quota bytes"
        );
        assert_eq!(
            field(
                g.quota_limit_usage("v", "/pv1", u64::MAX, None)
                    .await
                    .unwrap_err()
            ),
            "quota bytes"
        );
        assert_eq!(field(g.quota_list(bad).await.unwrap_err()), "volume name");
        assert_eq!(
            field(g.quota_remove("v", "/a\tb").await.unwrap_err()),
            "quota path"
        );
        assert_eq!(
            field(g.quota_check_timeouts(bad, 1, 0).await.unwrap_err()),
            "volume name"
        );
        assert_eq!(
            field(g.add_brick("v", r3, &three[..2], false).await.unwrap_err()),
            "bricks"
        );
        assert_eq!(
            field(g.add_brick(bad, r3, &three, false).await.unwrap_err()),
            "volume name"
        );
        assert_eq!(
            field(
                g.add_brick("v", VolumeLayout::Replicate { replica: 5 }, &three, false)
                    .await
                    .unwrap_err()
            ),
            "replica"
        );
        assert_eq!(
            field(g.remove_brick_start("v", &[]).await.unwrap_err()),
            "bricks"
        );
        let twice = [b("h1:/b"), b("h1:/b")];
        assert_eq!(
            field(g.remove_brick_status("v", &twice).await.unwrap_err()),
            "bricks"
        );
        assert_eq!(
            field(g.remove_brick_commit(bad, &three).await.unwrap_err()),
            "volume name"
        );
        let invalid = Brick {
            host: "h".into(),
            path: "rel".into(),
        };
        assert_eq!(
            field(
                g.remove_brick_commit("v", std::slice::from_ref(&invalid))
                    .await
                    .unwrap_err()
            ),
            "brick.path"
        );
        assert_eq!(
            field(
                g.replace_brick_commit_force("v", &three[0], &three[0])
                    .await
                    .unwrap_err()
            ),
            "bricks"
        );
        assert_eq!(
            field(
                g.replace_brick_commit_force("v", &three[0], &invalid)
                    .await
                    .unwrap_err()
            ),
            "brick.path"
        );
        assert_eq!(
            field(g.rebalance_start(bad).await.unwrap_err()),
            "volume name"
        );
        assert_eq!(
            field(g.rebalance_status(bad).await.unwrap_err()),
            "volume name"
        );
        assert!(seen(&g).is_empty(), "{:?}", seen(&g));
    }

    #[tokio::test]
    async fn already_done_refusals_are_success() {
        let g = script(vec![
            (
                "peer detach",
                xml(include_str!("../testdata/peer-detach-unknown.xml")),
            ),
            (
                "volume start r3",
                xml(include_str!("../testdata/volume-start-already.xml")),
            ),
            (
                "volume stop d21",
                xml(include_str!("../testdata/volume-stop-already.xml")),
            ),
            (
                "volume delete d21",
                xml(include_str!("../testdata/volume-delete-missing.xml")),
            ),
            (
                "volume quota r3 enable",
                xml(include_str!("../testdata/quota-enable-already.xml")),
            ),
            (
                "volume quota r3 remove",
                xml(include_str!("../testdata/quota-remove-missing.xml")),
            ),
            (
                "volume quota r3 list",
                xml(include_str!("../testdata/quota-list-none.xml")),
            ),
            (
                "volume rebalance d21 start",
                xml(include_str!("../testdata/rebalance-start-already.xml")),
            ),
        ]);
        g.peer_detach("10.213.0.3").await.unwrap();
        g.volume_start("r3").await.unwrap();
        g.volume_stop("d21", false).await.unwrap();
        g.volume_delete("d21").await.unwrap();
        g.quota_enable("r3").await.unwrap();
        g.quota_remove("r3", "/pv2").await.unwrap();
        assert_eq!(g.quota_list("r3").await.unwrap(), []);
        g.rebalance_start("d21").await.unwrap();
        assert_eq!(
            seen(&g),
            [
                "peer detach 10.213.0.3",
                "volume start r3",
                "volume stop d21",
                "volume delete d21",
                "volume quota r3 enable",
                "volume quota r3 remove /pv2",
                "volume quota r3 list",
                "volume rebalance d21 start",
            ]
        );
    }

    /// Answers each command with the next output in its queue; the last one repeats.
    struct Sequence {
        answers: Mutex<Vec<CommandOutput>>,
        calls: Mutex<u32>,
    }

    impl CommandRunner for Sequence {
        async fn run(&self, _args: &[String]) -> Result<CommandOutput, GlusterError> {
            *self.calls.lock().unwrap() += 1;
            let mut answers = self.answers.lock().unwrap();
            Ok(if answers.len() > 1 {
                answers.remove(0)
            } else {
                answers[0].clone()
            })
        }
    }

    fn sequence(answers: Vec<CommandOutput>) -> Gluster<Sequence> {
        Gluster::new(Sequence {
            answers: Mutex::new(answers),
            calls: Mutex::default(),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn commands_glusterd_refuses_for_now_are_retried() {
        let busy = xml(include_str!("../testdata/quota-remove-aux-mount.xml"));
        let done = xml(include_str!("../testdata/quota-remove.xml"));
        let g = sequence(vec![busy.clone(), busy.clone(), done]);
        g.quota_remove("r3", "/pv2").await.unwrap();
        assert_eq!(*g.runner_for_tests().calls.lock().unwrap(), 3);

        // A mount that never comes up is reported after a bounded number of tries.
        let g = sequence(vec![busy]);
        let err = g
            .quota_limit_usage("r3", "/pv2", 1 << 30, None)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("Failed to start aux mount"),
            "{err}"
        );
        assert_eq!(
            *g.runner_for_tests().calls.lock().unwrap(),
            crate::cli::TRANSIENT_ATTEMPTS
        );

        // Another transaction holding glusterd's lock: the same.
        let locked = xml(include_str!("../testdata/volume-status-locked.xml"));
        let info = xml(include_str!("../testdata/volume-info-replica3.xml"));
        let g = sequence(vec![locked.clone(), info]);
        assert!(g.volume_info("r3").await.unwrap().is_some());
        assert_eq!(*g.runner_for_tests().calls.lock().unwrap(), 2);
        // Still refused after the retries: the caller can tell "not now" from a refusal.
        let g = sequence(vec![locked]);
        match g
            .volume_set("r3", "performance.cache-size", "64MB")
            .await
            .unwrap_err()
        {
            GlusterError::Command { message, .. } => assert!(crate::is_busy(&message), "{message}"),
            e => panic!("{e}"),
        }

        // Other refusals are not retried.
        let g = sequence(vec![xml(include_str!(
            "../testdata/quota-limit-usage-nodir.xml"
        ))]);
        let err = g
            .quota_limit_usage("r3", "/pv2", 1 << 30, None)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, GlusterError::Command { message, .. } if !crate::is_busy(message)),
            "{err}"
        );
        assert_eq!(*g.runner_for_tests().calls.lock().unwrap(), 1);
    }

    #[tokio::test]
    async fn removing_a_limit_that_is_not_there_succeeds() {
        for fixture in [
            include_str!("../testdata/quota-remove-not-in-store.xml"),
            include_str!("../testdata/quota-remove-nodir.xml"),
        ] {
            let g = script(vec![("volume quota q remove", xml(fixture))]);
            let path = if fixture.contains("/missing") {
                "/missing"
            } else {
                "/xattr-only"
            };
            g.quota_remove("q", path).await.unwrap();
            // The same words about another directory stay an error.
            g.quota_remove("q", "/other").await.unwrap_err();
        }
    }

    #[tokio::test]
    async fn the_same_words_about_another_object_stay_errors() {
        // "already started" for r3 does not make starting volume x a success.
        let g = script(vec![
            (
                "volume start x",
                xml(include_str!("../testdata/volume-start-already.xml")),
            ),
            (
                "peer detach",
                xml(include_str!("../testdata/peer-detach-self.xml")),
            ),
            (
                "volume delete d21",
                xml(include_str!("../testdata/volume-delete-started.xml")),
            ),
            (
                "volume quota d21 list",
                xml(include_str!("../testdata/quota-list-disabled.xml")),
            ),
            (
                "volume quota x list",
                xml(include_str!("../testdata/quota-list-none.xml")),
            ),
        ]);
        let err = g.volume_start("x").await.unwrap_err().to_string();
        assert!(err.contains("Volume r3 already started"), "{err}");
        let err = g.peer_detach("10.213.0.1").await.unwrap_err().to_string();
        assert!(err.contains("10.213.0.1 is localhost"), "{err}");
        let err = g.volume_delete("d21").await.unwrap_err().to_string();
        assert!(
            err.contains("Volume d21 has been started.Volume needs to be stopped before deletion."),
            "{err}"
        );
        let err = g.quota_list("d21").await.unwrap_err().to_string();
        assert!(
            err.contains("Quota is disabled, please enable quota"),
            "{err}"
        );
        assert!(g.quota_list("x").await.is_err());
    }

    #[tokio::test]
    async fn volume_status_merges_detail_and_plain() {
        // Pretend `detail` lacked ports and pids: the plain answer supplies them.
        let detail = include_str!("../testdata/volume-status-detail-replica3.xml")
            .replace("<port>58101</port>", "<port>N/A</port>")
            .replace("<pid>6601</pid>", "<pid>-1</pid>");
        let g = script(vec![
            ("volume status r3 detail", xml(&detail)),
            (
                "volume status r3",
                xml(include_str!("../testdata/volume-status-replica3.xml")),
            ),
        ]);
        let s = g.volume_status("r3").await.unwrap();
        assert_eq!(s.bricks.len(), 3);
        assert_eq!(
            (s.bricks[0].port, s.bricks[0].pid),
            (Some(58101), Some(6601))
        );
        assert_eq!(s.bricks[0].size_total, Some(2_080_374_784));
        assert_eq!(s.self_heal_daemons().count(), 3);
        assert_eq!(seen(&g), ["volume status r3 detail", "volume status r3"]);
        // An answer about another volume is not taken for this one.
        let g = script(vec![("volume status", xml(&detail))]);
        let err = g.volume_status("other").await.unwrap_err();
        assert!(matches!(err, GlusterError::Parse { .. }), "{err}");
    }

    #[tokio::test]
    async fn heal_start_failure_text_reaches_the_caller() {
        let g = script(vec![(
            "volume heal dv",
            CommandOutput {
                success: false,
                stdout: String::new(),
                stderr: include_str!("../testdata/heal-start-failed.stderr.txt").into(),
            },
        )]);
        match g.heal_start("dv").await.unwrap_err() {
            GlusterError::Command {
                command, message, ..
            } => {
                assert_eq!(command, "volume heal dv");
                assert!(
                    message.ends_with(
                        "Self-heal-daemon is disabled. Heal will not be triggered on volume dv"
                    ),
                    "{message}"
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn commands_and_answers() {
        let g = script(vec![
            (
                "volume list",
                xml(include_str!("../testdata/volume-list.xml")),
            ),
            (
                "volume info",
                xml(include_str!("../testdata/volume-info-all.xml")),
            ),
            (
                "volume set",
                xml(include_str!("../testdata/volume-set.xml")),
            ),
            (
                "volume get",
                xml(include_str!("../testdata/volume-get-default.xml")),
            ),
            (
                "volume reset",
                xml(include_str!("../testdata/volume-reset.xml")),
            ),
            (
                "volume stop",
                xml(include_str!("../testdata/volume-stop.xml")),
            ),
            (
                "volume start",
                xml(include_str!("../testdata/volume-start-force.xml")),
            ),
            (
                "volume heal r3 info",
                xml(include_str!("../testdata/heal-info-summary-brick-down.xml")),
            ),
            (
                "volume heal r3",
                xml(include_str!("../testdata/heal-start.stdout.txt")),
            ),
            (
                "volume quota",
                xml(include_str!("../testdata/quota-limit-usage.xml")),
            ),
            (
                "volume quota r3 list",
                xml(include_str!("../testdata/quota-list.xml")),
            ),
            (
                "volume add-brick",
                xml(include_str!("../testdata/add-brick-replica.xml")),
            ),
            (
                "volume rebalance r3 start",
                xml(include_str!("../testdata/rebalance-start.xml")),
            ),
            (
                "volume rebalance r3 status",
                xml(include_str!("../testdata/rebalance-status-completed.xml")),
            ),
            (
                "volume remove-brick",
                xml(include_str!("../testdata/remove-brick-start.xml")),
            ),
            (
                "volume remove-brick r3 h1:/b h2:/b h3:/b status",
                xml(include_str!(
                    "../testdata/remove-brick-status-completed.xml"
                )),
            ),
            (
                "volume replace-brick",
                xml(include_str!("../testdata/replace-brick.xml")),
            ),
        ]);
        let three = [b("h1:/b"), b("h2:/b"), b("h3:/b")];
        assert_eq!(g.volume_list().await.unwrap(), ["d21", "r3"]);
        let all = g.volume_info_all().await.unwrap();
        assert_eq!(
            all.iter()
                .map(|v| (v.name.as_str(), v.type_name.as_str()))
                .collect::<Vec<_>>(),
            [("d21", "Disperse"), ("r3", "Replicate")]
        );
        g.volume_set("r3", "performance.cache-size", "64MB")
            .await
            .unwrap();
        assert_eq!(
            g.volume_get("r3", "performance.cache-size")
                .await
                .unwrap()
                .as_deref(),
            Some("32MB")
        );
        assert_eq!(
            g.volume_get("r3", "performance.io-cache").await.unwrap(),
            None
        );
        g.volume_reset("r3", "performance.cache-size")
            .await
            .unwrap();
        g.volume_stop("r3", true).await.unwrap();
        g.volume_start_force("r3").await.unwrap();
        let heal = g.heal_info_summary("r3").await.unwrap();
        assert_eq!(heal[0].pending, Some(13));
        g.heal_start("r3").await.unwrap();
        g.quota_check_timeouts("r3", 1, 0).await.unwrap();
        g.quota_limit_usage("r3", "/pv1", 10 << 20, Some(1))
            .await
            .unwrap();
        let quotas = g.quota_list("r3").await.unwrap();
        assert_eq!(quotas.len(), 2);
        g.add_brick("r3", VolumeLayout::Replicate { replica: 3 }, &three, false)
            .await
            .unwrap();
        g.rebalance_start("r3").await.unwrap();
        assert!(g.rebalance_status("r3").await.unwrap().is_completed());
        g.remove_brick_start("r3", &three).await.unwrap();
        assert_eq!(
            g.remove_brick_status("r3", &three)
                .await
                .unwrap()
                .aggregate
                .files,
            23
        );
        g.remove_brick_commit("r3", &three).await.unwrap();
        g.replace_brick_commit_force("r3", &three[0], &b("h1:/c"))
            .await
            .unwrap();
        assert_eq!(
            seen(&g),
            [
                "volume list",
                "volume info",
                "volume set r3 performance.cache-size 64MB",
                "volume get r3 performance.cache-size",
                "volume get r3 performance.io-cache",
                "volume reset r3 performance.cache-size",
                "volume stop r3 force",
                "volume start r3 force",
                "volume heal r3 info summary",
                "volume heal r3",
                "volume set r3 features.soft-timeout 1",
                "volume set r3 features.hard-timeout 0",
                "volume quota r3 limit-usage /pv1 10485760 1%",
                "volume quota r3 list",
                "volume add-brick r3 replica 3 h1:/b h2:/b h3:/b",
                "volume rebalance r3 start",
                "volume rebalance r3 status",
                "volume remove-brick r3 h1:/b h2:/b h3:/b start",
                "volume remove-brick r3 h1:/b h2:/b h3:/b status",
                "volume remove-brick r3 h1:/b h2:/b h3:/b commit",
                "volume replace-brick r3 h1:/b h1:/c commit force",
            ]
        );
    }
}
