//! The plain manifests in deploy/ are the Helm chart rendered with its default values: one
//! source of truth, so `kubectl apply -k deploy/` and `helm install` make the same objects.

use std::path::PathBuf;
use std::process::Command;

use crate::{repo_root, EnvError};

/// The release name and namespace deploy/ is rendered for.
pub const RELEASE: &str = "glusterkube";
pub const NAMESPACE: &str = "glusterkube-system";
/// The rendered chart, relative to the repository root.
pub const MANIFEST: &str = "deploy/glusterkube.yaml";

const HEADER: &str = "# Generated from charts/glusterkube with its default values by\n\
# `cargo run -p gk-testenv --bin deploygen` (release glusterkube, namespace\n\
# glusterkube-system). Do not edit: change the chart and run deploygen.\n";

/// The helm binary tests/env/install-tools.sh builds (under $GK_CACHE/bin), else the one on
/// PATH. Missing helm is an error, never a skip.
pub fn helm() -> Result<PathBuf, EnvError> {
    tool("helm")
}

/// A tool tests/env/install-tools.sh builds (under $GK_CACHE/bin), else the one on PATH.
/// A missing tool is an error, never a skip.
pub fn tool(name: &str) -> Result<PathBuf, EnvError> {
    let cache = std::env::var("GK_CACHE").unwrap_or_else(|_| "/var/cache/glusterkube".into());
    let cached = PathBuf::from(cache).join("bin").join(name);
    if cached.is_file() {
        return Ok(cached);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            EnvError::Setup(format!(
                "{name} not found in $GK_CACHE/bin or PATH: run tests/env/install-tools.sh"
            ))
        })
}

/// Runs helm with `args` and returns its standard output; a non-zero exit is an error
/// carrying helm's standard error.
pub fn run_helm(args: &[&str]) -> Result<String, EnvError> {
    let helm = helm()?;
    let out = Command::new(&helm)
        .args(args)
        .output()
        .map_err(|e| EnvError::Command {
            command: format!("helm {}", args.join(" ")),
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(EnvError::Command {
            command: format!("helm {}", args.join(" ")),
            detail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The chart directory.
pub fn chart_dir() -> PathBuf {
    repo_root().join("charts/glusterkube")
}

/// `helm template` of the chart as `release` in `namespace`, with extra arguments.
pub fn render(release: &str, namespace: &str, extra: &[&str]) -> Result<String, EnvError> {
    let chart = chart_dir();
    // Rendered for the version the tests run (GK_K8S_VERSION in tests/env/common.sh), not
    // the one helm assumes offline (that of its client-go).
    let kube_version = kube_version();
    let mut args = vec![
        "template",
        release,
        chart.to_str().expect("utf-8 path"),
        "--namespace",
        namespace,
        "--kube-version",
        &kube_version,
    ];
    args.extend_from_slice(extra);
    run_helm(&args)
}

/// The Kubernetes version the tests build and run, as tests/env/common.sh pins it.
pub fn kube_version() -> String {
    let common = std::fs::read_to_string(repo_root().join("tests/env/common.sh"))
        .expect("tests/env/common.sh");
    common
        .lines()
        .find_map(|l| l.strip_prefix("GK_K8S_VERSION=${GK_K8S_VERSION:-"))
        .and_then(|rest| rest.strip_suffix('}'))
        .expect("GK_K8S_VERSION in tests/env/common.sh")
        .to_string()
}

/// Helm's bookkeeping labels mean nothing to objects applied with kubectl.
fn is_helm_only(line: &str) -> bool {
    let l = line.trim_start();
    l.starts_with("helm.sh/chart:") || l == "app.kubernetes.io/managed-by: Helm"
}

/// A chart render turned into plain manifests: the header, and without Helm's labels.
/// Comments (the reason for every RBAC rule) are kept.
pub fn plain_manifests(rendered: &str) -> String {
    let mut out = String::from(HEADER);
    for line in rendered.lines().filter(|l| !is_helm_only(l)) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// What deploy/glusterkube.yaml must hold.
pub fn expected_manifest() -> Result<String, EnvError> {
    Ok(plain_manifests(&render(RELEASE, NAMESPACE, &[])?))
}

/// Metric names a PromQL expression refers to (ours all start with `glusterkube_`).
pub fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("glusterkube_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// The chart's PrometheusRule, rendered with its alerts on: its `spec` (Prometheus's own
/// rule file format).
pub fn alert_rules() -> Result<serde_json::Value, EnvError> {
    let rendered = render(
        "gk",
        "ns",
        &["--set", "metrics.prometheusRule.enabled=true"],
    )?;
    let rule = serde_yaml::Deserializer::from_str(&rendered)
        .filter_map(|d| serde::Deserialize::deserialize(d).ok())
        .find(|v: &serde_json::Value| v["kind"] == "PrometheusRule");
    rule.map(|v| v["spec"].clone())
        .ok_or_else(|| EnvError::Setup("the chart rendered no PrometheusRule".into()))
}

/// Each alert of the rules `spec` ([`alert_rules`]) with its expression.
pub fn alert_expressions(spec: &serde_json::Value) -> Vec<(String, String)> {
    spec["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .map(|r| {
            (
                r["alert"].as_str().unwrap_or_default().to_string(),
                r["expr"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_helm_labels_keeps_comments() {
        let r = "---\n# Source: x\n# why\nmetadata:\n  labels:\n    helm.sh/chart: glusterkube-0.1.0\n    app.kubernetes.io/managed-by: Helm\n    app.kubernetes.io/name: glusterkube\n";
        let p = plain_manifests(r);
        assert!(p.starts_with(HEADER));
        assert!(p.ends_with(
            "---\n# Source: x\n# why\nmetadata:\n  labels:\n    app.kubernetes.io/name: glusterkube\n"
        ));
    }
}
