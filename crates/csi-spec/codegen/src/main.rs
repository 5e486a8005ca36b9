//! Regenerates the committed gRPC bindings of a `.proto` file (the CSI spec's `csi.proto` for
//! `crates/csi-spec`, the kubelet's plugin-registration `api.proto` for
//! `crates/kubelet-plugin-spec`): `protox` parses it (no system protoc), `tonic-prost-build`
//! writes messages, clients and servers. Usage:
//! `stratus-proto-codegen <proto-file> <generated-name> <out-file> <source>`, where
//! `<generated-name>` is the file prost names after the proto's package and `<source>` says,
//! in the header, where the proto came from.

use std::path::{Path, PathBuf};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!(
            "usage: {} <proto-file> <generated-name> <out-file> <source>",
            args[0]
        );
        std::process::exit(2);
    }
    let proto = PathBuf::from(&args[1]);
    let (generated_name, out_file, source) = (&args[2], PathBuf::from(&args[3]), &args[4]);
    let include = proto.parent().unwrap_or(Path::new("."));
    let fds = protox::compile([&proto], [include]).unwrap_or_else(|e| fail("parsing", &proto, e));
    let tmp = tempdir();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .out_dir(&tmp)
        .compile_fds(fds)
        .unwrap_or_else(|e| fail("generating code from", &proto, e));
    let generated_file = tmp.join(generated_name);
    let generated = std::fs::read_to_string(&generated_file)
        .unwrap_or_else(|e| fail("reading", &generated_file, e));
    let header = format!("// @generated from {source}.\n// Do not edit: rerun the crate's regen.sh.\n\n");
    std::fs::write(&out_file, header + &generated)
        .unwrap_or_else(|e| fail("writing", &out_file, e));
    let _ = std::fs::remove_dir_all(&tmp);
    println!("wrote {}", out_file.display());
}

fn fail(what: &str, path: &Path, e: impl std::fmt::Display) -> ! {
    eprintln!("{what} {}: {e}", path.display());
    std::process::exit(1);
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("proto-codegen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail("creating", &dir, e));
    dir
}
