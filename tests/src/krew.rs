//! The krew manifest of the kubectl plugin (docs/release.md): one platform per release
//! archive, each with its download URL and checksum, written by `krewgen` and installed in the
//! `deploy` test by krew itself.

/// The plugin's name under krew (`kubectl krew install gluster`, then `kubectl gluster`).
pub const PLUGIN: &str = "gluster";
/// The binary in each archive.
pub const BINARY: &str = "kubectl-gluster";
/// Where the project lives; a release's archives are under its releases.
pub const HOMEPAGE: &str = "https://github.com/glusterkube/glusterkube";

/// One release archive of the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub arch: String,
    pub uri: String,
    pub sha256: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KrewError {
    #[error("{0:?} is not a release archive name: expected {BINARY}-VERSION-OS-ARCH.tar.gz")]
    ArchiveName(String),
    #[error("version {0:?} is not a semantic version (krew needs one, as vX.Y.Z)")]
    Version(String),
    #[error(
        "platform {os}/{arch} is not one the plugin is built for (linux or darwin, amd64 or arm64)"
    )]
    Platform { os: String, arch: String },
    #[error("checksum {0:?} is not 64 hex digits of SHA-256")]
    Checksum(String),
    #[error("download URL {0:?} is not https")]
    Uri(String),
    #[error("{0}/{1} is listed twice")]
    Twice(String, String),
    #[error("no archive given")]
    NoArchive,
}

/// Where a release's archives are downloaded from: the GitHub release of tag v`version`.
pub fn release_url_base(version: &str) -> String {
    format!("{HOMEPAGE}/releases/download/v{version}")
}

/// The file name of the archive for `version`, `os` and `arch`.
pub fn archive_name(version: &str, os: &str, arch: &str) -> String {
    format!("{BINARY}-{version}-{os}-{arch}.tar.gz")
}

/// (version, os, arch) from an archive's file name.
pub fn parse_archive_name(name: &str) -> Result<(String, String, String), KrewError> {
    let bad = || KrewError::ArchiveName(name.to_string());
    let rest = name
        .strip_prefix(&format!("{BINARY}-"))
        .and_then(|r| r.strip_suffix(".tar.gz"))
        .ok_or_else(bad)?;
    let mut parts = rest.rsplitn(3, '-');
    let arch = parts.next().ok_or_else(bad)?;
    let os = parts.next().ok_or_else(bad)?;
    let version = parts.next().ok_or_else(bad)?;
    Ok((version.to_string(), os.to_string(), arch.to_string()))
}

/// krew's Plugin manifest (krew.googlecontainertools.github.com/v1alpha2), as serialised.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: Spec,
}

#[derive(serde::Serialize)]
struct Metadata {
    name: &'static str,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    version: String,
    homepage: &'static str,
    short_description: &'static str,
    description: &'static str,
    platforms: Vec<PlatformSpec>,
}

#[derive(serde::Serialize)]
struct PlatformSpec {
    selector: Selector,
    uri: String,
    sha256: String,
    bin: &'static str,
    files: Vec<FileSpec>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Selector {
    match_labels: std::collections::BTreeMap<&'static str, String>,
}

#[derive(serde::Serialize)]
struct FileSpec {
    from: &'static str,
    to: &'static str,
}

const DESCRIPTION: &str = "glusterkube storage at a glance, read only: the GlusterClusters and \
GlusterVolumes of the glusterkube operator (nodes, bricks, heal, split-brain, capacity, \
conditions), a volume's entries waiting for heal, every brick, a storage node's logs, and a \
pool's subdirectory PVs with the directories no PV names.\n";

/// The krew Plugin manifest (krew.googlecontainertools.github.com/v1alpha2) of `version`.
pub fn manifest(version: &str, platforms: &[Platform]) -> Result<String, KrewError> {
    semver::Version::parse(version).map_err(|_| KrewError::Version(version.to_string()))?;
    if platforms.is_empty() {
        return Err(KrewError::NoArchive);
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut specs = Vec::new();
    for p in platforms {
        if !["linux", "darwin"].contains(&p.os.as_str())
            || !["amd64", "arm64"].contains(&p.arch.as_str())
        {
            return Err(KrewError::Platform {
                os: p.os.clone(),
                arch: p.arch.clone(),
            });
        }
        if !seen.insert((p.os.clone(), p.arch.clone())) {
            return Err(KrewError::Twice(p.os.clone(), p.arch.clone()));
        }
        if p.sha256.len() != 64 || !p.sha256.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(KrewError::Checksum(p.sha256.clone()));
        }
        if !p.uri.starts_with("https://") || p.uri.chars().any(char::is_whitespace) {
            return Err(KrewError::Uri(p.uri.clone()));
        }
        specs.push(PlatformSpec {
            selector: Selector {
                match_labels: [("os", p.os.clone()), ("arch", p.arch.clone())].into(),
            },
            uri: p.uri.clone(),
            sha256: p.sha256.to_ascii_lowercase(),
            bin: BINARY,
            files: vec![
                FileSpec {
                    from: BINARY,
                    to: ".",
                },
                FileSpec {
                    from: "LICENSE",
                    to: ".",
                },
            ],
        });
    }
    let m = Manifest {
        api_version: "krew.googlecontainertools.github.com/v1alpha2",
        kind: "Plugin",
        metadata: Metadata { name: PLUGIN },
        spec: Spec {
            version: format!("v{version}"),
            homepage: HOMEPAGE,
            short_description: "Show glusterkube clusters, volumes, heal and PVs",
            description: DESCRIPTION,
            platforms: specs,
        },
    };
    let yaml = serde_yaml::to_string(&m).expect("a manifest serialises");
    Ok(format!(
        "# Generated by `tools/release-plugin.sh` (krewgen). Do not edit.\n{yaml}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linux(arch: &str) -> Platform {
        Platform {
            os: "linux".into(),
            arch: arch.into(),
            uri: format!(
                "https://example.test/{}",
                archive_name("0.1.0", "linux", arch)
            ),
            sha256: "ab".repeat(32),
        }
    }

    #[test]
    fn archive_names_round_trip() {
        for v in ["0.1.0", "1.2.3-rc.1"] {
            let name = archive_name(v, "linux", "arm64");
            assert_eq!(
                parse_archive_name(&name).unwrap(),
                (v.to_string(), "linux".to_string(), "arm64".to_string())
            );
        }
        for bad in [
            "kubectl-gluster.tar.gz",
            "other-0.1.0-linux-amd64.tar.gz",
            "kubectl-gluster-0.1.0-linux-amd64.zip",
        ] {
            assert!(parse_archive_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn manifest_names_each_platform_once() {
        let m = manifest("0.1.0", &[linux("amd64"), linux("arm64")]).unwrap();
        let v: serde_yaml::Value = serde_yaml::from_str(&m).unwrap();
        assert_eq!(v["metadata"]["name"], PLUGIN);
        assert_eq!(v["spec"]["version"], "v0.1.0");
        let platforms = v["spec"]["platforms"].as_sequence().unwrap();
        assert_eq!(platforms.len(), 2);
        assert_eq!(platforms[1]["selector"]["matchLabels"]["arch"], "arm64");
        assert_eq!(platforms[1]["bin"], BINARY);
        assert_eq!(platforms[1]["sha256"], "ab".repeat(32).as_str());
        assert!(v["spec"]["description"]
            .as_str()
            .unwrap()
            .starts_with("glusterkube storage at a glance"));
    }

    #[test]
    fn a_url_with_yaml_syntax_in_it_stays_one_string() {
        let mut p = linux("amd64");
        p.uri = "https://example.test/a#b:c/{d}?e=[f]&g='h'".into();
        let v: serde_yaml::Value = serde_yaml::from_str(&manifest("0.1.0", &[p]).unwrap()).unwrap();
        assert_eq!(
            v["spec"]["platforms"][0]["uri"],
            "https://example.test/a#b:c/{d}?e=[f]&g='h'"
        );
    }

    #[test]
    fn bad_inputs_are_refused_by_name() {
        assert_eq!(
            manifest("0.1", &[linux("amd64")]),
            Err(KrewError::Version("0.1".into()))
        );
        assert_eq!(manifest("0.1.0", &[]), Err(KrewError::NoArchive));
        let mut p = linux("s390x");
        assert!(matches!(
            manifest("0.1.0", &[p.clone()]),
            Err(KrewError::Platform { .. })
        ));
        p = linux("amd64");
        p.sha256 = "xyz".into();
        assert!(matches!(
            manifest("0.1.0", &[p]),
            Err(KrewError::Checksum(_))
        ));
        p = linux("amd64");
        p.uri = "http://example.test/a.tar.gz".into();
        assert!(matches!(manifest("0.1.0", &[p]), Err(KrewError::Uri(_))));
        assert!(matches!(
            manifest("0.1.0", &[linux("amd64"), linux("amd64")]),
            Err(KrewError::Twice(..))
        ));
    }
}
