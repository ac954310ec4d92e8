//! The Container Storage Interface, spec v1.13.0, as prost messages and tonic clients/servers.
//!
//! `proto/csi/v1/csi.proto` restates the spec's definitions (same names, field numbers and
//! custom options); `tests/wire.rs` compares its descriptor with the upstream file. Fields the
//! spec marks `csi_secret` (every `secrets` map) must never be logged; note that the generated
//! `Debug` impls do print them.
//!
//! Well-known types map to `prost-types`: `google.protobuf.Timestamp` is
//! [`prost_types::Timestamp`], and the wrappers (`BoolValue`, `Int64Value`) become `Option<bool>`
//! / `Option<i64>`.

pub use prost;
pub use prost_types;

/// Package `csi.v1`: messages, enums, and for each service (`Identity`, `Controller`,
/// `GroupController`, `SnapshotMetadata`, `Node`) a `*_client` and a `*_server` module.
pub mod v1 {
    tonic::include_proto!("csi.v1");
}

#[cfg(test)]
mod tests {
    use super::v1::{volume_capability, CapacityRange, CreateVolumeRequest, VolumeCapability};
    use prost::Message;
    use std::collections::HashMap;

    #[test]
    fn create_volume_request_round_trips() {
        let req = CreateVolumeRequest {
            name: "pvc-0b5e".into(),
            capacity_range: Some(CapacityRange {
                required_bytes: 1 << 30,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![VolumeCapability {
                access_type: Some(volume_capability::AccessType::Mount(
                    volume_capability::MountVolume {
                        fs_type: "glusterfs".into(),
                        mount_flags: vec!["noatime".into()],
                        volume_mount_group: String::new(),
                    },
                )),
                access_mode: Some(volume_capability::AccessMode {
                    mode: volume_capability::access_mode::Mode::MultiNodeMultiWriter as i32,
                }),
            }],
            parameters: HashMap::from([
                ("replica".to_string(), "3".to_string()),
                ("arbiter".to_string(), "1".to_string()),
            ]),
            secrets: HashMap::from([("password".to_string(), "s3cr3t".to_string())]),
            mutable_parameters: HashMap::from([("quota".to_string(), "10Gi".to_string())]),
            ..Default::default()
        };
        let bytes = req.encode_to_vec();
        let back = CreateVolumeRequest::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(back, req);
        assert_eq!(back.secrets["password"], "s3cr3t");
        assert_eq!(back.parameters.len(), 2);
        assert_eq!(
            back.volume_capabilities[0]
                .access_mode
                .as_ref()
                .unwrap()
                .mode(),
            volume_capability::access_mode::Mode::MultiNodeMultiWriter
        );
    }
}
