//! Writing to the API: owned objects and status by server-side apply, under the operator's
//! one field manager, so a re-apply of the same object changes nothing.

use gk_api::crd::{GlusterClusterStatus, GlusterVolumeStatus};
use gk_api::names::{cluster_labels, OPERATOR};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::conditions::{self, Desired};
use crate::context::Context;
use crate::{events, Error};

/// Metadata of an object the operator makes for `owner` (a GlusterCluster): in its
/// namespace, with the cluster's labels and a controller reference, so it is garbage
/// collected with the cluster and its changes wake the cluster's reconcile.
pub fn owned_meta<K: Resource<DynamicType = ()>>(owner: &K, name: &str) -> serde_json::Value {
    let reference: OwnerReference = owner
        .controller_owner_ref(&())
        .expect("a stored object has a name and uid");
    json!({
        "name": name,
        "namespace": owner.namespace(),
        "labels": cluster_labels(&owner.name_any()),
        "ownerReferences": [reference],
    })
}

/// Applies `obj` in namespace `ns`.
pub async fn object<K>(ctx: &Context, ns: &str, obj: &K) -> Result<(), Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    api.patch(
        &obj.name_any(),
        &PatchParams::apply(OPERATOR).force(),
        &Patch::Apply(obj),
    )
    .await?;
    Ok(())
}

/// Applies the status of `obj`.
pub async fn status<K>(ctx: &Context, obj: &K, status: &impl serde::Serialize) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        &obj.name_any(),
        &PatchParams::apply(OPERATOR).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// A resource status that carries conditions.
pub trait Conditioned: serde::Serialize + PartialEq {
    fn conditions(&self) -> &[Condition];
    fn set_conditions(&mut self, conditions: Vec<Condition>);
}

impl Conditioned for GlusterClusterStatus {
    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }
    fn set_conditions(&mut self, conditions: Vec<Condition>) {
        self.conditions = conditions;
    }
}

impl Conditioned for GlusterVolumeStatus {
    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }
    fn set_conditions(&mut self, conditions: Vec<Condition>) {
        self.conditions = conditions;
    }
}

/// Gives `new` the `desired` conditions (a condition's transition time moves only when its
/// status does) and writes it only when it differs from `old`, with one event per condition
/// that changed. A reconcile that observed nothing new writes nothing.
pub async fn status_if_changed<K, S>(
    ctx: &Context,
    obj: &K,
    old: &S,
    mut new: S,
    desired: &[Desired],
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    S: Conditioned,
{
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    new.set_conditions(conditions::merge(
        old.conditions(),
        desired,
        obj.meta().generation,
        &now,
    ));
    if &new != old {
        status(ctx, obj, &new).await?;
        events::publish_transitions(ctx, obj, old.conditions(), new.conditions()).await;
    }
    Ok(())
}

/// Records why a reconcile of `obj` stopped (see `failure`), on the status as it is now
/// (read again: the reconcile may have written some before it failed). A failure that cannot
/// be recorded is logged; the reconcile's own error is what the controller retries on.
pub async fn failure<K, S>(ctx: &Context, obj: &K, status_of: impl Fn(&K) -> Option<S>, e: &Error)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    S: Conditioned + Clone + Default,
{
    let Some(f) = crate::failure::classify(e) else {
        return;
    };
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    // The object itself (status included): the role grants no read of the subresource.
    let current = match api.get(&obj.name_any()).await {
        Ok(o) => o,
        Err(read) => {
            tracing::warn!(error = %read, failure = %f.message, "recording a failure: reading status failed");
            return;
        }
    };
    let old = status_of(&current).unwrap_or_default();
    let desired = crate::failure::conditions(old.conditions(), &f);
    if let Err(w) = status_if_changed(ctx, &current, &old, old.clone(), &desired).await {
        tracing::warn!(error = %w, failure = %f.message, "recording a failure in status failed");
    }
}
