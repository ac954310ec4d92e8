//! Connections to the brick agents, kept between calls: one mutual-TLS channel per agent
//! address, and the operator's client certificate per cluster. The operator refreshes every
//! volume through them and the CSI controller resolves pools through them, instead of a TLS
//! handshake with every node (and a Secret read) on every reconcile or CreateVolume.
//!
//! Staleness is bounded, not polled away:
//! - the CSI controller uses an agent that answered a health call within `ANSWERED_FOR`
//!   without asking again; otherwise it asks first, and tries the next node if it does not
//!   answer ([`AgentCache::pick`]);
//! - the channels keep HTTP/2 keepalive pings ([`super::endpoint`]), so a kept connection to
//!   a node gone from the network fails within seconds and the next call connects afresh;
//! - a certificate read from its Secret is used for `CREDENTIALS_FOR`, and read again at once
//!   after any agent of its cluster failed to answer (a renewed CA shows as a failed
//!   handshake); when the certificate changed, the cluster's channels are dropped.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use gk_agent_proto::v1::brick_agent_client::BrickAgentClient;
use gk_agent_proto::v1::HealthRequest;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::ResourceExt;
use tonic::transport::Channel;
use tonic::Status;

use super::{
    candidates, connect, describe_down, node_agent, not_answering, read_credentials,
    AgentCredentials, AgentsError, Candidate, NodeAgent, NodeDown,
};
use crate::crd::GlusterCluster;
use crate::names;

/// An agent that answered this recently is used without a new health call.
pub const ANSWERED_FOR: Duration = Duration::from_secs(10);
/// A certificate read from its Secret is read again after this long.
pub const CREDENTIALS_FOR: Duration = Duration::from_secs(300);
/// A health call that takes longer than this counts as no answer.
const HEALTH_WAIT: Duration = Duration::from_secs(5);

struct Kept {
    client: BrickAgentClient<Channel>,
    answered_at: Option<Instant>,
    /// The agent's last health answer (at `answered_at`).
    health: Option<gk_agent_proto::v1::HealthResponse>,
}

/// Whether [`AgentCache::discover`] may take an agent's health answer from the last
/// `ANSWERED_FOR` instead of asking again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// Ask every agent now (the cluster's own status, which says which node is unreachable).
    Now,
    /// An answer within `ANSWERED_FOR` stands (each volume's reconcile: asking every agent
    /// for every volume ran two gluster CLI processes per node per volume and refresh).
    Recently,
}

struct ClusterAgents {
    creds: AgentCredentials,
    read_at: Instant,
    /// Set when an agent did not answer: the next call reads the certificate again.
    suspect: bool,
    /// By agent address.
    channels: HashMap<String, Kept>,
}

/// Whether an agent's last answer is recent enough to use it without asking.
fn answered_recently(answered_at: Option<Instant>, now: Instant) -> bool {
    answered_at.is_some_and(|t| now.saturating_duration_since(t) < ANSWERED_FOR)
}

/// Whether a cluster's certificate must be read again before use.
fn credentials_stale(read_at: Instant, suspect: bool, now: Instant) -> bool {
    suspect || now.saturating_duration_since(read_at) >= CREDENTIALS_FOR
}

fn same_credentials(a: &AgentCredentials, b: &AgentCredentials) -> bool {
    a.ca_pem == b.ca_pem
        && a.cert_pem == b.cert_pem
        && a.key_pem == b.key_pem
        && a.server_name == b.server_name
}

/// The kept agent connections of every cluster in use.
pub struct AgentCache {
    port: u16,
    /// By cluster UID, so a cluster deleted and made again under its name starts afresh.
    clusters: Mutex<HashMap<String, ClusterAgents>>,
}

impl AgentCache {
    pub fn new(port: u16) -> Self {
        Self {
            port,
            clusters: Mutex::new(HashMap::new()),
        }
    }

    fn key(gc: &GlusterCluster) -> String {
        gc.uid()
            .unwrap_or_else(|| format!("{}/{}", gc.namespace().unwrap_or_default(), gc.name_any()))
    }

    /// Records `creds` as the cluster's certificate (dropping its channels if it changed).
    pub fn set_credentials(&self, gc: &GlusterCluster, creds: &AgentCredentials) {
        let mut clusters = self.clusters.lock().unwrap();
        let entry = clusters
            .entry(Self::key(gc))
            .or_insert_with(|| ClusterAgents {
                creds: creds.clone(),
                read_at: Instant::now(),
                suspect: false,
                channels: HashMap::new(),
            });
        if !same_credentials(&entry.creds, creds) {
            entry.channels.clear();
            entry.creds = creds.clone();
        }
        entry.read_at = Instant::now();
        entry.suspect = false;
    }

    /// The cluster's certificate, read from its Secret again when stale.
    pub async fn credentials(
        &self,
        client: &kube::Client,
        gc: &GlusterCluster,
    ) -> Result<AgentCredentials, AgentsError> {
        if let Some(c) = self.clusters.lock().unwrap().get(&Self::key(gc)) {
            if !credentials_stale(c.read_at, c.suspect, Instant::now()) {
                return Ok(c.creds.clone());
            }
        }
        let creds = read_credentials(client, gc).await?;
        self.set_credentials(gc, &creds);
        Ok(creds)
    }

    /// The kept channel to the agent at `ip`, made now if there is none, and whether it
    /// answered recently. The cluster's credentials must have been set.
    fn channel(
        &self,
        gc: &GlusterCluster,
        ip: &str,
    ) -> Result<(BrickAgentClient<Channel>, bool), AgentsError> {
        let mut clusters = self.clusters.lock().unwrap();
        let entry = clusters
            .get_mut(&Self::key(gc))
            .ok_or_else(|| AgentsError::Credentials {
                namespace: gc.namespace().unwrap_or_default(),
                name: names::operator_tls_secret(&gc.name_any()),
                what: "was not read before its agents were called".into(),
            })?;
        if let Some(k) = entry.channels.get(ip) {
            return Ok((
                k.client.clone(),
                answered_recently(k.answered_at, Instant::now()),
            ));
        }
        let client = connect(ip, self.port, &entry.creds)?;
        entry.channels.insert(
            ip.to_string(),
            Kept {
                client: client.clone(),
                answered_at: None,
                health: None,
            },
        );
        Ok((client, false))
    }

    fn answered(
        &self,
        gc: &GlusterCluster,
        ip: &str,
        answer: Option<&gk_agent_proto::v1::HealthResponse>,
    ) {
        let mut clusters = self.clusters.lock().unwrap();
        let Some(entry) = clusters.get_mut(&Self::key(gc)) else {
            return;
        };
        if let Some(health) = answer {
            if let Some(k) = entry.channels.get_mut(ip) {
                k.answered_at = Some(Instant::now());
                k.health = Some(health.clone());
            }
        } else {
            entry.channels.remove(ip);
            entry.suspect = true;
        }
    }

    /// The kept channel to the agent at `ip` and its health answer, when it answered within
    /// `ANSWERED_FOR`.
    fn recent(
        &self,
        gc: &GlusterCluster,
        ip: &str,
    ) -> Option<(
        BrickAgentClient<Channel>,
        gk_agent_proto::v1::HealthResponse,
    )> {
        let clusters = self.clusters.lock().unwrap();
        let k = clusters.get(&Self::key(gc))?.channels.get(ip)?;
        if !answered_recently(k.answered_at, Instant::now()) {
            return None;
        }
        Some((k.client.clone(), k.health.clone()?))
    }

    /// Asks the candidate's agent for its health through the kept channel.
    async fn ask(
        &self,
        gc: &GlusterCluster,
        c: &Candidate,
    ) -> Result<
        (
            BrickAgentClient<Channel>,
            gk_agent_proto::v1::HealthResponse,
        ),
        NodeDown,
    > {
        let (mut client, _) = self
            .channel(gc, &c.ip)
            .map_err(|e| not_answering(c, &Status::unavailable(e.to_string())))?;
        let asked = tokio::time::timeout(HEALTH_WAIT, client.health(HealthRequest {}))
            .await
            .unwrap_or_else(|_| {
                Err(Status::deadline_exceeded(format!(
                    "no answer within {}s",
                    HEALTH_WAIT.as_secs()
                )))
            });
        match asked {
            Ok(h) => {
                let h = h.into_inner();
                self.answered(gc, &c.ip, Some(&h));
                Ok((client, h))
            }
            Err(s) => {
                self.answered(gc, &c.ip, None);
                Err(not_answering(c, &s))
            }
        }
    }

    /// The first of `candidates` (spec order) whose agent answers: asked for its health
    /// unless it answered within `ANSWERED_FOR`. When none does, every node and why.
    pub async fn pick(
        &self,
        client: &kube::Client,
        gc: &GlusterCluster,
        candidates: &[Candidate],
        mut down: Vec<NodeDown>,
    ) -> Result<BrickAgentClient<Channel>, String> {
        if !candidates.is_empty() {
            self.credentials(client, gc)
                .await
                .map_err(|e| e.to_string())?;
            for c in candidates {
                match self.channel(gc, &c.ip) {
                    Ok((kept, true)) => return Ok(kept),
                    Ok(_) => {}
                    Err(e) => return Err(e.to_string()),
                }
                match self.ask(gc, c).await {
                    Ok((kept, _)) => return Ok(kept),
                    Err(d) => down.push(d),
                }
            }
        }
        Err(format!(
            "no brick agent of GlusterCluster {}/{} answers: {}",
            gc.namespace().unwrap_or_default(),
            gc.name_any(),
            describe_down(&down)
        ))
    }

    /// Kept channels to the agents of every one of `candidates`, for a call each node must
    /// make itself (a PV's project limit on its own bricks). The cluster's credentials must
    /// have been read ([`Self::pick`] does).
    pub fn every(
        &self,
        gc: &GlusterCluster,
        candidates: &[Candidate],
    ) -> Result<Vec<BrickAgentClient<Channel>>, String> {
        candidates
            .iter()
            .map(|c| self.channel(gc, &c.ip).map(|(kept, _)| kept))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())
    }

    /// The cluster's brick agents that answer a health call, in spec order, and the nodes
    /// whose agent does not (with why), through the kept channels; `asked` says whether an
    /// answer from the last `ANSWERED_FOR` stands. `creds` are the
    /// cluster's certificate when the caller holds it (the operator's cluster reconcile
    /// issues it); otherwise it is read from its Secret as [`Self::credentials`] does.
    pub async fn discover(
        &self,
        client: &kube::Client,
        gc: &GlusterCluster,
        creds: Option<&AgentCredentials>,
        asked: Asked,
    ) -> Result<(Vec<NodeAgent>, Vec<NodeDown>), AgentsError> {
        match creds {
            Some(c) => self.set_credentials(gc, c),
            None => {
                self.credentials(client, gc).await?;
            }
        }
        let ns = gc.namespace().unwrap_or_default();
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let list = pods
            .list(&ListParams::default().labels(&format!(
                "{}={}",
                names::LABEL_CLUSTER,
                gc.name_any()
            )))
            .await?;
        let (candidates, mut down) = candidates(gc, &list.items);
        let mut up = Vec::new();
        for c in candidates {
            if asked == Asked::Recently {
                if let Some((kept, health)) = self.recent(gc, &c.ip) {
                    up.push(node_agent(&c.node, health, kept));
                    continue;
                }
            }
            match self.ask(gc, &c).await {
                Ok((kept, health)) => up.push(node_agent(&c.node, health, kept)),
                Err(d) => down.push(d),
            }
        }
        // Spec order, as callers expect, whichever list a node ended up in.
        let order = |node: &str| gc.spec.nodes.iter().position(|n| n.name == node);
        down.sort_by_key(|d| order(&d.node));
        Ok((up, down))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_is_asked_again_once_its_answer_is_old() {
        let now = Instant::now() + Duration::from_secs(60);
        assert!(!answered_recently(None, now));
        assert!(answered_recently(Some(now - Duration::from_secs(1)), now));
        assert!(!answered_recently(Some(now - ANSWERED_FOR), now));
    }

    fn credentials() -> AgentCredentials {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["agent".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        AgentCredentials {
            ca_pem: cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            server_name: "agent".into(),
        }
    }

    #[tokio::test]
    async fn a_health_answer_stands_only_while_recent_and_until_a_call_fails() {
        let gc: GlusterCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
            "metadata": {"name": "pool", "namespace": "ns", "uid": "u1"},
            "spec": {"nodes": []},
        }))
        .unwrap();
        let cache = AgentCache::new(24050);
        cache.set_credentials(&gc, &credentials());
        let ip = "127.0.0.9";
        cache.channel(&gc, ip).unwrap();
        assert!(cache.recent(&gc, ip).is_none(), "asked before any answer");
        let h = gk_agent_proto::v1::HealthResponse {
            address: ip.into(),
            peers: 3,
            ..Default::default()
        };
        cache.answered(&gc, ip, Some(&h));
        assert_eq!(cache.recent(&gc, ip).map(|(_, h)| h.peers), Some(3));
        // An old answer is asked again (the age rule: `answered_recently`).
        cache
            .clusters
            .lock()
            .unwrap()
            .get_mut("u1")
            .unwrap()
            .channels
            .get_mut(ip)
            .unwrap()
            .answered_at = Some(Instant::now() - ANSWERED_FOR);
        assert!(
            cache.recent(&gc, ip).is_none(),
            "an answer older than ANSWERED_FOR"
        );
        cache.answered(&gc, ip, Some(&h));
        // A failed call drops the channel and its answer: the next discover asks.
        cache.answered(&gc, ip, None);
        assert!(cache.recent(&gc, ip).is_none(), "after a failed call");
    }

    #[test]
    fn the_certificate_is_read_again_when_old_or_after_a_failure() {
        let now = Instant::now() + Duration::from_secs(600);
        assert!(!credentials_stale(now - Duration::from_secs(5), false, now));
        assert!(credentials_stale(now - Duration::from_secs(5), true, now));
        assert!(credentials_stale(now - CREDENTIALS_FOR, false, now));
    }
}
