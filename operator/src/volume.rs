//! GlusterVolume: a started, tuned gluster volume on the cluster's bricks, with status that
//! tells the truth about bricks, heal and capacity, and deletion that keeps data unless asked.

use std::collections::BTreeMap;
use std::sync::Arc;

use gk_agent::proto::{
    BrickReleaseRequest, VolumeCreateRequest, VolumeRequest, VolumeSetRequest,
    VolumeSpec as AgentSpec, VolumeStartRequest, VolumeStopRequest, VolumeType as AgentType,
};
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use tonic::Code;

use crate::cluster::{self, NodeAgent};
use crate::conditions::{self, Desired};
use crate::controller::Context;
use crate::crd::{
    BrickStatus, Capacity, DeletionPolicy, GlusterCluster, GlusterVolume, GlusterVolumeStatus,
    MountInfo, VolumeType,
};
use crate::plan::{self, NodeSlot};
use crate::security;
use crate::Error;

pub const FINALIZER: &str = "glusterkube.dev/gluster-volume";

pub async fn reconcile(gv: Arc<GlusterVolume>, ctx: Arc<Context>) -> Result<Action, Error> {
    let timer = ctx.metrics.reconcile_started("GlusterVolume");
    let api: Api<GlusterVolume> =
        Api::namespaced(ctx.client.clone(), &gv.namespace().unwrap_or_default());
    let result = finalizer(&api, FINALIZER, gv, |event| async {
        match event {
            Finalizer::Apply(gv) => apply(&gv, &ctx).await,
            Finalizer::Cleanup(gv) => cleanup(&gv, &ctx).await,
        }
    })
    .await
    .map_err(|e| match e {
        kube::runtime::finalizer::Error::ApplyFailed(e)
        | kube::runtime::finalizer::Error::CleanupFailed(e) => e,
        other => Error::Finalizer(other.to_string()),
    });
    timer.finish();
    result
}

fn agent_type(t: VolumeType) -> AgentType {
    match t {
        VolumeType::Distribute => AgentType::Distribute,
        VolumeType::Replicate => AgentType::Replicate,
        VolumeType::Arbiter => AgentType::Arbiter,
        VolumeType::Disperse => AgentType::Disperse,
    }
}

async fn cluster_of(ctx: &Context, gv: &GlusterVolume) -> Result<Option<GlusterCluster>, Error> {
    let api: Api<GlusterCluster> =
        Api::namespaced(ctx.client.clone(), &gv.namespace().unwrap_or_default());
    Ok(api.get_opt(&gv.spec.cluster).await?)
}

/// Writes status (only when it changed) and publishes events for condition transitions.
async fn set_status(
    ctx: &Context,
    gv: &GlusterVolume,
    mut status: GlusterVolumeStatus,
    desired: &[Desired],
) -> Result<(), Error> {
    let old = gv.status.clone().unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    status.observed_generation = gv.metadata.generation;
    status.conditions = conditions::merge(&old.conditions, desired, gv.metadata.generation, &now);
    if status != old {
        cluster::write_status::<GlusterVolume>(ctx, gv, &status).await?;
        cluster::publish_transitions(ctx, gv, &old.conditions, &status.conditions).await;
    }
    Ok(())
}

fn waiting(reason: &str, message: String) -> Vec<Desired> {
    vec![
        Desired::new("Ready", false, reason, message.clone()),
        Desired::new("Progressing", true, reason, message),
        Desired::new("Degraded", false, "NotCreated", ""),
    ]
}

async fn apply(gv: &GlusterVolume, ctx: &Context) -> Result<Action, Error> {
    let ns = gv.namespace().unwrap_or_default();
    let name = plan::gluster_volume_name(&ns, &gv.name_any());
    let keep = gv.status.clone().unwrap_or_default();
    let Some(gc) = cluster_of(ctx, gv).await? else {
        let msg = format!(
            "GlusterCluster {} does not exist in namespace {ns}",
            gv.spec.cluster
        );
        set_status(ctx, gv, keep, &waiting("ClusterNotFound", msg.clone())).await?;
        return Err(Error::NotReady(msg));
    };
    // Read-only: certificates are issued by the cluster reconcile alone.
    let creds = cluster::read_credentials(&ctx.client, &gc).await?;
    let (mut agents, down) = cluster::agents(ctx, &gc, &creds).await?;
    if agents.is_empty() {
        let msg = format!("no brick agent of cluster {} answers yet", gc.name_any());
        set_status(ctx, gv, keep, &waiting("WaitingForCluster", msg.clone())).await?;
        return Err(Error::NotReady(msg));
    }

    // Who may mount: set with the volume's creation (before its bricks first start, as
    // server.ssl needs) and kept afterwards. A volume's own options may not loosen it.
    let access = match access_options(gv, &gc) {
        Ok(a) => a,
        Err(e) => {
            let d = vec![
                Desired::new("Ready", false, "InvalidSpec", e.to_string()),
                Desired::new("Progressing", false, "InvalidSpec", e.to_string()),
            ];
            set_status(ctx, gv, keep, &d).await?;
            return Err(e.into());
        }
    };

    // Gluster is the source of truth: an existing volume is never re-planned.
    let existing = info(&mut agents[0], &name).await?;
    if existing.is_none() {
        if !down.is_empty() {
            let msg = format!(
                "waiting for every storage node to place bricks: {}",
                down.iter()
                    .map(|(n, w)| format!("{n}: {w}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            set_status(ctx, gv, keep, &waiting("WaitingForNodes", msg.clone())).await?;
            return Err(Error::NotReady(msg));
        }
        let slots: Vec<NodeSlot> = agents.iter().map(NodeAgent::slot).collect();
        let planned = match plan::bricks(&gv.spec, &name, &slots) {
            Ok(b) => b,
            Err(e) => {
                let d = vec![
                    Desired::new("Ready", false, "InvalidSpec", e.to_string()),
                    Desired::new("Progressing", false, "InvalidSpec", e.to_string()),
                    Desired::new("Degraded", false, "NotCreated", ""),
                ];
                set_status(ctx, gv, keep, &d).await?;
                return Err(e.into());
            }
        };
        let layout = plan::layout(&gv.spec)?;
        let (replica, data, redundancy) = match layout {
            gk_gluster::VolumeLayout::Replicate { replica } => (replica, 0, 0),
            gk_gluster::VolumeLayout::Disperse { data, redundancy } => (0, data, redundancy),
            _ => (0, 0, 0),
        };
        tracing::info!(volume = %name, bricks = planned.len(), "creating gluster volume");
        set_status(
            ctx,
            gv,
            keep.clone(),
            &waiting("Creating", format!("creating gluster volume {name}")),
        )
        .await?;
        let spec = AgentSpec {
            name: name.clone(),
            r#type: agent_type(gv.spec.volume_type) as i32,
            replica,
            disperse_data: data,
            disperse_redundancy: redundancy,
            bricks: planned.iter().map(|b| b.to_string()).collect(),
            options: access.iter().cloned().collect(),
            force: false,
        };
        let anchor = &mut agents[0];
        if let Err(s) = anchor
            .client
            .volume_create(VolumeCreateRequest {
                spec: Some(spec),
                start: true,
            })
            .await
        {
            let e = Error::agent(&anchor.node, s);
            let msg = e.to_string();
            set_status(ctx, gv, keep, &waiting("CreateFailed", msg)).await?;
            return Err(e);
        }
    } else if existing.as_ref().is_some_and(|v| v.status != "Started") {
        agents[0]
            .client
            .volume_start(VolumeStartRequest {
                name: name.clone(),
                force: false,
            })
            .await
            .map_err(|s| Error::agent("volume start", s))?;
    }
    let day2 = match &existing {
        Some(vol) if vol.status == "Started" => {
            crate::resize::run(ctx, gv, &gc, &mut agents, vol, &keep).await?
        }
        _ => crate::resize::Day2 {
            resize: keep.resize.clone(),
            retired: keep.retired_bricks.clone(),
            blocked: None,
        },
    };

    // Options: the profile, then the volume's own. Refusals are reported, not dropped.
    let profile = gv.spec.profile.unwrap_or(gc.spec.default_profile);
    let mut options = plan::options(profile, plan::layout(&gv.spec)?, &gv.spec.options);
    options.extend(access);
    let set = agents[0]
        .client
        .volume_set(VolumeSetRequest {
            name: name.clone(),
            options: options.into_iter().collect(),
        })
        .await
        .map_err(|s| Error::agent(&agents[0].node, s))?
        .into_inner();

    // A volume whose access control gluster refused is never reported Ready.
    if let Some(r) = set
        .rejected
        .iter()
        .find(|r| security::is_access_option(&r.key))
    {
        let msg = format!(
            "gluster refused the access option {}={}: {}; until it is set the volume may be \
             mountable by clients it should refuse. Check the GlusterCluster's tls and \
             clientNetworks",
            r.key, r.value, r.reason
        );
        let d = vec![
            Desired::new("Ready", false, "AccessNotEnforced", msg.clone()),
            Desired::new("Degraded", true, "AccessNotEnforced", msg.clone()),
        ];
        set_status(ctx, gv, keep, &d).await?;
        return Err(Error::NotReady(msg));
    }
    observe(gv, ctx, &gc, &name, &mut agents, &set.rejected, day2).await
}

/// The access-control options of `gv`'s volume on cluster `gc` (see `security`).
pub fn access_options(
    gv: &GlusterVolume,
    gc: &GlusterCluster,
) -> Result<Vec<(String, String)>, plan::SpecError> {
    if let Some(k) = gv
        .spec
        .options
        .keys()
        .find(|k| security::is_access_option(k))
    {
        return Err(plan::SpecError {
            field: format!("spec.options.{k}"),
            reason: "access control (TLS, auth.allow, auth.ssl-allow) is set by the operator \
                     from the GlusterCluster's tls and clientNetworks; remove this option"
                .into(),
        });
    }
    let access = security::cluster_access(
        gc.spec.tls.enabled,
        &gc.uid().unwrap_or_default(),
        &gc.spec.client_networks,
    );
    security::volume_options(&access).map_err(|e| plan::SpecError {
        field: format!("GlusterCluster {}: spec.{}", gc.name_any(), e.field),
        reason: e.reason,
    })
}

async fn info(agent: &mut NodeAgent, name: &str) -> Result<Option<gk_agent::proto::Volume>, Error> {
    match agent
        .client
        .volume_info(VolumeRequest { name: name.into() })
        .await
    {
        Ok(r) => Ok(r.into_inner().volume),
        Err(s) if s.code() == Code::NotFound => Ok(None),
        Err(s) => Err(Error::agent(&agent.node, s)),
    }
}

/// Reads bricks, heal and capacity, restarts brick processes that died on healthy nodes, and
/// writes the status.
async fn observe(
    gv: &GlusterVolume,
    ctx: &Context,
    gc: &GlusterCluster,
    name: &str,
    agents: &mut [NodeAgent],
    rejected: &[gk_agent::proto::RejectedOption],
    day2: crate::resize::Day2,
) -> Result<Action, Error> {
    let anchor = &mut agents[0];
    let vol = info(anchor, name)
        .await?
        .ok_or_else(|| Error::NotReady(format!("volume {name} vanished")))?;
    let st = anchor
        .client
        .volume_status(VolumeRequest { name: name.into() })
        .await
        .map_err(|s| Error::agent(&anchor.node, s))?
        .into_inner();
    let heal = if vol.replica_count > 1 || vol.disperse_count > 0 {
        anchor
            .client
            .heal_info(VolumeRequest { name: name.into() })
            .await
            .ok()
            .map(|r| r.into_inner())
    } else {
        None
    };
    // Nodes whose agent is down are named from the cluster's last known peers.
    let mut node_of: BTreeMap<&str, &str> = gc
        .status
        .iter()
        .flat_map(|s| &s.peers)
        .map(|p| (p.address.as_str(), p.node.as_str()))
        .collect();
    node_of.extend(agents.iter().map(|a| (a.address.as_str(), a.node.as_str())));
    let bricks: Vec<BrickStatus> = vol
        .bricks
        .iter()
        .map(|b| {
            let (host, path) = b.split_once(':').unwrap_or((b.as_str(), ""));
            let online = st.bricks.iter().any(|s| &s.brick == b && s.online);
            let h = heal
                .as_ref()
                .and_then(|h| h.bricks.iter().find(|x| &x.brick == b));
            BrickStatus {
                node: node_of.get(host).map(|s| s.to_string()).unwrap_or_default(),
                host: host.to_string(),
                path: path.to_string(),
                online,
                heal_pending: h.map(|h| h.pending as i64),
                split_brain: h.map(|h| h.split_brain as i64),
            }
        })
        .collect();
    let online = bricks.iter().filter(|b| b.online).count();
    let total = bricks.len();
    let pending = heal.as_ref().map(|h| h.pending_total as i64);
    let split = heal.as_ref().map(|h| h.split_brain_total as i64);

    // Capacity: per set, the smallest brick limits; data bricks per set carry user data.
    let set = if vol.disperse_count > 0 {
        vol.disperse_count
    } else {
        vol.replica_count.max(1)
    } as usize;
    let data_per_set = if vol.disperse_count > 0 {
        (vol.disperse_count - vol.redundancy_count) as u64
    } else {
        1
    };
    let mut total_bytes = 0u64;
    let mut free_bytes = 0u64;
    for chunk in vol.bricks.chunks(set.max(1)) {
        let sizes: Vec<(u64, u64)> = chunk
            .iter()
            .filter_map(|b| st.bricks.iter().find(|s| &s.brick == b && s.online))
            .map(|s| (s.size_total_bytes, s.size_free_bytes))
            .collect();
        // Rounded to MiB: status follows real usage without rewriting on every few bytes.
        let mib = |b: u64| b / (1 << 20) * (1 << 20);
        total_bytes += mib(sizes.iter().map(|s| s.0).min().unwrap_or(0)) * data_per_set;
        free_bytes += mib(sizes.iter().map(|s| s.1).min().unwrap_or(0)) * data_per_set;
    }
    let hosts: Vec<String> = vol
        .bricks
        .iter()
        .filter_map(|b| b.split_once(':').map(|(h, _)| h.to_string()))
        .fold(Vec::new(), |mut acc, h| {
            if !acc.contains(&h) {
                acc.push(h);
            }
            acc
        });
    let mount = hosts.split_first().map(|(first, rest)| MountInfo {
        volume: name.to_string(),
        volfile_server: first.clone(),
        backup_volfile_servers: rest.to_vec(),
        tls: gc.spec.tls.enabled,
    });

    // A brick process that died on a node whose agent answers is restarted, then healed.
    let dead_on_live_nodes = bricks
        .iter()
        .any(|b| !b.online && agents.iter().any(|a| a.address == b.host));
    let mut desired = Vec::new();
    let day2_conditions = crate::resize::conditions(&day2);
    let degraded_reason = if online < total {
        Some((
            "BricksOffline",
            format!(
                "{online} of {total} bricks online; offline: {}",
                bricks
                    .iter()
                    .filter(|b| !b.online)
                    .map(|b| format!("{}:{}", b.host, b.path))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    } else if split.unwrap_or(0) > 0 {
        Some((
            "SplitBrain",
            format!(
                "{} entries in split-brain; resolve with `gluster volume heal {name} split-brain`",
                split.unwrap_or(0)
            ),
        ))
    } else if let (_, Some((reason, msg))) = &day2_conditions {
        Some((*reason, msg.clone()))
    } else if pending.unwrap_or(0) > 0 {
        Some((
            "HealPending",
            format!("{} entries waiting for self-heal", pending.unwrap_or(0)),
        ))
    } else {
        None
    };
    let ready = vol.status == "Started"
        && online > 0
        && degraded_reason
            .as_ref()
            .is_none_or(|(r, _)| *r != "BricksOffline" || online * 2 > total);
    desired.push(Desired::new(
        "Ready",
        ready,
        if ready { "Started" } else { "NotServing" },
        if ready {
            format!("volume {name} is started with {online}/{total} bricks online")
        } else {
            format!(
                "volume {name}: {} with {online}/{total} bricks online",
                vol.status
            )
        },
    ));
    match &degraded_reason {
        Some((reason, msg)) => desired.push(Desired::new("Degraded", true, reason, msg.clone())),
        None => desired.push(Desired::new("Degraded", false, "Healthy", "")),
    }
    desired.push(match day2_conditions.0 {
        Some(p) => p,
        // Self-heal filling bricks (after a replacement or a restart) is progress too.
        None if pending.unwrap_or(0) > 0 => Desired::new(
            "Progressing",
            true,
            "Healing",
            format!("{} entries waiting for self-heal", pending.unwrap_or(0)),
        ),
        None => Desired::new("Progressing", false, "Stable", ""),
    });
    if !rejected.is_empty() {
        desired.push(Desired::new(
            "OptionsApplied",
            false,
            "OptionsRejected",
            rejected
                .iter()
                .map(|r| format!("{}={}: {}", r.key, r.value, r.reason))
                .collect::<Vec<_>>()
                .join("; "),
        ));
    } else {
        desired.push(Desired::new("OptionsApplied", true, "Applied", ""));
    }
    let status = GlusterVolumeStatus {
        volume_id: Some(vol.id.clone()),
        bricks_summary: Some(format!("{online}/{total}")),
        bricks,
        heal_pending: pending,
        split_brain: split,
        capacity: Some(Capacity {
            total_bytes: total_bytes as i64,
            used_bytes: total_bytes.saturating_sub(free_bytes) as i64,
            free_bytes: free_bytes as i64,
            total: human_bytes(total_bytes),
        }),
        mount,
        retired_bricks: day2.retired,
        resize: day2.resize,
        ..Default::default()
    };
    ctx.metrics.volume(
        &gv.namespace().unwrap_or_default(),
        &gv.name_any(),
        online as i64,
        total as i64,
        pending.unwrap_or(0),
    );
    ctx.metrics.capacity(
        &gv.namespace().unwrap_or_default(),
        &gv.name_any(),
        total_bytes as i64,
        total_bytes.saturating_sub(free_bytes) as i64,
    );
    let migrating = status.resize.as_ref().is_some_and(|r| {
        matches!(
            r.phase,
            crate::crd::MigrationPhase::Pending | crate::crd::MigrationPhase::InProgress
        )
    });
    set_status(ctx, gv, status, &desired).await?;

    if dead_on_live_nodes {
        tracing::warn!(volume = %name, "restarting offline bricks");
        agents[0]
            .client
            .volume_start(VolumeStartRequest {
                name: name.into(),
                force: true,
            })
            .await
            .map_err(|s| Error::agent(&agents[0].node, s))?;
        let _ = agents[0]
            .client
            .heal_start(VolumeRequest { name: name.into() })
            .await;
        return Ok(Action::requeue(std::time::Duration::from_secs(2)));
    }
    if pending.unwrap_or(0) > 0 {
        let _ = agents[0]
            .client
            .heal_start(VolumeRequest { name: name.into() })
            .await;
        return Ok(Action::requeue(std::time::Duration::from_secs(3)));
    }
    if migrating {
        return Ok(Action::requeue(std::time::Duration::from_secs(3)));
    }
    Ok(Action::requeue(ctx.config.refresh))
}

pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b}")
    } else {
        format!("{v:.1}{}", UNITS[u])
    }
}

/// PersistentVolumes of the CSI driver `driver` per GlusterVolume (namespace, name), read
/// from the "pool" volume attribute the driver writes into every PV it provisions.
pub fn persistent_volumes_per_volume<'a>(
    pvs: impl IntoIterator<Item = &'a PersistentVolume>,
    driver: &str,
) -> std::collections::BTreeMap<(String, String), i64> {
    let mut counts = std::collections::BTreeMap::new();
    for pv in pvs {
        let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
            continue;
        };
        if csi.driver != driver {
            continue;
        }
        let pool = csi.volume_attributes.as_ref().and_then(|a| a.get("pool"));
        if let Some((ns, name)) = pool.and_then(|p| p.split_once('/')) {
            *counts
                .entry((ns.to_string(), name.to_string()))
                .or_insert(0) += 1;
        }
    }
    counts
}

/// Deletion: refused while PersistentVolumes use the volume; otherwise the gluster volume is
/// stopped and deleted, and its brick directories removed only under deletionPolicy Delete.
async fn cleanup(gv: &GlusterVolume, ctx: &Context) -> Result<Action, Error> {
    let ns = gv.namespace().unwrap_or_default();
    let name = plan::gluster_volume_name(&ns, &gv.name_any());
    let pvs: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let users: Vec<String> = pvs
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|pv| {
            // A released PV whose reclaim policy is Delete is the provisioner deleting it:
            // waiting for it would deadlock with its own DeleteVolume.
            let releasing = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released")
                && pv
                    .spec
                    .as_ref()
                    .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
                    == Some("Delete");
            !releasing
                && pv
                    .spec
                    .as_ref()
                    .and_then(|s| s.csi.as_ref())
                    .is_some_and(|csi| {
                        csi.driver == ctx.config.csi_driver
                            && csi
                                .volume_attributes
                                .as_ref()
                                .and_then(|a| a.get("glusterVolume"))
                                == Some(&name)
                    })
        })
        .map(|pv| pv.name_any())
        .collect();
    if !users.is_empty() {
        let msg = format!(
            "{} PersistentVolume(s) still use this volume: {}; delete them first",
            users.len(),
            users.join(", ")
        );
        let d = vec![
            Desired::new("Ready", false, "DeletionBlocked", msg.clone()),
            Desired::new("Degraded", false, "Healthy", ""),
            Desired::new("Progressing", false, "DeletionBlocked", msg.clone()),
        ];
        set_status(ctx, gv, gv.status.clone().unwrap_or_default(), &d).await?;
        return Err(Error::DeletionBlocked(msg));
    }
    let Some(gc) = cluster_of(ctx, gv).await? else {
        tracing::warn!(volume = %name, "cluster is gone; nothing left to delete in gluster");
        return Ok(Action::await_change());
    };
    // Read-only: certificates are issued by the cluster reconcile alone.
    let creds = cluster::read_credentials(&ctx.client, &gc).await?;
    let (mut agents, _down) = cluster::agents(ctx, &gc, &creds).await?;
    let Some(anchor) = agents.first_mut() else {
        // A volume is created only through an answering agent, which also puts the node in
        // the cluster's status: with neither recorded, nothing of this volume is in gluster.
        let pool_never_formed = gc.status.as_ref().is_none_or(|s| s.peers.is_empty());
        let never_created = gv.status.as_ref().is_none_or(|s| s.volume_id.is_none());
        if pool_never_formed && never_created {
            tracing::info!(volume = %name, "never created in gluster; nothing to delete");
            return Ok(Action::await_change());
        }
        return Err(Error::NotReady(format!(
            "no brick agent of cluster {} answers; cannot delete {name}",
            gc.name_any()
        )));
    };
    let Some(vol) = info(anchor, &name).await? else {
        return Ok(Action::await_change());
    };
    if vol.status == "Started" {
        anchor
            .client
            .volume_stop(VolumeStopRequest {
                name: name.clone(),
                force: true,
            })
            .await
            .map_err(|s| Error::agent(&anchor.node, s))?;
    }
    anchor
        .client
        .volume_delete(VolumeRequest { name: name.clone() })
        .await
        .map_err(|s| Error::agent(&anchor.node, s))?;
    tracing::info!(volume = %name, "deleted gluster volume");
    if gv.spec.deletion_policy == DeletionPolicy::Delete {
        let retired = gv
            .status
            .as_ref()
            .map(|s| s.retired_bricks.clone())
            .unwrap_or_default();
        for b in vol.bricks.iter().chain(&retired) {
            let Some((host, path)) = b.split_once(':') else {
                continue;
            };
            if let Some(a) = agents.iter_mut().find(|a| a.address == host) {
                a.client
                    .brick_release(BrickReleaseRequest {
                        path: path.to_string(),
                    })
                    .await
                    .map_err(|s| Error::agent(&a.node, s))?;
            }
        }
    }
    Ok(Action::await_change())
}

/// The volumes of the cluster a brick pod belongs to.
pub fn pod_to_volumes(
    volumes: &[Arc<GlusterVolume>],
    pod: &k8s_openapi::api::core::v1::Pod,
) -> Vec<ObjectRef<GlusterVolume>> {
    let (Some(cluster), Some(ns)) = (
        pod.labels().get(crate::cluster::LABEL_CLUSTER),
        pod.namespace(),
    ) else {
        return Vec::new();
    };
    volumes
        .iter()
        .filter(|v| &v.spec.cluster == cluster && v.namespace().as_deref() == Some(ns.as_str()))
        .map(|v| ObjectRef::from_obj(v.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_options_come_from_the_cluster_and_cannot_be_overridden() {
        let gc: GlusterCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
            "metadata": {"name": "c1", "namespace": "storage", "uid": "u-1"},
            "spec": {"nodes": [{"name": "a", "storage": {"directory": "/srv/g"}}]},
        }))
        .unwrap();
        let gv = |options: serde_json::Value| -> GlusterVolume {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
                "metadata": {"name": "v", "namespace": "storage"},
                "spec": {"cluster": "c1", "type": "Distribute", "options": options},
            }))
            .unwrap()
        };
        let tls = access_options(&gv(serde_json::json!({})), &gc).unwrap();
        assert!(tls.contains(&("auth.ssl-allow".into(), "gk-csi-node,gk-node-u-1".into())));
        assert!(tls.contains(&("server.ssl".into(), "on".into())));

        let e = access_options(&gv(serde_json::json!({"auth.allow": "*"})), &gc).unwrap_err();
        assert_eq!(e.field, "spec.options.auth.allow");

        let mut plain = gc.clone();
        plain.spec.tls.enabled = false;
        let e = access_options(&gv(serde_json::json!({})), &plain).unwrap_err();
        assert_eq!(e.field, "GlusterCluster c1: spec.clientNetworks");
        plain.spec.client_networks = vec!["10.244.0.0/16".into()];
        assert_eq!(
            access_options(&gv(serde_json::json!({})), &plain).unwrap(),
            [("auth.allow".to_string(), "10.244.*.*".to_string())]
        );
    }

    #[test]
    fn a_brick_pod_wakes_the_volumes_of_its_cluster_only() {
        let vol = |ns: &str, name: &str, cluster: &str| -> Arc<GlusterVolume> {
            Arc::new(
                serde_json::from_value(serde_json::json!({
                    "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"cluster": cluster, "type": "Distribute", "size": "1Gi"},
                }))
                .unwrap(),
            )
        };
        let volumes = [
            vol("storage", "pool", "c1"),
            vol("storage", "other", "c2"),
            vol("elsewhere", "same-name-cluster", "c1"),
            vol("storage", "scratch", "c1"),
        ];
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c1-node-a-0", "namespace": "storage",
                         "labels": {crate::cluster::LABEL_CLUSTER: "c1"}},
        }))
        .unwrap();
        let woken: Vec<String> = pod_to_volumes(&volumes, &pod)
            .into_iter()
            .map(|r| format!("{}/{}", r.namespace.unwrap(), r.name))
            .collect();
        assert_eq!(woken, ["storage/pool", "storage/scratch"]);

        let unlabelled: k8s_openapi::api::core::v1::Pod = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "x", "namespace": "storage"}}),
        )
        .unwrap();
        assert!(pod_to_volumes(&volumes, &unlabelled).is_empty());
    }

    fn pv(driver: &str, pool: Option<&str>) -> PersistentVolume {
        let mut attrs = serde_json::json!({});
        if let Some(p) = pool {
            attrs["pool"] = p.into();
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv"},
            "spec": {"csi": {"driver": driver, "volumeHandle": "h", "volumeAttributes": attrs}},
        }))
        .unwrap()
    }

    #[test]
    fn counts_persistent_volumes_of_our_driver_per_pool() {
        let d = "gluster.glusterkube.dev";
        let pvs = [
            pv(d, Some("storage/pool")),
            pv(d, Some("storage/pool")),
            pv(d, Some("apps/pvc-1")),
            pv("other.csi", Some("storage/pool")),
            pv(d, None),
        ];
        let counts = persistent_volumes_per_volume(&pvs, d);
        assert_eq!(
            counts.into_iter().collect::<Vec<_>>(),
            vec![
                (("apps".into(), "pvc-1".into()), 1),
                (("storage".into(), "pool".into()), 2),
            ]
        );
    }
}
