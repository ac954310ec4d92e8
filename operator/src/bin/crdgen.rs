//! Writes the CRDs to deploy/crds/crds.yaml (or the path given).

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/crds/crds.yaml").into());
    std::fs::write(&path, gk_operator::crd::yaml()?)?;
    eprintln!("wrote {path}");
    Ok(())
}
