//! `ecr-credential-provider`: reads a `CredentialProviderRequest` on stdin, writes a
//! `CredentialProviderResponse` on stdout, explains failures on stderr (non-zero exit, nothing
//! on stdout). A cache hit starts no runtime and loads no AWS configuration.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use stratus_ecr::app::{self, Options};
use stratus_ecr::aws::AwsTokenSource;
use stratus_ecr::cache::Cache;
use stratus_ecr::identity::ROLE_ENV;
use stratus_ecr::log::Log;
use stratus_ecr::request::MAX_REQUEST_BYTES;

/// Where answers are cached unless `--cache-dir` or `ECR_CREDENTIAL_PROVIDER_CACHE_DIR` says
/// otherwise: the kubelet's state directory, private to root.
const DEFAULT_CACHE_DIR: &str = "/var/lib/kubelet/ecr-credential-provider";

/// Kubelet image credential provider for Amazon ECR and ECR Public.
///
/// Reads a CredentialProviderRequest (credentialprovider.kubelet.k8s.io v1, v1beta1 or
/// v1alpha1) on stdin and writes the CredentialProviderResponse on stdout.
#[derive(Parser, Debug)]
#[command(
    name = "ecr-credential-provider",
    version = stratus_runtime::build_info::version()
)]
struct Args {
    /// Directory of the on-disk token cache (created 0700; entries 0600).
    #[arg(
        long,
        env = "ECR_CREDENTIAL_PROVIDER_CACHE_DIR",
        default_value = DEFAULT_CACHE_DIR,
        value_name = "DIR"
    )]
    cache_dir: PathBuf,
    /// Do not read or write the on-disk cache.
    #[arg(long)]
    no_cache: bool,
    /// Log verbosity on stderr: 0 errors and warnings, 2 and more each step.
    #[arg(long = "v", short = 'v', default_value_t = 0, value_name = "LEVEL")]
    verbosity: u8,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut log = Log::new(args.verbosity, Box::new(std::io::stderr()));
    let mut input = Vec::new();
    if let Err(err) = std::io::stdin()
        .lock()
        .take(MAX_REQUEST_BYTES as u64 + 1)
        .read_to_end(&mut input)
    {
        log.error(format!("reading stdin: {err}"));
        return ExitCode::FAILURE;
    }
    let options = Options {
        cache: (!args.no_cache).then(|| Cache::new(&args.cache_dir)),
        env_role: std::env::var(ROLE_ENV).ok(),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    match app::run(&input, &options, now, &AwsTokenSource, &mut log) {
        Ok(response) => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(&response.to_json())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    log.error(format!("writing the response to stdout: {err}"));
                    ExitCode::FAILURE
                }
            }
        }
        Err(err) => {
            log.error(format!("{err} [{}]", err.category()));
            ExitCode::FAILURE
        }
    }
}
