//! Renders every committed benchmark document's generated block again from the samples
//! beside it (`docs/benchmarks/NAME.json` into `NAME.md`), and redraws datapath.svg: for
//! when the rendering changed, not the measurements. `bench_docs` checks the result. With
//! names as arguments, only those documents (and no plot unless `datapath` is one).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    use gk_testenv::bench;
    let dir = gk_testenv::repo_root().join("docs/benchmarks");
    let only: Vec<String> = std::env::args().skip(1).collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    for (name, kind) in bench::DOCS.iter().filter(|(n, _)| wanted(n)) {
        let json = std::fs::read_to_string(dir.join(format!("{name}.json")))?;
        let block = bench::render_json(*kind, &json)?;
        let md = dir.join(format!("{name}.md"));
        let doc = std::fs::read_to_string(&md)?;
        std::fs::write(&md, bench::replace_generated(&doc, &block)?)?;
        eprintln!("wrote {}", md.display());
    }
    if !wanted("datapath") {
        return Ok(());
    }
    let results: bench::datapath::Results =
        serde_json::from_str(&std::fs::read_to_string(dir.join("datapath.json"))?)?;
    bench::datapath::plot(&results, &dir.join("datapath.svg"))?;
    Ok(())
}
