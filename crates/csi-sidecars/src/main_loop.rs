//! What both sidecar binaries do around their app: report bad flags (exit 2), warn about
//! deprecated ones, run the app on a current-thread runtime until SIGTERM (exit 0) or a failure
//! (logged, exit 1).

use std::future::Future;
use std::process::ExitCode;

/// Runs `app` with the parsed `config` (or reports its problems) and the process's shutdown
/// signal; `deprecations` are logged as warnings first.
pub fn run<C, F, Fut>(config: Result<C, String>, deprecations: &[&str], app: F) -> ExitCode
where
    F: FnOnce(C, std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let config = match config {
        Ok(config) => config,
        Err(problems) => {
            eprintln!("error: invalid flags:\n{problems}");
            return ExitCode::from(2);
        }
    };
    for warning in deprecations {
        tracing::warn!("{warning}");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: building the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(app(config, Box::pin(stratus_runtime::shutdown::signal()))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
