//! Subdirectory PVs under gluster's quota: SubdirCreate, SubdirDelete, SubdirGet,
//! SubdirExpand, SubdirList, QuotaList, QuotaBacklog (volumes sized by project quotas branch
//! to `projects`).

use std::time::{SystemTime, UNIX_EPOCH};

use super::*;

/// Where SubdirDelete moves PV directories to be removed in the background, under the
/// volume's root (a dot name: never a PV's, and skipped by every listing of PVs).
pub const TRASH: &str = ".glusterkube-trash";

impl<R: CommandRunner + Clone + 'static> Agent<R> {
    pub(super) async fn subdir_create_rpc(
        &self,
        req: Request<SubdirCreateRequest>,
    ) -> Reply<SubdirResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let path = subdir_path("path", &req.path)?;
        if req.limit_bytes == 0 {
            return Err(AgentError::invalid("limit_bytes", "must be more than 0").into());
        }
        log_rpc("SubdirCreate", &volume);
        // Creates of different directories need no gluster transaction, so they only
        // serialise per directory; the volume lock is for glusterd work.
        let _guard = self.locks.lock(&subdir_lock(&volume, &path)).await;
        if let Some(v) = self.by_projects(&volume).await? {
            return self.project_subdir_create(&v, path, req.limit_bytes).await;
        }
        self.quota_ready(&volume).await?;
        let dir = self.subdir(&volume, &path).await?;
        let made = self.make_pv_dir(&dir, &volume, &path).inspect_err(|_| {
            self.forget_quota_ready(&volume);
        })?;
        if !made {
            match quota::read_limit(&dir)? {
                Some(limit) if limit != req.limit_bytes => {
                    return Err(AgentError::Conflict(format!(
                        "{path} on {volume} exists with a limit of {limit} bytes, not {}",
                        req.limit_bytes
                    ))
                    .into())
                }
                // A retry: make sure glusterd's list gets it even if the agent restarted
                // before registering it.
                Some(_) => {
                    self.registrar.register(&volume, &path);
                    return Ok(Response::new(SubdirResponse {
                        path,
                        limit_bytes: req.limit_bytes,
                        ..Default::default()
                    }));
                }
                // Made by a create that failed before its limit: finish it.
                None => {}
            }
        }
        quota::write_limit(&dir, req.limit_bytes)?;
        self.registrar.register(&volume, &path);
        Ok(Response::new(SubdirResponse {
            path,
            limit_bytes: req.limit_bytes,
            ..Default::default()
        }))
    }

    pub(super) async fn subdir_delete_rpc(
        &self,
        req: Request<SubdirDeleteRequest>,
    ) -> Reply<SubdirDeleteResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let path = subdir_path("path", &req.path)?;
        log_rpc("SubdirDelete", &volume);
        let _path_guard = self.locks.lock(&subdir_lock(&volume, &path)).await;
        // Cancel first, then take the volume lock: a registration running now finishes
        // before the list below is read.
        self.registrar.cancel(&volume, &path);
        let _guard = self.locks.lock(&volume).await;
        self.info(&volume).await?;
        let dir = self.subdir(&volume, &path).await?;
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Response::new(SubdirDeleteResponse { deleted: false }));
            }
            Err(e) => {
                return Err(AgentError::Io {
                    what: format!("looking up {path} on {volume}"),
                    source: e,
                }
                .into())
            }
            Ok(_) => {}
        }
        // The directory's own attribute says whether it has a limit: asking glusterd's list
        // instead would cost a read of every limit on the volume for each delete. On a volume
        // sized by projects, gluster's quota may be off with the attribute left behind.
        let by_projects = self.by_projects(&volume).await?;
        if by_projects.is_none() && quota::read_limit(&dir)?.is_some() {
            self.gluster
                .quota_remove(&volume, &path)
                .await
                .map_err(AgentError::from)?;
        }
        // On a pool made by hand, a directory that was there before the driver (reused
        // through a StorageClass subDir template) keeps its data: only its limit goes.
        if self.scope.is_some() && !quota::made_here(&dir)? {
            tracing::warn!(volume = %volume, path = %path, "kept a directory this agent did not make; only its limit was removed");
            return Ok(Response::new(SubdirDeleteResponse { deleted: false }));
        }
        // Moved aside at once and removed in the background: a rename through the volume
        // takes a moment, while removing a PV of 10,000 files through FUSE takes minutes,
        // longer than the provisioner waits (and this call holds the volume's lock).
        let trash = dir
            .parent()
            .expect("a PV directory lies under the volume's root")
            .join(TRASH);
        std::fs::create_dir_all(&trash)
            .map_err(AgentError::io(format!("making {TRASH} on {volume}")))?;
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let aside = trash.join(format!("{}-{stamp}", &path[1..]));
        match std::fs::rename(&dir, &aside) {
            Ok(()) => {}
            // A filesystem that refuses the move (XFS between projects that inherit): the
            // directory is removed where it is, as the call waits.
            Err(e) if e.raw_os_error() == Some(nix::libc::EXDEV) => {
                let (d, what) = (dir.clone(), format!("removing {path} on {volume}"));
                tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&d))
                    .await
                    .map_err(|e| Status::internal(format!("{what}: {e}")))?
                    .map_err(AgentError::io(format!("removing {path} on {volume}")))?;
            }
            Err(e) => {
                return Err(
                    AgentError::io(format!("moving {path} on {volume} aside to remove it"))(e)
                        .into(),
                )
            }
        }
        if let Some(v) = by_projects {
            self.project_release_here(&v, &path).await;
        }
        self.empty_trash(&volume, trash);
        Ok(Response::new(SubdirDeleteResponse { deleted: true }))
    }

    /// Removes what SubdirDelete moved into `trash`, in the background, one pass at a time
    /// per volume. Each pass takes whatever is there, so a pass cut short (an agent
    /// restarted) is finished by the next delete on the volume.
    fn empty_trash(&self, volume: &str, trash: PathBuf) {
        let locks = self.locks.clone();
        let key = format!("trash:{volume}");
        let volume = volume.to_string();
        tokio::spawn(async move {
            let _pass = locks.lock(&key).await;
            let started = std::time::Instant::now();
            let removed = tokio::task::spawn_blocking(move || {
                let mut removed = 0usize;
                for e in std::fs::read_dir(&trash)? {
                    std::fs::remove_dir_all(e?.path())?;
                    removed += 1;
                }
                Ok::<_, std::io::Error>(removed)
            })
            .await;
            match removed {
                Ok(Ok(n)) => {
                    tracing::info!(%volume, removed = n, seconds = started.elapsed().as_secs_f64(), "removed deleted PV directories")
                }
                Ok(Err(e)) => {
                    tracing::warn!(%volume, error = %e, "removing deleted PV directories failed; the next delete on the volume tries again")
                }
                Err(e) => tracing::warn!(%volume, error = %e, "removing deleted PV directories"),
            }
        });
    }

    pub(super) async fn subdir_get_rpc(
        &self,
        req: Request<SubdirGetRequest>,
    ) -> Reply<SubdirResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let path = subdir_path("path", &req.path)?;
        log_rpc("SubdirGet", &volume);
        let dir = self.subdir(&volume, &path).await?;
        let limit = tokio::task::spawn_blocking(move || quota::read_pv_size(&dir))
            .await
            .map_err(|e| {
                Status::internal(format!("reading the limit of {path} on {volume}: {e}"))
            })??;
        let limit_bytes = limit.ok_or_else(|| {
            AgentError::NotFound(format!("subdirectory {path} with a limit on {volume}"))
        })?;
        Ok(Response::new(SubdirResponse {
            path,
            limit_bytes,
            ..Default::default()
        }))
    }

    pub(super) async fn subdir_expand_rpc(
        &self,
        req: Request<SubdirCreateRequest>,
    ) -> Reply<SubdirResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let path = subdir_path("path", &req.path)?;
        log_rpc("SubdirExpand", &volume);
        let _guard = self.locks.lock(&subdir_lock(&volume, &path)).await;
        if let Some(v) = self.by_projects(&volume).await? {
            return self.project_subdir_expand(&v, path, req.limit_bytes).await;
        }
        self.quota_ready(&volume).await?;
        let dir = self.subdir(&volume, &path).await?;
        let current = match std::fs::symlink_metadata(&dir) {
            Ok(_) => quota::read_limit(&dir)?,
            Err(_) => None,
        }
        .ok_or_else(|| {
            AgentError::NotFound(format!("subdirectory {path} with a limit on {volume}"))
        })?;
        if req.limit_bytes < current {
            return Err(AgentError::Precondition(format!(
                "{path} on {volume} has a limit of {current} bytes; shrinking it to {} is not supported",
                req.limit_bytes
            ))
            .into());
        }
        if req.limit_bytes > current {
            quota::write_limit(&dir, req.limit_bytes)?;
            self.registrar.register(&volume, &path);
        }
        Ok(Response::new(SubdirResponse {
            path,
            limit_bytes: req.limit_bytes,
            ..Default::default()
        }))
    }

    pub(super) async fn quota_list_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<QuotaListResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        self.info(&name).await?;
        // Gluster's list is only complete once the limits set here are registered.
        let left = self.registrar.flush(&name, Duration::from_secs(30)).await;
        if left > 0 {
            return Err(Status::unavailable(format!(
                "{left} quota limits on {name} are enforced but glusterd has not taken them yet; \
                 see the agent log and retry"
            )));
        }
        let entries = self.quotas(&name).await?;
        Ok(Response::new(QuotaListResponse {
            entries: entries.iter().map(convert::quota).collect(),
        }))
    }

    pub(super) async fn quota_backlog_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<QuotaBacklogResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        Ok(Response::new(QuotaBacklogResponse {
            pending: self.registrar.pending(&name) as u32,
        }))
    }

    pub(super) async fn subdir_list_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<QuotaListResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        let root = self.management_mount(&name).await?;
        let found = tokio::task::spawn_blocking(move || quota::list_top_level(&root))
            .await
            .map_err(|e| Status::internal(format!("listing subdirectories of {name}: {e}")))??;
        Ok(Response::new(QuotaListResponse {
            entries: found
                .iter()
                .map(|d| QuotaEntry {
                    path: d.path.clone(),
                    hard_limit_bytes: d.limit_bytes,
                    used_bytes: d.used_bytes,
                    available_bytes: d.limit_bytes.saturating_sub(d.used_bytes),
                    soft_limit_exceeded: d.soft_limit_exceeded(),
                    hard_limit_exceeded: d.used_bytes >= d.limit_bytes,
                })
                .collect(),
        }))
    }
}

impl<R: CommandRunner + 'static> Agent<R> {
    /// The volume's usage limits; none while quota is off.
    pub(super) async fn quotas(
        &self,
        volume: &str,
    ) -> Result<Vec<gk_gluster::QuotaEntry>, AgentError> {
        match self.gluster.quota_list(volume).await {
            Err(GlusterError::Command { message, .. })
                if message.starts_with("Quota is disabled") =>
            {
                Ok(Vec::new())
            }
            other => Ok(other?),
        }
    }

    /// Makes sure `volume` is started with quota on and quota's check timeouts as the limits
    /// need them ([`crate::quota::SOFT_TIMEOUT_SECONDS`]), asking glusterd
    /// at most once per [`QUOTA_READY_TTL`].
    pub(super) async fn quota_ready(&self, volume: &str) -> Result<(), AgentError> {
        let fresh = |m: &HashMap<String, Instant>| {
            m.get(volume).is_some_and(|t| t.elapsed() < QUOTA_READY_TTL)
        };
        if fresh(&lock(&self.quota_ready)) {
            return Ok(());
        }
        let _guard = self.locks.lock(volume).await;
        let v = self.info(volume).await?;
        if !v.is_started() {
            return Err(AgentError::Precondition(format!(
                "volume {volume} is not started"
            )));
        }
        // Each gluster command costs a round of glusterd transactions: skip the ones the
        // volume's options show are already in effect.
        let opt = |k: &str| v.options.get(k).map(String::as_str);
        if self.scope.is_some() {
            // A pool made by hand keeps the settings its owners gave it: turning quota on
            // starts a crawl of every file, their call to make.
            if opt("features.quota") != Some("on") {
                let (soft, hard) = (
                    crate::quota::SOFT_TIMEOUT_SECONDS,
                    crate::quota::HARD_TIMEOUT_SECONDS,
                );
                return Err(AgentError::Precondition(format!(
                    "quota is off on volume {volume}, a pool made by hand, and this agent \
                     changes no settings of it: run `gluster volume quota {volume} enable` \
                     on a server (it accounts every file once), and for limits enforced as \
                     on the operator's pools `gluster volume set {volume} \
                     features.soft-timeout {soft}` and `features.hard-timeout {hard}` \
                     (docs/external.md)"
                )));
            }
            lock(&self.quota_ready).insert(volume.to_string(), Instant::now());
            return Ok(());
        }
        if opt("features.quota") != Some("on") {
            self.gluster.quota_enable(volume).await?;
        }
        let (soft, hard) = (
            crate::quota::SOFT_TIMEOUT_SECONDS,
            crate::quota::HARD_TIMEOUT_SECONDS,
        );
        if opt("features.soft-timeout") != Some(soft.to_string().as_str())
            || opt("features.hard-timeout") != Some(hard.to_string().as_str())
        {
            self.gluster
                .quota_check_timeouts(volume, soft, hard)
                .await?;
        }
        lock(&self.quota_ready).insert(volume.to_string(), Instant::now());
        Ok(())
    }

    pub(super) fn forget_quota_ready(&self, volume: &str) {
        lock(&self.quota_ready).remove(volume);
    }

    /// The management mount's copy of `path` (an absolute path inside the volume).
    pub(super) async fn subdir(&self, volume: &str, path: &str) -> Result<PathBuf, AgentError> {
        let root = self.management_mount(volume).await.inspect_err(|_| {
            self.forget_quota_ready(volume);
        })?;
        Ok(root.join(&path[1..]))
    }
}
