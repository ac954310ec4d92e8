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
pub(crate) fn parse<B: DeserializeOwned>(command: &str, xml: &str) -> Result<B, GlusterError> {
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

pub(crate) fn from_str<T: DeserializeOwned>(command: &str, xml: &str) -> Result<T, GlusterError> {
    quick_xml::de::from_str(xml).map_err(|e| GlusterError::Parse {
        command: command.to_string(),
        reason: e.to_string(),
    })
}

/// Parses one number gluster printed as text, naming the field when it is not a number.
pub(crate) fn number<T>(command: &str, field: &str, text: &str) -> Result<T, GlusterError>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    text.trim().parse().map_err(|e| GlusterError::Parse {
        command: command.to_string(),
        reason: format!("{field} {text:?}: {e}"),
    })
}

/// Gluster's yes/no words (`Yes`/`No`, `1`/`0`) as a bool; anything else is a parse error.
pub(crate) fn yes_no(command: &str, field: &str, text: &str) -> Result<bool, GlusterError> {
    match text.trim() {
        "Yes" | "yes" | "1" => Ok(true),
        "No" | "no" | "0" => Ok(false),
        other => Err(GlusterError::Parse {
            command: command.to_string(),
            reason: format!("{field} {other:?} is neither Yes nor No"),
        }),
    }
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

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolListBody {
    vol_list: VolListXml,
}

#[derive(Debug, Deserialize)]
struct VolListXml {
    #[serde(default)]
    volume: Vec<String>,
}

/// Parses `gluster --xml volume list`: the names of all volumes, in gluster's order.
pub fn parse_volume_list(xml: &str) -> Result<Vec<String>, GlusterError> {
    let body: VolListBody = parse("volume list", xml)?;
    Ok(body.vol_list.volume)
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

    #[test]
    fn volume_list() {
        assert_eq!(
            parse_volume_list(include_str!("../testdata/volume-list.xml")).unwrap(),
            ["d21", "r3"]
        );
        assert!(
            parse_volume_list(include_str!("../testdata/volume-list-empty.xml"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn volume_info_all() {
        let vols = parse_volume_info(include_str!("../testdata/volume-info-all.xml")).unwrap();
        assert_eq!(vols.len(), 2);
        let d = &vols[0];
        assert_eq!((d.name.as_str(), d.type_name.as_str()), ("d21", "Disperse"));
        assert_eq!((d.disperse_count, d.redundancy_count), (3, 1));
        assert_eq!(d.bricks[2].brick.path, "/tmp/hg/env/n3/bricks/d21");
        assert_eq!(vols[1].replica_count, 3);
        assert!(
            parse_volume_info(include_str!("../testdata/volume-info-none.xml"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn verdicts_of_plain_commands() {
        for ok in [
            "peer-detach.xml",
            "volume-stop.xml",
            "volume-delete.xml",
            "volume-set.xml",
            "volume-reset.xml",
            "quota-enable.xml",
            "quota-limit-usage.xml",
            "quota-remove.xml",
            "add-brick-replica.xml",
            "remove-brick-start.xml",
            "remove-brick-commit.xml",
            "replace-brick.xml",
            "rebalance-start.xml",
        ] {
            parse_verdict("x", fixture(ok)).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad, text) in [
            ("peer-detach-unknown.xml", "10.213.0.3 is not part of cluster"),
            ("volume-set-invalid.xml", "invalid number format \"banana\" in option \"cache-size\""),
            (
                "volume-set-unknown.xml",
                "option : no.such-key does not exist\nDid you mean nfs.acl or ...disable?",
            ),
            ("add-brick-partial.xml", "Operation failed"),
            (
                "remove-brick-commit-running.xml",
                "use 'force' option as migration is in progress",
            ),
            (
                "quota-limit-usage-nodir.xml",
                "Failed to get trusted.gfid attribute on path /nodir. Reason : No such file or directory",
            ),
        ] {
            match parse_verdict("x", fixture(bad)) {
                Err(GlusterError::Command { message, .. }) => assert_eq!(message, text, "{bad}"),
                other => panic!("{bad}: unexpected {other:?}"),
            }
        }
        match parse_verdict("x", fixture("quota-limit-usage-nodir.xml")) {
            Err(GlusterError::Command { ret, errno, .. }) => assert_eq!((ret, errno), (-2, 30800)),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Every captured answer, by file name.
    const FIXTURES: &[(&str, &str)] = &[
        (
            "add-brick-no-replica.xml",
            include_str!("../testdata/add-brick-no-replica.xml"),
        ),
        (
            "add-brick-partial.xml",
            include_str!("../testdata/add-brick-partial.xml"),
        ),
        (
            "add-brick-replica.xml",
            include_str!("../testdata/add-brick-replica.xml"),
        ),
        ("add-brick.xml", include_str!("../testdata/add-brick.xml")),
        (
            "heal-info-brick-down.xml",
            include_str!("../testdata/heal-info-brick-down.xml"),
        ),
        (
            "heal-info-split-brain.xml",
            include_str!("../testdata/heal-info-split-brain.xml"),
        ),
        (
            "heal-info-summary-after-replace.xml",
            include_str!("../testdata/heal-info-summary-after-replace.xml"),
        ),
        (
            "heal-count-healthy.txt",
            include_str!("../testdata/heal-count-healthy.txt"),
        ),
        (
            "heal-info-summary-brick-down.xml",
            include_str!("../testdata/heal-info-summary-brick-down.xml"),
        ),
        (
            "heal-info-summary-disperse.xml",
            include_str!("../testdata/heal-info-summary-disperse.xml"),
        ),
        (
            "heal-info-summary-healthy.xml",
            include_str!("../testdata/heal-info-summary-healthy.xml"),
        ),
        (
            "heal-start.stdout.txt",
            include_str!("../testdata/heal-start.stdout.txt"),
        ),
        (
            "heal-start-failed.stderr.txt",
            include_str!("../testdata/heal-start-failed.stderr.txt"),
        ),
        (
            "peer-detach-self.xml",
            include_str!("../testdata/peer-detach-self.xml"),
        ),
        (
            "peer-detach-unknown.xml",
            include_str!("../testdata/peer-detach-unknown.xml"),
        ),
        (
            "peer-detach.xml",
            include_str!("../testdata/peer-detach.xml"),
        ),
        (
            "peer-status.xml",
            include_str!("../testdata/peer-status.xml"),
        ),
        (
            "quota-enable-already.xml",
            include_str!("../testdata/quota-enable-already.xml"),
        ),
        (
            "quota-enable.xml",
            include_str!("../testdata/quota-enable.xml"),
        ),
        (
            "quota-limit-usage-human.xml",
            include_str!("../testdata/quota-limit-usage-human.xml"),
        ),
        (
            "quota-limit-usage-nodir.xml",
            include_str!("../testdata/quota-limit-usage-nodir.xml"),
        ),
        (
            "quota-limit-usage.xml",
            include_str!("../testdata/quota-limit-usage.xml"),
        ),
        (
            "quota-list-disabled.xml",
            include_str!("../testdata/quota-list-disabled.xml"),
        ),
        (
            "quota-list-exceeded.xml",
            include_str!("../testdata/quota-list-exceeded.xml"),
        ),
        (
            "quota-list-none.xml",
            include_str!("../testdata/quota-list-none.xml"),
        ),
        ("quota-list.xml", include_str!("../testdata/quota-list.xml")),
        (
            "quota-remove-aux-mount.xml",
            include_str!("../testdata/quota-remove-aux-mount.xml"),
        ),
        (
            "quota-remove-nodir.xml",
            include_str!("../testdata/quota-remove-nodir.xml"),
        ),
        (
            "quota-remove-not-in-store.xml",
            include_str!("../testdata/quota-remove-not-in-store.xml"),
        ),
        (
            "quota-remove-missing.xml",
            include_str!("../testdata/quota-remove-missing.xml"),
        ),
        (
            "quota-remove.xml",
            include_str!("../testdata/quota-remove.xml"),
        ),
        (
            "quota-soft-timeout.xml",
            include_str!("../testdata/quota-soft-timeout.xml"),
        ),
        (
            "rebalance-start-already.xml",
            include_str!("../testdata/rebalance-start-already.xml"),
        ),
        (
            "rebalance-start.xml",
            include_str!("../testdata/rebalance-start.xml"),
        ),
        (
            "rebalance-status-completed.xml",
            include_str!("../testdata/rebalance-status-completed.xml"),
        ),
        (
            "rebalance-status-none.xml",
            include_str!("../testdata/rebalance-status-none.xml"),
        ),
        (
            "rebalance-status-running.xml",
            include_str!("../testdata/rebalance-status-running.xml"),
        ),
        (
            "remove-brick-commit-again.xml",
            include_str!("../testdata/remove-brick-commit-again.xml"),
        ),
        (
            "remove-brick-commit-running.xml",
            include_str!("../testdata/remove-brick-commit-running.xml"),
        ),
        (
            "remove-brick-commit.xml",
            include_str!("../testdata/remove-brick-commit.xml"),
        ),
        (
            "remove-brick-start.xml",
            include_str!("../testdata/remove-brick-start.xml"),
        ),
        (
            "remove-brick-status-completed.xml",
            include_str!("../testdata/remove-brick-status-completed.xml"),
        ),
        (
            "remove-brick-status-none.xml",
            include_str!("../testdata/remove-brick-status-none.xml"),
        ),
        (
            "remove-brick-status-running.xml",
            include_str!("../testdata/remove-brick-status-running.xml"),
        ),
        (
            "replace-brick-missing.xml",
            include_str!("../testdata/replace-brick-missing.xml"),
        ),
        (
            "replace-brick.xml",
            include_str!("../testdata/replace-brick.xml"),
        ),
        (
            "volume-create-failed.xml",
            include_str!("../testdata/volume-create-failed.xml"),
        ),
        (
            "volume-delete-missing.xml",
            include_str!("../testdata/volume-delete-missing.xml"),
        ),
        (
            "volume-delete-started.xml",
            include_str!("../testdata/volume-delete-started.xml"),
        ),
        (
            "volume-delete.xml",
            include_str!("../testdata/volume-delete.xml"),
        ),
        (
            "volume-get-default.xml",
            include_str!("../testdata/volume-get-default.xml"),
        ),
        (
            "volume-get-unknown.xml",
            include_str!("../testdata/volume-get-unknown.xml"),
        ),
        ("volume-get.xml", include_str!("../testdata/volume-get.xml")),
        (
            "volume-info-all.xml",
            include_str!("../testdata/volume-info-all.xml"),
        ),
        (
            "volume-info-missing.xml",
            include_str!("../testdata/volume-info-missing.xml"),
        ),
        (
            "volume-info-none.xml",
            include_str!("../testdata/volume-info-none.xml"),
        ),
        (
            "volume-info-replica3.xml",
            include_str!("../testdata/volume-info-replica3.xml"),
        ),
        (
            "volume-list-empty.xml",
            include_str!("../testdata/volume-list-empty.xml"),
        ),
        (
            "volume-list.xml",
            include_str!("../testdata/volume-list.xml"),
        ),
        (
            "volume-reset.xml",
            include_str!("../testdata/volume-reset.xml"),
        ),
        (
            "volume-set-invalid.xml",
            include_str!("../testdata/volume-set-invalid.xml"),
        ),
        (
            "volume-set-unknown.xml",
            include_str!("../testdata/volume-set-unknown.xml"),
        ),
        ("volume-set.xml", include_str!("../testdata/volume-set.xml")),
        (
            "volume-start-already.xml",
            include_str!("../testdata/volume-start-already.xml"),
        ),
        (
            "volume-start-force.xml",
            include_str!("../testdata/volume-start-force.xml"),
        ),
        (
            "volume-status-brick-down.xml",
            include_str!("../testdata/volume-status-brick-down.xml"),
        ),
        (
            "volume-status-detail-brick-down.xml",
            include_str!("../testdata/volume-status-detail-brick-down.xml"),
        ),
        (
            "volume-status-detail-disperse.xml",
            include_str!("../testdata/volume-status-detail-disperse.xml"),
        ),
        (
            "volume-status-detail-replica3.xml",
            include_str!("../testdata/volume-status-detail-replica3.xml"),
        ),
        (
            "volume-status-disperse.xml",
            include_str!("../testdata/volume-status-disperse.xml"),
        ),
        (
            "volume-status-locked.xml",
            include_str!("../testdata/volume-status-locked.xml"),
        ),
        (
            "volume-status-replica3.xml",
            include_str!("../testdata/volume-status-replica3.xml"),
        ),
        (
            "volume-status-stopped.xml",
            include_str!("../testdata/volume-status-stopped.xml"),
        ),
        (
            "volume-stop-already-force.xml",
            include_str!("../testdata/volume-stop-already-force.xml"),
        ),
        (
            "volume-stop-already.xml",
            include_str!("../testdata/volume-stop-already.xml"),
        ),
        (
            "volume-stop-missing.xml",
            include_str!("../testdata/volume-stop-missing.xml"),
        ),
        (
            "volume-stop.xml",
            include_str!("../testdata/volume-stop.xml"),
        ),
    ];

    fn fixture(name: &str) -> &'static str {
        FIXTURES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| *text)
            .unwrap_or_else(|| panic!("no fixture {name}"))
    }

    #[test]
    fn every_fixture_is_listed() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = FIXTURES.iter().map(|(n, _)| n.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed);
    }

    /// Runs every parser of the crate on `s`; each must answer, never panic.
    fn all_parsers(s: &str) {
        let _ = parse_verdict("x", s);
        let _ = parse_peer_status(s);
        let _ = parse_volume_info(s);
        let _ = parse_volume_list(s);
        let _ = crate::parse_volume_status(s);
        let _ = crate::parse_volume_get(s);
        let _ = crate::parse_heal_info_summary(s);
        let _ = crate::parse_heal_entries("x", s);
        let _ = crate::parse_quota_list(s);
        let _ = crate::parse_rebalance_status(s);
        let _ = crate::parse_remove_brick_status(s);
        let out = crate::CommandOutput {
            success: true,
            stdout: s.to_string(),
            stderr: s.to_string(),
        };
        let _ = crate::heal::heal_start_verdict("x", &out);
        let _ = crate::parse_heal_count("x", &out);
    }

    fn cut(s: &str, at: usize) -> &str {
        let mut at = at.min(s.len());
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        &s[..at]
    }

    proptest! {
        #[test]
        fn truncated_answers_never_panic(which in 0usize..FIXTURES.len(), at in 0usize..4000) {
            let (_, doc) = FIXTURES[which];
            all_parsers(cut(doc, at));
        }

        #[test]
        fn arbitrary_text_never_panics(s in ".{0,300}") {
            all_parsers(&s);
        }

        #[test]
        fn arbitrary_xml_like_text_never_panics(
            s in "(<[a-zA-Z@/?]{0,12}>|[0-9a-zA-Z%./: -]{0,8}|&[a-z]{0,4};?){0,60}"
        ) {
            all_parsers(&s);
        }

        #[test]
        fn mutated_answers_never_panic(
            which in 0usize..FIXTURES.len(),
            edits in proptest::collection::vec((0usize..4000, any::<u8>()), 1..6),
        ) {
            let (_, doc) = FIXTURES[which];
            let mut bytes = doc.as_bytes().to_vec();
            for (pos, byte) in edits {
                let i = pos % bytes.len();
                bytes[i] = byte;
            }
            all_parsers(&String::from_utf8_lossy(&bytes));
        }

        #[test]
        fn numbers_in_answers_replaced_never_panic(
            which in 0usize..FIXTURES.len(),
            nth in 0usize..40,
            with in "(-?[0-9]{0,25}(\\.[0-9]{0,3})?|N/A|NaN|inf|-|)",
        ) {
            // Swap the nth number gluster printed for something else, keeping the XML well formed.
            let (_, doc) = FIXTURES[which];
            let mut out = String::new();
            let mut seen = 0;
            let mut rest = doc;
            while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
                let len = rest[start..].find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len() - start);
                out.push_str(&rest[..start]);
                if seen == nth { out.push_str(&with) } else { out.push_str(&rest[start..start + len]) }
                seen += 1;
                rest = &rest[start + len..];
            }
            out.push_str(rest);
            all_parsers(&out);
        }
    }
}
