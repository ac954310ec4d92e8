//! The reconcile entry point of both resources: kube-runtime's finalizer, timed for the
//! metrics. Apply runs while the object lives; Cleanup once it is being deleted, and the
//! finalizer is removed only when Cleanup succeeds.

use std::future::Future;
use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{finalizer, Error as FinalizerError, Event};
use kube::Resource;

use crate::context::Context;
use crate::Error;

/// Runs `apply` or `cleanup` for `obj` under the finalizer `name`.
pub async fn reconcile<K, A, AF, C, CF>(
    obj: Arc<K>,
    ctx: &Context,
    name: &str,
    apply: A,
    cleanup: C,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
    A: FnOnce(Arc<K>) -> AF,
    AF: Future<Output = Result<Action, Error>>,
    C: FnOnce(Arc<K>) -> CF,
    CF: Future<Output = Result<Action, Error>>,
{
    let timer = ctx.metrics.reconcile_started(K::kind(&()).as_ref());
    let api: Api<K> = Api::namespaced(
        ctx.client.clone(),
        &obj.meta().namespace.clone().unwrap_or_default(),
    );
    let result = finalizer(&api, name, obj, |event| async {
        match event {
            Event::Apply(o) => apply(o).await,
            Event::Cleanup(o) => cleanup(o).await,
        }
    })
    .await
    .map_err(|e| match e {
        FinalizerError::ApplyFailed(e) | FinalizerError::CleanupFailed(e) => e,
        other => Error::Finalizer(other.to_string()),
    });
    timer.finish();
    result
}
