//! The places the workloads run, each made the way its case says: by hand as the seeds do
//! (with and without gluster's own TLS), or as the product ships (the operator's options, the
//! CSI controller's directory and quota, the CSI node plugin's mount), plus exploratory
//! variants of the product given on the command line.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use csi::controller_server::Controller;
use csi::node_server::Node;
use csi_proto::v1 as csi;
use gk_agent_proto::v1::{VolumeCreateRequest, VolumeSetRequest, VolumeSpec, VolumeType};
use gk_api::crd::TuningProfile;
use gk_csi::backend::{Pool, StaticPools, DEDICATED_DIR};
use gk_csi::controller::ControllerService;
use gk_csi::node::NodeService;
use gk_csi::params::ObjectKey;
use gk_gluster::VolumeLayout;
use gk_mount::MountSource;
use gk_operator::tls::access::{volume_options, Access};
use gk_testenv::agents::AgentSet;
use gk_testenv::bench::datapath::{self as dp, Case};
use gk_testenv::gluster_net::{Client, GlusterNet};
use tonic::Request;

/// Each product PV's size: room for the largest workload (512 MiB of dd, 256 MiB of fio)
/// while deleted files are still being credited back to the quota.
pub const PV_BYTES: i64 = 1800 << 20;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Kind {
    Replicate3,
    Arbiter,
    Disperse,
}

impl Kind {
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "r3" => Some(Kind::Replicate3),
            "arb" => Some(Kind::Arbiter),
            "ec" => Some(Kind::Disperse),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Replicate3 => "replicate 3",
            Kind::Arbiter => "arbiter 2+1",
            Kind::Disperse => "disperse 2+1",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Kind::Replicate3 => "r3",
            Kind::Arbiter => "arb",
            Kind::Disperse => "ec",
        }
    }

    pub fn layout(self) -> VolumeLayout {
        match self {
            Kind::Replicate3 => VolumeLayout::Replicate { replica: 3 },
            Kind::Arbiter => VolumeLayout::Arbiter,
            Kind::Disperse => VolumeLayout::Disperse {
                data: 2,
                redundancy: 1,
            },
        }
    }
}

/// A place the workloads run.
pub struct Target {
    pub key: String,
    /// Where the workloads write: a mount, or a pod's published target.
    pub dir: PathBuf,
    /// The gluster volume behind it (empty for raw).
    pub volume: String,
    pub meta: Case,
}

/// How an exploratory variant is made: a product case with more volume options and mount
/// options, written `KEY=BASE:opt=val,opt=val[:mountflag,mountflag]` (BASE `pv`, `dv` or
/// `bt`).
#[derive(Debug, Clone)]
pub struct Variant {
    pub key: String,
    pub base: String,
    pub options: BTreeMap<String, String>,
    pub flags: Vec<String>,
}

impl Variant {
    pub fn parse(s: &str) -> Result<Variant, String> {
        let (key, rest) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: expected KEY=BASE:options[:flags]"))?;
        let mut parts = rest.splitn(3, ':');
        let base = parts.next().unwrap_or_default().to_string();
        if !["pv", "dv", "bt"].contains(&base.as_str()) {
            return Err(format!("{s:?}: base must be pv, dv or bt"));
        }
        let options = parts
            .next()
            .unwrap_or_default()
            .split(',')
            .filter(|o| !o.is_empty())
            .map(|o| {
                o.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .ok_or_else(|| format!("{o:?}: expected option=value"))
            })
            .collect::<Result<_, _>>()?;
        let flags = parts
            .next()
            .unwrap_or_default()
            .split(',')
            .filter(|f| !f.is_empty())
            .map(String::from)
            .collect();
        Ok(Variant {
            key: key.to_string(),
            base,
            options,
            flags,
        })
    }
}

/// What the cases are made with.
pub struct Maker<'a> {
    pub net: &'a GlusterNet,
    pub agents: &'a AgentSet,
    /// A client holding the CSI node plugins' certificate, with management TLS.
    pub client: &'a Client,
    pub node: NodeService,
    /// The names `auth.ssl-allow` admits: the nodes' (self-heal, quota) and the CSI plugins'.
    pub allowed: Vec<String>,
}

fn agent_type(kind: Kind) -> (VolumeType, u32, u32, u32) {
    match kind.layout() {
        VolumeLayout::Replicate { replica } => (VolumeType::Replicate, replica, 0, 0),
        VolumeLayout::Arbiter => (VolumeType::Arbiter, 0, 0, 0),
        VolumeLayout::Disperse { data, redundancy } => (VolumeType::Disperse, 0, data, redundancy),
        VolumeLayout::Distribute => unreachable!("not benched"),
    }
}

fn cap(mode: csi::volume_capability::access_mode::Mode, flags: &[String]) -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_type: Some(csi::volume_capability::AccessType::Mount(
            csi::volume_capability::MountVolume {
                mount_flags: flags.to_vec(),
                ..Default::default()
            },
        )),
        access_mode: Some(csi::volume_capability::AccessMode { mode: mode as i32 }),
    }
}

impl Maker<'_> {
    /// (b) and (b-tls): `gluster volume create` and `start`, and for (b-tls) gluster's
    /// documented switch for I/O TLS (`client.ssl`, `server.ssl`); mounted as the seeds do,
    /// `mount -t glusterfs node1:/vol` (management TLS from the client's `secure-access`).
    pub async fn by_hand(
        &self,
        kind: Kind,
        case: &str,
        extra: &BTreeMap<String, String>,
        flags: &[String],
    ) -> (PathBuf, String, BTreeMap<String, String>) {
        let key = dp::key(case, kind.short());
        let volume = format!("bench-{key}");
        let g = self.net.gluster(0);
        g.volume_create(&volume, kind.layout(), &self.net.bricks(&volume), false)
            .await
            .expect("gluster volume create");
        let mut options = BTreeMap::new();
        if case != "b" {
            options.insert("client.ssl".to_string(), "on".to_string());
            options.insert("server.ssl".to_string(), "on".to_string());
        }
        options.extend(extra.clone());
        // `quota=on` in a variant: quota switched on as the product does (no limit set), to
        // weigh what quota's accounting costs apart from the rest.
        let quota = options.remove("quota").is_some();
        for (k, v) in &options {
            g.volume_set(&volume, k, v)
                .await
                .unwrap_or_else(|e| panic!("{volume}: volume set {k} {v}: {e}"));
        }
        g.volume_start(&volume).await.expect("gluster volume start");
        if quota {
            g.quota_enable(&volume).await.expect("quota enable");
            g.quota_check_timeouts(
                &volume,
                gk_agent::quota::SOFT_TIMEOUT_SECONDS,
                gk_agent::quota::HARD_TIMEOUT_SECONDS,
            )
            .await
            .expect("quota timeouts");
            options.insert("quota".into(), "on".into());
        }
        crate::wait_bricks_online(self.net, &volume).await;
        let dir = self.client.mount_dir(&key).unwrap();
        self.client
            .mounter()
            .mount(
                &MountSource {
                    servers: vec![self.net.nodes()[0].address.clone()],
                    volume: volume.clone(),
                    subdir: None,
                },
                &dir,
                &self.client.log_file(&key),
                flags,
            )
            .await
            .expect("FUSE mount");
        (dir, volume, options)
    }

    /// A volume as the operator makes it: created with its profile's options and the access
    /// options set before its bricks first start, then the profile's and its own options
    /// (`plan::options`) once more, as the GlusterVolume controller does through the agent.
    async fn product_volume(
        &self,
        kind: Kind,
        volume: &str,
        profile: TuningProfile,
        own: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let access = volume_options(&Access::Tls {
            common_names: self.allowed.clone(),
        })
        .expect("access options");
        let at_create = gk_operator::plan::options_at_create(profile, kind.layout(), &access);
        let (ty, replica, data, redundancy) = agent_type(kind);
        let mut agent = self.agents.client(0).await.expect("agent client");
        agent
            .volume_create(VolumeCreateRequest {
                spec: Some(VolumeSpec {
                    name: volume.into(),
                    r#type: ty as i32,
                    replica,
                    disperse_data: data,
                    disperse_redundancy: redundancy,
                    bricks: self
                        .net
                        .bricks(volume)
                        .iter()
                        .map(|b| b.to_string())
                        .collect(),
                    options: at_create.into_iter().collect(),
                    force: false,
                }),
                start: true,
            })
            .await
            .expect("agent VolumeCreate");
        let profile_options = gk_operator::plan::options(profile, kind.layout(), own);
        let set = agent
            .volume_set(VolumeSetRequest {
                name: volume.into(),
                options: profile_options.clone().into_iter().collect(),
            })
            .await
            .expect("agent VolumeSet")
            .into_inner();
        assert!(
            set.rejected.is_empty(),
            "{volume}: options refused: {:?}",
            set.rejected
        );
        crate::wait_bricks_online(self.net, volume).await;
        access.into_iter().chain(profile_options).collect()
    }

    fn pool(
        &self,
        agent: gk_agent_proto::v1::brick_agent_client::BrickAgentClient<tonic::transport::Channel>,
        volume: &str,
        profile: TuningProfile,
    ) -> Pool {
        Pool {
            agent,
            nodes: Vec::new(),
            volume: volume.into(),
            servers: self.net.nodes().iter().map(|n| n.address.clone()).collect(),
            tls: true,
            tls_secret: None,
            total_bytes: None,
            profile: Some(profile),
        }
    }

    /// Stages and publishes `vol` as the kubelet asks the CSI node plugin to; returns the
    /// pod's target directory.
    async fn publish(&self, key: &str, vol: &csi::Volume, cap: csi::VolumeCapability) -> PathBuf {
        let root = &self.node.kubelet.root;
        let staging = root.join(format!("plugins/kubernetes.io/csi/{key}/globalmount"));
        let target = root.join(format!("pods/pod-{key}/volumes/{key}/mount"));
        self.node
            .node_stage_volume(Request::new(csi::NodeStageVolumeRequest {
                volume_id: vol.volume_id.clone(),
                staging_target_path: staging.display().to_string(),
                volume_capability: Some(cap.clone()),
                volume_context: vol.volume_context.clone(),
                ..Default::default()
            }))
            .await
            .unwrap_or_else(|s| panic!("{key}: NodeStageVolume: {s:?}"));
        self.node
            .node_publish_volume(Request::new(csi::NodePublishVolumeRequest {
                volume_id: vol.volume_id.clone(),
                staging_target_path: staging.display().to_string(),
                target_path: target.display().to_string(),
                volume_capability: Some(cap),
                volume_context: vol.volume_context.clone(),
                ..Default::default()
            }))
            .await
            .unwrap_or_else(|s| panic!("{key}: NodePublishVolume: {s:?}"));
        target
    }

    /// A subdirectory PV of a pool volume with the default profile, made by the CSI
    /// controller's CreateVolume (directory and quota limit through the agent) and mounted
    /// by the CSI node plugin (all volfile servers, management and I/O TLS).
    pub async fn subdir_pv(
        &self,
        kind: Kind,
        key: &str,
        profile: TuningProfile,
        own: &BTreeMap<String, String>,
        flags: &[String],
    ) -> (PathBuf, String, BTreeMap<String, String>) {
        let volume = format!("bench-{key}");
        let options = self.product_volume(kind, &volume, profile, own).await;
        let pool_key = ObjectKey {
            namespace: "bench".into(),
            name: volume.clone(),
        };
        let agent = self.agents.client(0).await.expect("agent client");
        let controller = ControllerService::new(StaticPools {
            pools: Arc::new(HashMap::from([(
                pool_key,
                self.pool(agent, &volume, profile),
            )])),
        });
        use csi::volume_capability::access_mode::Mode;
        let cap = cap(Mode::MultiNodeMultiWriter, flags);
        let vol = controller
            .create_volume(Request::new(csi::CreateVolumeRequest {
                name: format!("pvc-{key}"),
                capacity_range: Some(csi::CapacityRange {
                    required_bytes: PV_BYTES,
                    limit_bytes: 0,
                }),
                volume_capabilities: vec![cap.clone()],
                parameters: HashMap::from([("pool".into(), format!("bench/{volume}"))]),
                ..Default::default()
            }))
            .await
            .expect("CreateVolume")
            .into_inner()
            .volume
            .expect("a volume");
        let dir = self.publish(key, &vol, cap).await;
        (dir, volume, options)
    }

    /// A dedicated PV: a volume of its own with `profile`, its data in the directory the CSI
    /// controller makes with the PV's quota, mounted by the CSI node plugin with the access
    /// mode `mode` (the profile may choose mount options for single-node modes).
    pub async fn dedicated_pv(
        &self,
        kind: Kind,
        key: &str,
        profile: TuningProfile,
        own: &BTreeMap<String, String>,
        flags: &[String],
        mode: csi::volume_capability::access_mode::Mode,
    ) -> (PathBuf, String, BTreeMap<String, String>) {
        let volume = format!("bench-{key}");
        let options = self.product_volume(kind, &volume, profile, own).await;
        let pv_key = ObjectKey {
            namespace: "bench".into(),
            name: volume.clone(),
        };
        let agent = self.agents.client(0).await.expect("agent client");
        let mut pool = self.pool(agent, &volume, profile);
        pool.create_dir(&pv_key, DEDICATED_DIR, PV_BYTES as u64)
            .await
            .expect("the dedicated PV's directory and quota");
        let context = gk_csi::request::volume_context(
            &pv_key,
            &volume,
            &pool.servers,
            DEDICATED_DIR,
            true,
            None,
            Some(profile),
        );
        let vol = csi::Volume {
            capacity_bytes: PV_BYTES,
            volume_id: gk_api::volume_id::VolumeId::Dedicated { volume: pv_key }.to_string(),
            volume_context: context,
            content_source: None,
            accessible_topology: vec![],
        };
        let dir = self.publish(key, &vol, cap(mode, flags)).await;
        (dir, volume, options)
    }
}
