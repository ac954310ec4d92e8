//! What the operator's and the CSI plugins' /metrics share.

use std::sync::Mutex;

use prometheus_client::registry::Registry;

/// The registry in the text exposition format (a poisoned lock still encodes: metrics
/// must not fail because a panic happened elsewhere).
pub fn encode(registry: &Mutex<Registry>) -> String {
    let mut out = String::new();
    let registry = registry.lock().unwrap_or_else(|p| p.into_inner());
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String");
    out
}
