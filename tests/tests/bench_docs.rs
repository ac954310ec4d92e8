//! The tables in docs/benchmarks are generated: each committed document's generated block is
//! what its committed samples (the `.json` beside it) render to now, and datapath.svg is what
//! datapath.json draws. A table edited by hand, or samples committed without their table (or
//! the other way round), fail here. `cargo run -p gk-testenv --bin benchdocs` renders them
//! again when only the rendering changed.

use gk_testenv::bench::{self, datapath};

#[test]
fn committed_tables_are_rendered_from_their_samples() {
    let dir = gk_testenv::repo_root().join("docs/benchmarks");
    for (name, kind) in bench::DOCS {
        let json = std::fs::read_to_string(dir.join(format!("{name}.json")))
            .unwrap_or_else(|e| panic!("docs/benchmarks/{name}.json: {e}"));
        let rendered = bench::render_json(*kind, &json)
            .unwrap_or_else(|e| panic!("docs/benchmarks/{name}.json is not {kind:?} results: {e}"));
        let doc = std::fs::read_to_string(dir.join(format!("{name}.md")))
            .unwrap_or_else(|e| panic!("docs/benchmarks/{name}.md: {e}"));
        let committed = bench::generated(&doc)
            .unwrap_or_else(|| panic!("docs/benchmarks/{name}.md has no generated block"));
        assert!(
            committed == rendered,
            "docs/benchmarks/{name}.md's generated block is not what {name}.json renders to; \
             rerun the bench, or `cargo run -p gk-testenv --bin benchdocs` if only the \
             rendering changed"
        );
    }
}

#[test]
fn the_committed_plot_is_drawn_from_the_committed_samples() {
    let dir = gk_testenv::repo_root().join("docs/benchmarks");
    let results: datapath::Results =
        serde_json::from_str(&std::fs::read_to_string(dir.join("datapath.json")).unwrap()).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let drawn = scratch.path().join("datapath.svg");
    datapath::plot(&results, &drawn).unwrap();
    assert!(
        std::fs::read(&drawn).unwrap() == std::fs::read(dir.join("datapath.svg")).unwrap(),
        "docs/benchmarks/datapath.svg is not what datapath.json draws; rerun the bench"
    );
}
