//! A stand-in for the kubelet, and only for it, until the end-to-end environment has a real
//! one: for each brick pod the controller-manager creates from the operator's StatefulSets, it
//! runs that node's real glusterd (a [`GlusterNet`] node) with a real brick agent serving the
//! TLS Secret the pod mounts, and reports the pod Running and Ready with an address where the
//! agent listens. Everything the operator does stays its production code path.
//!
//! Like a kubelet, it ends a pod's processes when the pod goes away or is replaced by a new
//! one of the same name (a StatefulSet pod deleted for a new template): the agent stops and
//! every process of the node (glusterd, bricks, self-heal daemon) is killed; the new pod then
//! starts glusterd again on the node's state, which restarts the bricks. A node can also be
//! killed for good, as a machine that dies: its pod keeps its address but nothing answers.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gk_agent::{tls, Agent, AgentConfig};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::gluster_net::GlusterNet;
use crate::EnvError;

/// The agents' port; each pod gets its own loopback address, 127.0.0.(10 + node index).
pub const AGENT_PORT: u16 = 24050;

/// What happened to a node's processes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEvent {
    pub node: String,
    pub at: Instant,
    /// True when the pod's processes started, false when they were stopped.
    pub started: bool,
}

#[derive(Default)]
struct Shared {
    dead: HashSet<usize>,
    events: Vec<PodEvent>,
}

pub struct StandInKubelet {
    task: JoinHandle<()>,
    shared: Arc<Mutex<Shared>>,
    nodes: HashMap<String, usize>,
}

impl Drop for StandInKubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A pod whose processes run: its agent, and the uid of the pod they belong to.
struct Serving {
    uid: String,
    stop: oneshot::Sender<()>,
    server: JoinHandle<()>,
    /// The namespace the agent's own FUSE mounts run in: the node's network, TLS directory
    /// and /var/lib/glusterd, as inside the brick pod.
    _mounts: crate::gluster_net::Client,
}

impl StandInKubelet {
    /// Serves brick pods in `namespace`; `nodes` maps Kubernetes node names to `net` nodes.
    pub fn start(
        client: kube::Client,
        namespace: &str,
        net: Arc<GlusterNet>,
        nodes: HashMap<String, usize>,
    ) -> Self {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let secrets: Api<Secret> = Api::namespaced(client, namespace);
        let shared = Arc::new(Mutex::new(Shared::default()));
        let state = shared.clone();
        let names = nodes.clone();
        let task = tokio::spawn(async move {
            let mut running: HashMap<usize, Serving> = HashMap::new();
            // glusterd of every node runs from the start (GlusterNet starts it).
            let mut stopped: HashSet<usize> = HashSet::new();
            loop {
                let r = serve_pods(
                    &pods,
                    &secrets,
                    &net,
                    &names,
                    &state,
                    &mut running,
                    &mut stopped,
                )
                .await;
                if let Err(e) = r {
                    tracing::warn!(error = %e, "stand-in kubelet");
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        Self {
            task,
            shared,
            nodes,
        }
    }

    /// Kills `node` for good, as a machine that dies: its agent and every gluster process
    /// on it stop, and its pod is never served again.
    pub fn kill_node(&self, node: &str) {
        let i = self.nodes[node];
        self.shared.lock().expect("kubelet state").dead.insert(i);
    }

    /// Brings a killed node back, as a machine that is repaired: its pod is served again,
    /// with glusterd started on the node's old state.
    pub fn revive_node(&self, node: &str) {
        let i = self.nodes[node];
        self.shared.lock().expect("kubelet state").dead.remove(&i);
    }

    /// Every start and stop of pod processes so far.
    pub fn events(&self) -> Vec<PodEvent> {
        self.shared.lock().expect("kubelet state").events.clone()
    }
}

fn pod_ip(index: usize) -> String {
    format!("127.0.0.{}", 10 + index)
}

fn node_name(nodes: &HashMap<String, usize>, index: usize) -> String {
    nodes
        .iter()
        .find(|(_, &i)| i == index)
        .map(|(n, _)| n.clone())
        .unwrap_or_default()
}

async fn stop(net: &Arc<GlusterNet>, index: usize, serving: Serving) {
    let _ = serving.stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), serving.server).await;
    let net = net.clone();
    let _ = tokio::task::spawn_blocking(move || net.stop_node(index)).await;
}

async fn serve_pods(
    pods: &Api<Pod>,
    secrets: &Api<Secret>,
    net: &Arc<GlusterNet>,
    nodes: &HashMap<String, usize>,
    shared: &Mutex<Shared>,
    running: &mut HashMap<usize, Serving>,
    stopped: &mut HashSet<usize>,
) -> Result<(), EnvError> {
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=glusterkube-brick"))
        .await
        .map_err(|e| EnvError::Setup(e.to_string()))?;
    let mut current: HashMap<usize, &Pod> = HashMap::new();
    for pod in &list.items {
        let Some(node) = pod.annotations().get("glusterkube.dev/node") else {
            continue;
        };
        if let Some(&index) = nodes.get(node) {
            current.insert(index, pod);
        }
    }
    let dead = shared.lock().expect("kubelet state").dead.clone();
    // Pods that went away, were replaced, or whose node died: their processes end.
    let ended: Vec<usize> = running
        .iter()
        .filter(|(i, s)| {
            dead.contains(i)
                || current
                    .get(i)
                    .is_none_or(|p| p.uid().as_deref() != Some(s.uid.as_str()))
        })
        .map(|(i, _)| *i)
        .collect();
    for index in ended {
        let serving = running.remove(&index).expect("listed above");
        stop(net, index, serving).await;
        stopped.insert(index);
        shared.lock().expect("kubelet state").events.push(PodEvent {
            node: node_name(nodes, index),
            at: Instant::now(),
            started: false,
        });
    }
    for (&index, pod) in &current {
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if dead.contains(&index) {
            // As the node lifecycle controller does for pods on a node that stopped
            // reporting: the pod keeps its address but is no longer ready.
            if ready {
                let status = json!({"status": {"conditions": [
                    {"type": "Ready", "status": "False", "reason": "NodeDied"},
                    {"type": "ContainersReady", "status": "False", "reason": "NodeDied"},
                ]}});
                pods.patch_status(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await
                .map_err(|e| EnvError::Setup(e.to_string()))?;
            }
            continue;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let std::collections::hash_map::Entry::Vacant(slot) = running.entry(index) {
            // As a kubelet would, wait for the pod's Secrets to exist.
            let Some(tls_switched) = node_tls(pod, secrets, net, index).await? else {
                continue;
            };
            if tls_switched && !stopped.contains(&index) {
                let net = net.clone();
                let _ = tokio::task::spawn_blocking(move || net.stop_node(index)).await;
                stopped.insert(index);
            }
            if stopped.contains(&index) {
                let net = net.clone();
                tokio::task::spawn_blocking(move || net.restart_node(index))
                    .await
                    .map_err(|e| EnvError::Setup(e.to_string()))??;
                stopped.remove(&index);
            }
            if let Some((stop, server, mounts)) = start_agent(pod, secrets, net, index).await? {
                slot.insert(Serving {
                    uid: pod.uid().unwrap_or_default(),
                    stop,
                    server,
                    _mounts: mounts,
                });
                shared.lock().expect("kubelet state").events.push(PodEvent {
                    node: node_name(nodes, index),
                    at: Instant::now(),
                    started: true,
                });
            }
        }
        let has_ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_ref())
            .is_some();
        if (!has_ip || !ready) && running.contains_key(&index) {
            let ip = pod_ip(index);
            let status = json!({"status": {
                "phase": "Running",
                "podIP": ip, "podIPs": [{"ip": ip}],
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "ContainersReady", "status": "True"},
                ],
            }});
            pods.patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&status),
            )
            .await
            .map_err(|e| EnvError::Setup(e.to_string()))?;
        }
    }
    Ok(())
}

/// The Secret `pod` mounts as volume `volume`; `None` while it does not exist yet (a kubelet
/// waits for it too).
async fn mounted_secret(
    pod: &Pod,
    secrets: &Api<Secret>,
    volume: &str,
) -> Result<Option<Secret>, EnvError> {
    let name = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .and_then(|v| v.iter().find(|v| v.name == volume))
        .and_then(|v| v.secret.as_ref()?.secret_name.clone())
        .ok_or_else(|| {
            EnvError::Setup(format!(
                "pod {} mounts no Secret as volume {volume}",
                pod.name_any()
            ))
        })?;
    secrets
        .get_opt(&name)
        .await
        .map_err(|e| EnvError::Setup(e.to_string()))
}

/// One key of a Secret's data; empty when absent.
fn secret_bytes(secret: &Secret, key: &str) -> Vec<u8> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone())
        .unwrap_or_default()
}

/// Applies the pod's gluster TLS to node `index` as its entrypoint would: with
/// `GK_GLUSTER_TLS=on`, the `gluster-tls` Secret's files in the node's TLS directory (what
/// the pod mounts at /usr/lib/ssl) and `secure-access`; otherwise neither. `None` while the
/// Secret is missing; else whether TLS was switched, which glusterd only reads at start.
async fn node_tls(
    pod: &Pod,
    secrets: &Api<Secret>,
    net: &GlusterNet,
    index: usize,
) -> Result<Option<bool>, EnvError> {
    let on = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.env.as_ref())
        .and_then(|env| env.iter().find(|e| e.name == "GK_GLUSTER_TLS"))
        .and_then(|e| e.value.as_deref())
        == Some("on");
    let node = &net.nodes()[index];
    if !on {
        return node.set_tls(None).map(Some);
    }
    let Some(secret) = mounted_secret(pod, secrets, "gluster-tls").await? else {
        return Ok(None);
    };
    let text = |k: &str| String::from_utf8_lossy(&secret_bytes(&secret, k)).into_owned();
    let files = crate::gluster_net::TlsFiles {
        cert_pem: text("glusterfs.pem"),
        key_pem: text("glusterfs.key"),
        ca_pem: text("glusterfs.ca"),
    };
    node.set_tls(Some(&files)).map(Some)
}

type Started = (
    oneshot::Sender<()>,
    JoinHandle<()>,
    crate::gluster_net::Client,
);

/// Starts node `index`'s agent with the pod's TLS Secret; `None` while the Secret is missing.
async fn start_agent(
    pod: &Pod,
    secrets: &Api<Secret>,
    net: &GlusterNet,
    index: usize,
) -> Result<Option<Started>, EnvError> {
    let Some(secret) = mounted_secret(pod, secrets, "tls").await? else {
        return Ok(None);
    };
    let data = |k: &str| secret_bytes(&secret, k);
    let tls_config = tls::server_config(&data("ca.crt"), &data("tls.crt"), &data("tls.key"));
    let n = &net.nodes()[index];
    let mounts = net.node_client(index)?;
    let config = AgentConfig {
        advertise_address: n.address.clone(),
        volfile_server: n.address.clone(),
        mount_root: mounts.mount_dir("agent")?,
        mounter: mounts.mounter(),
        brick_roots: vec![n.brick_root()],
        gluster_log_dir: n.log_dir(),
        brick_hung_after: gk_agent::hung::HUNG_AFTER,
    };
    let agent = Agent::new(net.gluster(index), config);
    let addr: SocketAddr = format!("{}:{AGENT_PORT}", pod_ip(index))
        .parse()
        .expect("a socket address");
    // The previous pod's listener may take a moment to close.
    let mut tries = 0;
    let listener = loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let (tx, rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let stop = async {
            let _ = rx.await;
        };
        if let Err(e) = gk_agent::serve(agent, listener, tls_config, stop).await {
            tracing::error!(error = %e, "stand-in agent stopped");
        }
    });
    Ok(Some((tx, server, mounts)))
}
