//! Reaping mount pods that have outlived their reason: a pod whose volume is no longer staged
//! on this node, whose record names another staging path, or whose process cannot start (a
//! mount flag its client refuses, an image that cannot be pulled) while nothing is mounted.
//! Such a pod otherwise restarts for ever, and a stage of the same volume waits on it. The
//! plugin runs a pass at start and then periodically; each removal gets a Warning Event on
//! the pod, saying why.
//!
//! [`verdict`] decides from what was observed, without side effects; [`NodeService::reap`]
//! observes and acts.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Resource, ResourceExt};

use super::mount_pods::{
    serving, MountPods, MountSpec, MOUNT_POD_LABEL, STAGING_ANNOTATION, VOLUME_ANNOTATION,
};
use super::NodeService;
use crate::state::StagedVolume;

/// How long a mount pod may fail before a pass removes it, by default (the node plugin's
/// `--reap-grace-seconds`): a stage waits longer than this for its client only when the pod
/// still starts, and a pod this young may be a stage in flight. Passes run this often too.
pub const GRACE: Duration = Duration::from_secs(60);

/// What a pass knows of one mount pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    pub name: String,
    /// The volume it serves (its annotation).
    pub volume_id: Option<String>,
    /// The staging path it mounts (its annotation).
    pub staging: Option<PathBuf>,
    /// What it mounts, as the plugin told it.
    pub spec: Option<MountSpec>,
    pub age: Duration,
    pub deleting: bool,
    /// Why its process cannot start, when the kubelet says so (a crash loop, an image that
    /// cannot be pulled, a container that cannot be made).
    pub cannot_start: Option<String>,
}

/// Why a pod is removed: the Event's reason and note, and whether the plugin's record of the
/// volume goes too (only when no pod of an application has the volume published).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    pub reason: &'static str,
    pub note: String,
    pub forget_record: bool,
}

/// Whether to remove `pod`, given the plugin's record of its volume, whether a live client
/// serves the staging path, and how long a pod may fail (`grace`). A pod whose client serves
/// is never removed: it may be all that keeps an application's files reachable.
pub fn verdict(
    pod: &PodFacts,
    record: Option<&StagedVolume>,
    serving: bool,
    grace: Duration,
) -> Option<Removal> {
    if pod.deleting || serving || pod.age < grace {
        return None;
    }
    let volume = pod.volume_id.as_deref()?;
    let Some(record) = record else {
        return Some(Removal {
            reason: "MountPodOrphaned",
            note: format!(
                "mount pod {} serves volume {volume}, which is not staged on this node; removed",
                pod.name
            ),
            forget_record: false,
        });
    };
    if pod.staging.as_ref() != Some(&record.staging) {
        return Some(Removal {
            reason: "MountPodStale",
            note: format!(
                "mount pod {} mounts volume {volume} at {}, but it is staged at {}; removed, \
                 and made again for the staging path",
                pod.name,
                pod.staging
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "no path".into()),
                record.staging.display()
            ),
            forget_record: false,
        });
    }
    let published = !record.targets.is_empty();
    if let Some(why) = &pod.cannot_start {
        return Some(Removal {
            reason: "MountPodCannotStart",
            note: if published {
                format!(
                    "{why}; removed, and made again with the node plugin's current settings \
                     (the volume is published to pods on this node)"
                )
            } else {
                format!(
                    "{why}; removed with the plugin's record of volume {volume}, which never \
                     mounted (the next NodeStageVolume starts anew)"
                )
            },
            forget_record: !published,
        });
    }
    if pod.spec.as_ref() != Some(&MountSpec::of(record)) {
        return Some(Removal {
            reason: "MountPodStale",
            note: format!(
                "mount pod {} does not mount volume {volume} as it is staged and serves \
                 nothing; removed, and made again as staged",
                pod.name
            ),
            forget_record: false,
        });
    }
    None
}

/// The facts of a mount pod as the API server has it.
pub fn facts(pod: &Pod, now: k8s_openapi::jiff::Timestamp) -> PodFacts {
    let annotations = pod.annotations();
    let spec = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.env.as_ref())
        .and_then(|env| env.iter().find(|e| e.name == "GK_MOUNT_SPEC"))
        .and_then(|e| e.value.as_deref())
        .and_then(|v| serde_json::from_str(v).ok());
    let age = pod
        .creation_timestamp()
        .and_then(|t| now.duration_since(t.0).try_into().ok())
        .unwrap_or_default();
    PodFacts {
        name: pod.name_any(),
        volume_id: annotations.get(VOLUME_ANNOTATION).cloned(),
        staging: annotations.get(STAGING_ANNOTATION).map(PathBuf::from),
        spec,
        age,
        deleting: pod.metadata.deletion_timestamp.is_some(),
        cannot_start: gk_api::agents::pod_problem(pod)
            .filter(|(_, stuck)| *stuck)
            .map(|(why, _)| why),
    }
}

/// What one pass did: the pods removed, and what could not be done.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reaped {
    pub removed: Vec<String>,
    pub failed: Vec<String>,
}

impl NodeService {
    /// One pass over this node's mount pods: each one [`verdict`] condemns is deleted (its
    /// volume's lock held, so no stage or repair of it runs meanwhile), with a Warning Event.
    pub async fn reap(&self, recorder: &Recorder, grace: Duration) -> Reaped {
        let mut done = Reaped::default();
        let Some(pods) = &self.mount_pods else {
            return done;
        };
        let api: Api<Pod> = Api::namespaced(pods.client.clone(), &pods.namespace);
        let selector = format!(
            "{}={},glusterkube.dev/node={}",
            MOUNT_POD_LABEL.0, MOUNT_POD_LABEL.1, pods.node
        );
        let list = match api.list(&ListParams::default().labels(&selector)).await {
            Ok(l) => l,
            Err(e) => {
                done.failed.push(format!("listing mount pods: {e}"));
                return done;
            }
        };
        let now = k8s_openapi::jiff::Timestamp::now();
        for pod in &list.items {
            let f = facts(pod, now);
            let Some(volume) = f.volume_id.clone() else {
                continue;
            };
            let Ok(_guard) = self.locks.try_lock(&volume) else {
                continue;
            };
            let record = self.state.load(&volume).ok().flatten();
            let at = record
                .as_ref()
                .map(|r| r.staging.clone())
                .or(f.staging.clone());
            let live = at.as_deref().is_some_and(serving);
            let Some(removal) = verdict(&f, record.as_ref(), live, grace) else {
                continue;
            };
            tracing::warn!(pod = %f.name, volume_id = %volume, reason = removal.reason, note = %removal.note, "removing a mount pod");
            // Released first (at the path it serves): a pod asked to stop otherwise serves
            // until its volume is unstaged. The mark is withdrawn once the pod is gone,
            // without holding up this pass.
            let released = f.staging.clone().or(at.clone());
            if let Some(staging) = &released {
                super::mount_pods::release(staging);
            }
            if let Err(e) = remove(pods, &f.name).await {
                done.failed.push(format!("{}: {e}", f.name));
                continue;
            }
            if let Some(staging) = released {
                let (pods, name) = (pods.clone(), f.name.clone());
                tokio::spawn(async move { pods.unrelease_when_gone(&name, &staging).await });
            }
            if removal.forget_record {
                if let Err(e) = self.state.remove(&volume) {
                    done.failed.push(format!("forgetting {volume}: {e}"));
                }
            }
            let event = Event {
                type_: EventType::Warning,
                reason: removal.reason.into(),
                note: Some(removal.note.chars().take(1000).collect()),
                action: "Reap".into(),
                secondary: None,
            };
            if let Err(e) = recorder.publish(&event, &pod.object_ref(&())).await {
                tracing::warn!(error = %e, pod = %f.name, "publishing the removal event failed");
            }
            done.removed.push(f.name);
        }
        done
    }
}

async fn remove(pods: &MountPods, name: &str) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(pods.client.clone(), &pods.namespace);
    match api.delete(name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Published;

    fn record() -> StagedVolume {
        StagedVolume {
            volume_id: "subdir/storage/pool/pvc-1".into(),
            staging: PathBuf::from("/var/lib/kubelet/plugins/x/globalmount"),
            servers: vec!["a".into()],
            volume: "storage-pool".into(),
            subdir: Some("pvc-1".into()),
            flags: vec![],
            tls: true,
            tls_secret: None,
            mount_pod: Some("gk-mount-1".into()),
            targets: vec![],
        }
    }

    fn pod() -> PodFacts {
        PodFacts {
            name: "gk-mount-1".into(),
            volume_id: Some("subdir/storage/pool/pvc-1".into()),
            staging: Some(PathBuf::from("/var/lib/kubelet/plugins/x/globalmount")),
            spec: Some(MountSpec::of(&record())),
            age: Duration::from_secs(600),
            deleting: false,
            cannot_start: None,
        }
    }

    #[test]
    fn a_healthy_or_young_or_serving_pod_stays() {
        assert_eq!(verdict(&pod(), Some(&record()), false, GRACE), None);
        let crashing = PodFacts {
            cannot_start: Some("container client keeps failing".into()),
            ..pod()
        };
        // Its client serves: an application may depend on it.
        assert_eq!(verdict(&crashing, Some(&record()), true, GRACE), None);
        assert_eq!(verdict(&crashing, None, true, GRACE), None);
        // Young: a stage may still be waiting for it.
        let young = PodFacts {
            age: Duration::from_secs(5),
            ..crashing.clone()
        };
        assert_eq!(verdict(&young, None, false, GRACE), None);
        let going = PodFacts {
            deleting: true,
            ..crashing
        };
        assert_eq!(verdict(&going, None, false, GRACE), None);
    }

    #[test]
    fn a_pod_of_a_volume_no_longer_staged_goes() {
        let r = verdict(&pod(), None, false, GRACE).unwrap();
        assert_eq!(r.reason, "MountPodOrphaned");
        assert!(r.note.contains("subdir/storage/pool/pvc-1"), "{}", r.note);
        assert!(!r.forget_record);
    }

    #[test]
    fn a_pod_that_cannot_start_goes_and_a_stage_that_never_mounted_is_forgotten() {
        let bad = PodFacts {
            cannot_start: Some("pod gk-mount-1: container client keeps failing".into()),
            ..pod()
        };
        let r = verdict(&bad, Some(&record()), false, GRACE).unwrap();
        assert_eq!(r.reason, "MountPodCannotStart");
        assert!(r.forget_record);
        assert!(r.note.contains("keeps failing"), "{}", r.note);
        // Published to a pod: the record stays, so the repair pass makes the pod again.
        let published = StagedVolume {
            targets: vec![Published {
                path: "/var/lib/kubelet/pods/p/volumes/v/mount".into(),
                readonly: false,
            }],
            ..record()
        };
        let r = verdict(&bad, Some(&published), false, GRACE).unwrap();
        assert!(!r.forget_record);
    }

    #[test]
    fn a_pod_for_another_staging_path_or_spec_goes_and_the_record_stays() {
        let moved = PodFacts {
            staging: Some(PathBuf::from("/var/lib/kubelet/plugins/y/globalmount")),
            ..pod()
        };
        let r = verdict(&moved, Some(&record()), false, GRACE).unwrap();
        assert_eq!(r.reason, "MountPodStale");
        assert!(!r.forget_record);
        let other_flags = PodFacts {
            spec: Some(MountSpec {
                flags: vec!["ro,remount,exec".into()],
                ..MountSpec::of(&record())
            }),
            ..pod()
        };
        let r = verdict(&other_flags, Some(&record()), false, GRACE).unwrap();
        assert_eq!(r.reason, "MountPodStale");
        assert!(!r.forget_record);
    }
}
