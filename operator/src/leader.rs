//! Leader election, so the operator can run more than one replica: only the holder of a
//! Lease reconciles; the others wait, warm, and one takes over when the holder stops (at
//! once when it released the Lease on shutdown, else once the Lease expires).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};

/// Which Lease, held by whom, for how long without renewal.
#[derive(Clone, Debug)]
pub struct Election {
    pub namespace: String,
    pub lease: String,
    /// This replica's name in the Lease (its pod name).
    pub identity: String,
    /// Seconds the Lease stays valid after its last renewal.
    pub duration_seconds: u64,
    /// Seconds before expiry at which the holder renews it.
    pub grace_seconds: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error(
        "leader election on Lease {namespace}/{lease} failed: {source}; check that the \
         operator may get, create and patch Leases in its namespace"
    )]
    Lease {
        namespace: String,
        lease: String,
        #[source]
        source: LeaseManagerError,
    },
}

/// Why leading ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Shutdown was asked for (before or while leading); the Lease was released.
    Shutdown,
    /// Another replica took the Lease (this one failed to renew it in time): the work was
    /// stopped, and the caller should exit so it restarts as a follower.
    LostLease,
}

/// A future that resolves when the work must stop.
pub type Stop = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// How long the work may take to stop once asked (reconciles in flight finish) before it is
/// dropped and the Lease released: a pod has 30 s from SIGTERM to SIGKILL, and a Lease left
/// held would keep the standby waiting out its whole duration on top.
pub const DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits for the Lease, then runs `work` until `shutdown` resolves or the Lease is lost,
/// and releases the Lease.
pub async fn lead<W, F>(
    client: kube::Client,
    election: &Election,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    work: W,
) -> Result<Ended, LeaderError>
where
    W: FnOnce(Stop) -> F,
    F: Future<Output = ()>,
{
    let failed = |source| LeaderError::Lease {
        namespace: election.namespace.clone(),
        lease: election.lease.clone(),
        source,
    };
    let manager = LeaseManagerBuilder::new(client, &election.lease)
        .with_namespace(&election.namespace)
        .with_identity(&election.identity)
        .with_duration(election.duration_seconds)
        .with_grace(election.grace_seconds)
        .build()
        .await
        .map_err(failed)?;
    let (mut leading, task) = manager.watch().await;
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    tracing::info!(lease = %election.lease, identity = %election.identity, "waiting for the leader Lease");
    while !*leading.borrow_and_update() {
        tokio::select! {
            changed = leading.changed() => {
                if changed.is_err() {
                    // The manager's task ended: it reports why.
                    return match task.await {
                        Ok(Err(e)) => Err(failed(e)),
                        _ => Ok(Ended::Shutdown),
                    };
                }
            }
            _ = shutdown.clone() => {
                drop(leading);
                let _ = task.await;
                return Ok(Ended::Shutdown);
            }
        }
    }
    tracing::info!(lease = %election.lease, identity = %election.identity, "leading");
    let lost = Arc::new(AtomicBool::new(false));
    let mut watch = leading.clone();
    let lost_flag = lost.clone();
    let lost_lease = async move {
        while watch.changed().await.is_ok() {
            if !*watch.borrow() {
                break;
            }
        }
        lost_flag.store(true, Ordering::SeqCst);
    };
    let (stopping, asked) = tokio::sync::oneshot::channel::<()>();
    let stop: Stop = Box::pin(async move {
        tokio::select! {
            _ = shutdown => {}
            _ = lost_lease => {}
        }
        let _ = stopping.send(());
    });
    let work = work(stop);
    tokio::pin!(work);
    tokio::select! {
        _ = &mut work => {}
        _ = async {
            if asked.await.is_ok() {
                tokio::time::sleep(DRAIN).await;
            } else {
                std::future::pending::<()>().await;
            }
        } => {
            tracing::warn!(lease = %election.lease, "reconciles still running {DRAIN:?} after the stop; leaving them");
        }
    }
    // Closing the channel makes the manager release the Lease, if it still holds it.
    drop(leading);
    let _ = task.await;
    if lost.load(Ordering::SeqCst) {
        tracing::error!(lease = %election.lease, "lost the leader Lease; stopping");
        Ok(Ended::LostLease)
    } else {
        tracing::info!(lease = %election.lease, "released the leader Lease");
        Ok(Ended::Shutdown)
    }
}
