fn main() -> Result<(), Box<dyn std::error::Error>> {
    // protoc comes from Debian's protobuf-compiler (tests/env/install-tools.sh); the build
    // never touches the network.
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .compile_protos(&["proto/glusterkube/agent/v1/agent.proto"], &["proto"])?;
    Ok(())
}
