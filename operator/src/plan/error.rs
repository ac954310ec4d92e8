//! Why a spec cannot be planned.

/// A spec the operator cannot act on. Becomes a condition and an event, not a retry loop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct SpecError {
    pub field: String,
    pub reason: String,
}

pub(crate) fn spec_error(field: impl Into<String>, reason: impl Into<String>) -> SpecError {
    SpecError {
        field: field.into(),
        reason: reason.into(),
    }
}

impl From<gk_api::units::QuantityError> for SpecError {
    fn from(e: gk_api::units::QuantityError) -> Self {
        let reason = e.to_string();
        let reason = reason
            .strip_prefix(&format!("{}: ", e.field))
            .unwrap_or(&reason)
            .to_string();
        SpecError {
            field: e.field,
            reason,
        }
    }
}
