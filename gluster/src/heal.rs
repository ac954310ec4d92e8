//! Self-heal: `volume heal NAME info summary`, the entries of `volume heal NAME info` and
//! `volume heal NAME info split-brain`, and `volume heal NAME`.

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

/// A heal answer's brick name and status text, checked.
fn brick_and_status(
    command: &str,
    name: &str,
    status: &str,
) -> Result<(Brick, String), GlusterError> {
    let brick = Brick::parse(name.trim()).map_err(|e| GlusterError::Parse {
        command: command.into(),
        reason: format!("brick {name:?}: {e}"),
    })?;
    Ok((brick, status.trim().to_string()))
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
            let (brick, status) = brick_and_status(COMMAND, &b.name, &b.status)?;
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

/// One entry of a brick's heal index (or of its split-brain list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealEntry {
    /// The path inside the volume; `None` when gluster knows only the GFID.
    pub path: Option<String>,
    pub gfid: Option<String>,
}

impl std::fmt::Display for HealEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.path, &self.gfid) {
            (Some(p), _) => f.write_str(p),
            (None, Some(g)) => write!(f, "<gfid:{g}>"),
            (None, None) => f.write_str("<unknown>"),
        }
    }
}

/// The entries one brick lists, from `volume heal NAME info` or `... info split-brain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrickHealEntries {
    pub brick: Brick,
    /// Gluster's status text: `Connected`, or why the brick could not be examined.
    pub status: String,
    pub connected: bool,
    /// Gluster's count; `None` when the brick could not be examined.
    pub count: Option<u64>,
    pub entries: Vec<HealEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntriesBrickXml {
    name: String,
    #[serde(default)]
    file: Vec<FileXml>,
    #[serde(default)]
    status: String,
    number_of_entries: Option<String>,
}

#[derive(Debug, Deserialize)]
struct FileXml {
    #[serde(rename = "@gfid")]
    gfid: Option<String>,
    #[serde(rename = "$text", default)]
    path: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntriesBody {
    heal_info: EntriesInfoXml,
}

#[derive(Debug, Deserialize)]
struct EntriesInfoXml {
    bricks: EntriesBricksXml,
}

#[derive(Debug, Deserialize)]
struct EntriesBricksXml {
    #[serde(default)]
    brick: Vec<EntriesBrickXml>,
}

/// Parses `gluster --xml volume heal NAME info` or `... info split-brain` (`command` names
/// which, for errors). A brick gluster could not examine has no count and no entries.
pub fn parse_heal_entries(command: &str, xml: &str) -> Result<Vec<BrickHealEntries>, GlusterError> {
    let body: EntriesBody = parse(command, xml)?;
    body.heal_info
        .bricks
        .brick
        .into_iter()
        .map(|b| {
            let (brick, status) = brick_and_status(command, &b.name, &b.status)?;
            let count = match b.number_of_entries.as_deref().map(str::trim) {
                None | Some("-") | Some("") => None,
                Some(t) => Some(number(command, "numberOfEntries", t)?),
            };
            let entries = b
                .file
                .into_iter()
                .map(|f| {
                    let path = f.path.trim();
                    HealEntry {
                        // Unresolved entries read `<gfid:...>` where a path would be.
                        path: (!path.is_empty() && !path.starts_with("<gfid:"))
                            .then(|| path.to_string()),
                        gfid: f.gfid.filter(|g| !g.is_empty()),
                    }
                })
                .collect();
            Ok(BrickHealEntries {
                brick,
                connected: status == "Connected",
                status,
                count,
                entries,
            })
        })
        .collect()
}

/// Judges the answer to `volume heal NAME`. Gluster 10 answers this one in plain text even
/// with `--xml`: "Launching heal operation ... has been successful" on stdout, or "... has
/// been unsuccessful:" and the reason on stderr with exit status 1.
/// One brick's line pair in `volume heal NAME statistics heal-count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrickHealCount {
    pub brick: Brick,
    /// The entries in the brick's heal index as its self-heal daemon counted them; `None`
    /// when gluster printed anything else for the brick (not connected, no input).
    pub entries: Option<u64>,
}

/// Parses the plain text of `volume heal NAME statistics heal-count` (gluster prints no XML
/// for it): a "Brick HOST:PATH" line per brick, then "Number of entries: N" or a line saying
/// why the brick was not counted.
pub fn parse_heal_count(
    command: &str,
    out: &CommandOutput,
) -> Result<Vec<BrickHealCount>, GlusterError> {
    if !out.success || !out.stdout.contains("has been successful") {
        return Err(plain_text_error(command, out));
    }
    let mut bricks: Vec<BrickHealCount> = Vec::new();
    for line in out.stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(name) = line.strip_prefix("Brick ") {
            let brick = Brick::parse(name).map_err(|e| GlusterError::Parse {
                command: command.into(),
                reason: format!("brick {name:?}: {e}"),
            })?;
            bricks.push(BrickHealCount {
                brick,
                entries: None,
            });
        } else if let Some(n) = line.strip_prefix("Number of entries:") {
            let Some(last) = bricks.last_mut() else {
                return Err(GlusterError::Parse {
                    command: command.into(),
                    reason: format!("{line:?} before any brick"),
                });
            };
            last.entries = Some(number(command, "Number of entries", n.trim())?);
        }
        // Any other line (the heading, a brick's status) leaves the count unknown.
    }
    Ok(bricks)
}

/// Whether a heal summary shows every brick examined with nothing pending and nothing in
/// split-brain.
pub fn all_healed(bricks: &[BrickHeal]) -> bool {
    !bricks.is_empty()
        && bricks
            .iter()
            .all(|b| b.connected && b.pending == Some(0) && b.split_brain == Some(0))
}

/// Whether a heal count shows every brick of the volume counted at zero: then nothing is
/// pending, possibly healing or in split-brain (those are all in the same index).
pub fn nothing_to_heal(counts: &[BrickHealCount], bricks: &[Brick]) -> bool {
    bricks.len() == counts.len()
        && bricks
            .iter()
            .all(|b| counts.iter().any(|c| &c.brick == b && c.entries == Some(0)))
}

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

    fn counted(stdout: &str) -> Vec<BrickHealCount> {
        let out = CommandOutput {
            success: true,
            stdout: stdout.into(),
            stderr: String::new(),
        };
        parse_heal_count("volume heal v statistics heal-count", &out).unwrap()
    }

    #[test]
    fn heal_count_of_a_healthy_replica_is_nothing_to_heal() {
        let counts = counted(include_str!("../testdata/heal-count-healthy.txt"));
        assert_eq!(counts.len(), 3);
        assert_eq!(
            counts[2].brick.to_string(),
            "demo-gk-node-3-0.demo-bricks.gk-demo.svc:/var/lib/glusterkube/bricks/gk-demo-pool-2"
        );
        assert!(counts.iter().all(|c| c.entries == Some(0)));
        let bricks: Vec<Brick> = counts.iter().map(|c| c.brick.clone()).collect();
        assert!(nothing_to_heal(&counts, &bricks));
        // A brick the count left out, or one more than it counted, is not "nothing".
        assert!(!nothing_to_heal(&counts[..2], &bricks));
        let mut more = bricks.clone();
        more.push(Brick::parse("h:/b/extra").unwrap());
        assert!(!nothing_to_heal(&counts, &more));
    }

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
        assert!(all_healed(&bricks));
        assert!(!all_healed(&[]), "no brick examined is not healed");
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
        assert!(!all_healed(&bricks));
        assert!(!all_healed(&bricks[..2]), "entries pending");
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
    fn heal_entries_with_their_paths_while_a_brick_is_down() {
        let bricks = parse_heal_entries(
            "volume heal hv info",
            include_str!("../testdata/heal-info-brick-down.xml"),
        )
        .unwrap();
        assert_eq!(bricks.len(), 3);
        let up = &bricks[0];
        assert!(up.connected);
        assert_eq!(up.count, Some(7));
        assert_eq!(up.entries.len(), 7);
        assert_eq!(up.entries[0].path.as_deref(), Some("/d1/new3"));
        assert_eq!(
            up.entries[0].gfid.as_deref(),
            Some("0e4969c0-99cc-41d8-ab03-3fad2e095ff2")
        );
        // Escaped names come back as they are on disk.
        assert!(up
            .entries
            .iter()
            .any(|e| e.path.as_deref() == Some("/d 2/a b&<c>")));
        let down = &bricks[2];
        assert!(!down.connected);
        assert_eq!(down.status, "Transport endpoint is not connected");
        assert_eq!((down.count, down.entries.len()), (None, 0));
    }

    #[test]
    fn split_brain_entries_on_every_brick() {
        let bricks = parse_heal_entries(
            "volume heal hv info split-brain",
            include_str!("../testdata/heal-info-split-brain.xml"),
        )
        .unwrap();
        assert_eq!(bricks.len(), 3);
        for b in &bricks {
            assert_eq!(b.count, Some(1));
            assert_eq!(b.entries[0].to_string(), "/d1/sb");
        }
    }

    #[test]
    fn an_unresolved_entry_is_named_by_its_gfid() {
        let xml = include_str!("../testdata/heal-info-split-brain.xml").replace(
            ">/d1/sb<",
            ">&lt;gfid:283820fb-a33d-4339-8224-28f21a2bd294&gt;<",
        );
        let bricks = parse_heal_entries("volume heal hv info split-brain", &xml).unwrap();
        let e = &bricks[0].entries[0];
        assert_eq!(e.path, None);
        assert_eq!(e.to_string(), "<gfid:283820fb-a33d-4339-8224-28f21a2bd294>");
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
