//! Prometheus metrics of the CSI plugin: every RPC's count by gRPC code, its duration, and
//! the mounts the node plugin repaired. `RpcMetricsLayer` records the RPCs as a tower layer
//! in front of the gRPC services, so no RPC can forget to.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::http;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabel {
    pub method: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    pub method: String,
}

pub struct Metrics {
    registry: Mutex<Registry>,
    operations: Family<RpcLabel, Counter>,
    duration: Family<MethodLabel, Histogram>,
    repaired: Counter,
    repair_failures: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("glusterkube_csi");
        let operations = Family::<RpcLabel, Counter>::default();
        let duration = Family::<MethodLabel, Histogram>::new_with_constructor(|| {
            // 1 ms to about 65 s: mounts and volume creation can take tens of seconds.
            Histogram::new(exponential_buckets(0.001, 2.0, 17))
        });
        let repaired = Counter::default();
        let repair_failures = Counter::default();
        registry.register(
            "operations",
            "CSI RPCs answered, by method and gRPC code (OK for success)",
            operations.clone(),
        );
        registry.register(
            "operation_duration_seconds",
            "Time to answer a CSI RPC, by method",
            duration.clone(),
        );
        registry.register(
            "mounts_repaired",
            "Volumes whose mounts the node plugin mounted again after their gluster client died",
            repaired.clone(),
        );
        registry.register(
            "mount_repair_failures",
            "Mount repairs that failed (see the node plugin's log)",
            repair_failures.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            operations,
            duration,
            repaired,
            repair_failures,
        }
    }
}

impl Metrics {
    pub fn rpc(&self, method: &str, code: tonic::Code, seconds: f64) {
        self.operations
            .get_or_create(&RpcLabel {
                method: method.into(),
                code: code_name(code).into(),
            })
            .inc();
        self.duration
            .get_or_create(&MethodLabel {
                method: method.into(),
            })
            .observe(seconds);
    }

    pub fn repairs(&self, repaired: usize, failed: usize) {
        self.repaired.inc_by(repaired as u64);
        self.repair_failures.inc_by(failed as u64);
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        gk_api::metrics::encode(&self.registry)
    }
}

/// gRPC's own spelling of a code (as in grpc-go and the CSI sidecars' metrics).
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "Canceled",
        Unknown => "Unknown",
        InvalidArgument => "InvalidArgument",
        DeadlineExceeded => "DeadlineExceeded",
        NotFound => "NotFound",
        AlreadyExists => "AlreadyExists",
        PermissionDenied => "PermissionDenied",
        ResourceExhausted => "ResourceExhausted",
        FailedPrecondition => "FailedPrecondition",
        Aborted => "Aborted",
        OutOfRange => "OutOfRange",
        Unimplemented => "Unimplemented",
        Internal => "Internal",
        Unavailable => "Unavailable",
        DataLoss => "DataLoss",
        Unauthenticated => "Unauthenticated",
    }
}

/// The code of a unary gRPC answer: tonic sends an error as a trailers-only response, with
/// `grpc-status` among the headers; a success carries it in the trailers, after the body.
fn answer_code(headers: &http::HeaderMap) -> tonic::Code {
    headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map(tonic::Code::from_i32)
        .unwrap_or(tonic::Code::Ok)
}

/// The RPC's method name from its path, `/csi.v1.Controller/CreateVolume`.
fn method_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[derive(Clone)]
pub struct RpcMetricsLayer(pub Arc<Metrics>);

impl<S> tower::Layer<S> for RpcMetricsLayer {
    type Service = RpcMetrics<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RpcMetrics {
            inner,
            metrics: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct RpcMetrics<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B, RB> tower::Service<http::Request<B>> for RpcMetrics<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = method_of(req.uri().path()).to_string();
        let metrics = self.metrics.clone();
        let start = Instant::now();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let res = answer.await;
            let code = match &res {
                Ok(r) => answer_code(r.headers()),
                Err(_) => tonic::Code::Unavailable,
            };
            metrics.rpc(&method, code, start.elapsed().as_secs_f64());
            res
        })
    }
}

/// Serves /metrics on `listener` until the process ends.
pub async fn serve(
    metrics: Arc<Metrics>,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let m = metrics.clone();
            async move {
                (
                    [(
                        http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    m.encode(),
                )
            }
        }),
    );
    axum::serve(listener, app).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_come_from_the_headers_of_an_error_and_default_to_ok() {
        let mut h = http::HeaderMap::new();
        assert_eq!(answer_code(&h), tonic::Code::Ok);
        h.insert("grpc-status", "5".parse().unwrap());
        assert_eq!(answer_code(&h), tonic::Code::NotFound);
        assert_eq!(method_of("/csi.v1.Controller/CreateVolume"), "CreateVolume");
    }

    #[test]
    fn exposes_rpcs_and_repairs() {
        let m = Metrics::default();
        m.rpc("CreateVolume", tonic::Code::Ok, 0.02);
        m.rpc("CreateVolume", tonic::Code::ResourceExhausted, 0.5);
        m.repairs(2, 1);
        let text = m.encode();
        for want in [
            "glusterkube_csi_operations_total{method=\"CreateVolume\",code=\"OK\"} 1",
            "glusterkube_csi_operations_total{method=\"CreateVolume\",code=\"ResourceExhausted\"} 1",
            "glusterkube_csi_operation_duration_seconds_count{method=\"CreateVolume\"} 2",
            "glusterkube_csi_mounts_repaired_total 2",
            "glusterkube_csi_mount_repair_failures_total 1",
        ] {
            assert!(text.contains(want), "{want} missing from\n{text}");
        }
    }
}
