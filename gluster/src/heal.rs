//! Self-heal: `volume heal NAME info summary` and `volume heal NAME`.

use serde::Deserialize;

use crate::cli::{plain_text_error, CommandOutput};
use crate::xml::{number, parse, parse_verdict};
use crate::{Brick, GlusterError};

const COMMAND: &str = "volume heal info summary";

/// What one brick still has to heal, from `volume heal NAME info summary`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrickHeal {
    pub brick: Brick,
    /// The UUID of the peer hosting the brick; `None` when gluster could not reach it.
    pub host_uuid: Option<String>,
    /// Gluster's status text: `Connected`, or why the brick could not be examined.
    pub status: String,
    /// Whether the brick could be examined. The counts below are `None` when it could not.
    pub connected: bool,
    /// All entries in the brick's heal index.
    pub total: Option<u64>,
    /// Entries that need healing from this brick.
    pub pending: Option<u64>,
    pub split_brain: Option<u64>,
    pub possibly_healing: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HealBody {
    heal_info: HealInfoXml,
}

#[derive(Debug, Deserialize)]
struct HealInfoXml {
    bricks: BricksXml,
}

#[derive(Debug, Deserialize)]
struct BricksXml {
    #[serde(default)]
    brick: Vec<BrickXml>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BrickXml {
    #[serde(rename = "@hostUuid")]
    host_uuid: Option<String>,
    name: String,
    #[serde(default)]
    status: String,
    total_number_of_entries: Option<String>,
    number_of_entries_in_heal_pending: Option<String>,
    number_of_entries_in_split_brain: Option<String>,
    number_of_entries_possibly_healing: Option<String>,
}

fn count(field: &str, text: Option<String>) -> Result<Option<u64>, GlusterError> {
    text.map(|t| number(COMMAND, field, &t)).transpose()
}

/// Parses `gluster --xml volume heal NAME info summary`.
pub fn parse_heal_info_summary(xml: &str) -> Result<Vec<BrickHeal>, GlusterError> {
    let body: HealBody = parse(COMMAND, xml)?;
    body.heal_info
        .bricks
        .brick
        .into_iter()
        .map(|b| {
            let brick = Brick::parse(b.name.trim()).map_err(|e| GlusterError::Parse {
                command: COMMAND.into(),
                reason: format!("brick {:?}: {e}", b.name),
            })?;
            let status = b.status.trim().to_string();
            Ok(BrickHeal {
                brick,
                host_uuid: b.host_uuid.filter(|u| !u.is_empty() && u != "-"),
                connected: status == "Connected",
                status,
                total: count("totalNumberOfEntries", b.total_number_of_entries)?,
                pending: count(
                    "numberOfEntriesInHealPending",
                    b.number_of_entries_in_heal_pending,
                )?,
                split_brain: count(
                    "numberOfEntriesInSplitBrain",
                    b.number_of_entries_in_split_brain,
                )?,
                possibly_healing: count(
                    "numberOfEntriesPossiblyHealing",
                    b.number_of_entries_possibly_healing,
                )?,
            })
        })
        .collect()
}

/// Judges the answer to `volume heal NAME`. Gluster 10 answers this one in plain text even
/// with `--xml`: "Launching heal operation ... has been successful" on stdout, or "... has
/// been unsuccessful:" and the reason on stderr with exit status 1.
pub(crate) fn heal_start_verdict(command: &str, out: &CommandOutput) -> Result<(), GlusterError> {
    if out.stdout.trim_start().starts_with("<?xml") || out.stdout.contains("<cliOutput>") {
        return parse_verdict(command, &out.stdout);
    }
    if out.success && out.stdout.contains("has been successful") {
        return Ok(());
    }
    Err(plain_text_error(command, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_replica() {
        let bricks =
            parse_heal_info_summary(include_str!("../testdata/heal-info-summary-healthy.xml"))
                .unwrap();
        assert_eq!(bricks.len(), 3);
        assert_eq!(
            bricks[1].brick.to_string(),
            "10.213.0.2:/tmp/hg/env/n2/bricks/r3"
        );
        assert_eq!(
            bricks[1].host_uuid.as_deref(),
            Some("6619b609-3bc4-44a4-82cd-a87e87202a80")
        );
        for b in &bricks {
            assert!(b.connected, "{b:?}");
            assert_eq!(
                (b.total, b.pending, b.split_brain, b.possibly_healing),
                (Some(0), Some(0), Some(0), Some(0))
            );
        }
    }

    #[test]
    fn brick_down_with_pending_entries() {
        let bricks =
            parse_heal_info_summary(include_str!("../testdata/heal-info-summary-brick-down.xml"))
                .unwrap();
        assert_eq!(bricks.len(), 3);
        for b in &bricks[..2] {
            assert!(b.connected);
            assert_eq!((b.total, b.pending), (Some(13), Some(13)));
            assert_eq!(b.split_brain, Some(0));
        }
        let down = &bricks[2];
        assert!(!down.connected);
        assert_eq!(down.brick.host, "10.213.0.3");
        assert_eq!(down.host_uuid, None);
        assert!(
            down.status.starts_with(
                "Failed to process entries completely. (Transport endpoint is not connected)"
            ),
            "{}",
            down.status
        );
        assert_eq!((down.total, down.pending), (None, None));
    }

    #[test]
    fn after_replace_brick_six_bricks() {
        let bricks = parse_heal_info_summary(include_str!(
            "../testdata/heal-info-summary-after-replace.xml"
        ))
        .unwrap();
        assert_eq!(bricks.len(), 6);
        assert_eq!(bricks[0].pending, Some(18));
        assert_eq!(bricks[1].pending, Some(17));
        assert_eq!(bricks[2].brick.path, "/tmp/hg/env/n3/bricks/r3-new");
        assert_eq!(bricks[2].pending, Some(0));
    }

    #[test]
    fn disperse_is_supported() {
        let bricks =
            parse_heal_info_summary(include_str!("../testdata/heal-info-summary-disperse.xml"))
                .unwrap();
        assert_eq!(bricks.len(), 3);
        assert!(bricks.iter().all(|b| b.connected && b.pending == Some(0)));
    }

    #[test]
    fn bad_count_is_a_parse_error() {
        let xml = include_str!("../testdata/heal-info-summary-healthy.xml").replacen(
            "<numberOfEntriesInHealPending>0<",
            "<numberOfEntriesInHealPending>-3<",
            1,
        );
        assert!(matches!(
            parse_heal_info_summary(&xml),
            Err(GlusterError::Parse { reason, .. }) if reason.contains("HealPending")
        ));
    }

    #[test]
    fn heal_start_text_answers() {
        let ok = CommandOutput {
            success: true,
            stdout: include_str!("../testdata/heal-start.stdout.txt").into(),
            stderr: String::new(),
        };
        heal_start_verdict("volume heal r3", &ok).unwrap();
        let failed = CommandOutput {
            success: false,
            stdout: String::new(),
            stderr: include_str!("../testdata/heal-start-failed.stderr.txt").into(),
        };
        match heal_start_verdict("volume heal dv", &failed).unwrap_err() {
            GlusterError::Command { message, .. } => assert_eq!(
                message,
                "Launching heal operation to perform index self heal on volume dv has been \
                 unsuccessful:\nSelf-heal-daemon is disabled. Heal will not be triggered on volume dv"
            ),
            other => panic!("unexpected {other:?}"),
        }
        // A zero exit status without gluster's success words is not success.
        let odd = CommandOutput {
            success: true,
            stdout: "something else".into(),
            stderr: String::new(),
        };
        assert!(heal_start_verdict("volume heal x", &odd).is_err());
    }
}
