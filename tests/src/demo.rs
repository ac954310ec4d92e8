//! The demo cluster (`demo.sh`: three real kubelets, the chart's defaults) as benches and the
//! e2e test drive it: kubectl, one wait, and the objects they make (an RWX claim, a workload
//! pod).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::k8s::ControlPlane;
use crate::repo_root;

/// The demo's namespace and its subdirectory StorageClass.
pub const NS: &str = "gk-demo";
pub const STORAGE_CLASS: &str = "glusterkube-demo";
/// The chart's namespace in the demo.
pub const RELEASE_NS: &str = "glusterkube-system";

pub struct Demo(pub ControlPlane);

impl Demo {
    /// Runs `./demo.sh` (with `env`) and connects to its control plane; panics if it fails.
    pub fn up(env: &[(&str, &str)]) -> Self {
        run_script("demo.sh", &[], env);
        Demo(ControlPlane::ensure().expect("the demo's control plane"))
    }

    /// `./demo.sh clean`: the demo and its nodes gone, whatever the bench left.
    pub fn clean() {
        let _ = Command::new("bash")
            .arg(repo_root().join("demo.sh"))
            .arg("clean")
            .current_dir(repo_root())
            .status();
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        self.0
            .kubectl(args)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"))
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&all)).expect("kubectl's JSON")
    }

    pub fn apply(&self, yaml: &str) {
        let f = std::env::temp_dir().join(format!("gk-demo-{}.yaml", std::process::id()));
        std::fs::write(&f, yaml).unwrap();
        self.kubectl(&["apply", "-f", f.to_str().unwrap()]);
        let _ = std::fs::remove_file(&f);
    }

    /// `path` (a jsonpath) of `kind/name` in the demo's namespace; empty when absent.
    pub fn get(&self, kind: &str, name: &str, path: &str) -> String {
        self.0
            .kubectl(&[
                "-n",
                NS,
                "get",
                kind,
                name,
                "-o",
                &format!("jsonpath={path}"),
            ])
            .unwrap_or_default()
    }

    /// Waits until `kind/name` has `want` at `path`; how long it took.
    pub fn wait(
        &self,
        kind: &str,
        name: &str,
        path: &str,
        want: &str,
        limit: Duration,
    ) -> Duration {
        let start = Instant::now();
        until(
            &format!("{kind}/{name} {path} = {want}"),
            limit,
            Duration::from_millis(250),
            || (self.get(kind, name, path) == want).then_some(()),
        );
        start.elapsed()
    }
}

/// Runs `f` every `every` until it gives a value; panics naming `what` after `limit`.
pub fn until<T>(
    what: &str,
    limit: Duration,
    every: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "{what}: not after {limit:?}");
        std::thread::sleep(every);
    }
}

/// Runs a repository script with `env`; panics if it fails.
pub fn run_script(path: &str, args: &[&str], env: &[(&str, &str)]) {
    let status = Command::new("bash")
        .arg(repo_root().join(path))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(repo_root())
        .status()
        .unwrap_or_else(|e| panic!("running {path}: {e}"));
    assert!(status.success(), "{path} {args:?} failed ({status})");
}

/// A ReadWriteMany claim of `class` in the demo's namespace.
pub fn rwx_claim(name: &str, class: &str, size: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {name}, namespace: {NS}}}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: {class}
  resources: {{requests: {{storage: {size}}}}}
"#
    )
}

/// A pod on gk-node-1 running `script` in the workload image, with each claim mounted at its
/// path.
pub fn workload_pod(name: &str, claims: &[(&str, &str)], script: &str) -> String {
    let script = script.replace('\n', "\n          ");
    let mounts: Vec<String> = claims
        .iter()
        .enumerate()
        .map(|(i, (_, path))| format!("{{name: v{i}, mountPath: {path}}}"))
        .collect();
    let volumes: Vec<String> = claims
        .iter()
        .enumerate()
        .map(|(i, (claim, _))| {
            format!("    - {{name: v{i}, persistentVolumeClaim: {{claimName: {claim}}}}}")
        })
        .collect();
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {NS}, labels: {{app: gk-workload}}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: gk-node-1}}
  tolerations: [{{key: glusterkube.dev/local-node, operator: Exists, effect: NoSchedule}}]
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: localhost/glusterkube/workload:{version}
      command: ["/bin/sh", "-c"]
      args:
        - |
          {script}
      volumeMounts: [{mounts}]
  volumes:
{volumes}
"#,
        mounts = mounts.join(", "),
        volumes = volumes.join("\n"),
        version = env!("CARGO_PKG_VERSION"),
    )
}

/// The 1-minute load average, as a bench records it beside each sample.
pub fn load1() -> f64 {
    crate::bench::load_average()[0]
}

/// Milliseconds since the Unix epoch, the clock the workload pods' `date +%s%3N` reads.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_pod_mounts_each_claim_at_its_path() {
        let pod: serde_yaml::Value = serde_yaml::from_str(&workload_pod(
            "w",
            &[("a", "/data"), ("b", "/ded")],
            "echo one\necho two",
        ))
        .unwrap();
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["args"][0].as_str().unwrap(), "echo one\necho two\n");
        assert_eq!(c["volumeMounts"][1]["mountPath"].as_str(), Some("/ded"));
        assert_eq!(
            pod["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"].as_str(),
            Some("b")
        );
        let claim: serde_yaml::Value =
            serde_yaml::from_str(&rwx_claim("c", STORAGE_CLASS, "1Gi")).unwrap();
        assert_eq!(
            claim["spec"]["resources"]["requests"]["storage"].as_str(),
            Some("1Gi")
        );
    }

    #[test]
    fn until_returns_the_first_value() {
        let mut n = 0;
        let v = until("counting", Duration::from_secs(5), Duration::ZERO, || {
            n += 1;
            (n == 3).then_some(n)
        });
        assert_eq!(v, 3);
    }
}
