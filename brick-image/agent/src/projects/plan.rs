//! What a brick enforces for a PV directory, decided without side effects.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// XFS charges whole blocks: per-brick limits are rounded up to this.
pub const BLOCK: u64 = 4096;

/// The layout of the volume a brick serves, as far as it decides what the brick holds of a
/// PV's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Every brick of a set holds the whole of every file (replica N).
    Replicate,
    /// Two data bricks hold every file; the arbiter holds names and metadata, no data.
    Arbiter,
    /// Each of `data + redundancy` bricks holds a fragment of about 1/`data` of every file.
    Disperse { data: u32, redundancy: u32 },
}

/// Why a volume's PVs cannot be sized by the bricks' project quotas.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotServed {
    #[error(
        "the volume has {sets} sets: a directory's files spread over them by name hash, so no \
         per-brick limit caps a PV at its size exactly; its PVs keep gluster's quota"
    )]
    SeveralSets { sets: u32 },
    #[error("a disperse volume needs at least one data brick")]
    NoData,
}

/// The limit each brick of a single-set volume puts on a PV directory of `pv_bytes`:
///
/// - replicate and arbiter: the PV's size on every brick (each data brick holds all of it;
///   the arbiter holds no data, and the same limit costs it nothing);
/// - disperse k+m: a k-th of the size, rounded up to whole blocks, on every brick. A brick
///   stores each file as fragments of 512 bytes per k × 512 bytes of data, in whole XFS
///   blocks, so a PV of files of at least k × 4 KiB holds its size; a PV of smaller files
///   reports full earlier (each file costs at least one block on every brick).
///
/// A volume of several sets is not served ([`NotServed::SeveralSets`]).
pub fn brick_limit(layout: Layout, sets: u32, pv_bytes: u64) -> Result<u64, NotServed> {
    if sets > 1 {
        return Err(NotServed::SeveralSets { sets });
    }
    let share = match layout {
        Layout::Replicate | Layout::Arbiter => pv_bytes,
        Layout::Disperse { data: 0, .. } => return Err(NotServed::NoData),
        Layout::Disperse { data, .. } => pv_bytes.div_ceil(data as u64),
    };
    Ok(share.div_ceil(BLOCK).saturating_mul(BLOCK))
}

/// The first project id this agent gives: ids below it are left to the node's administrator.
pub const FIRST_ID: u32 = 1 << 16;

/// The project ids given out on one brick filesystem, kept in a file at its root so they
/// survive restarts. Ids only ever grow: an id is never given again, even after its
/// directory is gone, so a stale limit can never land on a new PV.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registry {
    /// The next id to give.
    pub next: u32,
    /// Each directory (its path on this node), its id and the limit last set.
    pub dirs: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub id: u32,
    /// The block limit last set for the id, in bytes (0: none yet).
    #[serde(default)]
    pub limit: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("every project id of this filesystem up to {0} was given out; none is left")]
pub struct Exhausted(pub u32);

impl Registry {
    /// The id of `dir`: the one it has, or the next one.
    pub fn id_of(&mut self, dir: &str) -> Result<u32, Exhausted> {
        if let Some(e) = self.dirs.get(dir) {
            return Ok(e.id);
        }
        let id = self.next.max(FIRST_ID);
        let next = id.checked_add(1).ok_or(Exhausted(id))?;
        self.next = next;
        self.dirs.insert(dir.to_string(), Entry { id, limit: 0 });
        Ok(id)
    }

    /// Forgets `dir`; its id is not given again. Returns what it had.
    pub fn release(&mut self, dir: &str) -> Option<Entry> {
        self.dirs.remove(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_and_arbiters_hold_the_size_on_every_brick() {
        assert_eq!(brick_limit(Layout::Replicate, 1, 10 << 20), Ok(10 << 20));
        assert_eq!(brick_limit(Layout::Arbiter, 1, 10 << 20), Ok(10 << 20));
        // Rounded up to whole blocks.
        assert_eq!(brick_limit(Layout::Replicate, 1, 1), Ok(4096));
    }

    #[test]
    fn disperse_bricks_hold_a_kth_in_whole_blocks() {
        let d = |data, redundancy| Layout::Disperse { data, redundancy };
        assert_eq!(brick_limit(d(2, 1), 1, 1 << 30), Ok(1 << 29));
        assert_eq!(brick_limit(d(4, 2), 1, 10 << 20), Ok(2621440));
        // 10 MiB / 3 = 3,495,253.3 bytes: up to the next block.
        assert_eq!(brick_limit(d(3, 1), 1, 10 << 20), Ok(3497984));
        assert_eq!(brick_limit(d(0, 1), 1, 1), Err(NotServed::NoData));
    }

    #[test]
    fn several_sets_are_not_served() {
        let e = brick_limit(Layout::Replicate, 2, 1 << 30).unwrap_err();
        assert_eq!(e, NotServed::SeveralSets { sets: 2 });
        assert!(e.to_string().contains("gluster's quota"));
    }

    #[test]
    fn ids_are_kept_per_directory_and_never_given_again() {
        let mut r = Registry::default();
        let a = r.id_of("/b/pool/a").unwrap();
        assert_eq!(a, FIRST_ID);
        assert_eq!(r.id_of("/b/pool/a").unwrap(), a);
        let b = r.id_of("/b/pool/b").unwrap();
        assert_eq!(b, a + 1);
        assert_eq!(r.release("/b/pool/a").map(|e| e.id), Some(a));
        // A directory made again under the old name gets a new id.
        assert_eq!(r.id_of("/b/pool/a").unwrap(), b + 1);
        // The file survives a round trip.
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Registry>(&text).unwrap(), r);
        let mut full = Registry {
            next: u32::MAX,
            ..Default::default()
        };
        assert_eq!(full.id_of("/x"), Err(Exhausted(u32::MAX)));
    }
}
