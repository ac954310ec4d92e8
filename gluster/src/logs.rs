//! Size caps on gluster's own log files. Gluster appends to its logs forever (`volume log
//! rotate` covers brick logs only, and only when asked), so the processes that start gluster
//! (the brick agent, the CSI node plugin) rotate them: a file past the cap is copied to
//! `NAME.1`, replacing the older copy, and emptied in place. Gluster writes with O_APPEND,
//! so it goes on at the start of the emptied file without being told; lines written between
//! the copy and the truncation are lost, as with logrotate's copytruncate.

use std::io;
use std::path::{Path, PathBuf};

/// Where logs are kept, and whether its subdirectories are walked too.
#[derive(Clone, Debug)]
pub struct LogDir {
    pub path: PathBuf,
    /// Walk subdirectories on the same filesystem (gluster keeps brick logs in `bricks/`).
    /// Off for a directory that holds mount points beside its logs: a directory entry is
    /// then never even looked at, so a hung mount cannot hold the rotation up.
    pub recurse: bool,
}

/// Rotates every `*.log` file in `dir` that holds more than `max_bytes`. Returns the files
/// rotated. A file that cannot be rotated is skipped and reported in the error list, so one
/// unreadable file does not keep the others growing.
pub fn rotate_logs(dir: &LogDir, max_bytes: u64) -> (Vec<PathBuf>, Vec<(PathBuf, io::Error)>) {
    let LogDir { path: dir, recurse } = dir;
    use std::os::unix::fs::MetadataExt;
    let (mut rotated, mut failed) = (Vec::new(), Vec::new());
    let device = match std::fs::metadata(dir) {
        Ok(m) => m.dev(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return (rotated, failed),
        Err(e) => {
            failed.push((dir.to_path_buf(), e));
            return (rotated, failed);
        }
    };
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            // A missing directory has nothing to cap (gluster makes them as it goes).
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                failed.push((d, e));
                continue;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            // The entry's type comes from the directory itself (no stat of what it names),
            // and a link is never followed out of the log directory.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if *recurse && std::fs::symlink_metadata(&path).is_ok_and(|m| m.dev() == device) {
                    dirs.push(path);
                }
                continue;
            }
            if !kind.is_file() || path.extension().is_none_or(|e| e != "log") {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.len() > max_bytes {
                match rotate(&path) {
                    Ok(()) => rotated.push(path),
                    Err(e) => failed.push((path, e)),
                }
            }
        }
    }
    rotated.sort();
    (rotated, failed)
}

/// Rotates the logs under `dirs` every `every`, for as long as the process runs.
pub async fn cap_logs_forever(dirs: Vec<LogDir>, max_bytes: u64, every: std::time::Duration) {
    loop {
        for dir in &dirs {
            let dir = dir.clone();
            let Ok((rotated, failed)) =
                tokio::task::spawn_blocking(move || rotate_logs(&dir, max_bytes)).await
            else {
                continue;
            };
            for path in rotated {
                tracing::info!(log = %path.display(), max_bytes, "rotated gluster log");
            }
            for (path, error) in failed {
                tracing::warn!(log = %path.display(), %error, "could not rotate gluster log");
            }
        }
        tokio::time::sleep(every).await;
    }
}

fn rotate(path: &Path) -> io::Result<()> {
    let mut older = path.as_os_str().to_owned();
    older.push(".1");
    // Copied, not renamed: the writer keeps its descriptor, and a rename would leave it
    // writing into the old copy.
    std::fs::copy(path, &older)?;
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .set_len(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn only_large_log_files_are_rotated_and_the_writer_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let bricks = dir.path().join("bricks");
        std::fs::create_dir(&bricks).unwrap();
        let big = bricks.join("srv-b1.log");
        // As gluster opens its logs.
        let mut writer = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&big)
            .unwrap();
        writer.write_all(&[b'x'; 2000]).unwrap();
        let small = dir.path().join("glustershd.log");
        std::fs::write(&small, b"short").unwrap();
        let not_a_log = dir.path().join("state.json");
        std::fs::write(&not_a_log, [b'y'; 5000]).unwrap();
        std::os::unix::fs::symlink(&not_a_log, dir.path().join("link.log")).unwrap();

        let all = LogDir {
            path: dir.path().into(),
            recurse: true,
        };
        let (rotated, failed) = rotate_logs(&all, 1000);
        assert_eq!(rotated, vec![big.clone()]);
        assert!(failed.is_empty(), "{failed:?}");
        assert_eq!(
            std::fs::read(bricks.join("srv-b1.log.1")).unwrap().len(),
            2000
        );
        assert_eq!(std::fs::metadata(&big).unwrap().len(), 0);
        assert_eq!(std::fs::read(&small).unwrap(), b"short");
        assert_eq!(std::fs::metadata(&not_a_log).unwrap().len(), 5000);

        // The writer's next line lands at the start of the emptied file, not past a hole.
        writer.write_all(b"next\n").unwrap();
        assert_eq!(std::fs::read(&big).unwrap(), b"next\n");
        // A second rotation replaces the older copy.
        writer.write_all(&[b'z'; 1500]).unwrap();
        let (rotated, _) = rotate_logs(&all, 1000);
        assert_eq!(rotated, vec![big.clone()]);
        assert_eq!(
            std::fs::read(bricks.join("srv-b1.log.1")).unwrap().len(),
            1505
        );
        assert!(!bricks.join("srv-b1.log.1.1").exists());
        // Not recursing, the brick logs below are left alone.
        writer.write_all(&[b'w'; 1500]).unwrap();
        let top = LogDir {
            path: dir.path().into(),
            recurse: false,
        };
        assert!(rotate_logs(&top, 1000).0.is_empty());
        let missing = LogDir {
            path: dir.path().join("missing"),
            recurse: true,
        };
        assert!(rotate_logs(&missing, 1).0.is_empty());
    }
}
