//! Brick agents for the nodes of a [`GlusterNet`], served in-process over mutual TLS on
//! 127.0.0.1, each driving its own node's glusterd, with a test CA made by rcgen.

use std::net::SocketAddr;

use gk_agent::{tls, Agent, AgentConfig};
use gk_agent_proto::v1::brick_agent_client::BrickAgentClient;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use tokio::sync::oneshot;
use tonic::transport::{Channel, Endpoint};

use crate::gluster_net::GlusterNet;
use crate::EnvError;

/// A PEM certificate with its key.
#[derive(Debug, Clone)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// A CA and certificates it signed.
pub struct TestPki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

fn setup<E: std::fmt::Display>(e: E) -> EnvError {
    EnvError::Setup(format!("test PKI: {e}"))
}

impl TestPki {
    pub fn new(name: &str) -> Result<Self, EnvError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(setup)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().map_err(setup)?)
            .map_err(setup)?;
        Ok(Self { ca })
    }

    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// A leaf certificate for `names` (DNS names or IP addresses) with the given usage.
    pub fn issue(&self, cn: &str, names: &[&str], server: bool) -> Result<Pem, EnvError> {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).map_err(setup)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = KeyPair::generate().map_err(setup)?;
        let cert = params.signed_by(&key, &self.ca).map_err(setup)?;
        Ok(Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// One agent per node; dropping this stops them.
pub struct AgentSet {
    pub pki: TestPki,
    pub addrs: Vec<SocketAddr>,
    client: Pem,
    _stop: Vec<oneshot::Sender<()>>,
    /// The node views the agents mount in, when they mount as brick pods do.
    _node_views: Vec<crate::gluster_net::Client>,
}

/// The name the agents' serving certificate carries.
pub const SERVER_NAME: &str = "localhost";

impl AgentSet {
    /// Agents whose own FUSE mounts run in the test's client namespace.
    pub async fn start(net: &GlusterNet) -> Result<Self, EnvError> {
        Self::start_with(net, false, gk_agent::hung::HUNG_AFTER).await
    }

    /// Agents as [`AgentSet::start`] makes them, that take a brick process offline for
    /// `hung_after` after its start as hung.
    pub async fn start_hung_after(
        net: &GlusterNet,
        hung_after: std::time::Duration,
    ) -> Result<Self, EnvError> {
        Self::start_with(net, false, hung_after).await
    }

    /// Agents whose own FUSE mounts run in their node's network namespace and see its TLS
    /// directory and /var/lib/glusterd, as in a brick pod: needed on a TLS environment
    /// ([`GlusterNet::start_tls`]), where mounts need the node's certificate.
    pub async fn start_as_pods(net: &GlusterNet) -> Result<Self, EnvError> {
        Self::start_with(net, true, gk_agent::hung::HUNG_AFTER).await
    }

    async fn start_with(
        net: &GlusterNet,
        as_pods: bool,
        hung_after: std::time::Duration,
    ) -> Result<Self, EnvError> {
        let pki = TestPki::new("glusterkube-test-ca")?;
        let server = pki.issue("agent", &[SERVER_NAME, "127.0.0.1"], true)?;
        let client = pki.issue("operator", &[], false)?;
        let mut addrs = Vec::new();
        let mut stops = Vec::new();
        let mut views = Vec::new();
        for (i, node) in net.nodes().iter().enumerate() {
            let (mount_root, mounter) = if as_pods {
                let view = net.node_client(i)?;
                let mounts = (view.mount_dir("agent")?, view.mounter());
                views.push(view);
                mounts
            } else {
                (
                    net.scratch_dir(&format!("agent-mounts-n{}", i + 1))?,
                    net.client_mounter(),
                )
            };
            let config = AgentConfig {
                advertise_address: node.address.clone(),
                volfile_server: node.address.clone(),
                mount_root,
                mounter,
                brick_roots: vec![node.brick_root()],
                gluster_log_dir: node.log_dir(),
                brick_hung_after: hung_after,
            };
            let agent = Agent::new(net.gluster(i), config);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            addrs.push(listener.local_addr()?);
            let tls = tls::server_config(
                pki.ca_pem().as_bytes(),
                server.cert.as_bytes(),
                server.key.as_bytes(),
            );
            let (tx, rx) = oneshot::channel::<()>();
            stops.push(tx);
            tokio::spawn(async move {
                let stopped = async {
                    let _ = rx.await;
                };
                if let Err(e) = gk_agent::serve(agent, listener, tls, stopped).await {
                    tracing::error!(error = %e, "test agent stopped");
                }
            });
        }
        Ok(Self {
            pki,
            addrs,
            client,
            _stop: stops,
            _node_views: views,
        })
    }

    /// A client of node `i`'s agent with the operator's certificate.
    pub async fn client(&self, i: usize) -> Result<BrickAgentClient<Channel>, EnvError> {
        self.client_with(i, Some(&self.client), &self.pki.ca_pem())
            .await
    }

    /// A client with any (or no) client certificate, trusting `ca_pem` for the server.
    pub async fn client_with(
        &self,
        i: usize,
        identity: Option<&Pem>,
        ca_pem: &str,
    ) -> Result<BrickAgentClient<Channel>, EnvError> {
        let mut tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(ca_pem))
            .domain_name(SERVER_NAME);
        if let Some(id) = identity {
            tls = tls.identity(tonic::transport::Identity::from_pem(&id.cert, &id.key));
        }
        let channel = Endpoint::from_shared(format!("https://{}", self.addrs[i]))
            .map_err(|e| EnvError::Setup(e.to_string()))?
            .tls_config(tls)
            .map_err(|e| EnvError::Setup(e.to_string()))?
            .connect_lazy();
        Ok(BrickAgentClient::new(channel))
    }

    /// A started replica-3 volume with one brick on each of the first three nodes, made
    /// through node `i`'s agent; returns that agent's client.
    pub async fn replica3(
        &self,
        net: &GlusterNet,
        i: usize,
        name: &str,
    ) -> Result<BrickAgentClient<Channel>, EnvError> {
        use gk_agent_proto::v1::{VolumeCreateRequest, VolumeSpec, VolumeType};
        let bricks = net.nodes()[..3]
            .iter()
            .map(|n| format!("{}:{}/{name}", n.address, n.brick_root().display()))
            .collect();
        let mut agent = self.client(i).await?;
        agent
            .volume_create(VolumeCreateRequest {
                spec: Some(VolumeSpec {
                    name: name.into(),
                    r#type: VolumeType::Replicate as i32,
                    replica: 3,
                    bricks,
                    ..Default::default()
                }),
                start: true,
            })
            .await
            .map_err(|s| EnvError::Setup(format!("creating volume {name}: {}", s.message())))?;
        Ok(agent)
    }
}
