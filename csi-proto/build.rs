use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // protoc and the well-known types (descriptor, wrappers, timestamp) come from Debian's
    // protobuf-compiler and libprotobuf-dev (tests/env/install-tools.sh); the build never
    // touches the network. PROTOC / PROTOC_INCLUDE override both, as prost-build documents.
    println!("cargo:rerun-if-changed=proto");
    let mut includes = vec!["proto"];
    if std::env::var_os("PROTOC_INCLUDE").is_none()
        && Path::new("/usr/include/google/protobuf/descriptor.proto").exists()
    {
        includes.push("/usr/include");
    }
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/csi/v1/csi.proto"], &includes)?;
    Ok(())
}
