//! `kubectl gluster`: what people ask of glusterkube storage day to day, in kubectl's
//! manner. Everything is read: status from the custom resources, gluster's own details
//! from the brick agents' read-only calls, reached through port-forwards (never
//! `pods/exec`).
//!
//! One file per subcommand under `cmd/`; each gathers what it needs at the edges
//! (`cluster`, `agent`) and prints through a pure `render` function.

pub mod agent;
pub mod cluster;
pub mod cmd;
pub mod error;
pub mod table;

pub use error::PluginError;
