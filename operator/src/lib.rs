//! The glusterkube operator: the GlusterCluster and GlusterVolume controllers.
//!
//! - `run` wires both controllers; `context` is what their reconciles share.
//! - `cluster/` and `volume/` hold one file per stage of each reconcile, and a pure `status`
//!   module each that decides what status says.
//! - `plan/` decides (placement, sizes, rollouts, migrations, profiles) without side effects.
//! - `tls/` holds the certificates and the access options built on them; `pki` issues and
//!   reads certificates (a leaf every floor may use).
//! - `single_flight` runs one slow call per key at a time (heal counts).
//! - `leader` lets one of several replicas reconcile (a Lease); `health` says whether the
//!   watches deliver (/healthz); `crd_upgrade` brings the CRDs to this version at start.
//! - `apply`, `events`, `finalizer` and `conditions` are the plumbing every reconcile uses;
//!   `safety` is the one check that a volume's data may be disturbed.
//!
//! The CRD types, object names and agent discovery live in `gk-api`, shared with the CSI
//! driver.

pub mod apply;
pub mod cluster;
pub mod conditions;
pub mod context;
pub mod crd_upgrade;
mod error;
pub mod events;
pub mod failure;
pub mod finalizer;
pub mod health;
pub mod leader;
pub mod metrics;
pub mod pki;
pub mod plan;
pub mod run;
pub mod safety;
pub mod single_flight;
pub mod tls;
pub mod volume;

pub use error::{Error, Waiting};
pub use gk_api::crd;
pub use run::run;

#[cfg(test)]
mod layering {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// The top-level modules each top-level module names (`crate::x`, `use crate::{x, …}`),
    /// tests left out, read from the sources.
    fn uses() -> BTreeMap<String, BTreeSet<String>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut modules = BTreeMap::new();
        for entry in std::fs::read_dir(&src).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if name == "lib" || name == "main" {
                continue;
            }
            let mut files = vec![];
            let mut todo = vec![path];
            while let Some(p) = todo.pop() {
                if p.is_dir() {
                    todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                } else if p.extension().is_some_and(|e| e == "rs") {
                    files.push(p);
                }
            }
            modules.insert(name, files);
        }
        let known: BTreeSet<String> = modules.keys().cloned().collect();
        let word = named_after_crate;
        modules
            .iter()
            .map(|(name, files)| {
                let mut named = BTreeSet::new();
                for f in files {
                    let text = std::fs::read_to_string(f).unwrap();
                    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
                    for m in word(text) {
                        // `crate::Error` is `error::Error`, re-exported.
                        let m = if m == "Error" { "error".to_string() } else { m };
                        if known.contains(&m) && &m != name {
                            named.insert(m);
                        }
                    }
                }
                (name.clone(), named)
            })
            .collect()
    }

    /// The first path segment after each `crate::`, and each item of a `use crate::{…}`.
    fn named_after_crate(text: &str) -> Vec<String> {
        let mut out = vec![];
        for part in text.split("crate::").skip(1) {
            let ident = |s: &str| -> String {
                s.trim_start()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect()
            };
            if let Some(group) = part.strip_prefix('{') {
                // Items at the group's top level: commas outside nested braces.
                let (mut depth, mut item) = (0, String::new());
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            out.push(ident(&item));
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    item.push(c);
                }
                out.push(ident(&item));
                out.retain(|s| !s.is_empty());
            } else {
                out.push(ident(part));
            }
        }
        out
    }

    /// A loop through `from`, if any, as the modules on it.
    fn find_loop(
        graph: &BTreeMap<String, BTreeSet<String>>,
        from: &str,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|m| m == from) {
            let mut cycle = path[i..].to_vec();
            cycle.push(from.to_string());
            return Some(cycle);
        }
        path.push(from.to_string());
        for next in graph.get(from).into_iter().flatten() {
            if let Some(c) = find_loop(graph, next, path) {
                return Some(c);
            }
        }
        path.pop();
        None
    }

    #[test]
    fn the_top_level_modules_form_no_loop() {
        let graph = uses();
        // The reader itself works: these uses are known to be there.
        assert!(graph["volume"].contains("plan"), "{graph:?}");
        assert!(graph["error"].contains("pki"), "{graph:?}");
        for m in graph.keys() {
            if let Some(cycle) = find_loop(&graph, m, &mut vec![]) {
                panic!("module loop: {}", cycle.join(" -> "));
            }
        }
    }

    #[test]
    fn the_reader_sees_grouped_and_plain_uses() {
        let words =
            named_after_crate("use crate::{plan::{self, X}, tls};\nlet x = crate::volume::f();");
        assert_eq!(words, ["plan", "tls", "volume"]);
    }
}
