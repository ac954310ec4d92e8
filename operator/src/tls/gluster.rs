//! Certificates for gluster's own TLS: one CA per operator, a certificate per GlusterCluster
//! (its glusterd, bricks and internal clients) and one for the CSI node plugins.
//!
//! One CA, not one per cluster: a FUSE client reads a single glusterfs.pem/.key/.ca from
//! OpenSSL's directory for its management connection (there is no per-mount option), so the
//! CSI node plugins' one certificate must be trusted by every cluster they mount from. Which
//! certificates may mount which volume is `auth.ssl-allow` (see `security`), per cluster.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use gk_api::agents::secret_text as data;
use gk_api::crd::GlusterCluster;
use gk_api::names::OPERATOR as MANAGER;

use super::access::{cluster_identity, CSI_CLIENT_IDENTITY};
use crate::apply::owned_meta;
use crate::context::Context;
use crate::pki::{self, Ca, CertKey, Usage};
use crate::Error;

/// The CA, in the operator's namespace.
pub const CA_SECRET: &str = "glusterkube-gluster-ca";
pub use gk_api::names::CSI_CLIENT_SECRET;
/// Where Debian's gluster reads glusterfs.pem, .key and .ca: OpenSSL's directory, which is
/// /usr/lib/ssl there, not the /etc/ssl gluster's documentation names.
pub const SSL_DIR: &str = "/usr/lib/ssl";

fn bytes(map: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
    map.iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect()
}

/// The operator's gluster CA, made on first use. Two operators racing to make it agree on
/// whichever was stored first.
pub async fn ca(client: &kube::Client, namespace: &str) -> Result<Ca, Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    loop {
        if let Some(s) = secrets.get_opt(CA_SECRET).await? {
            return Ok(Ca::from_pem(&CertKey {
                cert_pem: data(&s, "ca.crt").unwrap_or_default(),
                key_pem: data(&s, "ca.key").unwrap_or_default(),
            })?);
        }
        let ca = Ca::generate("glusterkube gluster CA", SystemTime::now())?;
        let mut s: Secret = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": CA_SECRET, "labels": {"app.kubernetes.io/managed-by": MANAGER}},
        }))
        .expect("a valid Secret");
        s.data = Some(bytes(&[
            ("ca.crt", &ca.pem().cert_pem),
            ("ca.key", &ca.pem().key_pem),
        ]));
        match secrets.create(&PostParams::default(), &s).await {
            Ok(_) => {
                tracing::info!(namespace, secret = CA_SECRET, "made the gluster CA");
                return Ok(ca);
            }
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Issues (or re-issues, when a third of its validity is left or the CA changed) a gluster
/// certificate into Secret `name`, as glusterfs.pem, glusterfs.key and glusterfs.ca.
/// Returns when the certificate now in the Secret expires (Unix seconds).
async fn ensure_leaf(
    secrets: &Api<Secret>,
    name: &str,
    metadata: serde_json::Value,
    ca: &Ca,
    common_name: &str,
    usage: Usage,
) -> Result<Option<i64>, Error> {
    let now = SystemTime::now();
    let ca_pem = &ca.pem().cert_pem;
    let current = secrets.get_opt(name).await?;
    let fresh = current.as_ref().is_some_and(|s| {
        data(s, "glusterfs.ca").as_ref() == Some(ca_pem)
            && data(s, "glusterfs.key").is_some()
            && data(s, "glusterfs.pem").is_some_and(|c| !pki::needs_renewal(&c, now))
            && s.annotations().get(IDENTITY_ANNOTATION).map(String::as_str) == Some(common_name)
    });
    if fresh {
        return Ok(current
            .as_ref()
            .and_then(|s| data(s, "glusterfs.pem"))
            .and_then(|c| pki::expiry_unix(&c)));
    }
    let leaf = ca.issue(common_name, &[], usage, now)?;
    let mut s: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata,
    }))
    .expect("a valid Secret");
    s.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(IDENTITY_ANNOTATION.into(), common_name.into());
    s.data = Some(bytes(&[
        ("glusterfs.pem", &leaf.cert_pem),
        ("glusterfs.key", &leaf.key_pem),
        ("glusterfs.ca", ca_pem),
    ]));
    secrets
        .patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&s),
        )
        .await?;
    tracing::info!(secret = name, common_name, "issued gluster certificate");
    Ok(pki::expiry_unix(&leaf.cert_pem))
}

/// The common name a gluster certificate Secret was issued for.
const IDENTITY_ANNOTATION: &str = "glusterkube.dev/common-name";

/// The CSI node plugins' client certificate (kept current by a loop of the operator's own,
/// clusters or not; see `run`).
pub async fn ensure_csi_client(
    client: &kube::Client,
    namespace: &str,
) -> Result<Option<i64>, Error> {
    let ca = ca(client, namespace).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let metadata = json!({
        "name": CSI_CLIENT_SECRET,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": MANAGER},
    });
    ensure_leaf(
        &secrets,
        CSI_CLIENT_SECRET,
        metadata,
        &ca,
        CSI_CLIENT_IDENTITY,
        Usage::Client,
    )
    .await
}

/// The cluster's gluster certificate, when its TLS is on.
pub async fn ensure(ctx: &Context, gc: &GlusterCluster) -> Result<(), Error> {
    if !gc.spec.tls.enabled {
        return Ok(());
    }
    let ca = ca(&ctx.client, &ctx.config.namespace).await?;
    let secrets: Api<Secret> =
        Api::namespaced(ctx.client.clone(), &gc.namespace().unwrap_or_default());
    let uid = gc.uid().unwrap_or_default();
    let name = gk_api::names::gluster_tls_secret(&gc.name_any());
    let expiry = ensure_leaf(
        &secrets,
        &name,
        owned_meta(gc, &name),
        &ca,
        &cluster_identity(&uid),
        Usage::Peer,
    )
    .await?;
    if let Some(at) = expiry {
        ctx.metrics
            .certificate_expiry(&gc.namespace().unwrap_or_default(), &name, at);
    }
    Ok(())
}
