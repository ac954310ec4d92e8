//! Parsing of `gluster --xml` answers. Every answer is checked for gluster's verdict
//! (`opRet`, `opErrno`, `opErrstr`) before its body is read.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::{Brick, GlusterError};

/// Gluster's verdict, present in every answer beside the command's own body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Verdict {
    op_ret: i32,
    op_errno: i32,
    #[serde(default)]
    op_errstr: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Nothing {}

/// Parses `xml` and turns gluster's failure verdict into [`GlusterError::Command`].
fn parse<B: DeserializeOwned>(command: &str, xml: &str) -> Result<B, GlusterError> {
    // Read the verdict alone first: a failed command has no body, and its error text is
    // what the caller must see.
    let verdict: Verdict = from_str(command, xml)?;
    if verdict.op_ret != 0 {
        return Err(GlusterError::Command {
            command: command.to_string(),
            ret: verdict.op_ret,
            errno: verdict.op_errno,
            message: verdict.op_errstr.unwrap_or_default(),
        });
    }
    from_str(command, xml)
}

fn from_str<T: DeserializeOwned>(command: &str, xml: &str) -> Result<T, GlusterError> {
    quick_xml::de::from_str(xml).map_err(|e| GlusterError::Parse {
        command: command.to_string(),
        reason: e.to_string(),
    })
}

/// Checks an answer that carries no body we need, only gluster's verdict.
pub(crate) fn parse_verdict(command: &str, xml: &str) -> Result<(), GlusterError> {
    parse::<Nothing>(command, xml).map(|_| ())
}

/// A peer of the trusted pool as seen from the glusterd that answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub uuid: String,
    pub hostname: String,
    pub connected: bool,
    pub state: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PeerStatusBody {
    peer_status: Option<PeerList>,
}

#[derive(Debug, Deserialize)]
struct PeerList {
    #[serde(default)]
    peer: Vec<PeerXml>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PeerXml {
    uuid: String,
    hostname: String,
    connected: u8,
    state_str: String,
}

/// Parses `gluster --xml peer status`.
pub fn parse_peer_status(xml: &str) -> Result<Vec<Peer>, GlusterError> {
    let body: PeerStatusBody = parse("peer status", xml)?;
    Ok(body
        .peer_status
        .map(|l| l.peer)
        .unwrap_or_default()
        .into_iter()
        .map(|p| Peer {
            uuid: p.uuid,
            hostname: p.hostname,
            connected: p.connected == 1,
            state: p.state_str,
        })
        .collect())
}

/// A volume as `gluster volume info` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub name: String,
    pub id: String,
    /// Gluster's status word: Created, Started or Stopped.
    pub status: String,
    /// Gluster's type word, for example Replicate, Distributed-Replicate or Disperse.
    pub type_name: String,
    pub replica_count: u32,
    pub arbiter_count: u32,
    pub disperse_count: u32,
    pub redundancy_count: u32,
    pub bricks: Vec<VolumeBrick>,
    pub options: BTreeMap<String, String>,
}

impl Volume {
    pub fn is_started(&self) -> bool {
        self.status == "Started"
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeBrick {
    pub brick: Brick,
    pub host_uuid: String,
    pub is_arbiter: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolInfoBody {
    vol_info: VolInfoXml,
}

#[derive(Debug, Deserialize)]
struct VolInfoXml {
    volumes: VolumesXml,
}

#[derive(Debug, Deserialize)]
struct VolumesXml {
    #[serde(default)]
    volume: Vec<VolumeXml>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolumeXml {
    name: String,
    id: String,
    status_str: String,
    type_str: String,
    replica_count: u32,
    #[serde(default)]
    arbiter_count: u32,
    disperse_count: u32,
    redundancy_count: u32,
    bricks: BricksXml,
    #[serde(default)]
    options: Option<OptionsXml>,
}

#[derive(Debug, Deserialize)]
struct BricksXml {
    #[serde(default)]
    brick: Vec<BrickXml>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BrickXml {
    name: String,
    host_uuid: String,
    #[serde(default)]
    is_arbiter: u8,
}

#[derive(Debug, Deserialize)]
struct OptionsXml {
    #[serde(default)]
    option: Vec<OptionXml>,
}

#[derive(Debug, Deserialize)]
struct OptionXml {
    name: String,
    #[serde(default)]
    value: String,
}

/// Parses `gluster --xml volume info [NAME]`.
pub fn parse_volume_info(xml: &str) -> Result<Vec<Volume>, GlusterError> {
    let body: VolInfoBody = parse("volume info", xml)?;
    body.vol_info
        .volumes
        .volume
        .into_iter()
        .map(|v| {
            let bricks = v
                .bricks
                .brick
                .into_iter()
                .map(|b| {
                    Ok(VolumeBrick {
                        brick: Brick::parse(&b.name).map_err(|e| GlusterError::Parse {
                            command: "volume info".into(),
                            reason: format!("brick {:?}: {e}", b.name),
                        })?,
                        host_uuid: b.host_uuid,
                        is_arbiter: b.is_arbiter == 1,
                    })
                })
                .collect::<Result<_, GlusterError>>()?;
            Ok(Volume {
                name: v.name,
                id: v.id,
                status: v.status_str,
                type_name: v.type_str,
                replica_count: v.replica_count,
                arbiter_count: v.arbiter_count,
                disperse_count: v.disperse_count,
                redundancy_count: v.redundancy_count,
                bricks,
                options: v
                    .options
                    .map(|o| o.option)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|o| (o.name, o.value))
                    .collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PEERS: &str = include_str!("../testdata/peer-status.xml");
    const VOLINFO: &str = include_str!("../testdata/volume-info-replica3.xml");
    const FAILED: &str = include_str!("../testdata/volume-create-failed.xml");

    #[test]
    fn peer_status() {
        let peers = parse_peer_status(PEERS).unwrap();
        assert_eq!(peers.len(), 2);
        assert_eq!(peers[0].hostname, "10.213.0.2");
        assert!(peers
            .iter()
            .all(|p| p.connected && p.state == "Peer in Cluster"));
    }

    #[test]
    fn volume_info() {
        let vols = parse_volume_info(VOLINFO).unwrap();
        assert_eq!(vols.len(), 1);
        let v = &vols[0];
        assert_eq!(v.name, "r3");
        assert!(v.is_started());
        assert_eq!(v.type_name, "Replicate");
        assert_eq!(v.replica_count, 3);
        assert_eq!(v.bricks.len(), 3);
        assert_eq!(v.bricks[1].brick.host, "10.213.0.2");
        assert_eq!(v.options.get("nfs.disable").map(String::as_str), Some("on"));
    }

    #[test]
    fn failure_keeps_gluster_text() {
        match parse_verdict("volume create x", FAILED).unwrap_err() {
            GlusterError::Command { ret, message, .. } => {
                assert_eq!(ret, -1);
                assert!(message.contains("already exists"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    proptest! {
        #[test]
        fn truncated_answers_never_panic(cut in 0usize..4000) {
            for doc in [PEERS, VOLINFO, FAILED] {
                let s = &doc[..cut.min(doc.len())];
                let _ = parse_volume_info(s);
                let _ = parse_peer_status(s);
            }
        }

        #[test]
        fn arbitrary_text_never_panics(s in ".{0,300}") {
            let _ = parse_volume_info(&s);
            let _ = parse_peer_status(&s);
            let _ = parse_verdict("x", &s);
        }

        #[test]
        fn mutated_answers_never_panic(pos in 0usize..3000, byte in any::<u8>()) {
            let mut bytes = VOLINFO.as_bytes().to_vec();
            let i = pos % bytes.len();
            bytes[i] = byte;
            let s = String::from_utf8_lossy(&bytes);
            let _ = parse_volume_info(&s);
        }
    }
}
