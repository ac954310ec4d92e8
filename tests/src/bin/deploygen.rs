//! Writes deploy/glusterkube.yaml: the Helm chart rendered with its default values, as
//! plain manifests. A test in tests/tests/deploy.rs fails when the file is stale.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = gk_testenv::repo_root().join(gk_testenv::deploy::MANIFEST);
    std::fs::write(&path, gk_testenv::deploy::expected_manifest()?)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
