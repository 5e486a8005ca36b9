//! `stratus-images`: packages the built binaries of a cargo profile directory into OCI archives
//! and node tarballs plus `manifest.json` (what `make images` runs after a release build).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Parser;
use stratus_images::artifact::{self, Sources};
use stratus_images::{report, table};
use stratus_runtime::build_info::BUILD;

/// Packages Stratus binaries into release artifacts.
#[derive(Parser, Debug)]
#[command(name = "stratus-images", version = stratus_runtime::build_info::version())]
struct Args {
    /// The cargo target dir holding the built binaries; each binary is taken from the folder of
    /// its profile (`release/`, or `release-min/` for the discoverer).
    #[arg(long, required_unless_present = "print_cargo_packages")]
    target_dir: Option<PathBuf>,
    /// Where the artifacts and `manifest.json` go.
    #[arg(long, default_value = "dist/images")]
    out: PathBuf,
    /// The CA bundle copied into images.
    #[arg(long, default_value = "/etc/ssl/certs/ca-certificates.crt")]
    ca_bundle: PathBuf,
    /// Only these binaries (default: every one in the table).
    #[arg(long = "only", value_name = "NAME")]
    only: Vec<String>,
    /// Print the cargo arguments that build every shipped binary of this profile (`-p NAME …`)
    /// and exit.
    #[arg(long, exclusive = true, value_name = "PROFILE")]
    print_cargo_packages: Option<String>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(profile) = &args.print_cargo_packages {
        let packages: Vec<String> = table::BINARIES
            .iter()
            .filter(|b| b.profile == profile)
            .map(|b| format!("-p {}", b.package))
            .collect();
        println!("{}", packages.join(" "));
        return Ok(());
    }
    let target_dir = args.target_dir.unwrap_or_default();
    let mut artifacts = Vec::new();
    for name in &args.only {
        if table::find(name).is_none() {
            bail!("{name} is not a shipped binary");
        }
    }
    for binary in table::BINARIES
        .iter()
        .filter(|b| args.only.is_empty() || args.only.iter().any(|n| n == b.name))
    {
        let path = target_dir.join(binary.profile).join(binary.name);
        if !path.is_file() {
            bail!(
                "{} is missing: build it first (cargo build --profile {} -p {})",
                path.display(),
                binary.profile,
                binary.package
            );
        }
        let sources = Sources {
            binary: &path,
            ca_bundle: &args.ca_bundle,
            build: &BUILD,
        };
        let a = artifact::package(binary, &sources, &args.out)?;
        eprintln!(
            "{:<28} {:>10} compressed {:>10} unpacked  {}",
            a.name,
            report::mib(a.compressed_bytes),
            report::mib(a.uncompressed_bytes),
            args.out.join(&a.file).display()
        );
        artifacts.push(a);
    }
    report::write(&args.out, &artifacts)?;
    println!(
        "{}",
        serde_json::to_string_pretty(&report::manifest(&artifacts))?
    );
    Ok(())
}
