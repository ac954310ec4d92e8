//! Writes the kubectl plugin's krew manifest to stdout: `krewgen URL_BASE ARCHIVE...`, each
//! archive named kubectl-gluster-VERSION-OS-ARCH.tar.gz and downloadable at URL_BASE/NAME.
//! `tools/release-plugin.sh` runs it (docs/release.md).

use anyhow::{bail, Context};
use gk_testenv::krew::{manifest, parse_archive_name, Platform};
use sha2::{Digest, Sha256};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let Some(base) = args.next() else {
        bail!("usage: krewgen URL_BASE ARCHIVE...");
    };
    let base = base.trim_end_matches('/');
    let mut version = None;
    let mut platforms = Vec::new();
    for path in args {
        let name = std::path::Path::new(&path)
            .file_name()
            .and_then(|n| n.to_str())
            .with_context(|| format!("{path}: no file name"))?;
        let (v, os, arch) = parse_archive_name(name)?;
        if v != env!("CARGO_PKG_VERSION") {
            bail!(
                "{name} is version {v}, the workspace is {}",
                env!("CARGO_PKG_VERSION")
            );
        }
        version = Some(v);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
        let sha256 = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        platforms.push(Platform {
            os,
            arch,
            uri: format!("{base}/{name}"),
            sha256,
        });
    }
    let version = version.context("usage: krewgen URL_BASE ARCHIVE...: no archive given")?;
    print!("{}", manifest(&version, &platforms)?);
    Ok(())
}
