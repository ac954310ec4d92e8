//! Writes the kubectl plugin's krew manifest to stdout:
//! `krewgen [--url-base URL] ARCHIVE...`, each archive named
//! kubectl-gluster-VERSION-OS-ARCH.tar.gz and downloadable at URL/NAME (by default the
//! project's GitHub release of tag vVERSION). `tools/release-plugin.sh` runs it
//! (docs/release.md).

use anyhow::{bail, Context};
use gk_testenv::krew::{manifest, parse_archive_name, release_url_base, Platform};
use sha2::{Digest, Sha256};

fn main() -> anyhow::Result<()> {
    const USAGE: &str = "usage: krewgen [--url-base URL] ARCHIVE...";
    let mut args = std::env::args().skip(1).peekable();
    let base = if args.peek().map(String::as_str) == Some("--url-base") {
        args.next();
        Some(args.next().context(USAGE)?)
    } else {
        None
    };
    let base = base
        .unwrap_or_else(|| release_url_base(env!("CARGO_PKG_VERSION")))
        .trim_end_matches('/')
        .to_string();
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
    let version = version.with_context(|| format!("{USAGE}: no archive given"))?;
    print!("{}", manifest(&version, &platforms)?);
    Ok(())
}
