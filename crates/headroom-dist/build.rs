//! Generates the `headroom.dist.Agent` gRPC stubs from a service declared in Rust
//! (`tonic_build::manual`), so building needs no `protoc`. The messages are hand-written prost
//! structs in `src/messages.rs`; the codec is `tonic_prost::ProstCodec`, so the wire format is plain
//! protobuf and the service is callable by any gRPC client given the equivalent `.proto`
//! (documented in `src/messages.rs`).

fn main() {
    let run = tonic_build::manual::Method::builder()
        .name("run")
        .route_name("Run")
        .input_type("crate::messages::RunRequest")
        .output_type("crate::messages::AgentEvent")
        .codec_path("tonic_prost::ProstCodec")
        .server_streaming()
        .build();
    let stop = tonic_build::manual::Method::builder()
        .name("stop")
        .route_name("Stop")
        .input_type("crate::messages::StopRequest")
        .output_type("crate::messages::StopReply")
        .codec_path("tonic_prost::ProstCodec")
        .build();
    let agent = tonic_build::manual::Service::builder()
        .name("Agent")
        .package("headroom.dist")
        .comment("A headroom agent: runs one execution segment of a load test and streams its intervals.")
        .method(run)
        .method(stop)
        .build();
    tonic_build::manual::Builder::new().compile(&[agent]);
    println!("cargo:rerun-if-changed=build.rs");
}
