//! What the node plugin has staged and published, kept on the node's disk so that a
//! restarted plugin knows which mounts are its own and can repair them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One staged volume and the targets it is published at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedVolume {
    pub volume_id: String,
    pub staging: PathBuf,
    pub servers: Vec<String>,
    pub volume: String,
    pub subdir: Option<String>,
    pub flags: Vec<String>,
    /// Mounted with gluster's TLS (absent in records of older plugins: false).
    #[serde(default)]
    pub tls: bool,
    /// The Secret holding the pool's own gluster certificate (a pool made by hand), instead
    /// of the one the operator issues the node plugins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_secret: Option<String>,
    /// The mount pod that runs the volume's gluster client, when one does (absent: the
    /// plugin runs it itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_pod: Option<String>,
    pub targets: Vec<Published>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    pub path: PathBuf,
    pub readonly: bool,
}

#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

fn file_name(volume_id: &str) -> String {
    // Volume IDs hold '/', which file names cannot; '%' never occurs in them.
    format!("{}.json", volume_id.replace('/', "%"))
}

impl StateDir {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn path(&self, volume_id: &str) -> PathBuf {
        self.dir.join(file_name(volume_id))
    }

    /// Writes atomically (a temporary file, then rename), so a crash never leaves half a file.
    pub fn save(&self, v: &StagedVolume) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(&v.volume_id);
        let tmp = path.with_extension("tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(v).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(tmp, path)
    }

    pub fn load(&self, volume_id: &str) -> std::io::Result<Option<StagedVolume>> {
        read(&self.path(volume_id))
    }

    pub fn remove(&self, volume_id: &str) -> std::io::Result<()> {
        match std::fs::remove_file(self.path(volume_id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Every staged volume; unreadable files are skipped with a warning, never fatal.
    pub fn all(&self) -> Vec<StagedVolume> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "json") {
                match read(&e.path()) {
                    Ok(Some(v)) => out.push(v),
                    Ok(None) => {}
                    Err(err) => {
                        tracing::warn!(file = %e.path().display(), error = %err, "unreadable node state")
                    }
                }
            }
        }
        out.sort_by(|a, b| a.volume_id.cmp(&b.volume_id));
        out
    }
}

fn read(path: &Path) -> std::io::Result<Option<StagedVolume>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(std::io::Error::other),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_listing() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateDir::new(dir.path().join("volumes"));
        assert!(s.all().is_empty());
        let v = StagedVolume {
            volume_id: "subdir/storage/pool/pvc-1".into(),
            staging: "/s".into(),
            servers: vec!["a".into(), "b".into()],
            volume: "pool".into(),
            subdir: Some("pvc-1".into()),
            flags: vec![],
            tls: true,
            tls_secret: Some("legacy-pool".into()),
            mount_pod: None,
            targets: vec![Published {
                path: "/t".into(),
                readonly: true,
            }],
        };
        s.save(&v).unwrap();
        assert_eq!(s.load(&v.volume_id).unwrap(), Some(v.clone()));
        std::fs::write(dir.path().join("volumes/garbage.json"), b"{").unwrap();
        assert_eq!(s.all(), vec![v.clone()]);
        s.remove(&v.volume_id).unwrap();
        s.remove(&v.volume_id).unwrap();
        assert_eq!(s.load(&v.volume_id).unwrap(), None);
    }
}
