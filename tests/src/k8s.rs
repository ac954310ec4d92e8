//! The local control plane, started once per machine and reused by every test.

use std::path::PathBuf;
use std::sync::OnceLock;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};

use crate::{repo_root, run, EnvError};

#[derive(Debug, Clone)]
pub struct ControlPlane {
    pub kubeconfig: PathBuf,
    /// Where kubectl and the control-plane binaries are.
    pub bin_dir: PathBuf,
}

static STARTED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();

impl ControlPlane {
    /// Starts the control plane unless it is already running, and waits until it is ready.
    pub fn ensure() -> Result<ControlPlane, EnvError> {
        STARTED
            .get_or_init(|| Self::start().map_err(|e| e.to_string()))
            .clone()
            .map_err(EnvError::Setup)
    }

    fn start() -> Result<ControlPlane, EnvError> {
        let script = repo_root().join("tests/env/k8s.sh");
        let script = script.to_str().expect("utf-8 path");
        run("bash", &[script, "start"])?;
        let paths = run("bash", &[script, "paths"])?;
        let paths = String::from_utf8_lossy(&paths.stdout).into_owned();
        let get = |key: &str| {
            paths
                .lines()
                .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
                .map(PathBuf::from)
                .ok_or_else(|| EnvError::Setup(format!("k8s.sh paths printed no {key}")))
        };
        Ok(ControlPlane {
            kubeconfig: get("KUBECONFIG")?,
            bin_dir: get("BIN")?,
        })
    }

    /// A kube-rs client authenticated as the admin user.
    pub async fn client(&self) -> Result<kube::Client, EnvError> {
        let kc = Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| EnvError::Setup(format!("reading {:?}: {e}", self.kubeconfig)))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| EnvError::Setup(format!("kubeconfig: {e}")))?;
        kube::Client::try_from(config).map_err(|e| EnvError::Setup(format!("client: {e}")))
    }

    /// Runs kubectl against the control plane and returns its standard output.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, EnvError> {
        let kubectl = self.bin_dir.join("kubectl");
        let mut all = vec![
            "--kubeconfig",
            self.kubeconfig.to_str().expect("utf-8 path"),
        ];
        all.extend_from_slice(args);
        let out = run(kubectl.to_str().expect("utf-8 path"), &all)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Applies CRDs by server-side apply and waits until the apiserver serves them.
    pub async fn install_crds(
        client: &kube::Client,
        crds: &[CustomResourceDefinition],
    ) -> Result<(), EnvError> {
        let api: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            api.patch(
                &name,
                &PatchParams::apply("gk-testenv").force(),
                &Patch::Apply(crd),
            )
            .await
            .map_err(|e| EnvError::Setup(format!("applying CRD {name}: {e}")))?;
            let established = await_condition(api.clone(), &name, conditions::is_crd_established());
            tokio::time::timeout(Duration::from_secs(30), established)
                .await
                .map_err(|_| EnvError::Setup(format!("CRD {name} not established in 30 s")))?
                .map_err(|e| EnvError::Setup(format!("waiting for CRD {name}: {e}")))?;
        }
        Ok(())
    }

    /// Creates a namespace if missing, and waits for its default service account, without
    /// which no pod is admitted.
    pub async fn ensure_namespace(client: &kube::Client, name: &str) -> Result<(), EnvError> {
        use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
        let api: Api<Namespace> = Api::all(client.clone());
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.to_string());
        api.patch(
            name,
            &PatchParams::apply("gk-testenv").force(),
            &Patch::Apply(&ns),
        )
        .await
        .map_err(|e| EnvError::Setup(format!("namespace {name}: {e}")))?;
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
        for _ in 0..300 {
            if sas
                .get_opt("default")
                .await
                .map_err(|e| EnvError::Setup(e.to_string()))?
                .is_some()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(EnvError::Setup(format!(
            "namespace {name} got no default service account in 60 s"
        )))
    }
}
