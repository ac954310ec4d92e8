//! A stand-in for the kubelet, and only for it, until the end-to-end environment has a real
//! one: for each brick pod the controller-manager creates from the operator's StatefulSets, it
//! runs that node's real glusterd (a [`GlusterNet`] node) with a real brick agent serving the
//! TLS Secret the pod mounts, and reports the pod Running and Ready with an address where the
//! agent listens. Everything the operator does stays its production code path.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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

pub struct StandInKubelet {
    task: JoinHandle<()>,
}

impl Drop for StandInKubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
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
        let task = tokio::spawn(async move {
            let mut running: HashMap<usize, oneshot::Sender<()>> = HashMap::new();
            loop {
                if let Err(e) = serve_pods(&pods, &secrets, &net, &nodes, &mut running).await {
                    tracing::warn!(error = %e, "stand-in kubelet");
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        Self { task }
    }
}

fn pod_ip(index: usize) -> String {
    format!("127.0.0.{}", 10 + index)
}

async fn serve_pods(
    pods: &Api<Pod>,
    secrets: &Api<Secret>,
    net: &GlusterNet,
    nodes: &HashMap<String, usize>,
    running: &mut HashMap<usize, oneshot::Sender<()>>,
) -> Result<(), EnvError> {
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=glusterkube-brick"))
        .await
        .map_err(|e| EnvError::Setup(e.to_string()))?;
    for pod in list.items {
        let Some(node) = pod.annotations().get("glusterkube.dev/node") else {
            continue;
        };
        let Some(&index) = nodes.get(node) else {
            continue;
        };
        if let std::collections::hash_map::Entry::Vacant(slot) = running.entry(index) {
            if let Some(stop) = start_agent(&pod, secrets, net, index).await? {
                slot.insert(stop);
            }
        }
        let has_ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_ref())
            .is_some();
        if !has_ip {
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

/// Starts node `index`'s agent with the pod's TLS Secret; `None` while the Secret is missing.
async fn start_agent(
    pod: &Pod,
    secrets: &Api<Secret>,
    net: &GlusterNet,
    index: usize,
) -> Result<Option<oneshot::Sender<()>>, EnvError> {
    let secret_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .and_then(|v| {
            v.iter()
                .find_map(|v| v.secret.as_ref()?.secret_name.clone())
        })
        .ok_or_else(|| EnvError::Setup(format!("pod {} mounts no TLS Secret", pod.name_any())))?;
    let Some(secret) = secrets
        .get_opt(&secret_name)
        .await
        .map_err(|e| EnvError::Setup(e.to_string()))?
    else {
        return Ok(None); // As a kubelet would, wait for the Secret to exist.
    };
    let data = |k: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(k))
            .map(|b| b.0.clone())
            .unwrap_or_default()
    };
    let tls_config = tls::server_config(&data("ca.crt"), &data("tls.crt"), &data("tls.key"));
    let n = &net.nodes()[index];
    let config = AgentConfig {
        advertise_address: n.address.clone(),
        volfile_server: n.address.clone(),
        mount_root: net.scratch_dir(&format!("pod-mounts-{index}"))?,
        mounter: net.client_mounter(),
        brick_roots: vec![n.brick_root()],
    };
    let agent = Agent::new(net.gluster(index), config);
    let addr: SocketAddr = format!("{}:{AGENT_PORT}", pod_ip(index))
        .parse()
        .expect("a socket address");
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let stop = async {
            let _ = rx.await;
        };
        if let Err(e) = gk_agent::serve(agent, listener, tls_config, stop).await {
            tracing::error!(error = %e, "stand-in agent stopped");
        }
    });
    Ok(Some(tx))
}
