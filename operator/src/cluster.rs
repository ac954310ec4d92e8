//! GlusterCluster: brick StatefulSets pinned to nodes, a headless Service, a
//! PodDisruptionBudget and the agent PKI; then the trusted pool, formed through the agents.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use gk_agent::proto::brick_agent_client::BrickAgentClient;
use gk_agent::proto::{HealthRequest, PeerRequest};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::ByteString;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tonic::transport::Channel;

use crate::agents::{self, AgentCredentials};
use crate::conditions::{self, Desired};
use crate::controller::{Context, MANAGER};
use crate::crd::{
    Capacity, GlusterCluster, GlusterClusterStatus, GlusterVolume, PeerStatus, RolloutStatus,
    StorageNode,
};
use crate::pki::{self, Ca, CertKey, Usage};
use crate::Error;

pub const LABEL_CLUSTER: &str = "glusterkube.dev/cluster";
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const ANNOTATION_NODE: &str = "glusterkube.dev/node";
pub const BRICK_POD_SELECTOR: &str = "app.kubernetes.io/name=glusterkube-brick";
pub const MANAGED_BY_SELECTOR: &str = "app.kubernetes.io/managed-by=glusterkube-operator";

/// Where the agent TLS Secret is mounted in brick pods.
pub const TLS_DIR: &str = "/etc/glusterkube/tls";
pub const STATE_DIR: &str = "/var/lib/glusterkube";

pub fn service_name(cluster: &str) -> String {
    format!("{cluster}-bricks")
}
pub fn ca_secret(cluster: &str) -> String {
    format!("{cluster}-agent-ca")
}
pub fn agent_tls_secret(cluster: &str) -> String {
    format!("{cluster}-agent-tls")
}
pub fn operator_tls_secret(cluster: &str) -> String {
    format!("{cluster}-operator-tls")
}

/// The StatefulSet of one node: `<cluster>-<node>`, made a DNS label ('.' becomes '-'), with
/// a hash suffix when that changed the name or it would be too long, so names never collide.
pub fn statefulset_name(cluster: &str, node: &str) -> String {
    let plain = format!("{cluster}-{node}");
    let label = plain.replace('.', "-");
    if label == plain && label.len() <= 52 {
        return label;
    }
    let hash = plain.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let keep = label.len().min(43);
    format!(
        "{}-{:08x}",
        label[..keep].trim_end_matches('-'),
        hash as u32
    )
}

fn labels(cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_NAME.into(), "glusterkube-brick".into()),
        ("app.kubernetes.io/managed-by".into(), MANAGER.into()),
        (LABEL_CLUSTER.into(), cluster.into()),
    ])
}

fn owner(gc: &GlusterCluster) -> OwnerReference {
    gc.controller_owner_ref(&())
        .expect("a stored object has a name and uid")
}

fn meta(gc: &GlusterCluster, name: &str) -> serde_json::Value {
    json!({
        "name": name,
        "namespace": gc.namespace(),
        "labels": labels(&gc.name_any()),
        "ownerReferences": [owner(gc)],
    })
}

/// The headless Service that gives each brick pod a stable DNS name.
pub fn build_service(gc: &GlusterCluster) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": meta(gc, &service_name(&gc.name_any())),
        "spec": {
            "clusterIP": "None",
            // Peers must resolve each other before they are ready: readiness needs the pool.
            "publishNotReadyAddresses": true,
            "selector": labels(&gc.name_any()),
            "ports": [
                {"name": "glusterd", "port": 24007},
                {"name": "agent", "port": agents::AGENT_PORT},
            ],
        }
    }))
    .expect("a valid Service")
}

/// At most one brick pod of the cluster down at a time, so a drain never takes two bricks of
/// one replica set together.
pub fn build_pdb(gc: &GlusterCluster) -> PodDisruptionBudget {
    serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": meta(gc, &service_name(&gc.name_any())),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels(&gc.name_any())}},
    }))
    .expect("a valid PodDisruptionBudget")
}

/// One StatefulSet per storage node: one replica, pinned to the node, with the node-local
/// storage mounted so glusterd's state and the bricks survive pod restarts.
pub fn build_statefulset(
    gc: &GlusterCluster,
    node: &StorageNode,
    default_image: &str,
) -> StatefulSet {
    let cluster = gc.name_any();
    let ns = gc.namespace().unwrap_or_default();
    let name = statefulset_name(&cluster, &node.name);
    let mut pod_labels = labels(&cluster);
    pod_labels.insert("glusterkube.dev/brick-set".into(), name.clone());
    let image = gc
        .spec
        .image
        .clone()
        .unwrap_or_else(|| default_image.to_string());
    let mut env = vec![
        json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
        json!({"name": "GK_ADVERTISE_ADDRESS", "value": format!("$(POD_NAME).{}.{ns}.svc", service_name(&cluster))}),
        json!({"name": "GK_AGENT_TLS_DIR", "value": TLS_DIR}),
    ];
    let mut mounts = vec![
        json!({"name": "tls", "mountPath": TLS_DIR, "readOnly": true}),
        json!({"name": "fuse", "mountPath": "/dev/fuse"}),
    ];
    let mut volumes = vec![
        json!({"name": "tls", "secret": {"secretName": agent_tls_secret(&cluster), "defaultMode": 0o400}}),
        json!({"name": "fuse", "hostPath": {"path": "/dev/fuse", "type": "CharDevice"}}),
    ];
    // Gluster's TLS: the entrypoint turns management TLS on (secure-access); glusterd, the
    // bricks and the agent's mounts read the certificate from OpenSSL's directory, where a
    // Secret volume keeps it current when it is renewed (gluster reads it per connection).
    let tls = gc.spec.tls.enabled;
    env.push(json!({"name": "GK_GLUSTER_TLS", "value": if tls { "on" } else { "off" }}));
    if tls {
        mounts.push(json!({"name": "gluster-tls", "mountPath": crate::gluster_tls::SSL_DIR, "readOnly": true}));
        volumes.push(json!({"name": "gluster-tls", "secret": {"secretName": crate::gluster_tls::cluster_secret(&cluster), "defaultMode": 0o400}}));
    }
    if let Some(dir) = &node.storage.directory {
        mounts.push(json!({"name": "state", "mountPath": STATE_DIR}));
        volumes
            .push(json!({"name": "state", "hostPath": {"path": dir, "type": "DirectoryOrCreate"}}));
    }
    if let Some(dev) = &node.storage.device {
        env.push(json!({"name": "GK_DEVICE", "value": dev}));
        mounts.push(json!({"name": "device", "mountPath": dev}));
        volumes.push(json!({"name": "device", "hostPath": {"path": dev, "type": "BlockDevice"}}));
    }
    let mut container = json!({
        "name": "brick",
        "image": image,
        "env": env,
        "ports": [
            {"name": "glusterd", "containerPort": 24007},
            {"name": "agent", "containerPort": agents::AGENT_PORT},
        ],
        "volumeMounts": mounts,
        // trusted.* xattrs (gluster's metadata), XFS and FUSE mounts need CAP_SYS_ADMIN, and
        // the agent's FUSE mounts need /dev/fuse, which the container's device cgroup refuses
        // ("cannot open /dev/fuse (Operation not permitted)", seen under a real kubelet) even
        // when it is mounted as a hostPath: Kubernetes grants devices only to privileged
        // containers.
        "securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN"]}, "allowPrivilegeEscalation": true},
        "readinessProbe": {"tcpSocket": {"port": 24007}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": 24007}, "periodSeconds": 10, "failureThreshold": 6},
    });
    if let Some(r) = &gc.spec.resources {
        container["resources"] = serde_json::to_value(r).expect("resources serialise");
    }
    let mut pod_spec = json!({
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node.name]}]}]
        }}},
        "automountServiceAccountToken": false,
        "terminationGracePeriodSeconds": 30,
        "containers": [container],
        "volumes": volumes,
    });
    if !gc.spec.tolerations.is_empty() {
        pod_spec["tolerations"] =
            serde_json::to_value(&gc.spec.tolerations).expect("tolerations serialise");
    }
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": meta(gc, &name),
        "spec": {
            "replicas": 1,
            "serviceName": service_name(&cluster),
            "podManagementPolicy": "Parallel",
            // The operator restarts brick pods itself, one at a time and only while every
            // brick is online with nothing to heal (see `rollout`).
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": {LABEL_CLUSTER: cluster, "glusterkube.dev/brick-set": name}},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": {ANNOTATION_NODE: node.name}},
                "spec": pod_spec,
            },
        }
    }))
    .expect("a valid StatefulSet")
}

fn secret_data(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
}

fn tls_secret(gc: &GlusterCluster, name: &str, ca: &str, leaf: &CertKey) -> Secret {
    let mut s: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": meta(gc, name), "type": "kubernetes.io/tls",
    }))
    .expect("a valid Secret");
    s.data = Some(BTreeMap::from([
        ("ca.crt".into(), ByteString(ca.as_bytes().to_vec())),
        (
            "tls.crt".into(),
            ByteString(leaf.cert_pem.as_bytes().to_vec()),
        ),
        (
            "tls.key".into(),
            ByteString(leaf.key_pem.as_bytes().to_vec()),
        ),
    ]));
    s
}

/// The cluster CA (made once) and the agent and operator certificates (re-issued when a third
/// of their validity is left or the CA changed). Returns the operator's credentials.
pub async fn ensure_pki(ctx: &Context, gc: &GlusterCluster) -> Result<AgentCredentials, Error> {
    let ns = gc.namespace().unwrap_or_default();
    let cluster = gc.name_any();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let now = SystemTime::now();
    let ca = match secrets.get_opt(&ca_secret(&cluster)).await? {
        Some(s) => Ca::from_pem(&CertKey {
            cert_pem: secret_data(&s, "ca.crt").unwrap_or_default(),
            key_pem: secret_data(&s, "ca.key").unwrap_or_default(),
        })?,
        None => {
            let ca = Ca::generate(&format!("glusterkube {ns}/{cluster} agent CA"), now)?;
            let mut s: Secret = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret", "metadata": meta(gc, &ca_secret(&cluster)), "type": "Opaque",
            }))
            .expect("a valid Secret");
            s.data = Some(BTreeMap::from([
                (
                    "ca.crt".into(),
                    ByteString(ca.pem().cert_pem.as_bytes().to_vec()),
                ),
                (
                    "ca.key".into(),
                    ByteString(ca.pem().key_pem.as_bytes().to_vec()),
                ),
            ]));
            secrets.create(&PostParams::default(), &s).await?;
            ca
        }
    };
    let ca_pem = ca.pem().cert_pem.clone();
    let server_name = agents::server_name(&cluster, &ns);
    let mut operator_leaf = None;
    for (name, usage, cn) in [
        (
            agent_tls_secret(&cluster),
            Usage::Server,
            server_name.clone(),
        ),
        (
            operator_tls_secret(&cluster),
            Usage::Client,
            MANAGER.to_string(),
        ),
    ] {
        let current = secrets.get_opt(&name).await?;
        let fresh = current.as_ref().and_then(|s| {
            let cert = secret_data(s, "tls.crt")?;
            let key = secret_data(s, "tls.key")?;
            let same_ca = secret_data(s, "ca.crt").as_deref() == Some(ca_pem.as_str());
            (same_ca && !pki::needs_renewal(&cert, now)).then_some(CertKey {
                cert_pem: cert,
                key_pem: key,
            })
        });
        let leaf = match fresh {
            Some(leaf) => leaf,
            None => {
                let names = if usage == Usage::Server {
                    vec![server_name.clone()]
                } else {
                    vec![]
                };
                let leaf = ca.issue(&cn, &names, usage, now)?;
                secrets
                    .patch(
                        &name,
                        &PatchParams::apply(MANAGER).force(),
                        &Patch::Apply(&tls_secret(gc, &name, &ca_pem, &leaf)),
                    )
                    .await?;
                tracing::info!(secret = %name, "issued certificate");
                leaf
            }
        };
        if usage == Usage::Client {
            operator_leaf = Some(leaf);
        }
    }
    let leaf = operator_leaf.expect("the loop issues the client certificate");
    Ok(AgentCredentials {
        ca_pem,
        cert_pem: leaf.cert_pem,
        key_pem: leaf.key_pem,
        server_name,
    })
}

/// The operator's client credentials for a cluster's agents, as stored; nothing is issued.
pub async fn read_credentials(
    client: &kube::Client,
    gc: &GlusterCluster,
) -> Result<AgentCredentials, Error> {
    let ns = gc.namespace().unwrap_or_default();
    let name = operator_tls_secret(&gc.name_any());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let s = secrets.get_opt(&name).await?.ok_or_else(|| {
        Error::NotReady(format!(
            "Secret {ns}/{name} does not exist yet; the operator makes it"
        ))
    })?;
    let get = |k: &str| {
        secret_data(&s, k).ok_or_else(|| Error::NotReady(format!("Secret {ns}/{name} has no {k}")))
    };
    Ok(AgentCredentials {
        ca_pem: get("ca.crt")?,
        cert_pem: get("tls.crt")?,
        key_pem: get("tls.key")?,
        server_name: agents::server_name(&gc.name_any(), &ns),
    })
}

/// A storage node whose brick agent answered.
pub struct NodeAgent {
    pub node: String,
    pub address: String,
    pub brick_root: String,
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub peers: Vec<gk_agent::proto::Peer>,
    pub client: BrickAgentClient<Channel>,
}

impl NodeAgent {
    /// Where bricks can be placed on this node.
    pub fn slot(&self) -> crate::plan::NodeSlot {
        crate::plan::NodeSlot {
            node: self.node.clone(),
            address: self.address.clone(),
            brick_root: self.brick_root.clone(),
            total_bytes: self.total_bytes,
        }
    }
}

/// The cluster's brick agents that answer, in spec order, and the nodes that do not (with why).
pub async fn agents(
    ctx: &Context,
    gc: &GlusterCluster,
    creds: &AgentCredentials,
) -> Result<(Vec<NodeAgent>, Vec<(String, String)>), Error> {
    agents_with(&ctx.client, ctx.config.agent_port, gc, creds).await
}

/// [`agents`] for callers without an operator context (the CSI controller).
pub async fn agents_with(
    client: &kube::Client,
    port: u16,
    gc: &GlusterCluster,
    creds: &AgentCredentials,
) -> Result<(Vec<NodeAgent>, Vec<(String, String)>), Error> {
    let ns = gc.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let list = pods
        .list(&ListParams::default().labels(&format!("{LABEL_CLUSTER}={}", gc.name_any())))
        .await?;
    let mut up = Vec::new();
    let mut down = Vec::new();
    for node in &gc.spec.nodes {
        let pod = list.items.iter().find(|p| {
            p.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_NODE))
                == Some(&node.name)
        });
        let ip = pod
            .and_then(|p| p.status.as_ref())
            .and_then(|s| s.pod_ip.clone());
        let Some(ip) = ip else {
            down.push((node.name.clone(), "brick pod not running yet".to_string()));
            continue;
        };
        let mut client = agents::connect(&ip, port, creds)?;
        match client.health(HealthRequest {}).await {
            Ok(h) => {
                let h = h.into_inner();
                up.push(NodeAgent {
                    node: node.name.clone(),
                    address: h.address,
                    brick_root: h.brick_root,
                    total_bytes: h.brick_root_total_bytes,
                    free_bytes: h.brick_root_free_bytes,
                    peers: Vec::new(),
                    client,
                });
            }
            Err(s) => down.push((
                node.name.clone(),
                format!("agent at {ip} did not answer: {}", s.message()),
            )),
        }
    }
    Ok((up, down))
}

async fn apply<K>(ctx: &Context, ns: &str, obj: &K) -> Result<(), Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    api.patch(
        &obj.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await?;
    Ok(())
}

pub const FINALIZER: &str = "glusterkube.dev/gluster-cluster";

/// Whether glusterd's name for a peer is the agent's address: the same name, or that name
/// completed with the cluster's DNS domain. glusterd names a peer that probed it by the reverse
/// lookup of its address, which cluster DNS answers fully qualified
/// (`<pod>.<cluster>-bricks.<ns>.svc.cluster.local`).
pub fn same_host(peer_hostname: &str, address: &str) -> bool {
    peer_hostname
        .strip_prefix(address)
        .is_some_and(|rest| rest.is_empty() || (rest.starts_with('.') && address.contains('.')))
}

pub async fn reconcile(gc: Arc<GlusterCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let timer = ctx.metrics.reconcile_started("GlusterCluster");
    let api: Api<GlusterCluster> =
        Api::namespaced(ctx.client.clone(), &gc.namespace().unwrap_or_default());
    let result = finalizer(&api, FINALIZER, gc, |event| async {
        match event {
            Finalizer::Apply(gc) => reconcile_inner(&gc, &ctx).await,
            Finalizer::Cleanup(gc) => cleanup(&gc, &ctx).await,
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

/// The GlusterVolumes (names) in the cluster's namespace that live on it.
async fn volumes_on(ctx: &Context, gc: &GlusterCluster) -> Result<Vec<GlusterVolume>, Error> {
    let api: Api<GlusterVolume> =
        Api::namespaced(ctx.client.clone(), &gc.namespace().unwrap_or_default());
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|v| v.spec.cluster == gc.name_any())
        .collect())
}

/// Deletion: held while any GlusterVolume lives on the cluster, since tearing down the brick
/// pods would strand their data and leave the volumes without agents to delete them. Once
/// none is left, the owned StatefulSets, Service, PDB and Secrets go by garbage collection;
/// node-local storage is left as it is.
async fn cleanup(gc: &GlusterCluster, ctx: &Context) -> Result<Action, Error> {
    let users: Vec<String> = volumes_on(ctx, gc)
        .await?
        .iter()
        .map(|v| v.name_any())
        .collect();
    if users.is_empty() {
        return Ok(Action::await_change());
    }
    let msg = format!(
        "{} GlusterVolume(s) still live on this cluster: {}; delete them first",
        users.len(),
        users.join(", ")
    );
    let old = gc.status.clone().unwrap_or_default();
    let d = [
        Desired::new("Ready", false, "DeletionBlocked", msg.clone()),
        Desired::new("Progressing", false, "DeletionBlocked", msg.clone()),
        Desired::new("Degraded", false, "Healthy", ""),
    ];
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let status = GlusterClusterStatus {
        conditions: conditions::merge(&old.conditions, &d, gc.metadata.generation, &now),
        ..old.clone()
    };
    if status != old {
        write_status::<GlusterCluster>(ctx, gc, &status).await?;
        publish_transitions(ctx, gc, &old.conditions, &status.conditions).await;
    }
    Err(Error::DeletionBlocked(msg))
}

async fn reconcile_inner(gc: &GlusterCluster, ctx: &Context) -> Result<Action, Error> {
    let ns = gc.namespace().unwrap_or_default();
    let creds = ensure_pki(ctx, gc).await?;
    let tls_secret = crate::gluster_tls::cluster_secret(&gc.name_any());
    crate::gluster_tls::ensure(ctx, gc, meta(gc, &tls_secret)).await?;
    apply(ctx, &ns, &build_service(gc)).await?;
    apply(ctx, &ns, &build_pdb(gc)).await?;
    for node in &gc.spec.nodes {
        apply(
            ctx,
            &ns,
            &build_statefulset(gc, node, &ctx.config.brick_image),
        )
        .await?;
    }

    let (mut up, down) = agents(ctx, gc, &creds).await?;
    // Form the pool from the node that already has the most peers (the first one in spec order
    // on a tie): a node that answered late joins the pool formed without it, instead of being
    // asked to probe nodes that are already in a pool, which glusterd refuses ("already part of
    // another cluster").
    if up.len() > 1 {
        let mut best = (0, 0);
        for (i, a) in up.iter_mut().enumerate() {
            let peers = a
                .client
                .peer_status(gk_agent::proto::PeerStatusRequest {})
                .await
                .map_err(|s| Error::agent(&a.node, s))?
                .into_inner()
                .peers
                .len();
            if peers > best.1 {
                best = (i, peers);
            }
        }
        let anchor = up.remove(best.0);
        up.insert(0, anchor);
    }
    // Probe every other node the anchor does not know.
    if let Some((anchor, rest)) = up.split_first_mut() {
        let known = anchor
            .client
            .peer_status(gk_agent::proto::PeerStatusRequest {})
            .await
            .map_err(|s| Error::agent(&anchor.node, s))?
            .into_inner()
            .peers;
        let mut probed = false;
        for other in rest.iter() {
            if !known.iter().any(|p| same_host(&p.hostname, &other.address)) {
                tracing::info!(node = %other.node, address = %other.address, "probing peer");
                anchor
                    .client
                    .peer_probe(PeerRequest {
                        host: other.address.clone(),
                        force: false,
                    })
                    .await
                    .map_err(|s| Error::agent(&anchor.node, s))?;
                probed = true;
            }
        }
        anchor.peers = if probed {
            anchor
                .client
                .peer_status(gk_agent::proto::PeerStatusRequest {})
                .await
                .map_err(|s| Error::agent(&anchor.node, s))?
                .into_inner()
                .peers
        } else {
            known
        };
    }
    let anchor_peers = up.first().map(|a| a.peers.clone()).unwrap_or_default();
    let old = gc.status.clone().unwrap_or_default();
    let mut peers: Vec<PeerStatus> = up
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let seen = anchor_peers
                .iter()
                .find(|p| same_host(&p.hostname, &a.address));
            PeerStatus {
                node: a.node.clone(),
                address: a.address.clone(),
                // The anchor is trivially in its own pool.
                connected: i == 0 || seen.is_some_and(|p| p.connected),
                state: if i == 0 {
                    Some("Local".into())
                } else {
                    seen.map(|p| p.state.clone())
                },
            }
        })
        .collect();
    // A node that stopped answering keeps its last known address: its bricks are named by
    // it, and replacing them needs it.
    for (node, _) in &down {
        if let Some(known) = old.peers.iter().find(|p| &p.node == node) {
            peers.push(PeerStatus {
                connected: false,
                state: Some("Unreachable".into()),
                ..known.clone()
            });
        }
    }
    let total = gc.spec.nodes.len();
    let in_pool = peers.iter().filter(|p| p.connected).count();
    let ready = in_pool == total;
    let mut desired = vec![Desired::new(
        "Ready",
        ready,
        if ready {
            "PoolFormed"
        } else {
            "PoolIncomplete"
        },
        if ready {
            format!("all {total} storage nodes are connected in the trusted pool")
        } else {
            let why: Vec<String> = down.iter().map(|(n, w)| format!("{n}: {w}")).collect();
            format!(
                "{in_pool} of {total} storage nodes in the pool; {}",
                why.join("; ")
            )
        },
    )];
    let volumes = volumes_on(ctx, gc).await?;
    let owned = Owned::list(ctx, gc).await?;
    let rollout = rollout(ctx, gc, &owned, &mut up, &volumes, old.rollout.as_ref()).await?;
    let (retiring, still_in_pool) =
        retire_removed_nodes(ctx, gc, &owned, &creds, &mut up, &volumes, &old.peers).await?;
    // A node on its way out stays listed while it is still in the pool: its address is how
    // it leaves if it stops answering.
    for node in &still_in_pool {
        if let Some(known) = old.peers.iter().find(|p| &p.node == node) {
            let seen = anchor_peers
                .iter()
                .find(|p| same_host(&p.hostname, &known.address));
            peers.push(PeerStatus {
                connected: seen.is_some_and(|p| p.connected),
                state: Some(seen.map_or("Unreachable".into(), |p| p.state.clone())),
                ..known.clone()
            });
        }
    }
    let (progressing, progress_reason, progress_msg) = match (&rollout.waiting, ready) {
        (Some(w), _) => (true, "RollingUpdate", w.clone()),
        (None, false) => (true, "FormingPool", String::new()),
        (None, true) if !retiring.is_empty() => (true, "RetiringNodes", retiring.join("; ")),
        (None, true) => (false, "Stable", String::new()),
    };
    desired.push(Desired::new(
        "Progressing",
        progressing,
        progress_reason,
        progress_msg,
    ));
    let unreachable = !down.is_empty() && old.peers.len() >= total;
    let degraded = match (&rollout.stalled, unreachable) {
        (Some(msg), _) => Some(("RolloutStalled", msg.clone())),
        (None, true) => Some((
            "NodeUnreachable",
            down.iter()
                .map(|(n, w)| format!("{n}: {w}"))
                .collect::<Vec<_>>()
                .join("; "),
        )),
        (None, false) => None,
    };
    desired.push(match degraded {
        Some((reason, msg)) => Desired::new("Degraded", true, reason, msg),
        None => Desired::new("Degraded", false, "Healthy", ""),
    });
    // Bricks across this cluster's volumes, as their own status last saw them.
    let (mut bricks_online, mut bricks_total) = (0i32, 0i32);
    for v in &volumes {
        for b in v.status.iter().flat_map(|s| &s.bricks) {
            bricks_total += 1;
            bricks_online += i32::from(b.online);
        }
    }
    // Raw capacity of the node-local storage that answered; rounded to MiB so that ordinary
    // churn on the disks does not rewrite status on every refresh.
    let mib = |b: u64| b / (1 << 20) * (1 << 20);
    let raw_total: u64 = up.iter().map(|a| mib(a.total_bytes)).sum();
    let raw_free: u64 = up.iter().map(|a| mib(a.free_bytes)).sum();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let status = GlusterClusterStatus {
        observed_generation: gc.metadata.generation,
        conditions: conditions::merge(&old.conditions, &desired, gc.metadata.generation, &now),
        peers,
        nodes_summary: Some(format!("{in_pool}/{total}")),
        bricks_online: Some(bricks_online),
        bricks_total: Some(bricks_total),
        bricks_summary: Some(format!("{bricks_online}/{bricks_total}")),
        capacity: (!up.is_empty()).then(|| Capacity {
            total_bytes: raw_total as i64,
            used_bytes: raw_total.saturating_sub(raw_free) as i64,
            free_bytes: raw_free as i64,
            total: crate::volume::human_bytes(raw_total),
        }),
        rollout: rollout.status,
    };
    if status != old {
        write_status::<GlusterCluster>(ctx, gc, &status).await?;
        publish_transitions(ctx, gc, &old.conditions, &status.conditions).await;
    }
    Ok(Action::requeue(if ready && rollout.waiting.is_none() {
        ctx.config.refresh
    } else {
        std::time::Duration::from_secs(3)
    }))
}

/// Why a storage node gone from spec.nodes must keep its brick pod for now, or None when it
/// can leave the trusted pool. Its bricks and a pending replacement of it still need it.
pub fn retirement_blocker(
    node: &str,
    gc: &GlusterCluster,
    volumes: &[GlusterVolume],
) -> Option<String> {
    if gc.spec.replacements.iter().any(|r| r.node == node) {
        return Some(format!(
            "{node} was removed from spec.nodes but spec.replacements still lists it; remove \
             that entry once every volume reports heal pending 0"
        ));
    }
    let holding: Vec<String> = volumes
        .iter()
        .filter(|v| {
            v.status
                .iter()
                .flat_map(|s| &s.bricks)
                .any(|b| b.node == node)
        })
        .map(|v| v.name_any())
        .collect();
    (!holding.is_empty()).then(|| {
        format!(
            "{node} was removed from spec.nodes but holds bricks of GlusterVolume(s) {}; move \
             them with spec.replacements (or lower those volumes' brickCount) first",
            holding.join(", ")
        )
    })
}

/// A storage node whose StatefulSet remains although spec.nodes no longer names it.
fn removed_node(gc: &GlusterCluster, set: &StatefulSet) -> Option<String> {
    let node = set
        .spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(ANNOTATION_NODE)?;
    (!gc.spec.nodes.iter().any(|n| &n.name == node)).then(|| node.clone())
}

/// Storage nodes removed from spec.nodes leave once nothing of theirs is needed: the peer is
/// detached from the trusted pool (gluster itself refuses while the peer holds a brick), then
/// its StatefulSet is deleted. A node whose agent answers names its own address; one that does
/// not (a machine that is gone) is detached by force under the address `known` (the last
/// status) has for it. The node-local storage is left as it is. Returns why removed nodes
/// stay, one message each, and the nodes that stay.
async fn retire_removed_nodes(
    ctx: &Context,
    gc: &GlusterCluster,
    owned: &Owned,
    creds: &AgentCredentials,
    up: &mut [NodeAgent],
    volumes: &[GlusterVolume],
    known: &[PeerStatus],
) -> Result<(Vec<String>, Vec<String>), Error> {
    let removed: Vec<(String, String)> = owned
        .sets
        .iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .filter_map(|s| Some((removed_node(gc, s)?, s.name_any())))
        .collect();
    let sets: Api<StatefulSet> =
        Api::namespaced(ctx.client.clone(), &gc.namespace().unwrap_or_default());
    let mut staying = Vec::new();
    let mut kept = Vec::new();
    for (node, set) in removed {
        if let Some(why) = retirement_blocker(&node, gc, volumes) {
            staying.push(why);
            kept.push(node);
            continue;
        }
        let Some(anchor) = up.first_mut() else {
            staying.push(format!(
                "{node} waits to leave the trusted pool until a remaining node's agent answers"
            ));
            kept.push(node);
            continue;
        };
        // The peer's own agent names the address the pool knows it by.
        let ip = owned
            .pods
            .iter()
            .filter(|p| p.annotations().get(ANNOTATION_NODE) == Some(&node))
            .find_map(|p| p.status.as_ref()?.pod_ip.clone());
        let address = match ip {
            Some(ip) => match agents::connect(&ip, ctx.config.agent_port, creds)?
                .health(HealthRequest {})
                .await
            {
                Ok(h) => Some(h.into_inner().address),
                Err(_) => None,
            },
            None => None,
        };
        let (address, force) = match address {
            Some(a) => (a, false),
            None => match known.iter().find(|p| p.node == node) {
                Some(p) => (p.address.clone(), true),
                None => {
                    staying.push(format!(
                        "{node} was removed from spec.nodes but neither answers nor has a known \
                         pool address; detach it by hand with `gluster peer detach <host> force`"
                    ));
                    kept.push(node);
                    continue;
                }
            },
        };
        if let Err(s) = anchor
            .client
            .peer_detach(PeerRequest {
                host: address.clone(),
                force,
            })
            .await
        {
            staying.push(format!(
                "{node} ({address}) could not leave the trusted pool: {}",
                s.message()
            ));
            kept.push(node);
            continue;
        }
        sets.delete(&set, &Default::default()).await?;
        tracing::info!(%node, %address, "storage node left the pool");
        let ev = Event {
            type_: EventType::Normal,
            reason: "NodeRetired".into(),
            note: Some(format!(
                "storage node {node} ({address}) left the trusted pool{} and its StatefulSet \
                 {set} was deleted; data on its node-local storage was left as it is",
                if force {
                    " (detached by force: it did not answer)"
                } else {
                    ""
                }
            )),
            action: "RetireNode".into(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&ev, &gc.object_ref(&())).await {
            tracing::warn!(error = %e, "publishing an event failed");
        }
    }
    Ok((staying, kept))
}

/// The cluster's StatefulSets and brick pods, listed once per reconcile.
struct Owned {
    sets: Vec<StatefulSet>,
    pods: Vec<Pod>,
}

impl Owned {
    async fn list(ctx: &Context, gc: &GlusterCluster) -> Result<Self, Error> {
        let ns = gc.namespace().unwrap_or_default();
        let by_cluster =
            ListParams::default().labels(&format!("{LABEL_CLUSTER}={}", gc.name_any()));
        Ok(Self {
            sets: Api::<StatefulSet>::namespaced(ctx.client.clone(), &ns)
                .list(&by_cluster)
                .await?
                .items,
            pods: Api::<Pod>::namespaced(ctx.client.clone(), &ns)
                .list(&by_cluster)
                .await?
                .items,
        })
    }
}

/// What the rollout did this round.
struct Rollout {
    status: Option<RolloutStatus>,
    /// Set while the rollout is not done: what it waits for.
    waiting: Option<String>,
    /// Set when a restarted pod did not become healthy within the timeout.
    stalled: Option<String>,
}

/// Whether every serving node's glusterd sees all its peers connected. A restarted node can
/// take a while to be reconnected (its address changed, and peers re-resolve its name only
/// when DNS caches expire); until then management operations fail on the nodes that do not
/// see it, so the next restart waits.
async fn pool_connected(up: &mut [NodeAgent]) -> Result<Result<(), String>, Error> {
    for a in up.iter_mut() {
        let peers = match a
            .client
            .peer_status(gk_agent::proto::PeerStatusRequest {})
            .await
        {
            Ok(r) => r.into_inner().peers,
            Err(s) => return Ok(Err(format!("peer status on {}: {}", a.node, s.message()))),
        };
        if let Some(p) = peers.iter().find(|p| !p.connected) {
            return Ok(Err(format!(
                "glusterd on {} does not see peer {} connected yet",
                a.node, p.hostname
            )));
        }
    }
    Ok(Ok(()))
}

/// Whether every brick of the cluster's volumes is online with nothing to heal, asked of
/// gluster (not of possibly stale GlusterVolume status); Err says what is not.
pub async fn data_safe(
    anchor: &mut NodeAgent,
    volumes: &[GlusterVolume],
) -> Result<Result<(), String>, Error> {
    for v in volumes {
        let name =
            crate::plan::gluster_volume_name(&v.namespace().unwrap_or_default(), &v.name_any());
        let req = || gk_agent::proto::VolumeRequest { name: name.clone() };
        let info = match anchor.client.volume_info(req()).await {
            Ok(r) => r.into_inner().volume,
            Err(s) if s.code() == tonic::Code::NotFound => continue,
            Err(s) => return Err(Error::agent(&anchor.node, s)),
        };
        let Some(info) = info else { continue };
        if info.status != "Started" {
            continue;
        }
        let st = match anchor.client.volume_status(req()).await {
            Ok(r) => r.into_inner(),
            Err(s) => return Ok(Err(format!("status of volume {name}: {}", s.message()))),
        };
        let offline: Vec<&str> = info
            .bricks
            .iter()
            .filter(|b| !st.bricks.iter().any(|s| &s.brick == *b && s.online))
            .map(String::as_str)
            .collect();
        if !offline.is_empty() {
            return Ok(Err(format!(
                "volume {name} has bricks offline: {}",
                offline.join(", ")
            )));
        }
        if info.replica_count > 1 || info.disperse_count > 0 {
            match anchor.client.heal_info(req()).await {
                Ok(h) if h.get_ref().pending_total == 0 && h.get_ref().split_brain_total == 0 => {}
                Ok(h) => {
                    let h = h.into_inner();
                    return Ok(Err(format!(
                        "volume {name} has {} entries to heal and {} in split-brain",
                        h.pending_total, h.split_brain_total
                    )));
                }
                Err(s) => return Ok(Err(format!("heal info of volume {name}: {}", s.message()))),
            }
        }
    }
    Ok(Ok(()))
}

/// Restarts brick pods whose StatefulSet template changed (for example the image), one at a
/// time: a pod is evicted (so the PodDisruptionBudget is honoured too) only while every
/// brick pod serves and every volume has all bricks online and nothing to heal. A restarted
/// pod that is not healthy within the rollout timeout stops the rollout with a Degraded
/// condition; nothing further is restarted until it is.
async fn rollout(
    ctx: &Context,
    gc: &GlusterCluster,
    owned: &Owned,
    up: &mut [NodeAgent],
    volumes: &[GlusterVolume],
    old: Option<&RolloutStatus>,
) -> Result<Rollout, Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &gc.namespace().unwrap_or_default());
    let (sets, pod_list) = (&owned.sets, &owned.pods);
    let mut view = Vec::new();
    for node in &gc.spec.nodes {
        let sts_name = statefulset_name(&gc.name_any(), &node.name);
        let revision = sets
            .iter()
            .find(|s| s.name_any() == sts_name)
            .and_then(|s| s.status.as_ref())
            .and_then(|s| s.update_revision.clone());
        let pod = pod_list
            .iter()
            .find(|p| p.annotations().get(ANNOTATION_NODE) == Some(&node.name))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| crate::plan::BrickPod {
                name: p.name_any(),
                // Until the StatefulSet controller reports a revision, nothing is outdated.
                current: revision.is_none()
                    || p.labels().get("controller-revision-hash") == revision.as_ref(),
                serving: up.iter().any(|a| a.node == node.name),
            });
        view.push((node.name.clone(), pod));
    }
    let total = view.len() as i32;
    let updated = view
        .iter()
        .filter(|(_, p)| p.as_ref().is_some_and(|p| p.current))
        .count() as i32;
    let mut status = RolloutStatus {
        updated,
        total,
        restarted_pod: old.and_then(|o| o.restarted_pod.clone()),
        restarted_at: old.and_then(|o| o.restarted_at.clone()),
        waiting_for: None,
    };
    let outdated = view
        .iter()
        .any(|(_, p)| p.as_ref().is_some_and(|p| !p.current));
    let safe = match (outdated, up.is_empty()) {
        (false, _) => Ok(()),
        (true, true) => Err("no brick agent answers".to_string()),
        (true, false) => match pool_connected(up).await? {
            Ok(()) => data_safe(&mut up[0], volumes).await?,
            waiting => waiting,
        },
    };
    let step = crate::plan::rollout_step(&view, safe);
    let mut stalled = None;
    let waiting = match step {
        crate::plan::RolloutStep::Done => {
            status.restarted_pod = None;
            status.restarted_at = None;
            None
        }
        crate::plan::RolloutStep::Restart(pod) => {
            // kube's client retries a 429 (the PDB refusing) for minutes; a refusal here is
            // just "not yet", so the reconcile does not wait on it.
            let evicted = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                pods.evict(&pod, &Default::default()),
            )
            .await;
            match evicted {
                Err(_) => Some(format!(
                    "the eviction of {pod} was not granted within 10s (a PodDisruptionBudget \
                     refuses it while another brick pod is down)"
                )),
                Ok(Ok(_)) => {
                    tracing::info!(%pod, "restarting brick pod for its new template");
                    let ev = Event {
                        type_: EventType::Normal,
                        reason: "RestartingBrickPod".into(),
                        note: Some(format!(
                            "restarting brick pod {pod} for its new template ({updated} of {total} updated): \
                             every brick is online and nothing is left to heal"
                        )),
                        action: "Rollout".into(),
                        secondary: None,
                    };
                    if let Err(e) = ctx.recorder.publish(&ev, &gc.object_ref(&())).await {
                        tracing::warn!(error = %e, "publishing an event failed");
                    }
                    status.restarted_pod = Some(pod.clone());
                    status.restarted_at = Some(Time(k8s_openapi::jiff::Timestamp::now()));
                    Some(format!(
                        "restarted brick pod {pod}; waiting for it to serve"
                    ))
                }
                Ok(Err(kube::Error::Api(e))) if e.code == 429 => Some(format!(
                    "the PodDisruptionBudget does not allow restarting {pod} yet: {}",
                    e.message
                )),
                Ok(Err(e)) => return Err(e.into()),
            }
        }
        crate::plan::RolloutStep::Wait(why) => {
            if let (Some(pod), Some(at)) = (&status.restarted_pod, &status.restarted_at) {
                let waited = k8s_openapi::jiff::Timestamp::now().duration_since(at.0);
                let limit = ctx.config.rollout_timeout;
                if waited.as_secs() >= limit.as_secs() as i64 {
                    stalled = Some(format!(
                        "brick pod {pod} was restarted {}s ago and the cluster is not healthy \
                         within the rollout timeout of {}s: {why}; the rollout is stopped until \
                         this is fixed",
                        waited.as_secs(),
                        limit.as_secs()
                    ));
                }
            }
            Some(why)
        }
    };
    status.waiting_for = waiting.clone();
    let show = outdated || old.is_some();
    Ok(Rollout {
        status: show.then_some(status),
        waiting,
        stalled,
    })
}

/// Writes status by server-side apply under the operator's field manager.
pub async fn write_status<K>(
    ctx: &Context,
    obj: &K,
    status: &impl serde::Serialize,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        &obj.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// One event per condition that changed, never on a re-run that changed nothing.
pub async fn publish_transitions<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    old: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    new: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) {
    for c in conditions::transitions(old, new) {
        let warn = (c.type_ == "Degraded" && c.status == "True")
            || (c.type_ == "Ready" && c.status == "False" && !old.is_empty())
            || c.reason.ends_with("Refused")
            || c.reason.ends_with("Blocked");
        let ev = Event {
            type_: if warn {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: c.reason.clone(),
            note: Some(
                format!("{}={}: {}", c.type_, c.status, c.message)
                    .chars()
                    .take(1000)
                    .collect(),
            ),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&ev, &obj.object_ref(&())).await {
            tracing::warn!(error = %e, "publishing an event failed");
        }
    }
}

/// Brick pods wake their cluster's reconcile (a pod became ready, or lost its IP).
pub fn pod_to_cluster(pod: Pod) -> Option<ObjectRef<GlusterCluster>> {
    let cluster = pod.labels().get(LABEL_CLUSTER)?.clone();
    Some(ObjectRef::new(&cluster).within(&pod.namespace()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> GlusterCluster {
        let v: serde_json::Value = serde_yaml::from_str(
            "apiVersion: glusterkube.dev/v1alpha1\nkind: GlusterCluster\nmetadata: {name: pool, namespace: storage, uid: u1}\nspec:\n  nodes:\n  - {name: node-a, storage: {directory: /srv/g}}\n  - {name: node.b, storage: {device: /dev/sdb}}\n",
        )
        .unwrap();
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn brick_pods_get_gluster_tls_unless_the_cluster_turns_it_off() {
        let pod = |gc: &GlusterCluster| {
            let sts = build_statefulset(gc, &gc.spec.nodes[0], "img");
            serde_json::to_value(sts.spec.unwrap().template.spec.unwrap()).unwrap()
        };
        let env = |p: &serde_json::Value| {
            p["containers"][0]["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == "GK_GLUSTER_TLS")
                .map(|e| e["value"].clone())
        };
        let on = pod(&cluster());
        assert_eq!(env(&on), Some(json!("on")));
        let mounts = on["containers"][0]["volumeMounts"].as_array().unwrap();
        assert!(mounts
            .iter()
            .any(|m| m["name"] == "gluster-tls" && m["mountPath"] == "/usr/lib/ssl"));
        let volumes = on["volumes"].as_array().unwrap();
        assert!(volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == "pool-gluster-tls"));

        let mut gc = cluster();
        gc.spec.tls.enabled = false;
        let off = pod(&gc);
        assert_eq!(env(&off), Some(json!("off")));
        assert!(!off.to_string().contains("gluster-tls"));
    }

    #[test]
    fn a_removed_node_stays_while_bricks_or_a_replacement_need_it() {
        let mut gc = cluster();
        let vol = |name: &str, nodes: &[&str]| -> GlusterVolume {
            serde_json::from_value(json!({
                "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
                "metadata": {"name": name, "namespace": "storage"},
                "spec": {"cluster": "pool", "type": "Distribute", "brickCount": nodes.len()},
                "status": {"bricks": nodes.iter().map(|n| json!(
                    {"node": n, "host": "10.0.0.9", "path": "/srv/g/b", "online": true}
                )).collect::<Vec<_>>()},
            }))
            .unwrap()
        };
        let volumes = [
            vol("data", &["node-a", "node-c"]),
            vol("logs", &["node-c"]),
            vol("tmp", &["node-a"]),
        ];
        let why = retirement_blocker("node-c", &gc, &volumes).unwrap();
        assert!(why.contains("GlusterVolume(s) data, logs;"), "{why}");
        assert!(why.contains("spec.replacements"), "{why}");
        assert_eq!(retirement_blocker("node-c", &gc, &volumes[2..]), None);

        gc.spec.replacements =
            vec![
                serde_json::from_value(json!({"node": "node-c", "replacement": "node-a"})).unwrap(),
            ];
        let why = retirement_blocker("node-c", &gc, &[]).unwrap();
        assert!(why.contains("spec.replacements still lists it"), "{why}");
    }

    #[test]
    fn only_statefulsets_of_nodes_gone_from_the_spec_are_removed_nodes() {
        let gc = cluster();
        let node_a = build_statefulset(&gc, &gc.spec.nodes[0], "img");
        assert_eq!(removed_node(&gc, &node_a), None);
        let mut gone = gc.clone();
        gone.spec.nodes.remove(0);
        assert_eq!(removed_node(&gone, &node_a).as_deref(), Some("node-a"));
        // A StatefulSet without the node annotation is not ours to retire.
        let mut bare = node_a.clone();
        bare.spec.as_mut().unwrap().template.metadata = None;
        assert_eq!(removed_node(&gone, &bare), None);
    }

    #[test]
    fn peers_match_by_name_or_its_fully_qualified_form() {
        let a = "demo-gk-node-2-0.demo-bricks.gk-demo.svc";
        assert!(same_host(a, a));
        assert!(same_host(&format!("{a}.cluster.local"), a));
        assert!(!same_host("demo-gk-node-2-0.demo-bricks.gk-demo.svcx", a));
        assert!(!same_host(
            "demo-gk-node-20.demo-bricks.gk-demo.svc",
            "demo-gk-node-2"
        ));
        assert!(!same_host("10.214.2.2", a));
    }

    #[test]
    fn statefulset_names_are_dns_labels_and_distinct() {
        assert_eq!(statefulset_name("pool", "node-a"), "pool-node-a");
        let dotted = statefulset_name("pool", "node.b");
        assert!(
            dotted.starts_with("pool-node-b-") && !dotted.contains('.'),
            "{dotted}"
        );
        assert_ne!(dotted, statefulset_name("pool", "node-b"));
        let long = statefulset_name("pool", &"n".repeat(80));
        assert!(long.len() <= 52, "{long}");
    }

    #[test]
    fn statefulset_is_pinned_and_mounts_node_storage() {
        let gc = cluster();
        let sts = build_statefulset(&gc, &gc.spec.nodes[0], "img:1");
        let v = serde_json::to_value(&sts).unwrap();
        let pod = &v["spec"]["template"]["spec"];
        assert_eq!(v["spec"]["replicas"], 1);
        assert_eq!(
            pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0],
            "node-a"
        );
        assert_eq!(pod["containers"][0]["image"], "img:1");
        assert_eq!(pod["containers"][0]["securityContext"]["privileged"], true);
        let vols = pod["volumes"].as_array().unwrap();
        assert!(vols.iter().any(|v| v["hostPath"]["path"] == "/srv/g"));
        assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "u1");
        let dev = serde_json::to_value(build_statefulset(&gc, &gc.spec.nodes[1], "img:1")).unwrap();
        let env = dev["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .clone();
        assert!(env
            .iter()
            .any(|e| e["name"] == "GK_DEVICE" && e["value"] == "/dev/sdb"));
        assert_eq!(
            build_pdb(&gc).spec.unwrap().max_unavailable,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
        );
        assert_eq!(
            build_service(&gc).spec.unwrap().cluster_ip.as_deref(),
            Some("None")
        );
    }
}
