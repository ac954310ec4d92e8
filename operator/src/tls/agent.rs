//! The agents' mutual TLS: a CA per GlusterCluster (made once), the agents' serving
//! certificate and the operator's client certificate, each re-issued when a third of its
//! validity is left or the CA changed.

use std::collections::BTreeMap;
use std::time::SystemTime;

use gk_api::agents::{secret_text, server_name, AgentCredentials};
use gk_api::crd::GlusterCluster;
use gk_api::names::{agent_ca_secret, agent_tls_secret, operator_tls_secret, OPERATOR};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use crate::apply::owned_meta;
use crate::context::Context;
use crate::pki::{self, Ca, CertKey, Usage};
use crate::Error;

fn tls_secret(gc: &GlusterCluster, name: &str, ca: &str, leaf: &CertKey) -> Secret {
    let mut s: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": owned_meta(gc, name), "type": "kubernetes.io/tls",
    }))
    .expect("a valid Secret");
    s.data = Some(BTreeMap::from([
        ("ca.crt".into(), ByteString(ca.as_bytes().to_vec())),
        (
            "tls.crt".into(),
            ByteString(leaf.cert_pem.as_bytes().to_vec()),
        ),
        (
            "tls.key".into(),
            ByteString(leaf.key_pem.as_bytes().to_vec()),
        ),
    ]));
    s
}

/// The cluster CA (made once) and the agent and operator certificates. Returns the
/// operator's credentials.
pub async fn ensure(ctx: &Context, gc: &GlusterCluster) -> Result<AgentCredentials, Error> {
    let ns = gc.namespace().unwrap_or_default();
    let cluster = gc.name_any();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let now = SystemTime::now();
    let ca = match secrets.get_opt(&agent_ca_secret(&cluster)).await? {
        Some(s) => Ca::from_pem(&CertKey {
            cert_pem: secret_text(&s, "ca.crt").unwrap_or_default(),
            key_pem: secret_text(&s, "ca.key").unwrap_or_default(),
        })?,
        None => {
            let ca = Ca::generate(&format!("glusterkube {ns}/{cluster} agent CA"), now)?;
            let mut s: Secret = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret", "metadata": owned_meta(gc, &agent_ca_secret(&cluster)), "type": "Opaque",
            }))
            .expect("a valid Secret");
            s.data = Some(BTreeMap::from([
                (
                    "ca.crt".into(),
                    ByteString(ca.pem().cert_pem.as_bytes().to_vec()),
                ),
                (
                    "ca.key".into(),
                    ByteString(ca.pem().key_pem.as_bytes().to_vec()),
                ),
            ]));
            secrets.create(&PostParams::default(), &s).await?;
            ca
        }
    };
    let ca_pem = ca.pem().cert_pem.clone();
    let server_name = server_name(&cluster, &ns);
    let mut operator_leaf = None;
    for (name, usage, cn) in [
        (
            agent_tls_secret(&cluster),
            Usage::Server,
            server_name.clone(),
        ),
        (
            operator_tls_secret(&cluster),
            Usage::Client,
            OPERATOR.to_string(),
        ),
    ] {
        let current = secrets.get_opt(&name).await?;
        let fresh = current.as_ref().and_then(|s| {
            let cert = secret_text(s, "tls.crt")?;
            let key = secret_text(s, "tls.key")?;
            let same_ca = secret_text(s, "ca.crt").as_deref() == Some(ca_pem.as_str());
            (same_ca && !pki::needs_renewal(&cert, now)).then_some(CertKey {
                cert_pem: cert,
                key_pem: key,
            })
        });
        let leaf = match fresh {
            Some(leaf) => leaf,
            None => {
                let names = if usage == Usage::Server {
                    vec![server_name.clone()]
                } else {
                    vec![]
                };
                let leaf = ca.issue(&cn, &names, usage, now)?;
                secrets
                    .patch(
                        &name,
                        &PatchParams::apply(OPERATOR).force(),
                        &Patch::Apply(&tls_secret(gc, &name, &ca_pem, &leaf)),
                    )
                    .await?;
                tracing::info!(secret = %name, "issued certificate");
                leaf
            }
        };
        if let Some(at) = pki::expiry_unix(&leaf.cert_pem) {
            ctx.metrics.certificate_expiry(&ns, &name, at);
        }
        if usage == Usage::Client {
            operator_leaf = Some(leaf);
        }
    }
    let leaf = operator_leaf.expect("the loop issues the client certificate");
    Ok(AgentCredentials {
        ca_pem,
        cert_pem: leaf.cert_pem,
        key_pem: leaf.key_pem,
        server_name,
    })
}
