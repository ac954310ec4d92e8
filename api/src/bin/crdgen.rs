//! Writes the CRDs where they are installed from: deploy/crds/crds.yaml (kubectl) and
//! charts/glusterkube/crds/crds.yaml (helm), or only to the path given.

fn main() -> anyhow::Result<()> {
    let yaml = gk_api::crd::yaml()?;
    let paths: Vec<String> = match std::env::args().nth(1) {
        Some(path) => vec![path],
        None => gk_api::crd::COMMITTED_PATHS
            .iter()
            .map(|p| format!("{}/../{p}", env!("CARGO_MANIFEST_DIR")))
            .collect(),
    };
    for path in paths {
        if let Some(dir) = std::path::Path::new(&path).parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, &yaml)?;
        eprintln!("wrote {path}");
    }
    Ok(())
}
