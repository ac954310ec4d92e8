//! `gluster volume status`: which brick processes and daemons run, and how full bricks are.

use serde::Deserialize;

use crate::xml::{number, parse};
use crate::{Brick, GlusterError};

const COMMAND: &str = "volume status";

/// A started volume's processes as `volume status NAME [detail]` reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeStatus {
    pub volume: String,
    /// One entry per brick, in gluster's brick order.
    pub bricks: Vec<BrickStatus>,
    /// Daemons serving the volume (self-heal, quota, ...). Plain `volume status` lists
    /// them; `detail` does not.
    pub daemons: Vec<DaemonStatus>,
}

impl VolumeStatus {
    /// The self-heal daemons, one per peer for replicated and dispersed volumes.
    pub fn self_heal_daemons(&self) -> impl Iterator<Item = &DaemonStatus> {
        self.daemons.iter().filter(|d| d.name == "Self-heal Daemon")
    }

    /// Whether self-heal daemons are listed and every one of them is online: until then a
    /// heal count through glusterd would name a daemon not yet serving the volume.
    pub fn self_heal_daemons_online(&self) -> bool {
        let mut shd = self.self_heal_daemons().peekable();
        shd.peek().is_some() && shd.all(|d| d.online)
    }

    /// Fills what `other` (a second answer about the same volume) knows and this one does
    /// not: brick ports and pids, filesystem details and the daemon list.
    pub fn merge(&mut self, other: VolumeStatus) {
        for theirs in other.bricks {
            match self.bricks.iter_mut().find(|b| b.brick == theirs.brick) {
                Some(ours) => ours.fill_from(theirs),
                None => self.bricks.push(theirs),
            }
        }
        if self.daemons.is_empty() {
            self.daemons = other.daemons;
        }
    }
}

/// One brick process. Size fields are present only in `volume status NAME detail`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrickStatus {
    pub brick: Brick,
    /// The UUID of the peer that hosts the brick.
    pub peer_id: String,
    pub online: bool,
    /// The brick's TCP port; `None` while it is offline (gluster prints `N/A`).
    pub port: Option<u16>,
    /// The brick process id on its host; `None` while it is offline (gluster prints -1).
    pub pid: Option<u32>,
    pub device: Option<String>,
    pub fs_name: Option<String>,
    pub mount_options: Option<String>,
    pub block_size: Option<u64>,
    pub size_total: Option<u64>,
    pub size_free: Option<u64>,
    pub inodes_total: Option<u64>,
    pub inodes_free: Option<u64>,
}

impl BrickStatus {
    fn fill_from(&mut self, other: BrickStatus) {
        fn fill<T>(ours: &mut Option<T>, theirs: Option<T>) {
            if ours.is_none() {
                *ours = theirs;
            }
        }
        fill(&mut self.port, other.port);
        fill(&mut self.pid, other.pid);
        fill(&mut self.device, other.device);
        fill(&mut self.fs_name, other.fs_name);
        fill(&mut self.mount_options, other.mount_options);
        fill(&mut self.block_size, other.block_size);
        fill(&mut self.size_total, other.size_total);
        fill(&mut self.size_free, other.size_free);
        fill(&mut self.inodes_total, other.inodes_total);
        fill(&mut self.inodes_free, other.inodes_free);
    }
}

/// A daemon entry of `volume status`, such as a self-heal daemon on one peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonStatus {
    /// Gluster's name for it, for example `Self-heal Daemon` or `Quota Daemon`.
    pub name: String,
    /// The peer it runs on; gluster writes `localhost` for the peer that answered.
    pub host: String,
    pub peer_id: String,
    pub online: bool,
    pub pid: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusBody {
    vol_status: VolStatusXml,
}

#[derive(Debug, Deserialize)]
struct VolStatusXml {
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
    vol_name: String,
    #[serde(default)]
    node: Vec<NodeXml>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeXml {
    hostname: String,
    path: String,
    #[serde(default)]
    peerid: String,
    status: String,
    #[serde(default)]
    port: Option<String>,
    #[serde(default)]
    pid: Option<String>,
    size_total: Option<String>,
    size_free: Option<String>,
    device: Option<String>,
    block_size: Option<String>,
    mnt_options: Option<String>,
    fs_name: Option<String>,
    inodes_total: Option<String>,
    inodes_free: Option<String>,
}

fn opt_number<T>(field: &str, text: Option<String>) -> Result<Option<T>, GlusterError>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    match text.as_deref().map(str::trim) {
        None | Some("") | Some("N/A") => Ok(None),
        Some(t) => number(COMMAND, field, t).map(Some),
    }
}

/// Gluster writes -1 for the pid of a process that is not running.
fn pid(text: Option<String>) -> Result<Option<u32>, GlusterError> {
    Ok(opt_number::<i64>("pid", text)?.and_then(|p| u32::try_from(p).ok().filter(|&p| p > 0)))
}

fn text(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s != "N/A")
}

/// Parses `gluster --xml volume status NAME [detail]` (also `all`, hence one entry per
/// volume). Bricks are the entries whose path is absolute; the others are daemons.
pub fn parse_volume_status(xml: &str) -> Result<Vec<VolumeStatus>, GlusterError> {
    let body: StatusBody = parse(COMMAND, xml)?;
    body.vol_status
        .volumes
        .volume
        .into_iter()
        .map(|v| {
            let mut status = VolumeStatus {
                volume: v.vol_name,
                bricks: Vec::new(),
                daemons: Vec::new(),
            };
            for n in v.node {
                let online = number::<i32>(COMMAND, "status", &n.status)? == 1;
                if !n.path.starts_with('/') {
                    status.daemons.push(DaemonStatus {
                        name: n.hostname,
                        host: n.path,
                        peer_id: n.peerid,
                        online,
                        pid: pid(n.pid)?,
                    });
                    continue;
                }
                let brick = Brick::new(&n.hostname, &n.path).map_err(|e| GlusterError::Parse {
                    command: COMMAND.into(),
                    reason: format!("brick {}:{}: {e}", n.hostname, n.path),
                })?;
                status.bricks.push(BrickStatus {
                    brick,
                    peer_id: n.peerid,
                    online,
                    port: opt_number("port", n.port)?,
                    pid: pid(n.pid)?,
                    device: text(n.device),
                    fs_name: text(n.fs_name),
                    mount_options: text(n.mnt_options),
                    block_size: opt_number("blockSize", n.block_size)?,
                    size_total: opt_number("sizeTotal", n.size_total)?,
                    size_free: opt_number("sizeFree", n.size_free)?,
                    inodes_total: opt_number("inodesTotal", n.inodes_total)?,
                    inodes_free: opt_number("inodesFree", n.inodes_free)?,
                });
            }
            Ok(status)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DETAIL: &str = include_str!("../testdata/volume-status-detail-replica3.xml");
    const PLAIN: &str = include_str!("../testdata/volume-status-replica3.xml");

    fn one(xml: &str) -> VolumeStatus {
        let mut v = parse_volume_status(xml).unwrap();
        assert_eq!(v.len(), 1);
        v.remove(0)
    }

    #[test]
    fn detail_has_sizes_and_no_daemons() {
        let s = one(DETAIL);
        assert_eq!(s.volume, "r3");
        assert_eq!(s.bricks.len(), 3);
        assert!(s.daemons.is_empty());
        let b = &s.bricks[0];
        assert_eq!(b.brick.to_string(), "10.213.0.1:/tmp/hg/env/n1/bricks/r3");
        assert_eq!(b.peer_id, "26b34d52-be9e-42f0-bd4a-f39ffe393c76");
        assert!(b.online);
        assert_eq!(b.port, Some(58101));
        assert_eq!(b.pid, Some(6601));
        assert_eq!(b.size_total, Some(2_080_374_784));
        assert_eq!(b.size_free, Some(2_031_640_576));
        assert_eq!(b.inodes_total, Some(1_048_576));
        assert_eq!(b.inodes_free, Some(1_048_032));
        assert_eq!(b.device.as_deref(), Some("/dev/loop0"));
        assert_eq!(b.fs_name.as_deref(), Some("xfs"));
        assert_eq!(b.block_size, Some(4096));
        assert!(b.mount_options.as_deref().unwrap().contains("inode64"));
        assert_eq!(s.bricks[2].pid, Some(6660));
    }

    #[test]
    fn plain_has_self_heal_daemons_and_no_sizes() {
        let s = one(PLAIN);
        assert_eq!(s.bricks.len(), 3);
        assert!(s.bricks.iter().all(|b| b.size_total.is_none() && b.online));
        let shd: Vec<_> = s.self_heal_daemons().collect();
        assert_eq!(shd.len(), 3);
        assert_eq!(shd[0].host, "localhost");
        assert_eq!(shd[0].pid, Some(6619));
        assert!(shd.iter().all(|d| d.online));
    }

    #[test]
    fn self_heal_daemons_online_needs_every_daemon_listed_up() {
        let mut s = one(PLAIN);
        assert!(s.self_heal_daemons_online());
        // `detail` lists no daemons: that is not "online".
        assert!(!one(DETAIL).self_heal_daemons_online());
        let i = s
            .daemons
            .iter()
            .position(|d| d.name == "Self-heal Daemon" && d.host != "localhost")
            .unwrap();
        s.daemons[i].online = false;
        assert!(!s.self_heal_daemons_online());
    }

    #[test]
    fn brick_down_has_no_port_or_pid() {
        let s = one(include_str!(
            "../testdata/volume-status-detail-brick-down.xml"
        ));
        let down = &s.bricks[2];
        assert_eq!(down.brick.host, "10.213.0.3");
        assert!(!down.online);
        assert_eq!((down.port, down.pid), (None, None));
        assert_eq!(down.size_total, Some(2_080_374_784));
        assert!(s.bricks[..2].iter().all(|b| b.online && b.pid.is_some()));
    }

    #[test]
    fn merge_fills_daemons_and_missing_fields() {
        let mut detail = one(DETAIL);
        for b in &mut detail.bricks {
            b.port = None;
            b.pid = None;
        }
        detail.merge(one(PLAIN));
        assert_eq!(detail.bricks.len(), 3);
        assert_eq!(detail.bricks[1].port, Some(57146));
        assert_eq!(detail.bricks[1].pid, Some(6659));
        assert_eq!(detail.bricks[1].size_free, Some(2_031_640_576));
        assert_eq!(detail.self_heal_daemons().count(), 3);
    }

    #[test]
    fn disperse() {
        let s = one(include_str!(
            "../testdata/volume-status-detail-disperse.xml"
        ));
        assert_eq!(s.volume, "d21");
        assert_eq!(s.bricks.len(), 3);
        let s = one(include_str!("../testdata/volume-status-disperse.xml"));
        assert_eq!(s.self_heal_daemons().count(), 3);
    }

    #[test]
    fn stopped_volume_keeps_gluster_text() {
        match parse_volume_status(include_str!("../testdata/volume-status-stopped.xml")) {
            Err(GlusterError::Command { message, .. }) => {
                assert_eq!(message, "Volume r3 is not started")
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn bad_numbers_are_parse_errors() {
        let xml = DETAIL.replace(
            "<sizeFree>2031640576</sizeFree>",
            "<sizeFree>lots</sizeFree>",
        );
        let err = parse_volume_status(&xml).unwrap_err();
        assert!(
            matches!(&err, GlusterError::Parse { reason, .. } if reason.contains("sizeFree")),
            "{err}"
        );
        let xml = DETAIL.replace("<port>58101</port>", "<port>99999</port>");
        assert!(matches!(
            parse_volume_status(&xml),
            Err(GlusterError::Parse { .. })
        ));
    }
}
