//! `testenv`: installs the tools and starts/stops a detached Stratus test environment.

fn main() -> std::process::ExitCode {
    stratus_testenv::cli::main()
}
