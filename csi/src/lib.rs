//! The GlusterFS CSI driver.

pub mod mount;
